"use strict";
// PostgresLockStore: locks in a PostgreSQL table, through the `pg` package (an optional
// peer dependency, loaded only by `connect()`). Expiry is the database server's clock;
// fencing tokens come from a sequence; releases are announced with NOTIFY and heard on
// one LISTEN connection per store, so waiters wake at once instead of polling.

const { StoreClosedError, StoreUnavailableError, checkKind, fairKey, invalid, typeName, ACQUIRE_TOKEN, ACQUIRE_PERMIT_TOKEN } = require("../gen/api.cjs");
// What the SQL stores share, and PostgreSQL's dialect of it.
const core = require("./sql-core.cjs");
const dialect = require("./sql-postgres.cjs");
const pgPermits = require("./postgres-permits.cjs");

const { HOLDING, SWEEP_ROWS, noop, serverTimeoutMs } = core;
const { fromNow, inTransaction, nextval, quote, toToken } = dialect;

// The URL schemes of PostgreSQL connection strings.
const URL_SCHEME = /^postgres(?:ql)?:\/\//i;

const parseOptions = (options) => core.parseOptions(options, dialect.DIALECT);

class PostgresLockStore extends core.SqlLockStore {
  #pool;
  #ownsPool;
  #options;
  #sql;
  #schemaReady;
  // The server's error when createTable could not add the value columns (see #ensureSchema).
  #valueColumnsSkipped;
  #closed = false;
  #lastSweep = 0;
  #sweeping;
  // Cleanups after acquires whose outcome is uncertain (see Cleanups).
  #cleanups = new core.Cleanups({
    operationTimeoutMs: this.operationTimeoutMs,
    closed: () => this.#closed,
    ending: () => this.#closed,
    transaction: (what, fn) => this.#transaction(what, fn),
    freeOwn: (client, kind, key, owner) => this.#freeOwn(client, kind, key, owner),
  });
  // Release wake-ups: LISTEN on one connection.
  #listener;

  /**
   * Connects with a pool of its own: `urlOrConfig` is a `postgres://` URL or a `pg`
   * pool configuration. Creates the table if it is missing; `close()` ends the pool.
   */
  static async connect(urlOrConfig, options) {
    const parsed = parseOptions(options);
    let config;
    if (typeof urlOrConfig === "string") config = { connectionString: urlOrConfig };
    else if (urlOrConfig !== null && typeof urlOrConfig === "object" && !Array.isArray(urlOrConfig)) config = { ...urlOrConfig };
    else throw invalid(`PostgresLockStore.connect() takes a postgres:// URL or a pg configuration object; got ${typeName(urlOrConfig)}`);
    const url = config.connectionString;
    if (url !== undefined && (typeof url !== "string" || !URL_SCHEME.test(url))) {
      const shown = typeof url === "string" ? JSON.stringify(url.replace(/\/\/[^@/]*@/, "//…@")) : typeName(url);
      throw invalid(`PostgresLockStore.connect() takes a PostgreSQL URL, starting postgres:// or postgresql://; got ${shown}`);
    }
    config.connectionTimeoutMillis ??= parsed.operationTimeoutMs;
    config.keepAlive ??= true;
    // The server cancels what the client would give up on (see serverTimeoutMs).
    config.statement_timeout ??= serverTimeoutMs(parsed.operationTimeoutMs);
    // The store's pool must not keep Node alive: the application's own work decides that.
    config.allowExitOnIdle ??= true;
    const pg = core.loadDriver(() => require("pg"), "PostgresLockStore", "pg");
    const pool = new pg.Pool(config);
    // An idle connection that the server closes is dropped by the pool; without a
    // listener its error would be an uncaught exception. (Connections checked out get
    // a listener of their own in #run.)
    pool.on("error", noop);
    const store = new PostgresLockStore(pool, options);
    store.#ownsPool = true;
    await core.opened(store, () => store.#run("connect", noop));
    await store.#listener.ready();
    return store;
  }

  /**
   * A store over `pool`, a `pg.Pool` of yours (`close()` leaves it open). The table is
   * created, if missing, by the first call.
   */
  constructor(pool, options) {
    if (pool === null || typeof pool !== "object" || typeof pool.connect !== "function" || typeof pool.query !== "function") {
      throw invalid(`new PostgresLockStore(pool) takes a pg.Pool; got ${typeName(pool)}`);
    }
    const parsed = parseOptions(options);
    super("postgres", dialect.DIALECT.className, parsed, () => this.#shutDown());
    this.#options = parsed;
    this.#pool = pool;
    this.#ownsPool = false;
    this.#sql = dialect.schemaNames(parsed);
    const { name } = parsed;
    this.#listener = new dialect.PostgresListener(pool, { enabled: parsed.listen, timeoutMs: parsed.operationTimeoutMs, channel: name, quoted: quote(name) });
    dialect.warnUnwatchedPool(pool);
  }

  // -------------------------------------------------------------------------------
  // Running queries

  /**
   * Runs `fn(client, deadline)` on a pooled connection within the operation timeout
   * (`deadline` is when, on `performance.now()`, the call gives up). A call that times
   * out gives its connection up (destroyed, not returned to the pool), so a server that
   * stopped answering cannot hold the pool's connections.
   *
   * While the store holds a connection, an 'error' it emits (the server ending the
   * session: a restart, pg_terminate_backend) is the store's to handle: pg's pool
   * listens only to its idle connections. The call then fails with STORE_UNAVAILABLE,
   * or keeps its result if it had it, and the connection is destroyed.
   */
  async #run(what, fn) {
    if (this.#closed) throw new StoreClosedError("locksmith: the PostgreSQL store is closed");
    const ms = this.#options.operationTimeoutMs;
    const deadline = performance.now() + ms;
    let client;
    let released = false;
    let timedOut = false;
    let broken;
    const onError = (err) => {
      broken ??= err;
    };
    const release = (err) => {
      if (client === undefined || released) return;
      released = true;
      // The pool's own listener is back on the connection once it is released.
      client.release(err ?? broken);
      client.removeListener("error", onError);
    };
    const work = (async () => {
      client = await this.#checkOut(onError);
      if (timedOut) {
        release(new Error("timed out"));
        return undefined;
      }
      try {
        await this.#ensureSchema(client);
        const result = await fn(client, deadline);
        release();
        return result;
      } catch (err) {
        if (inTransaction.has(client)) {
          inTransaction.delete(client);
          // A failed transaction is rolled back by destroying the connection.
          release(err);
        } else {
          release(dialect.isConnectionError(err) ? err : undefined);
        }
        throw err;
      }
    })();
    const giveUp = () => {
      timedOut = true;
      release(new Error("timed out"));
    };
    return core.withinTimeout(work, { what, ms, label: "PostgreSQL", giveUp, storeError: dialect.storeError });
  }

  /**
   * A connection from the pool, with `onError` listening to it from the moment the pool
   * hands it over: pg's pool calls a callback at once (a promise would resolve a tick
   * later, and an error in between, such as a FATAL that arrived with the connection's
   * first answer, would be unhandled). A pool that only returns a promise works too.
   */
  #checkOut(onError) {
    return new Promise((resolve, reject) => {
      let settled = false;
      const done = (err, client) => {
        if (settled) return;
        settled = true;
        if (err || client == null) {
          reject(err ?? new Error("the pool gave no connection"));
          return;
        }
        client.on("error", onError);
        resolve(client);
      };
      let returned;
      try {
        returned = this.#pool.connect(done);
      } catch (err) {
        done(err);
        return;
      }
      if (returned !== null && typeof returned?.then === "function") returned.then((client) => done(undefined, client), done);
    });
  }

  /**
   * Creates the table, its permits table and its sequence if any is missing, once per
   * store (again only after a failure). The value columns are tried once with them: when
   * they could not be added (see createSchema), holder() and proclaim() say why, and no
   * later call takes the table's lock for them again.
   */
  async #ensureSchema(client) {
    this.#schemaReady ??= dialect.createSchema(client, this.#sql, this.#options).then(
      (skipped) => {
        this.#valueColumnsSkipped = skipped;
        this.#listener.start();
      },
      (err) => {
        this.#schemaReady = undefined;
        throw err;
      },
    );
    return this.#schemaReady;
  }

  /**
   * Runs `fn` inside one READ COMMITTED transaction on one connection, whatever the
   * database's default (each statement after the key's advisory lock sees what the lock's
   * previous holder committed; a snapshot taken before the lock would not). Its statements each have a
   * server-side timeout below what is left of the call's time, and the server ends the
   * session if the client leaves the transaction idle that long: so what the client
   * abandons (it timed out, and closed the connection) does not go on, or hold its
   * locks, on the server. If the client gives up during COMMIT, the transaction may
   * still commit: callers that take a hold clean up after a failure (see #cleanUp).
   */
  #transaction(what, fn) {
    return this.#run(what, async (client, deadline) => {
      inTransaction.add(client);
      const left = serverTimeoutMs(deadline - performance.now());
      await client.query(
        `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL statement_timeout = ${left}; SET LOCAL idle_in_transaction_session_timeout = ${Math.max(left, this.#options.operationTimeoutMs)}`,
      );
      const result = await fn(client);
      await client.query("COMMIT");
      inTransaction.delete(client);
      return result;
    });
  }

  /** Takes the per-key advisory lock under which holds of `name` ("lock:k", "semaphore:k", "rw:k") change, until the transaction ends. */
  #serialize(client, name) {
    return client.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", [this.#sql.lockspace, name]);
  }

  /** Deletes `owner`'s row of `key` (a hold or a writer's claim) under the key's advisory lock, and announces the release. */
  async #freeOwn(client, kind, key, owner) {
    const { permits, channel } = this.#sql;
    if (kind === "lock") {
      await this.#serialize(client, `lock:${key}`);
      // With a fair lock's mark and place, if the attempt was fair.
      await pgPermits.freeLock(this.#sql, client, key, owner);
    } else {
      await this.#serialize(client, `${kind}:${key}`);
      await client.query(`WITH gone AS (DELETE FROM ${permits} WHERE kind = $1 AND key = $2 AND owner = $3 RETURNING 1) SELECT pg_notify($4, $5) FROM gone`, [
        kind,
        key,
        owner,
        channel,
        `${kind}:${key}`,
      ]);
    }
  }

  /** Deletes a bounded number of expired rows, at most every few seconds, in the background. */
  #maybeSweep() {
    const now = Date.now();
    if (this.#sweeping || now - this.#lastSweep < core.SWEEP_INTERVAL_MS) return;
    this.#lastSweep = now;
    const { locks, permits } = this.#sql;
    this.#sweeping = this.#run("a cleanup", async (client) => {
      // SKIP LOCKED: rows another process is changing (or sweeping) are left to it; the
      // outer condition keeps a row that was taken again meanwhile.
      await client.query(
        `DELETE FROM ${locks} WHERE key IN (
          SELECT key FROM ${locks} WHERE expires_at < clock_timestamp() LIMIT ${SWEEP_ROWS} FOR UPDATE SKIP LOCKED
        ) AND expires_at < clock_timestamp()`,
      );
      // A writer's hold swept away ends it: the readers waiting for it take their turn.
      await client.query(
        `WITH gone AS (
           DELETE FROM ${permits} WHERE (kind, key, owner) IN (
             SELECT kind, key, owner FROM ${permits} WHERE expires_at < clock_timestamp() LIMIT ${SWEEP_ROWS} FOR UPDATE SKIP LOCKED
           ) AND expires_at < clock_timestamp()
           RETURNING kind, key, role
         )
         UPDATE ${permits} AS p SET role = 'turn' FROM (SELECT DISTINCT kind, key FROM gone WHERE role = 'write') AS w
         WHERE p.kind = w.kind AND p.key = w.key AND p.role = 'waiting' AND p.expires_at > clock_timestamp()`,
      );
    })
      .catch(noop)
      .finally(() => {
        this.#sweeping = undefined;
      });
  }

  // -------------------------------------------------------------------------------
  // The LockStore contract

  /**
   * `acquire()` answering the hold's fencing token (how locks get it), or false.
   *
   * The token is drawn by a second statement, once the hold is committed. Drawn in the
   * insert itself it could be stale: PostgreSQL computes the inserted values before the
   * statement waits for a row lock, so an insert that waited out a whole later hold (and
   * its release) would carry a token older than that hold's. Drawn after the hold, while
   * nobody else can take the key, it is larger than every earlier holder's, which each
   * drew theirs before releasing.
   */
  [ACQUIRE_TOKEN](key, owner, ttlMs) {
    return this.#cleanups.inTurn("lock", key, owner, () => this.#acquire(key, owner, ttlMs));
  }

  async #acquire(key, owner, ttlMs) {
    const { locks, permits, sequence } = this.#sql;
    const cleanup = await this.#cleanups.takeOver("lock", key, owner);
    // One transaction under the key's advisory lock: abandoned by the client it rolls
    // back, and a cleanup after it (see #cleanUp) waits for its end.
    const token = await this.#transaction("acquire", async (client) => {
      await cleanup.free?.(client);
      await this.#serialize(client, `lock:${key}`);
      // Not while the key is fair (a fair hold's mark or a waiter's place lives): told
      // apart from "held" in the same statement.
      const { rows: taking } = await client.query(
        `WITH f AS (SELECT EXISTS (SELECT 1 FROM ${permits} WHERE kind = 'lock' AND key = $1 AND expires_at > clock_timestamp()) AS fair),
         taken AS (
           INSERT INTO ${locks} AS held (key, owner, expires_at, fencing_token)
           SELECT $1, $2, ${fromNow(3)}, NULL WHERE NOT (SELECT fair FROM f)
           ON CONFLICT (key) DO UPDATE
             SET owner = excluded.owner, expires_at = excluded.expires_at, fencing_token = NULL
             WHERE held.expires_at <= clock_timestamp()
           RETURNING 1
         )
         SELECT (SELECT fair FROM f) AS fair, EXISTS (SELECT 1 FROM taken) AS taken`,
        [key, owner, ttlMs],
      );
      if (taking[0].fair) return { fair: true };
      if (!taking[0].taken) return false;
      const { rows } = await client.query(
        `UPDATE ${locks} SET fencing_token = ${nextval(sequence)}
         WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()
         RETURNING fencing_token`,
        [key, owner],
      );
      // Expired (or taken over) before it had its token: as good as not taken.
      return rows.length > 0 ? toToken(rows[0].fencing_token) : false;
    }).then(...this.#cleanups.settled(cleanup, "lock", key, owner, ttlMs));
    this.#maybeSweep();
    if (token?.fair) throw fairKey("lock", key);
    return token;
  }

  /**
   * Takes every one of `keys` for `owner` for `ttlMs`, or none, in one transaction (how
   * `lockAll()` takes them here): an array of the holds' fencing tokens, or the index of
   * a key that is held (nothing taken; false when a hold expired mid-way). The keys'
   * advisory locks are taken in one order of their ids, so two transactions over
   * overlapping keys never wait on each other.
   */
  acquireAll(keys, owner, ttlMs) {
    return this.#cleanups.inTurn("lock", keys, owner, () => this.#acquireAll(keys, owner, ttlMs));
  }

  async #acquireAll(keys, owner, ttlMs) {
    const { locks, permits, sequence } = this.#sql;
    const cleanups = [];
    for (const key of keys) cleanups.push(await this.#cleanups.takeOver("lock", key, owner));
    const done = (committed) => {
      for (const cleanup of cleanups) cleanup.done(committed);
    };
    const tokens = await this.#transaction("acquireAll", async (client) => {
      // The keys' advisory locks in ascending order of their ids, not of the keys: two keys
      // can share an id (a 32-bit hash), and only one order of the ids is free of cycles.
      const { rows: ids } = await client.query("SELECT DISTINCT hashtext('lock:' || k) AS id FROM unnest($1::text[]) AS k", [keys]);
      const ordered = ids.map((row) => Number(row.id)).sort((a, b) => a - b);
      for (const id of ordered) await client.query("SELECT pg_advisory_xact_lock(hashtext($1), $2::int)", [this.#sql.lockspace, id]);
      for (const cleanup of cleanups) await cleanup.free?.(client);
      // A key that is fair (a fair hold's mark or a place lives) first, then one that is held.
      const { rows: held } = await client.query(
        `SELECT key, true AS fair FROM ${permits} WHERE kind = 'lock' AND key = ANY($1::text[]) AND expires_at > clock_timestamp()
         UNION ALL SELECT key, false FROM ${locks} WHERE key = ANY($1::text[]) AND expires_at > clock_timestamp()
         ORDER BY fair DESC LIMIT 1`,
        [keys],
      );
      if (held.length > 0 && held[0].fair) return { fair: held[0].key };
      // The index of a key that is held: a waiting lockAll listens for its release.
      if (held.length > 0) return Math.max(0, keys.indexOf(held[0].key));
      await client.query(
        `INSERT INTO ${locks} AS held (key, owner, expires_at, fencing_token)
         SELECT k, $2, ${fromNow(3)}, NULL FROM unnest($1::text[]) AS k
         ON CONFLICT (key) DO UPDATE
           SET owner = excluded.owner, expires_at = excluded.expires_at, fencing_token = NULL
           WHERE held.expires_at <= clock_timestamp()`,
        [keys, owner, ttlMs],
      );
      // Each token drawn once its hold is in place, as acquire's (see there).
      const { rows } = await client.query(
        `UPDATE ${locks} SET fencing_token = ${nextval(sequence)}
         WHERE key = ANY($1::text[]) AND owner = $2 AND expires_at > clock_timestamp()
         RETURNING key, fencing_token`,
        [keys, owner],
      );
      if (rows.length !== keys.length) {
        // One expired before it had its token (a TTL shorter than this transaction): none is taken.
        await client.query(`DELETE FROM ${locks} WHERE key = ANY($1::text[]) AND owner = $2`, [keys, owner]);
        return false;
      }
      const byKey = new Map(rows.map((row) => [row.key, toToken(row.fencing_token)]));
      return keys.map((key) => byKey.get(key));
    }).then(
      (value) => {
        done(true);
        return value;
      },
      (err) => {
        done(false);
        // What the transaction may have taken before its answer was lost is freed, key by key.
        if (err instanceof StoreUnavailableError && !this.#closed) {
          for (const key of keys) this.#cleanups.add("lock", key, owner, ttlMs);
        }
        throw err;
      },
    );
    this.#maybeSweep();
    if (tokens?.fair !== undefined) throw fairKey("lock", tokens.fair);
    return tokens;
  }

  /** Frees `key` if `owner` holds it, and announces the release. */
  release(key, owner) {
    return this.#cleanups.inTurn("lock", key, owner, () => this.#release(key, owner));
  }

  async #release(key, owner) {
    const { locks, channel } = this.#sql;
    const { rows } = await this.#run("release", (client) =>
      client.query(
        `WITH gone AS (
           DELETE FROM ${locks} WHERE key = $1 AND owner = $2 RETURNING expires_at > clock_timestamp() AS live
         )
         SELECT live, pg_notify($3, $4) FROM gone`,
        [key, owner, channel, `lock:${key}`],
      ),
    );
    return rows.length > 0 && rows[0].live === true;
  }

  /** Moves `key`'s expiry to `ttlMs` from now if `owner` holds it. */
  async extend(key, owner, ttlMs) {
    const { rowCount } = await this.#run("extend", (client) =>
      client.query(
        `UPDATE ${this.#sql.locks} SET expires_at = ${fromNow(3)}
         WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()`,
        [key, owner, ttlMs],
      ),
    );
    return rowCount > 0;
  }

  /** Whether anyone holds `key`. */
  async isLocked(key) {
    const { rowCount } = await this.#run("isLocked", (client) =>
      client.query(`SELECT 1 FROM ${this.#sql.locks} WHERE key = $1 AND expires_at > clock_timestamp()`, [key]),
    );
    return rowCount > 0;
  }

  /** Whether `owner` holds `key`. */
  async isHeldBy(key, owner) {
    const { rowCount } = await this.#run("isHeldBy", (client) =>
      client.query(`SELECT 1 FROM ${this.#sql.locks} WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()`, [key, owner]),
    );
    return rowCount > 0;
  }

  /** Milliseconds left on `owner`'s own hold of `key`, or null when not its: one statement (a hold's due check). */
  async ownerRemainingTime(key, owner) {
    const { rows } = await this.#run("ownerRemainingTime", (client) =>
      client.query(
        `SELECT floor(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ms
         FROM ${this.#sql.locks} WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()`,
        [key, owner],
      ),
    );
    return rows.length > 0 ? Math.max(0, rows[0].ms) : null;
  }

  /** Milliseconds until `key`'s hold expires, or null when nobody holds it. */
  async remainingTime(key) {
    const { rows } = await this.#run("remainingTime", (client) =>
      client.query(
        `SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ms
         FROM ${this.#sql.locks} WHERE key = $1 AND expires_at > clock_timestamp()`,
        [key],
      ),
    );
    return rows.length > 0 ? Math.max(0, rows[0].ms) : null;
  }

  /**
   * The live holder of the plain lock `key` in one statement: its owner, fencing token,
   * milliseconds left (rounded up) and the value proclaimed for this hold (its
   * `value_token` is the hold's fencing token; a value left by an earlier hold is not
   * its); null when nobody holds it. The server's clock is read once.
   */
  async holder(key) {
    const { rows } = await this.#run("holder", (client) =>
      client.query(
        `SELECT owner, fencing_token, ceil(extract(epoch FROM expires_at - c.now) * 1000)::float8 AS ms,
           CASE WHEN value_token = fencing_token THEN value END AS value
         FROM ${this.#sql.locks}, (SELECT clock_timestamp() AS now) AS c WHERE key = $1 AND expires_at > c.now`,
        [key],
      ),
    ).catch((err) => this.#failWithoutValueColumns(err));
    return rows.length > 0 ? core.holderOf(rows[0], "PostgreSQL: the fencing sequence") : null;
  }

  /**
   * Keeps `value` with `owner`'s live hold of `key` in one statement, unless the hold
   * keeps a value of a `seq` as large already: whether `owner` holds `key`. The value is
   * tagged with the hold's fencing token, so a later hold of the key (any owner's) starts
   * without one, and an extend keeps it.
   */
  async proclaim(key, owner, value, seq) {
    const bytes = core.proclaimed(value, seq);
    // The SET expressions all read the row as it was. When the value is not replaced the
    // tag is the hold's already.
    const newer = "(value_token IS DISTINCT FROM fencing_token OR value_seq IS NULL OR value_seq < $4::bigint)";
    const { rowCount } = await this.#run("proclaim", (client) =>
      client.query(
        `UPDATE ${this.#sql.locks}
         SET value = CASE WHEN ${newer} THEN $3::bytea ELSE value END,
           value_seq = CASE WHEN ${newer} THEN $4::bigint ELSE value_seq END,
           value_token = fencing_token
         WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()`,
        [key, owner, bytes, seq],
      ),
    ).catch((err) => this.#failWithoutValueColumns(err));
    return rowCount > 0;
  }

  /** holder()'s and proclaim()'s failure on a locks table without the value columns, as the error that says what to add. */
  #failWithoutValueColumns(err) {
    throw core.withoutValueColumns(err, dialect.isMissingColumn, dialect.missingValueColumnsMessage(this.#sql.locks, this.#valueColumnsSkipped));
  }

  // -------------------------------------------------------------------------------
  // Permits: semaphores and read-write locks

  /**
   * `acquirePermit()` answering the hold's fencing token, or false. A semaphore holder
   * takes `weight` of its `limit` permits (default 1): admitted while the live holders'
   * permits and its own fit the limit. Decided under a per-key advisory lock, so
   * concurrent acquirers of one key take turns.
   */
  async [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, weight) {
    const set = checkKind(kind);
    weight = core.checkWeight(kind, limit, weight);
    return this.#cleanups.inTurn(set, key, owner, () => this.#acquirePermit(key, owner, ttlMs, kind, set, limit, weight));
  }

  async #acquirePermit(key, owner, ttlMs, kind, set, limit, weight) {
    const cleanup = await this.#cleanups.takeOver(set, key, owner);
    const settled = this.#cleanups.settled(cleanup, set, key, owner, ttlMs);
    try {
      return await pgPermits.acquirePermit(this.#lent, key, owner, ttlMs, kind, set, limit, weight, cleanup.free, settled);
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
    const { permits, channel } = this.#sql;
    const { rows } = await this.#run("releasePermit", (client) =>
      client.query(
        `WITH gone AS (
           DELETE FROM ${permits} WHERE kind = $1 AND key = $2 AND owner = $3
           RETURNING role, role IN ${HOLDING} AND expires_at > clock_timestamp() AS held
         ),
         turn AS (
           UPDATE ${permits} SET role = 'turn'
           WHERE kind = $1 AND key = $2 AND role = 'waiting' AND EXISTS (SELECT 1 FROM gone WHERE role = 'write')
           RETURNING 1
         )
         SELECT held, pg_notify($4, $5) FROM gone`,
        [set, key, owner, channel, `${set}:${key}`],
      ),
    );
    return rows.some((r) => r.held === true);
  }

  /**
   * Moves the expiry of `owner`'s live permit to `ttlMs` from now. Decided under the
   * key's advisory lock, like acquirePermit, and held until the extend has committed:
   * an acquirer cannot read the permit as expired while an extend that found it live
   * is still committing. Expiry is judged on the server's clock once the lock is held.
   */
  async extendPermit(key, owner, ttlMs, kind) {
    const set = checkKind(kind);
    return this.#transaction("extendPermit", async (client) => {
      await this.#serialize(client, `${set}:${key}`);
      const { rowCount } = await client.query(
        `UPDATE ${this.#sql.permits} SET expires_at = ${fromNow(4)}
         WHERE kind = $1 AND key = $2 AND owner = $3 AND role IN ${HOLDING} AND expires_at > clock_timestamp()`,
        [set, key, owner, ttlMs],
      );
      return rowCount > 0;
    });
  }

  /** How many live permits `key` has: a semaphore's holders' permits, a read-write lock's holders. */
  async countPermits(key, kind) {
    const set = checkKind(kind);
    const { rows } = await this.#run("countPermits", (client) =>
      client.query(
        `SELECT coalesce(sum(permits), 0)::int AS n FROM ${this.#sql.permits}
         WHERE kind = $1 AND key = $2 AND role IN ${HOLDING} AND expires_at > clock_timestamp()`,
        [set, key],
      ),
    );
    return rows[0].n;
  }

  /** Milliseconds left of `owner`'s permit, or null. */
  async permitRemainingTime(key, owner, kind) {
    const set = checkKind(kind);
    const { rows } = await this.#run("permitRemainingTime", (client) =>
      client.query(
        `SELECT ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ms FROM ${this.#sql.permits}
         WHERE kind = $1 AND key = $2 AND owner = $3 AND role IN ${HOLDING} AND expires_at > clock_timestamp()`,
        [set, key, owner],
      ),
    );
    return rows.length > 0 ? Math.max(0, rows[0].ms) : null;
  }

  // -------------------------------------------------------------------------------
  // Fair locks and semaphores (js/stores/postgres-permits.cjs)

  /** A fair handle's attempt (`{ fair: true }`): see docs/stores.md's `acquireFair`. */
  async acquireFair(key, owner, ttlMs, kind, limit, permits, waits) {
    const set = core.fairSet(kind);
    const weight = set === "lock" ? 1 : core.checkWeight(kind, limit, permits);
    return this.#cleanups.inTurn(set, key, owner, async () => {
      const cleanup = await this.#cleanups.takeOver(set, key, owner);
      const settled = this.#cleanups.settled(cleanup, set, key, owner, ttlMs);
      try {
        return await pgPermits.acquireFair(this.#lent, key, owner, ttlMs, set, limit, weight, waits === true, cleanup.free, settled);
      } finally {
        this.#maybeSweep();
      }
    });
  }

  /** Frees a fair lock and its mark, or gives up the owner's place. */
  releaseFair(key, owner) {
    return this.#cleanups.inTurn("lock", key, owner, () => pgPermits.releaseFair(this.#lent, key, owner));
  }

  /** Extends a fair lock and its mark. */
  extendFair(key, owner, ttlMs) {
    return pgPermits.extendFair(this.#lent, key, owner, ttlMs);
  }

  /** What postgres-permits.cjs runs on. */
  get #lent() {
    return {
      sql: this.#sql,
      run: (what, fn) => this.#run(what, fn),
      transaction: (what, fn) => this.#transaction(what, fn),
      serialize: (client, name) => this.#serialize(client, name),
    };
  }

  /**
   * Calls `listener` when `key` may have been freed (a NOTIFY from a release, or the
   * LISTEN connection coming back). Returns the unsubscribe function.
   */
  onRelease(key, listener, kind) {
    return this.#listener.onRelease(key, listener, kind);
  }

  // -------------------------------------------------------------------------------

  /**
   * close(), once the holds are released (see SqlLockStore): later calls fail with
   * StoreClosedError; closes the LISTEN connection and, for a store from `connect()`,
   * its pool.
   */
  async #shutDown() {
    this.#closed = true;
    this.#cleanups.stopTimers();
    await this.#listener.close();
    await this.#sweeping;
    if (this.#ownsPool) await this.#pool.end();
  }
}

module.exports = { PostgresLockStore };
