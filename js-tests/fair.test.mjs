// Fair locks and semaphores through the API (`{ fair: true }`, docs/api.md): waiters granted
// in the order they first asked whoever retries first, a semaphore's later, smaller request
// kept behind an earlier, larger one, places given up on timeout and abort, handles that
// disagree on fairness refused, the option checked, the serialized form, and stores without
// fair queues answering UNSUPPORTED. On the memory store, and on the test kit's TestStore
// (a JS store with the contract's acquireFair) on its virtual clock, in the build under
// test. (The core's exact timings on a fake clock: core/tests/fair.rs.)
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { TestStore } from "../js/testing.mjs";
import { mapStore } from "./support/js-stores.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey, watch } from "./support/target.mjs";

failOnUnhandledRejections();

const FAIR = { fair: true };

/** `acquire` of a fair handle on `key` that records `name` in `order` once granted, and releases after `holdMs`. */
async function turn(store, key, name, order, { arrives, retryDelay, holdMs = 5 }) {
  await sleep(arrives);
  const lock = ls.lock(key, 10_000, store, FAIR);
  assert.equal(await lock.acquire({ timeout: 5_000, retryDelay }), true, `${name} timed out`);
  order.push(name);
  await sleep(holdMs);
  assert.equal(await lock.release(), true);
}

describe("fair locks (memory store)", () => {
  it("grant waiters in the order they first asked, not whoever retries first", async () => {
    const store = new ls.MemoryLockStore();
    const key = uniqueKey("fair-order");
    const holder = ls.lock(key, 10_000, store, FAIR);
    assert.equal(holder.fair, true);
    assert.equal(await holder.acquire(), true);
    const order = [];
    // The last to arrive retries most often: unfair, it would take the key first.
    const turns = [
      turn(store, key, "a", order, { arrives: 0, retryDelay: 200 }),
      turn(store, key, "b", order, { arrives: 20, retryDelay: 120 }),
      turn(store, key, "c", order, { arrives: 40, retryDelay: 5 }),
    ];
    await sleep(100);
    assert.equal(await holder.release(), true);
    await Promise.all(turns);
    assert.deepEqual(order, ["a", "b", "c"]);
  });

  it("keep a smaller, later semaphore request behind a larger, earlier one", async () => {
    const store = new ls.MemoryLockStore();
    const key = uniqueKey("fair-sem");
    const sem = () => ls.semaphore(key, 3, 10_000, store, FAIR);
    const holder = sem();
    assert.equal(holder.fair, true);
    assert.equal(await holder.acquire({ permits: 2 }), true);
    const order = [];
    const large = sem()
      .acquire({ timeout: 5_000, retryDelay: 10, permits: 3 })
      .then((got) => order.push(["large", got]));
    await sleep(20);
    // One permit is free, but the large request came first.
    const small = sem();
    assert.equal(await small.acquire({ timeout: 60, retryDelay: 10 }), false);
    assert.equal(await holder.release(), true);
    await large;
    assert.deepEqual(order, [["large", true]]);
  });

  it("give a place up when the wait times out or is aborted", async () => {
    const store = new ls.MemoryLockStore();
    const key = uniqueKey("fair-quit");
    const holder = ls.lock(key, 10_000, store, FAIR);
    assert.equal(await holder.acquire(), true);
    const quitter = ls.lock(key, 10_000, store, FAIR).acquire({ timeout: 50, retryDelay: 10 });
    const controller = new AbortController();
    const aborted = ls.lock(key, 10_000, store, FAIR).acquire({ timeout: 5_000, retryDelay: 10, signal: controller.signal });
    await sleep(20);
    const last = ls.lock(key, 10_000, store, FAIR);
    const lastGot = last.acquire({ timeout: 5_000, retryDelay: 10 });
    controller.abort();
    await assert.rejects(aborted, { name: "AbortError" });
    assert.equal(await quitter, false);
    const released = performance.now();
    assert.equal(await holder.release(), true);
    // The two ahead of it left: granted at the release, not a place's TTL (10 s) later.
    assert.equal(await lastGot, true);
    assert.ok(performance.now() - released < 1_000, "the next waiter was granted promptly");
    assert.equal(await last.release(), true);
  });

  it("refuse a handle that disagrees with the key's holder or waiters on fairness", async () => {
    const store = new ls.MemoryLockStore();
    const key = uniqueKey("fair-mismatch");
    const fair = ls.lock(key, 10_000, store, FAIR);
    const plain = ls.lock(key, 10_000, store);
    assert.equal(plain.fair, false);
    assert.equal(await fair.acquire(), true);
    await assert.rejects(plain.acquire(), { code: "INVALID_ARGUMENT", message: /^locksmith: lock ".*" is fair .*this handle is not/ });
    await assert.rejects(plain.acquire({ timeout: 1_000 }), { code: "INVALID_ARGUMENT" });
    assert.equal(await fair.release(), true);
    // Free, nobody queued: either kind again.
    assert.equal(await plain.acquire(), true);
    await assert.rejects(ls.lock(key, 10_000, store, FAIR).acquire(), { code: "INVALID_ARGUMENT", message: /not fair; this handle is fair/ });
    assert.equal(await plain.release(), true);
  });

  it("check the option: a boolean, known keys only, acquire options sent where they go", () => {
    const store = new ls.MemoryLockStore();
    assert.throws(() => ls.lock("k", 1_000, store, { fair: "yes" }), { code: "INVALID_ARGUMENT", message: /^locksmith: fair must be true or false/ });
    assert.throws(() => ls.lock("k", 1_000, store, { fiar: true }), { code: "INVALID_ARGUMENT", message: /did you mean `fair`/ });
    assert.throws(() => ls.lock("k", 1_000, store, { timeout: 5 }), { code: "INVALID_ARGUMENT", message: /go to acquire\(\) or run\(\)/ });
    assert.throws(() => ls.lock("k", 1_000, store, true), { code: "INVALID_ARGUMENT", message: /\{ fair \}/ });
    assert.throws(() => ls.semaphore("k", 2, 1_000, store, { fair: 1 }), { code: "INVALID_ARGUMENT" });
    assert.throws(() => new ls.Lock("k", 1_000, store, { fair: true }, 5), { code: "INVALID_ARGUMENT", message: /at most 4 arguments/ });
    assert.equal(new ls.Lock("k", 1_000, store, { fair: true }).fair, true);
    // Where fairness cannot be, or the options sit in the store's place: said so.
    assert.throws(() => ls.lockAll(["a", "b"], 1_000, store, FAIR), { code: "INVALID_ARGUMENT", message: /^locksmith: lockAll\(\) cannot be fair/ });
    assert.throws(() => new ls.MultiLock(["a", "b"], 1_000, store, FAIR), { code: "INVALID_ARGUMENT", message: /lockAll\(\) cannot be fair/ });
    assert.throws(() => ls.readWriteLock("rw", 1_000, store, FAIR), { code: "INVALID_ARGUMENT", message: /phase-fair already/ });
    assert.throws(() => ls.readWriteLock("rw", 1_000, store).readLock(FAIR), { code: "INVALID_ARGUMENT", message: /phase-fair already/ });
    assert.throws(() => ls.lock("k", 1_000, FAIR), {
      code: "INVALID_ARGUMENT",
      message: /options come after its store, lock\(key, ttlMs, store, \{ fair: true \}\)/,
    });
    assert.equal(ls.lock("k", 1_000, store, { fair: false }).fair, false);
    assert.equal(ls.lock("k", 1_000, store, {}).fair, false);
  });

  it("serialize as a fair lock or semaphore, and restore as one", async () => {
    const store = new ls.MemoryLockStore();
    const key = uniqueKey("fair-serialized");
    const lock = ls.lock(key, 10_000, store, FAIR);
    assert.equal(await lock.acquire(), true);
    const text = lock.serialize();
    assert.equal(JSON.parse(text).kind, "fair lock");
    const restored = ls.restoreLock(text, store);
    assert.equal(restored.fair, true);
    assert.equal(await restored.release(), true);
    const sem = ls.semaphore(key, 2, 10_000, store, FAIR);
    assert.equal(await sem.acquire(), true);
    assert.equal(JSON.parse(sem.serialize()).kind, "fair semaphore");
    const back = ls.restoreLock(sem.serialize(), store);
    assert.equal(back.fair, true);
    assert.equal(await back.release(), true);
  });

  it("answer UNSUPPORTED on a store without fair queues (a user's own store), or without what a fair semaphore needs", async () => {
    const store = mapStore();
    await assert.rejects(ls.lock(uniqueKey("fair-js"), 1_000, store, FAIR).acquire(), {
      code: "UNSUPPORTED",
      message: /^locksmith: this store has no fair queues .*stores with acquireFair$/,
    });
    // acquireFair but no permit methods: a fair semaphore could not be released or counted.
    let asked = 0;
    const fairOnly = { ...mapStore(), acquireFair: async () => (asked += 1) > 0 };
    await assert.rejects(ls.semaphore(uniqueKey("fair-js"), 2, 1_000, fairOnly, FAIR).acquire(), { code: "UNSUPPORTED", message: /no semaphores/ });
    // Permit methods without permitWeights: one permit per hold, as for any semaphore.
    const noWeights = { ...mapStore({ withPermits: true }), acquireFair: async () => (asked += 1) > 0 };
    await assert.rejects(ls.semaphore(uniqueKey("fair-js"), 3, 1_000, noWeights, FAIR).acquire({ permits: 2 }), {
      code: "UNSUPPORTED",
      message: /one permit per semaphore hold/,
    });
    assert.equal(asked, 0, "nothing was asked of the stores");
    assert.equal(await ls.lock(uniqueKey("fair-js"), 1_000, fairOnly, FAIR).acquire(), true, "a fair lock needs no permit methods");
  });
});

/**
 * `store` without its onRelease: its waiters only poll, each at its retry delay, so
 * whoever polls first after a release would get the key if nothing kept order.
 */
const withoutWakeUps = (store) =>
  new Proxy(store, {
    get(target, name) {
      if (name === "onRelease") return undefined;
      const value = Reflect.get(target, name, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });

describe("fair locks (TestStore, a JS store with acquireFair, on its virtual clock)", () => {
  it("grant in arrival order when waiters only poll, though the last to arrive polls first", async () => {
    const store = new TestStore();
    const polled = withoutWakeUps(store);
    const holder = ls.lock("k", "30s", polled, FAIR);
    assert.equal(await holder.acquire(), true);
    const order = [];
    // a asks at 0, then every 100 ms; b at 10, every 60 ms; c at 20, every 20 ms.
    const waits = ["a", "b", "c"].map(async (name, i) => {
      await store.clock.sleep(i * 10);
      const lock = ls.lock("k", "30s", polled, FAIR);
      assert.equal(await lock.acquire({ timeout: "5s", retryDelay: 100 - i * 40 }), true);
      order.push([name, store.clock.now()]);
      assert.equal(await lock.release(), true);
    });
    await store.clock.advance(50);
    await holder.release();
    await store.clock.advance("1s");
    await Promise.all(waits);
    // a at its next poll (100); b at its first poll after that (130); c at once after (140).
    assert.deepEqual(order, [
      ["a", 100],
      ["b", 130],
      ["c", 140],
    ]);
    await store.assertNothingHeld();
  });

  it("grant in arrival order at the moment of each release, whoever retries first", async () => {
    const store = new TestStore();
    const holder = ls.lock("k", "30s", store, FAIR);
    assert.equal(await holder.acquire(), true);
    const order = [];
    const waits = ["a", "b", "c"].map(async (name, i) => {
      await store.clock.sleep(i * 10);
      const lock = ls.lock("k", "30s", store, FAIR);
      // c retries every 20 ms, a every 100 ms.
      assert.equal(await lock.acquire({ timeout: "5s", retryDelay: 100 - i * 40 }), true);
      order.push([name, store.clock.now()]);
      await store.clock.sleep(5);
      assert.equal(await lock.release(), true);
    });
    await store.clock.advance(50);
    await holder.release();
    await store.clock.advance("1s");
    await Promise.all(waits);
    // Each woken by the release before it (the store's onRelease), 5 ms apart.
    assert.deepEqual(order, [
      ["a", 50],
      ["b", 55],
      ["c", 60],
    ]);
    await store.assertNothingHeld();
  });

  it("a waiter that stops asking loses its place a TTL after its last attempt", async () => {
    const store = new TestStore();
    const holder = ls.lock("k", "1s", store, FAIR);
    assert.equal(await holder.acquire(), true);
    // A waiter whose process died: one attempt that kept a place, and nothing after it.
    assert.equal(await store.acquireFair("k", "d".repeat(32), 1_000, "lock", undefined, 1, true), false);
    const next = watch(ls.lock("k", "1s", store, FAIR).acquire({ timeout: "5s", retryDelay: 100 }));
    await store.clock.advance(10);
    await holder.release();
    await store.clock.advance(900);
    assert.equal(next.now, "pending", "the dead waiter is first until its place lapses");
    await store.clock.advance(200);
    assert.equal(next.now, true);
  });

  it("refuse a handle that is not fair on a fair key (the store says so), and inject faults into acquireFair", async () => {
    const store = new TestStore();
    const fair = ls.lock("k", "30s", store, FAIR);
    assert.equal(await fair.acquire(), true);
    await assert.rejects(ls.lock("k", "30s", store).acquire(), { code: "INVALID_ARGUMENT", message: /is fair/ });
    await assert.rejects(
      ls
        .semaphore("s", 2, "30s", store)
        .acquire()
        .then(() => ls.semaphore("s", 2, "30s", store, FAIR).acquire()),
      {
        code: "INVALID_ARGUMENT",
        message: /not fair; this handle is fair/,
      },
    );
    store.failNext(1, { calls: ["acquireFair"] });
    await assert.rejects(ls.lock("f", "30s", store, FAIR).acquire(), { code: "STORE_UNAVAILABLE" });
    assert.equal(await fair.release(), true);
  });
});
