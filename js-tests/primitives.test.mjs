// Semaphores and read-write locks from JS, on the built-in memory store, in both builds;
// stores without them refuse them with UNSUPPORTED.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { mapStore } from "./js-stores.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "./target.mjs";

const { semaphore, readWriteLock, restoreLock, MemoryLockStore, UnsupportedError, LockError } = ls;

await failOnUnhandledRejections();

const stores = {
  "the memory store": () => new MemoryLockStore(),
  "a JS store with the permit methods": () => mapStore({ withPermits: true }),
};

for (const [storeName, makeStore] of Object.entries(stores)) {
  describe(`on ${storeName}`, () => {
  describe("semaphore()", () => {
    it("lets at most `limit` in at once, and everyone through in time", async () => {
      const store = makeStore();
      const key = uniqueKey("sem");
      let inside = 0;
      let most = 0;
      const results = await Promise.all(
        Array.from({ length: 12 }, () =>
          semaphore(key, 3, 5_000, store).run(async () => {
            most = Math.max(most, ++inside);
            await sleep(20);
            inside--;
          }, { timeout: 10_000 }),
        ),
      );
      assert.ok(results.every(([ran]) => ran), "all 12 got a permit");
      assert.equal(most, 3, "three at once, never more");
      assert.equal(await semaphore(key, 3, 5_000, store).count(), 0);
    });

    it("frees the permit of a holder that never releases once its TTL passes", async () => {
      const store = makeStore();
      const key = uniqueKey("sem-ttl");
      const crashed = semaphore(key, 1, 100, store);
      assert.equal(await crashed.acquire(), true);
      const next = semaphore(key, 1, 5_000, store);
      assert.equal(await next.acquire(), false);
      assert.equal(await next.acquire({ timeout: 2_000, retryDelay: 20 }), true);
      assert.equal(await crashed.isExpired(), true);
      await next.release();
    });

    it("serializes, restores as a semaphore permit, and releases that permit", async () => {
      const store = makeStore();
      const key = uniqueKey("sem-handoff");
      const a = semaphore(key, 2, 5_000, store);
      assert.equal(await a.acquire(), true);
      const text = a.serialize();
      assert.match(text, /"kind":"semaphore","limit":2/);
      const copy = restoreLock(text, store);
      assert.equal(await copy.count(), 1);
      assert.equal(await copy.release(), true);
      assert.equal(await a.count(), 0);
    });

    it("has the lock's lifetime: signal and autoExtend", async () => {
      const store = makeStore();
      const s = semaphore(uniqueKey("sem-life"), 2, 100, store);
      const [ran] = await s.run(async (held) => {
        await sleep(350);
        assert.equal(held.signal.aborted, false, "extended past three TTLs");
      }, { autoExtend: true });
      assert.equal(ran, true);
      assert.equal(s.signal.aborted, true);
    });

    it("refuses a bad limit", () => {
      for (const limit of [0, -1, 1.5, Number.NaN, "3", undefined, 2 ** 32]) {
        assert.throws(() => semaphore(uniqueKey("sem-bad"), limit), (err) => err instanceof LockError && err.code === "INVALID_ARGUMENT" && /^locksmith: limit must be/.test(err.message), String(limit));
      }
    });
  });

  describe("readWriteLock()", () => {
    it("readers share, a writer is alone, and a waiting writer keeps new readers out", async () => {
      const store = makeStore();
      const rw = readWriteLock(uniqueKey("rw"), 5_000, store);
      const [r1, r2, w] = [rw.readLock(), rw.readLock(), rw.writeLock()];
      assert.equal(await r1.acquire(), true);
      assert.equal(await r2.acquire(), true, "readers share");
      assert.equal(await r1.count(), 2);
      assert.equal(await w.acquire(), false, "no writer while read");
      const writer = w.acquire({ timeout: 5_000, retryDelay: 5_000 });
      await sleep(50);
      assert.equal(await rw.readLock().acquire(), false, "a new reader waits behind the writer");
      await r1.release();
      await r2.release();
      assert.equal(await writer, true, "the writer gets in once the last reader leaves");
      assert.equal(await rw.readLock().acquire(), false, "no reader while written");
      assert.equal(await rw.writeLock().acquire(), false, "no second writer");
      await w.release();
      const r3 = rw.readLock();
      assert.equal(await r3.acquire(), true);
      await r3.release();
    });

    it("restores each kind as itself", async () => {
      const store = makeStore();
      const rw = readWriteLock(uniqueKey("rw-restore"), 5_000, store);
      const w = rw.writeLock();
      assert.equal(await w.acquire(), true);
      const copy = restoreLock(w.serialize(), store);
      assert.match(w.serialize(), /"kind":"write"/);
      assert.equal(await rw.readLock().acquire(), false);
      assert.equal(await copy.release(), true);
      assert.equal(await rw.readLock().acquire(), true);
    });
  });
  });
}

describe("stores without semaphores", () => {
  it("refuse them with UNSUPPORTED at the first call, taking nothing", async () => {
    const store = mapStore();
    const s = semaphore(uniqueKey("unsupported"), 2, 1_000, store);
    await assert.rejects(s.acquire(), (err) => err instanceof UnsupportedError && err.code === "UNSUPPORTED" && /^locksmith: /.test(err.message));
    await assert.rejects(readWriteLock(uniqueKey("unsupported"), 1_000, store).writeLock().acquire({ timeout: 50 }), (err) => err.code === "UNSUPPORTED");
    assert.equal(s.signal.aborted, true, "nothing held");
  });

  it("a store whose permit methods answer the wrong type breaks its contract, typed", async () => {
    const store = mapStore({ withPermits: true });
    store.countPermits = async () => "3";
    store.acquirePermit = async () => "yes";
    const s = semaphore(uniqueKey("contract"), 2, 1_000, store);
    await assert.rejects(s.acquire(), (err) => err.code === "STORE_CONTRACT_VIOLATION" && /store\.acquirePermit\(\) resolved to string "yes"/.test(err.message));
    await assert.rejects(s.count(), (err) => err.code === "STORE_CONTRACT_VIOLATION" && /countPermits/.test(err.message));
  });
});
