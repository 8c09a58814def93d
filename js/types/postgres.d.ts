// The public types of `locksmith-js/postgres`. Self-contained (no import of pg's types, so
// a project without @types/pg type-checks); a PostgresLockStore is a LockStore.

/** Options of `PostgresLockStore.connect()` and `new PostgresLockStore()`. */
export interface PostgresLockStoreOptions {
  /**
   * The table of plain locks, optionally schema-qualified (`"app.locks"`): letters,
   * digits and `_`, at most 40 characters. Beside it live `<table>_permits` and the
   * sequence `<table>_fencing`. Default `"locksmith_locks"`.
   */
  table?: string;
  /** Milliseconds after which a call fails with StoreUnavailableError. Default 5000. */
  operationTimeoutMs?: number;
  /** Wake waiters on release through LISTEN/NOTIFY (one connection per store). Default true; false: waiters poll. */
  listen?: boolean;
  /**
   * Create the tables and sequence if they are missing. Default true. With false, a
   * missing table is a LockStoreError (at `connect()`, or the first call of a store over
   * your pool).
   */
  createTable?: boolean;
}

/** What the store needs of a pool; a `pg.Pool` has it. */
export interface PostgresPool {
  connect(): Promise<any>;
  query(...args: any[]): any;
}

/** A `pg` pool configuration (passed to `new pg.Pool()`; see pg's documentation). */
export interface PostgresPoolConfig {
  connectionString?: string;
  host?: string;
  port?: number;
  user?: string;
  password?: string | (() => string | Promise<string>);
  database?: string;
  ssl?: unknown;
  max?: number;
  connectionTimeoutMillis?: number;
  [option: string]: unknown;
}

/**
 * Locks in a PostgreSQL table, with the server's clock for expiry, fencing tokens from
 * a sequence and LISTEN/NOTIFY wake-ups. Also a plain `LockStore`.
 */
export declare class PostgresLockStore {
  /**
   * Connects with a pool of its own (`close()` ends it; it does not keep Node alive) and
   * creates the table if it is missing. Rejects with StoreUnavailableError when
   * PostgreSQL cannot be reached in time; with InvalidArgumentError for an unknown or bad
   * option, or a URL that does not start `postgres://` or `postgresql://`; with
   * LockStoreError when the table is missing and `createTable` is false.
   */
  static connect(urlOrConfig: string | PostgresPoolConfig, options?: PostgresLockStoreOptions): Promise<PostgresLockStore>;
  /** A store over your `pg.Pool`; `close()` leaves the pool open. The first call creates the table if it is missing. */
  constructor(pool: PostgresPool, options?: PostgresLockStoreOptions);
  /** The table's name, as configured. */
  readonly table: string;
  /** Milliseconds after which a call fails with StoreUnavailableError. */
  readonly operationTimeoutMs: number;
  /**
   * Releases the holds this process took through the store — locks, permits, read and
   * write holds, lockAll, holds restored here; not those handed off with `serialize()` —
   * within `timeoutMs` (default 2000), aborting each hold's `signal` with a
   * StoreClosedError; waits on the store reject with StoreClosedError; then closes the LISTEN connection, and the pool if the store made it (over your `pg.Pool`, call close() before the pool's end()).
   * Later calls fail with StoreClosedError. Rejects with StoreUnavailableError
   * (`holdMayRemain`, `keys`) when a hold could not be released in time (the store is
   * closed all the same); `{ keepHolds: true }` leaves the holds to their TTL.
   */
  close(options?: { keepHolds?: boolean; timeoutMs?: number }): Promise<void>;
  /** Takes `key` if it is free: true, or false (locks get the fencing token by their own path). */
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  isHeldBy(key: string, owner: string): Promise<boolean>;
  /** Milliseconds left on `owner`'s own hold of `key`, or null when not its. */
  ownerRemainingTime(key: string, owner: string): Promise<number | null>;
  remainingTime(key: string): Promise<number | null>;
  /**
   * The live holder of the plain lock `key` (one statement): its owner, fencing token,
   * milliseconds left and the value proclaimed for this hold; null when nobody holds it.
   * Rejects with LockStoreError, naming the columns to add, on a table made before the
   * value columns that the store could not alter.
   */
  holder(key: string): Promise<{ owner: string; fencingToken: number | null; remainingMs: number; value: string | null } | null>;
  /** Keeps `value` with `owner`'s live hold of `key` unless it keeps a newer `seq` (one statement): whether `owner` holds `key`. */
  proclaim(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /** True: a semaphore holder may take several permits (`acquirePermit`'s `permits`, 1 when absent). */
  readonly permitWeights: true;
  /** A semaphore holder takes `permits` of the `limit` (1 when absent); `countPermits` sums them. */
  acquirePermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write", limit?: number, permits?: number): Promise<boolean>;
  releasePermit(key: string, owner: string, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  extendPermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  countPermits(key: string, kind: "semaphore" | "read" | "write"): Promise<number>;
  permitRemainingTime(key: string, owner: string, kind: "semaphore" | "read" | "write"): Promise<number | null>;
  /**
   * A fair lock's or semaphore's attempt (`{ fair: true }`): takes or renews `owner`'s
   * place in the key's queue (when it `waits`), and grants it when first in line with
   * room: the hold's fencing token, or false.
   */
  acquireFair(key: string, owner: string, ttlMs: number, kind: "lock" | "semaphore", limit: number | undefined, permits: number, waits: boolean): Promise<number | false>;
  /** A fair lock's release: frees the hold and its mark, or gives up `owner`'s place. */
  releaseFair(key: string, owner: string): Promise<boolean>;
  /** A fair lock's extend: the hold and its mark. */
  extendFair(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Calls `listener` when `key` may have been released; returns the function that stops it. */
  onRelease(key: string, listener: () => void, kind?: "semaphore" | "read" | "write"): () => void;
}
