// The conformance suite of the JS API: every documented behaviour, run against one
// store. Each backend has a small test file that calls `conformance()`; files run in
// parallel, cases in order. Times are real and short, with slack for a loaded machine.
import assert from "node:assert/strict";
import { describe, it, before, after } from "node:test";

import { ls, sleep, uniqueKey } from "../support/target.mjs";

const { Lock, restoreLock, LockNotHeldError, LockError } = ls;

/**
 * @param {string} name
 * @param {{ makeStore: () => Promise<object> | object, closeStore?: (store: object) => Promise<void>, fencing: boolean, exactOwnership: boolean }} backend
 */
export function conformance(name, backend) {
  describe(`conformance: ${name}`, () => {
    let store;
    const lockOn = (key, ttl = 5_000) => new Lock(key, ttl, store);

    before(async () => {
      store = await backend.makeStore();
    });
    after(async () => {
      await backend.closeStore?.(store);
    });

    it("takes a free lock, and reports it held", async () => {
      const l = lockOn(uniqueKey("free"), 1_000);
      assert.equal(await l.isLocked(), false);
      assert.equal(await l.acquire(), true);
      assert.equal(await l.isLocked(), true);
      const left = await l.getRemainingTime();
      assert.ok(left > 0 && left <= 1_000, `remaining ${left}`);
      assert.equal(await l.release(), true);
      assert.equal(await l.isLocked(), false);
    });

    it("refuses a second holder", async () => {
      const key = uniqueKey("second");
      const [a, b] = [lockOn(key), lockOn(key)];
      assert.equal(await a.acquire(), true);
      assert.equal(await b.acquire(), false);
      assert.equal(await b.acquireImmediately(), false);
      assert.equal(await b.isLocked(), true);
      assert.equal(await b.release(), false);
      assert.equal(await a.isLocked(), true);
      assert.equal(await a.release(), true);
    });

    it("does not wait with timeout 0", async () => {
      const key = uniqueKey("nowait");
      const [a, b] = [lockOn(key), lockOn(key)];
      await a.acquire();
      const start = performance.now();
      assert.equal(await b.acquire({ timeout: 0, retryDelay: 1_000 }), false);
      assert.ok(performance.now() - start < 500);
      await a.release();
    });

    it("gives the lock to a waiter when freed within its timeout", async () => {
      const key = uniqueKey("waiter");
      const [a, b] = [lockOn(key), lockOn(key)];
      await a.acquire();
      const start = performance.now();
      const waiting = b.acquire({ timeout: 3_000, retryDelay: 25 });
      await sleep(100);
      assert.equal(await a.release(), true);
      assert.equal(await waiting, true);
      const waited = performance.now() - start;
      assert.ok(waited >= 90 && waited < 2_000, `waited ${waited}`);
      await b.release();
    });

    it("gives up at the timeout, having waited all of it", async () => {
      const key = uniqueKey("giveup");
      const [a, b] = [lockOn(key, 10_000), lockOn(key)];
      await a.acquire();
      const start = performance.now();
      assert.equal(await b.acquire({ timeout: 200, retryDelay: 30 }), false);
      const waited = performance.now() - start;
      assert.ok(waited >= 195 && waited < 2_000, `waited ${waited}`);
      await a.release();
    });

    it("makes its last attempt at the deadline", async () => {
      const key = uniqueKey("deadline");
      const [a, b] = [lockOn(key, 250), lockOn(key)];
      await a.acquire();
      // Retries at 0, 120, 240 ms find it held; the attempt at the 350 ms deadline does not.
      assert.equal(await b.acquire({ timeout: 350, retryDelay: 120 }), true);
      await b.release();
    });

    it("does not let an expired holder's late release free the next holder", async () => {
      const key = uniqueKey("late");
      const [a, b] = [lockOn(key, 80), lockOn(key)];
      await a.acquire();
      await sleep(160);
      assert.equal(await b.acquire(), true);
      assert.equal(await a.release(), false);
      assert.equal(await b.isLocked(), true);
      assert.equal(await lockOn(key).acquire(), false);
      assert.equal(await a.isExpired(), true);
      assert.equal(await b.isExpired(), false);
      await b.release();
    });

    it("extends the expiry", async () => {
      // 200 ms of slack for the round trips (an HTTP store on a loaded machine).
      const l = lockOn(uniqueKey("extend"), 500);
      await l.acquire();
      await sleep(300);
      await l.extend();
      await sleep(300);
      assert.equal(await l.isLocked(), true, "held past the first TTL");
      await l.extend(5_000);
      const left = await l.getRemainingTime();
      assert.ok(left > 500 && left <= 5_000, `remaining ${left}`);
      assert.equal(l.ttlMs, 500);
      await l.release();
    });

    it("throws LockNotHeldError when extending a lost lock", async () => {
      const key = uniqueKey("extendlost");
      const l = lockOn(key, 80);
      await l.acquire();
      await sleep(160);
      await assert.rejects(l.extend(), LockNotHeldError);
      const other = lockOn(key);
      await other.acquire();
      const err = await l.extend().catch((e) => e);
      assert.ok(err instanceof LockNotHeldError && err instanceof LockError && err instanceof Error);
      assert.equal(err.name, "LockNotHeldError");
      assert.equal(err.code, "LOCK_NOT_HELD");
      assert.equal(err.key, key);
      assert.match(err.message, /^locksmith: /);
      assert.ok((await other.getRemainingTime()) > 1_000, "the other hold is untouched");
      await other.release();
    });

    it("throws LockNotHeldError when extending a lock never taken or released", async () => {
      const l = lockOn(uniqueKey("extendnever"));
      await assert.rejects(l.extend(), { name: "LockNotHeldError", code: "LOCK_NOT_HELD" });
      assert.equal(await l.isLocked(), false);
      await l.acquire();
      await l.release();
      await assert.rejects(l.extend(), LockNotHeldError);
    });

    it("expires on its own", async () => {
      const key = uniqueKey("expires");
      const l = lockOn(key, 100);
      await l.acquire();
      await sleep(200);
      assert.equal(await l.isLocked(), false);
      assert.equal(await l.getRemainingTime(), null);
      assert.equal(await lockOn(key).acquire(), true);
    });

    it("reports no remaining time when unheld", async () => {
      const l = lockOn(uniqueKey("remaining"));
      assert.equal(await l.getRemainingTime(), null);
      await l.acquire();
      assert.equal(typeof (await l.getRemainingTime()), "number");
      await l.release();
      assert.equal(await l.getRemainingTime(), null);
    });

    it("knows when it expired", async () => {
      const key = uniqueKey("expired");
      const l = lockOn(key, 100);
      assert.equal(await l.isExpired(), false, "never acquired");
      await l.acquire();
      assert.equal(await l.isExpired(), false, "held");
      await sleep(200);
      assert.equal(await l.isExpired(), true, "expired, free");
      const other = lockOn(key);
      await other.acquire();
      assert.equal(await l.isExpired(), true, "expired, someone else holds it");
      await other.release();
      assert.equal(await other.isExpired(), false, "released is not expired");
    });

    it("hands a lock to another handle with serialize/restoreLock, to release", async () => {
      const key = uniqueKey("handoff");
      const a = lockOn(key, 60_000);
      assert.throws(() => a.serialize(), LockNotHeldError);
      await a.acquire();
      const text = a.serialize();
      assert.deepEqual(Object.keys(JSON.parse(text)).slice(0, 3), ["key", "ttlMs", "owner"]);
      const b = restoreLock(text, store);
      assert.equal(b.key, key);
      assert.equal(b.ttlMs, 60_000);
      assert.equal(b.fencingToken, a.fencingToken);
      assert.equal(await b.release(), true);
      assert.equal(await a.isLocked(), false);
      assert.equal(await a.release(), false);
    });

    it("hands a lock to another handle with serialize/restoreLock, to extend", async () => {
      const key = uniqueKey("handoffext");
      // 200 ms of slack for the round trips, as in "extends the expiry".
      const a = lockOn(key, 400);
      await a.acquire();
      const b = restoreLock(a.serialize(), store);
      await sleep(200);
      await b.extend(2_000);
      await sleep(300);
      if (backend.exactOwnership) assert.equal(await a.isExpired(), false);
      assert.equal(await a.release(), true);
    });

    it("lets exactly one of many concurrent acquirers win", async () => {
      const key = uniqueKey("race");
      const locks = Array.from({ length: 32 }, () => lockOn(key));
      const results = await Promise.all(locks.map((l) => l.acquire()));
      assert.equal(results.filter(Boolean).length, 1);
      await Promise.all(locks.map((l) => l.release()));
      assert.equal(await lockOn(key).isLocked(), false);
    });

    it("serializes concurrent run() calls with waiting", async () => {
      const key = uniqueKey("runs");
      let inside = 0;
      let maxInside = 0;
      let done = 0;
      await Promise.all(
        Array.from({ length: 8 }, () =>
          lockOn(key).run(
            async () => {
              inside += 1;
              maxInside = Math.max(maxInside, inside);
              await sleep(5);
              inside -= 1;
              done += 1;
            },
            { timeout: 5_000, retryDelay: 5 },
          ),
        ),
      );
      assert.equal(maxInside, 1);
      assert.equal(done, 8);
    });

    it("does not take its own key twice, nor wait for itself", async () => {
      const l = lockOn(uniqueKey("reentrant"));
      await l.acquire();
      const start = performance.now();
      assert.equal(await l.acquire({ timeout: 1_000 }), false);
      assert.ok(performance.now() - start < 500);
      assert.equal(await l.release(), true);
      assert.equal(await l.acquire(), true);
      await l.release();
    });

    it("releases only its own hold", async () => {
      const l = lockOn(uniqueKey("release"));
      assert.equal(await l.release(), false);
      await l.acquire();
      assert.equal(await l.release(), true);
      assert.equal(await l.release(), false, "double release");
    });

    it("fencing tokens grow with every hold", async () => {
      const key = uniqueKey("fencing");
      let last = 0;
      for (let i = 0; i < 3; i++) {
        const l = lockOn(key);
        assert.equal(l.fencingToken, null);
        await l.acquire();
        if (backend.fencing) {
          assert.equal(typeof l.fencingToken, "number");
          assert.ok(l.fencingToken > last);
          last = l.fencingToken;
        } else {
          assert.equal(l.fencingToken, null);
        }
        await l.release();
        assert.equal(l.fencingToken, null);
      }
    });

    it("run() acquires, runs, returns [true, result] and releases", async () => {
      const l = lockOn(uniqueKey("run"));
      const [ran, result] = await l.run(async (held) => {
        assert.equal(held, l);
        assert.equal(await l.isLocked(), true);
        return "charged";
      });
      assert.deepEqual([ran, result], [true, "charged"]);
      assert.equal(await l.isLocked(), false);
    });

    it("run() does not call fn when the lock is taken", async () => {
      const key = uniqueKey("runtaken");
      const holder = lockOn(key);
      await holder.acquire();
      let called = false;
      assert.deepEqual(await lockOn(key).run(() => (called = true)), [false, undefined]);
      assert.deepEqual(await lockOn(key).runImmediately(() => (called = true)), [false, undefined]);
      assert.equal(called, false);
      await holder.release();
    });

    it("run() releases when fn throws synchronously, rejects, or returns", async () => {
      const l = lockOn(uniqueKey("runthrows"));
      await assert.rejects(
        l.run(() => {
          throw new Error("sync boom");
        }),
        /sync boom/,
      );
      assert.equal(await l.isLocked(), false);
      await assert.rejects(
        l.run(async () => {
          throw new TypeError("async boom");
        }),
        TypeError,
      );
      assert.equal(await l.isLocked(), false);
      assert.deepEqual(await l.run(() => 7), [true, 7]);
      assert.equal(await l.isLocked(), false);
    });

    it("run() with a timeout waits for the lock", async () => {
      const key = uniqueKey("runwait");
      const holder = lockOn(key);
      await holder.acquire();
      setTimeout(() => holder.release(), 80);
      const [ran] = await lockOn(key).run(() => {}, { timeout: 3_000, retryDelay: 20 });
      assert.equal(ran, true);
    });

    it("works with the plain LockStore interface of the store", async () => {
      const key = uniqueKey("plain");
      const taken = await store.acquire(key, "owner-a", 5_000);
      // true, or a fencing token for a store that gives them
      assert.ok(taken === true || (backend.fencing && Number.isSafeInteger(taken) && taken > 0), `acquire resolved to ${taken}`);
      assert.equal(await store.acquire(key, "owner-b", 5_000), false);
      assert.equal(await store.isLocked(key), true);
      assert.equal(await store.release(key, "owner-b"), false);
      assert.equal(await store.extend(key, "owner-b", 5_000), false);
      assert.equal(await store.extend(key, "owner-a", 9_000), true);
      assert.ok((await store.remainingTime(key)) > 5_000);
      assert.equal(await store.release(key, "owner-a"), true);
      assert.equal(await store.remainingTime(key), null);
    });
  });
}
