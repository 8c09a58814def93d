// locksmith-js/testing: the virtual clock, the TestStore's controls and faults, and
// withFaults() over a JS store, in the build under test (LOCKSMITH_TARGET). No test here
// sleeps: time is the TestClock's.
import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import { setTimeout as realSleep } from "node:timers/promises";
import { TestClock, TestStore, withFaults } from "../js/testing.mjs";
import { TARGET, failOnUnhandledRejections, ls, watch as watchOutcome } from "./support/target.mjs";
import { mapStore } from "./support/js-stores.mjs";
import { ENTRY, runModule } from "./support/child.mjs";

failOnUnhandledRejections();

/** What a promise has come to so far: "pending", its value, or its error's code. */
const watch = (promise) => watchOutcome(promise, (err) => err?.code ?? err);

describe("TestClock", () => {
  it("runs what falls due in order, and stops at the time asked", async () => {
    const clock = new TestClock();
    const seen = [];
    for (const ms of [300, 100, 200, 100]) clock.sleep(ms).then(() => seen.push([ms, clock.now()]));
    await clock.advance(150);
    assert.deepEqual(seen, [
      [100, 100],
      [100, 100],
    ]);
    assert.equal(clock.now(), 150);
    await clock.advance("1s");
    assert.deepEqual(seen.slice(2), [
      [200, 200],
      [300, 300],
    ]);
    assert.equal(clock.now(), 1150);
  });

  it("runs what a sleep's wake-up starts on the way, in the same advance()", async () => {
    const clock = new TestClock();
    const seen = [];
    (async () => {
      for (let i = 0; i < 5; i++) {
        await clock.sleep(100);
        seen.push(clock.now());
      }
    })();
    await clock.advance(450);
    assert.deepEqual(seen, [100, 200, 300, 400]);
  });

  it("refuses bad input with typed errors", async () => {
    const clock = new TestClock();
    await assert.rejects(clock.advance(-1), { code: "INVALID_ARGUMENT", message: /^locksmith: / });
    await assert.rejects(clock.advance("soon"), { code: "INVALID_ARGUMENT" });
    await assert.rejects(clock.advance(), { code: "INVALID_ARGUMENT" });
    assert.throws(() => new TestClock({ start: 0 }), { code: "INVALID_ARGUMENT", message: /unknown TestClock option "start"/ });
    const first = clock.advance(10);
    await assert.rejects(clock.advance(10), { code: "INVALID_ARGUMENT", message: /already running/ });
    await first;
  });

  it("does not use the global timers: faked or broken, they change nothing", async () => {
    const saved = { setTimeout: globalThis.setTimeout, setImmediate: globalThis.setImmediate, queueMicrotask: globalThis.queueMicrotask };
    const store = new TestStore();
    await store.clock.advance(0);
    const stuck = () => {
      throw new Error("a global timer was used");
    };
    Object.assign(globalThis, { setTimeout: stuck, setImmediate: stuck, queueMicrotask: stuck });
    try {
      const holder = ls.lock("k", "30s", store);
      assert.equal(await holder.acquire(), true);
      const waiter = watch(ls.lock("k", "30s", store).acquire({ timeout: "5s" }));
      await store.clock.advance("4999ms");
      assert.equal(waiter.now, "pending");
      await store.clock.advance(1);
      assert.equal(waiter.now, false);
      await holder.release();
    } finally {
      Object.assign(globalThis, saved);
    }
  });
});

describe("TestStore", () => {
  it("expires a hold at its TTL, and its signal says so", async () => {
    const store = new TestStore();
    const l = ls.lock("job", "30s", store);
    await l.acquire();
    await store.clock.advance("29s");
    assert.equal(l.signal.aborted, false);
    assert.equal(await store.isLocked("job"), true);
    await store.clock.advance("1s");
    assert.equal(await store.isLocked("job"), false);
    assert.equal(l.signal.aborted, true);
    assert.equal(l.signal.reason.code, "LOCK_NOT_HELD");
  });

  it("keeps an autoExtend hold through an hour, with one fencing token", async () => {
    const store = new TestStore();
    const l = ls.lock("job", "10s", store);
    await l.acquire({ autoExtend: true });
    const token = l.fencingToken;
    await store.clock.advance("1h");
    assert.equal(l.signal.aborted, false);
    assert.equal(l.fencingToken, token);
    assert.ok((await store.remainingTime("job")) > 0);
    await l.release();
    await store.assertNothingHeld();
  });

  it("endHold(): the holder finds out at its next extend", async () => {
    const store = new TestStore();
    const l = ls.lock("job", "10s", store);
    await l.acquire({ autoExtend: true });
    assert.equal(await store.endHold("job"), true);
    assert.equal(await store.endHold("job"), false);
    await store.clock.advance("10s");
    assert.equal(l.signal.aborted, true);
    assert.equal(l.signal.reason.code, "LOCK_NOT_HELD");
  });

  it("takeKey(): another owner holds the key with a larger token", async () => {
    const store = new TestStore();
    const l = ls.lock("job", "10s", store);
    await l.acquire({ autoExtend: true });
    const token = await store.takeKey("job", { owner: "worker-2", ttl: "1m" });
    assert.ok(token > l.fencingToken);
    await store.clock.advance("10s");
    assert.equal(l.signal.aborted, true);
    assert.equal(await store.isHeldBy("job", "worker-2"), true);
    await assert.rejects(store.takeKey("job", { ttl: "1m", owner: "x", extra: 1 }), { code: "INVALID_ARGUMENT", message: /unknown option `extra`/ });
  });

  it("a wait gives up at its timeout to the millisecond, and gets in when the key frees first", async () => {
    const store = new TestStore();
    const holder = ls.lock("k", "30s", store);
    await holder.acquire();
    const gaveUp = watch(ls.lock("k", "30s", store).acquire({ timeout: "5s" }));
    await store.clock.advance("4999ms");
    assert.equal(gaveUp.now, "pending");
    await store.clock.advance(1);
    assert.equal(gaveUp.now, false);
    const waiter = ls.lock("k", "30s", store);
    const got = watch(waiter.acquire({ timeout: "10s" }));
    await store.clock.advance("1s");
    await holder.release();
    // A release wakes the waiter (onRelease): no retry delay needed.
    await store.clock.advance(0);
    assert.equal(got.now, true);
    await waiter.release();
  });

  it("failFor(): a wait rides out an outage; failNext(): a lone acquire fails with STORE_UNAVAILABLE", async () => {
    const store = new TestStore();
    store.failFor("2s");
    const l = ls.lock("k", "30s", store);
    const got = watch(l.acquire({ timeout: "10s" }));
    await store.clock.advance("1s");
    assert.equal(got.now, "pending");
    await store.clock.advance("2s");
    assert.equal(got.now, true);
    await l.release();
    store.failNext(1, { calls: ["acquire"] });
    await assert.rejects(ls.lock("k", "30s", store).acquire(), { code: "STORE_UNAVAILABLE", message: /a fault the test injected/ });
    assert.equal(await ls.lock("k", "30s", store).acquire(), true);
  });

  it("loseAnswers(): an acquire applied but unanswered is freed once it fails, and nothing is left held", async () => {
    const store = new TestStore({ operationTimeoutMs: 2_000 });
    store.loseAnswers(1, { calls: ["acquire"] });
    const l = ls.lock("k", "30s", store);
    const got = watch(l.acquire({ timeout: "10s" }));
    await store.clock.advance("1s");
    // The attempt was applied: the key is held, by an owner token nobody will use again.
    assert.equal(await store.isLocked("k"), true);
    assert.equal(got.now, "pending");
    await store.clock.advance("2s");
    // Its answer never came: locksmith released that attempt and took the key anew.
    assert.equal(got.now, true);
    assert.equal(l.fencingToken, 2);
    await l.release();
    await store.assertNothingHeld();
  });

  it("loseAnswers() on a lone acquire: STORE_UNAVAILABLE with holdMayRemain, and the hold is freed", async () => {
    const store = new TestStore({ operationTimeoutMs: 2_000 });
    store.loseAnswers();
    const failed = watch(
      ls
        .lock("k", "30s", store)
        .acquire()
        .catch((err) => Promise.reject({ code: `${err.code} ${err.holdMayRemain}` })),
    );
    await store.clock.advance("2s");
    assert.equal(failed.now, "STORE_UNAVAILABLE true");
    await store.clock.advance("1s");
    await store.assertNothingHeld();
  });

  it("delay(): an extend that reaches the store after the TTL finds the hold gone", async () => {
    const store = new TestStore();
    const l = ls.lock("k", "3s", store);
    await l.acquire();
    store.delay("5s", { calls: ["extend"], count: 1 });
    const extended = watch(l.extend());
    await store.clock.advance("5s");
    assert.equal(extended.now, "LOCK_NOT_HELD");
    assert.equal(l.signal.aborted, true);
  });

  it("assertNothingHeld() names what a test left held", async () => {
    const store = new TestStore();
    await ls.lock("left", "30s", store).acquire();
    await ls.semaphore("pool", 3, "30s", store).acquire();
    await assert.rejects(store.assertNothingHeld(), (err) => {
      assert.equal(err.code, "HOLDS_REMAIN");
      assert.ok(err instanceof ls.LockError);
      assert.deepEqual(err.held, [
        { key: "left", kind: "lock" },
        { key: "pool", kind: "semaphore" },
      ]);
      assert.match(err.message, /^locksmith: 2 holds are still held on the TestStore: "left" \(lock\), "pool" \(semaphore\)/);
      return true;
    });
    await store.clock.advance("30s");
    await store.assertNothingHeld();
  });

  it("has every primitive: weighted semaphores, read-write locks, lockAll()", async () => {
    const store = new TestStore();
    const big = ls.semaphore("pool", 3, "30s", store);
    assert.equal(await big.acquire({ permits: 2 }), true);
    assert.equal(await ls.semaphore("pool", 3, "30s", store).acquire({ permits: 2 }), false);
    assert.equal(await ls.semaphore("pool", 3, "30s", store).acquire(), true);
    const rw = ls.readWriteLock("doc", "30s", store);
    const reader = rw.readLock();
    assert.equal(await reader.acquire(), true);
    const writer = rw.writeLock();
    const writing = watch(writer.acquire({ timeout: "1m" }));
    await store.clock.advance("1s");
    assert.equal(writing.now, "pending");
    await reader.release();
    await store.clock.advance("1s");
    assert.equal(writing.now, true);
    await writer.release();
    const all = ls.lockAll(["a", "b", "c"], "30s", store);
    assert.equal(await all.acquire(), true);
    assert.deepEqual(Object.keys(all.fencingTokens), ["a", "b", "c"]);
    assert.equal(await ls.lock("b", "30s", store).acquire(), false);
    await all.release();
    await store.clock.advance("30s");
    await store.assertNothingHeld();
  });

  it("runs the same history the same way every time", async () => {
    const history = async () => {
      const store = new TestStore();
      const log = [];
      const worker = async (name) => {
        for (let i = 0; i < 3; i++) {
          const l = ls.lock("shared", "5s", store);
          if (await l.acquire({ timeout: "1m", retryDelay: 137 })) {
            log.push(`${name}+${store.clock.now()}`);
            await store.clock.sleep(1_000);
            await l.release();
          }
        }
      };
      const done = Promise.all(["a", "b", "c"].map(worker));
      await store.clock.advance("1m");
      await done;
      return log;
    };
    const first = await history();
    assert.equal(first.length, 9);
    assert.deepEqual(await history(), first);
  });

  it("refuses bad options with typed errors", () => {
    assert.throws(() => new TestStore({ clok: new TestClock() }), { code: "INVALID_ARGUMENT", message: /unknown option `clok`/ });
    assert.throws(() => new TestStore({ clock: {} }), { code: "INVALID_ARGUMENT", message: /must be a TestClock/ });
    assert.throws(() => new TestStore({ operationTimeoutMs: 0 }), { code: "INVALID_ARGUMENT" });
    const store = new TestStore();
    assert.throws(() => store.failNext(0), { code: "INVALID_ARGUMENT" });
    assert.throws(() => store.failNext(1, { calls: ["aquire"] }), { code: "INVALID_ARGUMENT", message: /did you mean `acquire`/ });
    assert.throws(() => store.delay("1s", { times: 2 }), { code: "INVALID_ARGUMENT", message: /unknown option `times`/ });
    assert.throws(() => store.failFor("forever"), { code: "INVALID_ARGUMENT" });
  });
});

describe("withFaults()", () => {
  it("injects the same faults into a store of the user's own, on real time", async () => {
    const store = withFaults(mapStore({ withFencing: true, withIsHeldBy: true }));
    store.failNext(1);
    await assert.rejects(ls.lock("k", "30s", store).acquire(), { code: "STORE_UNAVAILABLE" });
    const l = ls.lock("k", "30s", store);
    assert.equal(await l.acquire(), true);
    await assert.rejects(store.assertNothingHeld(), { code: "HOLDS_REMAIN" });
    await l.release();
    await store.assertNothingHeld();
  });

  it("refuses a store whose calls never leave the build's own code", () => {
    assert.throws(() => withFaults(new ls.MemoryLockStore()), { code: "UNSUPPORTED", message: /^locksmith: withFaults\(\)/ });
    assert.throws(() => withFaults({}), { code: "INVALID_ARGUMENT" });
  });
});

describe("a process that ends with locks on the clock", () => {
  const testing = new URL("../js/testing.mjs", import.meta.url).href;

  it("exits when a lock still waits on the clock (it would never get in: the clock does not move)", async () => {
    const { code, stdout, stderr } = await runModule(
      `import { lock } from ${JSON.stringify(ENTRY)};
       import { TestStore } from ${JSON.stringify(testing)};
       const store = new TestStore();
       await lock("k", "30s", store).acquire();
       lock("k", "30s", store).acquire({ timeout: "10s" });
       await store.clock.advance("1s");
       console.log("done");`,
      { timeoutMs: 15_000 },
    );
    assert.equal(code, 0, stderr);
    assert.equal(stdout.trim(), "done");
  });

  it("exits cleanly with an autoExtend hold left held and its signal read last", async () => {
    // The signal's first read starts the hold's watch, whose first sleep was on its way
    // to the JS thread as the loop ran out of work; delivered during teardown, it
    // aborted the native build's process (exit 134).
    for (let i = 0; i < 3; i++) {
      const { code, stdout, stderr } = await runModule(
        `import { lock } from ${JSON.stringify(ENTRY)};
         import { TestStore } from ${JSON.stringify(testing)};
         const store = new TestStore();
         const l = lock("report", "10s", store);
         const taking = l.acquire({ autoExtend: true });
         await store.clock.advance(0);
         await taking;
         await store.clock.advance("30s");
         console.log(l.signal.aborted);`,
        { timeoutMs: 15_000 },
      );
      assert.equal(code, 0, stderr);
      assert.equal(stdout.trim(), "false");
    }
  });
});

describe("a test runner's fake timers", () => {
  it("node:test's mock.timers, on: the kit and both builds run as without them", async () => {
    // They replace setTimeout, setInterval, setImmediate and node:timers' functions too:
    // the native build kept a waiting call's process alive on node:timers, and hung.
    mock.timers.enable();
    try {
      const store = new TestStore();
      const holder = ls.lock("k", "30s", store);
      assert.equal(await holder.acquire(), true);
      const waiter = watch(ls.lock("k", "30s", store).acquire({ timeout: "5s" }));
      await store.clock.advance("5s");
      assert.equal(waiter.now, false);
      await holder.release();
      await store.assertNothingHeld();
    } finally {
      mock.timers.reset();
    }
  });

  it("change nothing on real time either: a wait on a memory store still gives up at its timeout", async () => {
    const store = new ls.MemoryLockStore();
    const holder = ls.lock("k", "30s", store);
    await holder.acquire();
    // What Jest's and Vitest's fake timers replace, stopped: nothing fires, time stands still.
    const names = ["setTimeout", "clearTimeout", "setImmediate", "queueMicrotask"];
    const saved = Object.fromEntries(names.map((name) => [name, globalThis[name]]));
    const savedNow = [performance.now, Date.now];
    for (const name of names) globalThis[name] = () => {};
    performance.now = () => 0;
    Date.now = () => 0;
    let outcome;
    try {
      const gaveUp = ls.lock("k", "30s", store).acquire({ timeout: 200 });
      outcome = await Promise.race([gaveUp, realSleep(5_000, "still waiting after 5 s")]);
    } finally {
      Object.assign(globalThis, saved);
      [performance.now, Date.now] = savedNow;
    }
    assert.equal(outcome, false);
    await holder.release();
  });
});

it(`runs on the ${TARGET} build`, () => assert.ok(true));
