// Leader election (election(name)) in the build under test, on the test kit's store and
// clock: who leads, takeover after a resign and after a loss, terms that grow, run()'s
// loop, refusals. Real stores and killed processes: election-stores.test.mjs.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ELECTION_KEY_PREFIX, MAX_ELECTION_NAME_BYTES } from "../js/api/defaults.mjs";
import { TestStore } from "../js/testing.mjs";
import { ENTRY, runModule } from "./support/child.mjs";
import { mapStore } from "./support/js-stores.mjs";
import { failOnUnhandledRejections, ls, uniqueKey } from "./support/target.mjs";

const {
  election,
  lock,
  Election,
  Leadership,
  MemoryLockStore,
  InvalidArgumentError,
  UnsupportedError,
  AbortError,
  LockNotHeldError,
  LockStoreError,
  StoreUnavailableError,
  StoreContractViolationError,
} = ls;

await failOnUnhandledRejections();

/** Whether `promise` has settled, after the turns the clock's advance() gives. */
async function settled(promise, clock) {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await clock.advance(0);
  return done;
}

describe("election()", () => {
  it("one campaign leads; a second waits and takes over at the resign, with a larger term", async () => {
    const store = new TestStore();
    const name = uniqueKey("leads");
    const first = await election(name, { store }).campaign();
    assert.ok(first instanceof Leadership);
    assert.equal(typeof first.term, "number");
    assert.equal(first.signal.aborted, false);
    assert.equal(first.isLeader, true);

    const second = election(name, { store }).campaign();
    await store.clock.advance("1m");
    assert.equal(await settled(second, store.clock), false, "a standby while the first leads");

    assert.equal(await first.resign(), true);
    assert.equal(first.signal.aborted, true);
    assert.equal(first.isLeader, false);
    await store.clock.advance("100ms");
    const next = await second;
    assert.ok(next.term > first.term, `terms grow: ${first.term} then ${next.term}`);
    assert.equal(await first.resign(), false, "a second resign finds nothing");
    await next.resign();
    await store.assertNothingHeld();
  });

  it("a leader that cannot extend loses its leadership at its deadline; a standby takes over after the TTL", async () => {
    const store = new TestStore();
    const name = uniqueKey("loss");
    const leader = await election(name, { store, ttl: "10s" }).campaign();
    const standby = election(name, { store, ttl: "10s" }).campaign();
    // An outage for the leader: its extends fail, so it stops believing before its TTL.
    store.failFor("12s");
    await store.clock.advance("9900ms");
    assert.equal(leader.signal.aborted, true, "the leadership signal aborted before the TTL passed");
    await store.clock.advance("5s");
    const next = await standby;
    assert.ok(next.term > leader.term);
    await next.resign();
    await leader.resign();
    await store.assertNothingHeld();
  });

  it("endLeadership(): the test kit ends a leader's hold as a failover would; the leader finds out, a standby takes over", async () => {
    const store = new TestStore();
    const name = uniqueKey("ended");
    const leader = await election(name, { store, ttl: "10s" }).campaign();
    const standby = election(name, { store, ttl: "10s" }).campaign();
    assert.equal(await store.endLeadership(name), true);
    const next = await standby;
    assert.ok(next.term > leader.term);
    await store.clock.advance("10s");
    assert.equal(leader.signal.aborted, true, "the deposed leader found out at its next extend");
    assert.equal(await leader.resign(), false);
    await next.resign();
    assert.equal(await store.endLeadership(name), false, "no leader to end");
    await store.assertNothingHeld();
  });

  it("a campaign whose acquire is applied after the caller gave up on it leaves no leader that nobody is", async () => {
    const store = new TestStore({ operationTimeoutMs: 2_000 });
    const name = uniqueKey("late-grant");
    // The first acquire reaches the store 3 s late: after the 2 s the caller waits for it.
    // The campaign's next tries fail until 4 s, so the late one is granted first.
    store.delay("3s", { count: 1, calls: ["acquire"] });
    const campaigning = election(name, { store, ttl: "10s" }).campaign();
    await store.clock.advance("2100ms");
    store.failFor("2s", { calls: ["acquire"] });
    await store.clock.advance("10s");
    const leadership = await campaigning;
    await leadership.resign();
    await store.clock.advance("1s");
    await store.assertNothingHeld();
  });

  it("run(): a standby's wait rides out an outage, and it leads once the leader resigns", async () => {
    const store = new TestStore();
    const name = uniqueKey("outage");
    const leader = await election(name, { store }).campaign();
    const controller = new AbortController();
    const terms = [];
    const running = election(name, { store }).run(
      (signal, { term }) => {
        terms.push(term);
        return new Promise((resolve) => signal.addEventListener("abort", resolve));
      },
      { signal: controller.signal },
    );
    await store.clock.advance("1s");
    store.failFor("5s", { calls: ["acquire"] });
    await store.clock.advance("2s");
    await leader.resign();
    await store.clock.advance("5s");
    assert.equal(terms.length, 1, "the standby leads after the outage");
    assert.ok(terms[0] > leader.term);
    controller.abort();
    await store.clock.advance("1s");
    await running;
    await store.assertNothingHeld();
  });

  it("keeps leading past its TTL while it can extend", async () => {
    const store = new TestStore();
    const leader = await election(uniqueKey("keeps"), { store, ttl: "5s" }).campaign();
    await store.clock.advance("1h");
    assert.equal(leader.signal.aborted, false);
    assert.equal(await leader.resign(), true);
  });

  it("lives apart from lock names: lock(x) and election(x) never block each other", async () => {
    const store = new TestStore();
    const name = uniqueKey("apart");
    const l = lock(name, "30s", store);
    assert.equal(await l.acquire(), true);
    const leader = await election(name, { store }).campaign();
    assert.equal(await lock(name, "30s", store).acquire(), false, "the lock is still held by its own holder");
    await leader.resign();
    await l.release();
    await store.assertNothingHeld();
  });

  it("campaign({ signal }): an abort ends the wait with an AbortError and leaves nothing held", async () => {
    const store = new TestStore();
    const name = uniqueKey("abort");
    const leader = await election(name, { store }).campaign();
    const controller = new AbortController();
    const waiting = election(name, { store }).campaign({ signal: controller.signal });
    await store.clock.advance("1s");
    controller.abort();
    await assert.rejects(waiting, (err) => err instanceof AbortError || err.name === "AbortError");
    await leader.resign();
    await store.assertNothingHeld();
  });

  it("run(): leads, resigns when fn settles, campaigns again after the retry delay, until the signal aborts", async () => {
    const store = new TestStore();
    const e = election(uniqueKey("run"), { store, retryDelay: "1s" });
    const controller = new AbortController();
    const terms = [];
    const running = e.run(
      async (leadership, { term }) => {
        assert.equal(leadership.aborted, false);
        terms.push(term);
        await store.clock.sleep("5s");
      },
      { signal: controller.signal },
    );
    await store.clock.advance("5500ms");
    assert.equal(terms.length, 1);
    await store.clock.advance("1s");
    assert.equal(terms.length, 2, "a new term after the retry delay");
    assert.ok(terms[1] > terms[0]);
    controller.abort();
    await store.clock.advance("10s");
    await running;
    await store.assertNothingHeld();
  });

  it("run(): fn gets the Leadership beside its term; a signal aborted as the campaign wins runs no term", async () => {
    const store = new TestStore();
    const controller = new AbortController();
    let seen;
    const running = election(uniqueKey("info"), { store }).run(
      async (signal, { term, leadership }) => {
        seen = { term, same: leadership.term === term, leads: leadership.isLeader, aborted: signal.aborted };
        controller.abort();
      },
      { signal: controller.signal },
    );
    await store.clock.advance("1s");
    await running;
    assert.deepEqual({ ...seen, term: typeof seen.term }, { term: "number", same: true, leads: true, aborted: false });

    // The memory store grants at once: the campaign has won by the time abort() runs.
    let calls = 0;
    const stopped = new AbortController();
    const late = election(uniqueKey("late"), { store: new MemoryLockStore() }).run(() => calls++, { signal: stopped.signal });
    stopped.abort();
    await late;
    assert.equal(calls, 0, "no term once the signal had aborted");
    const leadership = await election(uniqueKey("null-signal"), { store }).campaign({ signal: null });
    await leadership.resign();
    await store.assertNothingHeld();
  });

  it("run(): an abort while leading aborts fn's signal; run resolves once fn has settled", async () => {
    const store = new TestStore();
    const controller = new AbortController();
    let seen;
    const running = election(uniqueKey("run-abort"), { store }).run(
      (leadership) =>
        new Promise((resolve) => {
          leadership.addEventListener("abort", () => {
            seen = leadership.aborted;
            resolve();
          });
        }),
      { signal: controller.signal },
    );
    await store.clock.advance("1s");
    controller.abort();
    await store.clock.advance("1s");
    await running;
    assert.equal(seen, true);
    await store.assertNothingHeld();
  });

  it("run(): fn's rejection resigns and rejects run with it; a standby takes over", async () => {
    const store = new TestStore();
    const name = uniqueKey("run-throws");
    const running = election(name, { store }).run(async () => {
      await store.clock.sleep("1s");
      throw new Error("job failed");
    });
    const rejected = assert.rejects(running, /job failed/);
    const standby = election(name, { store }).campaign();
    await store.clock.advance("2s");
    await rejected;
    const next = await standby;
    await next.resign();
    await store.assertNothingHeld();
  });

  it("run(): a leadership lost mid-term aborts fn's signal, and run campaigns again", async () => {
    const store = new TestStore();
    const e = election(uniqueKey("run-lost"), { store, ttl: "10s" });
    const controller = new AbortController();
    const signals = [];
    const running = e.run(
      (leadership) => {
        signals.push(leadership);
        return new Promise((resolve) => leadership.addEventListener("abort", resolve));
      },
      { signal: controller.signal },
    );
    await store.clock.advance("1s");
    store.failFor("11s");
    await store.clock.advance("30s");
    assert.equal(signals[0].aborted, true, "the lost term's signal aborted");
    assert.equal(signals.length, 2, "a new term once the store answered again");
    assert.equal(signals[1].aborted, false);
    controller.abort();
    await store.clock.advance("1s");
    await running;
    await store.assertNothingHeld();
  });

  it("refuses a store without fencing tokens, with UNSUPPORTED, holding nothing", async () => {
    const store = mapStore();
    const e = election(uniqueKey("no-tokens"), { store });
    await assert.rejects(e.campaign(), (err) => err instanceof UnsupportedError && err.code === "UNSUPPORTED" && /fencing tokens/.test(err.message));
    assert.equal(await store.isLocked(`${ELECTION_KEY_PREFIX}${e.name}`), false);
  });

  it("keeps its leader on the key ELECTION_KEY_PREFIX + name, which the CLI reads (the build and the JS constant agree)", async () => {
    const store = mapStore({ withFencing: true });
    const name = uniqueKey("key");
    const leadership = await election(name, { store }).campaign();
    assert.equal(await store.isLocked(`${ELECTION_KEY_PREFIX}${name}`), true);
    assert.equal(await store.isLocked(name), false);
    await leadership.resign();
    assert.equal(await store.isLocked(`${ELECTION_KEY_PREFIX}${name}`), false);
  });

  it("refuses bad input with typed errors", async () => {
    const store = new TestStore();
    const bad = [
      () => election("", { store }),
      () => election(42, { store }),
      () => election("a\nb", { store }),
      () => election("x".repeat(MAX_ELECTION_NAME_BYTES + 1), { store }),
      () => election("x", { store, tll: "10s" }),
      () => election("x", { store, retryDelay: -1 }),
      () => election("x", { store, ttl: "soon" }),
      () => election("x", "10s"),
    ];
    for (const make of bad) {
      assert.throws(
        make,
        (err) => err instanceof InvalidArgumentError && err.code === "INVALID_ARGUMENT" && err.message.startsWith("locksmith:"),
        String(make),
      );
    }
    const e = election(uniqueKey("bad"), { store });
    assert.ok(e instanceof Election);
    await assert.rejects(e.run("not a function"), InvalidArgumentError);
    await assert.rejects(e.campaign({ signal: "no" }), InvalidArgumentError);
    await assert.rejects(e.campaign({ timeout: 5 }), InvalidArgumentError);
    // The JS constant (the CLI's) is the build's limit.
    election("x".repeat(MAX_ELECTION_NAME_BYTES), { store });
    assert.throws(() => election("x", { store, retryDelay: 0 }), /retryDelay must be above 0 and at most 2147483647/);
    assert.throws(() => election("x", { store, retryDelay: 1e12 }), /retryDelay must be above 0/);
    assert.throws(
      () => election("x", { store, ttl: "soon" }),
      (err) => /^locksmith: ttl must be/.test(err.message),
    );
    assert.throws(
      () => new Leadership(),
      (err) => /comes from an election's campaign/.test(err.message),
    );
    // Core's words name the election's name, not a key.
    assert.throws(
      () => election("", { store }),
      (err) => /^locksmith: an election's name must be a non-empty string/.test(err.message),
    );
    assert.throws(
      () => election("a\u0001b", { store }),
      (err) => /^locksmith: an election's name must not contain control characters/.test(err.message),
    );
    assert.throws(() => election("x", "10s"), /write \{ ttl: "10s" \}/);
    // An AbortSignal where the options go would be no options at all: refused.
    await assert.rejects(
      e.run(() => {}, AbortSignal.timeout(10)),
      (err) => err.code === "INVALID_ARGUMENT" && /got an AbortSignal: write \{ signal \}/.test(err.message),
    );
    await assert.rejects(e.campaign(new AbortController().signal), /write \{ signal \}/);
    await assert.rejects(
      lock(uniqueKey("signal"), "1s", store).run(() => {}, AbortSignal.timeout(10)),
      /got an AbortSignal: write \{ signal \}/,
    );
    await assert.rejects(lock(uniqueKey("signal"), "1s", store).acquire(new AbortController().signal), /write \{ signal \}/);
  });

  it("resign() of a leadership already lost resolves false while the store is down; of a live one it rejects", async () => {
    const store = new TestStore();
    const name = uniqueKey("resign-down");
    const leader = await election(name, { store, ttl: "10s" }).campaign();
    store.failFor("1m");
    await store.clock.advance("15s");
    assert.equal(leader.signal.aborted, true);
    assert.equal(await leader.resign(), false);
    await store.clock.advance("1m");
    const other = await election(uniqueKey("resign-live"), { store, ttl: "10s" }).campaign();
    store.failNext(1, { calls: ["release"] });
    await assert.rejects(other.resign(), (err) => err.code === "STORE_UNAVAILABLE");
    assert.equal(await other.resign(), true, "a resign that failed (not applied) can be tried again");
  });

  it("leader(): the term and value of whoever leads, when it won; null when nobody does", async () => {
    const store = new TestStore();
    const name = uniqueKey("leader");
    const e = election(name, { store });
    assert.equal(await e.leader(), null);
    const won = store.clock.unixTimeMs();
    const leadership = await e.campaign({ value: { host: "a", port: 8080 } });
    assert.deepEqual(leadership.value, { host: "a", port: 8080 });
    const seen = await election(name, { store }).leader();
    assert.equal(seen.term, leadership.term);
    assert.deepEqual(seen.value, { host: "a", port: 8080 });
    assert.ok(seen.since instanceof Date && seen.since.getTime() === won, `since ${seen.since?.toISOString()}`);
    // Without a value: null, and still the time of the win.
    await leadership.resign();
    assert.equal(await e.leader(), null);
    const plain = await e.campaign();
    const next = await e.leader();
    assert.equal(next.term, plain.term);
    assert.equal(next.value, null);
    assert.ok(next.since instanceof Date);
    await plain.resign();
    await store.assertNothingHeld();
  });

  it("proclaim(): a new value in the same term; refused once the leadership is lost", async () => {
    const store = new TestStore();
    const name = uniqueKey("proclaim");
    const e = election(name, { store, ttl: "10s" });
    const leadership = await e.campaign({ value: "v1" });
    await leadership.proclaim({ step: 2 });
    assert.deepEqual(leadership.value, { step: 2 });
    const seen = await e.leader();
    assert.deepEqual(seen.value, { step: 2 });
    assert.equal(seen.term, leadership.term, "the same term");
    await leadership.proclaim(null);
    assert.equal((await e.leader()).value, null);
    // Lost (the store ended it as a failover would): the next proclaim says so.
    await store.endLeadership(name);
    await assert.rejects(
      leadership.proclaim("v3"),
      (err) => err instanceof LockNotHeldError && err.code === "LOCK_NOT_HELD" && /^locksmith:/.test(err.message),
    );
    assert.equal(await e.leader(), null);
    await assert.rejects(leadership.proclaim("v4"), LockNotHeldError);
    await leadership.resign();
  });

  it("observe(): the leader now, then each change of leader or value, until the signal aborts", async () => {
    const store = new TestStore();
    const name = uniqueKey("observe");
    const e = election(name, { store, ttl: "10s" });
    const controller = new AbortController();
    const seen = [];
    const observing = (async () => {
      for await (const leader of e.observe({ signal: controller.signal, interval: "100ms" })) seen.push(leader && { term: leader.term, value: leader.value });
    })();
    await store.clock.advance("250ms");
    assert.deepEqual(seen, [null], "no leader yet");
    const a = await election(name, { store, ttl: "10s" }).campaign({ value: "a" });
    await store.clock.advance("250ms");
    await a.proclaim("a2");
    await store.clock.advance("250ms");
    await a.resign();
    await store.clock.advance("250ms");
    const b = await election(name, { store, ttl: "10s" }).campaign({ value: "b" });
    await store.clock.advance("250ms");
    // Nothing changes: nothing new is yielded.
    await store.clock.advance("5s");
    controller.abort();
    await store.clock.advance("100ms");
    await observing;
    assert.deepEqual(seen, [null, { term: a.term, value: "a" }, { term: a.term, value: "a2" }, null, { term: b.term, value: "b" }]);
    assert.ok(b.term > a.term);
    await b.resign();
    // A loop that stops reading ends it too.
    for await (const leader of e.observe()) {
      assert.equal(leader, null);
      break;
    }
    await store.assertNothingHeld();
  });

  it("observe() rides out a store outage and reads on after it", async () => {
    const store = new TestStore();
    const name = uniqueKey("observe-outage");
    const e = election(name, { store, ttl: "10s" });
    const controller = new AbortController();
    const seen = [];
    const observing = (async () => {
      for await (const leader of e.observe({ signal: controller.signal })) seen.push(leader?.value ?? null);
    })();
    await store.clock.advance("100ms");
    const a = await election(name, { store, ttl: "10s" }).campaign({ value: "a" });
    store.failFor("2s", { calls: ["holder"] });
    await store.clock.advance("1s");
    assert.deepEqual(seen, [null]);
    await store.clock.advance("1500ms");
    assert.deepEqual(seen, [null, "a"]);
    controller.abort();
    await store.clock.advance("100ms");
    await observing;
    await a.resign();
  });

  it("run({ value }) proclaims it for each term", async () => {
    const store = new TestStore();
    const name = uniqueKey("run-value");
    const controller = new AbortController();
    const values = [];
    const running = election(name, { store }).run(
      async () => {
        values.push((await election(name, { store }).leader())?.value);
        controller.abort();
      },
      { signal: controller.signal, value: { role: "cron" } },
    );
    await store.clock.advance("1s");
    await running;
    assert.deepEqual(values, [{ role: "cron" }]);
    await store.assertNothingHeld();
  });

  it("refuses a value that is not small JSON, and a store without holder()/proclaim() for what needs them", async () => {
    const store = new TestStore();
    const e = election(uniqueKey("values"), { store });
    for (const value of [() => {}, 10n, Symbol("s"), "x".repeat(4_100), { deep: "é".repeat(2_100) }]) {
      await assert.rejects(
        e.campaign({ value }),
        (err) => err instanceof InvalidArgumentError && /^locksmith: value must be/.test(err.message),
        String(typeof value),
      );
    }
    const cyclic = {};
    cyclic.self = cyclic;
    await assert.rejects(e.campaign({ value: cyclic }), /value must be a JSON value/);
    await assert.rejects(
      e.run(() => {}, { value: 10n }),
      InvalidArgumentError,
    );
    // observe() checks its options when it is called, not at the first next().
    assert.throws(() => e.observe({ interval: 0 }), /interval must be above 0/);
    assert.throws(() => e.observe({ every: "1s" }), InvalidArgumentError);
    await store.assertNothingHeld();

    // A store of one's own without the optional pair: campaign() and run() work, the rest says why not.
    const plain = mapStore({ withFencing: true });
    const p = election(uniqueKey("plain"), { store: plain });
    await assert.rejects(p.leader(), (err) => err instanceof UnsupportedError && /holder method/.test(err.message));
    assert.throws(() => p.observe(), UnsupportedError);
    await assert.rejects(p.campaign({ value: 1 }), (err) => err instanceof UnsupportedError && /proclaim and holder methods/.test(err.message));
    const leadership = await p.campaign();
    assert.equal(leadership.value, null);
    await assert.rejects(leadership.proclaim(2), UnsupportedError);
    await leadership.resign();
    assert.equal(await plain.isLocked(`${ELECTION_KEY_PREFIX}${p.name}`), false, "nothing left held");
  });

  it("a win whose value cannot be kept is given back, and the campaign goes on", async () => {
    const store = new TestStore();
    const name = uniqueKey("unkept");
    store.failNext(1, { calls: ["proclaim"] });
    const campaign = election(name, { store }).campaign({ value: "v" });
    await store.clock.advance("1s");
    const leadership = await campaign;
    const seen = await election(name, { store }).leader();
    assert.equal(seen.term, leadership.term);
    assert.equal(seen.value, "v");
    assert.ok(seen.since instanceof Date);
    await leadership.resign();
    // The first win was given back, not left held: nothing remains.
    await store.assertNothingHeld();
  });

  it("without a value, a win stands when the store cannot keep its record (an older table): said once", async () => {
    const store = mapStore({ withFencing: true, withHolder: true });
    store.proclaim = async () => {
      throw new LockStoreError('locksmith: PostgreSQL: the table "locks" has no value, value_token, value_seq columns');
    };
    const warnings = [];
    const onWarning = (w) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      const e = election(uniqueKey("old-table"), { store });
      const leadership = await e.campaign();
      assert.equal(leadership.isLeader, true);
      const seen = await e.leader();
      assert.deepEqual([seen.term, seen.value, seen.since], [leadership.term, null, null]);
      await leadership.resign();
      // A value asked for is refused with the store's words, nothing held.
      await assert.rejects(e.campaign({ value: 1 }), (err) => err instanceof LockStoreError && /no value, value_token/.test(err.message));
      assert.equal(await store.isLocked(`${ELECTION_KEY_PREFIX}${e.name}`), false);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    assert.ok(
      warnings.some((w) => w.code === "LOCKSMITH_ELECTION_UNRECORDED" && /no value, value_token/.test(w.message)),
      warnings.map((w) => w.code).join(", "),
    );
  });

  it("a store that does not answer: a value's proclaim gives up at operationTimeoutMs and the campaign goes on; an abort ends it with nothing held", async () => {
    const store = mapStore({ withFencing: true, withHolder: true });
    store.operationTimeoutMs = 100;
    const proclaim = store.proclaim;
    let hang = 2;
    store.proclaim = (...args) => (hang-- > 0 ? new Promise(() => {}) : proclaim(...args));
    const e = election(uniqueKey("silent"), { store, retryDelay: 10 });
    const started = performance.now();
    const leadership = await e.campaign({ value: "v" });
    assert.ok(performance.now() - started >= 190, "two proclaims given up on at 100 ms each");
    assert.equal((await e.leader()).value, "v");
    await leadership.resign();

    hang = Infinity;
    const controller = new AbortController();
    const campaign = e.campaign({ value: "w", signal: controller.signal });
    let abortedAt;
    setTimeout(() => {
      abortedAt = performance.now();
      controller.abort();
    }, 30);
    await assert.rejects(campaign, (err) => err instanceof AbortError && err.code === "ABORTED");
    // At the abort, not at the proclaim's timeout (100 ms).
    assert.ok(performance.now() - abortedAt < 60, `ended ${Math.round(performance.now() - abortedAt)} ms after the abort`);
    assert.equal(await store.isLocked(`${ELECTION_KEY_PREFIX}${e.name}`), false, "the win that raced the abort was given back");
  });

  it("a holder() that rejects with a plain error is an outage: leader() says STORE_UNAVAILABLE, observe() rides it out", async () => {
    const store = mapStore({ withFencing: true, withHolder: true });
    const holder = store.holder;
    let failures = 3;
    store.holder = (...args) => (failures-- > 0 ? Promise.reject(new Error("Network connection lost.")) : holder(...args));
    const e = election(uniqueKey("blip"), { store });
    await assert.rejects(
      e.leader(),
      (err) =>
        err instanceof StoreUnavailableError &&
        /^locksmith: store\.holder\(\) failed: Network connection lost\./.test(err.message) &&
        err.cause?.message === "Network connection lost.",
    );
    const leadership = await e.campaign({ value: "v" });
    const controller = new AbortController();
    for await (const leader of e.observe({ signal: controller.signal, interval: "5ms" })) {
      assert.equal(leader.value, "v");
      controller.abort();
    }
    await leadership.resign();
    // A holder() answer that breaks the contract says so.
    store.holder = async () => ({ owner: "x", fencingToken: 0, remainingMs: 1, value: null });
    await assert.rejects(e.leader(), StoreContractViolationError);
  });

  it("observe(): terms never go back, also across a read of no leader; an abort during a read ends it", async () => {
    const answers = [5, null, 4, 6];
    const store = mapStore({ withFencing: true });
    let reads = 0;
    store.holder = async () => {
      const term = answers[Math.min(reads++, answers.length - 1)];
      return term === null ? null : { owner: "o", fencingToken: term, remainingMs: 1_000, value: null };
    };
    const e = election(uniqueKey("back"), { store });
    const controller = new AbortController();
    const seen = [];
    for await (const leader of e.observe({ signal: controller.signal, interval: "1ms" })) {
      seen.push(leader?.term ?? null);
      if (seen.length === 3) controller.abort();
    }
    assert.deepEqual(seen, [5, null, 6]);
    // A read that never answers: the abort ends the loop at once.
    store.holder = () => new Promise(() => {});
    const stop = new AbortController();
    const iterator = e.observe({ signal: stop.signal });
    const next = iterator.next();
    setTimeout(() => stop.abort(), 20);
    assert.deepEqual(await next, { value: undefined, done: true });
  });

  it("observe(): an older term read for longer than a lease is a leader all the same (tokens that went back)", async () => {
    const store = mapStore({ withFencing: true });
    let term = 5;
    store.holder = async () => ({ owner: "o", fencingToken: term, remainingMs: 1_000, value: null });
    const e = election(uniqueKey("went-back"), { store, ttl: "100ms" });
    const controller = new AbortController();
    const seen = [];
    const started = performance.now();
    setTimeout(() => (term = 3), 30);
    for await (const leader of e.observe({ signal: controller.signal, interval: "5ms" })) {
      seen.push([leader.term, Math.round(performance.now() - started)]);
      if (seen.length === 2) controller.abort();
    }
    assert.deepEqual(
      seen.map(([t]) => t),
      [5, 3],
    );
    assert.ok(seen[1][1] >= 130, `shown once read for a lease (100 ms) after it appeared at 30 ms: ${seen[1][1]} ms`);
  });

  it("leader() and observe() on a store without fencing tokens: UNSUPPORTED, as campaign() is", async () => {
    const store = mapStore({ withHolder: true });
    await store.acquire(`${ELECTION_KEY_PREFIX}plain`, "someone", 10_000);
    await assert.rejects(election("plain", { store }).leader(), (err) => err instanceof UnsupportedError && /fencing tokens/.test(err.message));
    await assert.rejects(election("plain", { store }).observe().next(), (err) => err instanceof UnsupportedError && /fencing tokens/.test(err.message));
  });

  it("run(): a leader whose fn only waits for its signal keeps the process up until run()'s signal aborts", async () => {
    // AbortSignal.timeout() keeps nothing alive: without run() doing so, the process would
    // end at once, leader and all, leaving its lease to run out (exit 13 for the top-level await).
    const { code, stdout, stderr } = await runModule(`
      const { election, MemoryLockStore } = await import(${JSON.stringify(ENTRY)});
      const stop = AbortSignal.timeout(300);
      await election("up", { store: new MemoryLockStore() }).run(
        (signal) => new Promise((resolve) => signal.addEventListener("abort", resolve)),
        { signal: stop },
      );
      console.log("led until told to stop");
    `);
    assert.equal(code, 0, stderr);
    assert.equal(stdout.trim(), "led until told to stop");
  });

  it("proclaims in flight go out one at a time: the Leadership's value is the one the store keeps", async () => {
    const store = new TestStore();
    const name = uniqueKey("in-flight");
    const leadership = await election(name, { store }).campaign({ value: "A" });
    store.delay("50ms", { count: 1, calls: ["proclaim"] });
    const b = leadership.proclaim("B");
    const c = leadership.proclaim("C");
    await store.clock.advance("100ms");
    await Promise.all([b, c]);
    assert.equal(leadership.value, "C");
    assert.equal((await election(name, { store }).leader()).value, "C");
    await leadership.resign();
  });
});
