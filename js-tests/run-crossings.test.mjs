// What a lock costs in calls into the native addon on the built-in memory store: run()
// crosses no more often than acquire() + release() (its check that the hold lasted is
// carried by the release), and a sequential pair crosses once each way. Native build
// only: the WebAssembly module is at its size budget and keeps run()'s general path.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

import { startRedis } from "./support/redis-server.mjs";
import { ls, TARGET, uniqueKey } from "./support/target.mjs";

const { Lock, MemoryLockStore, RedisLockStore, semaphore } = ls;

/**
 * Counts the calls made on native lock handles (methods and getters of the addon's
 * NativeLock) while `work()` runs, by name.
 */
async function crossings(work) {
  const { loadAddon } = createRequire(import.meta.url)("../js/native-loader.cjs");
  const proto = loadAddon().NativeLock.prototype;
  const seen = [];
  const saved = [];
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === "constructor") continue;
    const d = Object.getOwnPropertyDescriptor(proto, name);
    saved.push([name, d]);
    if (typeof d.get === "function") {
      const get = d.get;
      Object.defineProperty(proto, name, {
        ...d,
        get() {
          seen.push(name);
          return get.call(this);
        },
      });
    } else if (typeof d.value === "function") {
      const method = d.value;
      Object.defineProperty(proto, name, {
        ...d,
        value(...args) {
          seen.push(name);
          return method.apply(this, args);
        },
      });
    }
  }
  try {
    await work();
  } finally {
    for (const [name, d] of saved) Object.defineProperty(proto, name, d);
  }
  // The JS wrappers over the addon's methods (js/node.cjs) are not crossings themselves.
  return seen.filter(
    (name) => !["acquire", "release", "watch", "autoExtend", "extend", "isLocked", "count", "isExpired", "remainingTime", "acquireAbortable"].includes(name),
  );
}

describe("calls into the addon per lock operation on the memory store", { skip: TARGET !== "native" && "the native build's hot paths" }, () => {
  it("run() crosses as often as acquire() + release(): once to take, once to end", async () => {
    const store = new MemoryLockStore();
    const l = new Lock(uniqueKey("crossings"), 30_000, store);
    // Warm: the handle is taken from the pool (its reset is a crossing of its own).
    assert.deepEqual(await l.run(async () => "warm"), [true, "warm"]);
    const pair = await crossings(async () => {
      assert.equal(await l.acquire(), true);
      assert.equal(await l.release(), true);
    });
    assert.deepEqual(pair, ["tryAcquire", "releaseNow"]);
    const run = await crossings(async () => {
      assert.deepEqual(await l.run(async () => "done"), [true, "done"]);
    });
    assert.equal(run.length, pair.length, `run() crossed ${run.join(", ")}`);
  });

  it("a hold lost before the function settled is found lost in the same one crossing", async () => {
    const l = new Lock(uniqueKey("crossings-lost"), 50, new MemoryLockStore());
    assert.deepEqual(await l.run(() => "warm"), [true, "warm"]);
    let err;
    const run = await crossings(async () => {
      err = await l.run(() => new Promise((resolve) => setTimeout(() => resolve("late"), 120))).catch((e) => e);
    });
    assert.equal(err?.code, "LOCK_NOT_HELD", String(err));
    assert.equal(err.result, "late");
    assert.match(err.message, /was lost before run\(\)'s function settled, so the work was not protected throughout \(its TTL passed without an extend\)/);
    // (Then the handle, still owning its lost hold, is not pooled: one more look.)
    assert.deepEqual(run.slice(0, 2), ["tryAcquire", "finishRunNow"]);
  });
  it("an acquire with options that its first attempt settles makes no promise of its own", async () => {
    const store = new MemoryLockStore();
    const key = uniqueKey("settled");
    const l = new Lock(key, 30_000, store);
    // What acquire() and release() hand out on this store: promises settled once for all.
    const taken = l.acquire();
    const released = l.release();
    assert.equal(await taken, true);
    assert.equal(await released, true);
    const withTimeout = await crossings(async () => {
      const p = l.acquire({ timeout: 1_000 });
      assert.equal(p, taken, "the settled promise acquire() hands out");
      assert.equal(await p, true);
      assert.equal(l.release(), released);
    });
    assert.deepEqual(withTimeout, ["tryAcquireNow", "releaseNow"]);
    // Busy: not taken at once, no wait asked for.
    const other = new Lock(key, 30_000, store);
    assert.equal(await l.acquire(), true);
    const busy = other.acquire({ timeout: 0 });
    assert.equal(await busy, false);
    assert.equal(busy, other.acquire({ timeout: 0, retryDelay: 5 }));
    // Busy and a wait asked for: it waits, and gets the lock once released.
    const waiting = other.acquire({ timeout: 2_000, retryDelay: 5 });
    assert.notEqual(waiting, taken);
    assert.equal(await l.release(), true);
    assert.equal(await waiting, true);
    assert.equal(await other.release(), true);
    // Bad options still reject, typed.
    await assert.rejects(l.acquire({ timeout: -1 }), (err) => err.code === "INVALID_ARGUMENT");
    await assert.rejects(l.acquire({ tiemout: 5 }), (err) => err.code === "INVALID_ARGUMENT");
  });

  it("on a store that never answers at once, a plain lock goes straight to the store's call; a semaphore does not change that for locks", async (t) => {
    const server = await startRedis();
    t.after(() => server.stop());
    const store = await RedisLockStore.connect(server.url);
    t.after(() => store.close());
    const key = uniqueKey("answers-later");
    // The first pair learns that this store answers later.
    const l = new Lock(key, 30_000, store);
    assert.equal(await l.acquire(), true);
    assert.equal(await l.release(), true);
    const next = new Lock(key, 30_000, store);
    const pair = await crossings(async () => {
      assert.equal(await next.acquire(), true);
      assert.equal(await next.release(), true);
    });
    // A grant is known to hold: nothing asks whether the handle has an owner after it.
    assert.deepEqual(pair, ["acquireStart", "releaseStart", "hasOwner"]);
    const run = await crossings(async () => {
      assert.deepEqual(await next.run(async () => "done"), [true, "done"]);
    });
    for (const sync of ["tryAcquire", "releaseNow", "finishRunNow"]) assert.ok(!run.includes(sync), `crossed ${run.join(", ")}`);
    // On the memory store, a semaphore handle (never answered at once) leaves its plain locks answered at once.
    const memory = new MemoryLockStore();
    const permit = semaphore(uniqueKey("answers-later-sem"), 2, 30_000, memory);
    assert.equal(await permit.acquire(), true);
    assert.equal(await permit.release(), true);
    const plain = new Lock(uniqueKey("answers-later-mem"), 30_000, memory);
    assert.deepEqual(await plain.run(async () => "warm"), [true, "warm"]);
    const memoryPair = await crossings(async () => {
      assert.equal(await plain.acquire(), true);
      assert.equal(await plain.release(), true);
    });
    assert.deepEqual(memoryPair, ["tryAcquire", "releaseNow"]);
  });
});
