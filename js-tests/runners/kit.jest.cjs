// locksmith-js/testing under Jest, as an application's own CommonJS test file would use
// it: the package by its name through require(), the build picked by LOCKSMITH_TARGET
// (js-tests/runners.test.mjs runs this file). Nothing sleeps: time moves only by
// `await clock.advance(...)`. Jest runs each test file in a realm of its own.
const wasm = process.env.LOCKSMITH_TARGET === "wasm";
const { lock, LockError, LockNotHeldError, InvalidArgumentError, backend } = require(wasm ? "locksmith-js/wasm" : "locksmith-js");
const { TestStore } = require("locksmith-js/testing");

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
  expect(job.signal.reason instanceof LockError).toBe(true);
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

describe("under jest.useFakeTimers()", () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  // Jest fakes every timer, clock and queue by default: queueMicrotask, process.nextTick
  // and performance too.
  test("a waiting request gives up after its timeout, on the test clock alone", async () => {
    jest.useFakeTimers();
    const timer = setTimeout(() => {}, 1_000);
    await waiterTimesOut();
    // Only the test's own timer is on the fake clock: the locks never touched the global timers.
    expect(jest.getTimerCount()).toBe(1);
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
    () => {
      throw new Error("assertNothingHeld() resolved with a hold left");
    },
    (err) => err,
  );
  expect(error instanceof LockError).toBe(true);
  expect(error).toMatchObject({ code: "HOLDS_REMAIN", held: [{ key: "leak", kind: "lock" }] });
  await leaked.release();
  await store.assertNothingHeld();
});

test("the build's errors are instances of its classes in Jest's realm", async () => {
  const store = new TestStore();
  // Thrown by the core's validation, in the addon or the WebAssembly module.
  let invalid;
  try {
    lock("", 1000, store);
  } catch (err) {
    invalid = err;
  }
  expect(invalid).toBeDefined();
  expect(invalid.code).toBe("INVALID_ARGUMENT");
  expect(invalid instanceof InvalidArgumentError).toBe(true);
  expect(invalid instanceof LockError).toBe(true);
  expect(invalid instanceof Error).toBe(true);
  // A rejection: extend() on a lock that was never taken.
  const notHeld = await lock("never-taken", "30s", store)
    .extend()
    .then(
      () => {
        throw new Error("extend() resolved on a lock never taken");
      },
      (err) => err,
    );
  expect(notHeld.code).toBe("LOCK_NOT_HELD");
  expect(notHeld instanceof LockNotHeldError).toBe(true);
  expect(notHeld instanceof LockError).toBe(true);
});
