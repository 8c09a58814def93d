"use strict";
// MySqlLockStore: locks in a MySQL 8 or MariaDB 10.11 table, through a `mysql2/promise`
// pool (`mysql2` is an optional peer dependency, loaded only when `connect()` is given a
// URL). Expiry is the database server's clock, to the millisecond; fencing tokens come
// from an AUTO_INCREMENT column; waiters poll (at the acquire's retryDelay): MySQL has no
// LISTEN/NOTIFY, and GET_LOCK's session locks do not mix well with pooled connections.

const { StoreClosedError, checkKind, fairKey, invalid, typeName, ACQUIRE_TOKEN, ACQUIRE_PERMIT_TOKEN } = require("../gen/api.cjs");
// What the SQL stores share, and MySQL's dialect of it.
const core = require("./sql-core.cjs");
const dialect = require("./sql-mysql.cjs");
const { createSchema } = require("./mysql-schema.cjs");
const myPermits = require("./mysql-permits.cjs");

const { HOLDING, SWEEP_ROWS, noop } = core;
const { NOW_MS } = dialect;

// A plain lock's row is deleted this long after it expired or was released (see release()).
const SWEEP_AFTER_MS = 60_000;
// Expired writers' holds the sweep ends (under their keys' locks, one transaction each).
const SWEEP_WRITERS = 20;
const URL_SCHEME = /^mysql:\/\//i;

const DEADLOCK = 1213;
// A transaction InnoDB chose as a deadlock's victim was rolled back whole: it is tried
// again, up to this many times in all (each within the call's operation timeout), after
// a short random pause so that the transactions that met do not meet again in step.
// Eight processes on one key met more than twice in a row.
const DEADLOCK_TRIES = 6;
// The variables each connection has (by mysql2's core connection): read once.
const serverVariables = new WeakMap();

const quote = (identifier) => `\`${identifier}\``;
// Connections that have the store's 'error' listener, so a server that ends an idle
// pooled connection (a restart) is no uncaught exception.
const guarded = new WeakSet();

const parseOptions = (options) => core.parseOptions(options, dialect.DIALECT);

const toToken = (value) => core.toToken(value, "MySQL: the fencing counter");

const { matchedRows, text } = myPermits;

class MySqlLockStore extends core.SqlLockStore {
  #pool;
  #ownsPool;
  #options;
  #sql;
  #schemaReady;
  // Why createTable could not add the value columns, if it tried (see #ensureSchema).
  #valueColumnsSkipped;
  #lastSweep = 0;
  #sweeping;
  // Cleanups after acquires whose outcome is uncertain (see Cleanups): they may still run
  // while close() waits for them.
  #cleanups = new core.Cleanups({
    operationTimeoutMs: this.operationTimeoutMs,
    closed: () => this.#closed,
    ending: () => this.#ending !== undefined,
    transaction: (what, fn) => this.#transaction(what, fn, true),
    freeOwn: (connection, kind, key, owner) => this.#freeOwn(connection, kind, key, owner),
  });
  // The calls under way (each settles within the operation timeout): close() waits for them.
  #calls = new Set();
  // Set by close(); #ending once it stopped waiting for calls, as it ends the pool:
  // nothing runs after.
  #closed = false;
  #ending;
  // What each connection (mysql2's core one) needs around a transaction: { enter, leave }
  // statements, after its steady settings are set (the store's own pool) or not (yours).
  #sessions = new WeakMap();

  /**
   * Connects: `urlOrPool` is a `mysql://user:password@host:port/database` URL (the store
   * makes a pool of its own, and `close()` ends it) or a `mysql2/promise` pool of yours
   * (`close()` leaves it open). Creates the tables if they are missing.
   */
  static async connect(urlOrPool, options) {
    const parsed = parseOptions(options);
    if (typeof urlOrPool !== "string") {
      if (urlOrPool === null || typeof urlOrPool !== "object") {
        throw invalid(`MySqlLockStore.connect() takes a mysql:// URL or a mysql2/promise pool; got ${typeName(urlOrPool)}`);
      }
      const store = new MySqlLockStore(urlOrPool, options);
      await store.#run("connect", noop);
      return store;
    }
    if (!URL_SCHEME.test(urlOrPool)) {
      throw invalid(`MySqlLockStore.connect() takes a MySQL URL, starting mysql://; got ${JSON.stringify(urlOrPool.replace(/\/\/[^@/]*@/, "//…@"))}`);
    }
    const mysql = core.loadDriver(() => require("mysql2/promise"), "MySqlLockStore", "mysql2");
    const pool = mysql.createPool({
      uri: urlOrPool,
      // A connection attempt outlives the call that started it, which times out first (and
      // says so): the next call may use the connection.
      connectTimeout: parsed.operationTimeoutMs + 1_000,
      enableKeepAlive: true,
      // Tokens are BIGINTs: as numbers while they are safe integers (toToken checks).
      supportBigNumbers: true,
    });
    // The store's pool must not keep Node alive: the application's own work decides that.
    // (A call in flight keeps it alive by its timeout's timer.)
    pool.pool.on("connection", (connection) => connection.stream?.unref?.());
    const store = new MySqlLockStore(pool, options);
    store.#ownsPool = true;
    return core.opened(store, () => store.#run("connect", noop));
  }

  /**
   * A store over `pool`, a `mysql2/promise` pool of yours (a callback pool is used through
   * its `.promise()`); `close()` leaves it open. The tables are created, if missing, by
   * the first call.
   */
  constructor(pool, options) {
    if (pool !== null && typeof pool === "object" && typeof pool.promise === "function" && typeof pool.getConnection === "function") {
      pool = pool.promise();
    }
    if (pool === null || typeof pool !== "object" || typeof pool.getConnection !== "function" || typeof pool.query !== "function") {
      throw invalid(`new MySqlLockStore(pool) takes a mysql2/promise pool; got ${typeName(pool)}`);
    }
    const parsed = parseOptions(options);
    super("mysql", dialect.DIALECT.className, parsed, () => this.#shutDown());
    this.#options = parsed;
    this.#pool = pool;
    this.#ownsPool = false;
    // Every connection the pool makes from now on gets the store's 'error' listener.
    const events = pool.pool ?? pool;
    if (typeof events.on === "function") events.on("connection", guard);
    const { qualifier, name } = this.#options;
    const qualify = (n) => (qualifier ? `${quote(qualifier)}.${quote(n)}` : quote(n));
    this.#sql = {
      locks: qualify(name),
      permits: qualify(`${name}_permits`),
      keys: qualify(`${name}_keys`),
      fencing: qualify(`${name}_fencing`),
      names: [name, `${name}_permits`, `${name}_keys`, `${name}_fencing`],
    };
  }

  // -------------------------------------------------------------------------------
  // Running queries

  /**
   * Runs `fn(connection)` on a pooled connection within the operation timeout. A call that
   * times out destroys its connection (not returned to the pool): a server that stopped
   * answering cannot hold the pool's connections, and the server rolls back what the
   * connection had open once it sees it gone. A connection that failed inside a
   * transaction is destroyed too, which rolls the transaction back. `internal` calls (a
   * cleanup) may still run while close() waits for them.
   */
  #run(what, fn, internal = false) {
    if (this.#closed && !(internal && this.#ending === undefined)) return Promise.reject(new StoreClosedError("locksmith: the MySQL store is closed"));
    const call = this.#call(what, fn);
    const settled = call.then(noop, noop);
    this.#calls.add(settled);
    settled.then(() => this.#calls.delete(settled));
    return call;
  }

  #call(what, fn) {
    const ms = this.#options.operationTimeoutMs;
    const deadline = performance.now() + ms;
    let connection;
    let done = false;
    let timedOut = false;
    const finish = (destroy) => {
      if (connection === undefined || done) return;
      done = true;
      try {
        if (destroy) connection.destroy();
        else connection.release();
      } catch {
        // A connection that is gone already.
      }
    };
    const work = (async () => {
      connection = await this.#pool.getConnection();
      guard(connection.connection ?? connection);
      if (timedOut) {
        finish(true);
        return undefined;
      }
      try {
        const session = await this.#prepare(connection);
        await this.#ensureSchema(connection, deadline);
        const result = await fn(connection, session);
        finish(false);
        return result;
      } catch (err) {
        finish(connection.inTransaction === true || dialect.isConnectionError(err));
        throw err;
      }
    })();
    const giveUp = () => {
      timedOut = true;
      finish(true);
    };
    return core.withinTimeout(work, { what, ms, label: "MySQL", giveUp, storeError: dialect.storeError });
  }

  /**
   * The connection's session settings (see sessionSettings): which variables its server
   * has is read once per connection. On the store's own pool the steady ones are set once
   * and stay (they bound every call); on your pool they are set for each transaction and
   * your session's values put back after it, so your own queries keep theirs.
   */
  async #prepare(connection) {
    const target = connection.connection ?? connection;
    const known = this.#sessions.get(target);
    if (known) return known;
    let has = serverVariables.get(target);
    if (has === undefined) {
      const [rows] = await connection.query("SHOW SESSION VARIABLES WHERE Variable_name IN (?)", [dialect.SESSION_VARIABLES]);
      has = new Set(rows.map((r) => text(r.Variable_name ?? r.variable_name)));
      serverVariables.set(target, has);
    }
    const { steady, transaction, isolated } = dialect.sessionSettings(has, this.#options.operationTimeoutMs);
    const around = this.#ownsPool ? transaction : [...steady, ...transaction];
    if (this.#ownsPool && steady.length > 0) await connection.query(dialect.setSession(steady));
    const session = {
      enter: [...(isolated ? [] : ["SET TRANSACTION ISOLATION LEVEL READ COMMITTED"]), ...(around.length > 0 ? [dialect.saveAndSet(around)] : [])],
      leave: around.length > 0 ? [dialect.restore(around)] : [],
    };
    this.#sessions.set(target, session);
    return session;
  }

  /**
   * Runs `fn(connection)` inside one READ COMMITTED transaction (no gap locks: two
   * acquirers of a new key do not deadlock), within the server-side bounds of
   * sessionSettings. A deadlock (InnoDB rolled the transaction back) is retried once at
   * once: an acquire then answers rather than fail. If the client gives up during
   * COMMIT, the transaction may still commit: callers that take a hold clean up after a
   * failure (see #cleanUp). `fn` may answer `{ rollback: value }` to end without committing.
   */
  #transaction(what, fn, internal = false) {
    return this.#run(
      what,
      async (connection, session) => {
        // Until the session's own settings are back, a failure destroys the connection.
        connection.inTransaction = true;
        for (const statement of session.enter) await connection.query(statement);
        let result;
        for (let attempt = 1; ; attempt++) {
          try {
            await connection.query("START TRANSACTION");
            result = await fn(connection);
            await connection.query(result !== null && typeof result === "object" && "rollback" in result ? "ROLLBACK" : "COMMIT");
            break;
          } catch (err) {
            if (attempt >= DEADLOCK_TRIES || err?.errno !== DEADLOCK) throw err;
            await connection.query("ROLLBACK");
            await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 4 * attempt));
          }
        }
        for (const statement of session.leave) await connection.query(statement);
        connection.inTransaction = false;
        return result !== null && typeof result === "object" && "rollback" in result ? result.rollback : result;
      },
      internal,
    );
  }

  /**
   * Creates the tables if any is missing, once per store (again only after a failure).
   * The value columns are tried once with them: when they could not be added (see
   * mysql-schema.cjs), holder() and proclaim() say why, and no later call takes the table's
   * lock for them again. `deadline` is when the call gives up.
   */
  async #ensureSchema(connection, deadline) {
    this.#schemaReady ??= createSchema(connection, this.#sql, this.#options, deadline).then(
      (skipped) => {
        this.#valueColumnsSkipped = skipped;
      },
      (err) => {
        this.#schemaReady = undefined;
        throw err;
      },
    );
    return this.#schemaReady;
  }

  /** A new fencing token: larger than every token drawn before. */
  async #drawToken(connection) {
    const [result] = await connection.query(`INSERT INTO ${this.#sql.fencing} () VALUES ()`);
    return toToken(result.insertId);
  }

  /** Takes the row lock of the semaphore or read-write key `set:key` until the transaction ends (making its row if need be). */
  #serialize(connection, set, key) {
    return connection.query(`INSERT INTO ${this.#sql.keys} (kind, \`key\`) VALUES (?, ?) ON DUPLICATE KEY UPDATE kind = kind`, [set, key]);
  }

  /** Deletes `owner`'s row of `key` (a hold, a writer's claim, a fair lock's mark or place), under the key's row lock for permits. */
  async #freeOwn(connection, kind, key, owner) {
    if (kind === "lock") {
      // Expired now, like a release (see release()), with a fair lock's mark and place.
      await connection.query(`UPDATE ${this.#sql.locks} SET expires_at = LEAST(expires_at, ${NOW_MS}) WHERE \`key\` = ? AND owner = ?`, [key, owner]);
      await connection.query(`DELETE FROM ${this.#sql.permits} WHERE kind = 'lock' AND \`key\` = ? AND owner = ?`, [key, owner]);
      return;
    }
    await this.#serialize(connection, kind, key);
    const [gone] = await connection.query(`SELECT role FROM ${this.#sql.permits} WHERE kind = ? AND \`key\` = ? AND owner = ?`, [kind, key, owner]);
    await connection.query(`DELETE FROM ${this.#sql.permits} WHERE kind = ? AND \`key\` = ? AND owner = ?`, [kind, key, owner]);
    if (gone.some((r) => r.role === "write")) await this.#readersTurn(connection, kind, key);
  }

  /** A writer's hold of `set:key` ended: the readers waiting for it take their turn (under the key's row lock). */
  #readersTurn(connection, set, key) {
    return connection.query(`UPDATE ${this.#sql.permits} SET role = 'turn' WHERE kind = ? AND \`key\` = ? AND role = 'waiting' AND expires_at > ${NOW_MS}`, [
      set,
      key,
    ]);
  }

  /** Deletes a bounded number of expired rows, at most every few seconds, in the background. */
  #maybeSweep() {
    const now = Date.now();
    if (this.#sweeping || this.#closed || now - this.#lastSweep < core.SWEEP_INTERVAL_MS) return;
    this.#lastSweep = now;
    const { locks, permits, keys, fencing } = this.#sql;
    const sweep = async () => {
      await this.#transaction("a cleanup", async (c) => {
        // The row lock each DELETE waits for is re-checked on the row's latest version:
        // a hold taken again meanwhile stays.
        // Rows of locks expired (or released) a while ago: a key in use keeps its row.
        await c.query(`DELETE FROM ${locks} WHERE expires_at < ${NOW_MS} - ${SWEEP_AFTER_MS} LIMIT ${SWEEP_ROWS}`);
        // A writer's hold ends under its key's lock (below): its waiting readers' turn.
        await c.query(`DELETE FROM ${permits} WHERE expires_at < ${NOW_MS} AND role <> 'write' LIMIT ${SWEEP_ROWS}`);
      });
      const [writers] = await this.#run("a cleanup", (c) =>
        c.query(`SELECT DISTINCT kind, \`key\` FROM ${permits} WHERE role = 'write' AND expires_at < ${NOW_MS} LIMIT ${SWEEP_WRITERS}`),
      );
      for (const { kind, key } of writers) {
        await this.#transaction("a cleanup", async (c) => {
          await this.#serialize(c, kind, key);
          await this.#endExpiredWriters(c, kind, key);
        });
      }
      await this.#transaction("a cleanup", async (c) => {
        // The keys' lock rows of keys without permits; the fencing rows but the last.
        await c.query(
          `DELETE FROM ${keys} WHERE NOT EXISTS (SELECT 1 FROM ${permits} AS p WHERE p.kind = ${keys}.kind AND p.\`key\` = ${keys}.\`key\`) LIMIT ${SWEEP_ROWS}`,
        );
        const [[last]] = await c.query(`SELECT MAX(id) AS id FROM ${fencing}`);
        if (last?.id != null) await c.query(`DELETE FROM ${fencing} WHERE id < ? LIMIT ${SWEEP_ROWS * 2}`, [last.id]);
      });
    };
    this.#sweeping = sweep()
      .catch(noop)
      .finally(() => {
        this.#sweeping = undefined;
      });
  }

  /** Deletes `set:key`'s expired writers' holds and gives their waiting readers the turn; whether there were any. */
  async #endExpiredWriters(connection, set, key) {
    const [result] = await connection.query(`DELETE FROM ${this.#sql.permits} WHERE kind = ? AND \`key\` = ? AND role = 'write' AND expires_at <= ${NOW_MS}`, [
      set,
      key,
    ]);
    if (Number(result.affectedRows) === 0) return false;
    await this.#readersTurn(connection, set, key);
    return true;
  }

  // -------------------------------------------------------------------------------
  // The LockStore contract

  /** `acquire()` answering the hold's fencing token (how locks get it), or false. */
  async [ACQUIRE_TOKEN](key, owner, ttlMs) {
    // A call made before close() runs, and close() waits for it.
    const admitted = this.#admit();
    return this.#cleanups.inTurn("lock", key, owner, () => this.#acquire(key, owner, ttlMs, admitted));
  }

  async #acquire(key, owner, ttlMs, admitted) {
    const { locks } = this.#sql;
    const cleanup = await this.#cleanups.takeOver("lock", key, owner);
    const token = await this.#transaction(
      "acquire",
      async (c) => {
        await cleanup.free?.(c);
        // Takes the key's row lock, inserting the row or taking over an expired hold (its
        // token cleared). The assignments run left to right, so expires_at, which the
        // condition reads, is set last.
        await c.query(
          `INSERT INTO ${locks} (\`key\`, owner, expires_at, fencing_token) VALUES (?, ?, ${NOW_MS} + ?, NULL)
         ON DUPLICATE KEY UPDATE
           fencing_token = IF(expires_at <= ${NOW_MS}, NULL, fencing_token),
           owner = IF(expires_at <= ${NOW_MS}, VALUES(owner), owner),
           expires_at = IF(expires_at <= ${NOW_MS}, VALUES(expires_at), expires_at)`,
          [key, owner, ttlMs],
        );
        // Ours, and new (a token of NULL), while the row lock keeps everyone else out: a
        // token drawn now is larger than every earlier holder's, drawn before they let go.
        // Not while the key is fair (a fair hold's mark or a waiter's place lives): what this
        // statement took over is given back by an UPDATE that commits, not by a rollback,
        // which would also undo the clean-up this attempt took over (`cleanup.free` above)
        // after that clean-up was counted done.
        const [[row]] = await c.query(
          `SELECT (SELECT fencing_token IS NULL FROM ${locks} WHERE \`key\` = ? AND owner = ?) AS fresh,
             EXISTS (SELECT 1 FROM ${this.#sql.permits} WHERE kind = 'lock' AND \`key\` = ? AND expires_at > ${NOW_MS}) AS fair`,
          [key, owner, key],
        );
        if (Number(row.fair) === 1) {
          await c.query(`UPDATE ${locks} SET expires_at = LEAST(expires_at, ${NOW_MS}) WHERE \`key\` = ? AND owner = ? AND fencing_token IS NULL`, [
            key,
            owner,
          ]);
          return { fair: true };
        }
        if (row.fresh === null || Number(row.fresh) !== 1) return { rollback: false };
        const token = await this.#drawToken(c);
        const [set] = await c.query(`UPDATE ${locks} SET fencing_token = ? WHERE \`key\` = ? AND owner = ? AND expires_at > ${NOW_MS}`, [token, key, owner]);
        // Expired before it had its token: as good as not taken.
        return matchedRows(set) > 0 ? token : false;
      },
      admitted,
    ).then(...this.#cleanups.settled(cleanup, "lock", key, owner, ttlMs));
    this.#maybeSweep();
    if (token?.fair) throw fairKey("lock", key);
    return token;
  }

  /** Refuses a call on a closed store; else true (the call may finish while close() waits). */
  #admit() {
    if (this.#closed) throw new StoreClosedError("locksmith: the MySQL store is closed");
    return true;
  }

  /**
   * Frees `key` if `owner` holds it: the row stays, expired now, for the next acquirer to
   * take over (the sweep deletes it later). Deleting it would leave a delete-marked row
   * that acquirers waiting on its lock then deadlock over (their inserts' gap locks).
   */
  release(key, owner) {
    return this.#cleanups.inTurn("lock", key, owner, () => this.#release(key, owner));
  }

  async #release(key, owner) {
    const [result] = await this.#run("release", (c) =>
      c.query(`UPDATE ${this.#sql.locks} SET expires_at = ${NOW_MS} WHERE \`key\` = ? AND owner = ? AND expires_at > ${NOW_MS}`, [key, owner]),
    );
    return matchedRows(result) > 0;
  }

  /** Moves `key`'s expiry to `ttlMs` from now if `owner` holds it. */
  async extend(key, owner, ttlMs) {
    const [result] = await this.#run("extend", (c) =>
      c.query(`UPDATE ${this.#sql.locks} SET expires_at = ${NOW_MS} + ? WHERE \`key\` = ? AND owner = ? AND expires_at > ${NOW_MS}`, [ttlMs, key, owner]),
    );
    return matchedRows(result) > 0;
  }

  /** Whether anyone holds `key`. */
  async isLocked(key) {
    const [rows] = await this.#run("isLocked", (c) => c.query(`SELECT 1 FROM ${this.#sql.locks} WHERE \`key\` = ? AND expires_at > ${NOW_MS}`, [key]));
    return rows.length > 0;
  }

  /** Whether `owner` holds `key`. */
  async isHeldBy(key, owner) {
    const [rows] = await this.#run("isHeldBy", (c) =>
      c.query(`SELECT 1 FROM ${this.#sql.locks} WHERE \`key\` = ? AND owner = ? AND expires_at > ${NOW_MS}`, [key, owner]),
    );
    return rows.length > 0;
  }

  /**
   * Milliseconds left on `owner`'s own hold of `key`, or null when not its: one statement
   * (a hold's due check). One less than the difference of the two milliseconds, since the
   * server's clock reads the current millisecond truncated: never more than is left.
   */
  async ownerRemainingTime(key, owner) {
    const [rows] = await this.#run("ownerRemainingTime", (c) =>
      c.query(`SELECT expires_at - ${NOW_MS} AS ms FROM ${this.#sql.locks} WHERE \`key\` = ? AND owner = ? AND expires_at > ${NOW_MS}`, [key, owner]),
    );
    return rows.length > 0 ? Math.max(0, Number(rows[0].ms) - 1) : null;
  }

  /** Milliseconds until `key`'s hold expires, or null when nobody holds it. */
  async remainingTime(key) {
    const [rows] = await this.#run("remainingTime", (c) =>
      c.query(`SELECT expires_at - ${NOW_MS} AS ms FROM ${this.#sql.locks} WHERE \`key\` = ? AND expires_at > ${NOW_MS}`, [key]),
    );
    return rows.length > 0 ? Math.max(0, Number(rows[0].ms)) : null;
  }

  /**
   * The live holder of the plain lock `key` in one statement: its owner, fencing token,
   * milliseconds left and the value proclaimed for this hold (its `value_token` is the
   * hold's fencing token; a value left by an earlier hold is not its); null when nobody
   * holds it. The time left is the difference of the two milliseconds: the server's
   * clock reads the current millisecond truncated, so that is what is left rounded up.
   */
  async holder(key) {
    const [rows] = await this.#run("holder", (c) =>
      c.query(
        `SELECT owner, fencing_token, expires_at - ${NOW_MS} AS ms, IF(value_token = fencing_token, \`value\`, NULL) AS \`value\`
         FROM ${this.#sql.locks} WHERE \`key\` = ? AND expires_at > ${NOW_MS}`,
        [key],
      ),
    ).catch((err) => this.#failWithoutValueColumns(err));
    return rows.length > 0 ? core.holderOf(rows[0], "MySQL: the fencing counter") : null;
  }

  /**
   * Keeps `value` with `owner`'s live hold of `key` in one statement, unless the hold
   * keeps a value of a `seq` as large already: whether `owner` holds `key`. The value is
   * tagged with the hold's fencing token, so a later hold of the key (any owner's) starts
   * without one, and an extend keeps it.
   */
  async proclaim(key, owner, value, seq) {
    const bytes = core.proclaimed(value, seq);
    // MySQL assigns left to right, each assignment seeing the ones before: the condition
    // reads value_token and value_seq, so those are set after `value` and in that order;
    // when the value is not replaced, the tag is the hold's already.
    const newer = "(NOT (value_token <=> fencing_token) OR value_seq IS NULL OR value_seq < ?)";
    const [result] = await this.#run("proclaim", (c) =>
      c.query(
        `UPDATE ${this.#sql.locks}
         SET \`value\` = IF(${newer}, ?, \`value\`), value_seq = IF(${newer}, ?, value_seq), value_token = fencing_token
         WHERE \`key\` = ? AND owner = ? AND expires_at > ${NOW_MS}`,
        [seq, bytes, seq, seq, key, owner],
      ),
    ).catch((err) => this.#failWithoutValueColumns(err));
    return matchedRows(result) > 0;
  }

  /** holder()'s and proclaim()'s failure on a locks table without the value columns, as the error that says what to add. */
  #failWithoutValueColumns(err) {
    throw core.withoutValueColumns(err, dialect.isMissingColumn, dialect.missingValueColumnsMessage(this.#sql.locks, this.#valueColumnsSkipped));
  }

  // -------------------------------------------------------------------------------
  // Permits: semaphores and read-write locks

  /**
   * `acquirePermit()` answering the hold's fencing token, or false. Decided under the
   * key's row lock, so concurrent acquirers of one key take turns.
   */
  async [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits) {
    const set = checkKind(kind);
    const weight = core.checkWeight(kind, limit, permits);
    const admitted = this.#admit();
    return this.#cleanups.inTurn(set, key, owner, () => this.#acquirePermit(key, owner, ttlMs, kind, set, limit, weight, admitted));
  }

  async #acquirePermit(key, owner, ttlMs, kind, set, limit, weight, admitted) {
    const cleanup = await this.#cleanups.takeOver(set, key, owner);
    const settled = this.#cleanups.settled(cleanup, set, key, owner, ttlMs);
    try {
      return await myPermits.acquirePermit(this.#lent, key, owner, ttlMs, kind, set, limit, weight, { free: cleanup.free, settled, internal: admitted });
    } finally {
      this.#maybeSweep();
    }
  }

  /** Drops `owner`'s hold (and claim) on `key`: whether it held a live permit. */
  async releasePermit(key, owner, kind) {
    const set = checkKind(kind);
    return this.#cleanups.inTurn(set, key, owner, () => this.#releasePermit(key, owner, set));
  }

  async #releasePermit(key, owner, set) {
    const table = this.#sql.permits;
    return this.#transaction("releasePermit", async (c) => {
      await this.#serialize(c, set, key);
      const [rows] = await c.query(
        `SELECT role, role IN ${HOLDING} AND expires_at > ${NOW_MS} AS held FROM ${table} WHERE kind = ? AND \`key\` = ? AND owner = ?`,
        [set, key, owner],
      );
      if (rows.length === 0) return { rollback: false };
      await c.query(`DELETE FROM ${table} WHERE kind = ? AND \`key\` = ? AND owner = ?`, [set, key, owner]);
      if (rows[0].role === "write") await this.#readersTurn(c, set, key);
      return Number(rows[0].held) === 1;
    });
  }

  /**
   * Moves the expiry of `owner`'s live permit to `ttlMs` from now, under the key's row
   * lock, like acquirePermit: an acquirer cannot read the permit as expired while an
   * extend that found it live is still committing.
   */
  async extendPermit(key, owner, ttlMs, kind) {
    const set = checkKind(kind);
    return this.#transaction("extendPermit", async (c) => {
      await this.#serialize(c, set, key);
      const [result] = await c.query(
        `UPDATE ${this.#sql.permits} SET expires_at = ${NOW_MS} + ?
         WHERE kind = ? AND \`key\` = ? AND owner = ? AND role IN ${HOLDING} AND expires_at > ${NOW_MS}`,
        [ttlMs, set, key, owner],
      );
      return matchedRows(result) > 0;
    });
  }

  /** How many permits the live holders of `key` have (a semaphore holder counts its permits). */
  async countPermits(key, kind) {
    const set = checkKind(kind);
    const [rows] = await this.#run("countPermits", (c) =>
      c.query(
        `SELECT COALESCE(SUM(permits), 0) AS n FROM ${this.#sql.permits}
         WHERE kind = ? AND \`key\` = ? AND role IN ${HOLDING} AND expires_at > ${NOW_MS}`,
        [set, key],
      ),
    );
    return Number(rows[0].n);
  }

  /** Milliseconds left of `owner`'s permit, or null. */
  async permitRemainingTime(key, owner, kind) {
    const set = checkKind(kind);
    const [rows] = await this.#run("permitRemainingTime", (c) =>
      c.query(
        `SELECT expires_at - ${NOW_MS} AS ms FROM ${this.#sql.permits}
         WHERE kind = ? AND \`key\` = ? AND owner = ? AND role IN ${HOLDING} AND expires_at > ${NOW_MS}`,
        [set, key, owner],
      ),
    );
    return rows.length > 0 ? Math.max(0, Number(rows[0].ms)) : null;
  }

  // -------------------------------------------------------------------------------
  // Fair locks and semaphores (js/stores/mysql-permits.cjs)

  /** A fair handle's attempt (`{ fair: true }`): see docs/stores.md's `acquireFair`. */
  async acquireFair(key, owner, ttlMs, kind, limit, permits, waits) {
    const set = core.fairSet(kind);
    const weight = set === "lock" ? 1 : core.checkWeight(kind, limit, permits);
    const admitted = this.#admit();
    return this.#cleanups.inTurn(set, key, owner, async () => {
      const cleanup = await this.#cleanups.takeOver(set, key, owner);
      const settled = this.#cleanups.settled(cleanup, set, key, owner, ttlMs);
      try {
        return await myPermits.acquireFair(this.#lent, key, owner, ttlMs, set, limit, weight, waits === true, {
          free: cleanup.free,
          settled,
          internal: admitted,
        });
      } finally {
        this.#maybeSweep();
      }
    });
  }

  /** Frees a fair lock and its mark, or gives up the owner's place. */
  releaseFair(key, owner) {
    return this.#cleanups.inTurn("lock", key, owner, () => myPermits.releaseFair(this.#lent, key, owner));
  }

  /** Extends a fair lock and its mark. */
  extendFair(key, owner, ttlMs) {
    return myPermits.extendFair(this.#lent, key, owner, ttlMs);
  }

  /** What mysql-permits.cjs runs on. */
  get #lent() {
    return {
      sql: this.#sql,
      run: (what, fn) => this.#run(what, fn),
      transaction: (what, fn, internal) => this.#transaction(what, fn, internal),
      serialize: (c, set, key) => this.#serialize(c, set, key),
      drawToken: (c) => this.#drawToken(c),
      endExpiredWriters: (c, set, key) => this.#endExpiredWriters(c, set, key),
    };
  }

  // -------------------------------------------------------------------------------

  /**
   * close(), once the holds are released (see SqlLockStore): later calls fail with
   * StoreClosedError at once. Waits for the calls under way and the pending cleanups
   * after uncertain acquires (each tried once more, now), at most about twice
   * operationTimeoutMs; then ends the pool if the store made it (a pool you passed in
   * stays open, without the store's `connection` listener).
   */
  async #shutDown() {
    this.#closed = true;
    this.#cleanups.stopTimers();
    this.#cleanups.runPendingOnce();
    const deadline = performance.now() + 2 * this.#options.operationTimeoutMs + 1_000;
    while (this.#calls.size > 0 || this.#sweeping) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      let timer;
      await Promise.race([Promise.all([...this.#calls, this.#sweeping]), new Promise((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
    this.#ending = true;
    this.#cleanups.clear();
    const events = this.#pool.pool ?? this.#pool;
    events.removeListener?.("connection", guard);
    if (this.#ownsPool) await this.#pool.end();
  }
}

/** Gives `connection` (mysql2's, core or promise) a lasting 'error' listener, once. */
function guard(connection) {
  const target = connection?.connection ?? connection;
  if (target === null || typeof target !== "object" || typeof target.on !== "function" || guarded.has(target)) return;
  guarded.add(target);
  target.on("error", noop);
}

module.exports = { MySqlLockStore };
