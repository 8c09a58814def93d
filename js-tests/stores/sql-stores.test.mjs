// PostgresLockStore and MySqlLockStore (on MariaDB): the scenarios the two SQL stores share
// beyond the conformance suite and the primitives' scenarios, run against each on a real
// server: semaphore and read-write holds (a limit that differs, expiry, a writer that gives
// up, growing tokens), mutual exclusion across processes, and a frozen server. What only
// one of them does is in postgres.test.mjs and mysql.test.mjs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";

import { MySqlLockStore } from "../../js/stores/mysql.mjs";
import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { assertNoOverlap } from "../support/load.mjs";
import { requireMysql, startMysql } from "../support/mysql-server.mjs";
import { requirePostgres, startPostgres } from "../support/postgres-server.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { invalidArgument } from "../support/errors.mjs";
import { eventually, settle } from "../support/wait.mjs";

const { Lock, semaphore, readWriteLock } = ls;

await failOnUnhandledRejections();

/** Each store, its server, and the SQL its load test reads and writes with. */
const STORES = [
  {
    name: "PostgresLockStore",
    database: "PostgreSQL",
    required: requirePostgres,
    start: startPostgres,
    connect: (url, options) => PostgresLockStore.connect(url, options),
    // Its own tables, made before the contenders start (no LISTEN connection needed for that).
    prepare: (url) => PostgresLockStore.connect(url, { listen: false }),
    admin: async (url) => {
      const pg = (await import("pg")).default;
      const pool = new pg.Pool({ connectionString: url });
      pool.on("error", () => {});
      return { query: async (sql, params) => (await pool.query(sql, params)).rows, end: () => pool.end() };
    },
    loadTables: [
      "CREATE TABLE IF NOT EXISTS load_log (id bigserial PRIMARY KEY, key text, entry text, token bigint)",
      "CREATE TABLE IF NOT EXISTS load_counter (key text PRIMARY KEY, n int NOT NULL)",
    ],
    counterStart: "INSERT INTO load_counter (key, n) VALUES ($1, 0)",
    counter: "SELECT n FROM load_counter WHERE key = $1",
    log: "SELECT entry, token FROM load_log WHERE key = $1 ORDER BY id",
    contender: "postgres-contender.mjs",
    // Its tokens may be null (a store without fencing); then their order is not checked.
    tokensMayBeNull: true,
    // How long a waiter waits through the frozen server, and the bounds of its failure.
    frozenWait: { timeout: 2_000, atLeast: 1_900, below: 3_500 },
  },
  {
    name: "MySqlLockStore",
    database: "MySQL",
    required: requireMysql,
    start: startMysql,
    connect: (url, options) => MySqlLockStore.connect(url, options),
    prepare: (url) => MySqlLockStore.connect(url),
    admin: async (url) => {
      const mysql = (await import("mysql2/promise")).default;
      const pool = mysql.createPool({ uri: url, connectionLimit: 4 });
      return { query: async (sql, params) => (await pool.query(sql, params))[0], end: () => pool.end() };
    },
    loadTables: [
      "CREATE TABLE IF NOT EXISTS load_log (id BIGINT AUTO_INCREMENT PRIMARY KEY, `key` VARCHAR(200), entry VARCHAR(64), token BIGINT)",
      "CREATE TABLE IF NOT EXISTS load_counter (`key` VARCHAR(200) PRIMARY KEY, n INT NOT NULL)",
    ],
    counterStart: "INSERT INTO load_counter (`key`, n) VALUES (?, 0)",
    counter: "SELECT n FROM load_counter WHERE `key` = ?",
    log: "SELECT entry, token FROM load_log WHERE `key` = ? ORDER BY id",
    contender: "mysql-contender.mjs",
    tokensMayBeNull: false,
    frozenWait: { timeout: 1_500, atLeast: 1_400, below: 3_000 },
  },
];

for (const sql of STORES) {
  describe(`${sql.name}: the SQL stores' shared scenarios`, await sql.required(), () => {
    let server;
    let admin;
    before(async () => {
      server = await sql.start();
      admin = await sql.admin(server.url);
    });
    after(async () => {
      await admin?.end();
      await server?.dispose();
    });

    describe("semaphores and read-write locks", () => {
      let store;
      before(async () => {
        store = await sql.connect(server.url);
      });
      after(async () => {
        await store?.close();
      });

      it("refuses a handle whose limit differs from the held semaphore's, taking nothing", async () => {
        const key = uniqueKey("sem-limit");
        const held = semaphore(key, 2, 5_000, store);
        assert.equal(await held.acquire(), true);
        const other = semaphore(key, 3, 5_000, store);
        await assert.rejects(other.acquire(), invalidArgument(/held with limit 2; this handle asks for 3/));
        await assert.rejects(store.acquirePermit(key, "o", 1_000, "semaphore", 3), { code: "INVALID_ARGUMENT" });
        assert.equal(await held.count(), 1, "nothing taken");
        assert.equal(await held.release(), true);
        assert.equal(await other.acquire(), true, "free again: any limit");
        await other.release();
      });

      it("a permit expires on its own, and is extended by its holder only", async () => {
        const key = uniqueKey("sem-ttl");
        const crashed = semaphore(key, 1, 150, store);
        assert.equal(await crashed.acquire(), true);
        const left = await crashed.getRemainingTime();
        assert.ok(left > 0 && left <= 150, `remaining ${left}`);
        const next = semaphore(key, 1, 5_000, store);
        assert.equal(await next.acquire(), false);
        assert.equal(await next.acquire({ timeout: 2_000, retryDelay: 20 }), true);
        assert.equal(await crashed.isExpired(), true);
        await assert.rejects(crashed.extend(), { code: "LOCK_NOT_HELD" });
        await next.extend(8_000);
        assert.ok((await next.getRemainingTime()) > 5_000);
        assert.equal(await next.release(), true);
        assert.equal(await next.release(), false);
      });

      it("a writer that gives up lets readers in again; a writer's hold that runs out gives the waiting readers their turn", async () => {
        const rw = readWriteLock(uniqueKey("rw-giveup"), 5_000, store);
        const reader = rw.readLock();
        assert.equal(await reader.acquire(), true);
        assert.equal(await rw.writeLock().acquire({ timeout: 100, retryDelay: 20 }), false);
        const late = rw.readLock();
        assert.equal(await late.acquire(), true, "the claim went with the writer");
        await late.release();
        await reader.release();

        const expiring = uniqueKey("rw-expired");
        // The waiting reader's row lives as long as its handle's TTL past each attempt: on a
        // loaded machine attempts 200 ms apart let it lapse, and then the writer went first.
        const crashed = readWriteLock(expiring, 1_000, store);
        assert.equal(await crashed.writeLock().acquire(), true);
        const waiting = crashed.readLock();
        const entered = waiting.acquire({ timeout: 3_000, retryDelay: 20 });
        await sleep(50);
        const writer = readWriteLock(expiring, 5_000, store).writeLock();
        const writerIn = writer.acquire({ timeout: 3_000, retryDelay: 20 });
        assert.equal(await entered, true, "the reader that waited got in when the writer's hold ran out");
        await sleep(50);
        assert.equal(await writer.isLocked(), true);
        await waiting.release();
        assert.equal(await writerIn, true);
        await writer.release();
      });

      it("fencing tokens of permits grow", async () => {
        const key = uniqueKey("sem-fence");
        const tokens = [];
        for (let i = 0; i < 3; i++) {
          const s = semaphore(key, 2, 5_000, store);
          await s.acquire();
          tokens.push(s.fencingToken);
          await s.release();
        }
        if (!sql.tokensMayBeNull || tokens[0] !== null) assert.ok(tokens[0] < tokens[1] && tokens[1] < tokens[2], `tokens ${tokens}`);
      });
    });

    describe("mutual exclusion under load", () => {
      it("8 OS processes on one key: exact counter, no overlap, growing fencing tokens", { timeout: 60_000 }, async () => {
        const key = uniqueKey("load");
        for (const statement of sql.loadTables) await admin.query(statement);
        await admin.query(sql.counterStart, [key]);
        // The tables exist before the processes start, so all of them contend on the lock only.
        await (await sql.prepare(server.url)).close();
        const ROUNDS = 20;
        const runs = await Promise.all(Array.from({ length: 8 }, () => contender(sql.contender, server.url, key, ROUNDS)));
        assert.deepEqual(runs, Array(8).fill(ROUNDS));
        const counter = await admin.query(sql.counter, [key]);
        assert.equal(counter[0].n, 8 * ROUNDS, "the counter equals the successful runs");
        const log = await admin.query(sql.log, [key]);
        assertNoOverlap(log.map((r) => r.entry));
        const tokens = log.filter((r) => r.entry.startsWith("in:")).map((r) => r.token);
        if (!sql.tokensMayBeNull || tokens[0] !== null) {
          for (let i = 1; i < tokens.length; i++) assert.ok(BigInt(tokens[i]) > BigInt(tokens[i - 1]), `token ${tokens[i]} after ${tokens[i - 1]}`);
        }
        console.log(`# load: 8 processes, ${8 * ROUNDS} critical sections on one ${sql.database} key, 0 overlaps, 0 lost updates`);
      });
    });

    describe("server outages", () => {
      it("a frozen server (SIGSTOP): calls fail with STORE_UNAVAILABLE at operationTimeoutMs, then work again", { timeout: 30_000 }, async () => {
        const store = await sql.connect(server.url, { operationTimeoutMs: 500 });
        const key = uniqueKey("frozen");
        const holder = new Lock(key, 10_000, store);
        try {
          assert.equal(await holder.acquire(), true);
          await server.signalAll("SIGSTOP");
          try {
            const direct = await settle(store.isLocked(key));
            assert.equal(direct.error?.code, "STORE_UNAVAILABLE");
            assert.match(direct.error.message, new RegExp(`^locksmith: ${sql.database} did not answer isLocked within 500 ms`));
            assert.ok(direct.ms >= 450 && direct.ms < 1_500, `failed after ${direct.ms} ms`);
            const extend = await settle(holder.extend());
            assert.equal(extend.error?.code, "STORE_UNAVAILABLE");
            assert.ok(extend.ms < 1_500, `extend failed after ${extend.ms} ms`);
            // A wait rides the outage out until its deadline, then fails with the last error.
            const { timeout, atLeast, below } = sql.frozenWait;
            const waiter = await settle(new Lock(key, 1_000, store).acquire({ timeout, retryDelay: 50 }));
            assert.equal(waiter.error?.code, "STORE_UNAVAILABLE");
            assert.ok(waiter.ms >= atLeast && waiter.ms < below, `the waiter gave up after ${waiter.ms} ms`);
          } finally {
            await server.signalAll("SIGCONT");
          }
          await eventually(() => holder.extend());
          assert.equal(await holder.release(), true);
        } finally {
          await store.close();
        }
      });
    });
  });
}

/** Runs one contender process (`support/<script>`); resolves with how many critical sections it ran. */
function contender(script, url, key, rounds) {
  return new Promise((resolve, reject) => {
    const args = [new URL(`../support/${script}`, import.meta.url).pathname, url, key, String(rounds)];
    const p = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.once("exit", (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`contender exited ${code}`))));
  });
}
