// MySqlLockStore when an acquire's outcome comes late: an attempt held up behind another
// session's row lock on the key (a competing transaction holding it with SELECT ... FOR
// UPDATE) while its caller stops waiting: a stalled event loop makes the bridge give up on
// it before the store does, a signal aborts it, or the acquire times out. Whatever is
// late, there is never a second holder, and no hold is left that nobody owns.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import mysql from "mysql2/promise";

import { MySqlLockStore } from "../../js/stores/mysql.mjs";
import { requireMysql, startMysql } from "../support/mysql-server.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { settle } from "../support/wait.mjs";

const { Lock, readWriteLock } = ls;

await failOnUnhandledRejections();

/** Holds the JS thread for `ms`, as a long GC pause or synchronous work would. */
function busy(ms) {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

const NOW_MS = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)";

describe("MySqlLockStore: outcomes that come late", await requireMysql(), () => {
  let server;
  let admin;
  before(async () => {
    server = await startMysql();
    admin = mysql.createPool({ uri: server.url, connectionLimit: 4 });
    // The default tables, made once up front.
    await (await MySqlLockStore.connect(server.url)).close();
  });
  after(async () => {
    await admin?.end();
    await server?.dispose();
  });

  /**
   * Another session locks the row under which `key`'s holds change (a lock's own row, made
   * expired if missing; a read-write lock's row in the keys table) and keeps it for `ms`:
   * resolves once it holds it; `.done` once it let go.
   */
  async function contend(kind, key, ms) {
    const tx = await mysql.createConnection(server.url);
    await tx.query("START TRANSACTION");
    if (kind === "lock") {
      await tx.query("INSERT IGNORE INTO locksmith_locks (`key`, owner, expires_at) VALUES (?, 'gone', 0)", [key]);
      await tx.query("SELECT 1 FROM locksmith_locks WHERE `key` = ? FOR UPDATE", [key]);
    } else {
      await tx.query("INSERT IGNORE INTO locksmith_locks_keys (kind, `key`) VALUES ('rw', ?)", [key]);
      await tx.query("SELECT 1 FROM locksmith_locks_keys WHERE kind = 'rw' AND `key` = ? FOR UPDATE", [key]);
    }
    const done = sleep(ms)
      .then(() => tx.query("COMMIT"))
      .finally(() => tx.end());
    return { done };
  }

  /** How many live holds `key` has, asked of the server. */
  async function liveRows(key) {
    const [rows] = await admin.query(
      `SELECT (SELECT COUNT(*) FROM locksmith_locks WHERE \`key\` = ? AND expires_at > ${NOW_MS})
            + (SELECT COUNT(*) FROM locksmith_locks_permits WHERE \`key\` = ? AND role IN ('semaphore', 'read', 'write') AND expires_at > ${NOW_MS}) AS n`,
      [key, key],
    );
    return Number(rows[0].n);
  }

  it("a waiting acquire whose first attempt the stalled event loop left behind: no second holder", { timeout: 30_000 }, async () => {
    const storeA = await MySqlLockStore.connect(server.url, { operationTimeoutMs: 1_000 });
    const storeB = await MySqlLockStore.connect(server.url);
    try {
      const key = uniqueKey("two-holders");
      const contender = await contend("lock", key, 1_250);
      const a = new Lock(key, 30_000, storeA);
      const acquiring = settle(a.acquire({ timeout: 5_000, retryDelay: 50 }));
      busy(300);
      const got = await acquiring;
      await contender.done;
      assert.equal(got.value, true, `A acquired (${got.error ?? got.value})`);
      await sleep(1_500);
      assert.equal(await new Lock(key, 30_000, storeB).acquire(), false, "B got in while A holds the key");
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
      const storeA = await MySqlLockStore.connect(server.url);
      const storeB = await MySqlLockStore.connect(server.url);
      try {
        const key = uniqueKey("aborted");
        const contender = await contend(kind, key, 600);
        const a = handle(key, storeA);
        const controller = new AbortController();
        const acquiring = settle(a.acquire({ signal: controller.signal, timeout: 5_000 }));
        await sleep(200);
        controller.abort();
        const got = await acquiring;
        assert.equal(got.error?.name, "AbortError", `the acquire settled with ${got.error ?? got.value}`);
        await contender.done;
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
    const storeA = await MySqlLockStore.connect(server.url, { operationTimeoutMs: 1_000 });
    const storeB = await MySqlLockStore.connect(server.url);
    try {
      const key = uniqueKey("timed-out");
      const contender = await contend("lock", key, 1_150);
      const a = new Lock(key, 30_000, storeA);
      const acquiring = settle(a.acquire());
      busy(500);
      const got = await acquiring;
      await contender.done;
      await sleep(800);
      if (got.value === true) {
        assert.equal(await a.release(), true, "A released its hold");
      } else {
        assert.equal(await liveRows(key), 0, `a hold nobody owns is left on the server (the acquire settled with ${got.error?.code ?? got.value})`);
        assert.equal(await new Lock(key, 30_000, storeB).acquire(), true, "B got in");
      }
    } finally {
      await Promise.all([storeA.close(), storeB.close()]);
    }
  });
});
