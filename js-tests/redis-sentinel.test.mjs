// RedisLockStore over Redis Sentinel: a master, a replica and three Sentinels of the
// test's own. The conformance suite, the options, and a SENTINEL FAILOVER while locks
// are taken, held and waited on: calls settle within their timeouts, the store follows
// the new master (and never writes to the demoted one), fencing tokens keep growing.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Redis } from "ioredis";

import { IoRedisLockStore } from "../js/ioredis.mjs";
import { conformance } from "./conformance.mjs";
import { command, startSentinels, until } from "./redis-topology.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "./target.mjs";

const { Lock, RedisLockStore } = ls;
const native = TARGET === "native";

failOnUnhandledRejections();

let topology;
before(async () => {
  if (native) topology = await startSentinels();
});
after(async () => {
  await topology?.stop();
});

const connect = (options = {}) =>
  RedisLockStore.connect({ sentinels: topology.urls, masterName: topology.masterName, ...options });

if (native) {
  conformance("RedisLockStore over Sentinel", {
    makeStore: () => connect(),
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });
}

// locksmith/ioredis over an ioredis Redis on the same Sentinels.
if (native) {
  let client;
  conformance("IoRedisLockStore over an ioredis Redis with sentinels", {
    makeStore: () => {
      client = new Redis({ sentinels: topology.sentinels.map((s) => ({ host: "127.0.0.1", port: s.port })), name: topology.masterName });
      return new IoRedisLockStore(client);
    },
    closeStore: async (store) => (await store.close(), client.disconnect()),
    fencing: true,
    exactOwnership: true,
  });
}

describe("RedisLockStore over Sentinel", { skip: !native && "RedisLockStore is the native build's" }, () => {
  it("checks its options", async () => {
    const code = async (options) => {
      try {
        await RedisLockStore.connect(options);
      } catch (err) {
        return `${err.code} ${err.message}`;
      }
      return "connected";
    };
    const { urls, masterName } = topology;
    assert.match(await code({ sentinels: urls, masterName, url: "redis://127.0.0.1" }), /^INVALID_ARGUMENT locksmith: .*one of url, sentinels or cluster/);
    assert.match(await code({ sentinels: urls }), /^INVALID_ARGUMENT locksmith: masterName/);
    assert.match(await code({ sentinels: [], masterName }), /^INVALID_ARGUMENT locksmith: sentinels must be a non-empty array/);
    assert.match(await code({ sentinels: [urls[0], "rediss://127.0.0.1:1"], masterName }), /^INVALID_ARGUMENT locksmith: the URLs of sentinels/);
    assert.match(await code({ sentinels: ["http://x"], masterName }), /^INVALID_ARGUMENT locksmith: invalid Redis URL/);
    assert.match(await code({ sentinels: urls, masterName, sentinel: true }), /^INVALID_ARGUMENT locksmith: unknown option `sentinel`/);
    assert.match(await code({ url: "redis://127.0.0.1:1", masterName }), /^INVALID_ARGUMENT locksmith: masterName goes with sentinels/);
    assert.match(await code({ sentinels: urls, masterName, db: -1 }), /^INVALID_ARGUMENT locksmith: db must be/);
    assert.match(await code({ sentinels: urls, masterName, tlsInsecure: true }), /^INVALID_ARGUMENT locksmith: tlsInsecure needs a rediss:\/\/ URL/);
    // A name no Sentinel knows, or no Sentinel up: unavailable, within the connect budget.
    const start = performance.now();
    assert.match(await code({ sentinels: urls, masterName: "nobody", reconnectRetries: 0 }), /^STORE_UNAVAILABLE locksmith: .*knows no master named "nobody"/);
    assert.match(
      await code({ sentinels: ["redis://127.0.0.1:1"], masterName, reconnectRetries: 0, connectTimeoutMs: 300 }),
      /^STORE_UNAVAILABLE locksmith: .*no master "locksmith" found through the sentinels/,
    );
    assert.ok(performance.now() - start < 5_000);
    // The master's login: a wrong password is refused by the master, not the Sentinels.
    assert.match(await code({ sentinels: urls, masterName, password: "nope", reconnectRetries: 0 }), /^STORE_UNAVAILABLE locksmith: .*(AUTH|password)/);
  });

  it("asks the next Sentinel when one is down", async () => {
    const store = await connect({ sentinels: ["redis://127.0.0.1:1", ...topology.urls] });
    const l = new Lock(uniqueKey("next-sentinel"), 2_000, store);
    assert.equal(await l.acquire(), true);
    assert.equal(await l.release(), true);
    await store.close();
  });

  it("follows SENTINEL FAILOVER mid-use: calls settle in time, fencing tokens grow, holds go to the new master", { timeout: 60_000 }, async () => {
    const store = await connect({ commandTimeoutMs: 1_000 });
    const key = uniqueKey("failover");
    const tokens = [];
    const errors = [];
    let slowest = 0;
    let stop = false;
    const wait = { timeout: 2_000, retryDelay: 20 };
    const worker = async () => {
      while (!stop) {
        const l = new Lock(key, 5_000, store);
        const start = performance.now();
        try {
          if (await l.acquire(wait)) {
            tokens.push(l.fencingToken);
            await sleep(2);
            await l.release();
          }
        } catch (err) {
          errors.push(err.code);
          await sleep(20);
        }
        slowest = Math.max(slowest, performance.now() - start);
      }
    };
    // A lock held across the failover, with a waiter on it.
    const held = new Lock(uniqueKey("held"), 3_000, store);
    assert.equal(await held.acquire(), true);
    const heldToken = held.fencingToken;
    const waiter = new Lock(held.key, 3_000, store);
    const waiting = waiter.acquire({ timeout: 15_000, retryDelay: 50 }).catch((err) => err);

    const workers = Array.from({ length: 4 }, worker);
    await sleep(300);
    const before = tokens.length;
    assert.ok(before > 0, "locks were taken before the failover");
    const newMaster = await topology.failover();
    await sleep(1_000);
    stop = true;
    await Promise.all(workers);

    // Every call settled within its wait plus a few command timeouts.
    assert.ok(slowest < 2_000 + 4 * 1_000 + 1_000, `the slowest call took ${slowest} ms`);
    assert.deepEqual([...new Set(errors)].filter((c) => c !== "STORE_UNAVAILABLE"), [], `only STORE_UNAVAILABLE during the failover: ${errors}`);
    assert.ok(tokens.length > before, `locks were taken after the failover (${before} before, ${tokens.length} in all)`);
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `token ${i} (${tokens[i]}) > token ${i - 1} (${tokens[i - 1]})`);

    // The waiter gets the lock (its holder's TTL ends or the hold survived), with a
    // greater token; writes went to the new master.
    assert.equal(await waiting, true);
    assert.ok(waiter.fencingToken > heldToken, `${waiter.fencingToken} > ${heldToken}`);
    const after = new Lock(uniqueKey("after"), 5_000, store);
    assert.equal(await after.acquire(), true);
    assert.ok(after.fencingToken > tokens.at(-1));
    assert.equal(await command(newMaster.port, "EXISTS", `locksmith:{${after.key}}`), 1, "the hold is on the new master");
    assert.equal(await after.release(), true);
    await waiter.release();
    await store.close();
  });

  it("follows +switch-master away from a frozen master (SIGSTOP) without waiting for its connection", { timeout: 40_000 }, async () => {
    const store = await connect({ commandTimeoutMs: 500 });
    const l = new Lock(uniqueKey("frozen"), 5_000, store);
    assert.equal(await l.acquire(), true);
    assert.equal(await l.release(), true);
    const master = await topology.currentMaster();
    process.kill(master.pid, "SIGSTOP");
    try {
      await until("the sentinels to fail over", async () => (await topology.masterPort()) !== master.port, 20_000);
      // The frozen connection never closes by itself (it would be given up only when a
      // reply is 10 s overdue): the store leaves it on the Sentinels' word.
      const start = performance.now();
      await until("a lock on the new master", async () => {
        try {
          return await l.acquire();
        } catch {
          return false;
        }
      }, 5_000);
      assert.ok(performance.now() - start < 4_000, `took ${performance.now() - start} ms`);
      assert.equal(await l.release(), true);
    } finally {
      process.kill(master.pid, "SIGCONT");
    }
    await store.close();
  });

  it("drops a connection that answers READONLY and finds the master again", { timeout: 30_000 }, async () => {
    const store = await connect({ commandTimeoutMs: 1_000 });
    const l = new Lock(uniqueKey("readonly"), 2_000, store);
    assert.equal(await l.acquire(), true);
    assert.equal(await l.release(), true);
    // Demote the master behind the Sentinels' back: the next write answers READONLY.
    const master = await topology.currentMaster();
    const other = master === topology.master ? topology.replica : topology.master;
    await command(other.port, "REPLICAOF", "NO", "ONE");
    await command(master.port, "REPLICAOF", "127.0.0.1", String(other.port));
    try {
      const failed = await l.acquire().catch((err) => err);
      assert.equal(failed?.code, "STORE_UNAVAILABLE", `a write to the demoted master fails: ${failed}`);
      // The Sentinels still name the demoted server, whose ROLE now says replica: the
      // store refuses it rather than write there.
      const refused = await l.acquire().catch((err) => err);
      assert.equal(refused?.code, "STORE_UNAVAILABLE");
      assert.match(refused.message, /is a slave|no master/);
    } finally {
      // Put it back as the Sentinels know it.
      await command(master.port, "REPLICAOF", "NO", "ONE");
      await command(other.port, "REPLICAOF", "127.0.0.1", String(master.port));
    }
    await until("the store to find the master again", async () => {
      try {
        return await l.acquire();
      } catch {
        return false;
      }
    }, 10_000);
    assert.equal(await l.release(), true);
    await store.close();
  });
});
