"use strict";
// MySQL's schema for MySqlLockStore (mysql.cjs): the tables made when missing, and the
// value columns (an election leader's value) added to a locks table made before them,
// without ever holding up the table or failing the store over them.

const { LockStoreError } = require("../gen/api.cjs");

const core = require("./sql-core.cjs");
const dialect = require("./sql-mysql.cjs");

/** A VARBINARY column's value (a Buffer from mysql2) as text. */
const text = (value) => (Buffer.isBuffer(value) ? value.toString("utf8") : String(value));

/** The column names in `list`, a GROUP_CONCAT of them (or null), lower-cased. */
const columnsIn = (list) =>
  new Set(
    text(list ?? "")
      .toLowerCase()
      .split(","),
  );

/** The value columns not in `list`, a GROUP_CONCAT of column names. */
const missingValueColumns = (list) => {
  const present = columnsIn(list);
  return core.VALUE_COLUMNS.filter((c) => !present.has(c));
};

/**
 * One look: the four tables exist, and the locks table has its value columns (tables
 * made before elections kept a value do not). With createTable, creates what is
 * missing and adds the missing value columns (see addValueColumns). Without
 * createTable it alters nothing. Resolves with why the value columns are still
 * missing, if it tried to add them and gave up (else undefined).
 */
async function createSchema(connection, sql, options, deadline) {
  const { names } = sql;
  const schema = options.qualifier ?? null;
  const [rows] = await connection.query(
    `SELECT (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name IN (?)) AS n,
         (SELECT GROUP_CONCAT(column_name) FROM information_schema.columns
           WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_name IN (?)) AS columns_present`,
    [schema, names, schema, names[0], ["key", ...core.VALUE_COLUMNS]],
  );
  // The value columns a locks table that is there lacks (a new table gets them as it is created).
  const missing = columnsIn(rows[0].columns_present).has("key") ? missingValueColumns(rows[0].columns_present) : [];
  const tables = Number(rows[0].n) === names.length;
  if (tables && missing.length === 0) return undefined;
  if (!options.createTable) {
    if (tables) return undefined;
    throw new LockStoreError(dialect.missingTableMessage(options.table));
  }
  if (!tables) for (const statement of dialect.createTables(sql)) await connection.query(statement);
  if (missing.length === 0) return undefined;
  return addValueColumns(connection, sql, options, deadline);
}

/** The value columns the locks table lacks, read now. */
async function missingValueColumnsNow(connection, sql, options) {
  const [rows] = await connection.query(
    `SELECT GROUP_CONCAT(column_name) AS present FROM information_schema.columns
       WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_name IN (?)`,
    [options.qualifier ?? null, sql.names[0], core.VALUE_COLUMNS],
  );
  return missingValueColumns(rows[0].present);
}

/**
 * Adds the value columns the locks table lacks (a table made by an earlier version),
 * in place (INSTANT on MySQL 8 and MariaDB). Nothing about them may fail the store: an
 * ALTER TABLE needs the table's metadata lock alone, so it waits for every transaction
 * that has the table open while every acquire, extend and release waits behind it. The
 * wait is bounded by VALUE_COLUMNS_LOCK_WAIT_S, and whatever the server refuses (the
 * lock not had in time, no right to alter the table) leaves the table as it is:
 * resolves with that error (else undefined), for holder() and proclaim() to tell.
 * Processes that start at once add them in turn, under a named lock, each looking
 * again once it has it; one that does not get the lock in time looks again too, and
 * says why when they are still missing. `deadline`: the call's, which the waits must
 * leave room in.
 */
async function addValueColumns(connection, sql, options, deadline) {
  const wait = dialect.VALUE_COLUMNS_LOCK_WAIT_S;
  // Room for the two waits (the named lock's, the table's) and the statements around them.
  const room = (waits) => deadline - performance.now() > waits * wait * 1_000 + 500;
  const busy = () => new Error(`operationTimeoutMs (${options.operationTimeoutMs} ms) leaves no time to wait for the table's lock`);
  if (!room(1)) return busy();
  const name = "CONCAT('locksmith:', SHA1(CONCAT(COALESCE(?, DATABASE()), '.', ?)))";
  const lockArgs = [options.qualifier ?? null, sql.names[0]];
  let locked = false;
  try {
    const lockWait = room(2) ? wait : 0;
    const [[got]] = await connection.query(`SELECT GET_LOCK(${name}, ?) AS got`, [...lockArgs, lockWait]);
    if (Number(got?.got) !== 1) {
      // Not had in time: another process is adding them (or waiting to). It may have
      // added them meanwhile, or given up (a long transaction on the table, no right to
      // alter it): then say so, as this store's own giving up would.
      if ((await missingValueColumnsNow(connection, sql, options)).length === 0) return undefined;
      const waited = lockWait > 0 ? `within the ${lockWait} s this store waited for it` : "when this store looked (operationTimeoutMs left no time to wait)";
      return new Error(`another process was adding them and had not ${waited}; it may have given up (look for its own error, or add them by hand)`);
    }
    locked = true;
  } catch (err) {
    // A server without named locks (a Galera cluster refuses GET_LOCK) goes on without.
    if (!dialect.isServerError(err) || err.fatal === true) throw err;
  }
  const bound = [["lock_wait_timeout", wait]];
  let saved = false;
  try {
    let missing = await missingValueColumnsNow(connection, sql, options);
    if (missing.length === 0) return undefined;
    if (!room(1)) return busy();
    await connection.query(dialect.saveAndSet(bound));
    saved = true;
    for (let attempt = 1; ; attempt++) {
      try {
        await connection.query(dialect.addValueColumns(sql.locks, missing));
        return undefined;
      } catch (err) {
        // A broken connection fails the call; a refusal leaves the columns out.
        if (!dialect.isServerError(err) || err.fatal === true) throw err;
        // A column added meanwhile (by hand: processes of the store take the named lock).
        if (err.errno !== dialect.DUPLICATE_COLUMN || attempt > 1) return err;
        missing = await missingValueColumnsNow(connection, sql, options);
        if (missing.length === 0) return undefined;
      }
    }
  } finally {
    if (saved) await connection.query(dialect.restore(bound));
    if (locked) await connection.query(`DO RELEASE_LOCK(${name})`, lockArgs);
  }
}

module.exports = { createSchema };
