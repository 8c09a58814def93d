// PostgresLockStore and MySqlLockStore (on MariaDB): the scenarios the two SQL stores share
// beyond the conformance suite and the primitives' scenarios, run against each on a real
// server: semaphore and read-write holds (a limit that differs, expiry, a writer that gives
// up, growing tokens), mutual exclusion across processes, a frozen server, and outcomes
// that come late. What only one of them does is in postgres.test.mjs and mysql.test.mjs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";

import { assertNoOverlap } from "../support/load.mjs";
import { storeDuring } from "../support/sql-checks.mjs";
import { SQL_STORES } from "../support/sql-stores.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { invalidArgument } from "../support/errors.mjs";
import { busy, eventually, settle } from "../support/wait.mjs";

const { Lock, semaphore, readWriteLock } = ls;

await failOnUnhandledRejections();

for (const sql of SQL_STORES) {
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

    // Fairness belongs to the key (docs/stores.md, acquireFair): while fair handles hold
    // it or wait for it, a handle that is not fair is refused, and a fair one while other
    // handles hold it; each refusal names the key, on every path a plain handle takes
    // (acquire, lockAll, acquirePermit), and leaves nothing behind.
    describe("fair locks and semaphores: fairness belongs to the key", () => {
      let a;
      let b;
      storeDuring(
        () => sql.connect(server.url),
        (opened) => {
          a = opened;
        },
      );
      storeDuring(
        () => sql.connect(server.url),
        (opened) => {
          b = opened;
        },
      );
      const refused = (text) => (err) => err.code === "INVALID_ARGUMENT" && err instanceof ls.InvalidArgumentError && err.message === text;
      const notFair = (kind, key) =>
        refused(
          `locksmith: ${kind} ${JSON.stringify(key)} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on \`fair\``,
        );
      const unfairHeld = (kind, key) =>
        refused(
          `locksmith: ${kind} ${JSON.stringify(key)} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on \`fair\``,
        );
      const fairRows = async (set, key) => (await admin.query(sql.fairRows, [set, key])).map((r) => `${r.owner}:${r.role}`);

      it("a lock: refused both ways while fair handles hold or queue, by acquire and lockAll too; free of them, either may take it", async () => {
        const key = uniqueKey("fair-mix");
        const fair = (store, owner, waits = true) => store.acquireFair(key, owner, 10_000, "lock", undefined, 1, waits);
        assert.equal(typeof (await fair(a, "holder")), "number");
        await assert.rejects(b.acquire(key, "plain", 10_000), notFair("lock", key), "held by a fair handle");
        await assert.rejects(new Lock(key, 10_000, b).acquire({ timeout: 300 }), notFair("lock", key), "a lock passes it on");
        await assert.rejects(ls.lockAll([uniqueKey("fair-mix-other"), key], 10_000, b).acquire(), notFair("lock", key), "lockAll");
        assert.equal(await fair(a, "waiter"), false);
        assert.deepEqual(await fairRows("lock", key), ["holder:mark", "waiter:place"]);
        assert.equal(await a.releaseFair(key, "holder"), true);
        assert.equal(await fair(b, "newcomer", false), false, "free, but waiter is first in line");
        await assert.rejects(b.acquire(key, "plain", 10_000), notFair("lock", key), "free, but a fair waiter queues for it");
        assert.equal(typeof (await fair(a, "waiter")), "number");
        assert.equal(await a.releaseFair(key, "waiter"), true);
        assert.deepEqual(await fairRows("lock", key), [], "released: no mark, no place");
        assert.equal(await b.acquire(key, "plain", 10_000), true, "nobody fair holds or waits: a handle that is not fair may take it");
        await assert.rejects(fair(a, "fair"), unfairHeld("lock", key));
        await assert.rejects(ls.lock(key, 10_000, a, { fair: true }).acquire({ timeout: 300 }), unfairHeld("lock", key));
        assert.deepEqual(await fairRows("lock", key), [], "the refused fair attempts left no place");
        assert.equal(await b.release(key, "plain"), true);
      });

      it("a fair lock's extend sets its mark's expiry to the hold's: longer, the key stays fair; shorter, it is free of fairness once the hold ends", async () => {
        const key = uniqueKey("fair-extend");
        assert.equal(typeof (await a.acquireFair(key, "holder", 300, "lock", undefined, 1, true)), "number");
        assert.equal(await a.extendFair(key, "holder", 5_000), true);
        await sleep(500);
        await assert.rejects(b.acquire(key, "plain", 10_000), notFair("lock", key), "held past its first TTL, and fair");
        assert.equal(await a.extendFair(key, "holder", 200), true, "shortened");
        await sleep(400);
        assert.equal(await b.acquire(key, "plain", 10_000), true, "the hold ran out, and its mark with it");
        assert.equal(await b.release(key, "plain"), true);
      });

      it("a plain acquire refused on a key a waiter queues for takes nothing, even where the fair hold had run out", async () => {
        const key = uniqueKey("fair-expired");
        assert.equal(typeof (await a.acquireFair(key, "holder", 200, "lock", undefined, 1, true)), "number");
        assert.equal(await a.acquireFair(key, "waiter", 10_000, "lock", undefined, 1, true), false);
        await sleep(400);
        await assert.rejects(b.acquire(key, "plain", 10_000), notFair("lock", key), "the hold ran out, but a fair waiter queues");
        assert.equal(await b.isLocked(key), false, "the refused acquire holds nothing");
        assert.equal(typeof (await a.acquireFair(key, "waiter", 10_000, "lock", undefined, 1, true)), "number", "the waiter is granted");
        assert.equal(await a.releaseFair(key, "waiter"), true);
      });

      it("a semaphore: refused both ways, a fair handle's limit must be the holders', and a smaller later request waits its turn", async () => {
        const key = uniqueKey("fair-mix-sem");
        const sem = (store, owner, waits = true, limit = 2, permits = 1) => store.acquireFair(key, owner, 10_000, "semaphore", limit, permits, waits);
        assert.equal(typeof (await sem(a, "s1")), "number");
        await assert.rejects(b.acquirePermit(key, "plain", 10_000, "semaphore", 2), notFair("semaphore", key), "held by a fair handle");
        assert.equal(await b.countPermits(key, "semaphore"), 1, "the refused handle took nothing");
        await assert.rejects(sem(b, "other-limit", true, 3), invalidArgument(/held with limit 2; this handle asks for 3/));
        assert.equal(await sem(b, "big", true, 2, 2), false, "two permits asked, one free: it waits");
        assert.equal(await sem(b, "small", false), false, "one permit is free, but a larger request is first in line");
        assert.deepEqual(await fairRows("semaphore", key), ["s1:fair", "big:place"]);
        await assert.rejects(b.acquirePermit(key, "plain", 10_000, "semaphore", 2), notFair("semaphore", key), "fair waiters queue for it");
        assert.equal(await a.releasePermit(key, "s1", "semaphore"), true);
        assert.equal(typeof (await sem(b, "big", true, 2, 2)), "number");
        assert.equal(await b.releasePermit(key, "big", "semaphore"), true);
        assert.equal(await b.acquirePermit(key, "plain", 10_000, "semaphore", 2), true, "nobody fair holds or waits");
        await assert.rejects(sem(a, "fair"), unfairHeld("semaphore", key));
        assert.deepEqual(await fairRows("semaphore", key), [], "the refused fair attempt left no place");
        assert.equal(await b.releasePermit(key, "plain", "semaphore"), true);
      });
    });

    describe("semaphores and read-write locks", () => {
      let store;
      storeDuring(
        () => sql.connect(server.url),
        (opened) => {
          store = opened;
        },
      );

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
        // loaded machine attempts 200 ms apart let it lapse, and then the writer went first;
        // with a 1 s TTL, attempts slowed by the full suite's load (a MySQL deadlock's
        // retries) still did. Its own handle has 3 s.
        const crashed = readWriteLock(expiring, 1_000, store);
        assert.equal(await crashed.writeLock().acquire(), true);
        const waiting = readWriteLock(expiring, 3_000, store).readLock();
        const entered = waiting.acquire({ timeout: 6_000, retryDelay: 20 });
        await sleep(50);
        const writer = readWriteLock(expiring, 5_000, store).writeLock();
        const writerIn = writer.acquire({ timeout: 8_000, retryDelay: 20 });
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

    describe("holder() and proclaim()", () => {
      let store;
      storeDuring(
        () => sql.connect(server.url),
        (opened) => {
          store = opened;
        },
      );

      it("a value goes with its hold: the same owner's next hold starts without one, and an earlier hold's seq does not hold it back", async () => {
        const key = uniqueKey("value-same-owner");
        assert.equal(await store.acquire(key, "o", 30_000), true);
        assert.equal(await store.proclaim(key, "o", "first", 5), true);
        assert.equal((await store.holder(key)).value, "first");
        assert.equal(await store.release(key, "o"), true);
        assert.equal(await store.acquire(key, "o", 30_000), true);
        const again = await store.holder(key);
        assert.deepEqual([again.owner, again.value], ["o", null], "a new hold of the same owner");
        assert.equal(await store.proclaim(key, "o", "second", 1), true);
        assert.equal((await store.holder(key)).value, "second");
        await store.release(key, "o");
      });

      it("keeps any string exactly (non-ASCII, NUL, 8 KiB), reads the time left on the server's clock, and checks its arguments", async () => {
        const key = uniqueKey("value-bytes");
        assert.equal(await store.acquire(key, "o", 300), true);
        const h = await store.holder(key);
        assert.ok(Number.isInteger(h.remainingMs) && h.remainingMs >= 1 && h.remainingMs <= 300, `remainingMs ${h.remainingMs}`);
        let seq = 0;
        for (const value of ["héllo ✓ 🎉", "a\u0000b", "", "é".repeat(4_096)]) {
          assert.equal(await store.proclaim(key, "o", value, ++seq), true);
          assert.equal((await store.holder(key)).value, value);
        }
        // Refused in the words of every store (js/api/stores.mjs's checkSeq).
        await assert.rejects(store.proclaim(key, "o", 42, ++seq), invalidArgument(/^locksmith: value must be a string; got number$/));
        for (const bad of [1.5, 0, -1]) {
          await assert.rejects(store.proclaim(key, "o", "v", bad), invalidArgument(new RegExp(`^locksmith: seq must be a positive safe integer; got ${bad}$`)));
        }
        await sleep(400);
        assert.equal(await store.holder(key), null);
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
        const runs = await Promise.all(Array.from({ length: 8 }, () => contender(sql.dialect, server.url, key, ROUNDS)));
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

    // An acquire's outcome that comes late: an attempt held up behind another session's lock
    // on the key (as a slow or busy server would hold it) while its caller stops waiting: a
    // stalled event loop makes the bridge give up on it before the store does, a signal
    // aborts it, or the acquire times out. Whatever is late, there is never a second
    // holder, and no hold is left that nobody owns.
    describe("outcomes that come late", () => {
      before(async () => {
        // The default tables, made once up front.
        await (await sql.prepare(server.url)).close();
      });
      const connect = (options = {}) => sql.connect(server.url, { ...options, ...sql.quiet });
      const liveRows = (key) => sql.liveRows(admin, key);

      it("a waiting acquire whose first attempt the stalled event loop left behind: no second holder", { timeout: 30_000 }, async () => {
        const storeA = await connect({ operationTimeoutMs: 1_000 });
        const storeB = await connect();
        try {
          const key = uniqueKey("two-holders");
          const contender = await sql.contend(server.url, "lock", key, 1_250);
          const started = performance.now();
          const a = new Lock(key, 30_000, storeA);
          const acquiring = settle(a.acquire({ timeout: 5_000, retryDelay: 50 }));
          busy(300);
          const got = await acquiring;
          await contender.done;
          assert.equal(got.value, true, `A acquired (${got.error ?? got.value} after ${(performance.now() - started).toFixed(0)} ms)`);
          // Whatever A's earlier attempt left to do is done by now.
          await sleep(1_500);
          const b = new Lock(key, 30_000, storeB);
          assert.equal(await b.acquire(), false, "B got in while A holds the key");
          assert.equal(await liveRows(key), 1, "A's hold is on the server");
          assert.equal(await a.release(), true, "A released its hold");
        } finally {
          await Promise.all([storeA.close(), storeB.close()]);
        }
      });

      for (const [what, kind, handle] of [
        ["a lock", "lock", (key, store) => new Lock(key, 30_000, store)],
        ["a write lock", "rw", (key, store) => readWriteLock(key, 30_000, store).writeLock()],
      ]) {
        it(`an abort while ${what}'s attempt waits on the server leaves nothing held once the attempt settles`, { timeout: 30_000 }, async () => {
          const storeA = await connect();
          const storeB = await connect();
          try {
            const key = uniqueKey("aborted");
            const contender = await sql.contend(server.url, kind, key, 600);
            const a = handle(key, storeA);
            const controller = new AbortController();
            const acquiring = settle(a.acquire({ signal: controller.signal, timeout: 5_000 }));
            await sleep(200);
            controller.abort();
            const got = await acquiring;
            assert.equal(got.error?.name, "AbortError", `the acquire settled with ${got.error ?? got.value}`);
            await contender.done;
            // The attempt has settled on the server by now, and whatever follows it too.
            await sleep(800);
            assert.equal(await liveRows(key), 0, "a hold nobody owns is left on the server");
            const b = handle(key, storeB);
            assert.equal(await b.acquire(), true, "B got in");
            assert.equal(await a.release(), false, "A holds nothing");
            await b.release();
          } finally {
            await Promise.all([storeA.close(), storeB.close()]);
          }
        });
      }

      it("an acquire (no wait) that times out while its attempt waits on the server: the late grant is not left held for its TTL", {
        timeout: 30_000,
      }, async () => {
        const storeA = await connect({ operationTimeoutMs: 1_000 });
        const storeB = await connect();
        try {
          const key = uniqueKey("timed-out");
          // The attempt starts once the event loop is free (~500 ms), the bridge gives up at
          // ~1000 ms (it counts from the call), the statement would be cancelled at ~1300 ms:
          // the key's lock comes free at 1150 ms, in between.
          const contender = await sql.contend(server.url, "lock", key, 1_150);
          const a = new Lock(key, 30_000, storeA);
          const acquiring = settle(a.acquire());
          busy(500);
          const got = await acquiring;
          await contender.done;
          await sleep(800);
          if (got.value === true) {
            // The bridge waited for the answer (the WebAssembly build counts from the JS thread): A holds it.
            assert.equal(await a.release(), true, "A released its hold");
          } else {
            assert.ok(got.error !== undefined || got.value === false, `the acquire settled with ${got.value}`);
            assert.equal(await liveRows(key), 0, `a hold nobody owns is left on the server (the acquire settled with ${got.error?.code ?? got.value})`);
            assert.equal(await new Lock(key, 30_000, storeB).acquire(), true, "B got in");
          }
        } finally {
          await Promise.all([storeA.close(), storeB.close()]);
        }
      });
    });
  });
}

/** Runs one contender process (support/sql-contender.mjs) on `dialect`'s store; resolves with how many critical sections it ran. */
function contender(dialect, url, key, rounds) {
  return new Promise((resolve, reject) => {
    const args = [new URL("../support/sql-contender.mjs", import.meta.url).pathname, dialect, url, key, String(rounds)];
    const p = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.once("exit", (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`contender exited ${code}`))));
  });
}
