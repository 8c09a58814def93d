"use strict";
// What PostgresLockStore and MySqlLockStore share: their options, argument checks and
// error typing, the rules of semaphores and phase-fair read-write locks over a permits
// table, a plain lock's holder and the value it proclaimed (the locks table's value
// columns), and the clean-up after an acquire whose outcome the client could not learn. Each
// store brings its dialect: its SQL, how it reads the server's clock, what serializes a
// key's changes (an advisory lock, a row lock) and which server errors mean "unavailable".

const {
  LockStoreError,
  StoreClosedError,
  StoreUnavailableError,
  checkOptionKeys,
  checkString,
  invalid,
  noteSharedStore,
  typeName,
  checkMs,
  checkPermits,
  checkSeq,
  DATABASE_OPERATION_TIMEOUT_MS,
  DEFAULT_SQL_TABLE,
  ACQUIRE_TOKEN,
  ACQUIRE_PERMIT_TOKEN,
  STORE_NAME,
  releaseHolds,
} = require("../gen/api.cjs");

// The roles of a permits row that hold the key ('fair': a fair semaphore's holder); the
// others wait: a writer's 'claim', a reader 'waiting' for the readers' turn, a reader
// whose 'turn' it is, and a fair waiter's 'place'. A fair lock's hold is a locks row like
// any other, beside its 'mark' in the permits table (kind 'lock'), which neither holds
// nor waits: it says the hold is fair, for as long as the hold lasts.
const HOLDING_ROLES = ["semaphore", "read", "write", "fair"];
// Permits rows that make a key fair while they live: a fair hold or mark, a waiter's place.
const FAIR_ROLES = ["fair", "mark", "place"];
const HOLDING = `(${HOLDING_ROLES.map((r) => `'${r}'`).join(", ")})`;

// Opportunistic cleanup of expired rows: at most this often per store, this many rows.
const SWEEP_INTERVAL_MS = 5_000;
const SWEEP_ROWS = 500;
// An acquire whose outcome the client could not learn (it gave up waiting, or the
// connection broke) may still commit on the server: the store then frees that owner's
// hold itself, retrying this often while the server is out of reach.
const CLEANUP_RETRY_MIN_MS = 100;
const CLEANUP_RETRY_MAX_MS = 2_000;

const noop = () => {};

/**
 * The server-side bound on a statement for a call with `ms` left: a little below it, so
 * the server cancels a statement (and the client hears why) before the client gives up
 * on it and closes the connection. A statement the client abandoned could otherwise
 * still run, and commit, on the server.
 */
const serverTimeoutMs = (ms) => Math.max(1, Math.floor(ms - Math.min(250, ms / 5)));

/**
 * A store's options, checked against its dialect: `className`, the `options` it takes,
 * its `booleans` (name: default), the `tableName` pattern (an optional qualifier, then the
 * name) and what the qualifier is called (`qualifier`: "schema", "database").
 */
function parseOptions(options, dialect) {
  if (options === undefined) options = {};
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw invalid(`${dialect.className} options must be an object; got ${typeName(options)}`);
  }
  checkOptionKeys(options, dialect.options, dialect.className);
  const table = options.table ?? DEFAULT_SQL_TABLE;
  if (typeof table !== "string" || !dialect.tableName.test(table)) {
    throw invalid(
      `table must be a table name (letters, digits and _, at most 40 characters, optionally after "${dialect.qualifier}."); got ${
        typeof table === "string" ? JSON.stringify(table) : typeName(table)
      }`,
    );
  }
  const operationTimeoutMs = checkMs("operationTimeoutMs", options.operationTimeoutMs ?? DATABASE_OPERATION_TIMEOUT_MS);
  const parsed = { table, operationTimeoutMs };
  for (const [name, fallback] of Object.entries(dialect.booleans)) {
    if (options[name] !== undefined && typeof options[name] !== "boolean") {
      throw invalid(`${name} must be a boolean; got ${typeName(options[name])}`);
    }
    parsed[name] = options[name] ?? fallback;
  }
  [, parsed.qualifier, parsed.name] = dialect.tableName.exec(table);
  return parsed;
}

/** A failure of the database, typed: `unavailable(err)` says STORE_UNAVAILABLE (retried by a wait), else STORE_ERROR (a refusal, final). */
function storeError(err, label, unavailable) {
  if (err instanceof StoreUnavailableError || err instanceof LockStoreError || err instanceof StoreClosedError) return err;
  const message = `locksmith: ${label}: ${err?.message ?? String(err)}`;
  const error = unavailable(err) ? new StoreUnavailableError(message) : new LockStoreError(message);
  error.cause = err;
  return error;
}

/** `value` (a bigint column as the driver returns it) as a fencing token JS can carry. */
function toToken(value, source) {
  const token = Number(value);
  if (!Number.isSafeInteger(token) || token < 1) {
    throw new LockStoreError(`locksmith: ${source} gave ${value}, not a positive safe integer`);
  }
  return token;
}

// The columns of the locks table that keep what a plain lock's holder proclaimed
// (holder(), proclaim(): elections' leader(), observe() and value): the value (bytes,
// UTF-8), the fencing token of the hold it was proclaimed for, and its sequence number.
// Nullable, so tables made by an earlier version take them without a rewrite; a table
// without them serves everything but holder() and proclaim().
const VALUE_COLUMNS = ["value", "value_token", "value_seq"];

/**
 * proclaim()'s value and seq, checked as every store checks them (js/api/checks.mjs's
 * `checkSeq`): the value a string, the seq a positive safe integer.
 * Answers the value as the bytes the table keeps. Elections bound the value's size.
 */
function proclaimed(value, seq) {
  checkString("value", value);
  checkSeq(seq);
  return Buffer.from(value, "utf8");
}

/**
 * holder()'s answer from a live plain lock's row ({ owner, fencing_token, ms, value }):
 * `ms` the time left on the server's clock (rounded up, at least 1, since the row was
 * live), `value` the one proclaimed for this hold or null (the statement compares tags).
 */
function holderOf(row, source) {
  const text = (v) => (Buffer.isBuffer(v) ? v.toString("utf8") : String(v));
  return {
    owner: text(row.owner),
    fencingToken: row.fencing_token === null || row.fencing_token === undefined ? null : toToken(row.fencing_token, source),
    remainingMs: Math.max(1, Math.ceil(Number(row.ms))),
    value: row.value === null || row.value === undefined ? null : text(row.value),
  };
}

/**
 * The error of holder() or proclaim() on a locks table without the value columns (made
 * by an earlier version, and not upgraded: createTable false, or no right to alter it):
 * `message` says which columns to add, and how. Other failures pass as they are.
 */
function withoutValueColumns(err, isMissingColumn, message) {
  if (!isMissingColumn(err?.cause ?? err)) return err;
  const error = new LockStoreError(message);
  error.cause = err?.cause ?? err;
  return error;
}

/**
 * A hold's weight: a semaphore's `permits` of its `limit` (undefined: 1), once the limit
 * is a whole number; a read or write hold is 1 (js/api/checks.mjs's `checkPermits`).
 */
function checkWeight(kind, limit, permits) {
  if (kind === "semaphore" && (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1)) {
    throw invalid(`limit must be a whole number of permits, at least 1; got ${typeof limit === "number" ? limit : typeName(limit)}`);
  }
  return checkPermits(kind, limit, permits);
}

/**
 * Whether `owner` may take `weight` permits of `key` (a semaphore of `limit`, or a
 * read-write lock), from the key's live permits rows `rows` ({ owner, role, limit,
 * permits }, read under the key's lock). Answers `{ admitted }`, `{ held }` (the owner
 * holds it already), `{ heldLimit }` (a semaphore held with another limit), and `wait`:
 * the role a refused owner records ('waiting', 'claim') or none.
 *
 * Phase-fair read-write locks: a refused reader waits (role 'waiting') for the readers'
 * turn ('turn'), which starts when a writer's hold ends; readers in it enter past a
 * writer's claim, and no writer enters before them. A waiting writer's claim keeps new
 * readers out until it expires (the first waiting writer's only); a writer's own claim,
 * or a reader's turn, becomes its hold.
 */
function decidePermit(rows, kind, owner, limit, weight) {
  // A fair semaphore (fair holders, or places in its queue) refuses a handle that is not.
  if (rows.some((r) => FAIR_ROLES.includes(r.role))) return { fair: true };
  const holders = rows.filter((r) => HOLDING_ROLES.includes(r.role));
  if (holders.some((r) => r.owner === owner)) return { held: true };
  // Every handle of a semaphore must agree on its limit while it is held.
  const heldLimit = holders.find((r) => r.limit !== null && r.limit !== undefined)?.limit;
  if (kind === "semaphore" && heldLimit !== undefined && heldLimit !== limit) return { heldLimit };
  const claim = rows.find((r) => r.role === "claim");
  const inTurn = rows.some((r) => r.role === "turn" && r.owner === owner);
  const admitted =
    kind === "semaphore"
      ? holders.reduce((sum, r) => sum + r.permits, 0) + weight <= limit
      : kind === "read"
        ? !holders.some((r) => r.role === "write") && (!claim || inTurn)
        : holders.length === 0 && !rows.some((r) => r.role === "turn") && (!claim || claim.owner === owner);
  if (admitted) return { admitted: true };
  const wait = kind === "read" && !inTurn ? "waiting" : kind === "write" && (!claim || claim.owner === owner) ? "claim" : undefined;
  return { admitted: false, wait };
}

/** The set of a fair handle's `kind`: "lock" or "semaphore" (read-write locks are phase-fair, never `fair`). */
function fairSet(kind) {
  if (kind === "lock" || kind === "semaphore") return kind;
  throw invalid(`a fair handle is a lock or a semaphore; got ${typeof kind === "string" ? JSON.stringify(kind) : typeName(kind)}`);
}

/**
 * A fair attempt (`acquireFair`) of `owner` for `weight` permits of `key`, a fair lock
 * (`kind` "lock") or a fair semaphore of `limit`, from the key's live permits rows `rows`
 * ({ owner, role, limit, permits, arrival }: a place's `arrival` is the number it drew
 * when it joined the queue) and, for a lock, its live holder's owner (`lockHolder`, or
 * null), all read under the key's lock. Answers `{ unfair }` (held by handles that are
 * not fair), `{ held }` (the owner holds it already), `{ heldLimit }`, `{ grant, others,
 * roomLeft }` (first in line with room: take it; `others` still wait, and a semaphore has
 * permits left for the next of them) or `{ place }`: what to do
 * with the owner's place ("renew", "take" at the end, "drop", or undefined: nothing).
 */
function decideFair(rows, kind, owner, limit, weight, waits, lockHolder) {
  let room;
  let roomLeft = false;
  if (kind === "lock") {
    if (lockHolder !== null && !rows.some((r) => r.role === "mark" && r.owner === lockHolder)) return { unfair: true };
    if (lockHolder === owner) return { held: true };
    room = lockHolder === null;
  } else {
    const holders = rows.filter((r) => HOLDING_ROLES.includes(r.role));
    if (holders.some((r) => r.role !== "fair")) return { unfair: true };
    if (holders.some((r) => r.owner === owner)) return { held: true };
    const heldLimit = holders.find((r) => r.limit !== null && r.limit !== undefined)?.limit;
    if (heldLimit !== undefined && heldLimit !== limit) return { heldLimit };
    const used = holders.reduce((sum, r) => sum + r.permits, 0);
    room = used + weight <= limit;
    roomLeft = used + weight < limit;
  }
  const places = rows.filter((r) => r.role === "place").sort((a, b) => a.arrival - b.arrival);
  const mine = places.find((r) => r.owner === owner);
  // First in line: its place heads the queue, or it has none and nobody waits.
  if ((mine === undefined ? places.length === 0 : places[0] === mine) && room) {
    return { grant: true, others: places.some((r) => r !== mine), roomLeft };
  }
  return { place: waits ? (mine ? "renew" : "take") : mine ? "drop" : undefined };
}

const turnId = (kind, key, owner) => `${kind}\u0000${key}\u0000${owner}`;

/**
 * Acquires whose outcome comes late, or never. An acquire the caller gave up on (the JS
 * store bridge stopped waiting, a signal aborted the wait, the store's own timeout fired)
 * may still be running in this store, on one pooled connection, and commit later.
 *
 * - Turns: the calls that take or free the holds of one owner on one key (acquire,
 *   acquireAll, acquirePermit, release, releasePermit) run one at a time in this store,
 *   in the order they were made (`inTurn`). A release sent when an acquire was given up
 *   on waits for that acquire to settle, then frees what it took: it cannot overtake it
 *   on another connection, find nothing, and leave a hold nobody owns. A waiting lock's
 *   next attempt (the same owner, in core's scheme of an owner token per handle) starts
 *   once the earlier one has settled and registered its clean-up, if any. The wait is
 *   bounded by the store's own operationTimeoutMs for each call before it (each gives
 *   up then, its connection destroyed, and the server's statement bound, a little
 *   shorter, has stopped its statement already); a clean-up an acquire takes over adds
 *   at most one more.
 * - Clean-ups: an acquire that failed without a certain answer (it timed out, or the
 *   connection broke) may still commit on the server, so its hold is freed, under the
 *   key's lock (after the abandoned transaction, which held it to its end, is over),
 *   retried while the server is out of reach, until the hold, if any, expired anyway.
 *   A clean-up undoes only the attempt it was made for: it is registered before the
 *   owner's next call on the key starts (turns), and that call, if an acquire, takes it
 *   over (see takeOver) and frees the row in its own transaction before it takes the key,
 *   so no clean-up runs after a later attempt of the same owner was granted.
 *
 * The store gives `transaction(what, fn)`, `freeOwn(connection, kind, key,
 * owner)` (deletes the owner's row under the key's lock), `closed()` (no more retries)
 * and `ending()` (nothing may run any more).
 */
class Cleanups {
  #store;
  // Timers of pending cleanups.
  #timers = new Set();
  // Cleanups by kind, key and owner: { until, timer, running, acquiring, attempt }.
  #pending = new Map();
  // The last call of each turn (by kind, key and owner), settled: what the next one waits for.
  #last = new Map();

  constructor(store) {
    this.#store = store;
  }

  /**
   * Runs `fn()` once every call made before it for the same owner on the same keys
   * (`kind` "lock", "semaphore" or "rw"; one key or an array) has settled: its answer,
   * and the clean-up it registered, if any. The first call of a turn runs at once.
   */
  inTurn(kind, keys, owner, fn) {
    const ids = (Array.isArray(keys) ? keys : [keys]).map((key) => turnId(kind, key, owner));
    const before = [];
    for (const id of ids) {
      const last = this.#last.get(id);
      if (last !== undefined && !before.includes(last)) before.push(last);
    }
    const result = before.length === 0 ? fn() : Promise.all(before).then(fn);
    const settled = result.then(noop, noop);
    for (const id of ids) this.#last.set(id, settled);
    settled.then(() => {
      for (const id of ids) if (this.#last.get(id) === settled) this.#last.delete(id);
    });
    return result;
  }

  /** After an acquire of `key` for `owner` failed without a certain answer: frees what it may yet have taken. */
  add(kind, key, owner, ttlMs) {
    const id = turnId(kind, key, owner);
    const store = this.#store;
    const until = performance.now() + ttlMs + store.operationTimeoutMs;
    const existing = this.#pending.get(id);
    if (existing) {
      // The same owner's acquire failed again: one cleanup, until the later expiry.
      existing.until = Math.max(existing.until, until);
      return;
    }
    const entry = { until, timer: undefined, running: null, acquiring: false, attempt: undefined };
    this.#pending.set(id, entry);
    let delay = CLEANUP_RETRY_MIN_MS;
    const again = () => {
      if (store.closed() || performance.now() + delay > entry.until) {
        if (this.#pending.get(id) === entry) this.#pending.delete(id);
        return;
      }
      this.#schedule(entry, attempt, delay);
      delay = Math.min(CLEANUP_RETRY_MAX_MS, delay * 2);
    };
    const attempt = () => {
      this.#timers.delete(entry.timer);
      if (store.ending() || this.#pending.get(id) !== entry) return;
      // The same owner's acquire is under way: it frees the row itself, in its own
      // transaction, before it takes the key (see takeOver).
      if (entry.acquiring) return again();
      entry.running = store
        .transaction("a cleanup", (connection) => store.freeOwn(connection, kind, key, owner))
        .then(
          () => {
            entry.running = null;
            if (this.#pending.get(id) === entry) this.#pending.delete(id);
          },
          () => {
            entry.running = null;
            again();
          },
        );
    };
    entry.attempt = attempt;
    // While close() waits: once, now (close() waits for it too).
    if (store.closed()) return attempt();
    this.#schedule(entry, attempt, 0);
  }

  #schedule(entry, attempt, delay) {
    entry.timer = setTimeout(attempt, delay);
    entry.timer.unref?.();
    this.#timers.add(entry.timer);
  }

  /**
   * Before an acquire of `key` for `owner`: a cleanup still pending after an earlier
   * failed acquire of the same owner (a waiting Lock retries with its owner) must not
   * run after this acquire took the key, or it would free a granted hold. Waits for a
   * cleanup attempt under way and holds the others off; answers `free(connection)`,
   * which frees the row inside the acquire's own transaction (before it takes the key),
   * or none when there is nothing left to free, and `done(committed)`, which ends it.
   */
  async takeOver(kind, key, owner) {
    const id = turnId(kind, key, owner);
    const entry = this.#pending.get(id);
    if (!entry) return { free: undefined, done: noop };
    entry.acquiring = true;
    await entry.running?.catch(noop);
    if (this.#pending.get(id) !== entry) {
      entry.acquiring = false;
      return { free: undefined, done: noop };
    }
    return {
      free: (connection) => this.#store.freeOwn(connection, kind, key, owner),
      done: (committed) => {
        entry.acquiring = false;
        if (committed && this.#pending.get(id) === entry) {
          this.#pending.delete(id);
          clearTimeout(entry.timer);
          this.#timers.delete(entry.timer);
        }
      },
    };
  }

  /** An acquire's settle handlers: end the cleanup it took over, then its value; or its failure, after a cleanup if it may have taken the key. */
  settled(cleanup, kind, key, owner, ttlMs) {
    return [
      (value) => {
        cleanup.done(true);
        return value;
      },
      (err) => {
        cleanup.done(false);
        if (err instanceof StoreUnavailableError && !this.#store.ending() && typeof ttlMs === "number" && ttlMs > 0) this.add(kind, key, owner, ttlMs);
        throw err;
      },
    ];
  }

  /** Stops the retry timers (the store is closing). */
  stopTimers() {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  /** Tries each pending cleanup not under way once more, now (the store is closing and waits for them). */
  runPendingOnce() {
    for (const entry of [...this.#pending.values()]) {
      if (entry.running === null && !entry.acquiring) entry.attempt?.();
    }
  }

  /** Forgets every pending cleanup. */
  clear() {
    this.#pending.clear();
  }
}

/**
 * What both stores' classes have alike: their name for diagnostics, weighted permits, the
 * table and timeout they were made with, the boolean answers of acquire and acquirePermit,
 * and close(), which releases the process's holds and then runs the store's own
 * `shutDown()` once, keeping Node alive until it is done.
 */
class SqlLockStore {
  #name;
  #className;
  #options;
  #shutDown;
  #closing;

  constructor(name, className, options, shutDown) {
    this.#name = name;
    this.#className = className;
    this.#options = options;
    this.#shutDown = shutDown;
    noteSharedStore(this);
  }

  get [STORE_NAME]() {
    return this.#name;
  }

  /** A semaphore hold may take several permits (acquirePermit's 6th argument; the permits table's `permits` column). */
  get permitWeights() {
    return true;
  }

  /** The table's name, as given (qualified or not). */
  get table() {
    return this.#options.table;
  }

  /** Milliseconds after which a call fails with STORE_UNAVAILABLE. */
  get operationTimeoutMs() {
    return this.#options.operationTimeoutMs;
  }

  /**
   * Takes `key` for `owner` for `ttlMs` if it is free (or its hold expired): true, or
   * false. Locks get the hold's fencing token through [ACQUIRE_TOKEN].
   */
  async acquire(key, owner, ttlMs) {
    return (await this[ACQUIRE_TOKEN](key, owner, ttlMs)) !== false;
  }

  /**
   * Admits `owner` to the semaphore or read-write lock `key` (see docs/stores.md): true,
   * or false. A semaphore holder may take `permits` of the `limit` (default 1). Locks get
   * the hold's fencing token through [ACQUIRE_PERMIT_TOKEN].
   */
  async acquirePermit(key, owner, ttlMs, kind, limit, permits) {
    return (await this[ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits)) !== false;
  }

  /**
   * Releases the holds this process took through the store (within `timeoutMs`, 2 s by
   * default; `keepHolds: true` leaves them to their TTL), then closes the store: later
   * calls fail with StoreClosedError. A pool you passed in stays open (close() comes
   * before its end()).
   */
  async close(options) {
    const released = await releaseHolds(this, options, this.#className);
    this.#closing ??= closing(this.#shutDown);
    await this.#closing;
    released.check();
  }
}

/**
 * The database's driver package (an optional peer dependency) as `load()` requires it, or
 * the error that says to install it. The stores pass `() => require("pg")`, so bundlers see
 * which package it is.
 */
function loadDriver(load, className, name) {
  try {
    return load();
  } catch (err) {
    const error = new LockStoreError(`locksmith: ${className}.connect() needs the \`${name}\` package: npm install ${name}`);
    error.cause = err;
    throw error;
  }
}

/** A store that `connect()` made over a pool of its own, once its first call (`first()`) has run; closed if that fails. */
async function opened(store, first) {
  try {
    await first();
  } catch (err) {
    await store.close().catch(noop);
    throw err;
  }
  return store;
}

/**
 * A call's answer, or STORE_UNAVAILABLE once `ms` have passed without one (`work`, the
 * call's promise, may settle later: nobody waits for it then). At the timeout
 * `giveUp()` runs first: the store gives the call's connection up, so a server that
 * stopped answering cannot keep the pool's connections. Any failure is typed by the
 * dialect's `storeError`; `label` names the database in the message.
 */
async function withinTimeout(work, { what, ms, label, giveUp, storeError }) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      giveUp();
      reject(new StoreUnavailableError(`locksmith: ${label} did not answer ${what} within ${ms} ms`));
    }, ms);
  });
  work.catch(noop);
  try {
    return await Promise.race([work, timeout]);
  } catch (err) {
    throw storeError(err);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `close()`, a store's closing, once; `await store.close()` keeps Node alive until it
 * is done (the store's sockets do not, so a timer does while they close).
 */
async function closing(close) {
  const alive = setInterval(noop, 60_000);
  try {
    await close();
  } finally {
    clearInterval(alive);
  }
}

module.exports = {
  FAIR_ROLES,
  HOLDING,
  HOLDING_ROLES,
  SWEEP_INTERVAL_MS,
  SWEEP_ROWS,
  VALUE_COLUMNS,
  Cleanups,
  SqlLockStore,
  checkWeight,
  decideFair,
  fairSet,
  decidePermit,
  holderOf,
  loadDriver,
  noop,
  opened,
  parseOptions,
  proclaimed,
  serverTimeoutMs,
  storeError,
  toToken,
  withinTimeout,
  withoutValueColumns,
};
