// An acquire's `signal` (an AbortSignal in the options): aborting ends a wait with
// nothing held, an already-aborted signal takes nothing, aborting after the grant does
// nothing to the hold; the rejection is the signal's reason, or an AbortError. On the
// memory store, a user's own asynchronous store, a real redis-server (standalone and
// Cluster) and PostgreSQL, every handle kind, in the build under test.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

import { requirePostgres } from "./support/postgres-server.mjs";
import { clusterStore, postgresStore, redisStore } from "./support/server-stores.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "./support/target.mjs";

failOnUnhandledRejections();

/** Rejects the acquire of `handle` `ms` after it started waiting; resolves to [error, elapsed ms]. */
async function abortedAfter(handle, ms, options = {}) {
  const controller = new AbortController();
  const started = performance.now();
  setTimeout(() => controller.abort(options.reason), ms);
  const err = await handle.acquire({ timeout: 10_000, retryDelay: 2_000, signal: controller.signal, ...options.acquire }).then(
    (taken) => assert.fail(`the acquire resolved ${taken} instead of rejecting`),
    (e) => e,
  );
  return [err, performance.now() - started];
}

/** The cases every store runs: `make(key, kind)` gives a handle of that kind on the store. */
function abortCases(name, storeOf) {
  describe(`an acquire's signal on ${name}`, () => {
    const make = (key, kind = "lock") => {
      const store = storeOf();
      if (kind === "lock") return ls.lock(key, 10_000, store);
      if (kind === "semaphore") return ls.semaphore(key, 1, 10_000, store);
      const rw = ls.readWriteLock(key, 10_000, store);
      return kind === "read" ? rw.readLock() : rw.writeLock();
    };

    for (const kind of ["lock", "semaphore", "write"]) {
      it(`ends a waiting ${kind} at the abort, with an AbortError, holding nothing`, async () => {
        const key = uniqueKey(`abort-${kind}`);
        const holder = make(key, kind);
        assert.equal(await holder.acquire(), true);
        const waiter = make(key, kind);
        const [err, elapsed] = await abortedAfter(waiter, 150);
        assert.ok(err instanceof ls.AbortError, `an AbortError: ${err}`);
        assert.ok(err instanceof ls.LockError);
        assert.equal(err.name, "AbortError");
        assert.equal(err.code, "ABORTED");
        assert.match(err.message, /^locksmith: the acquire of .* was aborted/);
        assert.equal(err.key, key);
        assert.ok(elapsed < 1_500, `the wait ended at the abort (${Math.round(elapsed)} ms), not at a 2 s retry`);
        assert.equal(await waiter.release(), false, "the aborted handle holds nothing");
        assert.equal(await holder.release(), true);
        // Nothing of the aborted wait is left in the store: the key is free at once.
        const next = make(key, kind);
        assert.equal(await next.acquire(), true);
        await next.release();
      });
    }

    it("rejects with the signal's own reason when it gave one", async () => {
      const key = uniqueKey("abort-reason");
      const holder = make(key);
      await holder.acquire();
      const reason = new Error("the request was cancelled");
      const [err] = await abortedAfter(make(key), 50, { reason });
      assert.equal(err, reason);
      await holder.release();
    });

    it("takes nothing with an already-aborted signal, even on a free key", async () => {
      const key = uniqueKey("abort-already");
      const l = make(key);
      const signal = AbortSignal.abort();
      await assert.rejects(l.acquire({ signal }), { name: "AbortError", code: "ABORTED" });
      await assert.rejects(l.acquireImmediately({ signal }), { code: "ABORTED" });
      let ran = false;
      await assert.rejects(
        l.runImmediately(
          () => {
            ran = true;
          },
          { signal },
        ),
        { code: "ABORTED" },
      );
      assert.equal(ran, false);
      assert.equal(await make(key).isLocked(), false);
    });

    it("does nothing to a hold when it aborts after the grant", async () => {
      const key = uniqueKey("abort-late");
      const l = make(key);
      const controller = new AbortController();
      assert.equal(await l.acquire({ timeout: 1_000, signal: controller.signal }), true);
      controller.abort();
      await sleep(50);
      assert.equal(await l.isLocked(), true);
      assert.equal(l.signal.aborted, false, "the hold's own signal is not the acquire's");
      assert.equal(await l.release(), true);
    });

    it("ends run()'s wait without running the function; AbortSignal.timeout's reason is its TimeoutError", async () => {
      const key = uniqueKey("abort-run");
      const holder = make(key);
      await holder.acquire();
      let ran = false;
      const err = await make(key)
        .run(
          () => {
            ran = true;
          },
          { timeout: 10_000, signal: AbortSignal.timeout(100) },
        )
        .catch((e) => e);
      assert.equal(ran, false);
      assert.equal(err.name, "TimeoutError");
      await holder.release();
    });
  });
}

abortCases("the memory store", () => memory);
let memory;
before(() => {
  memory = new ls.MemoryLockStore();
});

describe("an acquire's signal: bad input", () => {
  it("refuses a signal that is not an AbortSignal, and unknown options of the immediate variants", async () => {
    const l = ls.lock(uniqueKey("abort-bad"), 5_000, new ls.MemoryLockStore());
    await assert.rejects(l.acquire({ signal: "stop" }), { code: "INVALID_ARGUMENT", message: /^locksmith: signal must be an AbortSignal/ });
    // Shaped like a signal but without removeEventListener: refused before anything is taken.
    const halfSignal = { aborted: false, addEventListener() {} };
    await assert.rejects(l.acquire({ timeout: 100, signal: halfSignal }), { code: "INVALID_ARGUMENT" });
    await assert.rejects(l.acquireImmediately({ timeout: 5 }), { code: "INVALID_ARGUMENT", message: /unknown option `timeout` for acquireImmediately\(\)/ });
    await assert.rejects(
      l.runImmediately(() => {}, { retryDelay: 5 }),
      { code: "INVALID_ARGUMENT" },
    );
    assert.equal(await l.isLocked(), false);
  });

  it("takes a null signal as none", async () => {
    const l = ls.lock(uniqueKey("abort-null"), 5_000, new ls.MemoryLockStore());
    assert.equal(await l.acquire({ timeout: 10, signal: null }), true);
    assert.equal(await l.release(), true);
  });

  it("says a semaphore without its limit is missing it", () => {
    assert.throws(() => ls.semaphore(uniqueKey("abort-sem")), { code: "INVALID_ARGUMENT", message: /got undefined: semaphore\(key, limit/ });
  });
});

describe("an acquire's signal on a store of the user's own", () => {
  it("releases a grant whose answer was still on its way when the wait was aborted", async () => {
    // A store that takes the key at once and answers 200 ms later.
    const inner = new ls.MemoryLockStore();
    const slow = {
      acquire: async (key, owner, ttl) => {
        const taken = await inner.acquire(key, owner, ttl);
        await sleep(200);
        return taken;
      },
      release: (key, owner) => inner.release(key, owner),
      extend: (key, owner, ttl) => inner.extend(key, owner, ttl),
      isLocked: (key) => inner.isLocked(key),
      remainingTime: (key) => inner.remainingTime(key),
    };
    const key = uniqueKey("abort-in-flight");
    const l = ls.lock(key, 10_000, slow);
    const controller = new AbortController();
    const acquiring = l.acquire({ timeout: 5_000, signal: controller.signal });
    await sleep(50);
    assert.equal(await inner.isLocked(key), true, "the store granted the attempt in flight");
    controller.abort();
    await assert.rejects(acquiring, { code: "ABORTED" });
    for (let i = 0; i < 50 && (await inner.isLocked(key)); i++) await sleep(20);
    assert.equal(await inner.isLocked(key), false, "the grant that raced the abort was released");
  });

  it("says a hold may remain when the abort came while an attempt was on its way, and frees it once it settles", async () => {
    // A store that applies an acquire 200 ms after it was sent: a release sent at the abort
    // would find nothing and the late grant would stay for its TTL.
    const inner = new ls.MemoryLockStore();
    const late = {
      acquire: async (key, owner, ttl) => {
        await sleep(200);
        return inner.acquire(key, owner, ttl);
      },
      release: (key, owner) => inner.release(key, owner),
      extend: (key, owner, ttl) => inner.extend(key, owner, ttl),
      isLocked: (key) => inner.isLocked(key),
      remainingTime: (key) => inner.remainingTime(key),
    };
    for (const reason of [undefined, new Error("request gone")]) {
      const key = uniqueKey("abort-late");
      const controller = new AbortController();
      const acquiring = ls.lock(key, 10_000, late).acquire({ timeout: 5_000, signal: controller.signal });
      await sleep(50);
      const started = performance.now();
      controller.abort(reason);
      const err = await acquiring.catch((e) => e);
      assert.ok(performance.now() - started < 100, "answered at the abort");
      assert.equal(err.code, "ABORTED");
      assert.equal(err.holdMayRemain, true, "an attempt was on its way");
      assert.match(err.message, /released once it settles/);
      if (reason) assert.equal(err.reason, reason, "the signal's own reason rides along");
      await sleep(300);
      for (let i = 0; i < 50 && (await inner.isLocked(key)); i++) await sleep(20);
      assert.equal(await inner.isLocked(key), false, "the late grant was released once the attempt settled");
    }
    // An abort between attempts: nothing may remain, and a reason of one's own is the rejection.
    const holder = ls.lock(uniqueKey("abort-between"), 10_000, inner);
    await holder.acquire();
    const reason = new Error("gone");
    const controller = new AbortController();
    const waiting = ls.lock(holder.key, 10_000, inner).acquire({ timeout: 5_000, retryDelay: 1_000, signal: controller.signal });
    await sleep(50);
    controller.abort(reason);
    await assert.rejects(waiting, (err) => err === reason);
    await holder.release();
  });
});

describe("on Redis", () => {
  abortCases("a real redis-server", redisStore());
});

describe("on a Redis Cluster", () => {
  abortCases("a Redis Cluster", clusterStore());
});

describe("on PostgreSQL", await requirePostgres(), () => {
  abortCases("PostgreSQL", postgresStore());
});
