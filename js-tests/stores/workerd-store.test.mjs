// The shipped Durable Object store (`locksmith-js/cloudflare`) in real workerd, through
// Miniflare: the conformance suite, run from Node through a store object whose every
// method is a message to a worker that calls the real store (js-tests/workerd/
// store-worker.mjs), and scenarios run inside the worker on the package's wasm build.
// All of it runs in workerd on the wasm build whatever LOCKSMITH_TARGET says, so it
// runs once, with the native pass.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { conformance } from "../conformance/conformance.mjs";
import { startWorker } from "../support/workerd-harness.mjs";
import { remoteStore } from "../support/workerd-remote-store.mjs";
import { assertPhaseFair } from "../conformance/rw-scenarios.mjs";
import { TARGET, ls, sleep, uniqueKey } from "../support/target.mjs";

/** `key` as the refusals quote it (JSON), escaped for a RegExp. */
const escaped = (key) => JSON.stringify(key).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const ONCE = TARGET === "native";

let started;
/** The worker, built and started once for the whole file. */
function worker() {
  started ??= (async () => {
    const worker = await startWorker("workerd/store-worker.mjs", { durableObjects: { LOCKS: { className: "TestLockObject", useSQLite: true } } });
    assert.ok(
      worker.inputs.includes("js/stores/cloudflare.mjs") && worker.inputs.includes("js/workerd.mjs"),
      "the exports map chose js/stores/cloudflare.mjs and js/workerd.mjs",
    );
    return worker;
  })();
  return started;
}

// Every remote store, closed before the worker stops.
const opened = [];

after(async () => {
  if (!started) return;
  const worker = await started;
  for (const store of opened) store.close();
  await worker.dispose();
});

async function post(path, body) {
  const { mf } = await worker();
  const res = await mf.dispatchFetch(`http://worker${path}`, { method: "POST", body: JSON.stringify(body) });
  return res.json();
}

async function get(path) {
  const { mf } = await worker();
  return (await mf.dispatchFetch(`http://worker${path}`)).json();
}

/**
 * A store in Node whose methods are calls of the real store in the worker, over one
 * WebSocket (js-tests/workerd/store-worker.mjs); `close()` ends it.
 */
async function openRemoteStore() {
  const { mf } = await worker();
  const res = await mf.dispatchFetch("http://worker/store", { headers: { Upgrade: "websocket" } });
  const socket = res.webSocket;
  assert.ok(socket, `the worker accepted the WebSocket (${res.status})`);
  socket.accept();
  const store = remoteStore(socket);
  opened.push(store);
  return store;
}

if (ONCE) {
  conformance("DurableObjectLockStore (workerd)", {
    makeStore: openRemoteStore,
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });
}

describe("DurableObjectLockStore in workerd", { skip: !ONCE && "runs once, with the native pass" }, () => {
  /** What /inspect says once `done(state)` holds, or after `ms` (a loaded machine is slow). */
  const inspectUntil = async (key, done, ms = 3_000) => {
    const deadline = performance.now() + ms;
    for (;;) {
      const state = await get(`/inspect?key=${key}`);
      if (done(state) || performance.now() > deadline) return state;
      await sleep(25);
    }
  };
  const timed = async (promise) => {
    const start = performance.now();
    const value = await promise;
    return [value, performance.now() - start];
  };

  it("refuses unknown and bad options with INVALID_ARGUMENT", async () => {
    const refused = async (body, pattern) => {
      const { error, isLocksmiths } = await post("/options", body);
      assert.equal(error?.code, "INVALID_ARGUMENT", JSON.stringify(body));
      assert.equal(isLocksmiths, true, "an InvalidArgumentError of the package's own");
      assert.equal(error.name, "InvalidArgumentError");
      assert.match(error.message, /^locksmith: /);
      assert.match(error.message, pattern);
    };
    await refused({ options: { operationTimeout: 5_000 } }, /unknown option `operationTimeout`.*did you mean `operationTimeoutMs`/);
    await refused({ options: { operationTimeoutMs: -1 } }, /operationTimeoutMs/);
    await refused({ options: { notifyReleases: "yes" } }, /notifyReleases/);
    await refused({ options: { locationHint: 7 } }, /locationHint/);
    await refused({ options: 5 }, /options must be an object/);
    await refused({ namespace: null }, /namespace/);
    assert.deepEqual(await post("/options", { options: { operationTimeoutMs: 5_000, locationHint: "weur", notifyReleases: false } }), {
      ok: true,
      onRelease: "undefined",
      operationTimeoutMs: 5_000,
      permitWeights: true,
    });
    assert.deepEqual(await post("/options", {}), { ok: true, onRelease: "function", operationTimeoutMs: null, permitWeights: true });
  });

  it("bounds holder() and proclaim() by operationTimeoutMs, and types a failure on the way as STORE_UNAVAILABLE, as its other calls", async () => {
    const faults = await get("/holder-faults?ms=200");
    for (const [name, outcome] of Object.entries(faults)) {
      assert.equal(outcome.code, "STORE_UNAVAILABLE", `${name}: ${JSON.stringify(outcome)}`);
      assert.equal(outcome.name, "StoreUnavailableError", name);
      assert.equal(outcome.isLocksmiths, true, `${name}: a StoreUnavailableError of the package's own`);
      assert.match(outcome.message, /^locksmith: /, name);
      assert.ok(outcome.ms < 2_000, `${name} took ${outcome.ms} ms`);
    }
    for (const name of ["hungHolder", "hungProclaim"]) {
      assert.match(faults[name].message, /did not settle within 200 ms/, name);
      assert.ok(faults[name].ms >= 150, `${name} waited ${faults[name].ms} ms`);
    }
    for (const name of ["lostHolder", "lostProclaim"]) assert.match(faults[name].message, /Network connection lost/, name);
  });

  it("hands out fencing tokens that grow across holds of every kind and outlive them", async () => {
    const key = uniqueKey("fencing");
    const { tokens, error } = await get(`/fencing?key=${key}`);
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(tokens.length, 5);
    for (const [i, token] of tokens.entries()) {
      assert.ok(Number.isSafeInteger(token) && token > (tokens[i - 1] ?? 0), `tokens ${tokens}`);
    }
    const { stored, alarm } = await get(`/inspect?key=${key}`);
    assert.deepEqual(stored, { fence: tokens.at(-1) }, "only the counter stays");
    assert.equal(alarm, null);
    const next = await get(`/hold?key=${key}`);
    assert.ok(next.token > tokens.at(-1));
  });

  it("wakes a waiter at the release, long before its retryDelay", async () => {
    const key = uniqueKey("wake");
    const held = await get(`/hold?key=${key}&ttl=10000`);
    assert.equal(held.taken, true);
    const waiting = timed(get(`/wait?key=${key}&timeout=4000&retryDelay=3000`));
    await sleep(200);
    assert.deepEqual(await get(`/release?lock=${encodeURIComponent(held.serialized)}`), { released: true });
    const [waiter, ms] = await waiting;
    assert.equal(waiter.acquired, true, JSON.stringify(waiter));
    assert.ok(waiter.token > held.token);
    // Without a wake-up its next attempt would come 3 s after the first.
    assert.ok(ms < 1_500, `the waiter took ${ms} ms`);
    assert.ok((await get(`/inspect?key=${key}`)).waits >= 1, "it waited inside the object");
  });

  it("expires a hold by alarm: the waiter is woken and storage is cleared", async () => {
    // Nobody calls the object after this hold: only its alarm can clear it.
    const idle = uniqueKey("alarm-idle");
    const token = await (await openRemoteStore()).acquire(idle, "holder", 150);
    const before = await get(`/inspect?key=${idle}`);
    assert.equal(before.stored.lock.token, token);
    assert.equal(before.alarm, before.stored.lock.expiresAt);
    await sleep(150);
    const after = await inspectUntil(idle, (state) => state.alarm === null);
    assert.deepEqual(after, { stored: { fence: token }, alarm: null, waits: 0, pending: 0, free: 0 });

    const key = uniqueKey("alarm");
    assert.equal((await get(`/hold?key=${key}&ttl=300`)).taken, true);
    const [waiter, ms] = await timed(get(`/wait?key=${key}&timeout=4000&retryDelay=3000`));
    assert.equal(waiter.acquired, true, JSON.stringify(waiter));
    assert.ok(ms >= 250 && ms < 1_500, `the waiter took ${ms} ms`);
  });

  it("keeps one wait inside the object across a waiter's retries, and ends it when the waiter gives up", async () => {
    const key = uniqueKey("retries");
    assert.equal((await get(`/hold?key=${key}&ttl=10000`)).taken, true);
    // About fifteen attempts, 40 ms apart, all refused.
    const waiter = await get(`/wait?key=${key}&timeout=600&retryDelay=40`);
    assert.equal(waiter.acquired, false, JSON.stringify(waiter));
    const { waits, pending } = await inspectUntil(key, (state) => state.pending === 0);
    assert.deepEqual({ waits, pending }, { waits: 1, pending: 0 });
  });

  it("keeps a writer waiting behind another writer's claim without spinning", async () => {
    const store = await openRemoteStore();
    const key = uniqueKey("claim");
    // A reader holds; a writer asks once and goes away, leaving its claim for 2 s.
    assert.equal(typeof (await store.acquirePermit(key, "reader", 5_000, "read", undefined)), "number");
    assert.equal(await store.acquirePermit(key, "gone", 2_000, "write", undefined), false);
    assert.equal(await store.releasePermit(key, "reader", "read"), true);
    const waiter = await get(`/wait?key=${key}&kind=write&timeout=500&retryDelay=1000`);
    assert.equal(waiter.acquired, false, JSON.stringify(waiter));
    // An attempt at 0 and at the 500 ms deadline; one wait in between, not one per turn.
    assert.equal((await get(`/inspect?key=${key}`)).waits, 1);
  });

  it("ends a wait inside the object when locksmith unsubscribes", async () => {
    const store = await openRemoteStore();
    const key = uniqueKey("unsubscribe");
    assert.equal(typeof (await store.acquire(key, "holder", 5_000)), "number");
    let woken = false;
    const unsubscribe = store.onRelease(key, () => (woken = true));
    const waiting = await inspectUntil(key, (state) => state.pending === 1);
    assert.deepEqual([waiting.waits, waiting.pending], [1, 1], "a wait is pending inside the object");
    unsubscribe();
    const { waits, pending } = await inspectUntil(key, (state) => state.pending === 0);
    assert.deepEqual({ waits, pending }, { waits: 1, pending: 0 });
    assert.equal(await store.release(key, "holder"), true);
    await sleep(50);
    assert.equal(woken, false);
    // The two calls travel on different stubs and may cross: a wait that arrives after
    // its cancel ends at once instead of staying until the cap.
    assert.deepEqual(await get(`/cancel-first?key=${uniqueKey("crossed")}`), { pending: false, outcome: "cancelled" });
  });

  // A waiter's wait and its acquire attempts travel on different stubs and may cross:
  // when the wait arrives after the refused attempt and after the holds in its way have
  // gone, the waiter's own claim (a writer's), its place in the readers' turn (a
  // reader's, another writer's claim waiting) or the permits it needs (a semaphore
  // waiter's, some still held) must not make it wait out its retryDelay.
  const lateWaiters = {
    write: "writer when the last reader leaves",
    read: "reader when the writer leaves (another writer's claim waiting)",
    semaphore: "semaphore waiter of 3 permits when 3 of 4 held go (1 still held)",
  };
  for (const [kind, what] of Object.entries(lateWaiters)) {
    it(`wakes a waiting ${what}, even when its wait reaches the object after its attempt`, async () => {
      const result = await get(`/late-wait?key=${uniqueKey(`late-wait-${kind}`)}&kind=${kind}&delay=150&timeout=4000&retryDelay=2500`);
      assert.equal(result.error, undefined, JSON.stringify(result.error));
      assert.equal(result.acquired, true);
      // Its wait arrives 150 ms in; without the wake-up its next attempt comes at 2.5 s.
      assert.ok(result.waitedMs < 1_000, `the ${kind} waiter waited ${result.waitedMs} ms (retryDelay 2500 ms)`);
    });
  }

  // A wait is named by the refused attempt that follows it. Where two waiters' calls
  // cross (both subscribe, then both try), the oldest wait still unnamed was not the
  // caller's, and a wait that reached the object late was answered by the other
  // waiter's needs: one slept through the release that let it in (until its retryDelay)
  // while the other was told "free" though it did not fit. Now a late wait answers as
  // if it had been pending since the attempt: woken by a release after it, whoever's.
  it("answers two waiters' crossed waits as if each had been pending: the release wakes the one that fits, none is told free", async () => {
    const result = await get(`/crossed-waits?key=${uniqueKey("crossed-waits")}&delay=150`);
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    assert.deepEqual(result.tried, { a: false, b: false, bAgain: false }, "refused while 4 of 4 (then 3 of 4) are held");
    assert.equal(result.woken.a, 1, `the waiter that fits once the permit is back is woken: ${JSON.stringify(result)}`);
    assert.equal(result.free, 0, `no wait answered "free" to a waiter that did not fit: ${JSON.stringify(result)}`);
    // The other hears the release once, as a pending wait would, and waits again after
    // its next refusal: a round per release, not a loop.
    assert.ok(result.woken.b <= 1, JSON.stringify(result.woken));
    assert.equal(result.woken.bAgain, 0, JSON.stringify(result.woken));
    assert.equal(result.waits, 3);
  });

  it("keeps a semaphore waiter that needs more permits than are free waiting inside the object, not going round, until they are", async () => {
    const store = await openRemoteStore();
    store.permitWeights = true;
    const key = uniqueKey("weighted-wait");
    const holder = ls.semaphore(key, 5, 10_000, store);
    assert.equal(await holder.acquire({ permits: 3 }), true);
    // 2 of 5 free, it needs 3.
    const waiter = ls.semaphore(key, 5, 10_000, store);
    const waiting = timed(waiter.acquire({ permits: 3, timeout: 5_000, retryDelay: 4_000 }));
    await sleep(600);
    const { waits, pending } = await get(`/inspect?key=${key}`);
    assert.equal(pending, 1, "its wait is pending inside the object");
    assert.ok(waits <= 2, `${waits} waits in 600 ms: one, or one more if it crossed its attempt`);
    await holder.release();
    const [acquired, ms] = await waiting;
    assert.equal(acquired, true);
    assert.ok(ms < 2_000, `woken by the release, not at its 4 s retryDelay: ${Math.round(ms)} ms`);
    assert.equal(await waiter.count(), 3);
    await waiter.release();
  });

  it("keeps each semaphore hold's permits in storage: they count after a restart, and holds stored before weights count 1", async () => {
    const store = await openRemoteStore();
    const key = uniqueKey("weights-stored");
    assert.equal(typeof (await store.acquirePermit(key, "a", 10_000, "semaphore", 5, 3)), "number");
    assert.equal(await store.acquirePermit(key, "b", 10_000, "semaphore", 5, 3), false, "3 + 3 > 5");
    // (Across the test's socket an undefined argument would arrive as null: left out, it is absent.)
    assert.equal(typeof (await store.acquirePermit(key, "b", 10_000, "semaphore", 5)), "number", "absent: 1");
    assert.equal(await store.countPermits(key, "semaphore"), 4);
    assert.deepEqual(await get(`/restart?key=${key}`), { restarted: true });
    assert.equal(await store.countPermits(key, "semaphore"), 4, "reloaded with their permits");
    assert.equal(await store.extendPermit(key, "a", 10_000, "semaphore"), true);
    assert.equal(await store.countPermits(key, "semaphore"), 4, "an extend keeps them");
    assert.equal(await store.releasePermit(key, "a", "semaphore"), true);
    assert.equal(await store.countPermits(key, "semaphore"), 1);

    const old = uniqueKey("weights-before");
    assert.deepEqual(await get(`/plant-unweighted?key=${old}&owners=x,y&limit=4`), { planted: true });
    assert.equal(await store.countPermits(old, "semaphore"), 2, "two holds of one each");
    assert.equal(await store.acquirePermit(old, "z", 10_000, "semaphore", 4, 3), false, "2 + 3 > 4");
    assert.equal(typeof (await store.acquirePermit(old, "z", 10_000, "semaphore", 4, 2)), "number", "2 + 2");
    assert.equal(await store.countPermits(old, "semaphore"), 4);
    assert.equal(await store.releasePermit(old, "x", "semaphore"), true);
    assert.equal(await store.countPermits(old, "semaphore"), 3);
  });

  it("makes read-write locks phase-fair (the lock runs in Node, the store's object in workerd)", async () => {
    await assertPhaseFair(ls, await openRemoteStore());
  });

  it("reloads its holds and fencing counter from storage when the object restarts", async () => {
    const store = await openRemoteStore();
    const key = uniqueKey("restart");
    const lockToken = await store.acquire(key, "a", 10_000);
    const permitToken = await store.acquirePermit(key, "s1", 10_000, "semaphore", 2);
    assert.ok(permitToken > lockToken);
    assert.ok((await store.acquirePermit(key, "r1", 10_000, "read", undefined)) > permitToken);
    assert.equal(await store.acquirePermit(key, "w", 10_000, "write", undefined), false, "a writer's claim");
    assert.deepEqual(await get(`/restart?key=${key}`), { restarted: true });
    assert.equal((await get(`/inspect?key=${key}`)).waits, 0, "a new instance");
    assert.equal(await store.isHeldBy(key, "a"), true);
    assert.equal(await store.acquire(key, "b", 10_000), false);
    assert.ok((await store.remainingTime(key)) > 9_000);
    assert.equal(await store.countPermits(key, "semaphore"), 1);
    assert.ok((await store.permitRemainingTime(key, "s1", "semaphore")) > 9_000);
    assert.equal(await store.countPermits(key, "read"), 1);
    assert.equal(await store.acquirePermit(key, "r2", 10_000, "read", undefined), false, "the claim keeps readers out");
    assert.equal(await store.release(key, "a"), true);
    assert.ok((await store.acquire(key, "b", 10_000)) > permitToken + 1, "the counter went on");
  });

  it("queues fair locks and semaphores: first in line is granted, places survive a restart, handles that disagree on fairness are refused", async () => {
    const store = await openRemoteStore();
    const refused = (pattern) => (err) => err.code === "INVALID_ARGUMENT" && pattern.test(err.message);
    const key = uniqueKey("fair");
    const fair = (owner, waits = true, ttl = 10_000) => store.acquireFair(key, owner, ttl, "lock", null, 1, waits);
    assert.equal(typeof (await fair("h")), "number");
    assert.equal(await fair("a"), false, "a takes the first place");
    assert.equal(await fair("b"), false, "b the second");
    await assert.rejects(
      store.acquire(key, "x", 10_000),
      refused(new RegExp(`^locksmith: lock ${escaped(key)} is fair \\(fair handles hold it or wait for it\\)`)),
    );
    assert.equal(await store.release(key, "h"), true);
    assert.equal(await fair("b"), false, "b asks first after the release, but a is first in line");
    assert.deepEqual(await get(`/restart?key=${key}`), { restarted: true });
    assert.equal(typeof (await fair("a")), "number", "a's place was kept across the restart");
    assert.equal(await fair("c", false), false, "an attempt that does not wait keeps no place");
    assert.equal(await store.release(key, "a"), true);
    assert.equal(typeof (await fair("b")), "number");
    // A place given up (release of an owner that holds nothing), and one that lapses.
    assert.equal(await fair("gone", true, 1_500), false);
    assert.equal(await fair("quits"), false);
    assert.equal(await store.release(key, "quits"), false, "it held nothing; its place is given up");
    assert.equal(await store.release(key, "b"), true);
    assert.equal(await fair("next"), false, "gone's place lasts 1.5 s from its last attempt");
    await sleep(1_600);
    assert.equal(typeof (await fair("next")), "number", "then next is first");
    assert.equal(await store.release(key, "next"), true);
    assert.equal(typeof (await store.acquire(key, "plain", 10_000)), "number", "nobody fair holds or waits: a handle that is not fair may take it");
    await assert.rejects(fair("f"), refused(new RegExp(`^locksmith: lock ${escaped(key)} is held by a handle that is not fair; this handle is fair`)));
    // A fair semaphore of 3: a later request for 1 does not overtake an earlier one for 3.
    const sem = (owner, permits) => store.acquireFair(key, owner, 10_000, "semaphore", 3, permits, true);
    assert.equal(typeof (await sem("s1", 2)), "number");
    assert.equal(await sem("big", 3), false);
    assert.equal(await sem("small", 1), false, "1 fits beside 2, but big is first");
    await assert.rejects(store.acquirePermit(key, "x", 10_000, "semaphore", 3, 1), refused(new RegExp(`^locksmith: semaphore ${escaped(key)} is fair`)));
    assert.equal(await store.releasePermit(key, "s1", "semaphore"), true);
    assert.equal(await sem("small", 1), false);
    assert.equal(typeof (await sem("big", 3)), "number");
    assert.equal(await store.releasePermit(key, "big", "semaphore"), true);
    assert.equal(typeof (await sem("small", 1)), "number");
    assert.equal(await store.releasePermit(key, "small", "semaphore"), true);
    assert.equal(await store.countPermits(key, "semaphore"), 0);
  });

  it("wakes fair waiters inside the object in turn: a lock in Node granted in arrival order, though the last retries first", async () => {
    const store = await openRemoteStore();
    const key = uniqueKey("fair-order");
    const holder = ls.lock(key, 10_000, store, { fair: true });
    assert.equal(await holder.acquire(), true);
    const order = [];
    const waits = [
      ["a", 3_000],
      ["b", 1_500],
      ["c", 500],
    ].map(async ([name, retryDelay], i) => {
      await sleep(60 * i);
      const l = ls.lock(key, 10_000, store, { fair: true });
      assert.equal(await l.acquire({ timeout: 8_000, retryDelay }), true, `${name} timed out`);
      order.push(name);
      await l.release();
    });
    await sleep(300);
    const released = performance.now();
    await holder.release();
    await Promise.all(waits);
    assert.deepEqual(order, ["a", "b", "c"]);
    assert.ok(performance.now() - released < 1_500, "each woken by the release before it, not at its retry delay");
  });

  it("answers acquire() and acquirePermit() with booleans when called directly, as the store contract's interface does", async () => {
    const store = await openRemoteStore();
    const key = uniqueKey("plain");
    assert.equal(await store.plainAcquire(key, "a", 10_000), true);
    assert.equal(await store.plainAcquire(key, "b", 10_000), false);
    assert.equal(await store.plainAcquirePermit(key, "s1", 10_000, "semaphore", 1), true);
    assert.equal(await store.plainAcquirePermit(key, "s2", 10_000, "semaphore", 1), false);
    assert.ok((await store.ownerRemainingTime(key, "a")) > 9_000);
    assert.equal(await store.ownerRemainingTime(key, "b"), null);
    assert.equal(await store.release(key, "a"), true);
    assert.equal(await store.ownerRemainingTime(key, "a"), null);
  });

  it("refuses bad calls: a TTL that never expires, an unknown permit kind, a semaphore limit that differs from its holders'", async () => {
    const store = await openRemoteStore();
    const key = uniqueKey("permit-checks");
    await assert.rejects(store.acquirePermit(key, "a", 5_000, "lock", 1), { message: /^locksmith: a permit kind is/ });
    await assert.rejects(store.acquirePermit(key, "a", 5_000, "semaphore", 0), { message: /^locksmith: a semaphore's limit must be/ });
    // Called directly (the object's methods are public over RPC), a TTL that would never
    // expire is refused, and nothing is taken.
    for (const ttl of [Number.NaN, 0, -5, "5000"]) {
      await assert.rejects(store.acquire(key, "a", ttl), { message: /^locksmith: ttlMs must be/ }, String(ttl));
      await assert.rejects(store.acquirePermit(key, "a", ttl, "semaphore", 2), { message: /^locksmith: ttlMs must be/ }, String(ttl));
    }
    assert.equal(await store.isLocked(key), false);
    assert.equal(typeof (await store.acquirePermit(key, "a", 5_000, "semaphore", 3)), "number");
    await assert.rejects(store.acquirePermit(key, "b", 5_000, "semaphore", 2), {
      code: "INVALID_ARGUMENT",
      message: new RegExp(`^locksmith: semaphore ${escaped(key)} is held with limit 3; this handle asks for 2`),
    });
    assert.equal(await store.countPermits(key, "semaphore"), 1);
    assert.equal(await store.releasePermit(key, "a", "semaphore"), true);
    assert.equal(typeof (await store.acquirePermit(key, "b", 5_000, "semaphore", 2)), "number", "a free semaphore takes a new limit");
    // A hold's permits: 1 to the limit, and only a semaphore's may be more than 1.
    for (const [kind, limit, permits] of [
      ["semaphore", 2, 3],
      ["semaphore", 2, 0],
      ["semaphore", 2, 1.5],
      ["semaphore", 2, "2"],
      ["read", undefined, 2],
    ]) {
      await assert.rejects(
        store.acquirePermit(uniqueKey("permits"), "c", 5_000, kind, limit, permits),
        { code: "INVALID_ARGUMENT", message: /^locksmith: permits / },
        `${kind} ${permits}`,
      );
    }
  });

  it("lets three of eight contenders hold a semaphore of three at once", async () => {
    const { ran, most, counts, error } = await get(`/semaphore?key=${uniqueKey("semaphore")}`);
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(ran, 8, "everyone got a permit in time");
    assert.equal(most, 3, "three at once, never more");
    assert.ok(
      counts.every((c) => c >= 1 && c <= 3),
      `counts ${counts}`,
    );
  });

  it("lets readers share, and a waiting writer keep new readers out until they leave", async () => {
    const steps = await get(`/readers-writer?key=${uniqueKey("rw")}`);
    assert.equal(steps.error, undefined, JSON.stringify(steps.error));
    assert.deepEqual(steps.readersIn, [true, true]);
    assert.equal(steps.readCount, 2);
    assert.equal(steps.lateReaderIn, false, "a new reader waits behind the writer");
    assert.equal(steps.writerIn, true);
    assert.ok(steps.writerWaitedMs < 1_500, `the writer, woken by the last reader, waited ${steps.writerWaitedMs} ms`);
    assert.equal(steps.readerWhileWriting, false);
    assert.equal(steps.writeCount, 1);
    assert.equal(steps.readerAfter, true);
  });
});
