// The two SQL stores as the shared suite (stores/sql-stores.test.mjs) and its contender
// processes (sql-contender.mjs) see them: PostgresLockStore and MySqlLockStore (on
// MariaDB), each with its server, an admin connection for reading its tables, and the
// SQL, in its own dialect, that the tests read and write with.
import { MySqlLockStore } from "../../js/stores/mysql.mjs";
import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { requireMysql, startMysql } from "./mysql-server.mjs";
import { requirePostgres, startPostgres } from "./postgres-server.mjs";
import { setTimeout as sleep } from "node:timers/promises";

/** A pool over `url` whose `query(sql, params)` resolves to the rows. */
async function postgresAdmin(url) {
  const pg = (await import("pg")).default;
  const pool = new pg.Pool({ connectionString: url });
  pool.on("error", () => {});
  return { query: async (sql, params) => (await pool.query(sql, params)).rows, end: () => pool.end() };
}

/** A pool over `url` whose `query(sql, params)` resolves to the rows. */
async function mysqlAdmin(url) {
  const mysql = (await import("mysql2/promise")).default;
  const pool = mysql.createPool({ uri: url, connectionLimit: 4 });
  return { query: async (sql, params) => (await pool.query(sql, params))[0], end: () => pool.end() };
}

/** Commits the transaction open on connection `tx` after `ms`, then ends the connection: `{ done }`, settled once it did. */
function commitAfter(tx, ms) {
  const done = sleep(ms)
    .then(() => tx.query("COMMIT"))
    .finally(() => tx.end());
  return { done };
}

const MYSQL_NOW_MS = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)";

/**
 * Another session takes the lock under which `kind` ("lock" or "rw") `key`'s holds change
 * (the key's advisory lock, as the store names it) and holds it for `ms`: resolves once
 * it holds it; `.done` once it let go.
 */
async function postgresContend(url, kind, key, ms) {
  const pg = (await import("pg")).default;
  const tx = new pg.Client({ connectionString: url });
  tx.on("error", () => {});
  await tx.connect();
  await tx.query("BEGIN");
  await tx.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", ["locksmith:locksmith_locks", `${kind}:${key}`]);
  return commitAfter(tx, ms);
}

/** Whether anyone holds `key` (a lock's row or a permit), asked of the server. */
async function postgresLiveRows(admin, key) {
  const rows = await admin.query(
    `SELECT (SELECT count(*)::int FROM locksmith_locks WHERE key = $1 AND expires_at > clock_timestamp())
          + (SELECT count(*)::int FROM locksmith_locks_permits WHERE key = $1 AND role IN ('semaphore', 'read', 'write') AND expires_at > clock_timestamp()) AS n`,
    [key],
  );
  return Number(rows[0].n);
}

/**
 * Another session locks the row under which `kind` ("lock" or "rw") `key`'s holds change
 * (a lock's own row, made expired if missing; a read-write lock's row in the keys table)
 * and keeps it for `ms`: resolves once it holds it; `.done` once it let go.
 */
async function mysqlContend(url, kind, key, ms) {
  const mysql = (await import("mysql2/promise")).default;
  const tx = await mysql.createConnection(url);
  await tx.query("START TRANSACTION");
  if (kind === "lock") {
    await tx.query("INSERT IGNORE INTO locksmith_locks (`key`, owner, expires_at) VALUES (?, 'gone', 0)", [key]);
    await tx.query("SELECT 1 FROM locksmith_locks WHERE `key` = ? FOR UPDATE", [key]);
  } else {
    await tx.query("INSERT IGNORE INTO locksmith_locks_keys (kind, `key`) VALUES ('rw', ?)", [key]);
    await tx.query("SELECT 1 FROM locksmith_locks_keys WHERE kind = 'rw' AND `key` = ? FOR UPDATE", [key]);
  }
  return commitAfter(tx, ms);
}

/** How many live holds `key` has, asked of the server. */
async function mysqlLiveRows(admin, key) {
  const rows = await admin.query(
    `SELECT (SELECT COUNT(*) FROM locksmith_locks WHERE \`key\` = ? AND expires_at > ${MYSQL_NOW_MS})
          + (SELECT COUNT(*) FROM locksmith_locks_permits WHERE \`key\` = ? AND role IN ('semaphore', 'read', 'write') AND expires_at > ${MYSQL_NOW_MS}) AS n`,
    [key, key],
  );
  return Number(rows[0].n);
}

/** Each store, its server, and the SQL its tests read and write with. */
export const SQL_STORES = [
  {
    name: "PostgresLockStore",
    dialect: "postgres",
    database: "PostgreSQL",
    required: requirePostgres,
    start: startPostgres,
    connect: (url, options) => PostgresLockStore.connect(url, options),
    // Options for a store that needs no wake-ups (no LISTEN connection).
    quiet: { listen: false },
    // Its own tables, made before the contenders start (no LISTEN connection needed for that).
    prepare: (url) => PostgresLockStore.connect(url, { listen: false }),
    admin: postgresAdmin,
    loadTables: [
      "CREATE TABLE IF NOT EXISTS load_log (id bigserial PRIMARY KEY, key text, entry text, token bigint)",
      "CREATE TABLE IF NOT EXISTS load_counter (key text PRIMARY KEY, n int NOT NULL)",
    ],
    counterStart: "INSERT INTO load_counter (key, n) VALUES ($1, 0)",
    counter: "SELECT n FROM load_counter WHERE key = $1",
    log: "SELECT entry, token FROM load_log WHERE key = $1 ORDER BY id",
    // What a contender process writes inside the lock (see sql-contender.mjs), and how often it retries.
    contender: {
      enter: "INSERT INTO load_log (key, entry, token) VALUES ($1, $2, $3)",
      count: "UPDATE load_counter SET n = $1 WHERE key = $2",
      leave: "INSERT INTO load_log (key, entry) VALUES ($1, $2)",
      retryDelay: 20,
    },
    // Its tokens may be null (a store without fencing); then their order is not checked.
    tokensMayBeNull: true,
    // How long a waiter waits through the frozen server, and the bounds of its failure.
    frozenWait: { timeout: 2_000, atLeast: 1_900, below: 3_500 },
    contend: postgresContend,
    liveRows: postgresLiveRows,
    // A key's fair rows (places in line, a fair lock's mark, fair semaphore holders) of a set ("lock", "semaphore").
    fairRows: "SELECT owner, role FROM locksmith_locks_permits WHERE kind = $1 AND key = $2 AND role IN ('place', 'mark', 'fair') ORDER BY fencing_token",
  },
  {
    name: "MySqlLockStore",
    dialect: "mysql",
    database: "MySQL",
    required: requireMysql,
    start: startMysql,
    connect: (url, options) => MySqlLockStore.connect(url, options),
    quiet: {},
    prepare: (url) => MySqlLockStore.connect(url),
    admin: mysqlAdmin,
    loadTables: [
      "CREATE TABLE IF NOT EXISTS load_log (id BIGINT AUTO_INCREMENT PRIMARY KEY, `key` VARCHAR(200), entry VARCHAR(64), token BIGINT)",
      "CREATE TABLE IF NOT EXISTS load_counter (`key` VARCHAR(200) PRIMARY KEY, n INT NOT NULL)",
    ],
    counterStart: "INSERT INTO load_counter (`key`, n) VALUES (?, 0)",
    counter: "SELECT n FROM load_counter WHERE `key` = ?",
    log: "SELECT entry, token FROM load_log WHERE `key` = ? ORDER BY id",
    contender: {
      enter: "INSERT INTO load_log (`key`, entry, token) VALUES (?, ?, ?)",
      count: "UPDATE load_counter SET n = ? WHERE `key` = ?",
      leave: "INSERT INTO load_log (`key`, entry) VALUES (?, ?)",
      retryDelay: 10,
    },
    tokensMayBeNull: false,
    frozenWait: { timeout: 1_500, atLeast: 1_400, below: 3_000 },
    contend: mysqlContend,
    liveRows: mysqlLiveRows,
    fairRows:
      "SELECT CAST(owner AS CHAR) AS owner, role FROM locksmith_locks_permits WHERE kind = ? AND `key` = ? AND role IN ('place', 'mark', 'fair') ORDER BY fencing_token",
  },
];
