// Mutual exclusion under load, Redis faults, TLS, token quality and memory: the
// promises locksmith makes, checked against real processes and a real redis-server.
// LOCKSMITH_SOAK_SECONDS=N turns the load tests into N-second soaks.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { after, before, describe, it } from "node:test";
import { Worker } from "node:worker_threads";
import { Redis } from "ioredis";

import { assertAtMost, assertNoOverlap, assertReadersShareWritersAlone, contender } from "./support/load.mjs";
import { startRedis } from "./support/redis-server.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "./support/target.mjs";
import { tlsRedis } from "./support/tls.mjs";
import { eventually, settle } from "./support/wait.mjs";

const { Lock, RedisLockStore, LockNotHeldError } = ls;
const SOAK = Number(process.env.LOCKSMITH_SOAK_SECONDS ?? 0);
const native = TARGET === "native";
const fast = { connectTimeoutMs: 300, commandTimeoutMs: 300, reconnectRetries: 1, reconnectMaxDelayMs: 100 };

await failOnUnhandledRejections();

describe("mutual exclusion under load", () => {
  it("8 OS processes on one Redis key: exact counter, no overlap", { skip: !native && "native only", timeout: 120_000 + SOAK * 2_000 }, async () => {
    const server = await startRedis();
    const client = new Redis(server.url);
    try {
      const key = uniqueKey("load-procs");
      const runs = await Promise.all(Array.from({ length: 8 }, () => contender(server.url, key, 30, SOAK || undefined)));
      const total = runs.reduce((a, b) => a + b, 0);
      if (!SOAK) assert.deepEqual(runs, Array(8).fill(30));
      assert.equal(Number(await client.get(`${key}:counter`)), total, "the counter equals the successful runs");
      assertNoOverlap(await client.lrange(`${key}:log`, 0, -1));
      console.log(`# load: 8 processes, ${total} critical sections on one Redis key, 0 overlaps, 0 lost updates`);
    } finally {
      await client.quit();
      await server.stop();
    }
  });

  it("8 OS processes on one Redis semaphore and one read-write lock: never more than the limit, writers alone", {
    skip: !native && "native only",
    timeout: 120_000 + SOAK * 4_000,
  }, async () => {
    const server = await startRedis();
    const client = new Redis(server.url);
    try {
      const key = uniqueKey("load-permits");
      const runs = await Promise.all(Array.from({ length: 8 }, () => contender(server.url, key, 12, SOAK || undefined, "semaphore:3,rw")));
      if (!SOAK) assert.deepEqual(runs, Array(8).fill([12, 12]));
      const total = (m) => runs.reduce((sum, r) => sum + r[m], 0);
      const semLog = await client.lrange(`${key}:semaphore:3:log`, 0, -1);
      assert.equal(semLog.length, 2 * total(0), "every section logged");
      const most = assertAtMost(semLog, 3);
      assert.ok(most > 1, `permits were held at once (at most ${most})`);

      const rwLog = await client.lrange(`${key}:rw:log`, 0, -1);
      assert.equal(rwLog.length, 2 * total(1), "every section logged");
      assert.ok(
        rwLog.some((e) => e.startsWith("in:w:")),
        "some sections wrote",
      );
      const shared = assertReadersShareWritersAlone(rwLog);
      assert.ok(shared > 0, "readers shared the lock at least once");
      // Released to the last: only the fencing counters are left, and they expire.
      const keys = await client.keys("*{test:load-*");
      assert.deepEqual(
        keys.filter((k) => !k.endsWith(":fence")),
        [],
        "the holders, limit, writer and claim keys went with the last holds",
      );
      for (const k of keys) assert.ok((await client.pttl(k)) > 0, `${k} expires`);
      console.log(
        `# load: 8 processes, ${total(0)} sections in a semaphore of 3 (at most ${most} inside), ${total(1)} in a read-write lock (${shared} reads shared), 0 violations`,
      );
    } finally {
      await client.quit();
      await server.stop();
    }
  });

  it("8 worker threads on MemoryLockStore.shared: exact counter, no overlap", { skip: !native && "native only", timeout: 120_000 + SOAK * 2_000 }, async () => {
    const THREADS = 8;
    const rounds = 200;
    // [counter, logLength, ...log of (thread * 2 + 0 entry | 1 exit)]
    const shared = new Int32Array(new SharedArrayBuffer(4 * (2 + THREADS * rounds * 2 * (SOAK ? 200 : 1))));
    const ran = await Promise.all(
      Array.from(
        { length: THREADS },
        (_, id) =>
          new Promise((resolve, reject) => {
            const w = new Worker(new URL("./support/load-thread.mjs", import.meta.url), { workerData: { id, rounds, seconds: SOAK, shared } });
            w.once("message", resolve);
            w.once("error", reject);
          }),
      ),
    );
    const total = ran.reduce((a, b) => a + b, 0);
    assert.equal(shared[0], total, "no update lost");
    // A long soak can outrun the log; any even-length prefix of it is still whole pairs.
    const logged = Math.min(shared[1], shared.length - 2) & ~1;
    const log = Array.from(shared.subarray(2, 2 + logged), (v) => (v % 2 ? `out:${v >> 1}` : `in:${v >> 1}`));
    assertNoOverlap(log);
    console.log(`# load: ${THREADS} threads, ${total} critical sections on MemoryLockStore.shared, 0 overlaps, 0 lost updates`);
  });
});

describe("Redis faults", () => {
  let server;
  let store;
  before(async () => {
    server = await startRedis();
    store = await RedisLockStore.connect({ url: server.url, ...fast });
  });
  after(async () => {
    await store?.close();
    await server?.stop();
  });

  it("SIGSTOP during a hold and a wait, then SIGCONT", async () => {
    const key = uniqueKey("sigstop");
    const holder = new Lock(key, 800, store);
    assert.equal(await holder.acquire(), true);
    const waiter = settle(new Lock(key, 5_000, store).acquire({ timeout: 1_500, retryDelay: 50 }));
    await sleep(100);
    process.kill(server.pid, "SIGSTOP");
    try {
      const extend = await settle(holder.extend());
      assert.equal(extend.error?.code, "STORE_UNAVAILABLE");
      assert.ok(extend.ms < 300 + 700, `extend failed after ${extend.ms} ms`);
      // The wait rides the outage out until its deadline (1.5 s), then fails with the
      // last error: the server never answered.
      const waited = await waiter;
      assert.equal(waited.error?.code, "STORE_UNAVAILABLE", `the waiter settled with ${waited.error ?? waited.value}`);
      assert.ok(waited.ms >= 1_400 && waited.ms < 2_500, `the waiter gave up after ${waited.ms} ms`);
      await sleep(900); // the holder's TTL runs out while the server is frozen
    } finally {
      process.kill(server.pid, "SIGCONT");
    }
    assert.equal(await eventually(() => holder.isExpired()), true, "the holder knows it lost the lock");
    await assert.rejects(holder.extend(), LockNotHeldError);
    assert.equal(await eventually(() => new Lock(key, 1_000, store).acquire()), true);
  });

  it("a waiting run() rides out a restart: Redis killed, back 1.5 s later, the run still happens", async () => {
    const key = uniqueKey("ride-out");
    const holder = new Lock(key, 10_000, store);
    assert.equal(await holder.acquire(), true);
    const started = performance.now();
    const running = settle(new Lock(key, 2_000, store).run(async () => "ran after the outage", { timeout: 8_000, retryDelay: 50 }));
    await sleep(100);
    process.kill(server.pid, "SIGKILL");
    await sleep(1_500);
    await server.restart(); // empty: the holder's key died with the server
    const ran = await running;
    assert.deepEqual(ran.value, [true, "ran after the outage"], String(ran.error));
    const ms = performance.now() - started;
    assert.ok(ms >= 1_500 && ms < 8_000, `ran after ${Math.round(ms)} ms`);
  });

  it("SIGKILL and restart", async () => {
    const key = uniqueKey("sigkill");
    const holder = new Lock(key, 10_000, store);
    assert.equal(await holder.acquire(), true);
    process.kill(server.pid, "SIGKILL");
    const failed = await settle(holder.extend());
    assert.equal(failed.error?.code, "STORE_UNAVAILABLE");
    assert.ok(failed.ms < 1_500, `failed after ${failed.ms} ms`);
    await server.restart();
    assert.equal(await eventually(() => holder.isExpired()), true, "the data died with the server");
    await assert.rejects(holder.extend(), LockNotHeldError);
    assert.equal(await eventually(() => new Lock(key, 1_000, store).acquire()), true);
  });

  it("CLIENT KILL of every connection", async () => {
    const key = uniqueKey("clientkill");
    const holder = new Lock(key, 10_000, store);
    assert.equal(await holder.acquire(), true);
    const admin = new Redis(server.url);
    await admin.client("KILL", "TYPE", "pubsub");
    await admin.client("KILL", "TYPE", "normal").catch(() => {});
    admin.disconnect();
    // Once the store has seen its connection close, the next call reconnects (its
    // command waits behind the handshake) and succeeds: no call fails for a connection
    // that went while the store was idle.
    await sleep(200);
    const first = await settle(holder.extend());
    assert.equal(first.error, undefined, `the first call after the kill failed: ${first.error}`);
    assert.equal(await holder.isExpired(), false, "the hold survived: the server kept it");
    // Waiters still get the lock once the holder lets go.
    const waiter = new Lock(key, 1_000, store).acquire({ timeout: 3_000, retryDelay: 100 });
    await sleep(50);
    assert.equal(await holder.release(), true);
    assert.equal(await waiter, true);
  });

  it("SCRIPT FLUSH", async () => {
    const admin = new Redis(server.url);
    const l = new Lock(uniqueKey("flush"), 5_000, store);
    assert.equal(await l.acquire(), true);
    await admin.script("FLUSH");
    await l.extend();
    await admin.script("FLUSH");
    assert.equal(await l.release(), true);
    await admin.quit();
  });
});

describe("TLS to Redis", () => {
  it("connects with rediss:// to a server with a self-signed certificate", async (t) => {
    // A CA, and a server certificate it signs (webpki refuses a CA as the end entity).
    const tls = await tlsRedis(t, "locksmith-tls-");
    if (!tls) return;
    const { ca, server, tlsPort } = tls;
    try {
      const secure = await RedisLockStore.connect({ url: `rediss://127.0.0.1:${tlsPort}`, tlsCaCert: ca, ...fast });
      const l = new Lock(uniqueKey("tls"), 5_000, secure);
      assert.equal(await l.acquire(), true);
      assert.equal(await l.release(), true);
      await secure.close();
      // By host name: sent as SNI and checked against the certificate's names.
      const named = await RedisLockStore.connect({ url: `rediss://localhost:${tlsPort}`, tlsCaCert: ca, ...fast });
      assert.equal(await new Lock(uniqueKey("tls"), 1_000, named).acquire(), true);
      await named.close();
      // Without the CA, the certificate is refused.
      await assert.rejects(RedisLockStore.connect({ url: `rediss://127.0.0.1:${tlsPort}`, ...fast }), (err) =>
        ["STORE_UNAVAILABLE", "STORE_ERROR"].includes(err.code),
      );
      // Skipping verification, for development, takes an option by name; redis-rs'
      // `#insecure` URL fragment is refused rather than honoured.
      await assert.rejects(RedisLockStore.connect({ url: `rediss://127.0.0.1:${tlsPort}/#insecure`, ...fast }), (err) => {
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.match(err.message, /tlsInsecure: true/);
        return true;
      });
      await assert.rejects(RedisLockStore.connect({ url: server.url, tlsInsecure: true, ...fast }), { code: "INVALID_ARGUMENT" });
      const insecure = await RedisLockStore.connect({ url: `rediss://127.0.0.1:${tlsPort}`, tlsInsecure: true, ...fast });
      assert.equal(await new Lock(uniqueKey("tls"), 1_000, insecure).acquire(), true);
      await insecure.close();
    } finally {
      await tls.dispose();
    }
  });
});

describe("owner tokens", () => {
  it("are 128 bits from a CSPRNG: distinct, full length, balanced", () => {
    const store = new ls.MemoryLockStore();
    const n = 20_000;
    const seen = new Set();
    let ones = 0;
    for (let i = 0; i < n; i++) {
      const l = new Lock(`token:${i}`, 1_000, store);
      l.acquireImmediately();
      const { owner } = JSON.parse(l.serialize());
      assert.match(owner, /^[0-9a-f]{32}$/);
      seen.add(owner);
      for (const c of owner) ones += [0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4][parseInt(c, 16)];
    }
    assert.equal(seen.size, n, "no token repeats");
    const mean = n * 64;
    assert.ok(Math.abs(ones - mean) < (6 * Math.sqrt(n * 128)) / 2, `one-bits ${ones}, expected about ${mean}`);
  });
});

describe("memory", { skip: !native && "the native store's counters are native" }, () => {
  it("100k expiring keys leave the store empty, and memory flat, after expiry", async () => {
    const { NativeMemoryStore } = createRequire(import.meta.url)(`../js/native/locksmith.linux-${process.arch}-gnu.node`);
    const store = new NativeMemoryStore();
    const rss = [];
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 100_000; i++) store.acquire(`k${round}:${i}`, "owner", 50);
      assert.ok(store.entryCount() > 0, "keys are in the store until they expire");
      await sleep(1_300); // expiry, then the background sweep (once a second)
      assert.equal(store.entryCount(), 0, "the sweep emptied the store");
      rss.push(process.memoryUsage().rss);
    }
    const grown = (rss[3] - rss[1]) / 1024 / 1024;
    assert.ok(grown < 16, `rss grew ${grown.toFixed(1)} MB from round 2 to 4`);
    console.log(`# memory: 4 × 100k expiring keys, store empty after each; rss ${rss.map((b) => (b / 1048576).toFixed(0)).join(", ")} MB`);
  });

  it("a million acquire/release cycles leave the store empty", async () => {
    const store = new ls.MemoryLockStore();
    const l = new Lock("hot", 1_000, store);
    for (let i = 0; i < 1_000_000; i++) {
      await l.acquire();
      await l.release();
    }
    assert.equal(await store.isLocked("hot"), false);
  });
});
