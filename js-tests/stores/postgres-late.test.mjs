// PostgresLockStore when an acquire's outcome comes late: an attempt held up behind another
// session's lock on the key (the key's advisory lock, as a slow or busy server would hold it)
// while its caller stops waiting: a stalled event loop makes the bridge give up on it
// before the store does, a signal aborts it, or the acquire times out. Whatever is late,
// there is never a second holder, and no hold is left that nobody owns.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";

import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { requirePostgres, startPostgres } from "../support/postgres-server.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { settle } from "../support/wait.mjs";

const { Lock, readWriteLock } = ls;

await failOnUnhandledRejections();

/** Holds the JS thread for `ms`, as a long GC pause or synchronous work would. */
function busy(ms) {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe("PostgresLockStore: outcomes that come late", await requirePostgres(), () => {
  let server;
  let admin;
  before(async () => {
    server = await startPostgres();
    admin = new pg.Pool({ connectionString: server.url });
    admin.on("error", () => {});
    // The default tables, made once up front.
    await (await PostgresLockStore.connect(server.url, { listen: false })).close();
  });
  after(async () => {
    await admin?.end();
    await server?.dispose();
  });

  /** Another session takes `name`'s advisory lock (as the store names it) and holds it for `ms`: resolves once it holds it; `.done` once it let go. */
  async function contend(name, ms) {
    const tx = await admin.connect();
    await tx.query("BEGIN");
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", ["locksmith:locksmith_locks", name]);
    const done = sleep(ms)
      .then(() => tx.query("COMMIT"))
      .finally(() => tx.release());
    return { done };
  }

  /** Whether anyone holds `key` (a lock's row or a permit), asked of the server. */
  async function liveRows(key) {
    const { rows } = await admin.query(
      `SELECT (SELECT count(*)::int FROM locksmith_locks WHERE key = $1 AND expires_at > clock_timestamp())
            + (SELECT count(*)::int FROM locksmith_locks_permits WHERE key = $1 AND role IN ('semaphore', 'read', 'write') AND expires_at > clock_timestamp()) AS n`,
      [key],
    );
    return rows[0].n;
  }

  it("a waiting acquire whose first attempt the stalled event loop left behind: no second holder", { timeout: 30_000 }, async () => {
    const storeA = await PostgresLockStore.connect(server.url, { operationTimeoutMs: 1_000, listen: false });
    const storeB = await PostgresLockStore.connect(server.url, { listen: false });
    try {
      const key = uniqueKey("two-holders");
      const contender = await contend(`lock:${key}`, 1_250);
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

  for (const [what, handle, name] of [
    ["a lock", (key, store) => new Lock(key, 30_000, store), (key) => `lock:${key}`],
    ["a write lock", (key, store) => readWriteLock(key, 30_000, store).writeLock(), (key) => `rw:${key}`],
  ]) {
    it(`an abort while ${what}'s attempt waits on the server leaves nothing held once the attempt settles`, { timeout: 30_000 }, async () => {
      const storeA = await PostgresLockStore.connect(server.url, { listen: false });
      const storeB = await PostgresLockStore.connect(server.url, { listen: false });
      try {
        const key = uniqueKey("aborted");
        const contender = await contend(name(key), 600);
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
    const storeA = await PostgresLockStore.connect(server.url, { operationTimeoutMs: 1_000, listen: false });
    const storeB = await PostgresLockStore.connect(server.url, { listen: false });
    try {
      const key = uniqueKey("timed-out");
      // The attempt starts once the event loop is free (~500 ms), the bridge gives up at
      // ~1000 ms (it counts from the call), the statement would be cancelled at ~1300 ms:
      // the key's lock comes free at 1150 ms, in between.
      const contender = await contend(`lock:${key}`, 1_150);
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
