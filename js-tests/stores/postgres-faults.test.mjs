// PostgresLockStore under faults a real PostgreSQL produces: commit latency (durable
// commits with commit_delay), backends terminated (pg_terminate_backend) and a server
// restart while calls are in flight, an acquire the client abandons while the server
// still works on it; and its configuration: the URL's scheme, a missing table with
// createTable: false, a process that never calls close().
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import pg from "pg";

import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { requirePostgres, startPostgres } from "../support/postgres-server.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { busy, eventually } from "../support/wait.mjs";

const { Lock } = ls;

await failOnUnhandledRejections();

const ROOT = new URL("../..", import.meta.url).pathname;
// PostgreSQL's maximum commit_delay (microseconds): each durable commit waits 100 ms.
const COMMIT_LATENCY = "-c synchronous_commit=on -c commit_delay=100000 -c commit_siblings=0";

/** Runs `code` in a child Node process in the repository; resolves `{ status, ms, stdout }`, killing it after `killAfterMs`. */
function child(code, killAfterMs, flags = []) {
  const started = performance.now();
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [...flags, "-e", code], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    p.stdout.on("data", (d) => (stdout += d));
    const timer = setTimeout(() => p.kill("SIGKILL"), killAfterMs);
    p.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ status: signal ?? code, ms: performance.now() - started, stdout });
    });
  });
}

describe("PostgresLockStore under faults", await requirePostgres(), () => {
  let server;
  let admin;
  before(async () => {
    // Durable commits, so that commit_delay can give commits latency.
    server = await startPostgres({ settings: { fsync: "on" } });
    admin = new pg.Pool({ connectionString: server.url });
    admin.on("error", () => {});
    // The default tables, made once up front.
    await (await PostgresLockStore.connect(server.url, { listen: false })).close();
  });
  after(async () => {
    await admin?.end();
    await server?.dispose();
  });

  describe("an extend that commits after the expiry it checked", () => {
    let holderStore;
    let otherStore;
    before(async () => {
      [holderStore, otherStore] = await Promise.all(
        [1, 2].map(() => PostgresLockStore.connect({ connectionString: server.url, options: COMMIT_LATENCY }, { listen: false })),
      );
    });
    after(async () => {
      await Promise.all([holderStore?.close(), otherStore?.close()]);
    });

    /**
     * `hold` takes the key; its expiry is then moved to 30 ms from now (server clock) and
     * it extends: the extend's check passes, its commit takes 100 ms. From 40 ms on
     * (past the old expiry, before that commit is done) `enter` tries to get in, again
     * and again, until well after the commit. Returns whether the extend answered true
     * and whether `enter` got in.
     */
    async function race({ hold, expireSoon, extend, enter }) {
      assert.ok(await hold(), "the first holder got in");
      await expireSoon();
      const extending = extend();
      await sleep(40);
      const entered = [];
      const until = performance.now() + 400;
      while (performance.now() < until) {
        if (await enter()) entered.push(performance.now());
      }
      return { extended: await extending, entered: entered.length > 0 };
    }

    /**
     * `race` on a fresh key (`makeRace(key)` gives its steps) until the extend's check
     * came before the expiry (it answered true), at most three times: on a loaded
     * machine the extend can reach the server after the 30 ms, and then the race did not
     * happen. No try may have two holders; the last must have the extend keep the hold.
     */
    async function raceChecked(name, makeRace) {
      let result;
      for (let round = 0; round < 3; round++) {
        result = await race(makeRace(uniqueKey(`${name}-${round}`)));
        assert.ok(!(result.extended && result.entered), `two holders: the extend answered true and the other one got in (${JSON.stringify(result)})`);
        if (result.extended) break;
      }
      return result;
    }

    const permitsTable = "locksmith_locks_permits";
    const permitCase = (holderKind, enterKind, limit) => async () => {
      const ttl = 5_000;
      const result = await raceChecked(`race-${holderKind}-${enterKind}`, (key) => ({
        hold: () => holderStore.acquirePermit(key, "holder", ttl, holderKind, limit),
        expireSoon: () =>
          admin.query(`UPDATE ${permitsTable} SET expires_at = clock_timestamp() + interval '30 milliseconds' WHERE key = $1 AND owner = 'holder'`, [key]),
        extend: () => holderStore.extendPermit(key, "holder", ttl, holderKind),
        enter: () => otherStore.acquirePermit(key, "other", ttl, enterKind, limit),
      }));
      assert.deepEqual(result, { extended: true, entered: false }, "the extend, checked before the expiry, keeps the hold");
    };

    it("a semaphore of limit 1 admits nobody else", { skip: TARGET !== "native" && "runs once" }, permitCase("semaphore", "semaphore", 1));
    it("a semaphore of limit 1 admits nobody else (again)", { skip: TARGET !== "native" && "runs once" }, permitCase("semaphore", "semaphore", 1));
    it("a reader's extend keeps a writer out", { skip: TARGET !== "native" && "runs once" }, permitCase("read", "write"));
    it("a writer's extend keeps a reader out", { skip: TARGET !== "native" && "runs once" }, permitCase("write", "read"));

    it("a plain lock's extend keeps the next acquirer out", { skip: TARGET !== "native" && "runs once" }, async () => {
      const ttl = 5_000;
      const result = await raceChecked("race-lock", (key) => ({
        hold: () => holderStore.acquire(key, "holder", ttl),
        expireSoon: () =>
          admin.query("UPDATE locksmith_locks SET expires_at = clock_timestamp() + interval '30 milliseconds' WHERE key = $1 AND owner = 'holder'", [key]),
        extend: () => holderStore.extend(key, "holder", ttl),
        enter: () => otherStore.acquire(key, "other", ttl),
      }));
      assert.deepEqual(result, { extended: true, entered: false });
    });
  });

  describe("connections the server ends", () => {
    it("a backend terminated right after it answered a checked-out connection: that call settles, the process lives, the next call works", async () => {
      const store = await PostgresLockStore.connect({ connectionString: server.url, application_name: "locksmith-terminated" }, { listen: false });
      const terminator = new pg.Client({ connectionString: server.url });
      await terminator.connect();
      try {
        const key = uniqueKey("terminated");
        for (let round = 0; round < 3; round++) {
          assert.equal(await store.isLocked(key), false, "warm: a pooled connection is idle");
          // The server terminates the store's backend 100 ms from now, after it answered.
          const terminating = terminator.query(
            "SELECT pg_sleep(0.1), pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locksmith-terminated'",
          );
          const calls = [store.acquire(key, `o${round}`, 10_000), store.isLocked(key)].map((p) =>
            p.then(
              (value) => ({ value }),
              (error) => ({ error }),
            ),
          );
          // Once the calls' queries are out, this process is busy: the answer and the
          // FATAL arrive together, while the connection is still checked out.
          await new Promise((resolve) => setImmediate(resolve));
          busy(400);
          const settled = await Promise.all(calls);
          for (const s of settled) {
            if (s.error) assert.equal(s.error.code, "STORE_UNAVAILABLE", String(s.error));
          }
          await terminating;
          await eventually(() => store.release(key, `o${round}`), 10_000);
        }
        const lock = new Lock(key, 10_000, store);
        assert.equal(await eventually(() => lock.acquire(), 10_000), true);
        assert.equal(await lock.release(), true);
      } finally {
        await terminator.end();
        await store.close();
      }
    });

    it("pg_terminate_backend on the store's backends while calls are in flight: calls fail typed or succeed, and work afterwards", {
      timeout: 30_000,
    }, async () => {
      const store = await PostgresLockStore.connect({ connectionString: server.url, application_name: "locksmith-killed" }, { operationTimeoutMs: 2_000 });
      try {
        let stop = false;
        const errors = new Set();
        const worker = async (i) => {
          let n = 0;
          while (!stop) {
            const key = uniqueKey(`killed-${i}`);
            try {
              const lock = new Lock(key, 5_000, store);
              if (await lock.acquire()) {
                await lock.extend().catch((err) => errors.add(err.code));
                await lock.release();
              }
              n++;
            } catch (err) {
              errors.add(err.code);
            }
            if (n % 5 === 0) busy(5);
          }
        };
        const workers = Array.from({ length: 8 }, (_, i) => worker(i));
        const until = Date.now() + 2_000;
        while (Date.now() < until) {
          await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locksmith-killed' AND pid <> pg_backend_pid()");
          busy(20);
          await sleep(5);
        }
        stop = true;
        await Promise.all(workers);
        assert.deepEqual(
          [...errors].filter((code) => code !== "STORE_UNAVAILABLE" && code !== "LOCK_NOT_HELD"),
          [],
          "only typed failures",
        );
        const lock = new Lock(uniqueKey("after-kill"), 5_000, store);
        assert.equal(await eventually(() => lock.acquire(), 10_000), true);
        assert.equal(await lock.release(), true);
      } finally {
        await store.close();
      }
    });

    it("a restart while calls are in flight: the process lives, and the store works once the server is back", { timeout: 60_000 }, async () => {
      const store = await PostgresLockStore.connect({ connectionString: server.url, application_name: "locksmith-restarted" }, { operationTimeoutMs: 1_000 });
      try {
        let stop = false;
        const errors = new Set();
        const worker = async (i) => {
          while (!stop) {
            try {
              const lock = new Lock(uniqueKey(`restart-${i}`), 5_000, store);
              if (await lock.acquire()) await lock.release();
            } catch (err) {
              errors.add(err.code);
              await sleep(20);
            }
          }
        };
        const workers = Array.from({ length: 8 }, (_, i) => worker(i));
        await sleep(200);
        try {
          const stopping = server.stop();
          // Busy while the server sends its FATALs: they arrive with the last answers.
          busy(300);
          await stopping;
          await sleep(300);
        } finally {
          await server.start();
        }
        const lock = new Lock(uniqueKey("after-restart"), 5_000, store);
        assert.equal(await eventually(() => lock.acquire(), 10_000), true);
        assert.equal(await lock.release(), true);
        stop = true;
        await Promise.all(workers);
        assert.deepEqual(
          [...errors].filter((code) => code !== "STORE_UNAVAILABLE"),
          [],
          "only STORE_UNAVAILABLE while down",
        );
      } finally {
        await store.close();
      }
    });
  });

  describe("an acquire the client gave up on", () => {
    it("does not take the key later on the server: no hold that nobody owns", { timeout: 20_000 }, async () => {
      const store = await PostgresLockStore.connect(
        { connectionString: server.url, application_name: "locksmith-abandoned" },
        { operationTimeoutMs: 1_000, listen: false },
      );
      const key = uniqueKey("abandoned");
      // An expired hold's row, locked by another transaction: the acquire waits for it.
      await admin.query("INSERT INTO locksmith_locks (key, owner, expires_at, fencing_token) VALUES ($1, 'gone', clock_timestamp() - interval '1 second', 1)", [
        key,
      ]);
      const tx = await admin.connect();
      try {
        await tx.query("BEGIN");
        await tx.query("SELECT 1 FROM locksmith_locks WHERE key = $1 FOR UPDATE", [key]);
        const started = performance.now();
        const attempt = await new Lock(key, 10_000, store).acquire().then(
          (value) => ({ value }),
          (error) => ({ error }),
        );
        const ms = performance.now() - started;
        assert.equal(attempt.error?.code, "STORE_UNAVAILABLE", `the acquire settled with ${attempt.error ?? attempt.value}`);
        assert.ok(ms < 2_500, `it gave up after ${ms.toFixed(0)} ms`);
        await tx.query("COMMIT");
      } finally {
        tx.release();
      }
      // Whatever the store's backends were still doing is over.
      for (let i = 0; ; i++) {
        const { rows } = await admin.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'locksmith-abandoned' AND state <> 'idle'",
        );
        if (rows[0].n === 0) break;
        assert.ok(i < 200, "the store's backends settle");
        await sleep(20);
      }
      await sleep(100);
      const { rows } = await admin.query("SELECT owner, expires_at > clock_timestamp() AS live FROM locksmith_locks WHERE key = $1", [key]);
      assert.deepEqual(
        rows.filter((r) => r.live),
        [],
        `nobody holds the key; rows ${JSON.stringify(rows)}`,
      );
      assert.equal(await store.isLocked(key), false);
      await store.close();
    });

    it("while its COMMIT waits (a synchronous standby that does not answer): the hold it commits later is freed, not left to its TTL", {
      timeout: 30_000,
    }, async () => {
      // The store's sessions commit synchronously; with a standby named that never
      // connects, their commits wait, holding their locks, until the setting goes.
      const store = await PostgresLockStore.connect(
        { connectionString: server.url, options: "-c synchronous_commit=on" },
        { operationTimeoutMs: 500, listen: false },
      );
      const standby = async (name) => {
        await admin.query(name ? `ALTER SYSTEM SET synchronous_standby_names = '${name}'` : "ALTER SYSTEM RESET synchronous_standby_names");
        await admin.query("SELECT pg_reload_conf()");
        for (let i = 0; ; i++) {
          const { rows } = await admin.query("SHOW synchronous_standby_names");
          if (rows[0].synchronous_standby_names === name) return;
          assert.ok(i < 100, "the setting took effect");
          await sleep(20);
        }
      };
      try {
        for (const [what, handle] of [
          ["a lock", (key) => new Lock(key, 30_000, store)],
          ["a semaphore permit", (key) => ls.semaphore(key, 1, 30_000, store)],
        ]) {
          const key = uniqueKey("commit-waits");
          const held = handle(key);
          await standby("nobody");
          let attempt;
          try {
            attempt = await held.acquire().then(
              (value) => ({ value }),
              (error) => ({ error }),
            );
          } finally {
            // The waiting COMMIT completes: the hold becomes visible, owned by nobody.
            await standby("");
          }
          if (attempt.value === true) {
            // When the server's statement timeout (just under operationTimeoutMs) cancels
            // the COMMIT's wait for the standby before the client gives up, PostgreSQL
            // answers the COMMIT as done ("committed locally"): the hold is the handle's.
            assert.equal(await held.release(), true, `${what}: the committed hold is the handle's`);
            continue;
          }
          assert.equal(attempt.error?.code, "STORE_UNAVAILABLE", `${what}: the acquire settled with ${attempt.error ?? attempt.value}`);
          const live = async () => {
            const { rows } = await admin.query(
              `SELECT (SELECT count(*)::int FROM locksmith_locks WHERE key = $1 AND expires_at > clock_timestamp())
                    + (SELECT count(*)::int FROM locksmith_locks_permits WHERE key = $1 AND expires_at > clock_timestamp()) AS n`,
              [key],
            );
            return rows[0].n;
          };
          const deadline = Date.now() + 6_000;
          while ((await live()) > 0) {
            assert.ok(Date.now() < deadline, `${what}: a hold nobody owns is still there after 6 s (its TTL is 30 s)`);
            await sleep(50);
          }
        }
      } finally {
        await standby("").catch(() => {});
        await store.close();
      }
    });

    it("is cancelled by the server before operationTimeoutMs, over the store's pool and over the caller's", {
      skip: TARGET !== "native" && "runs once",
    }, async () => {
      const store = await PostgresLockStore.connect(server.url, { operationTimeoutMs: 1_500, listen: false });
      try {
        const pool = new pg.Pool({ connectionString: server.url });
        pool.on("error", () => {});
        const mine = new PostgresLockStore(pool, { operationTimeoutMs: 1_500, listen: false });
        const key = uniqueKey("timeout");
        // An acquire waiting for a row lock is cancelled by the server, not left running.
        await admin.query("INSERT INTO locksmith_locks (key, owner, expires_at) VALUES ($1, 'gone', clock_timestamp() - interval '1 second')", [key]);
        const tx = await admin.connect();
        try {
          await tx.query("BEGIN");
          await tx.query("SELECT 1 FROM locksmith_locks WHERE key = $1 FOR UPDATE", [key]);
          for (const s of [store, mine]) {
            const started = performance.now();
            const out = await s.acquire(key, "late", 10_000).then(
              (value) => ({ value }),
              (error) => ({ error }),
            );
            const ms = performance.now() - started;
            assert.equal(out.error?.code, "STORE_UNAVAILABLE");
            assert.match(out.error.message, /statement timeout/, "the server cancelled it");
            assert.ok(ms < 1_500, `cancelled after ${ms.toFixed(0)} ms`);
          }
          await tx.query("COMMIT");
        } finally {
          tx.release();
          await mine.close();
          await pool.end();
        }
      } finally {
        await store.close();
      }
    });
  });

  describe("configuration", () => {
    it("rejects a URL that is not postgres:// or postgresql:// at connect(), with INVALID_ARGUMENT", async () => {
      for (const url of ["mysql://root@127.0.0.1:3306/db", "redis://127.0.0.1:6379", "http://example.com", "127.0.0.1:5432"]) {
        for (const arg of [url, { connectionString: url }]) {
          const started = performance.now();
          await assert.rejects(PostgresLockStore.connect(arg, { operationTimeoutMs: 5_000 }), (err) => {
            assert.equal(err.code, "INVALID_ARGUMENT", String(err));
            assert.equal(err.name, "InvalidArgumentError");
            assert.match(err.message, /^locksmith: /);
            assert.match(err.message, /postgres:\/\//);
            assert.match(err.message, /postgresql:\/\//);
            return true;
          });
          assert.ok(performance.now() - started < 1_000, "at once, without connecting");
        }
      }
      const store = await PostgresLockStore.connect(server.url.replace(/^postgres:/, "postgresql:"), { listen: false });
      assert.equal(await store.isLocked("k"), false);
      await store.close();
    });

    it("with createTable: false and no table, connect() fails with a typed error that says how to create it", async () => {
      const started = performance.now();
      await assert.rejects(PostgresLockStore.connect(server.url, { table: "never_made", createTable: false }), (err) => {
        assert.equal(err.code, "STORE_ERROR", String(err));
        assert.equal(err.name, "LockStoreError");
        assert.match(err.message, /^locksmith: /);
        assert.match(err.message, /never_made/);
        assert.match(err.message, /does not exist/);
        assert.match(err.message, /createTable: true/, "it says how to create it");
        return true;
      });
      assert.ok(performance.now() - started < 2_000);
      const { rows } = await admin.query("SELECT to_regclass('never_made') AS t");
      assert.equal(rows[0].t, null, "nothing was created");
    });
  });

  describe("a process that never calls close()", () => {
    it("exits by itself soon after its last call: the store's pool does not keep Node alive", { skip: TARGET !== "native" && "runs once" }, async () => {
      const code = `
        const { PostgresLockStore } = require("locksmith-js/postgres");
        const { Lock } = require("locksmith-js");
        (async () => {
          const store = await PostgresLockStore.connect(${JSON.stringify(server.url)});
          const l = new Lock("no-close-" + process.pid, 5000, store);
          if (!(await l.acquire())) throw new Error("not acquired");
          await l.release();
          console.log("done");
        })();`;
      const { status, ms, stdout } = await child(code, 15_000);
      assert.equal(stdout.trim(), "done");
      assert.equal(status, 0, "the process exited by itself");
      assert.ok(ms < 5_000, `it exited after ${ms.toFixed(0)} ms (the pool's idle timer is 10 s)`);
    });

    it("and `await store.close()` at the end of a module still finishes (the closing sockets do not keep Node alive, close() does)", {
      skip: TARGET !== "native" && "runs once",
    }, async () => {
      const code = `
        import { PostgresLockStore } from "locksmith-js/postgres";
        import { Lock } from "locksmith-js";
        const store = await PostgresLockStore.connect(${JSON.stringify(server.url)});
        const l = new Lock("closing-" + process.pid, 5000, store);
        if (!(await l.acquire())) throw new Error("not acquired");
        await l.release();
        await store.close();
        console.log("closed");`;
      const runs = await Promise.all(Array.from({ length: 4 }, () => child(code, 15_000, ["--input-type=module"])));
      for (const { status, stdout } of runs) {
        assert.deepEqual({ status, stdout: stdout.trim() }, { status: 0, stdout: "closed" }, "close() settled (exit code 13: an unsettled top-level await)");
      }
    });
  });
});
