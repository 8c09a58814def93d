// MySqlLockStore beyond the conformance suite, on a real MariaDB server: options, the
// tables it creates, the server's clock, exact keys, cleanup, weighted semaphore permits,
// server-side bounds, error mapping, close(), deadlocks and a restart mid-use. The
// scenarios it shares with PostgresLockStore are in sql-stores.test.mjs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import mysql from "mysql2/promise";

import { MySqlLockStore } from "../../js/stores/mysql.mjs";
import { requireMysql, startMysql } from "../support/mysql-server.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { invalidArgument } from "../support/errors.mjs";
import { closeLeavesPoolOpen, closedWaitFailsAtOnce, refusesBadTableAndTimeout, sixStoresOneHold, storeDuring } from "../support/sql-checks.mjs";
import { eventually, settle } from "../support/wait.mjs";

const { Lock } = ls;
const ROOT = new URL("../..", import.meta.url).pathname;

await failOnUnhandledRejections();

/** Runs `code` in a new Node process in the package's directory; resolves with its exit status and output. */
function node(code, timeoutMs = 10_000) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["-e", code], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ status: signal ?? code, out });
    });
  });
}

describe("MySqlLockStore", await requireMysql(), () => {
  let server;
  let admin;
  before(async () => {
    server = await startMysql();
    admin = mysql.createPool({ uri: server.url, connectionLimit: 4 });
  });
  after(async () => {
    await admin?.end();
    await server?.dispose();
  });

  describe("options", () => {
    it("runs a lock through it, and is the store the diagnostics call mysql", async () => {
      const store = await MySqlLockStore.connect(server.url);
      const [ran, result] = await new Lock(uniqueKey("run"), 5_000, store).run(async () => "charged");
      assert.deepEqual([ran, result], [true, "charged"]);
      assert.equal(store[Symbol.for("locksmith.storeName")], "mysql");
      assert.equal(store.permitWeights, true);
      await store.close();
      await assert.rejects(store.isLocked("k"), { name: "StoreClosedError", code: "STORE_CLOSED" });
    });

    it("is the subpath export locksmith-js/mysql, one class for import and require, and loads mysql2 only to connect a URL", async () => {
      const { status, out } = await node(`
        const loaded = () => Object.keys(require.cache).some((path) => path.includes("/node_modules/mysql2/"));
        (async () => {
          await import("locksmith-js");
          const esm = await import("locksmith-js/mysql");
          const cjs = require("locksmith-js/mysql");
          const afterImport = loaded();
          await esm.MySqlLockStore.connect("mysql://nobody@127.0.0.1:1/none", { operationTimeoutMs: 1000 }).catch(() => {});
          console.log(JSON.stringify({ same: esm.MySqlLockStore === cjs.MySqlLockStore, afterImport, afterConnect: loaded() }));
        })();`);
      assert.equal(status, 0);
      assert.deepEqual(JSON.parse(out), { same: true, afterImport: false, afterConnect: true });
    });

    it("its own pool does not keep Node alive", { skip: TARGET !== "native" && "runs once" }, async () => {
      const started = performance.now();
      const { status, out } = await node(`
        const { MySqlLockStore } = require("locksmith-js/mysql");
        const { Lock } = require("locksmith-js");
        (async () => {
          const store = await MySqlLockStore.connect(${JSON.stringify(server.url)});
          const l = new Lock("exit-" + process.pid, 5000, store);
          await l.acquire();
          await l.release();
          console.log("done"); // no close(): the process ends by itself
        })();`);
      assert.deepEqual([status, out.trim()], [0, "done"]);
      assert.ok(performance.now() - started < 9_000);
    });

    it("refuses unknown and bad options with INVALID_ARGUMENT, before connecting", async () => {
      await assert.rejects(MySqlLockStore.connect(server.url, { tabel: "locks" }), invalidArgument(/unknown option `tabel`.*did you mean `table`/));
      await assert.rejects(MySqlLockStore.connect(server.url, { listen: false }), invalidArgument(/unknown option `listen`/));
      await refusesBadTableAndTimeout((options) => MySqlLockStore.connect(server.url, options));
      await assert.rejects(MySqlLockStore.connect(server.url, { createTable: "yes" }), invalidArgument(/createTable must be a boolean/));
      await assert.rejects(MySqlLockStore.connect(server.url, null), invalidArgument(/options must be an object/));
      await assert.rejects(MySqlLockStore.connect(42), invalidArgument(/mysql:\/\/ URL/));
      await assert.rejects(
        MySqlLockStore.connect("postgres://u:secret@h/db"),
        (err) => invalidArgument(/starting mysql:\/\//)(err) && !/secret/.test(err.message),
      );
      assert.throws(() => new MySqlLockStore({}), invalidArgument(/takes a mysql2\/promise pool/));
      assert.throws(() => new MySqlLockStore(admin, { createTables: false }), invalidArgument(/did you mean `createTable`/));
    });

    it("fails to connect to a server that is not there with STORE_UNAVAILABLE, in time", async () => {
      const down = await settle(MySqlLockStore.connect(`mysql://root@127.0.0.1:${server.port + 1}/locksmith`, { operationTimeoutMs: 1_000 }));
      assert.equal(down.error?.code, "STORE_UNAVAILABLE");
      assert.match(down.error.message, /^locksmith: MySQL: /);
      assert.ok(down.ms < 2_000, `failed after ${down.ms} ms`);
    });

    it("a refused login, a missing privilege and a missing table are STORE_ERROR", async () => {
      await admin.query("CREATE USER IF NOT EXISTS 'reader'@'127.0.0.1' IDENTIFIED BY 'pw'");
      await admin.query("GRANT SELECT ON locksmith.* TO 'reader'@'127.0.0.1'");
      await (await MySqlLockStore.connect(server.url)).close(); // the tables exist
      const login = await settle(MySqlLockStore.connect(`mysql://reader:wrong@127.0.0.1:${server.port}/locksmith`));
      assert.equal(login.error?.code, "STORE_ERROR", String(login.error));
      assert.match(login.error.message, /^locksmith: MySQL: Access denied/);
      const reader = await MySqlLockStore.connect(`mysql://reader:pw@127.0.0.1:${server.port}/locksmith`);
      try {
        assert.equal(await reader.isLocked(uniqueKey("read-only")), false, "it may read");
        await assert.rejects(reader.acquire(uniqueKey("read-only"), "o", 1_000), (err) => {
          assert.equal(err.code, "STORE_ERROR");
          assert.equal(err.name, "LockStoreError");
          assert.match(err.message, /^locksmith: MySQL: .*command denied/i);
          return true;
        });
      } finally {
        await reader.close();
      }
      const missing = new MySqlLockStore(admin, { table: "not_there", createTable: false });
      await assert.rejects(missing.acquire("k", "o", 1_000), (err) => err.code === "STORE_ERROR" && /not_there.*does not exist/.test(err.message));
      const [rows] = await admin.query("SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name LIKE 'not_there%'");
      assert.equal(Number(rows[0].n), 0, "nothing was created");
      await missing.close();
    });

    it("close() leaves the caller's pool open, and later calls fail with STORE_CLOSED at once", async () => {
      const store = new MySqlLockStore(admin);
      await closeLeavesPoolOpen(store, async () => (await admin.query("SELECT 1 AS one"))[0]);
      await closedWaitFailsAtOnce(store);
    });
  });

  describe("the tables", () => {
    describe("made before elections kept a value (no value columns)", () => {
      const NOW_MS = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(3)) DIV 1000)";
      /** The tables as the version before them created them, with a live lock of `key` held by `owner`. */
      const oldTables = async (table, key, owner) => {
        const KEY = "`key` VARBINARY(1024) NOT NULL";
        const KIND = "kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL";
        await admin.query(
          `CREATE TABLE ${table} (${KEY} PRIMARY KEY, owner VARBINARY(255) NOT NULL, expires_at BIGINT NOT NULL, fencing_token BIGINT NULL, INDEX expires_at (expires_at)) ENGINE=InnoDB`,
        );
        await admin.query(
          `CREATE TABLE ${table}_permits (${KIND}, ${KEY}, owner VARBINARY(255) NOT NULL, role VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
             expires_at BIGINT NOT NULL, fencing_token BIGINT NULL, semaphore_limit INT NULL, permits INT NOT NULL DEFAULT 1,
             PRIMARY KEY (kind, \`key\`, owner), INDEX expires_at (expires_at)) ENGINE=InnoDB`,
        );
        await admin.query(`CREATE TABLE ${table}_keys (${KIND}, ${KEY}, PRIMARY KEY (kind, \`key\`)) ENGINE=InnoDB`);
        await admin.query(`CREATE TABLE ${table}_fencing (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB`);
        await admin.query(`INSERT INTO ${table}_fencing () VALUES ()`);
        await admin.query(`INSERT INTO ${table} VALUES (?, ?, ${NOW_MS} + 60000, LAST_INSERT_ID())`, [key, owner]);
      };
      const dropTables = (table) => admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_permits, ${table}_keys, ${table}_fencing`);
      const valueColumns = async (table) =>
        (
          await admin.query(
            `SELECT column_name AS name, data_type AS type, is_nullable AS nullable FROM information_schema.columns
              WHERE table_schema = DATABASE() AND table_name = ? AND column_name LIKE 'value%' ORDER BY column_name`,
            [table],
          )
        )[0].map((r) => ({ ...r }));
      const ALTER = (table) => `ALTER TABLE \`${table}\` ADD COLUMN \`value\` BLOB NULL, ADD COLUMN value_token BIGINT NULL, ADD COLUMN value_seq BIGINT NULL`;
      const missing = (table) => (err) => {
        assert.equal(err.code, "STORE_ERROR");
        assert.equal(err.name, "LockStoreError");
        assert.match(err.message, new RegExp(`^locksmith: MySQL: the table \`${table}\` has no value, value_token, value_seq columns`));
        assert.ok(err.message.includes(ALTER(table)), err.message);
        assert.equal(err.cause?.errno, 1054);
        return true;
      };

      it("with createTable: false, locks work and holder() and proclaim() fail with STORE_ERROR naming the ALTER TABLE; with true, the columns are added", async () => {
        const table = "before_values";
        const key = uniqueKey("old-value");
        await oldTables(table, key, "old-holder");
        try {
          const kept = new MySqlLockStore(admin, { table, createTable: false });
          // Everything but holder() and proclaim() works on the tables as they are.
          const l = new Lock(uniqueKey("old-lock"), 5_000, kept);
          assert.equal(await l.acquire(), true);
          assert.equal(typeof l.fencingToken, "number");
          await l.extend();
          assert.equal(await l.isExpired(), false);
          assert.equal(await kept.isHeldBy(key, "old-holder"), true);
          const s = ls.semaphore(uniqueKey("old-sem"), 2, 5_000, kept);
          assert.equal(await s.acquire({ permits: 2 }), true);
          await assert.rejects(kept.holder(key), missing(table));
          await assert.rejects(kept.proclaim(l.key, "anyone", "v", 1), missing(table));
          assert.deepEqual(await valueColumns(table), [], "no column added");
          await Promise.all([l.release(), s.release()]);

          // Connecting with createTable: true adds them (several processes at once): the
          // hold from before has no value yet.
          const upgraded = await Promise.all(Array.from({ length: 3 }, () => MySqlLockStore.connect(server.url, { table })));
          assert.deepEqual(await valueColumns(table), [
            { name: "value", type: "blob", nullable: "YES" },
            { name: "value_seq", type: "bigint", nullable: "YES" },
            { name: "value_token", type: "bigint", nullable: "YES" },
          ]);
          const [store] = upgraded;
          const before = await store.holder(key);
          assert.deepEqual([before.owner, before.value], ["old-holder", null]);
          assert.equal(await store.proclaim(key, "old-holder", "v1", 1), true);
          // The store made with createTable: false sees them too, without reconnecting.
          assert.equal((await kept.holder(key)).value, "v1");
          await kept.close();
          await Promise.all(upgraded.map((x) => x.close()));
        } finally {
          await dropTables(table);
        }
      });

      it("a user that may not alter the tables connects with createTable: true all the same: locks work, holder() says what to add", async () => {
        const table = "before_values_not_altered";
        const key = uniqueKey("old-value");
        await oldTables(table, key, "old-holder");
        await admin.query("CREATE USER IF NOT EXISTS 'dml'@'127.0.0.1' IDENTIFIED BY 'pw'");
        await admin.query("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON locksmith.* TO 'dml'@'127.0.0.1'");
        const store = await MySqlLockStore.connect(`mysql://dml:pw@127.0.0.1:${server.port}/locksmith`, { table });
        try {
          const l = new Lock(uniqueKey("old-lock"), 5_000, store);
          assert.equal(await l.acquire(), true);
          assert.equal(await l.release(), true);
          await assert.rejects(store.holder(key), missing(table));
          assert.deepEqual(await valueColumns(table), []);
        } finally {
          await store.close();
          await dropTables(table);
        }
      });

      it("a transaction that has the table open holds the upgrade up 1 s at most: connect and the running stores' calls go on, holder() says what to add", async () => {
        const table = "before_values_busy";
        const key = uniqueKey("old-value");
        await oldTables(table, key, "old-holder");
        const closing = [];
        let pool;
        const reader = await admin.getConnection();
        try {
          // A store already running on the tables, holding a lock (its calls must not wait behind the upgrade).
          const running = await MySqlLockStore.connect(server.url, { table, createTable: false });
          closing.push(running);
          const held = uniqueKey("busy-lock");
          assert.equal(await running.acquire(held, "running", 10_000), true);
          // A store over a pool of ours, whose statements are counted.
          const statements = [];
          pool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
          pool.pool.on("connection", (connection) => {
            const query = connection.query.bind(connection);
            connection.query = (sql, ...rest) => {
              statements.push(typeof sql === "string" ? sql : String(sql?.sql));
              return query(sql, ...rest);
            };
          });
          const mine = new MySqlLockStore(pool, { table });
          closing.push(mine);
          const alters = () => statements.filter((s) => s.startsWith(`ALTER TABLE \`${table}\``)).length;
          // A transaction that has read the table keeps its metadata lock: ALTER TABLE waits
          // for it, and every statement on the table after the ALTER waits behind it.
          await reader.query("START TRANSACTION");
          await reader.query(`SELECT 1 FROM ${table} LIMIT 1`);
          const connecting = settle(MySqlLockStore.connect(server.url, { table }));
          // The running store's extend, as soon as the ALTER TABLE waits (if it is seen waiting at all).
          const deadline = performance.now() + 1_000;
          while (performance.now() < deadline) {
            const [rows] = await admin.query(
              "SELECT COUNT(*) AS n FROM information_schema.processlist WHERE info LIKE 'ALTER TABLE%' AND state LIKE '%metadata lock%'",
            );
            if (Number(rows[0].n) > 0) break;
            await sleep(5);
          }
          const extended = await settle(running.extend(held, "running", 10_000));
          const connected = await connecting;
          assert.equal(connected.error, undefined, String(connected.error?.stack));
          closing.push(connected.value);
          assert.ok(connected.ms < 2_000, `connect took ${Math.round(connected.ms)} ms`);
          assert.deepEqual([extended.value, extended.error], [true, undefined]);
          assert.ok(extended.ms < 1_800, `the running store's extend took ${Math.round(extended.ms)} ms`);
          const store = connected.value;
          // Locks work; holder() and proclaim() say what to add, and why it was not added.
          const l = new Lock(uniqueKey("busy-new"), 5_000, store);
          assert.equal(await l.acquire(), true);
          assert.equal(await l.release(), true);
          const busy = (err) => {
            missing(table)(err);
            assert.match(err.message, /other transactions kept the table open longer than the 1 s it waits/);
            return true;
          };
          await assert.rejects(store.holder(key), busy);
          await assert.rejects(store.proclaim(key, "old-holder", "v", 1), busy);
          // A store over a pool of yours tries once, at its first call, not at every call.
          const first = await settle(mine.isLocked(held));
          assert.deepEqual([first.value, first.error], [true, undefined]);
          assert.ok(first.ms < 2_000, `the first call took ${Math.round(first.ms)} ms`);
          for (let i = 0; i < 3; i++) assert.equal(await mine.isHeldBy(held, "running"), true);
          await assert.rejects(mine.holder(key), busy);
          assert.equal(alters(), 1, "one ALTER TABLE, at the first call");
          assert.deepEqual(await valueColumns(table), []);
          await reader.query("ROLLBACK");

          // Once the transaction is over, a new store adds them; the others see them without reconnecting.
          const later = await MySqlLockStore.connect(server.url, { table });
          closing.push(later);
          assert.equal((await valueColumns(table)).length, 3);
          assert.equal(await later.proclaim(key, "old-holder", "v1", 1), true);
          assert.equal((await store.holder(key)).value, "v1");
          assert.equal((await mine.holder(key)).value, "v1");
          assert.equal(alters(), 1, "the store over your pool did not try again");
        } finally {
          await reader.query("ROLLBACK").catch(() => {});
          reader.release();
          await Promise.all(closing.map((s) => s.close()));
          await pool?.end();
          await dropTables(table);
        }
      });

      it("a store that waited in vain for another process adding them says so: holder() tells why they are missing", async () => {
        const table = "before_values_lost_lock";
        const key = uniqueKey("old-value");
        await oldTables(table, key, "old-holder");
        // Another process holds the named lock under which the columns are added, and never adds them.
        const other = await admin.getConnection();
        const name = "CONCAT('locksmith:', SHA1(CONCAT(DATABASE(), '.', ?)))";
        let store;
        try {
          const [[got]] = await other.query(`SELECT GET_LOCK(${name}, 0) AS got`, [table]);
          assert.equal(Number(got.got), 1);
          const connected = await settle(MySqlLockStore.connect(server.url, { table }));
          assert.equal(connected.error, undefined, String(connected.error?.stack));
          store = connected.value;
          assert.ok(connected.ms < 2_500, `connect took ${Math.round(connected.ms)} ms`);
          const l = new Lock(uniqueKey("lost-lock"), 5_000, store);
          assert.equal(await l.acquire(), true);
          assert.equal(await l.release(), true);
          const why = (err) => {
            missing(table)(err);
            assert.match(err.message, /This store could not add them: another process was adding them and had not within the 1 s this store waited/);
            return true;
          };
          await assert.rejects(store.holder(key), why);
          await assert.rejects(store.proclaim(key, "old-holder", "v", 1), why);
          assert.deepEqual(await valueColumns(table), []);
        } finally {
          await other.query(`DO RELEASE_LOCK(${name})`, [table]).catch(() => {});
          other.release();
          await store?.close();
          await dropTables(table);
        }
      });
    });

    it("are created once by several stores starting at the same time; a hold is a row with the server's expiry and a token", async () => {
      const table = "created_together";
      const { stores, key, owner, token } = await sixStoresOneHold(() => MySqlLockStore.connect(server.url, { table }));
      const [rows] = await admin.query(
        `SELECT CAST(\`key\` AS CHAR) AS k, CAST(owner AS CHAR) AS owner, fencing_token,
           expires_at - (TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(3)) DIV 1000) BETWEEN 59000 AND 60000 AS in60s FROM ${table}`,
      );
      assert.deepEqual(
        rows.map((r) => ({ ...r, fencing_token: Number(r.fencing_token), in60s: Number(r.in60s) })),
        [{ k: key, owner, fencing_token: token, in60s: 1 }],
      );
      for (const store of stores) assert.equal(await store.isHeldBy(key, owner), true);
      await Promise.all(stores.map((s) => s.close()));
    });

    it("expiry is the server's clock, whatever this process's clock or the session's time zone says", async () => {
      const pool = mysql.createPool({ uri: server.url, connectionLimit: 2 });
      // A session time zone far from UTC: NOW() would move with it, the store's clock must not.
      pool.pool.on("connection", (c) => c.query("SET time_zone = '+09:00'"));
      const store = new MySqlLockStore(pool);
      const key = uniqueKey("clock");
      const realNow = Date.now;
      Date.now = () => realNow() + 3_600_000;
      try {
        assert.equal(await store.acquire(key, "a", 60_000), true);
        assert.equal(await store.extend(key, "a", 60_000), true);
      } finally {
        Date.now = realNow;
      }
      const left = await store.remainingTime(key);
      assert.ok(left > 59_000 && left <= 60_000, `remaining ${left}`);
      // The expiry one millisecond ago by the server's clock.
      await admin.query("UPDATE locksmith_locks SET expires_at = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(3)) DIV 1000) - 1 WHERE `key` = ?", [
        key,
      ]);
      assert.equal(await store.isLocked(key), false);
      assert.equal(await store.remainingTime(key), null);
      assert.equal(await store.extend(key, "a", 1_000), false, "an expired hold is not extended");
      assert.equal(await store.acquire(key, "b", 1_000), true, "an expired hold is taken over");
      await store.close();
      await pool.end();
    });

    it("keys and owners are exact bytes: case, trailing spaces and accents make other keys", async () => {
      const store = new MySqlLockStore(admin);
      const base = uniqueKey("Exact");
      const keys = [base, base.toLowerCase(), `${base} `, `${base}é`, `${base}e`];
      for (const key of keys) assert.equal(await store.acquire(key, "o", 5_000), true, JSON.stringify(key));
      assert.equal(await store.isHeldBy(base, "O"), false, "owners too");
      assert.equal(await store.acquire(base, "p", 5_000), false);
      for (const key of keys) assert.equal(await store.release(key, "o"), true);
      await store.close();
    });

    it("extends within the millisecond it acquired in, over a pool without the FOUND_ROWS flag", async () => {
      const pool = mysql.createPool({ uri: server.url, connectionLimit: 1, flags: ["-FOUND_ROWS"] });
      const store = new MySqlLockStore(pool);
      try {
        for (let i = 0; i < 20; i++) {
          const key = uniqueKey("same-ms");
          assert.equal(await store.acquire(key, "o", 10_000), true);
          // The same expiry as the acquire's when both fall in one millisecond: found, not changed.
          assert.equal(await store.extend(key, "o", 10_000), true, `extend ${i}`);
          assert.equal(await store.release(key, "o"), true);
        }
      } finally {
        await store.close();
        await pool.end();
      }
    });

    it("cleans up expired rows, a bounded number at a time, and keeps the fencing counter growing", async () => {
      const table = "swept";
      const store = await MySqlLockStore.connect(server.url, { table });
      const now = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(3)) DIV 1000)";
      await admin.query(
        `INSERT INTO ${table} (\`key\`, owner, expires_at, fencing_token)
         SELECT CONCAT('old:', seq), 'o', ${now} - 61000, seq FROM seq_1_to_700`,
      );
      await admin.query(
        `INSERT INTO ${table}_permits (kind, \`key\`, owner, role, expires_at, fencing_token)
         SELECT 'semaphore', 'old', CONCAT('o', seq), 'semaphore', ${now} - 1000, seq FROM seq_1_to_10`,
      );
      const before = new Lock(uniqueKey("live"), 60_000, store);
      assert.equal(await before.acquire(), true); // the first acquire sweeps
      const count = async (t) => Number((await admin.query(`SELECT COUNT(*) AS n FROM ${t}`))[0][0].n);
      const deadline = Date.now() + 3_000;
      while (((await count(table)) > 201 || (await count(`${table}_fencing`)) > 1) && Date.now() < deadline) await sleep(20);
      assert.equal(await count(table), 201, "500 of the 700 rows expired over a minute ago went, the live one stayed");
      assert.equal(await count(`${table}_permits`), 0);
      assert.equal(await count(`${table}_fencing`), 1, "the counter keeps its last row only");
      assert.equal(await before.isExpired(), false);
      const after = new Lock(uniqueKey("live"), 60_000, store);
      assert.equal(await after.acquire(), true);
      assert.ok(after.fencingToken > before.fencingToken, `${after.fencingToken} > ${before.fencingToken}`);
      await store.close();
    });
  });

  describe("semaphores and read-write locks", () => {
    let store;
    storeDuring(
      () => MySqlLockStore.connect(server.url),
      (opened) => {
        store = opened;
      },
    );

    it("a semaphore holder of n permits counts n toward the limit (permitWeights)", async () => {
      const key = uniqueKey("weights");
      assert.equal(await store.acquirePermit(key, "owner-a", 5_000, "semaphore", 3, 2), true);
      assert.equal(await store.countPermits(key, "semaphore"), 2);
      assert.equal(await store.acquirePermit(key, "owner-x", 5_000, "semaphore", 3, 2), false, "two more do not fit");
      assert.equal(await store.acquirePermit(key, "owner-b", 5_000, "semaphore", 3, 1), true, "one more fits");
      assert.equal(await store.acquirePermit(key, "owner-c", 5_000, "semaphore", 3, 1), false, "the limit is reached");
      assert.equal(await store.countPermits(key, "semaphore"), 3);
      // The token path takes the same 6th argument.
      assert.equal(await store[Symbol.for("locksmith.acquirePermitToken")](key, "owner-d", 5_000, "semaphore", 3, 2), false);
      assert.equal(await store.releasePermit(key, "owner-a", "semaphore"), true);
      const token = await store[Symbol.for("locksmith.acquirePermitToken")](key, "owner-d", 5_000, "semaphore", 3, 2);
      assert.ok(Number.isSafeInteger(token) && token > 0, `a token: ${token}`);
      assert.equal(await store.countPermits(key, "semaphore"), 3);
      // Without the 6th argument (a core that does not pass it yet): one permit.
      assert.equal(await store.releasePermit(key, "owner-b", "semaphore"), true);
      assert.equal(await store.acquirePermit(key, "owner-e", 5_000, "semaphore", 3), true);
      assert.equal(await store.countPermits(key, "semaphore"), 3);
      for (const permits of [0, 4, 1.5, "2", null, Number.NaN]) {
        await assert.rejects(store.acquirePermit(key, "owner-f", 5_000, "semaphore", 3, permits), invalidArgument(/permits must be/), String(permits));
      }
      assert.equal(await store.countPermits(key, "semaphore"), 3, "nothing taken by a refused argument");
    });

    it("refuses permits on a read or write hold, and out of a semaphore's range, with the core's messages, taking nothing", async () => {
      const key = uniqueKey("permits-kind");
      for (const kind of ["read", "write"]) {
        for (const permits of [5, 2, 0, 1.5]) {
          await assert.rejects(
            store.acquirePermit(key, "o", 5_000, kind, undefined, permits),
            invalidArgument(new RegExp(`^locksmith: permits is a semaphore's option; a ${kind} handle takes one hold$`)),
            `${kind} ${permits}`,
          );
        }
        assert.equal(await store.countPermits(key, kind), 0, "nothing taken");
      }
      assert.equal(await store.acquirePermit(key, "reader", 5_000, "read", undefined, 1), true, "one permit is a read hold's own");
      assert.equal(await store.releasePermit(key, "reader", "read"), true);
      await assert.rejects(
        store.acquirePermit(key, "o", 5_000, "semaphore", 3, 4),
        invalidArgument(/^locksmith: permits must be a whole number from 1 to the semaphore's limit \(3\); got 4$/),
      );
    });
  });

  describe("server-side bounds", () => {
    /** The server's InnoDB transactions, and the sessions running or waiting on a statement, but this one's. */
    const serverBusy = async () => {
      // Transactions waiting for a lock.
      const [trx] = await admin.query("SELECT trx_mysql_thread_id AS id, trx_state AS state FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'");
      const [threads] = await admin.query(
        "SELECT ID AS id, COMMAND AS command, STATE AS state, INFO AS info FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Sleep', 'Daemon')",
      );
      return { trx, threads };
    };
    const serverIdle = async (ms) => {
      const deadline = Date.now() + ms;
      for (;;) {
        const busy = await serverBusy();
        if ((busy.trx.length === 0 && busy.threads.length === 0) || Date.now() > deadline) return busy;
        await sleep(50);
      }
    };

    for (const pool of ["its own pool", "the caller's pool"]) {
      it(`a client frozen (SIGSTOP) inside an acquire's transaction, over ${pool}, does not keep the key past its idle bound; no server thread is left waiting`, {
        timeout: 20_000,
      }, async () => {
        const key = uniqueKey("frozen-client");
        await (await MySqlLockStore.connect(server.url)).close(); // the tables exist
        // The child stops itself right after its acquire took the key's row lock (the fencing draw).
        const child = spawn(
          process.execPath,
          [
            "-e",
            `
            const mysql = require("mysql2/promise");
            const query = mysql.PromisePoolConnection.prototype.query;
            mysql.PromisePoolConnection.prototype.query = function (sql, ...rest) {
              if (typeof sql === "string" && sql.includes("_fencing\` () VALUES")) {
                process.stdout.write("frozen\\n");
                process.kill(process.pid, "SIGSTOP");
              }
              return query.call(this, sql, ...rest);
            };
            const { MySqlLockStore } = require("locksmith-js/mysql");
            (async () => {
              const url = ${JSON.stringify(server.url)};
              const store = ${pool === "its own pool" ? "await MySqlLockStore.connect(url, { operationTimeoutMs: 1000 })" : "new MySqlLockStore(mysql.createPool({ uri: url }), { operationTimeoutMs: 1000 })"};
              await store.acquire(${JSON.stringify(key)}, "frozen", 60000);
            })();`,
          ],
          { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] },
        );
        const store = await MySqlLockStore.connect(server.url, { operationTimeoutMs: 1_000 });
        try {
          await new Promise((resolve, reject) => {
            child.stdout.on("data", (d) => String(d).includes("frozen") && resolve());
            child.once("exit", (code) => reject(new Error(`the child exited ${code} before it froze`)));
          });
          const frozenAt = performance.now();
          const [open] = await admin.query("SELECT trx_mysql_thread_id AS id FROM information_schema.INNODB_TRX WHERE trx_lock_structs > 0");
          assert.equal(open.length, 1, "the frozen client's transaction holds the row lock");
          const frozenThread = open[0].id;
          const other = new Lock(key, 5_000, store);
          const got = await settle(other.acquire({ timeout: 6_000, retryDelay: 50 }));
          const ms = performance.now() - frozenAt;
          assert.equal(got.value, true, `another process's acquire: ${got.error ?? got.value} after ${ms} ms`);
          // The bound: the frozen session's idle time (operationTimeoutMs, in whole seconds: 1 s), plus a retry.
          assert.ok(ms < 3_000, `taken ${Math.round(ms)} ms after the client froze`);
          await other.release();
          const busy = await serverIdle(2_000);
          assert.deepEqual(busy, { trx: [], threads: [] }, "no transaction and no thread waiting on the server");
          const [gone] = await admin.query("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?", [frozenThread]);
          assert.equal(Number(gone[0].n), 0, "the server ended the frozen client's session");
        } finally {
          child.kill("SIGKILL");
          await store.close();
        }
      });
    }

    it("a statement waiting on a row lock stops on the server near operationTimeoutMs, not innodb_lock_wait_timeout's 50 s", { timeout: 20_000 }, async () => {
      const key = uniqueKey("row-wait");
      const store = await MySqlLockStore.connect(server.url, { operationTimeoutMs: 1_000 });
      const raw = await mysql.createConnection(server.url);
      try {
        assert.equal(await store.acquire(key, "o", 60_000), true);
        // A raw connection (not the store's: the store cannot bound it) holds the key's row lock.
        await raw.query("START TRANSACTION");
        await raw.query("SELECT * FROM locksmith_locks WHERE `key` = ? FOR UPDATE", [key]);
        const attempts = await settle(new Lock(key, 5_000, store).acquire({ timeout: 2_500, retryDelay: 50 }));
        assert.equal(attempts.error?.code, "STORE_UNAVAILABLE");
        // The failed attempts' clean-up releases go on in the background (tried again while
        // the row stays locked, up to the TTL), but no statement of the store's waits on the
        // server much longer than operationTimeoutMs (each waited 50 s before).
        await sleep(2_000);
        const [old] = await admin.query(
          "SELECT ID AS id, TIME_MS AS ms, INFO AS info FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Sleep', 'Daemon') AND TIME_MS > 1600",
        );
        assert.deepEqual(old, [], "no statement of the store's waiting on the server past its bound");
      } finally {
        await raw.query("ROLLBACK").catch(() => {});
        await raw.end();
        await store.close();
      }
    });

    it("over the caller's pool, its sessions' own settings are put back after each transaction", async () => {
      const pool = mysql.createPool({ uri: server.url, connectionLimit: 1 });
      pool.pool.on("connection", (c) => c.query("SET SESSION innodb_lock_wait_timeout = 7, SESSION wait_timeout = 600"));
      const store = new MySqlLockStore(pool, { operationTimeoutMs: 2_000 });
      try {
        const read = async () =>
          (
            await pool.query(
              "SELECT @@SESSION.innodb_lock_wait_timeout AS lockWait, @@SESSION.wait_timeout AS wait, @@SESSION.tx_isolation AS isolation, @@SESSION.max_statement_time + 0 AS statement, @@SESSION.idle_transaction_timeout AS idle",
            )
          )[0][0];
        const mine = await read();
        assert.deepEqual(mine, { lockWait: 7, wait: 600, isolation: "REPEATABLE-READ", statement: 0, idle: 0 });
        const key = uniqueKey("restored");
        assert.equal(await store.acquire(key, "o", 5_000), true);
        assert.equal(await store.acquirePermit(key, "o", 5_000, "semaphore", 2), true);
        assert.equal(await store.acquire(key, "p", 5_000), false, "a rolled-back transaction too");
        assert.deepEqual(await read(), mine);
      } finally {
        await store.close();
        await pool.end();
      }
    });
  });

  describe("errors through a lock", () => {
    /** A pool whose connections answer the store's setup, then fail every other statement with `error`. */
    const failingPool = (error) => {
      const connection = {
        inTransaction: false,
        async query(sql) {
          if (sql.startsWith("SHOW SESSION VARIABLES")) return [[]];
          if (sql.includes("information_schema.tables")) return [[{ n: 4 }]];
          throw error();
        },
        release() {},
        destroy() {},
      };
      return { getConnection: async () => connection, query: connection.query };
    };
    const serverError = (errno) => () => Object.assign(new Error(`server error ${errno}`), { errno, sqlState: "HY000", code: `ER_${errno}` });

    it("maps transient server errors to STORE_UNAVAILABLE and the rest to STORE_ERROR", async () => {
      const transient = {
        1290: "--read-only",
        1836: "read-only mode",
        1792: "a read-only transaction (Aurora in a failover)",
        3100: "Group Replication hook",
        3101: "Group Replication rollback",
        1047: "Galera node not ready",
        1213: "deadlock",
        1205: "lock wait timeout",
        1969: "max_statement_time",
        3024: "max_execution_time",
        2013: "lost connection",
        1927: "connection killed",
      };
      const final = { 1045: "access denied", 1142: "command denied", 1146: "no such table", 1064: "syntax", 1406: "data too long", 1062: "duplicate" };
      for (const [errno, what] of [
        ...Object.entries(transient).map(([e, w]) => [e, w, "STORE_UNAVAILABLE"]),
        ...Object.entries(final).map(([e, w]) => [e, w, "STORE_ERROR"]),
      ].map(([e, w, c]) => [[Number(e), c], w])) {
        const store = new MySqlLockStore(failingPool(serverError(errno[0])), { operationTimeoutMs: 1_000 });
        for (const call of [() => store.acquire("k", "o", 1_000), () => store.release("k", "o"), () => store.acquirePermit("k", "o", 1_000, "semaphore", 2)]) {
          await assert.rejects(call(), (err) => {
            assert.equal(err.code, errno[1], `${errno[0]} (${what})`);
            assert.equal(err.cause?.errno, errno[0]);
            return true;
          });
        }
        await store.close();
      }
      // Errors of the socket or of mysql2 itself (no errno from the server): unavailable.
      for (const error of [
        Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", errno: -104 }),
        Object.assign(new Error("lost"), { code: "PROTOCOL_CONNECTION_LOST", fatal: true }),
      ]) {
        const store = new MySqlLockStore(
          failingPool(() => error),
          { operationTimeoutMs: 1_000 },
        );
        await assert.rejects(store.acquire("k", "o", 1_000), { code: "STORE_UNAVAILABLE" });
        await store.close();
      }
    });

    it("a waiting lock rides a transient error out until its deadline, and stops at once on a final one", async () => {
      const transient = new MySqlLockStore(failingPool(serverError(3101)), { operationTimeoutMs: 1_000 });
      const ridden = await settle(new Lock("k", 1_000, transient).acquire({ timeout: 600, retryDelay: 20 }));
      assert.equal(ridden.error?.code, "STORE_UNAVAILABLE");
      assert.ok(ridden.ms >= 550, `gave up after ${ridden.ms} ms`);
      await transient.close();
      const final = new MySqlLockStore(failingPool(serverError(1142)), { operationTimeoutMs: 1_000 });
      const stopped = await settle(new Lock("k", 1_000, final).acquire({ timeout: 5_000, retryDelay: 20 }));
      assert.equal(stopped.error?.code, "STORE_ERROR");
      assert.equal(stopped.error.name, "LockStoreError");
      assert.ok(stopped.ms < 500, `failed after ${stopped.ms} ms`);
      await final.close();
    });

    it("a read-only transaction (1792) and a read-only server (1290) are STORE_UNAVAILABLE, from a real server", async () => {
      const readOnly = mysql.createPool({ uri: server.url, connectionLimit: 1 });
      readOnly.pool.on("connection", (c) => c.query("SET SESSION TRANSACTION READ ONLY"));
      const store = new MySqlLockStore(readOnly, { operationTimeoutMs: 1_000 });
      await assert.rejects(store.acquire(uniqueKey("ro"), "o", 1_000), (err) => err.code === "STORE_UNAVAILABLE" && err.cause?.errno === 1792);
      await store.close();
      await readOnly.end();
      await admin.query("CREATE USER IF NOT EXISTS 'writer'@'127.0.0.1' IDENTIFIED BY 'pw'");
      await admin.query("GRANT SELECT, INSERT, UPDATE, DELETE ON locksmith.* TO 'writer'@'127.0.0.1'");
      const writer = await MySqlLockStore.connect(`mysql://writer:pw@127.0.0.1:${server.port}/locksmith`, { operationTimeoutMs: 1_000 });
      await admin.query("SET GLOBAL read_only = 1");
      try {
        await assert.rejects(writer.acquire(uniqueKey("ro"), "o", 1_000), (err) => err.code === "STORE_UNAVAILABLE" && err.cause?.errno === 1290);
      } finally {
        await admin.query("SET GLOBAL read_only = 0");
        await writer.close();
      }
    });
  });

  describe("close()", () => {
    it("waits for the calls under way before it ends its own pool", async () => {
      const store = await MySqlLockStore.connect(server.url);
      const key = uniqueKey("close-inflight");
      const calls = [store.acquire(key, "o", 5_000), store.acquirePermit(key, "o", 5_000, "semaphore", 2), store.isLocked(uniqueKey("close-other"))];
      await store.close();
      assert.deepEqual(await Promise.all(calls), [true, true, false]);
      const [rows] = await admin.query("SELECT COUNT(*) AS n FROM locksmith_locks WHERE `key` = ?", [key]);
      assert.equal(Number(rows[0].n), 1);
    });

    it("runs a pending cleanup of an acquire whose answer was lost before it returns", async () => {
      const pool = mysql.createPool({ uri: server.url, connectionLimit: 2 });
      // The answer to the acquire's COMMIT is lost (the commit happened).
      let lose = true;
      const losing = {
        getConnection: async () => {
          const c = await pool.getConnection();
          return new Proxy(c, {
            get(target, name) {
              if (name !== "query") return typeof target[name] === "function" ? target[name].bind(target) : target[name];
              return async (sql, ...rest) => {
                const result = await target.query(sql, ...rest);
                if (sql === "COMMIT" && lose) {
                  lose = false;
                  throw Object.assign(new Error("Connection lost: The server closed the connection."), { code: "PROTOCOL_CONNECTION_LOST", fatal: true });
                }
                return result;
              };
            },
          });
        },
        query: (...args) => pool.query(...args),
      };
      const store = new MySqlLockStore(losing);
      const key = uniqueKey("close-cleanup");
      await assert.rejects(store.acquire(key, "o", 60_000), { code: "STORE_UNAVAILABLE" });
      await store.close();
      const [rows] = await admin.query(
        `SELECT expires_at > ${"(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(3)) DIV 1000)"} AS live FROM locksmith_locks WHERE \`key\` = ?`,
        [key],
      );
      assert.deepEqual(
        rows.map((r) => Number(r.live)),
        [0],
        "the hold the lost answer took was freed",
      );
      await pool.end();
    });

    it("a store over the caller's pool takes its connection listener off (promise and callback pools)", async () => {
      const pool = mysql.createPool({ uri: server.url, connectionLimit: 1 });
      const before = pool.pool.listenerCount("connection");
      for (const given of [pool, pool.pool]) {
        const store = new MySqlLockStore(given);
        assert.equal(pool.pool.listenerCount("connection"), before + 1);
        assert.equal(await store.isLocked(uniqueKey("listener")), false);
        await store.close();
        assert.equal(pool.pool.listenerCount("connection"), before, "the listener went with close()");
      }
      await pool.end();
    });
  });

  describe("deadlocks", () => {
    it("acquirers waiting on a row the sweep deletes answer true or false: the deadlock is retried inside the store", { timeout: 20_000 }, async () => {
      const store = await MySqlLockStore.connect(server.url, { operationTimeoutMs: 3_000 });
      const now = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(3)) DIV 1000)";
      let deadlocks = 0;
      try {
        for (let round = 0; round < 5; round++) {
          const key = uniqueKey("deadlock");
          await admin.query(`INSERT INTO locksmith_locks (\`key\`, owner, expires_at, fencing_token) VALUES (?, 'old', ${now} - 61000, 1)`, [key]);
          // The sweep's delete, held open while acquirers queue on the row.
          const sweep = await admin.getConnection();
          await sweep.query("START TRANSACTION");
          await sweep.query("DELETE FROM locksmith_locks WHERE `key` = ?", [key]);
          const calls = Array.from({ length: 4 }, (_, i) => settle(store.acquire(key, `o${i}`, 5_000)));
          await sleep(150);
          await sweep.query("COMMIT");
          sweep.release();
          const results = await Promise.all(calls);
          const [[status]] = await admin.query("SHOW ENGINE INNODB STATUS");
          if (/LATEST DETECTED DEADLOCK/.test(status.Status)) deadlocks++;
          assert.deepEqual(
            results.map((r) => r.error?.code ?? typeof r.value),
            Array(4).fill("boolean"),
            `round ${round}: ${results.map((r) => r.error?.message ?? r.value)}`,
          );
          assert.equal(results.filter((r) => r.value === true).length, 1, "one of them took the key");
        }
      } finally {
        await store.close();
      }
      console.log(`# deadlocks the server reported: ${deadlocks} of 5 rounds`);
    });
  });

  describe("server outages", () => {
    it("a restart: calls fail with STORE_UNAVAILABLE while down, nothing crashes, and locks work afterwards", { timeout: 30_000 }, async () => {
      // Over the caller's pool (idle connections the server ends must not crash Node) and its own.
      const pool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
      const [store, other] = [new MySqlLockStore(pool, { operationTimeoutMs: 1_000 }), await MySqlLockStore.connect(server.url, { operationTimeoutMs: 1_000 })];
      try {
        const key = uniqueKey("restart");
        const holder = new Lock(key, 20_000, store);
        assert.equal(await holder.acquire(), true);
        // Several idle connections in each pool.
        await Promise.all(Array.from({ length: 3 }, (_, i) => other.isLocked(`${key}:${i}`)));
        const waiter = settle(new Lock(key, 5_000, other).acquire({ timeout: 2_500, retryDelay: 50 }));
        await sleep(100);
        await server.stop();
        await sleep(100); // the idle connections see their end
        const extend = await settle(holder.extend());
        assert.equal(extend.error?.code, "STORE_UNAVAILABLE");
        assert.ok(extend.ms < 2_000, `extend failed after ${extend.ms} ms`);
        const waited = await waiter;
        assert.equal(waited.error?.code, "STORE_UNAVAILABLE", `the waiter settled with ${waited.error ?? waited.value}`);
        assert.ok(waited.ms >= 2_300 && waited.ms < 4_500, `the waiter gave up after ${waited.ms} ms (it rides an outage out until its deadline)`);

        await server.start();
        // The row survived the restart: the hold did too.
        await eventually(() => holder.extend());
        assert.equal(await holder.isExpired(), false);
        const next = new Lock(key, 5_000, other);
        const got = settle(next.acquire({ timeout: 5_000, retryDelay: 20 }));
        await sleep(100);
        assert.equal(await holder.release(), true);
        const { value } = await got;
        assert.equal(value, true);
        assert.ok(next.fencingToken > holder.fencingToken, "tokens grow across the restart");
        await next.release();
      } finally {
        await store.close();
        await other.close();
        await pool.end();
      }
    });
  });
});
