// Fair locks on the Redis stores (RedisLockStore in the build under test, and the store over
// a user's ioredis client, which runs the same scripts): what a fair hold and a fair place
// leave in Redis, seen from the server. A hold restored in another store keeps its key
// fair; an extend never shortens the fair mark a longer place keeps; lockAll() does not
// take a key past its queue, nor a free key its mark keeps fair; a handle that
// disagrees on fairness is refused in the same words on every store; a client store's fair waiters wait on wake-ups, not in a loop;
// a waiter that gives up leaves the queue at once, and the last one takes the mark along.
// Fair semaphores: grants in queue order (a later, smaller request never overtakes an
// earlier, larger one), a grant that leaves room wakes the next in line, the refusals, and
// the mark kept by holds and places alike.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Redis } from "ioredis";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { withFaults } from "../../js/testing.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";

failOnUnhandledRejections();

const FAIR = { fair: true };

let server;
let admin;
before(async () => {
  server = await startRedis();
  admin = new Redis(server.url);
});
after(async () => {
  await admin.quit();
  await server.stop();
});

/** Each store kind: `open()` → `{ store, close() }`. */
const KINDS = {
  RedisLockStore: async () => {
    const store = await ls.RedisLockStore.connect(server.url);
    return { store, close: () => store.close() };
  },
  IoRedisLockStore: async () => {
    const client = new Redis(server.url);
    const store = new IoRedisLockStore(client);
    return {
      store,
      close: async () => {
        await store.close();
        await client.quit();
      },
    };
  },
};

/** The fair lock's keys in Redis (the default prefix). */
const keysOf = (key) => {
  const lock = `locksmith:{${key}}`;
  return { lock, queue: `${lock}:queue`, places: `${lock}:places`, mark: `${lock}:fair` };
};

/** A fair semaphore's keys in Redis (the default prefix). */
const semKeysOf = (key) => {
  const holders = `locksmith:{${key}}:semaphore`;
  return { holders, queue: `${holders}:queue`, places: `${holders}:places`, mark: `${holders}:fair` };
};

/** Resolves once `key`'s queue (a fair lock's, or with `of` semKeysOf a fair semaphore's) holds `n` places. */
async function queued(key, n, of = keysOf) {
  const { queue } = of(key);
  for (let i = 0; i < 200; i++) {
    if ((await admin.zcard(queue)) === n) return;
    await sleep(10);
  }
  assert.fail(`${queue} never held ${n} places (it holds ${await admin.zcard(queue)})`);
}

for (const [name, open] of Object.entries(KINDS)) {
  describe(`fair locks and semaphores on ${name}`, () => {
    let a;
    let b;
    before(async () => {
      a = await open();
      b = await open();
    });
    after(async () => {
      await a?.close();
      await b?.close();
    });

    it("a hold restored in another store keeps the key fair: its extends keep the mark, its release goes through the queue", async () => {
      const key = uniqueKey("fair-restored");
      const holder = ls.lock(key, 1_500, a.store, FAIR);
      assert.equal(await holder.acquire(), true);
      const restored = ls.restoreLock(holder.serialize(), b.store);
      assert.equal(restored.fair, true);
      const waiter = ls.lock(key, 1_500, a.store, FAIR);
      const waiting = waiter.acquire({ timeout: 20_000, retryDelay: 100 });
      await queued(key, 1);
      // Past the first hold's TTL and the mark's grace: only the restored handle's extends keep them.
      for (let i = 0; i < 6; i++) {
        await sleep(500);
        await restored.extend();
      }
      assert.ok((await admin.pttl(keysOf(key).mark)) > 1_000, "the restored hold's extends keep the fair mark");
      assert.equal(await restored.release(), true);
      assert.equal(await waiting, true, "the waiter is granted, not refused as if a plain handle held the key");
      assert.equal(await waiter.release(), true);
      const { lock, queue, places, mark } = keysOf(key);
      assert.equal(await admin.exists(lock, queue, places, mark), 0, "the last fair release takes the queue and the mark along");
    });

    it("an extend never shortens the fair mark that a longer waiter's place keeps", async () => {
      const key = uniqueKey("fair-mark");
      const holder = ls.lock(key, 2_000, a.store, FAIR);
      assert.equal(await holder.acquire(), true);
      const controller = new AbortController();
      const waiter = ls.lock(key, 60_000, b.store, FAIR);
      const waiting = waiter.acquire({ timeout: 60_000, signal: controller.signal }).catch((err) => err.code);
      await queued(key, 1);
      assert.ok((await admin.pttl(keysOf(key).mark)) > 55_000);
      await holder.extend();
      assert.ok((await admin.pttl(keysOf(key).mark)) > 55_000, "the holder's extend left the mark as long as the place keeps it");
      controller.abort();
      assert.equal(await waiting, "ABORTED");
      // The waiter that gave up leaves the queue at once (its clean-up release, one round
      // trip after the abort); the hold keeps the mark.
      await queued(key, 0);
      assert.equal(await admin.exists(keysOf(key).mark), 1);
      assert.equal(await holder.release(), true);
      assert.equal(await admin.exists(keysOf(key).mark), 0);
    });

    it("lockAll() does not take a fair key past its queue", async () => {
      const [key, other] = [uniqueKey("fair-all"), uniqueKey("fair-all-other")];
      const holder = ls.lock(key, 10_000, a.store, FAIR);
      assert.equal(await holder.acquire(), true);
      const waiter = ls.lock(key, 10_000, b.store, FAIR);
      const waiting = waiter.acquire({ timeout: 10_000 });
      await queued(key, 1);
      const all = ls.lockAll([key, other], 10_000, a.store);
      // Waiting behind the queue (the engine's one script counts the key held) or refused
      // (a store that takes the keys one at a time: the plain acquire refuses a fair key).
      const taking = all.acquire({ timeout: 400, retryDelay: 20 }).catch((err) => err.code);
      await sleep(100);
      assert.equal(await holder.release(), true);
      assert.equal(await waiting, true, "the fair waiter is granted");
      assert.ok([false, "INVALID_ARGUMENT"].includes(await taking), "lockAll() was not granted the fair key");
      assert.equal(await waiter.release(), true);
    });

    it("lockAll() counts a key with only its fair mark as held, and takes none of its keys", async () => {
      // The mark outlives the last fair hold or place by a small bound: a free key with
      // its mark is still fair, and lockAll() (not fair) must not take it.
      const [key, other] = [uniqueKey("fair-all-mark"), uniqueKey("fair-all-mark-other")];
      await admin.set(keysOf(key).mark, "1", "PX", 5_000);
      const all = ls.lockAll([key, other], 10_000, a.store);
      if (name === "RedisLockStore") {
        // Its one script for every key (acquire_all.lua) counts the key held.
        assert.equal(await all.acquire(), false, "lockAll() was refused the marked key");
      } else {
        // A store without acquireAll takes the keys one at a time: the plain acquire refuses.
        await assert.rejects(all.acquire(), { code: "INVALID_ARGUMENT", message: new RegExp(`^locksmith: lock ${JSON.stringify(key)} is fair `) });
      }
      assert.equal(await admin.exists(keysOf(key).lock, keysOf(other).lock), 0, "neither key was taken");
      await admin.del(keysOf(key).mark);
      assert.equal(await all.acquire(), true, "without the mark, the keys are free");
      assert.equal(await all.release(), true);
    });

    it("a handle that disagrees on fairness is refused naming the key, in the same words on every Redis store", async () => {
      const key = uniqueKey("fair-words");
      const fair = ls.lock(key, 10_000, a.store, FAIR);
      assert.equal(await fair.acquire(), true);
      await assert.rejects(ls.lock(key, 10_000, b.store).acquire(), {
        code: "INVALID_ARGUMENT",
        message: `locksmith: lock ${JSON.stringify(key)} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on \`fair\``,
      });
      assert.equal(await fair.release(), true);
      await admin.del(keysOf(key).mark);
      const plain = ls.lock(key, 10_000, b.store);
      assert.equal(await plain.acquire(), true);
      await assert.rejects(ls.lock(key, 10_000, a.store, FAIR).acquire(), {
        code: "INVALID_ARGUMENT",
        message: `locksmith: lock ${JSON.stringify(key)} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on \`fair\``,
      });
      assert.equal(await plain.release(), true);
    });

    it("fair waiters wait on release wake-ups: a few attempts each while the key stays held", async () => {
      const key = uniqueKey("fair-quiet");
      const holder = ls.lock(key, 30_000, b.store, FAIR);
      assert.equal(await holder.acquire(), true);
      const before = Number((await admin.info("commandstats")).match(/cmdstat_evalsha:calls=(\d+)/)?.[1] ?? 0);
      const controller = new AbortController();
      const waits = Array.from({ length: 8 }, () =>
        ls
          .lock(key, 30_000, b.store, FAIR)
          .acquire({ timeout: 30_000, retryDelay: 1_000, signal: controller.signal })
          .catch((err) => err.code),
      );
      await sleep(1_500);
      const calls = Number((await admin.info("commandstats")).match(/cmdstat_evalsha:calls=(\d+)/)?.[1] ?? 0) - before;
      controller.abort();
      assert.deepEqual(
        await Promise.all(waits),
        waits.map(() => "ABORTED"),
      );
      // Each waiter's first attempt and at most a retry or two: not a loop.
      assert.ok(calls <= 8 * 3, `${calls} scripts ran while 8 fair waiters waited 1.5 s`);
      await queued(key, 0); // the aborted waiters leave the queue
      assert.equal(await holder.release(), true);
    });

    // Fair semaphores.
    it("a later, smaller request does not overtake an earlier, larger one; each grant goes in queue order", async () => {
      const key = uniqueKey("fair-sem-order");
      const sem = (store) => ls.semaphore(key, 3, 10_000, store, FAIR);
      const holder = sem(a.store);
      assert.equal(await holder.acquire({ permits: 2 }), true);
      const order = [];
      const big = sem(b.store);
      const bigWait = big.acquire({ timeout: 10_000, permits: 3 }).then((ok) => order.push("big") && ok);
      await queued(key, 1, semKeysOf);
      const small = sem(a.store);
      const smallWait = small.acquire({ timeout: 10_000 }).then((ok) => order.push("small") && ok);
      await queued(key, 2, semKeysOf);
      await sleep(100);
      assert.deepEqual(order, [], "one permit is free, but the larger request is first in line");
      assert.equal(await holder.release(), true);
      assert.equal(await bigWait, true);
      await sleep(100);
      assert.deepEqual(order, ["big"], "the smaller one waits for the larger one's permits");
      assert.equal(await big.release(), true);
      assert.equal(await smallWait, true);
      assert.deepEqual(order, ["big", "small"]);
      assert.equal(await small.release(), true);
      const { holders, queue, places, mark } = semKeysOf(key);
      assert.equal(await admin.exists(holders, queue, places, mark), 0, "the last fair release takes the queue and the mark along");
    });

    it("a grant that leaves room wakes the next in line: two waiters for one permit each are both granted at one release", async () => {
      const key = uniqueKey("fair-sem-room");
      const sem = (store) => ls.semaphore(key, 2, 10_000, store, FAIR);
      const holder = sem(a.store);
      assert.equal(await holder.acquire({ permits: 2 }), true);
      const waiters = [sem(b.store), sem(a.store)];
      const waits = [];
      for (const w of waiters) {
        waits.push(w.acquire({ timeout: 10_000, retryDelay: 5_000 }));
        await sleep(50);
      }
      await queued(key, 2, semKeysOf);
      const released = performance.now();
      assert.equal(await holder.release(), true);
      assert.deepEqual(await Promise.all(waits), [true, true]);
      assert.ok(performance.now() - released < 2_000, "the second was woken by the first one's grant, not by its 5 s retry");
      for (const w of waiters) assert.equal(await w.release(), true);
    });

    it("handles that disagree on fairness are refused naming the key; a fair handle's limit must be the holders'", async () => {
      const key = uniqueKey("fair-sem-words");
      const fair = ls.semaphore(key, 2, 10_000, a.store, FAIR);
      assert.equal(await fair.acquire(), true);
      await assert.rejects(ls.semaphore(key, 2, 10_000, b.store).acquire(), {
        code: "INVALID_ARGUMENT",
        message: `locksmith: semaphore ${JSON.stringify(key)} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on \`fair\``,
      });
      await assert.rejects(ls.semaphore(key, 3, 10_000, b.store, FAIR).acquire(), {
        code: "INVALID_ARGUMENT",
        message: `locksmith: semaphore ${JSON.stringify(key)} is held with limit 2; this handle asks for 3: every handle of a semaphore must use the same limit`,
      });
      assert.equal(await fair.release(), true);
      assert.equal(await admin.exists(semKeysOf(key).mark), 0, "the last fair holder took the mark along");
      const plain = ls.semaphore(key, 2, 10_000, b.store);
      assert.equal(await plain.acquire(), true);
      await assert.rejects(ls.semaphore(key, 2, 10_000, a.store, FAIR).acquire(), {
        code: "INVALID_ARGUMENT",
        message: `locksmith: semaphore ${JSON.stringify(key)} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on \`fair\``,
      });
      assert.equal(await admin.exists(semKeysOf(key).queue), 0, "the refused fair attempt took no place");
      assert.equal(await plain.release(), true);
    });

    it("a waiter that gives up leaves the queue at once; an extend keeps the mark as long as the hold, never shorter", async () => {
      const key = uniqueKey("fair-sem-quit");
      const holder = ls.semaphore(key, 1, 2_000, a.store, FAIR);
      assert.equal(await holder.acquire(), true);
      const controller = new AbortController();
      const waiter = ls.semaphore(key, 1, 60_000, b.store, FAIR);
      const waiting = waiter.acquire({ timeout: 60_000, signal: controller.signal }).catch((err) => err.code);
      await queued(key, 1, semKeysOf);
      const { mark } = semKeysOf(key);
      assert.ok((await admin.pttl(mark)) > 55_000);
      await holder.extend();
      assert.ok((await admin.pttl(mark)) > 55_000, "the holder's extend left the mark as long as the place keeps it");
      controller.abort();
      assert.equal(await waiting, "ABORTED");
      await queued(key, 0, semKeysOf);
      assert.equal(await admin.exists(mark), 1, "the hold keeps the mark");
      await admin.pexpire(mark, 500);
      await holder.extend("5s");
      assert.ok((await admin.pttl(mark)) > 4_000, "a fair holder's extend lengthens the mark with the hold");
      assert.equal(await holder.release(), true);
      assert.equal(await admin.exists(mark), 0);
    });
  });
}

// The script itself (through the store contract of a client store, which runs the scripts
// RedisLockStore compiles in): a grant that leaves others in line publishes, one that
// leaves nobody does not, so the next in line hears of room a grant left.
describe("fair_semaphore_acquire.lua", () => {
  it("publishes on the semaphore's release channel when a grant leaves others in line, not otherwise", async () => {
    const client = new Redis(server.url);
    const subscriber = new Redis(server.url);
    const store = new IoRedisLockStore(client);
    const key = uniqueKey("fair-sem-publish");
    const messages = [];
    try {
      await subscriber.subscribe(`${semKeysOf(key).holders}:released`);
      subscriber.on("message", (channel) => messages.push(channel));
      const fair = (owner, waits = true) => store.acquireFair(key, owner, 10_000, "semaphore", 2, 1, waits);
      // A script publishes before it answers: its message is on its way by then.
      const seen = async () => (await sleep(50), messages.length);
      assert.equal(typeof (await store.acquireFair(key, "holder", 10_000, "semaphore", 2, 2, true)), "number");
      assert.equal(await fair("a"), false);
      assert.equal(await fair("b"), false);
      assert.equal(await seen(), 0, "places taken: nothing published");
      assert.equal(await store.releasePermit(key, "holder", "semaphore"), true);
      assert.equal(await seen(), 1, "the release");
      assert.equal(await fair("b"), false, "b is second in line");
      assert.equal(typeof (await fair("a")), "number");
      assert.equal(await seen(), 2, "a's grant left b in line: published");
      assert.equal(typeof (await fair("b")), "number");
      assert.equal(await seen(), 2, "b's grant left nobody: nothing published");
      await store.releasePermit(key, "a", "semaphore");
      await store.releasePermit(key, "b", "semaphore");
    } finally {
      await store.close();
      await client.quit();
      subscriber.disconnect();
    }
  });
});

// withFaults() over a store whose fair locks have their own release and extend: a fault
// named "release" or "extend" reaches them as it reaches a plain lock's.
describe("withFaults() over IoRedisLockStore's fair locks", () => {
  it("fails a fair lock's release and extend named as release and extend", async () => {
    const client = new Redis(server.url);
    const inner = new IoRedisLockStore(client);
    const store = withFaults(inner);
    try {
      const l = ls.lock(uniqueKey("fair-faults"), 10_000, store, FAIR);
      assert.equal(await l.acquire(), true);
      store.failNext(1, { calls: ["extend"] });
      await assert.rejects(l.extend(), { code: "STORE_UNAVAILABLE" });
      store.failNext(1, { calls: ["release"] });
      await assert.rejects(l.release(), { code: "STORE_UNAVAILABLE" });
      assert.equal(await l.release(), true, "the fault failed the call before it reached Redis: the hold stood");
    } finally {
      await store.close();
      await client.quit();
    }
  });
});
