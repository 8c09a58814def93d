// Release wake-ups of the stores over users' own Redis clients, against a real
// redis-server: a release wakes one waiter of a key in this process (as RedisLockStore's
// does), not every one, and a wake-up its waiter cannot use is passed on, never lost.
// Each waiter's retry delay is far longer than the test, so only a wake-up gets it in.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Redis } from "ioredis";
import { createClient } from "redis";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { NodeRedisLockStore } from "../../js/stores/node-redis.mjs";
import { SCRIPTS } from "../../js/gen/redis-scripts.mjs";
import { HAS_WAITERS } from "../../js/api/symbols.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "../support/target.mjs";

const { Lock } = ls;

failOnUnhandledRejections();

let server;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

const RETRY_DELAY_MS = 15_000;

/**
 * Each client with its acquire scripts counted (the store calls the client's own
 * method, so a wrapper on the instance sees every one) and `onSubscriber(sub)`, called
 * with each subscriber connection the store opens, before the store listens on it.
 */
const CLIENTS = {
  ioredis: async (onSubscriber = () => {}) => {
    const client = new Redis(server.url);
    const counted = { acquires: 0 };
    const evalsha = client.evalsha.bind(client);
    client.evalsha = (sha, ...rest) => {
      if (sha === SCRIPTS.acquire.sha) counted.acquires++;
      return evalsha(sha, ...rest);
    };
    const duplicate = client.duplicate.bind(client);
    client.duplicate = (...args) => {
      const sub = duplicate(...args);
      onSubscriber(sub);
      return sub;
    };
    const store = new IoRedisLockStore(client);
    return { store, client, counted, close: async () => (await store.close(), await client.quit()) };
  },
  "node-redis": async () => {
    const client = await createClient({ url: server.url }).connect();
    const counted = { acquires: 0 };
    const evalSha = client.evalSha.bind(client);
    client.evalSha = (sha, ...rest) => {
      if (sha === SCRIPTS.acquire.sha) counted.acquires++;
      return evalSha(sha, ...rest);
    };
    const store = new NodeRedisLockStore(client);
    return { store, counted, close: async () => (await store.close(), await client.quit()) };
  },
};

/** Resolves once `counted.acquires` has not moved for `quietMs`. */
async function settled(counted, quietMs = 300) {
  for (let last = -1; last !== counted.acquires; ) {
    last = counted.acquires;
    await sleep(quietMs);
  }
}

for (const [name, make] of Object.entries(CLIENTS)) {
  describe(`${name} store: release wake-ups`, () => {
    it("a release wakes one waiter of the key, not every one", async () => {
      const made = await make();
      try {
        const key = uniqueKey(`wake-one-${name}`);
        const holder = new Lock(key, 30_000, made.store);
        assert.equal(await holder.acquire(), true);
        const waiters = 6;
        const order = [];
        const start = performance.now();
        const done = Array.from({ length: waiters }, async (_, i) => {
          const l = new Lock(key, 30_000, made.store);
          assert.equal(await l.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS }), true);
          order.push(i);
          await sleep(20);
          await l.release();
        });
        // Every waiter has tried, listens, and tried again once its channel was subscribed.
        await settled(made.counted);
        const before = made.counted.acquires;
        await holder.release();
        await Promise.all(done);
        const attempts = made.counted.acquires - before;
        assert.equal(order.length, waiters);
        assert.ok(performance.now() - start < RETRY_DELAY_MS, "every hand-off came by a wake-up");
        // One attempt per release (the waker's), with room for one more now and then.
        assert.ok(attempts <= waiters + 2, `${attempts} acquire scripts for ${waiters} hand-offs: a release woke more than one waiter`);
      } finally {
        await made.close();
      }
    });
  });
}

describe("ioredis store: a wake-up its waiter cannot use", () => {
  it("goes to the next waiter when the woken one is aborted as it comes", async () => {
    const abort = new AbortController();
    // Aborts the first waiter as the release's message reaches the subscriber, just
    // before the store hands it the wake-up: both are ready in one turn.
    const made = await CLIENTS.ioredis((sub) => sub.on("message", () => abort.abort()));
    try {
      const key = uniqueKey("pass-on");
      const holder = new Lock(key, 30_000, made.store);
      assert.equal(await holder.acquire(), true);
      const first = new Lock(key, 30_000, made.store);
      const firstDone = first.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS, signal: abort.signal }).then(
        (ok) => ok,
        (err) => err,
      );
      await settled(made.counted);
      // The second waits behind the first.
      const second = new Lock(key, 30_000, made.store);
      const start = performance.now();
      const secondDone = second.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS }).then((ok) => [ok, performance.now() - start]);
      await settled(made.counted);
      const releasedAt = performance.now();
      await holder.release();
      const firstOutcome = await firstDone;
      assert.equal(firstOutcome?.code, "ABORTED", `the first waiter was aborted: ${firstOutcome}`);
      const [ok] = await secondDone;
      const waited = performance.now() - releasedAt;
      assert.equal(ok, true);
      assert.ok(waited < 3_000, `the second waiter got in ${Math.round(waited)} ms after the release; its retry delay is ${RETRY_DELAY_MS} ms`);
      await second.release();
    } finally {
      await made.close();
    }
  });
});

describe("ioredis store: a woken waiter whose attempt fails", () => {
  it("passes the wake-up on: the key does not stay free for a retry delay", async () => {
    const made = await CLIENTS.ioredis();
    try {
      const key = uniqueKey("pass-on-failed");
      const holder = new Lock(key, 30_000, made.store);
      assert.equal(await holder.acquire(), true);
      const start = performance.now();
      const inAt = [];
      const waiters = [0, 1].map(async () => {
        const l = new Lock(key, 30_000, made.store);
        assert.equal(await l.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS }), true);
        inAt.push(performance.now() - start);
        await l.release();
      });
      await settled(made.counted);
      // The next acquire script fails (a reply lost to a broken connection, say).
      const client = made.client;
      let failNext = true;
      const counting = client.evalsha;
      client.evalsha = (sha, ...rest) => {
        if (failNext && sha === SCRIPTS.acquire.sha) {
          failNext = false;
          return Promise.reject(new Error("connection lost"));
        }
        return counting(sha, ...rest);
      };
      const releasedAt = performance.now() - start;
      await holder.release();
      await Promise.all(waiters);
      const first = Math.min(...inAt) - releasedAt;
      assert.equal(failNext, false, "an acquire script failed");
      assert.ok(first < 3_000, `the first waiter got in ${Math.round(first)} ms after the release; the retry delay is ${RETRY_DELAY_MS} ms`);
    } finally {
      await made.close();
    }
  });
});

/** Until `test()` holds, polling every 10 ms for up to `ms`. */
async function until(test, ms = 5_000) {
  for (const end = performance.now() + ms; !test(); await sleep(10)) {
    if (performance.now() > end) throw new Error(`not within ${ms} ms: ${test}`);
  }
}

for (const [name, make] of Object.entries(CLIENTS)) {
  describe(`${name} store: waiters of this process, and the subscriber connection lost`, () => {
    it("answers whether a waiter here listens on a live subscription (a newcomer queues behind it)", async () => {
      const made = await make();
      const admin = new Redis(server.url);
      try {
        const key = uniqueKey(`has-waiters-${name}`);
        const holder = new Lock(key, 30_000, made.store);
        assert.equal(made.store[HAS_WAITERS](key), false, "nobody waits");
        assert.equal(await holder.acquire(), true);
        const waiter = new Lock(key, 30_000, made.store);
        const waited = waiter.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS });
        waited.catch(() => {}); // awaited below; a failed check must not leave it unhandled
        await until(() => made.store[HAS_WAITERS](key));
        assert.equal(made.store[HAS_WAITERS](`${key}:other`), false, "another key has no waiter");
        // The subscriber connection dropped: releases go unheard until it is back (ioredis
        // reconnects after 50 ms; node-redis at once, too soon to see it away).
        await admin.client("KILL", "TYPE", "pubsub");
        if (name === "ioredis") await until(() => !made.store[HAS_WAITERS](key));
        await until(() => made.store[HAS_WAITERS](key));
        await holder.release();
        assert.equal(await waited, true);
        await waiter.release();
        await until(() => !made.store[HAS_WAITERS](key));
      } finally {
        admin.disconnect();
        await made.close();
      }
    });

    it("wakes its waiters when the subscriber connection is back: a release meanwhile went unheard", async () => {
      const made = await make();
      const admin = new Redis(server.url);
      try {
        const key = uniqueKey(`reconnect-${name}`);
        const holder = new Lock(key, 30_000, made.store);
        assert.equal(await holder.acquire(), true);
        const waiter = new Lock(key, 30_000, made.store);
        const start = performance.now();
        const waited = waiter.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS }).then((ok) => [ok, performance.now() - start]);
        waited.catch(() => {}); // awaited below; a failed check must not leave it unhandled
        await until(() => made.store[HAS_WAITERS](key));
        await settled(made.counted);
        // Released while the subscriber is away: its message reaches nobody.
        await admin.client("KILL", "TYPE", "pubsub");
        await holder.release();
        const [ok, at] = await waited;
        assert.equal(ok, true);
        assert.ok(at < 5_000, `acquired after ${Math.round(at)} ms; the retry delay is ${RETRY_DELAY_MS} ms`);
        await waiter.release();
      } finally {
        admin.disconnect();
        await made.close();
      }
    });
  });
}

describe("a newcomer behind this process's waiters", { skip: TARGET !== "wasm" && "the addon's JS-store bridge does not ask hasWaiters" }, () => {
  it("waits its turn: the waiter woken by a release gets in first", async () => {
    const made = await CLIENTS.ioredis();
    try {
      const key = uniqueKey("queue");
      const holder = new Lock(key, 30_000, made.store);
      assert.equal(await holder.acquire(), true);
      const order = [];
      const waiter = new Lock(key, 30_000, made.store);
      const waited = waiter.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS }).then(async (ok) => {
        order.push("waiter");
        await sleep(50);
        await waiter.release();
        return ok;
      });
      waited.catch(() => {}); // awaited below; a failed check must not leave it unhandled
      await until(() => made.store[HAS_WAITERS](key));
      await settled(made.counted);
      const before = made.counted.acquires;
      await holder.release();
      // The holder comes back at once, as a loop does.
      const again = new Lock(key, 30_000, made.store);
      const back = again.acquire({ timeout: 25_000, retryDelay: RETRY_DELAY_MS }).then(async (ok) => {
        order.push("newcomer");
        await sleep(50);
        await again.release();
        return ok;
      });
      assert.deepEqual(await Promise.all([waited, back]), [true, true]);
      assert.deepEqual(order, ["waiter", "newcomer"]);
      assert.ok(made.counted.acquires - before <= 2, `${made.counted.acquires - before} acquire scripts for two hand-offs`);
    } finally {
      await made.close();
    }
  });
});
