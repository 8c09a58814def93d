// A pg.Pool with no 'error' listener ends the process when PostgreSQL restarts (pg emits
// 'error' on the pool for an idle connection that died, and Node throws an 'error' nobody
// listens to). new PostgresLockStore(pool) sees the missing listener and warns, once per
// process, with the fix. A mysql2 pool emits no 'error' of its own (its connections carry
// a listener, and the store adds one), so a restart under it ends nothing: no warning.
// Each case is a child process whose exit code and stderr are read.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";

import { requireMysql, startMysql } from "./support/mysql-server.mjs";
import { requirePostgres, startPostgres } from "./support/postgres-server.mjs";

const POSTGRES = new URL("../js/stores/postgres.mjs", import.meta.url).href;
const MYSQL = new URL("../js/stores/mysql.mjs", import.meta.url).href;
const WARNING = /\[LOCKSMITH_POOL_ERROR_LISTENER\] Warning: locksmith: the pg\.Pool given to new PostgresLockStore\(pool\) has no 'error' listener/;

const count = (text, pattern) => text.split("\n").filter((line) => pattern.test(line)).length;

/**
 * Runs `code` (an ES module, with `pg`, `mysql`, `PostgresLockStore`, `MySqlLockStore` and
 * `URL` in scope) in a child process. `whenReady(child)` runs once the child printed "ready".
 */
function child(code, url, whenReady) {
  const source = `
    import pg from "pg";
    import mysql from "mysql2/promise";
    import { PostgresLockStore } from ${JSON.stringify(POSTGRES)};
    import { MySqlLockStore } from ${JSON.stringify(MYSQL)};
    const URL = ${JSON.stringify(url)};
    ${code}`;
  const environment = { ...process.env };
  for (const name of ["LOCKSMITH_WARNINGS", "NODE_OPTIONS"]) delete environment[name];
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ["--input-type=module", "-e", source], { cwd: new URL("..", import.meta.url), env: environment });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
    proc.stdout.on("data", (d) => {
      stdout += d;
      if (whenReady && /^ready$/m.test(stdout)) {
        const ready = whenReady;
        whenReady = undefined;
        ready(proc).catch(reject);
      }
    });
    proc.stderr.on("data", (d) => {
      stderr += d;
    });
    proc.on("error", reject);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("a pg.Pool without an 'error' listener", async () => {
  let server;
  before(async () => {
    if (!(await requirePostgres()).skip) server = await startPostgres();
  });
  after(() => server?.dispose());
  const skip = (await requirePostgres()).skip;

  it("warns once, with the fix, and a restart then ends the process as pg does", { skip }, async () => {
    const { code, stdout, stderr } = await child(
      `
      const pool = new pg.Pool({ connectionString: URL, max: 2 });
      const store = new PostgresLockStore(pool, { listen: false });
      new PostgresLockStore(pool, { listen: false, table: "other_locks" });
      await store.acquire("k", "me", 60_000);
      await store.release("k", "me");
      console.log("ready");
      await new Promise((resolve) => setTimeout(resolve, 30_000));
      console.log("survived");
      `,
      server.url,
      () => server.restart(),
    );
    assert.equal(count(stderr, WARNING), 1, `one warning per process:\n${stderr}`);
    assert.match(stderr, /pool\.on\("error", \(err\) => console\.error\("postgres:", err\.message\)\)/);
    // pg's behaviour, which the warning is about: the idle connection's 'error' ends it.
    assert.notEqual(code, 0, stderr);
    assert.doesNotMatch(stdout, /survived/);
  });

  it("says nothing for a pool with a listener, added before the store or right after it", { skip }, async () => {
    const { code, stderr } = await child(
      `
      const before = new pg.Pool({ connectionString: URL });
      before.on("error", () => {});
      const a = new PostgresLockStore(before, { listen: false });
      const after = new pg.Pool({ connectionString: URL });
      const b = new PostgresLockStore(after, { listen: false });
      after.on("error", () => {});
      await a.acquire("k", "me", 1_000);
      await b.release("k", "me");
      await new Promise((resolve) => setTimeout(resolve, 50));
      await a.close();
      await b.close();
      await before.end();
      await after.end();
      `,
      server.url,
    );
    assert.equal(code, 0, stderr);
    assert.equal(count(stderr, /LOCKSMITH_POOL_ERROR_LISTENER/), 0, stderr);
  });

  it("says nothing for the pool PostgresLockStore.connect() makes (it has its own listener)", { skip }, async () => {
    const { code, stderr } = await child(
      `
      const store = await PostgresLockStore.connect(URL);
      await store.acquire("k", "me", 1_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
      await store.close();
      `,
      server.url,
    );
    assert.equal(code, 0, stderr);
    assert.equal(count(stderr, /LOCKSMITH_POOL_ERROR_LISTENER/), 0, stderr);
  });
});

describe("a mysql2 pool without an 'error' listener", async () => {
  let server;
  before(async () => {
    if (!(await requireMysql()).skip) server = await startMysql();
  });
  after(() => server?.dispose());
  const skip = (await requireMysql()).skip;

  it("survives a server restart (no warning needed, none given)", { skip }, async () => {
    const { code, stdout, stderr } = await child(
      `
      const pool = mysql.createPool({ uri: URL, connectionLimit: 3 });
      // Idle connections made before the store, and one made by it.
      const held = await Promise.all([pool.getConnection(), pool.getConnection()]);
      for (const c of held) c.release();
      const store = new MySqlLockStore(pool);
      await store.acquire("k", "me", 60_000);
      await store.release("k", "me");
      console.log("ready");
      const alive = setInterval(() => {}, 1_000);
      await new Promise((resolve) => process.once("SIGUSR2", resolve));
      clearInterval(alive);
      console.log(await store.acquire("k2", "me", 1_000).catch((err) => err.code));
      await store.close();
      await pool.end();
      console.log("survived");
      `,
      server.url,
      async (proc) => {
        await server.restart();
        // Time for the dropped connections' events to reach the child.
        await new Promise((resolve) => setTimeout(resolve, 500));
        proc.kill("SIGUSR2");
      },
    );
    assert.equal(code, 0, stderr);
    assert.match(stdout, /survived/);
    assert.equal(count(stderr, /LOCKSMITH_POOL_ERROR_LISTENER/), 0, stderr);
  });
});
