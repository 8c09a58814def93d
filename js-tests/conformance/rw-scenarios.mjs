// Semaphore and read-write lock scenarios every store with permits runs (primitives.test.mjs,
// the Durable Object store in workerd-store.test.mjs, PostgresLockStore in postgres.test.mjs).
import assert from "node:assert/strict";

import { sleep, uniqueKey } from "../support/target.mjs";

/**
 * Phase-fair: two readers wait behind a writer, then a second writer waits (and claims);
 * when the first writer releases, both readers enter before the second writer, which
 * enters alone once they are done; a reader arriving during their turn waits behind the
 * claimed writer.
 */
export async function assertPhaseFair({ readWriteLock }, store, { wait = sleep } = {}) {
  const rw = readWriteLock(uniqueKey("rw-fair"), 5_000, store);
  const order = [];
  const w1 = rw.writeLock();
  assert.equal(await w1.acquire(), true);
  const take = async (name, l, holdMs) => {
    assert.equal(await l.acquire({ timeout: 5_000, retryDelay: 20 }), true, `${name} got in`);
    order.push(`${name} in`);
    await wait(holdMs);
    order.push(`${name} out`);
    await l.release();
  };
  const readers = [take("r1", rw.readLock(), 150), take("r2", rw.readLock(), 150)];
  await wait(60);
  const writer = take("w2", rw.writeLock(), 50);
  await wait(60);
  await w1.release();
  await wait(60);
  const late = take("r3", rw.readLock(), 10);
  await Promise.all([...readers, writer, late]);
  const at = (e) => order.indexOf(e);
  assert.ok(at("r1 in") < at("w2 in") && at("r2 in") < at("w2 in"), `the waiting readers went first: ${order}`);
  assert.ok(at("r1 out") < at("w2 in") && at("r2 out") < at("w2 in"), `the writer was alone: ${order}`);
  assert.ok(at("w2 out") < at("r3 in"), `a reader arriving behind a waiting writer waits for it: ${order}`);
}

/**
 * `holders` handles of one semaphore of limit 3 run at once (waiting up to 10 s, with
 * `retryDelay` if given): at most three inside at a time, several at once, and all of
 * them through.
 */
export async function assertSemaphoreLimit({ semaphore }, store, { holders = 12, retryDelay, wait = sleep } = {}) {
  const key = uniqueKey("sem");
  let inside = 0;
  let most = 0;
  const results = await Promise.all(
    Array.from({ length: holders }, () =>
      semaphore(key, 3, 5_000, store).run(
        async () => {
          most = Math.max(most, ++inside);
          // Long enough that holders overlap on a loaded machine.
          await wait(100);
          inside--;
        },
        { timeout: 10_000, ...(retryDelay === undefined ? {} : { retryDelay }) },
      ),
    ),
  );
  assert.ok(
    results.every(([ran]) => ran),
    `all ${holders} got a permit`,
  );
  assert.ok(most <= 3, `never more than three at once (${most})`);
  assert.ok(most >= 2, `several at once, not one by one (${most})`);
  assert.equal(await semaphore(key, 3, 5_000, store).count(), 0);
}

/**
 * Readers share, a writer is alone, and a writer waiting (with a 5 s retry delay) keeps a
 * new reader out `pause` ms after it started waiting; `woken` ends the message about the
 * writer getting in once the last reader leaves. `wait(ms)` is each scenario's pause (a
 * real sleep unless given: a test store's clock.sleep).
 */
export async function assertReadersShareWriterAlone({ readWriteLock }, store, { pause = 50, woken = "", wait = sleep } = {}) {
  const rw = readWriteLock(uniqueKey("rw"), 5_000, store);
  const [r1, r2, w] = [rw.readLock(), rw.readLock(), rw.writeLock()];
  assert.equal(await r1.acquire(), true);
  assert.equal(await r2.acquire(), true, "readers share");
  assert.equal(await r1.count(), 2);
  assert.equal(await w.acquire(), false, "no writer while read");
  const writer = w.acquire({ timeout: 5_000, retryDelay: 5_000 });
  await wait(pause);
  assert.equal(await rw.readLock().acquire(), false, "a new reader waits behind the writer");
  await r1.release();
  await r2.release();
  assert.equal(await writer, true, `the writer gets in once the last reader leaves${woken}`);
  assert.equal(await rw.readLock().acquire(), false, "no reader while written");
  assert.equal(await rw.writeLock().acquire(), false, "no second writer");
  await w.release();
  const r3 = rw.readLock();
  assert.equal(await r3.acquire(), true);
  await r3.release();
}
