// RedisLockStore over Redis Sentinel: a master, a replica and three Sentinels of the
// test's own. The conformance suite, the options, and a SENTINEL FAILOVER while locks
// are taken, held and waited on: calls settle within their timeouts, the store follows
// the new master (and never writes to the demoted one), fencing tokens keep growing.
// The history checker's bounded pass over Sentinel runs here too, on this topology: a
// SENTINEL FAILOVER mid-run with minReplicas 1 is clean; without it the checker sees
// the two holders that asynchronous replication allows.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Redis } from "ioredis";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { assertCaught, assertCleanAcrossFailover } from "../histories/assert.mjs";
import { FAILOVER_TTL_MS, sentinelFailovers, sentinelStore, sentinelsSettled } from "../histories/run.mjs";
import { conformance } from "../conformance/conformance.mjs";
import { holderContract } from "../support/holder-contract.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { eventually } from "../support/wait.mjs";
import { command, connectAnswer, startSentinels, until } from "../support/redis-topology.mjs";
import { testCertificates } from "../support/tls.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "../support/target.mjs";

const { Lock, RedisLockStore } = ls;
const native = TARGET === "native";
// The WebAssembly build (here over node:net) runs the core cases too: the same engine
// under its own driver.
const wasm = TARGET === "wasm";

failOnUnhandledRejections();

// Cases run once, by the native build, to keep the wasm pass short.
const ONLY_NATIVE = { skip: !native && "run by the native pass" };

let topology;
before(async () => {
  if (native || wasm) topology = await startSentinels();
});
after(async () => {
  await topology?.stop();
});

const connect = (options = {}) => RedisLockStore.connect({ sentinels: topology.urls, masterName: topology.masterName, ...options });

if (native || wasm) {
  conformance("RedisLockStore over Sentinel", {
    makeStore: () => connect(),
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });
}

// locksmith-js/ioredis over an ioredis Redis on the same Sentinels.
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

describe("RedisLockStore over Sentinel", () => {
  it("checks its options", async () => {
    const code = connectAnswer;
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

  it("logs in: an ACL user on the master, another in the Sentinels' URLs", async () => {
    const { master, replica, sentinels, masterName } = topology;
    for (const server of [master, replica]) await command(server.port, "ACL", "SETUSER", "locker", "on", ">master-pw", "~*", "&*", "+@all");
    for (const s of sentinels) await command(s.port, "ACL", "SETUSER", "watcher", "on", ">sentinel-pw", "~*", "&*", "+@all");
    const urls = sentinels.map((s) => `redis://watcher:sentinel-pw@127.0.0.1:${s.port}`);
    const store = await RedisLockStore.connect({ sentinels: urls, masterName, username: "locker", password: "master-pw" });
    const l = new Lock(uniqueKey("acl"), 2_000, store);
    assert.equal(await l.acquire(), true);
    const clients = await command((await topology.currentMaster()).port, "CLIENT", "LIST");
    assert.match(clients, /user=locker/, "the store's connection is the ACL user's");
    assert.equal(await l.release(), true);
    await store.close();
    const wrong = await RedisLockStore.connect({
      sentinels: urls.map((u) => u.replace("sentinel-pw", "nope")),
      masterName,
      reconnectRetries: 0,
    }).catch((err) => err);
    assert.equal(wrong.code, "STORE_UNAVAILABLE");
    assert.match(wrong.message, /WRONGPASS|invalid username-password/);
  });

  it("asks the next Sentinel when one is down", async () => {
    const store = await connect({ sentinels: ["redis://127.0.0.1:1", ...topology.urls] });
    const l = new Lock(uniqueKey("next-sentinel"), 2_000, store);
    assert.equal(await l.acquire(), true);
    assert.equal(await l.release(), true);
    await store.close();
  });

  it("minReplicas: a hold counts once replicas have it; one they did not acknowledge fails and is freed", async () => {
    assert.equal((await RedisLockStore.connect({ url: "redis://127.0.0.1:1", minReplicas: -1 }).catch((e) => e)).code, "INVALID_ARGUMENT");
    // The replica is in sync (it may be on its way back after a failover).
    await until(
      "the master to have its replica",
      async () => {
        const info = await command((await topology.currentMaster()).port, "INFO", "replication");
        return /connected_slaves:1/.test(info) && /slave0:.*state=online/.test(info);
      },
      20_000,
    );
    const one = await connect({ minReplicas: 1 });
    const l = new Lock(uniqueKey("wait-one"), 5_000, one);
    assert.equal(await l.acquire(), true);
    await l.extend(6_000);
    const sem = ls.semaphore(uniqueKey("wait-sem"), 2, 5_000, one);
    assert.equal(await sem.acquire(), true);
    assert.equal(await sem.release(), true);
    assert.equal(await l.release(), true);
    // Two replicas asked for, one there: the grant fails after WAIT's timeout (half the
    // command timeout), and the attempt's hold is freed.
    const two = await connect({ minReplicas: 2, commandTimeoutMs: 600 });
    const m = new Lock(uniqueKey("wait-two"), 5_000, two);
    const start = performance.now();
    const failed = await m.acquire().catch((err) => err);
    assert.equal(failed?.code, "STORE_UNAVAILABLE", `${failed}`);
    assert.match(failed.message, /1 of the 2 replicas asked for \(minReplicas\) acknowledged/);
    assert.ok(performance.now() - start < 1_500);
    assert.equal(await new Lock(m.key, 5_000, one).isLocked(), false, "nothing left held");
    await Promise.all([one.close(), two.close()]);
  });

  // History: 2 processes × 6 clients, every primitive, TTL 600 ms (so a hold outlives
  // the switch), one SENTINEL FAILOVER 0.8 s in. With minReplicas 1 each grant and extend
  // counts once the replica has it, so the new master has every hold that counted.
  it("history: SENTINEL FAILOVER mid-run, minReplicas 1: 2 processes × 6 clients, no violation", { timeout: 90_000 }, async (t) => {
    await sentinelsSettled(topology);
    await assertCleanAcrossFailover(t, sentinelStore(topology), (options) => sentinelFailovers(topology, options), { minHolds: 40 });
  });

  // The same failover without minReplicas: the old master takes writes until the
  // Sentinels demote it, and those holds are gone when it resyncs from the new one. Two
  // holders, as the README's store table says; the checker must see them.
  it("history: the same failover without minReplicas lets a second holder in, and the checker sees it", { timeout: 90_000, ...ONLY_NATIVE }, async (t) => {
    await sentinelsSettled(topology);
    await assertCaught(t, ["overlap", "over-limit", "writer-with-others", "held-but-refused"], {
      store: { ...sentinelStore(topology), minReplicas: 0 },
      processes: 2,
      clients: 6,
      seconds: 4,
      // Every client contends (no aborted waits, one permit each), and two failovers: a
      // lost hold is caught only when someone takes its key while the old master's
      // grant is still live.
      client: { ttlMs: FAILOVER_TTL_MS, aborts: 0, weighted: 0 },
      fault: sentinelFailovers(topology, { every: 1_500, times: 2 }),
    });
    await sentinelsSettled(topology);
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
        // A short TTL: a hold whose release failed in the switch ends soon.
        const l = new Lock(key, 1_000, store);
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
    const before = tokens.splice(0);
    assert.ok(before.length > 0, "locks were taken before the failover");
    const newMaster = await topology.failover();
    // For a moment both servers may take writes (the old master is turned into a
    // replica only after the switch): holds of that moment are not ordered here.
    await sleep(1_000);
    tokens.length = 0;
    await sleep(1_500);
    stop = true;
    await Promise.all(workers);
    const after = tokens.splice(0);

    // Every call settled within its wait plus a few command timeouts.
    assert.ok(slowest < 2_000 + 4 * 1_000 + 1_000, `the slowest call took ${slowest} ms`);
    assert.deepEqual(
      [...new Set(errors)].filter((c) => c !== "STORE_UNAVAILABLE"),
      [],
      `only STORE_UNAVAILABLE during the failover: ${errors}`,
    );
    assert.ok(after.length > 0, "locks were taken after the failover");
    for (const run of [before, after]) {
      for (let i = 1; i < run.length; i++) assert.ok(run[i] > run[i - 1], `token ${run[i]} after ${run[i - 1]}`);
    }
    assert.ok(after[0] > before.at(-1), `tokens after the failover (${after[0]}) exceed those before it (${before.at(-1)})`);

    // The waiter gets the lock (its holder's TTL ends or the hold survived), with a
    // greater token; writes went to the new master.
    // An attempt that lands in the switch fails with STORE_UNAVAILABLE, as any store
    // error fails a waiting acquire; asked again, it gets in.
    let got = await waiting;
    if (got instanceof Error) {
      assert.equal(got.code, "STORE_UNAVAILABLE", String(got));
      got = await waiter.acquire({ timeout: 15_000, retryDelay: 50 });
    }
    assert.equal(got, true);
    assert.ok(waiter.fencingToken > heldToken, `${waiter.fencingToken} > ${heldToken}`);
    const next = new Lock(uniqueKey("after"), 5_000, store);
    assert.equal(await next.acquire(), true);
    assert.equal(await command(newMaster.port, "EXISTS", `locksmith:{${next.key}}`), 1, "the hold is on the new master");
    assert.equal(await next.release(), true);
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
      await until(
        "a lock on the new master",
        async () => {
          try {
            return await l.acquire();
          } catch {
            return false;
          }
        },
        5_000,
      );
      assert.ok(performance.now() - start < 4_000, `took ${performance.now() - start} ms`);
      assert.equal(await l.release(), true);
    } finally {
      process.kill(master.pid, "SIGCONT");
    }
    await store.close();
  });

  it("fencing tokens outgrow a counter whose last increments a failover lost", ONLY_NATIVE, async () => {
    // Two servers stand for an old master and a replica that missed its last writes:
    // the replica's counter lags five holds behind.
    const [a, b] = [await startRedis(), await startRedis()];
    const [onA, onB] = [await RedisLockStore.connect(a.url), await RedisLockStore.connect(b.url)];
    try {
      const key = uniqueKey("lagging");
      const first = new Lock(key, 5_000, onA);
      assert.equal(await first.acquire(), true);
      await command(b.port, "SET", `locksmith:{${key}}:fence`, String(first.fencingToken - 5), "PX", "60000");
      const second = new Lock(key, 5_000, onB);
      assert.equal(await second.acquire(), true);
      assert.ok(second.fencingToken > first.fencingToken, `${second.fencingToken} > ${first.fencingToken}`);
      for (const kind of ["semaphore", "rw"]) {
        const handle = (store) => (kind === "semaphore" ? ls.semaphore(key, 2, 5_000, store) : ls.readWriteLock(key, 5_000, store).writeLock());
        const one = handle(onA);
        assert.equal(await one.acquire(), true);
        const suffix = kind === "semaphore" ? "semaphore" : "rw";
        await command(b.port, "SET", `locksmith:{${key}}:${suffix}:fence`, String(one.fencingToken - 5), "PX", "60000");
        const two = handle(onB);
        assert.equal(await two.acquire(), true);
        assert.ok(two.fencingToken > one.fencingToken, `${kind}: ${two.fencingToken} > ${one.fencingToken}`);
      }
    } finally {
      await onA.close();
      await onB.close();
      await a.stop();
      await b.stop();
    }
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
    await until(
      "the store to find the master again",
      async () => {
        try {
          return await l.acquire();
        } catch {
          return false;
        }
      },
      10_000,
    );
    assert.equal(await l.release(), true);
    await store.close();
  });
});

// holder() and proclaim() (an election's reads and writes) run on the driver's side link,
// which goes to the master the Sentinels name and follows it when it moves.
describe("holder() and proclaim() over Sentinel", () => {
  let store;
  before(async () => {
    if (native || wasm) store = await connect();
  });
  after(async () => {
    await store?.close();
  });
  holderContract(it, () => store);

  it("follows SENTINEL FAILOVER: a value kept with minReplicas 1 is read, and replaced, on the new master", { timeout: 60_000, ...ONLY_NATIVE }, async () => {
    await sentinelsSettled(topology);
    const replicated = await connect({ minReplicas: 1, commandTimeoutMs: 1_000 });
    try {
      const key = uniqueKey("failover-value");
      const l = new Lock(key, 30_000, replicated);
      assert.equal(await l.acquire(), true);
      const { owner, fencingToken } = await replicated.holder(key);
      assert.equal(fencingToken, l.fencingToken);
      assert.equal(await replicated.proclaim(key, owner, "before", 1), true, "acknowledged by the replica (WAIT 1)");
      const newMaster = await topology.failover();
      // Calls in the switch may fail (STORE_UNAVAILABLE); then the side link is on the new master.
      const h = await eventually(() => replicated.holder(key), 15_000);
      assert.deepEqual({ owner: h.owner, fencingToken: h.fencingToken, value: h.value }, { owner, fencingToken, value: "before" });
      // Through the store connected before the failover (without minReplicas: WAIT 1 fails
      // until the old master has come back as the new one's replica). Until the Sentinels'
      // +switch-master reaches it, its writes may go to the old master, which takes them
      // until it is demoted (and then loses them): proclaimed again until one lands.
      let seq = 1;
      await until(
        "a proclaim on the new master",
        async () => {
          await store.proclaim(key, owner, "after", ++seq);
          return (await command(newMaster.port, "HGET", `locksmith:{${key}}:value`, "value")) === "after";
        },
        15_000,
      );
      assert.equal((await replicated.holder(key)).value, "after");
      assert.equal(await eventually(() => l.release(), 15_000), true);
      assert.equal(await store.holder(key), null);
    } finally {
      await replicated.close();
    }
  });
});

// TLS everywhere: the Sentinels, the master and the replica listen with TLS and talk to
// each other over it; the store reaches all of them by rediss:// with the test CA.
describe("RedisLockStore over Sentinel with TLS", ONLY_NATIVE, () => {
  let secure;
  let ca;
  let certs;
  before(async () => {
    certs = await testCertificates("locksmith-sentinel-tls-");
    ca = certs.ca;
    secure = await startSentinels({ tls: certs.files });
  });
  after(async () => {
    await secure?.stop();
    await certs?.dispose();
  });

  it("finds and uses the master over TLS, with the CA given; refuses without it", async () => {
    const sentinels = secure.sentinels.map((s) => `rediss://127.0.0.1:${s.tlsPort}`);
    const store = await RedisLockStore.connect({ sentinels, masterName: secure.masterName, tlsCaCert: ca });
    const l = new Lock(uniqueKey("tls"), 2_000, store);
    assert.equal(await l.acquire(), true);
    const waiter = new Lock(l.key, 2_000, store);
    const waiting = waiter.acquire({ timeout: 3_000, retryDelay: 2_000 });
    await sleep(100);
    assert.equal(await l.release(), true);
    assert.equal(await waiting, true, "woken over the TLS subscriber connection");
    assert.equal(await waiter.release(), true);
    // The store's connection is a TLS one: the master counts it on its TLS port.
    assert.match(await command(secure.master.port, "CLIENT", "LIST"), new RegExp(`laddr=127\\.0\\.0\\.1:${secure.master.tlsPort}`));
    await store.close();
    const refused = await RedisLockStore.connect({ sentinels, masterName: secure.masterName, reconnectRetries: 0 }).catch((err) => err);
    assert.equal(refused.code, "STORE_UNAVAILABLE");
    assert.match(refused.message, /certificate/);
  });
});
