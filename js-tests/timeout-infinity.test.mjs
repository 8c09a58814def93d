// `timeout: Infinity` waits with no limit: until the lock is released to this waiter, or
// the wait's `signal` aborts. NaN, -Infinity and negative timeouts are still refused. On
// the test kit's TestStore: its clock moves the waits along, with no real sleeping.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { TestStore } from "../js/testing.mjs";
import { failOnUnhandledRejections, ls, uniqueKey, watch } from "./support/target.mjs";

const { lock, lockAll, semaphore, readWriteLock, MemoryLockStore } = ls;

await failOnUnhandledRejections();

describe("timeout: Infinity", () => {
  it("acquire() waits until the holder releases, however long that takes", async () => {
    const store = new TestStore();
    const key = uniqueKey("forever");
    const holder = lock(key, "10s", store);
    assert.equal(await holder.acquire({ autoExtend: true }), true);
    const waiter = lock(key, "10s", store);
    const taken = watch(waiter.acquire({ timeout: Infinity, retryDelay: 50 }));
    // Past many of the holder's TTLs (it auto-extends): a wait of no limit outlasts them.
    await store.clock.advance("30s");
    assert.equal(taken.now, "pending", "still waiting while the lock is held");
    assert.equal(await holder.release(), true);
    await store.clock.advance(0);
    assert.equal(taken.now, true, "in at the release, with no time passing");
    assert.equal(store.clock.now(), 30_000, "it waited for the release");
    assert.equal(await waiter.release(), true);
    await store.assertNothingHeld();
  });

  it("run() waits too, and runs once the holder lets go", async () => {
    const store = new TestStore();
    const key = uniqueKey("forever-run");
    const holder = lock(key, "10s", store);
    await holder.acquire();
    const ran = watch(lock(key, "10s", store).run(() => "ran", { timeout: Infinity }));
    await store.clock.advance(300);
    assert.equal(ran.now, "pending", "waiting while the lock is held");
    await holder.release();
    await store.clock.advance(0);
    assert.deepEqual(ran.now, [true, "ran"]);
    await store.assertNothingHeld();
  });

  it("with a signal, the wait ends when the signal aborts, holding nothing", async () => {
    const store = new TestStore();
    const key = uniqueKey("forever-abort");
    const holder = lock(key, "10s", store);
    await holder.acquire();
    const waiter = lock(key, "10s", store);
    const controller = new AbortController();
    const waiting = watch(waiter.acquire({ timeout: Infinity, signal: controller.signal }));
    await store.clock.advance(300);
    assert.equal(waiting.now, "pending", "still waiting before the abort");
    controller.abort();
    await store.clock.advance(0);
    assert.ok(waiting.now?.code === "ABORTED" && waiting.now.name === "AbortError", `ended by the abort: ${waiting.now}`);
    assert.equal(store.clock.now(), 300);
    assert.equal(await holder.release(), true);
    assert.equal(await waiter.isLocked(), false, "the aborted waiter took nothing");
    await store.assertNothingHeld();
  });

  it("AbortSignal.timeout() bounds a wait with no timeout of its own", async () => {
    // AbortSignal.timeout() keeps real time: on the memory store, in real time too.
    const store = new MemoryLockStore();
    const key = uniqueKey("forever-signal-timeout");
    const holder = lock(key, "10s", store);
    await holder.acquire();
    const signal = AbortSignal.timeout(200);
    await assert.rejects(
      lock(key, "10s", store).run(() => "ran", { timeout: Infinity, signal }),
      (err) => err === signal.reason || err.name === "TimeoutError",
    );
    await holder.release();
  });

  it("a semaphore, a write lock and lockAll() wait with no limit too", async () => {
    const store = new TestStore();
    const s = uniqueKey("forever-sem");
    const first = semaphore(s, 1, "10s", store);
    await first.acquire();
    const second = watch(semaphore(s, 1, "10s", store).acquire({ timeout: Infinity }));
    const rw = readWriteLock(uniqueKey("forever-rw"), "10s", store);
    const reader = rw.readLock();
    await reader.acquire();
    const writer = watch(rw.writeLock().acquire({ timeout: Infinity, retryDelay: 20 }));
    const a = uniqueKey("forever-all");
    const one = lock(a, "10s", store);
    await one.acquire();
    const all = watch(lockAll([a, uniqueKey("forever-all-b")], "10s", store).acquire({ timeout: Infinity, retryDelay: 20 }));
    // Up to just before the holds' 10 s TTL: nothing frees the keys but the releases below.
    await store.clock.advance("9999ms");
    assert.deepEqual([second.now, writer.now, all.now], ["pending", "pending", "pending"], "all three wait while held");
    await first.release();
    await reader.release();
    await one.release();
    // In within one retry delay of the releases.
    await store.clock.advance(20);
    assert.deepEqual([second.now, writer.now, all.now], [true, true, true]);
  });

  it("NaN, -Infinity and negative timeouts are still refused", async () => {
    const l = lock(uniqueKey("forever-bad"), "10s", new TestStore());
    for (const timeout of [Number.NaN, -Infinity, -1]) {
      await assert.rejects(l.acquire({ timeout }), (err) => err.code === "INVALID_ARGUMENT" && /^locksmith: timeout must be/.test(err.message));
    }
  });
});
