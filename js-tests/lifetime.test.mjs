// A hold's lifetime from JS: `lock.signal`, the `autoExtend` option, and async disposal,
// on the test kit's TestStore (the memory store's locks on a virtual clock: exact times,
// no sleeping) and on plain JS stores (real time), in both builds.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { TestStore } from "../js/testing.mjs";
import { mapStore } from "./support/js-stores.mjs";
import { startRedis } from "./support/redis-server.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "./support/target.mjs";

const { lock, Lock, restoreLock, LockNotHeldError, StoreUnavailableError } = ls;

await failOnUnhandledRejections();

/**
 * Resolves with the signal's reason once it aborts, and how long that took. Holds the
 * event loop open meanwhile: locksmith's own timers for a hold never do (a process
 * whose only work left is a held lock may exit), so a test waiting on one must.
 */
function aborted(signal) {
  const start = performance.now();
  const open = setInterval(() => {}, 1_000);
  return new Promise((resolve) => {
    const done = () => {
      clearInterval(open);
      resolve({ reason: signal.reason, after: performance.now() - start });
    };
    if (signal.aborted) done();
    else signal.addEventListener("abort", done, { once: true });
  });
}

/** A hold's local deadline after a TTL of `ttlMs`: the TTL less the drift allowance, 1 % of it + 2 ms (docs/guide.md). */
const localDeadline = (ttlMs) => ttlMs - (Math.floor(ttlMs / 100) + 2);

describe("lock.signal on the test store", () => {
  it("is already aborted when nothing is held", async () => {
    const l = new Lock(uniqueKey("signal"), 1_000, new TestStore());
    assert.equal(l.signal.aborted, true);
    assert.ok(l.signal.reason instanceof LockNotHeldError);
  });

  it("aborts as released when the holder releases", async () => {
    const store = new TestStore();
    const l = new Lock(uniqueKey("signal"), 5_000, store);
    assert.equal(await l.acquire(), true);
    const signal = l.signal;
    assert.equal(signal.aborted, false);
    assert.equal(l.signal, signal, "the same signal for the same hold");
    assert.equal(await l.release(), true);
    assert.equal(signal.aborted, true, "aborted by the time release() resolves");
    assert.equal(signal.reason.name, "AbortError");
    assert.match(signal.reason.message, /^locksmith: the lock on ".*" was released$/);
    assert.equal(l.signal.aborted, true);
    await store.assertNothingHeld();
  });

  it("aborts as lost when the TTL passes without an extend, at the hold's local deadline", async () => {
    const store = new TestStore();
    const l = new Lock(uniqueKey("signal"), 150, store);
    assert.equal(await l.acquire(), true);
    const signal = l.signal;
    await store.clock.advance(localDeadline(150) - 1);
    assert.equal(signal.aborted, false, `still live at ${store.clock.now()} ms`);
    await store.clock.advance(1);
    assert.equal(signal.aborted, true, `lost at ${store.clock.now()} ms for a 150 ms TTL`);
    assert.ok(signal.reason instanceof LockNotHeldError, String(signal.reason));
    assert.equal(signal.reason.code, "LOCK_NOT_HELD");
  });

  it("is already aborted when first read after the TTL passed", async () => {
    const store = new TestStore();
    const l = new Lock(uniqueKey("signal"), 100, store);
    assert.equal(await l.acquire(), true);
    await store.clock.advance(100);
    const signal = l.signal;
    assert.equal(signal.aborted, true, "a hold past its TTL is not live");
    assert.ok(signal.reason instanceof LockNotHeldError, String(signal.reason));
    await assert.rejects(l.extend(), (err) => err.code === "LOCK_NOT_HELD", "nothing succeeds on a lost hold");
  });

  it("run() rejects with LockNotHeldError carrying the function's outcome when the hold was lost before it settled", async () => {
    const key = uniqueKey("run-lost");
    const store = new TestStore();
    const { clock } = store;
    const lost = new Lock(key, 100, store).run(async () => (await clock.sleep(200), "work finished")).catch((e) => e);
    await clock.advance(200);
    const err = await lost;
    assert.ok(err instanceof LockNotHeldError, String(err));
    assert.equal(err.result, "work finished");
    assert.match(err.message, /was lost before run\(\)'s function settled/);
    const thrown = new Error("the work failed");
    const failed = new Lock(key, 100, store)
      .run(async () => {
        await clock.sleep(200);
        throw thrown;
      })
      .catch((e) => e);
    await clock.advance(200);
    const err2 = await failed;
    assert.ok(err2 instanceof LockNotHeldError, String(err2));
    assert.equal(err2.cause, thrown);
    // A hold that lasts: the result as ever.
    const lasting = new Lock(key, 5_000, store).run(async () => (await clock.sleep(20), "ok"));
    await clock.advance(20);
    assert.deepEqual(await lasting, [true, "ok"]);
    await store.assertNothingHeld();
  });

  it("a new hold gets a new signal", async () => {
    const l = new Lock(uniqueKey("signal"), 5_000, new TestStore());
    assert.equal(await l.acquire(), true);
    const first = l.signal;
    await l.release();
    assert.equal(await l.acquire(), true);
    assert.notEqual(l.signal, first);
    assert.equal(l.signal.aborted, false);
    await l.release();
  });
});

describe("autoExtend on the test store", () => {
  it("keeps the hold through work that lasts many TTLs, then releases", async () => {
    const store = new TestStore();
    const { clock } = store;
    const key = uniqueKey("auto");
    const l = new Lock(key, 300, store);
    const running = l.run(
      async (held) => {
        for (let i = 0; i < 10; i++) {
          await clock.sleep(100);
          assert.equal(held.signal.aborted, false, `still held at ${(i + 1) * 100} ms`);
          assert.equal(await new Lock(key, 1_000, store).acquire(), false, "nobody else gets in");
        }
        return "done";
      },
      { autoExtend: true },
    );
    await clock.advance(1_000);
    assert.deepEqual(await running, [true, "done"]);
    assert.equal(clock.now(), 1_000, "ten TTLs and more of work, on the clock");
    assert.equal(await new Lock(key, 1_000, store).isLocked(), false, "released at the end");
    await store.assertNothingHeld();
  });

  it("stops at maxHoldMs; the hold then expires and the signal aborts", async () => {
    const store = new TestStore();
    const l = new Lock(uniqueKey("auto-cap"), 100, store);
    assert.equal(await l.acquire({ autoExtend: { intervalMs: 30, maxHoldMs: 200 } }), true);
    const signal = l.signal;
    // Extended every 30 ms up to the cap: the last extend, at 180 ms, holds to 280 ms.
    const lostAt = 180 + localDeadline(100);
    await store.clock.advance(lostAt - 1);
    assert.equal(signal.aborted, false, `past the cap, still live on the last extend at ${store.clock.now()} ms`);
    await store.clock.advance(1);
    assert.equal(signal.aborted, true, `lost at ${store.clock.now()} ms (cap 200 + TTL 100)`);
    assert.equal(signal.reason.code, "LOCK_NOT_HELD");
    await store.clock.advance(3);
    await store.assertNothingHeld();
  });

  it("sees a hold taken away behind its back, at its next extend", async () => {
    const store = new TestStore();
    const key = uniqueKey("auto-theft");
    const l = new Lock(key, 1_000, store);
    assert.equal(await l.acquire({ autoExtend: { intervalMs: 40 } }), true);
    const signal = l.signal;
    const copy = restoreLock(l.serialize(), store);
    assert.equal(await copy.release(), true);
    const thief = new Lock(key, 5_000, store);
    assert.equal(await thief.acquire(), true);
    await store.clock.advance(39);
    assert.equal(signal.aborted, false, "not yet: the next extend is at 40 ms");
    await store.clock.advance(1);
    assert.equal(signal.aborted, true, "noticed at the extend at 40 ms, long before the TTL ran out");
    assert.equal(signal.reason.code, "LOCK_NOT_HELD");
    assert.equal(await thief.isExpired(), false, "the thief's hold was left alone");
    await thief.release();
    await store.assertNothingHeld();
  });

  it("refuses a bad autoExtend without taking the lock", async () => {
    const store = new TestStore();
    const l = new Lock(uniqueKey("auto-bad"), 100, store);
    const bad = [
      [{ autoExtend: { intervalMs: 51 } }, /autoExtend\.intervalMs must be at most half the lock's TTL/],
      [{ autoExtend: { interval: 10 } }, /unknown option `interval` for autoExtend; did you mean `intervalMs`\?/],
      [{ autoExtend: "yes" }, /autoExtend must be true, false or/],
      [{ autoExtend: { maxHoldMs: -1 } }, /autoExtend\.maxHoldMs must be/],
    ];
    for (const [options, message] of bad) {
      await assert.rejects(l.acquire(options), (err) => err.code === "INVALID_ARGUMENT" && message.test(err.message));
    }
    assert.equal(await l.isLocked(), false);
    await store.assertNothingHeld();
  });
});

const stores = {
  // The built-in memory store's own path (synchronous, release signals), on real time.
  "the memory store": () => new ls.MemoryLockStore(),
  "a plain JS store": () => mapStore(),
  "a plain JS store with isHeldBy": () => mapStore({ withIsHeldBy: true }),
  "a plain JS store with ownerRemainingTime": () => mapStore({ withOwnerRemainingTime: true }),
};

for (const [name, makeStore] of Object.entries(stores)) {
  describe(`lock.signal on ${name}`, () => {
    it("is already aborted when nothing is held", async () => {
      const l = new Lock(uniqueKey("signal"), 1_000, makeStore());
      assert.equal(l.signal.aborted, true);
      assert.ok(l.signal.reason instanceof LockNotHeldError);
    });

    it("aborts as released when the holder releases", async () => {
      const l = new Lock(uniqueKey("signal"), 5_000, makeStore());
      assert.equal(await l.acquire(), true);
      const signal = l.signal;
      assert.equal(signal.aborted, false);
      assert.equal(l.signal, signal, "the same signal for the same hold");
      assert.equal(await l.release(), true);
      assert.equal(signal.aborted, true, "aborted by the time release() resolves");
      assert.equal(signal.reason.name, "AbortError");
      assert.match(signal.reason.message, /^locksmith: the lock on ".*" was released$/);
      assert.equal(l.signal.aborted, true);
    });

    it("aborts as lost when the TTL passes without an extend", async () => {
      const l = new Lock(uniqueKey("signal"), 150, makeStore());
      assert.equal(await l.acquire(), true);
      const { reason, after } = await aborted(l.signal);
      assert.ok(reason instanceof LockNotHeldError, String(reason));
      assert.equal(reason.code, "LOCK_NOT_HELD");
      assert.ok(after >= 100 && after < 2_000, `lost after ${Math.round(after)} ms for a 150 ms TTL`);
    });

    it("is already aborted when first read after the TTL passed", async () => {
      const l = new Lock(uniqueKey("signal"), 100, makeStore());
      assert.equal(await l.acquire(), true);
      await sleep(180);
      const signal = l.signal;
      assert.equal(signal.aborted, true, "a hold past its TTL is not live");
      assert.ok(signal.reason instanceof LockNotHeldError, String(signal.reason));
      await assert.rejects(l.extend(), (err) => err.code === "LOCK_NOT_HELD", "nothing succeeds on a lost hold");
    });

    it("run() rejects with LockNotHeldError carrying the function's outcome when the hold was lost before it settled", async () => {
      const key = uniqueKey("run-lost");
      const store = makeStore();
      const err = await new Lock(key, 100, store).run(async () => (await sleep(200), "work finished")).catch((e) => e);
      assert.ok(err instanceof LockNotHeldError, String(err));
      assert.equal(err.result, "work finished");
      assert.match(err.message, /was lost before run\(\)'s function settled/);
      const thrown = new Error("the work failed");
      const err2 = await new Lock(key, 100, store)
        .run(async () => {
          await sleep(200);
          throw thrown;
        })
        .catch((e) => e);
      assert.ok(err2 instanceof LockNotHeldError, String(err2));
      assert.equal(err2.cause, thrown);
      // A hold that lasts: the result as ever.
      assert.deepEqual(await new Lock(key, 5_000, store).run(async () => (await sleep(20), "ok")), [true, "ok"]);
    });

    it("a new hold gets a new signal", async () => {
      const l = new Lock(uniqueKey("signal"), 5_000, makeStore());
      assert.equal(await l.acquire(), true);
      const first = l.signal;
      await l.release();
      assert.equal(await l.acquire(), true);
      assert.notEqual(l.signal, first);
      assert.equal(l.signal.aborted, false);
      await l.release();
    });
  });

  describe(`autoExtend on ${name}`, () => {
    it("keeps the hold through work that lasts many TTLs, then releases", async () => {
      const store = makeStore();
      const key = uniqueKey("auto");
      // Extended every 100 ms (a third of the TTL): a stall of up to ~200 ms on a loaded
      // machine still finds the hold alive.
      const l = new Lock(key, 300, store);
      const [ran, result] = await l.run(
        async (held) => {
          for (let i = 0; i < 10; i++) {
            await sleep(100);
            assert.equal(held.signal.aborted, false, `still held at ${(i + 1) * 100} ms`);
            assert.equal(await new Lock(key, 1_000, store).acquire(), false, "nobody else gets in");
          }
          return "done";
        },
        { autoExtend: true },
      );
      assert.deepEqual([ran, result], [true, "done"]);
      assert.equal(await new Lock(key, 1_000, store).isLocked(), false, "released at the end");
    });

    it("stops at maxHoldMs; the hold then expires and the signal aborts", async () => {
      const l = new Lock(uniqueKey("auto-cap"), 100, makeStore());
      assert.equal(await l.acquire({ autoExtend: { intervalMs: 30, maxHoldMs: 200 } }), true);
      const { reason, after } = await aborted(l.signal);
      assert.equal(reason.code, "LOCK_NOT_HELD");
      assert.ok(after >= 150 && after < 3_000, `lost after ${Math.round(after)} ms (cap 200 + TTL 100)`);
    });

    it("sees a hold taken away behind its back", async () => {
      const store = makeStore();
      const key = uniqueKey("auto-theft");
      const l = new Lock(key, 1_000, store);
      assert.equal(await l.acquire({ autoExtend: { intervalMs: 40 } }), true);
      const signal = l.signal;
      const copy = restoreLock(l.serialize(), store);
      assert.equal(await copy.release(), true);
      const thief = new Lock(key, 5_000, store);
      assert.equal(await thief.acquire(), true);
      const { reason, after } = await aborted(signal);
      assert.equal(reason.code, "LOCK_NOT_HELD");
      assert.ok(after < 900, `noticed after ${Math.round(after)} ms, before the TTL ran out`);
      assert.equal(await thief.isExpired(), false, "the thief's hold was left alone");
      await thief.release();
    });

    it("refuses a bad autoExtend without taking the lock", async () => {
      const l = new Lock(uniqueKey("auto-bad"), 100, makeStore());
      const bad = [
        [{ autoExtend: { intervalMs: 51 } }, /autoExtend\.intervalMs must be at most half the lock's TTL/],
        [{ autoExtend: { interval: 10 } }, /unknown option `interval` for autoExtend; did you mean `intervalMs`\?/],
        [{ autoExtend: "yes" }, /autoExtend must be true, false or/],
        [{ autoExtend: { maxHoldMs: -1 } }, /autoExtend\.maxHoldMs must be/],
      ];
      for (const [options, message] of bad) {
        await assert.rejects(l.acquire(options), (err) => err.code === "INVALID_ARGUMENT" && message.test(err.message));
      }
      assert.equal(await l.isLocked(), false);
    });
  });
}

describe("the lease model on JS stores", () => {
  it("lost is final: once the signal says lost, extend() rejects though the store would extend, and release() frees what is still ours", async () => {
    // The store's clock runs slow (it keeps holds twice their TTL) and it cannot answer the
    // due check: the handle calls the hold lost at its own deadline.
    const store = mapStore({ withIsHeldBy: true, ttlFactor: 2 });
    const key = uniqueKey("lost-final");
    const l = new Lock(key, 120, store);
    assert.equal(await l.acquire(), true);
    const { reason } = await aborted(l.signal);
    assert.equal(reason.code, "LOCK_NOT_HELD");
    assert.equal(await store.isHeldBy(key, JSON.parse(l.serialize()).owner), true, "the store still has it");
    await assert.rejects(l.extend(), (err) => err.code === "LOCK_NOT_HELD");
    assert.equal(await l.isExpired(), true);
    assert.equal(await l.release(), true, "still this owner's on the store: freed");
    assert.equal(await store.isLocked(key), false);
  });

  it("a hold extended elsewhere stays live past its own TTL when the store answers ownerRemainingTime", async () => {
    const store = mapStore({ withOwnerRemainingTime: true });
    const l = new Lock(uniqueKey("elsewhere"), 300, store);
    assert.equal(await l.acquire(), true);
    const signal = l.signal;
    const copy = restoreLock(l.serialize(), store);
    await sleep(100);
    await copy.extend(2_000);
    await sleep(400);
    assert.equal(signal.aborted, false, String(signal.reason));
    await copy.release();
  });
});

describe("autoExtend and signals stay with their own hold", () => {
  it("an auto-extend asked for one hold never adopts the next one", async () => {
    const store = new TestStore();
    const key = uniqueKey("adopt");
    for (let i = 0; i < 200; i++) {
      const l = new Lock(`${key}:${i}`, 100, store);
      assert.equal(await l.acquire({ autoExtend: { intervalMs: 30 } }), true);
      // The next acquire comes before the extender first runs: the clock has not moved.
      // (Not awaiting the release, as on a synchronous store, lets the acquire reach this
      // store's calls first: it found the key still held.)
      await l.release();
      assert.equal(await l.acquire(), true);
    }
    await store.clock.advance(400);
    const stillHeld = (await Promise.all(Array.from({ length: 200 }, (_, i) => new Lock(`${key}:${i}`, 1_000, store).isLocked()))).filter(Boolean).length;
    assert.equal(stillHeld, 0, "second holds without autoExtend ran out at their 100 ms TTL");
  });

  it("run() stops auto-extending when its function settles, even if the release fails", async () => {
    const store = mapStore();
    const release = store.release;
    let failures = 1;
    store.release = async (...args) => (failures-- > 0 ? Promise.reject(new Error("connection reset")) : release(...args));
    const key = uniqueKey("run-stop");
    await assert.rejects(
      new Lock(key, 200, store).run(async () => sleep(50), { autoExtend: true }),
      (err) => err.code === "STORE_UNAVAILABLE",
    );
    await sleep(500);
    assert.equal(await new Lock(key, 1_000, store).isLocked(), false, "the hold ran out at its TTL, not extended on");
  });

  it("a store that cannot confirm a hold before its deadline loses it then, as unavailable", async () => {
    const store = mapStore({ withIsHeldBy: true });
    store.ownerRemainingTime = () => new Promise(() => {}); // never answers
    const l = new Lock(uniqueKey("slow-due"), 150, store);
    assert.equal(await l.acquire(), true);
    const { reason, after } = await aborted(l.signal);
    assert.equal(reason.code, "STORE_UNAVAILABLE", String(reason));
    assert.ok(after < 1_500, `aborted after ${Math.round(after)} ms, not after the store's 10 s operation timeout`);
  });
});

describe("autoExtend through a store outage", () => {
  it("retries while the store is down and reports STORE_UNAVAILABLE once the hold ran out", async () => {
    const store = mapStore();
    let down = false;
    const extend = store.extend;
    store.extend = async (...args) => {
      if (down) throw new Error("connection refused");
      return extend(...args);
    };
    const l = new Lock(uniqueKey("outage"), 500, store);
    assert.equal(await l.acquire({ autoExtend: { intervalMs: 100 } }), true);
    const signal = l.signal;
    down = true;
    await sleep(150);
    down = false; // a short outage, well inside the TTL: ridden out
    await sleep(300);
    assert.equal(signal.aborted, false, `still held after a 150 ms outage (${signal.reason})`);
    down = true;
    const { reason, after } = await aborted(signal);
    assert.ok(reason instanceof StoreUnavailableError, String(reason));
    assert.ok(after >= 300 && after < 3_000, `lost after ${Math.round(after)} ms for a 500 ms TTL`);
  });
});

describe("async disposal", () => {
  it("releases a held lock, and is harmless otherwise", async () => {
    const key = uniqueKey("dispose");
    const l = lock(key, 5_000);
    const dispose = l[Symbol.asyncDispose];
    assert.equal(typeof dispose, "function");
    await l[Symbol.asyncDispose](); // nothing held
    assert.equal(await l.acquire(), true);
    await l[Symbol.asyncDispose]();
    assert.equal(await lock(key).isLocked(), false);
    await l[Symbol.asyncDispose]();
  });
});

it("a held lock with autoExtend and a watched signal does not keep the process alive", async () => {
  const entry = fileURLToPath(new URL(TARGET === "wasm" ? "../js/wasm.mjs" : "../js/node.mjs", import.meta.url));
  const script = `
    const { lock } = await import(${JSON.stringify(entry)});
    const l = lock("keepalive", 60_000);
    await l.acquire({ autoExtend: true });
    l.signal.addEventListener("abort", () => {});
    console.log("held");
  `;
  const start = performance.now();
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { timeout: 20_000 });
  assert.equal(stdout.trim(), "held");
  assert.ok(performance.now() - start < 5_000, `exited after ${Math.round(performance.now() - start)} ms`);
});

describe("lock.signal and autoExtend on RedisLockStore", () => {
  it("keeps a hold through many TTLs, reports theft, and reports release", async () => {
    const server = await startRedis();
    const store = await ls.RedisLockStore.connect(server.url);
    try {
      const key = uniqueKey("redis-life");
      // Each extend must go out before the hold's local deadline (the TTL less the drift
      // allowance): a TTL with room for a loaded machine's event-loop delays.
      const l = new Lock(key, 400, store);
      assert.equal(await l.acquire({ autoExtend: true }), true);
      const signal = l.signal;
      await sleep(1_300);
      assert.equal(signal.aborted, false, "extended past three TTLs");
      assert.equal(await new Lock(key, 1_000, store).acquire(), false, "held throughout");
      await restoreLock(l.serialize(), store).release();
      assert.equal(await new Lock(key, 5_000, store).acquire(), true, "taken by another");
      const { reason } = await aborted(signal);
      assert.equal(reason.code, "LOCK_NOT_HELD");

      const m = new Lock(uniqueKey("redis-life"), 5_000, store);
      assert.equal(await m.acquire(), true);
      const mine = m.signal;
      assert.equal(await m.release(), true);
      assert.equal(mine.aborted, true);
      assert.equal(mine.reason.name, "AbortError");

      // A semaphore permit's signal ends with its release, as a lock's does.
      const sem = ls.semaphore(uniqueKey("redis-sem"), 2, 1_000, store);
      assert.equal(await sem.acquire(), true);
      const permit = sem.signal;
      assert.equal(permit.aborted, false);
      assert.equal(await sem.release(), true);
      assert.equal(permit.reason.name, "AbortError");

      // Held locks whose store is closed: their signals end when their holds run out.
      const held = await Promise.all(
        Array.from({ length: 4 }, async () => {
          const h = new Lock(uniqueKey("redis-closed"), 200, store);
          assert.equal(await h.acquire(), true);
          return h.signal;
        }),
      );
      await store.close();
      const ends = await Promise.all(held.map(aborted));
      for (const { after } of ends) assert.ok(after < 2_000, `aborted ${Math.round(after)} ms after close`);
    } finally {
      await store.close();
      await server.stop();
    }
  });
});
