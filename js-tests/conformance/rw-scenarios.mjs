// Read-write lock scenarios every store with permits runs (primitives.test.mjs, and the
// Durable Object store in workerd-store.test.mjs).
import assert from "node:assert/strict";

import { sleep, uniqueKey } from "../support/target.mjs";

/**
 * Phase-fair: two readers wait behind a writer, then a second writer waits (and claims);
 * when the first writer releases, both readers enter before the second writer, which
 * enters alone once they are done; a reader arriving during their turn waits behind the
 * claimed writer.
 */
export async function assertPhaseFair({ readWriteLock }, store) {
  const rw = readWriteLock(uniqueKey("rw-fair"), 5_000, store);
  const order = [];
  const w1 = rw.writeLock();
  assert.equal(await w1.acquire(), true);
  const take = async (name, l, holdMs) => {
    assert.equal(await l.acquire({ timeout: 5_000, retryDelay: 20 }), true, `${name} got in`);
    order.push(`${name} in`);
    await sleep(holdMs);
    order.push(`${name} out`);
    await l.release();
  };
  const readers = [take("r1", rw.readLock(), 150), take("r2", rw.readLock(), 150)];
  await sleep(60);
  const writer = take("w2", rw.writeLock(), 50);
  await sleep(60);
  await w1.release();
  await sleep(60);
  const late = take("r3", rw.readLock(), 10);
  await Promise.all([...readers, writer, late]);
  const at = (e) => order.indexOf(e);
  assert.ok(at("r1 in") < at("w2 in") && at("r2 in") < at("w2 in"), `the waiting readers went first: ${order}`);
  assert.ok(at("r1 out") < at("w2 in") && at("r2 out") < at("w2 in"), `the writer was alone: ${order}`);
  assert.ok(at("w2 out") < at("r3 in"), `a reader arriving behind a waiting writer waits for it: ${order}`);
}
