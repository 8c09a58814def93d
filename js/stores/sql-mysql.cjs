"use strict";
// MySqlLockStore's dialect beside the SQL core: its options, the server's clock in SQL,
// which failures are STORE_UNAVAILABLE, the message of a missing schema, and the session
// settings that bound on the server what a client abandoned.

const { VALUE_COLUMNS, serverTimeoutMs, storeError: sqlStoreError } = require("./sql-core.cjs");

/** The options and table names MySqlLockStore takes (see the SQL core's parseOptions). */
const DIALECT = {
  className: "MySqlLockStore",
  options: ["table", "operationTimeoutMs", "createTable"],
  booleans: { createTable: true },
  // A table name, optionally database-qualified: plain identifiers (quoted when used). The
  // name is short enough for the names derived from it (MySQL allows 64 characters).
  tableName: /^(?:([A-Za-z_][A-Za-z0-9_]{0,63})\.)?([A-Za-z_][A-Za-z0-9_]{0,39})$/,
  qualifier: "database",
};

// The tables by their part (the store's names for them: locks, permits, keys, fencing).
// Keys and owners are bytes (VARBINARY): compared exactly, without a collation's case
// folding or trailing-space padding. Expiry is milliseconds on the server's clock.
const KEY = "`key` VARBINARY(1024) NOT NULL";
const OWNER = "owner VARBINARY(255) NOT NULL";
const KIND = "kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL";
// The locks table's value columns (see the SQL core's VALUE_COLUMNS): the value as bytes
// (UTF-8, whatever the connection's or the table's character set), nullable, so that
// MySQL 8 and MariaDB add them to a table made by an earlier version in place (INSTANT).
const VALUE_COLUMN_DEFINITIONS = { value: "`value` BLOB NULL", value_token: "value_token BIGINT NULL", value_seq: "value_seq BIGINT NULL" };
const TABLES = {
  locks: [
    `${KEY} PRIMARY KEY`,
    OWNER,
    "expires_at BIGINT NOT NULL",
    "fencing_token BIGINT NULL",
    ...VALUE_COLUMNS.map((c) => VALUE_COLUMN_DEFINITIONS[c]),
    "INDEX expires_at (expires_at)",
  ],
  permits: [
    KIND,
    KEY,
    OWNER,
    "role VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL",
    "expires_at BIGINT NOT NULL",
    "fencing_token BIGINT NULL",
    "semaphore_limit INT NULL",
    "permits INT NOT NULL DEFAULT 1",
    "PRIMARY KEY (kind, `key`, owner)",
    "INDEX expires_at (expires_at)",
  ],
  // One row per semaphore or read-write key: its lock, under which its permits change.
  keys: [KIND, KEY, "PRIMARY KEY (kind, `key`)"],
  // Fencing tokens: each grant inserts a row; its AUTO_INCREMENT id is the token. The
  // counter only grows (MySQL 8 and MariaDB keep it across restarts); old rows are swept.
  fencing: ["id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY"],
};

/**
 * The statements that create the tables under the store's quoted `names` ({ locks,
 * permits, keys, fencing }): CREATE TABLE IF NOT EXISTS is safe when several processes
 * start at once.
 */
const createTables = (names) =>
  Object.entries(TABLES).map(([part, columns]) => `CREATE TABLE IF NOT EXISTS ${names[part]} (${columns.join(", ")}) ENGINE=InnoDB`);

// The server's clock in milliseconds since the epoch. UTC_TIMESTAMP does not depend on the
// session's time zone (NOW() does: a DST change would move every expiry by an hour). It
// is the time the statement started: every statement that decides on expiry runs after
// the statement that took the key's row lock, so that time is never older than the lock.
const NOW_MS = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)";

// Server errors (errno) that mean "unavailable, try again"; every other server error is a
// refusal (STORE_ERROR, final through a lock). Too many connections (1040, 1203), shutdown
// (1053), network errors (1158-1161), lock wait timeout (1205), deadlock (1213), query
// interrupted (1317), connection killed (1927), statement timeouts (MariaDB's
// max_statement_time 1969, MySQL's max_execution_time 3024), read-only during a failover
// (1290 --read-only, 1836 read-only mode, 1792 a read-only transaction, e.g. Aurora's),
// Group Replication rolling a transaction back (3100, 3101), a Galera node not ready
// (1047 WSREP has not yet prepared node for application use), the client's connection
// errors (2002, 2003, 2006, 2013) and a disconnect for inactivity (4031).
const UNAVAILABLE_ERRNOS = new Set([
  1040, 1047, 1053, 1158, 1159, 1160, 1161, 1203, 1205, 1213, 1290, 1317, 1792, 1836, 1927, 1969, 2002, 2003, 2006, 2013, 3024, 3100, 3101, 4031,
]);
// Bounds on the server, so that what a client abandoned (it timed out, or froze) does not go
// on there, nor keep a key's row locked: set on each connection the store uses (see #prepare).
// The session variables the store reads to learn which of them the server has.
const SESSION_VARIABLES = [
  "transaction_isolation",
  "tx_isolation",
  "innodb_lock_wait_timeout",
  "max_statement_time",
  "max_execution_time",
  "idle_transaction_timeout",
  "wait_timeout",
];
/** The statement that adds the value columns `columns` to the locks table `locks` (MySQL 8 has no ADD COLUMN IF NOT EXISTS: only the missing ones). */
const addValueColumns = (locks, columns) => `ALTER TABLE ${locks} ${columns.map((c) => `ADD COLUMN ${VALUE_COLUMN_DEFINITIONS[c]}`).join(", ")}`;

// How long connect waits, in seconds (the least lock_wait_timeout takes), for the locks
// table's metadata lock to add the value columns: an ALTER TABLE needs it alone, so it
// waits for every transaction that has the table open, and every statement on the table
// from then on waits behind it. Past this the columns are left out, and the store does
// not try again. The named lock under which processes add them in turn is waited for as
// long.
const VALUE_COLUMNS_LOCK_WAIT_S = 1;

/**
 * Why holder() and proclaim() cannot run on the locks table `locks`, and how to add what
 * they need; `skipped`, when this store's createTable tried to add them and gave up, why.
 */
function missingValueColumnsMessage(locks, skipped) {
  const why =
    skipped === undefined
      ? ""
      : isLockTimeout(skipped)
        ? `This store could not add them: other transactions kept the table open longer than the ${VALUE_COLUMNS_LOCK_WAIT_S} s it waits for the table's lock (it does not try again). `
        : `This store could not add them: ${skipped.message ?? String(skipped)}. `;
  return (
    `locksmith: MySQL: the table ${locks} has no ${VALUE_COLUMNS.join(", ")} columns (it was made by an earlier version), ` +
    "which holder() and proclaim() need (an election's leader(), observe() and value); everything else works without them. " +
    why +
    `Add them with ${addValueColumns(locks, VALUE_COLUMNS)} ` +
    "(or connect once with createTable: true, as a user that may alter the table, while no long transaction has it open)"
  );
}

/** Why `table` is missing, and how to make it. */
function missingTableMessage(table) {
  return (
    `locksmith: MySQL: the table ${table} (or its ${table}_permits, ${table}_keys or ${table}_fencing table) does not exist, ` +
    "and createTable is false: create them by connecting once with createTable: true " +
    "(as a user that may create tables, e.g. in a migration), then connect with createTable: false"
  );
}

/** Whether `err` is an error the server sent (it has an SQLSTATE and a positive errno). */
const isServerError = (err) => typeof err?.sqlState === "string" && typeof err?.errno === "number" && err.errno > 0;

// Server errors about the value columns: a column the table lacks (1054: holder() and
// proclaim() on a table made by an earlier version) and one that is there already (1060:
// added meanwhile, by hand).
const UNKNOWN_COLUMN = 1054;
const DUPLICATE_COLUMN = 1060;
// A lock not had in time: lock_wait_timeout (1205; metadata locks too), NOWAIT (3572),
// or the statement's own bound (MariaDB's max_statement_time, 1969).
const LOCK_TIMEOUTS = new Set([1205, 1969, 3572]);

/** Whether `err` is the server giving up a wait for a lock. */
const isLockTimeout = (err) => isServerError(err) && LOCK_TIMEOUTS.has(err.errno);

/** Whether `err` is MySQL's "unknown column". */
const isMissingColumn = (err) => isServerError(err) && err.errno === UNKNOWN_COLUMN;

/** A failure of MySQL, typed: unreachable, overloaded or a conflict to retry is STORE_UNAVAILABLE, a refusal STORE_ERROR. */
// Errors without an errno from the server are the socket's or mysql2's own.
const storeError = (err) => sqlStoreError(err, "MySQL", (e) => !isServerError(e) || UNAVAILABLE_ERRNOS.has(e.errno));

/** A connection that must not go back to the pool: broken, or in a transaction the store cannot vouch for. */
const isConnectionError = (err) => !isServerError(err) || err.fatal === true || UNAVAILABLE_ERRNOS.has(err.errno);

/**
 * The store's session settings on a server that has the variables `has`, for calls of
 * `operationTimeoutMs`, as [name, value] pairs: `steady` ones, harmless between the
 * store's calls, and `transaction` ones, for a transaction's time only. A statement stops
 * on the server a little before the call would give up (innodb_lock_wait_timeout, in
 * whole seconds, at least 1, for row lock waits; MariaDB's max_statement_time for any
 * statement, MySQL's max_execution_time for SELECTs), and a session left idle inside a
 * transaction (a client frozen, or cut off without a reset) is ended, rolling it back
 * and freeing its row locks, after operationTimeoutMs rounded up to whole seconds:
 * MariaDB's idle_transaction_timeout, else (MySQL) wait_timeout, lowered while the
 * transaction runs, since it applies to idle pooled connections too.
 */
function sessionSettings(has, operationTimeoutMs) {
  const statementMs = serverTimeoutMs(operationTimeoutMs);
  const idleSeconds = Math.max(1, Math.ceil(operationTimeoutMs / 1000));
  const steady = [];
  const transaction = [];
  // READ COMMITTED: no gap locks, so two acquirers of a new key do not deadlock.
  const isolation = ["transaction_isolation", "tx_isolation"].find((n) => has.has(n));
  if (isolation) steady.push([isolation, "'READ-COMMITTED'"]);
  if (has.has("innodb_lock_wait_timeout")) steady.push(["innodb_lock_wait_timeout", Math.max(1, Math.floor(statementMs / 1000))]);
  if (has.has("max_statement_time")) steady.push(["max_statement_time", (statementMs / 1000).toFixed(3)]);
  else if (has.has("max_execution_time")) steady.push(["max_execution_time", statementMs]);
  if (has.has("idle_transaction_timeout")) steady.push(["idle_transaction_timeout", idleSeconds]);
  else if (has.has("wait_timeout")) transaction.push(["wait_timeout", idleSeconds]);
  return { steady, transaction, isolated: isolation !== undefined };
}

/** `SET` statements: the pairs' values, after saving the old ones in user variables (`save`); or the saved values back (`restore`). */
const setSession = (pairs) => `SET ${pairs.map(([n, v]) => `SESSION ${n} = ${v}`).join(", ")}`;
const saveAndSet = (pairs) => `SET ${pairs.map(([n]) => `@locksmith_saved_${n} = @@SESSION.${n}`).join(", ")}, ${setSession(pairs).slice(4)}`;
const restore = (pairs) => `SET ${pairs.map(([n]) => `SESSION ${n} = @locksmith_saved_${n}`).join(", ")}`;

module.exports = {
  DIALECT,
  DUPLICATE_COLUMN,
  VALUE_COLUMNS_LOCK_WAIT_S,
  addValueColumns,
  createTables,
  NOW_MS,
  SESSION_VARIABLES,
  isConnectionError,
  isMissingColumn,
  isServerError,
  missingTableMessage,
  missingValueColumnsMessage,
  restore,
  saveAndSet,
  sessionSettings,
  setSession,
  storeError,
};
