// The history checker's bounded pass, continued (histories.test.mjs has the checker's own
// tests, memory, a late JS store and the Redis stores): the other stores —
// DurableObjectLockStore in workerd (direct, its objects restarted), FileLockStore (native: processes killed and stopped), PostgresLockStore
// (direct, commit latency, a stopped client process, a competing session, PostgreSQL
// restarted) and MySqlLockStore on MariaDB — each with a broken guard caught, and fair
// locks and semaphores on the SQL stores with a guard of their queue. Apart from
// histories.test.mjs so that the two run side by side.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ONLY_NATIVE, PAUSES, assertCaught, assertClean, assertPausesBit, assertWaitRidesOut, errorCounts, serversDuring } from "./assert.mjs";
import { COMMIT_LATENCY, FAIR_CLIENT, LONG_TTL, STALLS, cliLister, competingSession, kills, lockFile, objectRestarts, restarts } from "./run.mjs";
import { newSeed } from "./random.mjs";
import { requireMysql } from "../support/mysql-server.mjs";
import { requirePostgres } from "../support/postgres-server.mjs";
import { TARGET, sleep } from "../support/target.mjs";

// Skips the PostgreSQL runs without a server, except under CI=true, where that fails.
const POSTGRES = await requirePostgres();
// The same for MariaDB.
const MYSQL = await requireMysql();

/**
 * A SQL store's fair cases, on the store `spec()` names: fair locks and semaphores clean
 * (waiters queued), and the broken guard of waiters that keep no place, caught on each kind.
 */
function sqlFairCases(spec) {
  it("fair locks and semaphores: 2 processes × 6 clients", async (t) => {
    const run = await assertClean(t, { store: spec(), processes: 2, clients: 6, client: FAIR_CLIENT });
    const waited = run.holds.filter((h) => h.fair && h.acquire.reply - h.acquire.send > 10).length;
    t.diagnostic(`${waited} fair holds granted after waiting over 10 ms`);
    assert.ok(waited > 10, `fair waiters queued (${waited}); seed ${run.seed}`);
  });

  for (const kind of ["lock", "semaphore"]) {
    it(`catches a broken guard: fair ${kind} waiters that keep no place in the queue`, ONLY_NATIVE, async (t) => {
      await assertCaught(t, ["fair-order"], {
        store: { broken: "fair-keeps-no-place", store: spec() },
        processes: 2,
        clients: 6,
        client: { fair: true, kinds: { [kind]: 1 } },
      });
    });
  }
}

describe(`history checker: Durable Objects, the lock file, PostgreSQL, MariaDB (${TARGET})`, () => {
  // The Durable Object store in workerd (Miniflare): each client process drives the
  // worker's DurableObjectLockStore over one WebSocket (js-tests/support/workerd-remote-store.mjs),
  // so the locks run in the process under test and every request and reply is timed on
  // the host clock (a worker's own clock only moves between its I/O).
  describe("DurableObjectLockStore (workerd)", () => {
    let worker;
    serversDuring(["workerd"], (started) => {
      worker = started;
    });

    it("direct: 2 processes × 6 clients", async (t) => {
      await assertClean(t, { store: { durableObject: worker.url }, processes: 2, clients: 6 });
    });

    // An object restarted (ctx.abort()) comes back from its storage: the holds it
    // answered for are there, and calls in flight fail and are retried. Holds of 600 ms
    // live across restarts (with 120 ms ones the broken guard below is not caught).
    it("every key's object restarted every 700 ms, TTL 600 ms: 2 processes × 6 clients", async (t) => {
      const run = await assertClean(t, {
        store: { durableObject: worker.url },
        processes: 2,
        clients: 6,
        minHolds: 30,
        client: { ttlMs: 600 },
        fault: objectRestarts(worker.mf, { every: 700 }),
      });
      t.diagnostic(`${run.faults} restarts of each object; errors ${JSON.stringify(errorCounts(run))}`);
      assert.ok(run.faults >= 2, "the objects were restarted");
    });

    // Fair locks and semaphores: the object queues the waiters of both processes. (With its
    // first-in-line check removed, this row reported fair-order 5 and 2 in two 3 s runs;
    // run.mjs's durable-object-fair-restart row adds restarts.)
    it("fair locks and semaphores: 2 processes × 6 clients", async (t) => {
      const run = await assertClean(t, { store: { durableObject: worker.url }, processes: 2, clients: 6, client: FAIR_CLIENT });
      const waited = run.holds.filter((h) => h.fair && h.acquire.reply - h.acquire.send > 10).length;
      t.diagnostic(`${waited} fair holds granted after waiting over 10 ms`);
      assert.ok(waited > 10, `fair waiters queued (${waited}); seed ${run.seed}`);
    });

    // The guard: holds outlive a restart. An object that comes back without them
    // (its holds deleted from storage first) stands for one that forgot them.
    it("catches a broken guard under restarts: an object that comes back without its holds", ONLY_NATIVE, async (t) => {
      await assertCaught(t, ["overlap", "over-limit", "writer-with-others", "held-but-refused"], {
        store: { durableObject: worker.url },
        processes: 2,
        clients: 6,
        client: { ttlMs: 600 },
        fault: objectRestarts(worker.mf, { every: 700, route: "/forget" }),
      });
    });
  });

  // One lock file, eight processes: the OS file lock is the guard (the WebAssembly build
  // has no file store: its refusal is js-tests/stores/file.test.mjs's).
  describe("FileLockStore", ONLY_NATIVE, () => {
    it("8 processes × 3 clients on one lock file", async (t) => {
      await assertClean(t, { store: { file: await lockFile() }, processes: 8, clients: 3 });
    });

    // A process killed with SIGKILL mid-hold: its holds stay until their TTL, and nobody
    // else gets in before (a new process takes its place).
    it("8 processes × 3 clients, one killed with SIGKILL every 400 ms", async (t) => {
      const run = await assertClean(t, { store: { file: await lockFile() }, processes: 8, clients: 3, fault: kills({ every: 400 }) });
      const cut = run.holds.filter((h) => h.release === null && run.kills.some(([p, at]) => String(h.client).startsWith(`${p}.`) && h.endAt === at));
      t.diagnostic(`${run.kills.length} processes killed; ${cut.length} holds cut short by a kill`);
      assert.ok(run.kills.length >= 3, `processes were killed (seed ${run.seed})`);
      assert.ok(cut.length > 0, `some holds were live when their process was killed (seed ${run.seed})`);
    });

    // Fair locks and semaphores: the queue is in the file, so waiters of eight processes
    // are granted in the order they took their places; a killed waiter's place lapses a
    // TTL after its last attempt (fair-order leaves a waiter out from its death on).
    it("fair locks and semaphores: 8 processes × 3 clients, one killed with SIGKILL every 400 ms", async (t) => {
      const run = await assertClean(t, { store: { file: await lockFile() }, processes: 8, clients: 3, fault: kills({ every: 400 }), client: FAIR_CLIENT });
      const waited = run.holds.filter((h) => h.fair && h.acquire.reply - h.acquire.send > 10).length;
      t.diagnostic(`${run.kills.length} processes killed; ${waited} fair holds granted after waiting over 10 ms`);
      assert.ok(run.kills.length >= 3, `processes were killed (seed ${run.seed})`);
      assert.ok(waited > 10, `fair waiters queued (${waited}); seed ${run.seed}`);
    });

    it("catches a broken guard under kills: a process that frees every hold it finds when it opens, taking the holders for dead", async (t) => {
      await assertCaught(t, ["overlap", "over-limit", "writer-with-others"], {
        store: { file: await lockFile(), freeAtOpen: true },
        processes: 8,
        clients: 3,
        fault: kills({ every: 400 }),
      });
    });

    it("8 processes × 3 clients, one SIGSTOPped for 150–300 ms (TTL 120 ms) every 600 ms", async (t) => {
      const run = await assertClean(t, { store: { file: await lockFile() }, processes: 8, clients: 3, fault: PAUSES() });
      assertPausesBit(t, run);
    });
  });

  describe("PostgresLockStore", POSTGRES, () => {
    let server;
    serversDuring(["postgres"], (started) => {
      server = started;
    });

    it("direct: 2 processes × 6 clients", async (t) => {
      await assertClean(t, { store: { postgres: server.url }, processes: 2, clients: 6 });
    });

    it("commit latency (durable commits, commit_delay 10 ms), TTL 300 ms: 2 processes × 6 clients", async (t) => {
      await assertClean(t, { store: { postgres: server.url, options: COMMIT_LATENCY }, processes: 2, clients: 6, client: { ttlMs: 300 } });
    });

    it("a client process SIGSTOPped for 150–300 ms (TTL 120 ms) every 600 ms: 2 processes × 6 clients", async (t) => {
      const run = await assertClean(t, { store: { postgres: server.url }, processes: 2, clients: 6, fault: PAUSES() });
      assertPausesBit(t, run);
    });

    // Fair locks and semaphores: places and marks in the permits table, decided under the
    // key's advisory lock (js/stores/postgres-permits.cjs).
    sqlFairCases(() => ({ postgres: server.url }));

    // Another session holds a key's advisory lock (the store's calls on it wait past their
    // 1 s timeout, then run), the clients' event loops stall, waits run up to 3 s (a wait's
    // next attempt follows one given up on); then the holds left nobody owns.
    it("a competing session holding a key's advisory lock 100–1500 ms, client event loops stalled: 2 processes × 6 clients", async (t) => {
      const competing = await competingSession(server, "postgres", { every: 200, ms: [100, 1_500] });
      try {
        const run = await assertClean(t, {
          store: { postgres: server.url, operationTimeoutMs: 1_000 },
          processes: 2,
          clients: 6,
          minHolds: 30,
          client: { longTtl: LONG_TTL, stalls: STALLS, waitMs: [0, 3_000] },
          fault: competing.fault,
          orphans: cliLister(server.url),
        });
        assert.ok(run.faults >= 2, `the competing session held keys (seed ${run.seed})`);
      } finally {
        await competing.close();
      }
    });

    // Holds of 600 ms outlive the ~200 ms the server is away.
    it("PostgreSQL stopped and started again every 1.5 s, TTL 600 ms: 2 processes × 6 clients", async (t) => {
      const started = performance.now();
      const run = await assertClean(t, {
        store: { postgres: server.url, operationTimeoutMs: 1_000 },
        processes: 2,
        clients: 6,
        minHolds: 30,
        client: { ttlMs: 600 },
        fault: restarts(server, { every: 1_500, downMs: 0 }),
      });
      t.diagnostic(`${run.faults} restarts in ${Math.round(performance.now() - started)} ms; errors ${JSON.stringify(errorCounts(run))}`);
      assert.ok(run.faults >= 1, "the server was restarted");
    });

    // The guard: holds outlive a restart. Rows deleted as the server comes back stand for
    // a store that forgot them.
    it("catches a broken guard under restarts: a PostgreSQL that comes back without its holds", async (t) => {
      const pg = (await import("pg")).default;
      await assertCaught(t, ["overlap", "over-limit", "writer-with-others", "held-but-refused"], {
        store: { postgres: server.url, operationTimeoutMs: 1_000 },
        processes: 2,
        clients: 6,
        client: { ttlMs: 1_000 },
        fault: restarts(server, {
          every: 1_000,
          downMs: 0,
          afterStart: async () => {
            const client = new pg.Client({ connectionString: server.url });
            await client.connect();
            try {
              await client.query("DELETE FROM locksmith_locks; DELETE FROM locksmith_locks_permits");
            } finally {
              await client.end();
            }
          },
        }),
      });
    });

    // Found by the restart run: an acquire that failed while the server was down left a
    // cleanup (delete this owner's row) to run once it is back. A waiting Lock retries with
    // the same owner: when the retry got the key first, the late cleanup deleted the live
    // hold and a second holder got in.
    it("a cleanup after an acquire that failed does not free the same owner's later, granted acquire", async () => {
      const { PostgresLockStore } = await import("locksmith-js/postgres");
      const store = await PostgresLockStore.connect(server.url, { operationTimeoutMs: 500, listen: false });
      const key = `cleanup:${newSeed()}`;
      try {
        assert.equal(await store.isLocked(key), false);
        await server.stop();
        await assert.rejects(store.acquire(key, "owner-1", 10_000), (err) => err.code === "STORE_UNAVAILABLE");
        // Back between two of the cleanup's attempts (at 0, 100, 300, 700, 1500, 3100 ms).
        await sleep(1_600);
        await server.start();
        // The retry, as a waiting Lock makes it: the same owner.
        let granted = false;
        for (let i = 0; i < 50 && !granted; i++) granted = await store.acquire(key, "owner-1", 10_000).catch(() => false);
        assert.equal(granted, true);
        // The cleanup's retries (100 ms, doubling to 2 s) have run by now.
        await sleep(4_000);
        assert.equal(await store.isHeldBy(key, "owner-1"), true, "the granted hold is still there");
        assert.equal(await store.acquire(key, "owner-2", 10_000), false, "nobody else gets in");
      } finally {
        await store.close();
      }
    });

    it("a waiting acquire rides out a restart", async () => {
      const { PostgresLockStore } = await import("locksmith-js/postgres");
      const store = await PostgresLockStore.connect(server.url, { operationTimeoutMs: 1_000 });
      try {
        await assertWaitRidesOut(store, server, { downMs: 300 });
      } finally {
        await store.close();
      }
    });
  });

  describe("MySqlLockStore (MariaDB)", MYSQL, () => {
    let server;
    serversDuring(["mysql"], (started) => {
      server = started;
    });

    it("direct: 2 processes × 6 clients", async (t) => {
      await assertClean(t, { store: { mysql: server.url }, processes: 2, clients: 6 });
    });

    // Fair locks and semaphores: places and marks as PostgreSQL's, a fair lock's attempt
    // under its locks row's lock, a semaphore's under its key's row (mysql-permits.cjs).
    sqlFairCases(() => ({ mysql: server.url }));

    // The guard: holds outlive a restart (InnoDB keeps the committed rows). Rows deleted
    // as the server comes back stand for a store that forgot them.
    it("catches a broken guard under restarts: a MariaDB that comes back without its holds", ONLY_NATIVE, async (t) => {
      const mysql = (await import("mysql2/promise")).default;
      await assertCaught(t, ["overlap", "over-limit", "writer-with-others", "held-but-refused"], {
        store: { mysql: server.url, operationTimeoutMs: 1_000 },
        processes: 2,
        clients: 6,
        // Two restarts are enough to see the forgotten holds.
        seconds: 2,
        client: { ttlMs: 1_000 },
        fault: restarts(server, {
          every: 1_000,
          downMs: 0,
          afterStart: async () => {
            const connection = await mysql.createConnection(server.url);
            try {
              await connection.query("DELETE FROM locksmith_locks");
              await connection.query("DELETE FROM locksmith_locks_permits");
            } finally {
              await connection.end();
            }
          },
        }),
      });
    });
  });
});
