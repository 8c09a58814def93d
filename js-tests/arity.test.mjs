// Arguments the API does not take are refused, never dropped: `lockAll(keys, ttl, store,
// { timeout: 5000 })` would otherwise not wait as asked. Every
// entry point with a fixed number of arguments answers more with INVALID_ARGUMENT, a
// message that says what was passed and what it takes, and nothing taken. Trailing
// `undefined`s (what a wrapper passing optional arguments through gives) are fine.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { failOnUnhandledRejections, ls, uniqueKey } from "./support/target.mjs";
import { invalidArgument as isInvalidArgument } from "./support/errors.mjs";

const { lock, lockAll, semaphore, readWriteLock, restoreLock, setLockStore, getLockStore, Lock, MultiLock, MemoryLockStore, LockError } = ls;

await failOnUnhandledRejections();

/** An InvalidArgumentError of this build (a LockError) whose message matches `pattern`. */
const invalidArgument = (pattern) => isInvalidArgument(pattern, LockError);

const store = new MemoryLockStore();

describe("handle makers refuse arguments past their own", () => {
  const cases = [
    [
      "lock(key, ttl, store, { fair: true }, { timeout })",
      () => lock("k", "10s", store, { fair: true }, { timeout: 5 }),
      /^locksmith: lock\(key, ttlMs\?, store\?, options\?\) takes at most 4 arguments; got 5 \(the extra one: \{ timeout \}\): acquire options .* go to acquire\(\) or run\(\)/,
    ],
    [
      "lock(key, ttl, store, { timeout })",
      () => lock("k", "10s", store, { timeout: 5 }),
      /^locksmith: `timeout` is not a handle option of lock\(\): acquire options .* go to acquire\(\) or run\(\)/,
    ],
    [
      "new Lock(key, ttl, store, {}, 5)",
      () => new Lock("k", 1_000, store, {}, 5),
      /new Lock\(key, ttlMs\?, store\?, options\?\) takes at most 4 arguments; got 5 \(the extra one: 5\)/,
    ],
    ["new Lock(key, ttl, store, 5)", () => new Lock("k", 1_000, store, 5), /takes its handle options as an object \(\{ fair \}\); got number/],
    [
      "lockAll(keys, ttl, store, {})",
      () => lockAll(["a", "b"], "10s", store, { timeout: 5 }),
      /lockAll\(keys, ttlMs\?, store\?\) takes at most 3 arguments; got 4 \(the extra one: \{ timeout \}\)/,
    ],
    [
      "new MultiLock(keys, ttl, store, x)",
      () => new MultiLock(["a"], "10s", store, "x"),
      /new MultiLock\(keys, ttlMs\?, store\?\) takes at most 3 arguments; got 4 \(the extra one: "x"\)/,
    ],
    [
      "semaphore(key, limit, ttl, store, { permits: 2 })",
      () => semaphore("s", 3, "10s", store, { permits: 2 }),
      /`permits` is not a handle option of semaphore\(\): acquire options .* go to acquire\(\) or run\(\)/,
    ],
    [
      "semaphore(key, limit, ttl, store, {}, x)",
      () => semaphore("s", 3, "10s", store, {}, 1),
      /semaphore\(key, limit, ttlMs\?, store\?, options\?\) takes at most 5 arguments; got 6 \(the extra one: 1\)/,
    ],
    [
      "readWriteLock(key, ttl, store, x, y)",
      () => readWriteLock("rw", "10s", store, 1, true),
      /readWriteLock\(key, ttlMs\?, store\?\) takes at most 3 arguments; got 5 \(the extra ones: 1, true\)/,
    ],
    [
      "readLock({ timeout })",
      () => readWriteLock("rw", "10s", store).readLock({ timeout: 5 }),
      /readLock\(\) takes at most 0 arguments; got 1 \(the extra one: \{ timeout \}\): acquire options .* readLock\(\)\.run\(fn, \{ timeout \}\)/,
    ],
    ["writeLock(x)", () => readWriteLock("rw", "10s", store).writeLock(1), /writeLock\(\) takes at most 0 arguments; got 1/],
    [
      "restoreLock(text, store, x)",
      () => restoreLock("x", store, {}),
      /restoreLock\(serialized, store\?\) takes at most 2 arguments; got 3 \(the extra one: \{\}\)/,
    ],
    [
      "setLockStore(store, {})",
      () => setLockStore(store, { strict: true }),
      /setLockStore\(store\) takes at most 1 argument; got 2 \(the extra one: \{ strict \}\)/,
    ],
    ["getLockStore(x)", () => getLockStore(store), /getLockStore\(\) takes at most 0 arguments; got 1 \(the extra one: an object\)/],
    ["MemoryLockStore.shared(name, x)", () => MemoryLockStore.shared("n", 2), /MemoryLockStore\.shared\(name\) takes at most 1 argument; got 2/],
    ["store.clear(x)", () => store.clear("k"), /clear\(\) takes at most 0 arguments; got 1 \(the extra one: "k"\)/],
  ];
  for (const [name, call, message] of cases) {
    it(`${name} is refused`, () => {
      assert.throws(call, invalidArgument(message));
    });
  }

  it("FileLockStore.open(path, options, x) is refused", async () => {
    await assert.rejects(
      ls.FileLockStore.open("/tmp/never-made.locks", {}, 5),
      invalidArgument(/FileLockStore\.open\(path, options\?\) takes at most 2 arguments; got 3/),
    );
  });

  it("trailing undefineds are what a caller passing optional arguments through gives: accepted", () => {
    assert.equal(lock("k", "10s", store, undefined).key, "k");
    assert.equal(semaphore("s", 2, "10s", store, undefined, undefined).key, "s");
    assert.equal(setLockStore(getLockStore(), undefined) instanceof MemoryLockStore, true);
  });
});

describe("a handle's methods refuse arguments past their own, and take nothing", () => {
  const methods = [
    ["acquire", (l) => l.acquire({ timeout: 0 }, 5), /acquire\(options\?\) takes at most 1 argument; got 2 \(the extra one: 5\)/],
    ["acquireImmediately", (l) => l.acquireImmediately(undefined, { signal: null }), /acquireImmediately\(options\?\) takes at most 1 argument; got 2/],
    [
      "run",
      (l) => l.run(() => "ran", { timeout: 0 }, { autoExtend: true }),
      /run\(fn, options\?\) takes at most 2 arguments; got 3 \(the extra one: \{ autoExtend \}\)/,
    ],
    ["runImmediately", (l) => l.runImmediately(() => "ran", undefined, 1), /runImmediately\(fn, options\?\) takes at most 2 arguments; got 3/],
    ["extend", (l) => l.extend("10s", "20s"), /extend\(ttlMs\?\) takes at most 1 argument; got 2 \(the extra one: "20s"\)/],
    ["release", (l) => l.release({ force: true }), /release\(\) takes at most 0 arguments; got 1 \(the extra one: \{ force \}\)/],
    ["count", (l) => l.count("k"), /count\(\) takes at most 0 arguments; got 1/],
    ["isLocked", (l) => l.isLocked("k"), /isLocked\(\) takes at most 0 arguments; got 1/],
    ["isExpired", (l) => l.isExpired(1), /isExpired\(\) takes at most 0 arguments; got 1/],
    ["getRemainingTime", (l) => l.getRemainingTime("k"), /getRemainingTime\(\) takes at most 0 arguments; got 1/],
  ];
  for (const [name, call, message] of methods) {
    it(`${name}() with an extra argument rejects, and leaves the lock as it was`, async () => {
      const key = uniqueKey(name);
      const l = lock(key, "10s", store);
      const held = name === "extend" || name === "release";
      if (held) assert.equal(await l.acquire(), true);
      await assert.rejects(
        Promise.resolve().then(() => call(l)),
        invalidArgument(message),
      );
      assert.equal(await l.isLocked(), held, held ? "still held" : "nothing taken");
      if (held) assert.equal(await l.release(), true);
    });
  }

  it("serialize(x) throws", async () => {
    const l = lock(uniqueKey("serialize"), "10s", store);
    await l.acquire();
    assert.throws(() => l.serialize({}), invalidArgument(/serialize\(\) takes at most 0 arguments; got 1/));
    await l.release();
  });

  it("the methods still take what they take", async () => {
    const l = lock(uniqueKey("ok"), "10s", store);
    assert.equal(await l.acquire({ timeout: 0 }), true);
    await l.extend("20s");
    assert.equal(await l.count(), 1);
    assert.equal(await l.release(), true);
    assert.deepEqual(await l.run(() => 1, { timeout: 0 }), [true, 1]);
    assert.deepEqual(await l.runImmediately(() => 2, undefined), [true, 2]);
  });
});
