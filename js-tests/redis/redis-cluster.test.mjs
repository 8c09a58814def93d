// RedisLockStore over Redis Cluster: three masters with a replica each, of the test's
// own. The conformance suite, keys spread over every master, fair locks and semaphores
// woken over each key's shard, a slot migrated while a lock on it is held and waited on
// (ASK, TRYAGAIN, then MOVED), and failovers: a
// graceful CLUSTER FAILOVER under the 8-process load test (its ordered log shows no
// overlap), and a master killed with its replica promoted while locks are held. The
// history checker's bounded pass over Cluster runs here too, on this cluster: a manual
// CLUSTER FAILOVER mid-run is clean, and one whose new master lost the holds is caught.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Cluster } from "ioredis";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { NodeRedisLockStore } from "../../js/stores/node-redis.mjs";
import { keySlot } from "../../js/redis/driver.mjs";
import { conformance } from "../conformance/conformance.mjs";
import { holderContract } from "../support/holder-contract.mjs";
import { assertCaught, assertCleanAcrossFailover } from "../histories/assert.mjs";
import { HISTORY_KEYS } from "../histories/client.mjs";
import { FAILOVER_TTL_MS, clusterFailovers, clusterStore } from "../histories/run.mjs";
import { assertNoOverlap, contender } from "../support/load.mjs";
import { clusterSlots, command, connectAnswer, startCluster, until } from "../support/redis-topology.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "../support/target.mjs";

const { Lock, RedisLockStore, lockAll } = ls;
const native = TARGET === "native";
// The WebAssembly build (here over node:net) runs the core cases too: the same engine
// under its own driver. Cases run once, by the native pass, to keep the wasm pass short.
const wasm = TARGET === "wasm";
const ONLY_NATIVE = { skip: !native && "run by the native pass" };

failOnUnhandledRejections();

let cluster;
before(async () => {
  if (native || wasm) cluster = await startCluster();
});
after(async () => {
  await cluster?.stop();
});

const connect = (options = {}) => RedisLockStore.connect({ cluster: cluster.urls.slice(0, 2), ...options });

/** The hash slot of a lock key, and the port of the master that serves it now. */
async function whereIs(key, via = cluster.nodes[0].port) {
  const slot = await command(via, "CLUSTER", "KEYSLOT", `locksmith:{${key}}`);
  const range = (await clusterSlots(via)).find((r) => r.first <= slot && slot <= r.last);
  return { slot, port: range.port, replica: range.replicas[0] };
}

/** A live node to ask about the cluster. */
const anyNode = () => cluster.nodes.find((n) => !n.killed).port;

if (native || wasm) {
  conformance("RedisLockStore over Redis Cluster", {
    makeStore: () => connect(),
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });
}

// locksmith-js/ioredis over an ioredis Cluster: the same suite, and one key layout with
// RedisLockStore's cluster mode.
const ioredisCluster = () => new Cluster(cluster.urls.map((url) => ({ host: "127.0.0.1", port: Number(new URL(url).port) })));
if (native) {
  let client;
  conformance("IoRedisLockStore over an ioredis Cluster", {
    makeStore: () => new IoRedisLockStore((client = ioredisCluster())),
    closeStore: async (store) => (await store.close(), client.disconnect()),
    fencing: true,
    exactOwnership: true,
  });
}

// locksmith-js/node-redis over a node-redis cluster (createCluster): the same suite.
if (native) {
  let client;
  conformance("NodeRedisLockStore over a node-redis cluster", {
    makeStore: async () => {
      const { createCluster } = await import("redis");
      client = createCluster({ rootNodes: cluster.urls.map((url) => ({ url })) });
      client.on("error", () => {});
      await client.connect();
      return new NodeRedisLockStore(client);
    },
    closeStore: async (store) => (await store.close(), (await client.close?.()) ?? client.disconnect()),
    fencing: true,
    exactOwnership: true,
  });
}

describe("RedisLockStore over Redis Cluster", () => {
  it("checks its options", async () => {
    const code = connectAnswer;
    assert.match(
      await code({ cluster: cluster.urls, url: cluster.urls[0] }),
      /^INVALID_ARGUMENT locksmith: .*one of url, sentinels or cluster; got url and cluster/,
    );
    assert.match(await code({ cluster: [`${cluster.urls[0]}/2`] }), /^INVALID_ARGUMENT locksmith: a Redis Cluster has only database 0/);
    assert.match(await code({ cluster: cluster.urls, masterName: "x" }), /^INVALID_ARGUMENT locksmith: masterName goes with sentinels/);
    assert.match(await code({ cluster: "redis://127.0.0.1" }), /^INVALID_ARGUMENT locksmith: cluster must be a non-empty array/);
    assert.match(
      await code({ cluster: ["redis://127.0.0.1:1"], reconnectRetries: 0, connectTimeoutMs: 300 }),
      /^STORE_UNAVAILABLE locksmith: .*no cluster node answered CLUSTER SLOTS/,
    );
  });

  it("logs in to every node with the seed URLs' ACL user", async () => {
    for (const node of cluster.nodes.filter((n) => !n.killed)) {
      await command(node.port, "ACL", "SETUSER", "locker", "on", ">cluster-pw", "~*", "&*", "+@all");
    }
    const store = await RedisLockStore.connect({ cluster: cluster.urls.slice(0, 2).map((u) => u.replace("redis://", "redis://locker:cluster-pw@")) });
    // Enough keys that each master gets some (12 missed one of three about once in 40 runs).
    const locks = Array.from({ length: 48 }, (_, i) => new Lock(uniqueKey(`acl-${i}`), 2_000, store));
    for (const l of locks) assert.equal(await l.acquire(), true);
    for (const port of await cluster.masters(anyNode())) {
      assert.match(await command(port, "CLIENT", "LIST"), /user=locker/, `the store logged in to ${port} as the ACL user`);
    }
    for (const l of locks) assert.equal(await l.release(), true);
    await store.close();
  });

  it("starts from any seed that answers", async () => {
    const store = await RedisLockStore.connect({ cluster: ["redis://127.0.0.1:1", cluster.urls[1]], connectTimeoutMs: 500 });
    const l = new Lock(uniqueKey("seed"), 2_000, store);
    assert.equal(await l.acquire(), true);
    assert.equal(await l.release(), true);
    await store.close();
  });

  it("routes each key to the master of its slot: locks land on every master", async () => {
    const store = await connect();
    const masters = await cluster.masters(anyNode());
    for (const port of masters) await command(port, "CONFIG", "RESETSTAT");
    // Keys until every master owns four of them (which master a key lands on is up to its hash).
    const perMaster = new Map(masters.map((port) => [port, 0]));
    const locks = [];
    for (let i = 0; [...perMaster.values()].some((n) => n < 4); i++) {
      assert.ok(i < 1_000, `no keys found for every master: ${JSON.stringify([...perMaster])}`);
      const key = uniqueKey(`spread-${i}`);
      const { port } = await whereIs(key);
      if ((perMaster.get(port) ?? 4) >= 4) continue;
      perMaster.set(port, perMaster.get(port) + 1);
      locks.push(new Lock(key, 10_000, store));
    }
    for (const l of locks) assert.equal(await l.acquire(), true);
    const holding = new Set();
    for (const l of locks) {
      const { port } = await whereIs(l.key);
      assert.equal((await command(port, "GET", `locksmith:{${l.key}}`)) !== null, true, `${l.key} is on its slot's master`);
      holding.add(port);
    }
    assert.deepEqual([...holding].sort(), [...masters].sort(), "every master holds some of the locks");
    // Straight to the slot's master, by the slot map read at connect: no MOVED on the way.
    for (const port of masters) assert.doesNotMatch(await command(port, "INFO", "errorstats"), /errorstat_MOVED/);
    for (const l of locks) assert.equal(await l.release(), true);
    await store.close();
  });

  it("wakes waiters over sharded pub/sub on each key's master (SSUBSCRIBE, SPUBLISH)", { timeout: 30_000 }, async () => {
    const store = await connect();
    // A key on each master, so connections to every node carry a subscription.
    const masters = await cluster.masters(anyNode());
    const keys = new Map();
    for (let i = 0; keys.size < masters.length; i++) {
      const key = uniqueKey(`sharded-${i}`);
      const { port } = await whereIs(key);
      if (!keys.has(port)) keys.set(port, key);
    }
    for (const [port, key] of keys) {
      const holder = new Lock(key, 10_000, store);
      assert.equal(await holder.acquire(), true);
      const waiter = new Lock(key, 10_000, store);
      const start = performance.now();
      // A retry delay longer than the test: only the release message can wake it in time.
      const waiting = waiter.acquire({ timeout: 8_000, retryDelay: 6_000 });
      const channel = `locksmith:{${key}}:released`;
      await until(`a sharded subscription on ${port}`, async () => (await command(port, "PUBSUB", "SHARDCHANNELS", channel)).length === 1, 3_000);
      assert.deepEqual(await command(port, "PUBSUB", "CHANNELS", channel), [], "not a plain subscription");
      assert.equal(await holder.release(), true);
      assert.equal(await waiting, true);
      const waited = performance.now() - start;
      assert.ok(waited < 3_000, `woken by the release on ${port} after ${waited} ms`);
      assert.equal(await waiter.release(), true);
    }
    await store.close();
  });

  it("fair locks and semaphores: waiters granted in the order they asked, each woken over its key's shard", { timeout: 30_000 }, async () => {
    const store = await connect();
    const other = await connect();
    try {
      // A lock, a semaphore of one, and one of two whose holder takes both: its release
      // lets the first two waiters in, one after the other.
      for (const [kind, limit, held] of [
        ["lock", 1, 1],
        ["semaphore", 1, 1],
        ["semaphore", 2, 2],
      ]) {
        const key = uniqueKey(`fair-${kind}-${limit}`);
        // A 30 s TTL: a fair wait retries at a third of it at most, slower than the test.
        const make = (s) => (kind === "lock" ? ls.lock(key, 30_000, s, { fair: true }) : ls.semaphore(key, limit, 30_000, s, { fair: true }));
        const holder = make(store);
        assert.equal(await holder.acquire(kind === "lock" ? {} : { permits: held }), true);
        // The order of the grants is the server's: their fencing tokens grow with it (the
        // answers come back over two stores' connections, in either order).
        const tokens = [];
        const waiters = [make(other), make(store), make(other)];
        const waits = [];
        for (const [i, w] of waiters.entries()) {
          // A retry delay longer than the test: only release messages wake them in time.
          waits.push(w.acquire({ timeout: 8_000, retryDelay: 6_000 }).then(async (ok) => ((tokens[i] = w.fencingToken), await w.release(), ok)));
          await sleep(100); // each takes its place before the next asks
        }
        const start = performance.now();
        assert.equal(await holder.release(), true);
        assert.deepEqual(await Promise.all(waits), [true, true, true]);
        assert.ok(tokens[0] < tokens[1] && tokens[1] < tokens[2], `${kind} of ${limit}: granted in the order they asked (tokens ${tokens.join(", ")})`);
        assert.ok(performance.now() - start < 3_000, `${kind} of ${limit}: woken by releases and grants, not retries`);
      }
    } finally {
      await store.close();
      await other.close();
    }
  });

  it("lockAll(): keys on several masters in order, keys of one slot in one script, all or nothing either way", { timeout: 30_000 }, async () => {
    const store = await connect();
    // Keys on two different masters, and one held on the second.
    const masters = await cluster.masters(anyNode());
    const byMaster = new Map();
    for (let i = 0; byMaster.size < 2; i++) {
      const key = uniqueKey(`all-spread-${i}`);
      const { port } = await whereIs(key);
      if (!byMaster.has(port)) byMaster.set(port, key);
    }
    const [[, a], [portB, b]] = [...byMaster];
    assert.ok(masters.includes(portB));
    const holder = new Lock(b, 10_000, store);
    assert.equal(await holder.acquire(), true);
    const across = lockAll([a, b], 10_000, store);
    assert.equal(await across.acquire(), false, "one key held: none taken");
    assert.equal(await new Lock(a, 10_000, store).isLocked(), false);
    const waiting = across.acquire({ timeout: 8_000, retryDelay: 6_000 });
    await sleep(100);
    assert.equal(await holder.release(), true);
    assert.equal(await waiting, true, "every key, once the held one is released (woken by SPUBLISH)");
    assert.equal(await new Lock(b, 10_000, store).acquire(), false);
    assert.equal(await across.release(), true);
    // Keys whose lock keys share a hash tag (`locksmith:{tag}…}`) live in one slot: one
    // script takes them, with no CROSSSLOT.
    const tag = uniqueKey("slot");
    const [x, y] = [`${tag}}x`, `${tag}}y`];
    assert.equal((await whereIs(x)).slot, (await whereIs(y)).slot);
    const port = (await whereIs(x)).port;
    await command(port, "CONFIG", "RESETSTAT");
    const together = lockAll([x, y], 10_000, store);
    assert.equal(await together.acquire(), true);
    assert.match(await command(port, "INFO", "commandstats"), /cmdstat_evalsha:calls=1,/, "one script for both keys");
    assert.deepEqual(Object.keys(together.fencingTokens).sort(), [x, y].sort());
    assert.equal(await new Lock(y, 10_000, store).acquire(), false);
    assert.equal(await together.release(), true);
    await store.close();
  });

  it("shares locks with IoRedisLockStore over an ioredis Cluster", async () => {
    const client = ioredisCluster();
    const theirs = new IoRedisLockStore(client);
    const ours = await connect();
    try {
      for (let i = 0; i < 6; i++) {
        const key = uniqueKey(`shared-${i}`);
        const first = new Lock(key, 5_000, ours);
        assert.equal(await first.acquire(), true);
        assert.equal(await new Lock(key, 5_000, theirs).acquireImmediately(), false, "held across stores");
        const there = ls.restoreLock(first.serialize(), theirs);
        assert.equal(await there.release(), true);
        const second = new Lock(key, 5_000, theirs);
        assert.equal(await second.acquire(), true);
        assert.ok(second.fencingToken > first.fencingToken, "one fencing counter");
        assert.equal(await ls.restoreLock(second.serialize(), ours).release(), true);
      }
    } finally {
      await ours.close();
      await theirs.close();
      client.disconnect();
    }
  });

  it("follows a slot migrated while its lock is held and waited on (ASK, TRYAGAIN, MOVED)", { timeout: 30_000 }, async () => {
    const store = await connect({ commandTimeoutMs: 2_000 });
    const key = uniqueKey("reshard");
    const holder = new Lock(key, 10_000, store);
    assert.equal(await holder.acquire(), true);
    const first = holder.fencingToken;
    const waiter = new Lock(key, 10_000, store);
    const waiting = waiter.acquire({ timeout: 20_000, retryDelay: 50 });

    const { slot, port: from } = await whereIs(key);
    const to = (await cluster.masters()).find((p) => p !== from);
    const id = async (port) => await command(port, "CLUSTER", "MYID");
    const [fromId, toId] = [await id(from), await id(to)];
    await command(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromId);
    await command(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toId);
    const lockKey = `locksmith:{${key}}`;
    // The lock key moves first, its fencing counter later: meanwhile a script on both
    // answers TRYAGAIN and is sent again until it runs.
    await command(from, "MIGRATE", "127.0.0.1", to, lockKey, 0, 5_000);
    const extending = holder.extend(10_000);
    await sleep(300);
    const keys = await command(from, "CLUSTER", "GETKEYSINSLOT", slot, 100);
    if (keys.length > 0) await command(from, "MIGRATE", "127.0.0.1", to, "", 0, 5_000, "KEYS", ...keys);
    assert.equal(await extending, undefined, "extend ran after TRYAGAIN");
    // Every key is on the target, the slot is still the source's: ASK, then ASKING.
    assert.equal(await command(from, "CLUSTER", "COUNTKEYSINSLOT", slot), 0);
    assert.ok(await holder.isLocked(), "isLocked follows ASK");
    await holder.extend(10_000);
    assert.ok((await holder.getRemainingTime()) > 9_000, "extend followed ASK");
    // The slot moves for good: MOVED, and the store's slot map follows.
    for (const port of await cluster.masters()) await command(port, "CLUSTER", "SETSLOT", slot, "NODE", toId);
    await until("every node to know the slot's new master", async () => (await whereIs(key, anyNode())).port === to);
    assert.equal(await holder.release(), true);
    assert.equal(await waiting, true, "the waiter got the lock");
    assert.ok(waiter.fencingToken > first, `${waiter.fencingToken} > ${first}`);
    assert.ok((await command(to, "EXISTS", lockKey)) === 1, "the waiter's hold is on the new master");
    assert.equal(await waiter.release(), true);
    await store.close();
  });

  it("8 processes on one key through a CLUSTER FAILOVER: no overlap, tokens grow", { timeout: 120_000, ...ONLY_NATIVE }, async () => {
    const key = uniqueKey("cluster-load");
    const spec = `cluster:${cluster.urls.join(",")}`;
    const running = Array.from({ length: 8 }, () => contender(spec, key, 30, 6));
    await sleep(1_500);
    const { replica } = await whereIs(key, anyNode());
    await command(replica, "CLUSTER", "FAILOVER");
    await until("the replica to take over", async () => (await command(replica, "ROLE"))[0] === "master");
    const runs = await Promise.all(running);
    const total = runs.reduce((a, b) => a + b, 0);
    const { Cluster } = await import("ioredis");
    const client = new Cluster(cluster.urls.map((url) => ({ host: "127.0.0.1", port: Number(new URL(url).port) })));
    try {
      const log = await client.lrange(`${key}:log`, 0, -1);
      assert.equal(log.length, total * 2, "every section logged its entry and exit");
      assertNoOverlap(log);
      assert.equal(Number(await client.get(`${key}:counter`)), total, "no lost update");
      const tokens = (await client.lrange(`${key}:tokens`, 0, -1)).map(Number);
      assert.equal(tokens.length, total);
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `token ${i} grows`);
      console.log(`# cluster load: 8 processes, ${total} critical sections on one key through CLUSTER FAILOVER, 0 overlaps`);
    } finally {
      client.disconnect();
    }
  });

  // History: 2 processes × 6 clients, every primitive, TTL 600 ms, one manual CLUSTER
  // FAILOVER of the first key's master 0.8 s in. A manual failover is coordinated (the
  // master stops taking writes, the replica catches up, then takes over): no
  // acknowledged write is lost, so no hold either.
  it("history: CLUSTER FAILOVER mid-run: 2 processes × 6 clients, no violation", { timeout: 90_000 }, async (t) => {
    await assertCleanAcrossFailover(t, clusterStore(cluster), (options) => clusterFailovers(cluster, options));
  });

  // The guard: the new master has the holds. One that lost them (its keys flushed as it
  // takes over, as an unclean failover over lagging replication would) lets others in.
  // Every client on the key whose master fails over.
  it("history: catches a broken guard under CLUSTER FAILOVER: a new master without the holds", { timeout: 90_000, ...ONLY_NATIVE }, async (t) => {
    await assertCaught(t, ["overlap", "over-limit", "writer-with-others", "held-but-refused"], {
      store: clusterStore(cluster),
      processes: 2,
      clients: 6,
      seconds: 4,
      client: { ttlMs: FAILOVER_TTL_MS, keys: [HISTORY_KEYS[0]] },
      // Two failovers: a chance of a hold live at the flush even when a loaded machine slows the clients.
      fault: clusterFailovers(cluster, { every: 800, times: 2, afterSwitch: (port) => command(port, "FLUSHALL") }),
    });
  });

  it("a master killed, its replica promoted: calls settle in time, locks work after, tokens grow", { timeout: 60_000 }, async () => {
    const store = await connect({ commandTimeoutMs: 1_000 });
    const key = uniqueKey("killed");
    const held = new Lock(key, 3_000, store);
    assert.equal(await held.acquire(), true);
    const heldToken = held.fencingToken;
    const { port, replica } = await whereIs(key, anyNode());
    const victim = cluster.node(port);
    const waiter = new Lock(key, 3_000, store);
    const started = performance.now();
    const waiting = waiter.acquire({ timeout: 15_000, retryDelay: 50 }).catch((err) => err);
    await sleep(100);
    await victim.stop();
    victim.killed = true;
    const outcome = await waiting;
    const waited = performance.now() - started;
    // Either the waiter got the lock once the replica took over, or it failed fast with
    // STORE_UNAVAILABLE; never a hang past its timeout.
    assert.ok(waited < 15_000 + 3_000, `waited ${waited} ms`);
    if (outcome !== true) assert.equal(outcome?.code, "STORE_UNAVAILABLE", `${outcome}`);
    await until("the replica to take over", async () => (await command(replica, "ROLE"))[0] === "master", 20_000);
    await until(
      "the store to reach the new master",
      async () => {
        try {
          return (await waiter.acquire({ timeout: 3_000 })) || waiter.fencingToken !== null;
        } catch {
          return false;
        }
      },
      20_000,
    );
    assert.ok(waiter.fencingToken > heldToken, `${waiter.fencingToken} > ${heldToken}`);
    assert.equal(await command(replica, "EXISTS", `locksmith:{${key}}`), 1, "the hold is on the promoted replica");
    assert.equal(await waiter.release(), true);
    await store.close();
  });
});

// A key that starts with `}` closes its Redis key's hash tag at once (`locksmith:{}x}`):
// Redis then hashes each whole name, and the lock key and its companions fall in
// different slots (a script over them answered CROSSSLOT, a STORE_ERROR). On a Cluster
// such keys are refused before anything is sent; on one server they keep the layout
// every release used (see redis.test.mjs).
describe("keys whose Redis key has an empty hash tag, on a Cluster", () => {
  const refused = (what) => (err) => {
    assert.equal(err.code, "INVALID_ARGUMENT", `${what}: ${err.code} ${err.message}`);
    assert.match(err.message, /^locksmith: on a Redis Cluster, key "\}[^"]*" cannot be locked: its Redis key locksmith:\{\}.* has an empty hash tag/, what);
    assert.match(err.message, /does not start with "\}"/, what);
    return true;
  };

  /** Every kind of hold on `key` is refused at once, waiting or not; a `}` further in works. */
  async function assertRefused(store) {
    const key = `}${uniqueKey("empty-tag")}`;
    const handles = {
      lock: () => new Lock(key, 2_000, store),
      semaphore: () => ls.semaphore(key, 2, 2_000, store),
      "read lock": () => ls.readWriteLock(key, 2_000, store).readLock(),
      "write lock": () => ls.readWriteLock(key, 2_000, store).writeLock(),
      "lockAll, alone": () => lockAll([key], 2_000, store),
      "lockAll, with another key": () => lockAll([uniqueKey("beside"), key], 2_000, store),
    };
    await assert.rejects(store.holder(key), refused("holder()"));
    await assert.rejects(store.proclaim(key, "owner", "value", 1), refused("proclaim()"));
    for (const [what, make] of Object.entries(handles)) {
      await assert.rejects(make().acquire(), refused(what));
      const start = performance.now();
      await assert.rejects(make().acquire({ timeout: 5_000, retryDelay: 50 }), refused(`${what}, waiting`));
      const waited = performance.now() - start;
      assert.ok(waited < 1_000, `${what}: a waiting acquire is refused at once (${waited} ms)`);
    }
    for (const port of await cluster.masters(anyNode())) {
      assert.deepEqual(await command(port, "KEYS", `locksmith:{}${key.slice(1)}}*`), [], `nothing written on ${port}`);
    }
    // A `}` after the first character leaves a non-empty tag: one slot, as any key.
    for (const other of [`${uniqueKey("mid")}}x`, `${uniqueKey("end")}}`]) {
      const l = new Lock(other, 2_000, store);
      assert.equal(await l.acquire(), true, other);
      assert.ok(l.fencingToken > 0);
      assert.equal(await new Lock(other, 2_000, store).acquireImmediately(), false);
      assert.equal(await l.release(), true);
    }
  }

  it("RedisLockStore refuses them with INVALID_ARGUMENT that says why", async () => {
    const store = await connect();
    try {
      await assertRefused(store);
    } finally {
      await store.close();
    }
  });

  it("IoRedisLockStore over an ioredis Cluster refuses them too", { ...ONLY_NATIVE }, async () => {
    const client = ioredisCluster();
    const store = new IoRedisLockStore(client);
    try {
      await assertRefused(store);
    } finally {
      await store.close();
      client.disconnect();
    }
  });

  // node-redis v5, as the conformance suite over this cluster (every version from v4 to v6
  // has getMasters() on its cluster, which is how the store knows one).
  it("NodeRedisLockStore over a node-redis cluster refuses them too", { ...ONLY_NATIVE }, async () => {
    const { createCluster } = await import("redis");
    const client = createCluster({ rootNodes: cluster.urls.map((url) => ({ url })) });
    client.on("error", () => {});
    await client.connect();
    const store = new NodeRedisLockStore(client);
    try {
      await assertRefused(store);
    } finally {
      await store.close();
      await (client.close?.() ?? client.disconnect());
    }
  });
});

// holder() and proclaim() (an election's reads and writes) run on the driver's side link
// to the master of each key's slot; the value key shares the lock key's hash tag.
describe("holder() and proclaim() over Redis Cluster", () => {
  let store;
  before(async () => {
    if (native || wasm) store = await connect();
  });
  after(async () => {
    await store?.close();
  });
  holderContract(it, () => store);

  it("keeps each key's value beside its lock on the master of its slot, sent straight there", async () => {
    for (const key of ["a", "{x}y", "x{}y", "}z", "p{q", "\u0001election:é", uniqueKey("slot")]) {
      assert.equal(keySlot(key), await command(anyNode(), "CLUSTER", "KEYSLOT", key), `the slot of ${JSON.stringify(key)}`);
    }
    const fresh = await connect();
    try {
      const masters = await cluster.masters(anyNode());
      for (const port of masters) await command(port, "CONFIG", "RESETSTAT");
      const perMaster = new Map(masters.map((port) => [port, 0]));
      const keys = [];
      for (let i = 0; [...perMaster.values()].some((n) => n < 2); i++) {
        assert.ok(i < 1_000, `no keys found for every master: ${JSON.stringify([...perMaster])}`);
        const key = uniqueKey(`value-${i}`);
        const { port } = await whereIs(key, anyNode());
        if ((perMaster.get(port) ?? 2) >= 2) continue;
        perMaster.set(port, perMaster.get(port) + 1);
        keys.push({ key, port });
      }
      for (const { key, port } of keys) {
        const l = new Lock(key, 10_000, fresh);
        assert.equal(await l.acquire(), true);
        const { owner, fencingToken } = await fresh.holder(key);
        assert.equal(fencingToken, l.fencingToken);
        assert.equal(await fresh.proclaim(key, owner, key, 1), true);
        assert.equal(await command(port, "HGET", `locksmith:{${key}}:value`, "value"), key, "on the master of its slot");
        assert.equal((await fresh.holder(key)).value, key);
        assert.equal(await l.release(), true);
        assert.equal(await fresh.holder(key), null);
      }
      for (const port of masters) assert.doesNotMatch(await command(port, "INFO", "errorstats"), /errorstat_(MOVED|ASK)/);
    } finally {
      await fresh.close();
    }
  });

  it("follows a slot migrated under a kept value (ASK, then MOVED)", { timeout: 30_000 }, async () => {
    const fresh = await connect();
    try {
      const key = uniqueKey("value-reshard");
      const l = new Lock(key, 20_000, fresh);
      assert.equal(await l.acquire(), true);
      const { owner } = await fresh.holder(key);
      assert.equal(await fresh.proclaim(key, owner, "v1", 1), true);
      const { slot, port: from } = await whereIs(key, anyNode());
      const to = (await cluster.masters(anyNode())).find((p) => p !== from);
      const id = async (port) => await command(port, "CLUSTER", "MYID");
      const [fromId, toId] = [await id(from), await id(to)];
      await command(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromId);
      await command(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toId);
      const keys = await command(from, "CLUSTER", "GETKEYSINSLOT", slot, 100);
      assert.ok(keys.includes(`locksmith:{${key}}:value`), `the value key is in the slot: ${keys}`);
      await command(from, "MIGRATE", "127.0.0.1", to, "", 0, 5_000, "KEYS", ...keys);
      // Every key on the target, the slot still the source's: ASK, then ASKING.
      assert.equal((await fresh.holder(key)).value, "v1", "holder() followed ASK");
      assert.equal(await fresh.proclaim(key, owner, "v2", 2), true);
      assert.equal(await command(from, "CLUSTER", "COUNTKEYSINSLOT", slot), 0, "nothing written on the source");
      // The slot moves for good: the source answers MOVED.
      for (const port of await cluster.masters(anyNode())) await command(port, "CLUSTER", "SETSLOT", slot, "NODE", toId);
      await until("every node to know the slot's new master", async () => (await whereIs(key, anyNode())).port === to);
      assert.equal(await command(to, "HGET", `locksmith:{${key}}:value`, "value"), "v2", "proclaim() followed ASK");
      assert.equal(await fresh.proclaim(key, owner, "v3", 3), true);
      assert.equal(await command(to, "HGET", `locksmith:{${key}}:value`, "value"), "v3", "proclaim() followed MOVED");
      assert.equal((await fresh.holder(key)).value, "v3");
      assert.match(await command(from, "INFO", "errorstats"), /errorstat_MOVED/, "the source said MOVED");
      assert.equal(await l.release(), true);
    } finally {
      await fresh.close();
    }
  });
});
