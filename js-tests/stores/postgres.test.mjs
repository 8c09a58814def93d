// PostgresLockStore beyond the conformance suite, on a real PostgreSQL server: options,
// the table it creates, cleanup, LISTEN/NOTIFY wake-ups, semaphores and read-write
// locks, `npx locksmith-js` on its table, a read-only server and a restart mid-use. The
// scenarios it shares with MySqlLockStore are in sql-stores.test.mjs.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import pg from "pg";

import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { requirePostgres, startPostgres } from "../support/postgres-server.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { invalidArgument } from "../support/errors.mjs";
import { closeLeavesPoolOpen, closedWaitFailsAtOnce, refusesBadTableAndTimeout, sixStoresOneHold, storeDuring } from "../support/sql-checks.mjs";
import { assertReadersShareWriterAlone, assertSemaphoreLimit } from "../conformance/rw-scenarios.mjs";
import { eventually, settle } from "../support/wait.mjs";

const { Lock, semaphore } = ls;

await failOnUnhandledRejections();

/** Resolves once the store's LISTEN connection is up (its application_name shows in pg_stat_activity). */
async function listening(admin, count = 1) {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const { rows } = await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'locksmith listen' AND (query LIKE 'LISTEN%' OR query = 'SELECT 1')",
    );
    if (rows[0].n >= count) return;
    assert.ok(Date.now() < deadline, "the LISTEN connection came up");
    await sleep(20);
  }
}

describe("PostgresLockStore", await requirePostgres(), () => {
  let server;
  let admin;
  before(async () => {
    server = await startPostgres();
    admin = new pg.Pool({ connectionString: server.url });
    admin.on("error", () => {});
  });
  after(async () => {
    await admin?.end();
    await server?.dispose();
  });

  describe("options", () => {
    it("runs the README's example", async () => {
      const before = ls.getLockStore();
      try {
        const store = await PostgresLockStore.connect(server.url);
        ls.setLockStore(store);
        const [ran, result] = await ls.lock(uniqueKey("readme")).run(async () => "charged");
        assert.deepEqual([ran, result], [true, "charged"]);
        await store.close();
        await assert.rejects(store.isLocked("k"), { name: "StoreClosedError", code: "STORE_CLOSED" });
      } finally {
        ls.setLockStore(before);
      }
    });

    it("is the subpath export locksmith-js/postgres, one class for import and require, and loads pg only to connect", async () => {
      const code = `
        const pgLoaded = () => Object.keys(require.cache).some((path) => path.includes("/node_modules/pg/"));
        (async () => {
          await import("locksmith-js");
          const afterMain = pgLoaded();
          const esm = await import("locksmith-js/postgres");
          const cjs = require("locksmith-js/postgres");
          const afterImport = pgLoaded();
          await esm.PostgresLockStore.connect("postgres://nobody@127.0.0.1:1/none", { operationTimeoutMs: 1000 }).catch(() => {});
          console.log(JSON.stringify({ same: esm.PostgresLockStore === cjs.PostgresLockStore, afterMain, afterImport, afterConnect: pgLoaded() }));
        })();`;
      const out = await new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ["-e", code], { cwd: new URL("../..", import.meta.url).pathname, stdio: ["ignore", "pipe", "inherit"] });
        let text = "";
        child.stdout.on("data", (d) => (text += d));
        child.once("exit", (status) => (status === 0 ? resolve(JSON.parse(text)) : reject(new Error(`exited ${status}`))));
      });
      assert.deepEqual(out, { same: true, afterMain: false, afterImport: false, afterConnect: true });
    });

    it("its LISTEN connection does not keep Node alive once the application ends its pool", { skip: TARGET !== "native" && "runs once" }, async () => {
      const code = `
        const pg = require("pg");
        const { PostgresLockStore } = require("locksmith-js/postgres");
        const { Lock } = require("locksmith-js");
        (async () => {
          const pool = new pg.Pool({ connectionString: ${JSON.stringify(server.url)} });
          const store = new PostgresLockStore(pool);
          const l = new Lock("exit-" + process.pid, 5000, store);
          await l.acquire();
          await l.release();
          await new Promise((r) => setTimeout(r, 200)); // LISTEN is up by now
          await pool.end();
          console.log("ended");
        })();`;
      const started = performance.now();
      const status = await new Promise((resolve) => {
        const child = spawn(process.execPath, ["-e", code], { cwd: new URL("../..", import.meta.url).pathname, stdio: ["ignore", "pipe", "inherit"] });
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
        child.once("exit", (code, signal) => {
          clearTimeout(timer);
          resolve(signal ?? code);
        });
      });
      assert.equal(status, 0, "the process exited by itself");
      assert.ok(performance.now() - started < 9_000);
    });

    it("refuses unknown and bad options with INVALID_ARGUMENT, before connecting", async () => {
      await assert.rejects(PostgresLockStore.connect(server.url, { tabel: "locks" }), invalidArgument(/unknown option `tabel`.*did you mean `table`/));
      await refusesBadTableAndTimeout((options) => PostgresLockStore.connect(server.url, options));
      await assert.rejects(PostgresLockStore.connect(server.url, { listen: "yes" }), invalidArgument(/listen must be a boolean/));
      await assert.rejects(PostgresLockStore.connect(server.url, null), invalidArgument(/options must be an object/));
      await assert.rejects(PostgresLockStore.connect(42), invalidArgument(/postgres:\/\/ URL/));
      assert.throws(() => new PostgresLockStore({}), invalidArgument(/takes a pg\.Pool/));
      assert.throws(() => new PostgresLockStore(admin, { createTables: false }), invalidArgument(/did you mean `createTable`/));
    });

    it("fails to connect to a server that is not there with STORE_UNAVAILABLE, in time", async () => {
      const { port } = server;
      const down = await settle(PostgresLockStore.connect(`postgres://locksmith@127.0.0.1:${port + 1}/postgres`, { operationTimeoutMs: 1_000 }));
      assert.equal(down.error?.code, "STORE_UNAVAILABLE");
      assert.match(down.error.message, /^locksmith: PostgreSQL: /);
      assert.ok(down.ms < 2_000, `failed after ${down.ms} ms`);
    });

    it("with createTable: false, refuses a missing table with STORE_ERROR and creates nothing", async () => {
      const store = new PostgresLockStore(admin, { table: "not_there", createTable: false });
      await assert.rejects(store.acquire("k", "o", 1_000), (err) => err.code === "STORE_ERROR" && /not_there.*does not exist/.test(err.message));
      const { rows } = await admin.query("SELECT to_regclass('not_there') AS t");
      assert.equal(rows[0].t, null);
      await store.close();
    });

    it("close() leaves the caller's pool open, and later calls fail with STORE_CLOSED", async () => {
      const store = new PostgresLockStore(admin);
      await closeLeavesPoolOpen(store, async () => (await admin.query("SELECT 1 AS one")).rows);
      await assert.rejects(new Lock("k", 1_000, store).acquire(), { code: "STORE_CLOSED" });
      // Closed is final: a wait does not ride it out.
      await closedWaitFailsAtOnce(store);
    });
  });

  describe("the table", () => {
    it("is created once by several stores starting at the same time, with the documented columns", async () => {
      const table = "created_together";
      const { stores, key, owner, token } = await sixStoresOneHold(() => PostgresLockStore.connect(server.url, { table, listen: false }));
      const { rows } = await admin.query(
        `SELECT key, owner, fencing_token, expires_at > clock_timestamp() + interval '59 seconds' AS later, expires_at <= clock_timestamp() + interval '60 seconds' AS bounded FROM ${table}`,
      );
      assert.deepEqual(rows, [{ key, owner, fencing_token: String(token), later: true, bounded: true }]);
      for (const store of stores) assert.equal(await store.isHeldBy(key, owner), true);
      await Promise.all(stores.map((s) => s.close()));
    });

    describe("made before semaphore holds had weights (no permits column)", () => {
      /** The tables as earlier versions created them, with a live semaphore holder of `key` (limit 3). */
      const oldTables = async (table, key) => {
        await admin.query(`CREATE SEQUENCE ${table}_fencing AS bigint MINVALUE 1`);
        await admin.query(`CREATE TABLE ${table} (key text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL, fencing_token bigint)`);
        await admin.query(
          `CREATE TABLE ${table}_permits (kind text NOT NULL, key text NOT NULL, owner text NOT NULL, role text NOT NULL,
             expires_at timestamptz NOT NULL, fencing_token bigint, semaphore_limit integer, PRIMARY KEY (kind, key, owner))`,
        );
        await admin.query(
          `INSERT INTO ${table}_permits VALUES ('semaphore', $1, 'old-holder', 'semaphore', clock_timestamp() + interval '1 minute', nextval('${table}_fencing'), 3)`,
          [key],
        );
      };
      const column = async (table) =>
        (
          await admin.query("SELECT data_type, is_nullable, column_default FROM information_schema.columns WHERE table_name = $1 AND column_name = 'permits'", [
            `${table}_permits`,
          ])
        ).rows;

      it("gets the column at connect, in place: its holders count 1 each, weighted holds work, and a later connect alters nothing", async () => {
        const table = "before_weights";
        const key = uniqueKey("old-sem");
        await oldTables(table, key);
        // Several processes upgrading at once: they add the column in turn.
        const stores = await Promise.all(Array.from({ length: 4 }, () => PostgresLockStore.connect(server.url, { table, listen: false })));
        assert.deepEqual(await column(table), [{ data_type: "integer", is_nullable: "NO", column_default: "1" }]);
        const [store] = stores;
        assert.equal(await store.countPermits(key, "semaphore"), 1, "the holder from before holds one");
        const s = semaphore(key, 3, 5_000, store);
        assert.equal(await s.acquire({ permits: 2 }), true, "1 + 2 fit in 3");
        assert.equal(await s.count(), 3);
        assert.equal(await semaphore(key, 3, 5_000, store).acquire(), false, "full");
        assert.deepEqual((await admin.query(`SELECT owner = 'old-holder' AS old, permits FROM ${table}_permits ORDER BY permits`)).rows, [
          { old: true, permits: 1 },
          { old: false, permits: 2 },
        ]);
        // Once the column is there, connecting takes no table lock: a reader holding the
        // permits table (which an ALTER TABLE would wait for) does not hold it up.
        const reader = await admin.connect();
        try {
          await reader.query(`BEGIN; SELECT 1 FROM ${table}_permits LIMIT 1`);
          const again = await settle(PostgresLockStore.connect(server.url, { table, listen: false, operationTimeoutMs: 1_500 }));
          assert.equal(again.error, undefined, String(again.error));
          assert.equal(await again.value.countPermits(key, "semaphore"), 3);
          await again.value.close();
        } finally {
          await reader.query("ROLLBACK");
          reader.release();
        }
        await s.release();
        await Promise.all(stores.map((x) => x.close()));
      });

      it("with createTable: false, is refused with STORE_ERROR naming the ALTER TABLE to run, and left as it is", async () => {
        const table = "before_weights_kept";
        await oldTables(table, uniqueKey("old-sem"));
        const store = new PostgresLockStore(admin, { table, createTable: false });
        await assert.rejects(
          store.countPermits("k", "semaphore"),
          (err) =>
            err.code === "STORE_ERROR" && err.message.includes(`ALTER TABLE "${table}_permits" ADD COLUMN IF NOT EXISTS permits integer NOT NULL DEFAULT 1`),
        );
        assert.deepEqual(await column(table), [], "no column added");
        await store.close();
      });
    });

    describe("made before elections kept a value (no value columns)", () => {
      /** The tables as the version before them created them, with a live lock of `key` held by `owner`. */
      const oldTables = async (table, key, owner) => {
        await admin.query(`CREATE SEQUENCE ${table}_fencing AS bigint MINVALUE 1`);
        await admin.query(`CREATE TABLE ${table} (key text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL, fencing_token bigint)`);
        await admin.query(`CREATE INDEX ${table}_expires_at ON ${table} (expires_at)`);
        await admin.query(
          `CREATE TABLE ${table}_permits (kind text NOT NULL, key text NOT NULL, owner text NOT NULL, role text NOT NULL,
             expires_at timestamptz NOT NULL, fencing_token bigint, semaphore_limit integer, permits integer NOT NULL DEFAULT 1,
             PRIMARY KEY (kind, key, owner))`,
        );
        await admin.query(`INSERT INTO ${table} VALUES ($1, $2, clock_timestamp() + interval '1 minute', nextval('${table}_fencing'))`, [key, owner]);
      };
      const valueColumns = async (table) =>
        (
          await admin.query(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = $1 AND column_name LIKE 'value%' ORDER BY column_name",
            [table],
          )
        ).rows;
      const ALTER = (table) =>
        `ALTER TABLE "${table}" ADD COLUMN IF NOT EXISTS value bytea, ADD COLUMN IF NOT EXISTS value_token bigint, ADD COLUMN IF NOT EXISTS value_seq bigint`;

      it("with createTable: false, locks work and holder() and proclaim() fail with STORE_ERROR naming the ALTER TABLE; with true, the columns are added", async () => {
        const table = "before_values";
        const key = uniqueKey("old-value");
        await oldTables(table, key, "old-holder");
        const kept = new PostgresLockStore(admin, { table, createTable: false });
        // Everything but holder() and proclaim() works on the table as it is.
        const l = new Lock(uniqueKey("old-lock"), 5_000, kept);
        assert.equal(await l.acquire(), true);
        assert.equal(typeof l.fencingToken, "number");
        await l.extend();
        assert.equal(await l.isExpired(), false);
        assert.equal(await kept.isHeldBy(key, "old-holder"), true);
        const s = semaphore(uniqueKey("old-sem"), 2, 5_000, kept);
        assert.equal(await s.acquire({ permits: 2 }), true);
        const missing = (err) => {
          assert.equal(err.code, "STORE_ERROR");
          assert.equal(err.name, "LockStoreError");
          assert.match(err.message, /^locksmith: PostgreSQL: the table "before_values" has no value, value_token, value_seq columns/);
          assert.ok(err.message.includes(ALTER(table)), err.message);
          return true;
        };
        await assert.rejects(kept.holder(key), missing);
        await assert.rejects(kept.proclaim(l.key, "anyone", "v", 1), missing);
        assert.deepEqual(await valueColumns(table), [], "no column added");
        await Promise.all([l.release(), s.release()]);

        // Connecting with createTable: true adds them, in place: the hold from before has no value yet.
        const upgraded = await Promise.all(Array.from({ length: 3 }, () => PostgresLockStore.connect(server.url, { table, listen: false })));
        assert.deepEqual(await valueColumns(table), [
          { column_name: "value", data_type: "bytea", is_nullable: "YES" },
          { column_name: "value_seq", data_type: "bigint", is_nullable: "YES" },
          { column_name: "value_token", data_type: "bigint", is_nullable: "YES" },
        ]);
        const [store] = upgraded;
        const before = await store.holder(key);
        assert.deepEqual([before.owner, before.value], ["old-holder", null]);
        assert.equal(await store.proclaim(key, "old-holder", "v1", 1), true);
        // The store made with createTable: false sees them too, without reconnecting.
        assert.equal((await kept.holder(key)).value, "v1");
        await kept.close();
        await Promise.all(upgraded.map((x) => x.close()));
      });

      it("a role that may not alter the table connects with createTable: true all the same: locks work, holder() says what to add", async () => {
        const table = "before_values_not_owned";
        const key = uniqueKey("old-value");
        await oldTables(table, key, "old-holder");
        await admin.query("DROP ROLE IF EXISTS locksmith_dml; CREATE ROLE locksmith_dml LOGIN");
        await admin.query(
          `GRANT SELECT, INSERT, UPDATE, DELETE ON ${table}, ${table}_permits TO locksmith_dml; GRANT USAGE ON SEQUENCE ${table}_fencing TO locksmith_dml`,
        );
        const url = new URL(server.url);
        url.username = "locksmith_dml";
        const store = await PostgresLockStore.connect(url.href, { table, listen: false });
        try {
          const l = new Lock(uniqueKey("old-lock"), 5_000, store);
          assert.equal(await l.acquire(), true);
          assert.equal(await l.release(), true);
          await assert.rejects(store.holder(key), (err) => err.code === "STORE_ERROR" && err.message.includes(ALTER(table)));
          assert.deepEqual(await valueColumns(table), []);
        } finally {
          await store.close();
          await admin.query(`DROP TABLE ${table}, ${table}_permits; DROP SEQUENCE ${table}_fencing; DROP ROLE locksmith_dml`);
        }
      });

      it("a transaction that has the table open holds the upgrade up 100 ms at most: connect and the running stores' calls go on, holder() says what to add", async () => {
        const table = "before_values_busy";
        const key = uniqueKey("old-value");
        await oldTables(table, key, "old-holder");
        // A store already running on the table, holding a lock (its calls must not wait behind the upgrade).
        const running = await PostgresLockStore.connect(server.url, { table, listen: false, createTable: false });
        const held = uniqueKey("busy-lock");
        assert.equal(await running.acquire(held, "running", 10_000), true);
        // A store over a pool of ours, whose statements are counted.
        const statements = [];
        const pool = new pg.Pool({ connectionString: server.url });
        pool.on("error", () => {});
        pool.on("connect", (client) => {
          const query = client.query.bind(client);
          client.query = (text, ...rest) => {
            if (typeof text === "string") statements.push(text);
            return query(text, ...rest);
          };
        });
        const mine = new PostgresLockStore(pool, { table, listen: false });
        const alters = () => statements.filter((s) => s.startsWith(`ALTER TABLE "${table}"`)).length;
        const reader = await admin.connect();
        let connected;
        try {
          // A transaction that has read the table keeps it open: ALTER TABLE waits for it,
          // and every statement on the table after the ALTER waits behind it.
          await reader.query(`BEGIN; SELECT 1 FROM ${table} LIMIT 1`);
          const connecting = settle(PostgresLockStore.connect(server.url, { table, listen: false }));
          // The running store's extend, as soon as the ALTER TABLE waits (if it is seen waiting at all).
          const deadline = performance.now() + 500;
          while (performance.now() < deadline) {
            const { rows } = await admin.query(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'ALTER TABLE%' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
            );
            if (rows[0].n > 0) break;
            await sleep(5);
          }
          const extended = await settle(running.extend(held, "running", 10_000));
          connected = await connecting;
          assert.equal(connected.error, undefined, String(connected.error?.stack));
          assert.ok(connected.ms < 1_500, `connect took ${Math.round(connected.ms)} ms`);
          assert.deepEqual([extended.value, extended.error], [true, undefined]);
          assert.ok(extended.ms < 1_000, `the running store's extend took ${Math.round(extended.ms)} ms`);
          const store = connected.value;
          // Locks work; holder() and proclaim() say what to add, and why it was not added.
          const l = new Lock(uniqueKey("busy-new"), 5_000, store);
          assert.equal(await l.acquire(), true);
          assert.equal(await l.release(), true);
          const missing = (err) => {
            assert.equal(err.code, "STORE_ERROR");
            assert.equal(err.name, "LockStoreError");
            assert.ok(err.message.includes(ALTER(table)), err.message);
            assert.match(err.message, /other transactions kept the table open longer than the 100ms it waits/);
            return true;
          };
          await assert.rejects(store.holder(key), missing);
          await assert.rejects(store.proclaim(key, "old-holder", "v", 1), missing);
          // A store over a pool of yours tries once, at its first call, not at every call.
          const first = await settle(mine.isLocked(held));
          assert.deepEqual([first.value, first.error], [true, undefined]);
          assert.ok(first.ms < 1_000, `the first call took ${Math.round(first.ms)} ms`);
          for (let i = 0; i < 3; i++) assert.equal(await mine.isHeldBy(held, "running"), true);
          await assert.rejects(mine.holder(key), missing);
          assert.equal(alters(), 1, "one ALTER TABLE, at the first call");
          assert.deepEqual(await valueColumns(table), []);
        } finally {
          await reader.query("ROLLBACK");
          reader.release();
        }
        // Once the transaction is over, a new store adds them; the others see them without reconnecting.
        const later = await PostgresLockStore.connect(server.url, { table, listen: false });
        assert.equal((await valueColumns(table)).length, 3);
        assert.equal(await later.proclaim(key, "old-holder", "v1", 1), true);
        assert.equal((await connected.value.holder(key)).value, "v1");
        assert.equal((await mine.holder(key)).value, "v1");
        assert.equal(alters(), 1, "the store over your pool did not try again");
        await Promise.all([later.close(), connected.value.close(), running.close(), mine.close()]);
        await pool.end();
      });
    });

    it("expiry is the server's clock, whatever this process's clock says", async () => {
      const store = new PostgresLockStore(admin);
      const key = uniqueKey("clock");
      // This process's wall clock an hour ahead: nothing of it may reach the expiry.
      const realNow = Date.now;
      const expiresIn60s = async (what) => {
        const { rows } = await admin.query(
          "SELECT expires_at - clock_timestamp() BETWEEN interval '59 seconds' AND interval '60 seconds' AS ok FROM locksmith_locks WHERE key = $1",
          [key],
        );
        assert.deepEqual(rows, [{ ok: true }], `${what}: expires 60 s from now on the server's clock`);
      };
      Date.now = () => realNow() + 3_600_000;
      try {
        assert.notEqual(await store.acquire(key, "a", 60_000), false);
        await expiresIn60s("acquired");
        assert.equal(await store.extend(key, "a", 30_000), true);
        assert.equal(await store.extend(key, "a", 60_000), true);
        await expiresIn60s("extended");
      } finally {
        Date.now = realNow;
      }
      const left = await store.remainingTime(key);
      assert.ok(left > 59_000 && left <= 60_000, `remaining ${left}`);
      // Move the expiry to one millisecond ago by the server's clock.
      await admin.query("UPDATE locksmith_locks SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE key = $1", [key]);
      assert.equal(await store.isLocked(key), false);
      assert.equal(await store.remainingTime(key), null);
      assert.equal(await store.extend(key, "a", 1_000), false, "an expired hold is not extended");
      assert.notEqual(await store.acquire(key, "b", 1_000), false, "an expired hold is taken over");
      await store.close();
    });

    it("gives a hold a larger fencing token than an earlier one, also when its acquire waited for a row lock", async () => {
      const store = await PostgresLockStore.connect(server.url, { listen: false });
      const key = uniqueKey("stale");
      // An expired hold's row (the store's sweep would delete it, so it is written here).
      await admin.query(
        "INSERT INTO locksmith_locks (key, owner, expires_at, fencing_token) VALUES ($1, 'w', clock_timestamp() - interval '1 second', nextval('locksmith_locks_fencing'))",
        [key],
      );
      const tx = await admin.connect();
      try {
        await tx.query("BEGIN");
        await tx.query("SELECT 1 FROM locksmith_locks WHERE key = $1 FOR UPDATE", [key]);
        const txPid = (await tx.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
        // The token-answering acquire locks use (js/api/symbols.mjs); acquire() answers a boolean.
        const taking = store[Symbol.for("locksmith.acquireToken")](key, "y", 5_000);
        // Wait until that acquire waits for the row lock (a session blocked by this one).
        for (let i = 0; ; i++) {
          const { rows } = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", [txPid]);
          if (rows[0].n > 0) break;
          assert.ok(i < 250, "the acquire waits for the row lock");
          await sleep(20);
        }
        // Meanwhile a hold by "x" comes and goes, with its token from the sequence.
        const { rows } = await tx.query(
          `UPDATE locksmith_locks SET owner = 'x', expires_at = clock_timestamp() - interval '1 millisecond',
             fencing_token = nextval('locksmith_locks_fencing') WHERE key = $1 RETURNING fencing_token`,
          [key],
        );
        await tx.query("COMMIT");
        const token = await taking;
        assert.ok(token > Number(rows[0].fencing_token), `the later hold's token ${token} is above the earlier hold's ${rows[0].fencing_token}`);
        assert.equal(await store.isHeldBy(key, "y"), true);
      } finally {
        tx.release();
        await store.close();
      }
    });

    it("cleans up expired rows, a bounded number at a time", async () => {
      const table = "swept";
      const store = await PostgresLockStore.connect(server.url, { table, listen: false });
      await admin.query(
        `INSERT INTO ${table} (key, owner, expires_at, fencing_token)
         SELECT 'old:' || i, 'o', clock_timestamp() - interval '1 second', i FROM generate_series(1, 700) AS i`,
      );
      await admin.query(
        `INSERT INTO ${table}_permits (kind, key, owner, role, expires_at, fencing_token)
         SELECT 'semaphore', 'old', 'o' || i, 'semaphore', clock_timestamp() - interval '1 second', i FROM generate_series(1, 10) AS i`,
      );
      const live = uniqueKey("live");
      assert.notEqual(await store.acquire(live, "o", 60_000), false);
      const count = async (t) => Number((await admin.query(`SELECT count(*) AS n FROM ${t}`)).rows[0].n);
      // The two tables are cleaned up one statement after the other: wait for both.
      const deadline = Date.now() + 3_000;
      while (((await count(table)) > 201 || (await count(`${table}_permits`)) > 0) && Date.now() < deadline) await sleep(20);
      assert.equal(await count(table), 201, "500 of the 700 expired rows went, the live one stayed");
      assert.equal(await count(`${table}_permits`), 0);
      assert.equal(await store.isHeldBy(live, "o"), true);
      await store.close();
    });
  });

  describe("wake-ups through LISTEN/NOTIFY", () => {
    let stores = [];
    after(async () => {
      await Promise.all(stores.map((s) => s.close()));
    });

    it("a waiter with a 5 s retryDelay gets the lock soon after another store releases it", async () => {
      const [a, b] = (stores = await Promise.all([PostgresLockStore.connect(server.url), PostgresLockStore.connect(server.url)]));
      await listening(admin, 2);
      const key = uniqueKey("wake");
      const holder = new Lock(key, 10_000, a);
      assert.equal(await holder.acquire(), true);
      const waiter = new Lock(key, 10_000, b);
      const waiting = waiter.acquire({ timeout: 10_000, retryDelay: 5_000 });
      await sleep(200);
      assert.equal(await holder.release(), true);
      const released = performance.now();
      assert.equal(await waiting, true);
      const ms = performance.now() - released;
      assert.ok(ms < 2_000, `the waiter got the lock ${ms.toFixed(0)} ms after the release, not at its next retry`);
      assert.ok(waiter.fencingToken > holder.fencingToken || holder.fencingToken === null);
      await waiter.release();
    });

    it("over the caller's pool too: its own LISTEN connection, with the pool's settings", async () => {
      const pool = new pg.Pool({ connectionString: server.url, max: 2 });
      pool.on("error", () => {});
      const store = new PostgresLockStore(pool);
      try {
        const key = uniqueKey("wake-pool");
        const holder = new Lock(key, 10_000, store);
        assert.equal(await holder.acquire(), true); // the first call also starts listening
        await listening(admin, 3);
        const waiting = new Lock(key, 10_000, store).acquire({ timeout: 10_000, retryDelay: 5_000 });
        await sleep(200);
        assert.equal(await holder.release(), true);
        const released = performance.now();
        assert.equal(await waiting, true);
        assert.ok(performance.now() - released < 2_000, "woken, not left to its 5 s retry");
        assert.equal(pool.totalCount <= 2, true, "the LISTEN connection is not one of the pool's");
      } finally {
        await store.close();
        await pool.end();
      }
    });

    it("wakes a semaphore waiter when a permit is released", async () => {
      const [a, b] = stores;
      const key = uniqueKey("wake-sem");
      const first = semaphore(key, 1, 10_000, a);
      assert.equal(await first.acquire(), true);
      const second = semaphore(key, 1, 10_000, b);
      const waiting = settle(second.acquire({ timeout: 10_000, retryDelay: 5_000 }));
      await sleep(200);
      assert.equal(await first.release(), true);
      const { value, ms } = await waiting;
      assert.equal(value, true);
      assert.ok(ms < 2_500, `the waiter got the permit after ${ms.toFixed(0)} ms`);
      await second.release();
    });
  });

  describe("npx locksmith-js", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
    it("lists the store's locks, and frees one with release --force, waking its waiter", async () => {
      const [a, b] = await Promise.all([PostgresLockStore.connect(server.url), PostgresLockStore.connect(server.url)]);
      try {
        await listening(admin, 2);
        const key = uniqueKey("cli");
        const holder = new Lock(key, 60_000, a);
        assert.equal(await holder.acquire(), true);
        const listed = await cli("list", server.url, key, "--json");
        assert.equal(listed.code, 0, listed.stderr);
        const [entry, ...more] = listed.stdout
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line));
        assert.deepEqual(more, []);
        const { owner } = JSON.parse(holder.serialize());
        assert.deepEqual(
          { ...entry, remainingMs: undefined },
          { key, kind: "lock", fencingToken: holder.fencingToken, owner: createHash("sha256").update(owner).digest("hex").slice(0, 8), remainingMs: undefined },
        );
        assert.ok(entry.remainingMs > 50_000 && entry.remainingMs <= 60_000, `remaining ${entry.remainingMs}`);

        const waiting = new Lock(key, 5_000, b).acquire({ timeout: 10_000, retryDelay: 5_000 });
        await sleep(200);
        const released = await cli("release", server.url, key, "--force");
        assert.equal(released.code, 0, released.stderr);
        assert.match(released.stdout, /^released /);
        const at = performance.now();
        assert.equal(await waiting, true);
        assert.ok(performance.now() - at < 2_000, "the waiter was woken, not left to its 5 s retry");
        assert.equal(await holder.isExpired(), true);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });
  });

  describe("semaphores and read-write locks", () => {
    let store;
    storeDuring(
      () => PostgresLockStore.connect(server.url),
      (opened) => {
        store = opened;
      },
    );

    it("a semaphore lets at most `limit` in at once, and everyone through in time", async () => {
      await assertSemaphoreLimit(ls, store, { holders: 9, retryDelay: 20 });
    });

    it("weighs holds by the 6th argument of acquirePermit (default 1), and wakes a weighted waiter when enough are free", async () => {
      assert.equal(store.permitWeights, true);
      const key = uniqueKey("sem-weights");
      assert.equal(await store.acquirePermit(key, "a", 5_000, "semaphore", 4, 3), true);
      assert.equal(await store.countPermits(key, "semaphore"), 3);
      assert.equal(await store.acquirePermit(key, "b", 5_000, "semaphore", 4, 2), false, "3 + 2 > 4");
      assert.equal(await store.acquirePermit(key, "b", 5_000, "semaphore", 4, undefined), true, "undefined: 1");
      assert.equal(await store.countPermits(key, "semaphore"), 4);
      for (const [kind, limit, permits] of [
        ["semaphore", 4, 5],
        ["semaphore", 4, 0],
        ["semaphore", 4, 1.5],
        ["semaphore", 4, "2"],
        ["read", undefined, 2],
      ]) {
        await assert.rejects(store.acquirePermit(uniqueKey("bad"), "c", 5_000, kind, limit, permits), invalidArgument(/permits/), `${kind} ${permits}`);
      }
      assert.equal(await store.extendPermit(key, "a", 8_000, "semaphore"), true);
      assert.equal(await store.countPermits(key, "semaphore"), 4, "an extend keeps the weight");
      // Woken by the release's NOTIFY, long before its 5 s retryDelay.
      const waiter = semaphore(key, 4, 5_000, store);
      const started = performance.now();
      const waiting = waiter.acquire({ permits: 3, timeout: 4_000, retryDelay: 5_000 });
      await sleep(100);
      assert.equal(await store.releasePermit(key, "a", "semaphore"), true);
      assert.equal(await waiting, true);
      assert.ok(performance.now() - started < 2_500, `the waiter took ${Math.round(performance.now() - started)} ms`);
      assert.equal(await store.countPermits(key, "semaphore"), 4, "b's 1 and the waiter's 3");
      assert.equal(await waiter.release(), true);
      assert.equal(await store.releasePermit(key, "b", "semaphore"), true);
      assert.equal(await store.countPermits(key, "semaphore"), 0);
      // An owner's expired row taken over by its next hold gets that hold's weight.
      assert.equal(await store.acquirePermit(key, "c", 50, "semaphore", 4, 1), true);
      await sleep(100);
      assert.equal(await store.acquirePermit(key, "c", 5_000, "semaphore", 4, 3), true);
      assert.equal(await store.countPermits(key, "semaphore"), 3);
      assert.equal(await store.releasePermit(key, "c", "semaphore"), true);
    });

    it("readers share, a writer is alone, and a waiting writer keeps new readers out", async () => {
      await assertReadersShareWriterAlone(ls, store, { pause: 100, woken: " (woken, not at its 5 s retry)" });
    });
  });

  describe("server outages", () => {
    it("a read-only server (a standby, or a primary being demoted): a wait rides it out as STORE_UNAVAILABLE", { timeout: 30_000 }, async () => {
      // The tables exist (another store made them); this one's sessions are read-only.
      await (await PostgresLockStore.connect(server.url)).close();
      const store = await PostgresLockStore.connect({ connectionString: server.url, options: "-c default_transaction_read_only=on" }, { createTable: false });
      try {
        const waited = await settle(new Lock(uniqueKey("read-only"), 5_000, store).acquire({ timeout: 600, retryDelay: 50 }));
        assert.equal(waited.error?.code, "STORE_UNAVAILABLE", `settled with ${waited.error ?? waited.value}`);
        assert.match(waited.error.message, /read-only transaction/);
        assert.ok(waited.ms >= 550, `the wait gave up after ${waited.ms} ms: it rides a read-only server out until its deadline`);
      } finally {
        await store.close();
      }
    });

    it("a restart: calls fail with STORE_UNAVAILABLE in time while down; afterwards the store and its wake-ups work again", { timeout: 30_000 }, async () => {
      const [store, other] = await Promise.all([
        PostgresLockStore.connect(server.url, { operationTimeoutMs: 1_000 }),
        PostgresLockStore.connect(server.url, { operationTimeoutMs: 1_000 }),
      ]);
      try {
        await listening(admin, 2);
        const key = uniqueKey("restart");
        const holder = new Lock(key, 20_000, store);
        assert.equal(await holder.acquire(), true);
        const waiter = settle(new Lock(key, 5_000, other).acquire({ timeout: 4_000, retryDelay: 50 }));
        await sleep(100);
        await server.stop();
        const extend = await settle(holder.extend());
        assert.equal(extend.error?.code, "STORE_UNAVAILABLE");
        assert.ok(extend.ms < 1_000 + 1_000, `extend failed after ${extend.ms} ms`);
        const waited = await waiter;
        assert.equal(waited.error?.code, "STORE_UNAVAILABLE", `the waiter settled with ${waited.error ?? waited.value}`);
        assert.ok(waited.ms >= 3_800 && waited.ms < 6_000, `the waiter gave up after ${waited.ms} ms (it rides an outage out until its deadline)`);
        const direct = await settle(store.isLocked(key));
        assert.equal(direct.error?.code, "STORE_UNAVAILABLE");
        assert.ok(direct.ms < 2_000);

        await server.start();
        // PostgreSQL kept the row: the hold survived the restart.
        await eventually(() => holder.extend());
        assert.equal(await holder.isExpired(), false);
        // The LISTEN connections came back: a waiter that only retries every 5 s is woken.
        await listening(admin, 2);
        const next = new Lock(key, 5_000, other);
        const woken = settle(next.acquire({ timeout: 10_000, retryDelay: 5_000 }));
        await sleep(200);
        assert.equal(await holder.release(), true);
        const { value, ms } = await woken;
        assert.equal(value, true);
        assert.ok(ms < 2_500, `woken after ${ms} ms`);
        await next.release();
      } finally {
        await store.close();
        await other.close();
      }
    });
  });
});

/** Runs `npx locksmith-js …` (js/cli/cli.mjs); resolves to { code, stdout, stderr } whatever its exit code. */
async function cli(...args) {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [new URL("../../js/cli/cli.mjs", import.meta.url).pathname, ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (typeof err.code !== "number") throw err;
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}
