// The optional parts of the JS store contract: fencing tokens from acquire, and release
// wake-ups through onRelease, in both builds.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ENTRY, runModule } from "../support/child.mjs";
import { mapStore } from "../support/js-stores.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";

const { Lock, semaphore, readWriteLock, restoreLock } = ls;

failOnUnhandledRejections();

describe("fencing tokens from a JS store", () => {
  it("a number that acquire resolves to is the hold's fencing token", async () => {
    const store = mapStore({ withFencing: true });
    const key = uniqueKey("fence");
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const l = new Lock(key, 5_000, store);
      assert.equal(await l.acquire(), true);
      seen.push(l.fencingToken);
      assert.equal(restoreLock(l.serialize(), store).fencingToken, l.fencingToken);
      await l.release();
    }
    assert.deepEqual(seen, [1, 2, 3]);
  });

  it("semaphore permits carry the store's tokens too", async () => {
    const store = mapStore({ withPermits: true, withFencing: true });
    const key = uniqueKey("fence-permit");
    const a = semaphore(key, 2, 5_000, store);
    const b = semaphore(key, 2, 5_000, store);
    assert.equal(await a.acquire(), true);
    assert.equal(await b.acquire(), true);
    assert.deepEqual([a.fencingToken, b.fencingToken], [1, 2]);
    await Promise.all([a.release(), b.release()]);
  });

  for (const [what, answer] of [
    ["zero", 0],
    ["a negative number", -4],
    ["a fraction", 1.5],
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["a number past 2^53", 2 ** 53 + 2],
    ["a numeric string", "7"],
  ]) {
    it(`an acquire that resolves to ${what} is a contract violation, and leaves nothing held`, async () => {
      const store = mapStore({ withFencing: true });
      const released = [];
      const release = store.release;
      store.release = async (key, owner) => {
        released.push(owner);
        return release(key, owner);
      };
      store.acquire = async () => answer;
      const l = new Lock(uniqueKey("bad-token"), 5_000, store);
      await assert.rejects(l.acquire(), (err) => {
        assert.equal(err.code, "STORE_CONTRACT_VIOLATION");
        assert.match(err.message, /^locksmith: .*store\.acquire\(\) resolved to .*fencing token/);
        return true;
      });
      assert.equal(l.fencingToken, null);
      // The store may have taken the key: the attempt is released again.
      await sleep(20);
      assert.equal(released.length, 1, "the failed attempt was released");
    });
  }
});

describe("a JS store's refusal", () => {
  it("a rejection with code INVALID_ARGUMENT reaches the caller as that, not as the store failing", async () => {
    const store = mapStore({ withPermits: true });
    store.acquirePermit = async () => {
      throw Object.assign(new Error('locksmith: semaphore "k" is held with limit 2; this handle asks for 3'), { code: "INVALID_ARGUMENT" });
    };
    const err = await semaphore(uniqueKey("refused"), 3, 5_000, store)
      .acquire()
      .catch((e) => e);
    assert.ok(err instanceof ls.InvalidArgumentError, String(err));
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.equal(err.message, 'locksmith: semaphore "k" is held with limit 2; this handle asks for 3');
    // Any other rejection is the store failing.
    store.acquirePermit = async () => {
      throw Object.assign(new Error("boom"), { code: "ECONNRESET" });
    };
    const failed = await semaphore(uniqueKey("failed"), 3, 5_000, store)
      .acquire()
      .catch((e) => e);
    assert.equal(failed.code, "STORE_UNAVAILABLE");
  });

  it("a rejection with code STORE_ERROR reaches the caller as that, and a wait does not ride it out", async () => {
    const store = mapStore();
    store.acquire = async () => {
      throw new ls.LockStoreError("locksmith: store error: permission denied for table locks");
    };
    const started = performance.now();
    const err = await new Lock(uniqueKey("store-error"), 5_000, store).acquire({ timeout: 5_000, retryDelay: 50 }).catch((e) => e);
    assert.ok(err instanceof ls.LockStoreError, String(err));
    assert.equal(err.code, "STORE_ERROR");
    assert.equal(err.message, "locksmith: store error: permission denied for table locks");
    assert.ok(performance.now() - started < 2_000, "the wait failed at once instead of retrying until its deadline");
  });
});

describe("a JS store that fails on every call", () => {
  // Each failure crosses from the JS thread to where core waits for it. In the native
  // build that crossing once carried a reference into the JS heap, freed on another
  // thread: a store failing often (an outage) crashed the process with SIGSEGV, far from
  // the cause. Tens of thousands of failures, in a process of its own, must all reach
  // their callers as STORE_UNAVAILABLE, and the process must exit normally.
  // The WebAssembly build has one thread: nothing crosses.
  const NATIVE_ONLY = { skip: TARGET === "wasm" ? "the native build's thread crossing" : false };
  it("20 000 failed acquires from 64 callers: each one STORE_UNAVAILABLE with the store's reason, no crash", NATIVE_ONLY, async () => {
    const { code, stdout, stderr } = await runModule(
      `
      import { Lock } from ${JSON.stringify(ENTRY)};
      const reasons = [
        async () => { throw new Error("connection refused"); },
        async () => { throw "connection refused"; },
        () => { throw new Error("connection refused"); },
      ];
      const store = {
        acquire: (...args) => reasons[args[2] % 3](),
        release: async () => { throw new Error("connection refused"); },
        extend: async () => { throw new Error("connection refused"); },
        isLocked: async () => { throw new Error("connection refused"); },
        remainingTime: async () => { throw new Error("connection refused"); },
      };
      const seen = new Map();
      let garbage = [];
      async function caller(c) {
        for (let i = c; i < 20_000; i += 64) {
          const err = await new Lock("k" + (i % 50), 5_000 + (i % 3), store).acquire().then(() => "acquired", (e) => e.code + " " + e.message.split(";")[0]);
          seen.set(err, (seen.get(err) ?? 0) + 1);
              // Work for the collector while the failures cross.
          garbage.push({ i, text: String(i) });
          if (garbage.length > 5_000) garbage = [];
        }
      }
      await Promise.all(Array.from({ length: 64 }, (_, c) => caller(c)));
      console.log(JSON.stringify([...seen]));
    `,
      { timeoutMs: 120_000 },
    ).catch((err) => ({ code: err.signal ?? err.code, stdout: err.stdout, stderr: err.stderr }));
    assert.equal(code, 0, stderr);
    const seen = new Map(JSON.parse(stdout));
    assert.deepEqual([...seen.keys()], ["STORE_UNAVAILABLE locksmith: store unavailable: store.acquire() failed: connection refused"], stdout);
    assert.equal([...seen.values()][0], 20_000);
  });
});

describe("onRelease wake-ups from a JS store", () => {
  it("a release wakes a waiter at once instead of after its retry delay, and every subscription ends", async () => {
    const store = mapStore({ withIsHeldBy: true, withOnRelease: true });
    const key = uniqueKey("wake");
    const holder = new Lock(key, 10_000, store);
    assert.equal(await holder.acquire(), true);
    const start = performance.now();
    const waiter = new Lock(key, 10_000, store);
    const acquired = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 }).then((ok) => [ok, performance.now() - start]);
    await sleep(100);
    assert.equal(store.subscriptions(), 1, "the waiter subscribed");
    await holder.release();
    const [ok, at] = await acquired;
    assert.equal(ok, true);
    // Without the wake-up it would come in at the 5 s retry.
    assert.ok(at < 2_000, `acquired after ${Math.round(at)} ms`);
    await sleep(20);
    assert.equal(store.subscriptions(), 0, "unsubscribed once the wait was over");
    await waiter.release();
  });

  it("a wait that times out unsubscribes", async () => {
    const store = mapStore({ withOnRelease: true });
    const key = uniqueKey("wake-timeout");
    const holder = new Lock(key, 10_000, store);
    await holder.acquire();
    // Collected and checked afterwards: locksmith swallows what onRelease throws.
    const calls = [];
    const onRelease = store.onRelease;
    store.onRelease = (k, listener, kind) => {
      calls.push([k, kind]);
      return onRelease(k, listener, kind);
    };
    assert.equal(await new Lock(key, 10_000, store).acquire({ timeout: 150, retryDelay: 40 }), false);
    await sleep(20);
    // Nothing was released: one subscription, kept across the wait's retries.
    assert.equal(calls.length, 1, `${calls.length} subscriptions for one wait without a release`);
    for (const [k, kind] of calls) {
      assert.equal(k, key);
      assert.equal(kind, undefined);
    }
    assert.equal(store.subscriptions(), 0);
    await holder.release();
  });

  it("an onRelease that throws costs only the retry delay", async () => {
    const store = mapStore({ withOnRelease: true });
    store.onRelease = () => {
      throw new Error("no pub/sub today");
    };
    const key = uniqueKey("wake-throws");
    const holder = new Lock(key, 10_000, store);
    await holder.acquire();
    setTimeout(() => holder.release(), 60);
    assert.equal(await new Lock(key, 10_000, store).acquire({ timeout: 3_000, retryDelay: 30 }), true);
  });

  it("permit holds subscribe with their kind, and a release of a reader wakes a waiting writer", async () => {
    const store = mapStore({ withPermits: true, withOnRelease: true });
    const key = uniqueKey("wake-rw");
    const kinds = [];
    const onRelease = store.onRelease;
    store.onRelease = (k, listener, kind) => {
      kinds.push(kind);
      return onRelease(k, listener, kind);
    };
    const rw = readWriteLock(key, 10_000, store);
    const reader = rw.readLock();
    assert.equal(await reader.acquire(), true);
    const start = performance.now();
    const writer = rw.writeLock();
    const acquired = writer.acquire({ timeout: 20_000, retryDelay: 5_000 }).then((ok) => [ok, performance.now() - start]);
    await sleep(100);
    await reader.release();
    const [ok, at] = await acquired;
    assert.equal(ok, true);
    assert.ok(at < 2_000, `the writer got in after ${Math.round(at)} ms`);
    assert.ok(kinds.includes("write"), `kinds: ${kinds}`);
    await writer.release();

    const sem = semaphore(key, 1, 10_000, store);
    const other = semaphore(key, 1, 10_000, store);
    await sem.acquire();
    setTimeout(() => sem.release(), 100);
    const t0 = performance.now();
    assert.equal(await other.acquire({ timeout: 20_000, retryDelay: 5_000 }), true);
    assert.ok(performance.now() - t0 < 2_000);
    assert.ok(kinds.includes("semaphore"), `kinds: ${kinds}`);
    await other.release();
    assert.equal(store.subscriptions(), 0);
  });
});
