// The diagnostics channels (docs/observability.md): locksmith:acquire, :release and
// :extend as tracing channels, locksmith:lost as a plain one, with the context fields
// they promise, on the memory store, a user's own store and a real redis-server, in the
// build under test. Nothing is published, and the fast paths stay as they are, while
// nobody subscribes.
import assert from "node:assert/strict";
import dc from "node:diagnostics_channel";
import { after, before, describe, it } from "node:test";

import { failingStore } from "./support/js-stores.mjs";
import { redisStore } from "./support/server-stores.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "./support/target.mjs";

failOnUnhandledRejections();

const EVENTS = ["start", "end", "asyncStart", "asyncEnd", "error"];

/**
 * Subscribes to every event of the tracing channels `names` (and to locksmith:lost);
 * `events` collects `{ channel, event, context }` with a copy of the context as it was
 * at that event. `stop()` unsubscribes.
 */
function record(names = ["acquire", "release", "extend"]) {
  const events = [];
  const subscriptions = names.map((name) => {
    const channel = dc.tracingChannel(`locksmith:${name}`);
    const handlers = Object.fromEntries(EVENTS.map((event) => [event, (context) => events.push({ channel: name, event, context: { ...context } })]));
    channel.subscribe(handlers);
    return () => channel.unsubscribe(handlers);
  });
  const lost = (message) => events.push({ channel: "lost", event: "publish", context: message });
  dc.subscribe("locksmith:lost", lost);
  return {
    events,
    /** The context at each `event` of `channel`. */
    at: (channel, event) => events.filter((e) => e.channel === channel && e.event === event).map((e) => e.context),
    stop() {
      for (const stop of subscriptions) stop();
      dc.unsubscribe("locksmith:lost", lost);
    },
  };
}

describe("diagnostics channels", () => {
  let recorder;
  let store;
  before(() => {
    store = new ls.MemoryLockStore();
  });
  after(() => recorder?.stop());

  it("publish an acquire's start, end, asyncStart and asyncEnd with its outcome, attempts, wait and fencing token", async () => {
    recorder = record();
    const key = uniqueKey("dc-acquire");
    const lock = ls.lock(key, 5_000, store);
    assert.equal(await lock.acquire(), true);
    recorder.stop();
    assert.deepEqual(
      recorder.events.map((e) => `${e.channel}:${e.event}`),
      ["acquire:start", "acquire:end", "acquire:asyncStart", "acquire:asyncEnd"],
    );
    const [start] = recorder.at("acquire", "start");
    assert.equal(start.key, key);
    assert.equal(start.kind, "lock");
    assert.equal(start.store, "memory");
    assert.equal(start.ttlMs, 5_000);
    assert.equal(start.lock, lock);
    const [end] = recorder.at("acquire", "asyncEnd");
    assert.equal(end.outcome, "acquired");
    assert.equal(end.attempts, 1);
    assert.equal(typeof end.waitedMs, "number");
    assert.ok(end.waitedMs >= 0 && end.waitedMs < 1_000, `waitedMs ${end.waitedMs}`);
    assert.equal(end.fencingToken, lock.fencingToken);
    assert.equal(typeof end.fencingToken, "number");
    assert.equal(end.result, true);
    await lock.release();
  });

  it("hand subscribers the lock itself, to pair a grant with its release", async () => {
    const seen = [];
    const handlers = { asyncEnd: (context) => seen.push(context.lock) };
    const acquire = dc.tracingChannel("locksmith:acquire");
    const release = dc.tracingChannel("locksmith:release");
    acquire.subscribe(handlers);
    release.subscribe(handlers);
    try {
      const lock = ls.lock(uniqueKey("dc-pair"), 5_000, store);
      await lock.acquire();
      await lock.release();
      assert.equal(seen.length, 2);
      assert.equal(seen[0], lock);
      assert.equal(seen[1], lock);
    } finally {
      acquire.unsubscribe(handlers);
      release.unsubscribe(handlers);
    }
  });

  it("say busy when an immediate acquire is refused and timeout when a wait ran out, with each attempt counted", async () => {
    const key = uniqueKey("dc-refused");
    const holder = ls.lock(key, 5_000, store);
    await holder.acquire();
    recorder = record(["acquire"]);
    const other = ls.lock(key, 5_000, store);
    assert.equal(await other.acquireImmediately(), false);
    assert.equal(await other.acquire({ timeout: 120, retryDelay: 30 }), false);
    recorder.stop();
    const ends = recorder.at("acquire", "asyncEnd");
    assert.deepEqual(
      ends.map((e) => e.outcome),
      ["busy", "timeout"],
    );
    assert.equal(ends[0].attempts, 1);
    assert.equal(ends[0].fencingToken, null);
    // Attempts at 0, 30, 60 and 90 ms and at the 120 ms deadline: five at most (a refused
    // first attempt is not sent again at once, and a pause lasts its milliseconds by the
    // clock the wait reads, even where the runtime's timers fire early); fewer when a busy
    // machine runs the timers late.
    assert.ok(ends[1].attempts >= 2 && ends[1].attempts <= 5, `attempts ${ends[1].attempts}`);
    assert.ok(ends[1].waitedMs >= 100, `waitedMs ${ends[1].waitedMs}`);
    await holder.release();
  });

  it("say aborted when the acquire's signal ended the wait", async () => {
    const key = uniqueKey("dc-aborted");
    const holder = ls.lock(key, 5_000, store);
    await holder.acquire();
    recorder = record(["acquire"]);
    await assert.rejects(ls.lock(key, 5_000, store).acquire({ timeout: 5_000, signal: AbortSignal.timeout(60) }), { name: "TimeoutError" });
    await assert.rejects(ls.lock(key, 5_000, store).acquire({ signal: AbortSignal.abort() }), { code: "ABORTED" });
    recorder.stop();
    assert.deepEqual(
      recorder.at("acquire", "error").map((e) => e.outcome),
      ["aborted", "aborted"],
    );
    await holder.release();
  });

  it("publish releases and extends with their outcomes, a lost extend as not-held with its error", async () => {
    const key = uniqueKey("dc-release");
    const lock = ls.lock(key, 5_000, store);
    await lock.acquire();
    recorder = record(["release", "extend"]);
    await lock.extend("8s");
    assert.equal(await lock.release(), true);
    assert.equal(await lock.release(), false);
    const short = ls.lock(uniqueKey("dc-short"), "60ms", store);
    await short.acquire();
    await sleep(150);
    await assert.rejects(short.extend(), { code: "LOCK_NOT_HELD" });
    recorder.stop();
    const extends_ = recorder.at("extend", "asyncEnd");
    assert.deepEqual(
      extends_.map((e) => [e.outcome, e.ttlMs]),
      [
        ["extended", 8_000],
        ["not-held", 60],
      ],
    );
    const [failed] = recorder.at("extend", "error");
    assert.equal(failed.outcome, "not-held");
    assert.equal(failed.error.code, "LOCK_NOT_HELD");
    assert.deepEqual(
      recorder.at("release", "asyncEnd").map((e) => e.outcome),
      ["released", "not-held"],
    );
  });

  it("run() publishes its acquire and its release", async () => {
    recorder = record(["acquire", "release"]);
    const [ran] = await ls.lock(uniqueKey("dc-run"), 5_000, store).run(async () => "done");
    recorder.stop();
    assert.equal(ran, true);
    assert.deepEqual(
      recorder.events.filter((e) => e.event === "asyncEnd").map((e) => `${e.channel}:${e.context.outcome}`),
      ["acquire:acquired", "release:released"],
    );
  });

  it("name the kind of semaphore permits and read and write locks", async () => {
    recorder = record(["acquire"]);
    const key = uniqueKey("dc-kinds");
    const permit = ls.semaphore(key, 2, 5_000, store);
    const rw = ls.readWriteLock(`${key}:rw`, 5_000, store);
    const [reader, writer] = [rw.readLock(), rw.writeLock()];
    await permit.acquire();
    await reader.acquire();
    assert.equal(await writer.acquireImmediately(), false);
    recorder.stop();
    assert.deepEqual(
      recorder.at("acquire", "asyncEnd").map((e) => [e.kind, e.outcome]),
      [
        ["semaphore", "acquired"],
        ["read", "acquired"],
        ["write", "busy"],
      ],
    );
    await permit.release();
    await reader.release();
  });

  it("publish a failing store's acquire as an error, naming a user's own store custom", async () => {
    const broken = failingStore();
    recorder = record(["acquire"]);
    await assert.rejects(ls.lock(uniqueKey("dc-broken"), 5_000, broken).acquire());
    recorder.stop();
    const [failed] = recorder.at("acquire", "error");
    assert.equal(failed.outcome, "error");
    assert.equal(failed.store, "custom");
    assert.match(failed.error.message, /disk on fire/);
    assert.equal(recorder.at("acquire", "asyncEnd").length, 1);
  });

  it("publish bad input as an error and still reject, never throw", async () => {
    recorder = record(["acquire", "extend"]);
    const lock = ls.lock(uniqueKey("dc-bad"), 5_000, store);
    const acquiring = lock.acquire({ timeout: "soon" });
    assert.ok(acquiring instanceof Promise);
    await assert.rejects(acquiring, { code: "INVALID_ARGUMENT" });
    await lock.acquire();
    await assert.rejects(lock.extend("forever"), { code: "INVALID_ARGUMENT" });
    recorder.stop();
    assert.deepEqual(
      recorder.at("acquire", "error").map((e) => e.outcome),
      ["error"],
    );
    assert.deepEqual(
      recorder.at("extend", "error").map((e) => e.outcome),
      ["error"],
    );
    await lock.release();
  });

  it("publish a hold lost to its TTL on locksmith:lost, once, with its reason", async () => {
    recorder = record([]);
    const key = uniqueKey("dc-lost");
    const lock = ls.lock(key, "80ms", store);
    await lock.acquire();
    const kept = ls.lock(uniqueKey("dc-kept"), 5_000, store);
    await kept.acquire();
    await kept.release();
    await sleep(250);
    recorder.stop();
    const lost = recorder.at("lost", "publish");
    assert.equal(lost.length, 1, JSON.stringify(lost.map((m) => m.key)));
    assert.equal(lost[0].key, key);
    assert.equal(lost[0].kind, "lock");
    assert.equal(lost[0].store, "memory");
    assert.equal(lost[0].reason, "LOCK_NOT_HELD");
    assert.equal(lost[0].error.code, "LOCK_NOT_HELD");
    assert.equal(lost[0].lock, lock);
  });

  it("publish nothing, and keep the settled fast path, while nobody subscribes", async () => {
    recorder?.stop();
    const events = [];
    // Subscribed and unsubscribed again: channels go back to their inactive state.
    const probe = { start: (c) => events.push(c) };
    dc.tracingChannel("locksmith:acquire").subscribe(probe);
    dc.tracingChannel("locksmith:acquire").unsubscribe(probe);
    const [a, b] = [ls.lock(uniqueKey("dc-fast"), 5_000, store), ls.lock(uniqueKey("dc-fast"), 5_000, store)];
    // The synchronous store's fast path hands out the one settled promise.
    assert.equal(a.acquire(), b.acquire());
    assert.equal(a.release(), b.release());
    assert.deepEqual(events, []);
  });
});

describe("diagnostics channels on a real redis-server", () => {
  const storeOf = redisStore();

  it("name the store redis and count the attempts of a wait woken by a release", async () => {
    const store = storeOf();
    const key = uniqueKey("dc-redis");
    const holder = ls.lock(key, 5_000, store);
    await holder.acquire();
    const recorder = record(["acquire", "release"]);
    try {
      const waiter = ls.lock(key, 5_000, store);
      const waiting = waiter.acquire({ timeout: 5_000, retryDelay: 2_000 });
      await sleep(100);
      await holder.release();
      assert.equal(await waiting, true);
      await waiter.release();
    } finally {
      recorder.stop();
    }
    const ends = recorder.at("acquire", "asyncEnd");
    assert.equal(ends.length, 1);
    assert.equal(ends[0].store, "redis");
    assert.equal(ends[0].outcome, "acquired");
    // Refused (and tried again once its release subscription is in place), then woken
    // by the release long before the 2 s retry.
    assert.ok(ends[0].attempts >= 2 && ends[0].attempts <= 3, `attempts ${ends[0].attempts}`);
    assert.ok(ends[0].waitedMs < 1_500, `waitedMs ${ends[0].waitedMs}`);
    assert.equal(typeof ends[0].fencingToken, "number");
    assert.deepEqual(
      recorder.at("release", "asyncEnd").map((e) => [e.store, e.outcome]),
      [
        ["redis", "released"],
        ["redis", "released"],
      ],
    );
  });
});
