// locksmith-js/testing under Vitest, as an application's own test file would use it: the
// package by its name, the build picked by LOCKSMITH_TARGET (js-tests/runners.test.mjs
// runs this file). Nothing sleeps: time moves only by `await clock.advance(...)`.
import { afterEach, describe, expect, test, vi } from "vitest";

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
  expect(backend).toBe(wasm ? "wasm" : "native");
});

test("a job stops when its lock is lost", async () => {
  const store = new TestStore();
  const { clock } = store;
  const job = lock("report", "10s", store);
  expect(await job.acquire({ autoExtend: true })).toBe(true);
  // autoExtend keeps the hold well past its TTL.
  await clock.advance("30s");
  expect(job.signal.aborted).toBe(false);
  // A failover loses the hold; the next extend finds out.
  await store.endHold("report");
  await clock.advance("10s");
  expect(job.signal.aborted).toBe(true);
  expect(job.signal.reason.code).toBe("LOCK_NOT_HELD");
  expect(job.signal.reason).toBeInstanceOf(LockError);
  expect(await job.release()).toBe(false);
});

/** A waiter gives up at its timeout, and not before. */
async function waiterTimesOut() {
  const store = new TestStore();
  const { clock } = store;
  const holder = lock("invoice", "30s", store);
  expect(await holder.acquire()).toBe(true);
  const waiter = track(lock("invoice", "30s", store).acquire({ timeout: "5s" }));
  await clock.advance("4s");
  expect(waiter.state).toBe("pending");
  await clock.advance("2s");
  expect(waiter).toMatchObject({ state: "fulfilled", value: false });
  expect(await holder.release()).toBe(true);
  await store.assertNothingHeld();
}

test("a waiting request gives up after its timeout", waiterTimesOut);

describe("under vi.useFakeTimers()", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test("a waiting request gives up after its timeout, on the test clock alone", async () => {
    vi.useFakeTimers();
    const timer = setTimeout(() => {}, 1_000);
    await waiterTimesOut();
    // Only the test's own timer is on the fake clock: the locks never touched the global timers.
    expect(vi.getTimerCount()).toBe(1);
    clearTimeout(timer);
  });

  test("with queueMicrotask and performance faked too, a waiting request gives up after its timeout", async () => {
    // All Vitest can fake in a forked worker (not process.nextTick there).
    vi.useFakeTimers({
      toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "setImmediate", "clearImmediate", "queueMicrotask", "performance", "Date"],
    });
    const timer = setTimeout(() => {}, 1_000);
    await waiterTimesOut();
    // Only the test's own timer is on the fake clock: the locks never touched the global timers.
    expect(vi.getTimerCount()).toBe(1);
    clearTimeout(timer);
  });
});

test("an acquire rides out a store outage", async () => {
  const store = new TestStore();
  const { clock } = store;
  store.failFor("2s");
  const job = lock("sync", "30s", store);
  const acquired = track(job.acquire({ timeout: "10s" }));
  await clock.advance("1s");
  expect(acquired.state).toBe("pending");
  await clock.advance("3s");
  expect(acquired).toMatchObject({ state: "fulfilled", value: true });
  expect(await job.release()).toBe(true);
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
  expect(results.map(([ran]) => ran)).toEqual([true, true]);
  expect(charges).toBe(2);
  expect(most).toBe(1);
  await store.assertNothingHeld();
});

test("a leaked hold fails assertNothingHeld()", async () => {
  const store = new TestStore();
  const leaked = lock("leak", "30s", store);
  expect(await leaked.acquire()).toBe(true);
  const error = await store.assertNothingHeld().then(
    () => expect.unreachable("assertNothingHeld() resolved with a hold left"),
    (err) => err,
  );
  expect(error).toBeInstanceOf(LockError);
  expect(error).toMatchObject({ code: "HOLDS_REMAIN", held: [{ key: "leak", kind: "lock" }] });
  await leaked.release();
  await store.assertNothingHeld();
});
