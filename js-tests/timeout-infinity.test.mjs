// `timeout: Infinity` waits with no limit: until the lock is released to this waiter, or
// the wait's `signal` aborts. NaN, -Infinity and negative timeouts are still refused.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "./support/target.mjs";

const { lock, lockAll, semaphore, readWriteLock, MemoryLockStore } = ls;

await failOnUnhandledRejections();

const store = new MemoryLockStore();

describe("timeout: Infinity", () => {
  it("acquire() waits until the holder releases, however long that takes", async () => {
    const key = uniqueKey("forever");
    const holder = lock(key, "10s", store);
    assert.equal(await holder.acquire(), true);
    const waiter = lock(key, "10s", store);
    const started = performance.now();
    const taken = waiter.acquire({ timeout: Infinity, retryDelay: 50 });
    await sleep(400);
    assert.equal(await Promise.race([taken, "waiting"]), "waiting", "still waiting while the lock is held");
    assert.equal(await holder.release(), true);
    assert.equal(await taken, true);
    assert.ok(performance.now() - started >= 390, "it waited for the release");
    assert.equal(await waiter.release(), true);
  });

  it("run() waits too, and runs once the holder lets go", async () => {
    const key = uniqueKey("forever-run");
    const holder = lock(key, "10s", store);
    await holder.acquire();
    setTimeout(() => holder.release(), 300);
    assert.deepEqual(await lock(key, "10s", store).run(() => "ran", { timeout: Infinity }), [true, "ran"]);
  });

  it("with a signal, the wait ends when the signal aborts, holding nothing", async () => {
    const key = uniqueKey("forever-abort");
    const holder = lock(key, "10s", store);
    await holder.acquire();
    const waiter = lock(key, "10s", store);
    const controller = new AbortController();
    const started = performance.now();
    setTimeout(() => controller.abort(), 300);
    await assert.rejects(waiter.acquire({ timeout: Infinity, signal: controller.signal }), (err) => err.code === "ABORTED" && err.name === "AbortError");
    const waited = performance.now() - started;
    assert.ok(waited >= 290 && waited < 5_000, `ended by the abort (${waited} ms)`);
    assert.equal(await holder.release(), true);
    assert.equal(await waiter.isLocked(), false, "the aborted waiter took nothing");
  });

  it("AbortSignal.timeout() bounds a wait with no timeout of its own", async () => {
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
    const s = uniqueKey("forever-sem");
    const first = semaphore(s, 1, "10s", store);
    await first.acquire();
    const second = semaphore(s, 1, "10s", store).acquire({ timeout: Infinity });
    const rw = readWriteLock(uniqueKey("forever-rw"), "10s", store);
    const reader = rw.readLock();
    await reader.acquire();
    const writer = rw.writeLock().acquire({ timeout: Infinity, retryDelay: 20 });
    const a = uniqueKey("forever-all");
    const one = lock(a, "10s", store);
    await one.acquire();
    const all = lockAll([a, uniqueKey("forever-all-b")], "10s", store).acquire({ timeout: Infinity, retryDelay: 20 });
    await sleep(200);
    await first.release();
    await reader.release();
    await one.release();
    assert.deepEqual(await Promise.all([second, writer, all]), [true, true, true]);
  });

  it("NaN, -Infinity and negative timeouts are still refused", async () => {
    const l = lock(uniqueKey("forever-bad"), "10s", store);
    for (const timeout of [Number.NaN, -Infinity, -1]) {
      await assert.rejects(l.acquire({ timeout }), (err) => err.code === "INVALID_ARGUMENT" && /^locksmith: timeout must be/.test(err.message));
    }
  });
});
