// locksmith-js/testing under node:test, as an application's own test file would use it:
// the package by its name, the build picked by LOCKSMITH_TARGET (js-tests/runners.test.mjs
// runs this file). Nothing sleeps: time moves only by `await clock.advance(...)`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { TestStore } from "locksmith-js/testing";

const wasm = process.env.LOCKSMITH_TARGET === "wasm";
const { lock, LockError, backend } = await import(wasm ? "locksmith-js/wasm" : "locksmith-js");

/** `promise`'s state, read without waiting for it. */
function track(promise) {
  const seen = { state: "pending", value: undefined, error: undefined };
  promise.then(
    (value) => Object.assign(seen, { state: "fulfilled", value }),
    (error) => Object.assign(seen, { state: "rejected", error }),
  );
  return seen;
}

test("the build under test loaded", () => {
  assert.equal(backend, wasm ? "wasm" : "native");
});

test("a job stops when its lock is lost", async () => {
  const store = new TestStore();
  const { clock } = store;
  const job = lock("report", "10s", store);
  assert.equal(await job.acquire({ autoExtend: true }), true);
  // autoExtend keeps the hold well past its TTL.
  await clock.advance("30s");
  assert.equal(job.signal.aborted, false);
  // A failover loses the hold; the next extend finds out.
  await store.endHold("report");
  await clock.advance("10s");
  assert.equal(job.signal.aborted, true);
  assert.equal(job.signal.reason.code, "LOCK_NOT_HELD");
  assert.ok(job.signal.reason instanceof LockError);
  assert.equal(await job.release(), false);
});

test("a waiting request gives up after its timeout", async () => {
  const store = new TestStore();
  const { clock } = store;
  const holder = lock("invoice", "30s", store);
  assert.equal(await holder.acquire(), true);
  const waiter = track(lock("invoice", "30s", store).acquire({ timeout: "5s" }));
  await clock.advance("4s");
  assert.equal(waiter.state, "pending");
  await clock.advance("2s");
  assert.equal(waiter.state, "fulfilled");
  assert.equal(waiter.value, false);
  assert.equal(await holder.release(), true);
  await store.assertNothingHeld();
});

test("an acquire rides out a store outage", async () => {
  const store = new TestStore();
  const { clock } = store;
  store.failFor("2s");
  const job = lock("sync", "30s", store);
  const acquired = track(job.acquire({ timeout: "10s" }));
  await clock.advance("1s");
  assert.equal(acquired.state, "pending");
  await clock.advance("3s");
  assert.equal(acquired.state, "fulfilled");
  assert.equal(acquired.value, true);
  assert.equal(await job.release(), true);
  await store.assertNothingHeld();
});

test("two workers never both charge", async () => {
  const store = new TestStore();
  const { clock } = store;
  let inside = 0;
  let most = 0;
  let charges = 0;
  const charge = async () => {
    inside++;
    most = Math.max(most, inside);
    await clock.sleep("1s");
    charges++;
    inside--;
  };
  const workers = [lock("card:42", "30s", store), lock("card:42", "30s", store)].map((worker) => worker.run(charge, { timeout: "10s" }));
  await clock.advance("5s");
  const results = await Promise.all(workers);
  assert.deepEqual(
    results.map(([ran]) => ran),
    [true, true],
  );
  assert.equal(charges, 2);
  assert.equal(most, 1);
  await store.assertNothingHeld();
});

test("a leaked hold fails assertNothingHeld()", async () => {
  const store = new TestStore();
  const leaked = lock("leak", "30s", store);
  assert.equal(await leaked.acquire(), true);
  const error = await store.assertNothingHeld().then(
    () => assert.fail("assertNothingHeld() resolved with a hold left"),
    (err) => err,
  );
  assert.ok(error instanceof LockError);
  assert.equal(error.code, "HOLDS_REMAIN");
  assert.deepEqual(error.held, [{ key: "leak", kind: "lock" }]);
  await leaked.release();
  await store.assertNothingHeld();
});
