"use strict";
// PostgresLockStore's dialect beside the SQL core: which failures are STORE_UNAVAILABLE,
// its schema (the names of its table, permits table and sequence, and their creation),
// the messages of a missing schema, and release wake-ups: one LISTEN connection per store,
// outside its pool, on which the NOTIFY of every release arrives; waiters of the released
// key are called at once instead of polling. It reconnects with a backoff and checks the
// connection now and then; a pool without pg's Client and options gets no LISTEN.

const { LockStoreError, checkKind, warnOnce } = require("../gen/api.cjs");
const { VALUE_COLUMNS, noop, serverTimeoutMs, storeError: sqlStoreError, toToken: sqlToToken } = require("./sql-core.cjs");

/**
 * Warns, once per process, when `pool` (a user's pg.Pool given to new PostgresLockStore)
 * has no 'error' listener once the code that made the store has run: pg emits 'error' on
 * the pool when an idle connection dies (a server restart, a failover,
 * pg_terminate_backend), and an 'error' nobody listens to ends the process. The store
 * cannot listen in the user's place: what to do then (log it, alert) is the
 * application's. A listener added right after the store was made counts.
 */
function warnUnwatchedPool(pool) {
  if (typeof pool?.listenerCount !== "function" || typeof pool.on !== "function") return;
  const check = () => {
    if (pool.listenerCount("error") > 0) return;
    warnOnce(
      "LOCKSMITH_POOL_ERROR_LISTENER",
      "locksmith: the pg.Pool given to new PostgresLockStore(pool) has no 'error' listener: when PostgreSQL restarts " +
        "(or an idle connection is dropped), pg emits 'error' on the pool, and with no listener Node ends the process. " +
        'Add one when you make the pool: pool.on("error", (err) => console.error("postgres:", err.message)) ' +
        "(the pool replaces the connection), or let PostgresLockStore.connect(url) make a pool of its own.",
    );
  };
  if (pool.listenerCount("error") > 0) return;
  const timer = setTimeout(check, 0);
  timer.unref?.();
}

/** Why the permits table lacks its `permits` column, and how to add it. */
function missingColumnMessage(permits) {
  return (
    `locksmith: PostgreSQL: the table ${permits} has no permits column (it was made by an earlier version), ` +
    `and createTable is false: add it with ALTER TABLE ${permits} ADD COLUMN IF NOT EXISTS permits integer NOT NULL DEFAULT 1 ` +
    "(or connect once with createTable: true, as a role that may alter the table)"
  );
}

// The value columns of the locks table (see the SQL core's VALUE_COLUMNS), as added to a
// table made by an earlier version: nullable, without a default, so PostgreSQL only
// records them, without rewriting the table.
const ADD_VALUE_COLUMNS = "ADD COLUMN IF NOT EXISTS value bytea, ADD COLUMN IF NOT EXISTS value_token bigint, ADD COLUMN IF NOT EXISTS value_seq bigint";

// How long connect waits for the locks table's lock to add the value columns (an ALTER
// TABLE needs it alone: it waits for every transaction that has the table open, and every
// statement on the table from then on waits behind it). Past this the columns are left
// out, and the store does not try again.
const VALUE_COLUMNS_LOCK_TIMEOUT = "100ms";

/**
 * Why holder() and proclaim() cannot run on the locks table `locks`, and how to add what
 * they need; `skipped`, when this store's createTable tried to add them and gave up, the
 * server's error.
 */
function missingValueColumnsMessage(locks, skipped) {
  const why =
    skipped === undefined
      ? ""
      : isLockTimeout(skipped)
        ? `This store could not add them: other transactions kept the table open longer than the ${VALUE_COLUMNS_LOCK_TIMEOUT} it waits for the table's lock (it does not try again). `
        : `This store could not add them: ${skipped.message ?? String(skipped)}. `;
  return (
    `locksmith: PostgreSQL: the table ${locks} has no ${VALUE_COLUMNS.join(", ")} columns (it was made by an earlier version), ` +
    "which holder() and proclaim() need (an election's leader(), observe() and value); everything else works without them. " +
    why +
    `Add them with ALTER TABLE ${locks} ${ADD_VALUE_COLUMNS} ` +
    "(or connect once with createTable: true, as a role that may alter the table, while no long transaction has it open)"
  );
}

/** Whether `err` is PostgreSQL giving up a wait for a lock: lock_timeout (55P03), or the statement's own timeout (57014). */
const isLockTimeout = (err) => err?.code === "55P03" || err?.code === "57014";

/** Whether `err` is PostgreSQL's "column does not exist" (SQLSTATE 42703). */
const isMissingColumn = (err) => err?.code === "42703";

/** Why `table` is missing, and how to make it. */
function missingTableMessage(table) {
  return (
    `locksmith: PostgreSQL: the table ${table} (or its ${table}_permits table or ${table}_fencing sequence) does not exist, ` +
    "and createTable is false: create them by connecting once with createTable: true " +
    "(as a role that may create tables, e.g. in a migration), then connect with createTable: false"
  );
}

// -------------------------------------------------------------------------------
// The schema

const quote = (identifier) => `"${identifier}"`;
// Pooled connections inside a transaction of ours: one that fails there is destroyed
// (which rolls the transaction back) rather than returned to the pool.
const inTransaction = new WeakSet();

/** The quoted names of a store's table, permits table and sequence, its NOTIFY channel and its advisory lockspace, from its parsed options. */
function schemaNames({ qualifier, name, table }) {
  const qualify = (n) => (qualifier ? `${quote(qualifier)}.${quote(n)}` : quote(n));
  return {
    locks: qualify(name),
    permits: qualify(`${name}_permits`),
    sequence: qualify(`${name}_fencing`),
    // to_regclass() takes the name as text, quoted as in SQL.
    regclasses: [qualify(name), qualify(`${name}_permits`), qualify(`${name}_fencing`)],
    channel: name,
    lockspace: `locksmith:${table}`,
  };
}

/** Whether the locks table `locks` (quoted, as to_regclass() takes it) has all of the value columns. */
async function hasValueColumns(client, locks) {
  const { rows } = await client.query(
    "SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = ANY($2::text[]) AND NOT attisdropped) = $3 AS valued",
    [locks, VALUE_COLUMNS, VALUE_COLUMNS.length],
  );
  return rows[0].valued === true;
}

/**
 * Creates the table, its permits table and its sequence (`sql`: schemaNames()) if any is
 * missing, and the columns that tables made by an earlier version lack: the permits
 * table's `permits` (needed: without it the store refuses to run) and the locks table's
 * value columns (only holder() and proclaim() need them). With `createTable: false` in
 * `options` it alters nothing: it says what is missing instead, or, for the value
 * columns, leaves holder() and proclaim() to say it.
 *
 * Resolves with the server's error when it tried to add the value columns and gave up
 * (else undefined): nothing about them fails the store. Adding them takes the locks
 * table's lock alone, which waits for every transaction that has the table open while
 * every acquire, extend and release waits behind it: the wait is bounded by
 * VALUE_COLUMNS_LOCK_TIMEOUT, and a role that may not alter the table (it does not own
 * it) leaves it as it is. The store does not try again (see #ensureSchema).
 */
async function createSchema(client, sql, options) {
  const { locks, permits, sequence, regclasses, lockspace } = sql;
  // One look: the three exist, the permits table has its `permits` column (tables made
  // before semaphore holds had weights do not) and the locks table its value columns
  // (tables made before elections kept a value do not); they get them below.
  const { rows } = await client.query(
    `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL AS ok,
       EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($2) AND attname = 'permits' AND NOT attisdropped) AS weighted,
       (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = ANY($4::text[]) AND NOT attisdropped) = $5 AS valued`,
    [...regclasses, VALUE_COLUMNS, VALUE_COLUMNS.length],
  );
  const { ok, weighted, valued } = rows[0];
  if (ok === true && weighted === true && valued === true) return undefined;
  if (!options.createTable) {
    if (ok === true && weighted === true) return undefined;
    throw new LockStoreError(ok === true ? missingColumnMessage(permits) : missingTableMessage(options.table));
  }
  const { name } = options;
  // Several processes may start at once: an advisory lock makes them create in turn
  // (CREATE ... IF NOT EXISTS alone can still fail on a concurrent creation).
  inTransaction.add(client);
  await client.query(`BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL statement_timeout = ${serverTimeoutMs(options.operationTimeoutMs)}`);
  await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [lockspace]);
  // (Only the value columns missing: no CREATE, which needs the right to create in the
  // schema even when there is nothing to create.)
  if (ok !== true || weighted !== true) {
    await client.query(`CREATE SEQUENCE IF NOT EXISTS ${sequence} AS bigint MINVALUE 1`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${locks} (
        key text PRIMARY KEY,
        owner text NOT NULL,
        expires_at timestamptz NOT NULL,
        fencing_token bigint,
        value bytea,
        value_token bigint,
        value_seq bigint
      )`,
    );
    await client.query(`CREATE INDEX IF NOT EXISTS ${quote(`${name}_expires_at`)} ON ${locks} (expires_at)`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${permits} (
        kind text NOT NULL,
        key text NOT NULL,
        owner text NOT NULL,
        role text NOT NULL,
        expires_at timestamptz NOT NULL,
        fencing_token bigint,
        semaphore_limit integer,
        permits integer NOT NULL DEFAULT 1,
        PRIMARY KEY (kind, key, owner)
      )`,
    );
    // A permits table made by an earlier version: its holders each held 1. (With a
    // constant default, PostgreSQL 11+ adds the column without rewriting the table.)
    await client.query(`ALTER TABLE ${permits} ADD COLUMN IF NOT EXISTS permits integer NOT NULL DEFAULT 1`);
    await client.query(`CREATE INDEX IF NOT EXISTS ${quote(`${name}_permits_expires_at`)} ON ${permits} (expires_at)`);
  }
  // A locks table made by an earlier version: its holds have no value yet. Looked at
  // again under the advisory lock: a process that started at the same time may have
  // added them (ADD COLUMN IF NOT EXISTS would take the table's lock all the same).
  let skipped;
  if (valued !== true && !(await hasValueColumns(client, regclasses[0]))) {
    await client.query("SAVEPOINT locksmith_value_columns");
    try {
      await client.query(`SET LOCAL lock_timeout = '${VALUE_COLUMNS_LOCK_TIMEOUT}'`);
      await client.query(`ALTER TABLE ${locks} ${ADD_VALUE_COLUMNS}`);
    } catch (err) {
      // The columns are optional: whatever the server refused (the table's lock not had
      // in time, no right to alter it), the rest goes on. (A broken connection fails
      // the rollback too, and that fails the call.)
      await client.query("ROLLBACK TO SAVEPOINT locksmith_value_columns").catch(() => {
        throw err;
      });
      skipped = err;
    }
  }
  await client.query("COMMIT");
  inTransaction.delete(client);
  return skipped;
}

/** A failure of PostgreSQL, typed: unreachable or overloaded is STORE_UNAVAILABLE, a refusal STORE_ERROR. */
const storeError = (err) =>
  // SQLSTATE classes 08 (connection), 53 (resources), 57 (operator intervention: shutdown,
  // cannot connect now), 40 (serialization, deadlock); 25006 (a read-only transaction: a
  // standby, or a primary being demoted in a failover) and 55P03 (a lock not available
  // now); and errors without a SQLSTATE (the socket's, pg's own). A STORE_ERROR is final
  // through a lock (a wait does not retry it): only refusals that stay belong there.
  sqlStoreError(err, "PostgreSQL", (e) => {
    const code = typeof e?.code === "string" ? e.code : "";
    return !/^[0-9A-Z]{5}$/.test(code) || /^(08|53|57|40)/.test(code) || code === "25006" || code === "55P03";
  });

/** Whether `err` leaves a connection unfit to go back to the pool. */
function isConnectionError(err) {
  const code = typeof err?.code === "string" ? err.code : "";
  return !/^[0-9A-Z]{5}$/.test(code) || /^(08|57)/.test(code);
}

/** The options and table names PostgresLockStore takes (see the SQL core's parseOptions). */
const DIALECT = {
  className: "PostgresLockStore",
  options: ["table", "operationTimeoutMs", "listen", "createTable"],
  booleans: { listen: true, createTable: true },
  // A table name, optionally schema-qualified: plain identifiers (quoted when used, so
  // their case is kept). The name is short enough for the names derived from it.
  tableName: /^(?:([A-Za-z_][A-Za-z0-9_]{0,62})\.)?([A-Za-z_][A-Za-z0-9_]{0,39})$/,
  qualifier: "schema",
};

// The LISTEN connection: reconnect backoff, and how often it is checked.
const LISTEN_RETRY_MIN_MS = 100;
const LISTEN_RETRY_MAX_MS = 2_000;
const LISTEN_CHECK_MS = 5_000;

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

class PostgresListener {
  #pool;
  #enabled;
  #timeoutMs;
  #channel;
  #quoted;
  #closed = false;
  // Listeners by `tag:key`, the connection, its state.
  #listeners = new Map();
  #client;
  #started = false;
  #retryMs = LISTEN_RETRY_MIN_MS;
  #retryTimer;
  #checkTimer;
  #attempt;

  /** Wake-ups over `pool`'s settings on `channel` (`quoted` as an identifier), when `enabled`; `timeoutMs` bounds a connection's answers. */
  constructor(pool, { enabled, timeoutMs, channel, quoted }) {
    this.#pool = pool;
    this.#enabled = enabled;
    this.#timeoutMs = timeoutMs;
    this.#channel = channel;
    this.#quoted = quoted;
  }

  /**
   * Calls `listener` when `key` may have been freed (a NOTIFY from a release, or the
   * LISTEN connection coming back). Returns the unsubscribe function.
   */
  onRelease(key, listener, kind) {
    try {
      if (!this.#enabled || this.#closed || typeof listener !== "function") return noop;
      const tag = kind === undefined ? "lock" : checkKind(kind);
      const name = `${tag}:${key}`;
      let listeners = this.#listeners.get(name);
      if (listeners === undefined) this.#listeners.set(name, (listeners = new Set()));
      const entry = { listener };
      listeners.add(entry);
      this.start();
      return () => {
        listeners.delete(entry);
        if (listeners.size === 0 && this.#listeners.get(name) === listeners) this.#listeners.delete(name);
      };
    } catch {
      return noop;
    }
  }

  #wake(name) {
    const listeners = this.#listeners.get(name);
    if (listeners === undefined) return;
    for (const { listener } of [...listeners]) {
      try {
        listener();
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  #wakeAll() {
    for (const name of [...this.#listeners.keys()]) this.#wake(name);
  }

  /** A connection for LISTEN: a new client with the pool's settings, outside the pool. */
  #newClient() {
    const pool = this.#pool;
    if (typeof pool.Client !== "function" || pool.options === null || typeof pool.options !== "object") return undefined;
    const config = { ...pool.options };
    config.connectionTimeoutMillis ||= this.#timeoutMs;
    config.keepAlive ??= true;
    // Operators can tell it apart in pg_stat_activity.
    config.application_name ??= "locksmith listen";
    return new pool.Client(config);
  }

  /** Starts listening, once. */
  start() {
    if (!this.#enabled || this.#closed || this.#started) return;
    this.#started = true;
    this.#connect();
  }

  /** Resolves once the first LISTEN attempt has settled (connected or not). */
  async ready() {
    this.start();
    await this.#attempt;
  }

  #connect() {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    if (this.#closed) return;
    const client = this.#newClient();
    if (client === undefined) {
      // A pool without pg's Client and options: no LISTEN, waiters poll.
      return;
    }
    this.#client = client;
    let lost = false;
    const onLost = () => {
      if (lost) return;
      lost = true;
      if (this.#client === client) this.#client = undefined;
      clearInterval(this.#checkTimer);
      client.end().catch(noop);
      this.#scheduleConnect();
    };
    client.on("error", onLost);
    client.on("end", onLost);
    client.on("notification", (message) => {
      if (message.channel === this.#channel && typeof message.payload === "string") this.#wake(message.payload);
    });
    const ms = this.#timeoutMs;
    this.#attempt = withTimeout(
      (async () => {
        await client.connect();
        // The store's own connection must not keep Node alive: the application's pool
        // and its waits decide that.
        client.connection?.stream?.unref?.();
        await client.query(`LISTEN ${this.#quoted}`);
      })(),
      ms,
    ).then(() => {
      if (lost || this.#closed) return;
      this.#retryMs = LISTEN_RETRY_MIN_MS;
      // Releases while not listening were missed: every waiter tries again.
      this.#wakeAll();
      this.#checkTimer = setInterval(() => {
        withTimeout(client.query("SELECT 1"), ms).catch(onLost);
      }, LISTEN_CHECK_MS);
      this.#checkTimer.unref?.();
    }, onLost);
  }

  #scheduleConnect() {
    if (this.#closed || this.#retryTimer !== undefined) return;
    const delay = this.#retryMs;
    this.#retryMs = Math.min(LISTEN_RETRY_MAX_MS, delay * 2);
    this.#retryTimer = setTimeout(() => this.#connect(), delay);
    this.#retryTimer.unref?.();
  }

  /** Stops listening and closes the connection. */
  async close() {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    clearInterval(this.#checkTimer);
    this.#listeners.clear();
    const client = this.#client;
    this.#client = undefined;
    if (client !== undefined) {
      client.removeAllListeners("end");
      client.removeAllListeners("notification");
      client.on("error", noop);
      await client.end().catch(noop);
    }
  }
}

// The milliseconds of `$n` from now, on the server's clock (every expiry the store sets).
const fromNow = (n) => `clock_timestamp() + $${n}::float8 * interval '1 millisecond'`;

/** The next value of the fencing sequence `sequence` (its quoted name), as SQL. */
const nextval = (sequence) => `nextval('${sequence.replaceAll("'", "''")}')`;

/** `value`, a bigint as pg returns it, as a fencing token JS can carry. */
const toToken = (value) => sqlToToken(value, "PostgreSQL: the fencing sequence");

module.exports = {
  DIALECT,
  fromNow,
  nextval,
  toToken,
  PostgresListener,
  createSchema,
  inTransaction,
  isConnectionError,
  isMissingColumn,
  missingColumnMessage,
  missingTableMessage,
  missingValueColumnsMessage,
  quote,
  schemaNames,
  storeError,
  warnUnwatchedPool,
};
