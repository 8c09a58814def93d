// Weighted semaphore permits through the API: `{ permits }` in acquire(), run() and the
// immediate variants; the handle's next acquire without it takes one again; bad values
// and other kinds refused; a store that does not carry weights answers UNSUPPORTED. On
// the memory store, a Redis Cluster (the weights live beside the holders, in the key's
// slot) and a JS store, in the build under test. (Every store's own weights:
// js-tests/conformance/primitives.test.mjs.)
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

import { mapStore } from "./support/js-stores.mjs";
import { clusterStore } from "./support/server-stores.mjs";
import { failOnUnhandledRejections, ls, uniqueKey } from "./support/target.mjs";

failOnUnhandledRejections();

function weightCases(name, storeOf) {
  describe(`weighted permits on ${name}`, () => {
    it("take permits in acquire(), acquireImmediately(), run() and runImmediately(); the next acquire without them takes one", async () => {
      const key = uniqueKey("permits-api");
      const a = ls.semaphore(key, 4, 10_000, storeOf());
      const b = ls.semaphore(key, 4, 10_000, storeOf());
      assert.equal(await a.acquireImmediately({ permits: 3 }), true);
      assert.equal(await a.count(), 3);
      assert.equal(await b.acquire({ timeout: 50, retryDelay: 10, permits: 2 }), false, "3 + 2 > 4");
      const [ran, got] = await b.runImmediately(async () => b.count(), { permits: 1 });
      assert.deepEqual([ran, got], [true, 4]);
      assert.equal(await a.release(), true);
      // The handle took three last time; a plain acquire() takes one.
      assert.equal(await a.acquire(), true);
      assert.equal(await a.count(), 1);
      assert.equal(await a.release(), true);
      const [ranAll, counted] = await b.run(async () => b.count(), { timeout: 1_000, permits: 4 });
      assert.deepEqual([ranAll, counted], [true, 4]);
      assert.equal(await b.count(), 0);
    });

    it("refuse permits outside 1..limit, of the wrong type, and on other kinds", async () => {
      const key = uniqueKey("permits-bad");
      const sem = ls.semaphore(key, 3, 10_000, storeOf());
      for (const permits of [0, 4, 1.5, -1]) {
        await assert.rejects(sem.acquire({ permits }), { code: "INVALID_ARGUMENT", message: /^locksmith: permits must be a whole number/ }, String(permits));
      }
      await assert.rejects(sem.acquireImmediately({ permits: "2" }), {
        code: "INVALID_ARGUMENT",
        message: /^locksmith: permits must be a whole number of permits; got string/,
      });
      await assert.rejects(ls.lock(key, 10_000, storeOf()).acquire({ permits: 2 }), { code: "INVALID_ARGUMENT", message: /permits is a semaphore's option/ });
      await assert.rejects(ls.readWriteLock(key, 10_000, storeOf()).writeLock().acquire({ permits: 2 }), { code: "INVALID_ARGUMENT" });
      // Any value on another kind, as the types have it (`permits` is in a Semaphore's options only).
      for (const handle of [
        ls.lock(key, 10_000, storeOf()),
        ls.readWriteLock(key, 10_000, storeOf()).readLock(),
        ls.lockAll([key, `${key}:b`], 10_000, storeOf()),
      ]) {
        await assert.rejects(handle.acquire({ permits: 1 }), { code: "INVALID_ARGUMENT", message: /permits is a semaphore's option/ });
        await assert.rejects(
          handle.runImmediately(async () => {}, { permits: 1 }),
          { code: "INVALID_ARGUMENT" },
        );
        assert.equal(await handle.isLocked(), false, "nothing taken");
      }
      assert.equal(await sem.count(), 0, "nothing taken by the refusals");
    });
  });
}

let memory;
before(() => {
  memory = new ls.MemoryLockStore();
});
weightCases("the memory store", () => memory);

describe("on a Redis Cluster", () => {
  weightCases("a Redis Cluster", clusterStore());
});

describe("weighted permits on a store that does not carry them", () => {
  it("take one permit, and answer UNSUPPORTED for more, saying why", async () => {
    const store = mapStore({ withPermits: true });
    const sem = ls.semaphore(uniqueKey("permits-unsupported"), 3, 10_000, store);
    assert.equal(await sem.acquire({ permits: 1 }), true);
    assert.equal(await sem.release(), true);
    await assert.rejects(sem.acquire({ permits: 2 }), { code: "UNSUPPORTED", message: /^locksmith: this store takes one permit per semaphore hold/ });
  });
});

describe("a hold whose release failed, then a wait while the store cannot tell", () => {
  it("does not take a second permit beside it (it would count twice, and the first would be nobody's)", async () => {
    const store = mapStore({ withPermits: true });
    const failNext = new Set();
    for (const method of ["releasePermit", "permitRemainingTime"]) {
      const real = store[method];
      store[method] = async (...args) => {
        if (failNext.delete(method)) throw new Error("ECONNRESET");
        return real(...args);
      };
    }
    const key = uniqueKey("release-failed");
    const s = ls.semaphore(key, 2, 5_000, store);
    assert.equal(await s.acquire(), true);
    failNext.add("releasePermit");
    await assert.rejects(s.release(), { code: "STORE_UNAVAILABLE" });
    failNext.add("permitRemainingTime"); // the wait's first check of the old hold fails
    const started = performance.now();
    assert.equal(await s.acquire({ timeout: 2_000, retryDelay: 50 }), false, "it still holds its permit: not re-entrant");
    assert.ok(performance.now() - started < 1_000, "answered once the store could tell, not at the deadline");
    assert.equal(await store.countPermits(key, "semaphore"), 1);
    assert.equal(await s.release(), true);
    assert.equal(await store.countPermits(key, "semaphore"), 0, "no permit left that nobody owns");
  });
});
