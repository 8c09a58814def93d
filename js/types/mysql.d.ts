// The public types of `locksmith-js/mysql`. Self-contained (no import of mysql2's types,
// so a project without mysql2 type-checks); a MySqlLockStore is a LockStore.

/** Options of `MySqlLockStore.connect()` and `new MySqlLockStore()`. */
export interface MySqlLockStoreOptions {
  /**
   * The table of plain locks, optionally database-qualified (`"app.locks"`): letters,
   * digits and `_`, at most 40 characters. Beside it live `<table>_permits`,
   * `<table>_keys` and `<table>_fencing`. Default `"locksmith_locks"`.
   */
  table?: string;
  /** Milliseconds after which a call fails with StoreUnavailableError. Default 5000. */
  operationTimeoutMs?: number;
  /**
   * Create the tables if they are missing. Default true. With false, a missing table is a
   * LockStoreError (at `connect()`, or the first call of a store over your pool).
   */
  createTable?: boolean;
}

/** What the store needs of a pool; a `mysql2/promise` pool has it (a callback pool is used through its `.promise()`). */
export interface MySqlPool {
  getConnection(): Promise<any>;
  query(...args: any[]): any;
}

/**
 * Locks in MySQL 8 or MariaDB 10.11 tables, with the server's clock for expiry (to the
 * millisecond), fencing tokens from an AUTO_INCREMENT counter, semaphores with weighted
 * permits and phase-fair read-write locks. Waiters poll at their retryDelay. Also a plain
 * `LockStore`.
 */
export declare class MySqlLockStore {
  /**
   * Connects: with a `mysql://user:password@host:port/database` URL the store makes a pool
   * of its own (`close()` ends it; it does not keep Node alive); with your `mysql2/promise`
   * pool it uses that (`close()` leaves it open). Creates the tables if they are missing.
   * Rejects with StoreUnavailableError when the server cannot be reached in time; with
   * InvalidArgumentError for an unknown or bad option, or a URL that does not start
   * `mysql://`; with LockStoreError when the tables are missing and `createTable` is false.
   */
  static connect(urlOrPool: string | MySqlPool, options?: MySqlLockStoreOptions): Promise<MySqlLockStore>;
  /** A store over your `mysql2/promise` pool; `close()` leaves the pool open. The first call creates the tables if they are missing. */
  constructor(pool: MySqlPool, options?: MySqlLockStoreOptions);
  /** The table's name, as configured. */
  readonly table: string;
  /** Milliseconds after which a call fails with StoreUnavailableError. */
  readonly operationTimeoutMs: number;
  /** True: `acquirePermit()` takes a semaphore holder's number of permits. */
  readonly permitWeights: true;
  /**
   * Releases the holds this process took through the store — locks, permits, read and
   * write holds, lockAll, holds restored here; not those handed off with `serialize()` —
   * within `timeoutMs` (default 2000), aborting each hold's `signal` with a
   * StoreClosedError; waits on the store reject with StoreClosedError; then waits (bounded) for calls under way and pending cleanups, and ends the pool if the store made it (over your pool, call close() before the pool's end()).
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
  /** `permits`: how many of a semaphore's `limit` this holder takes (1 to `limit`, default 1); read-write holds count 1. */
  acquirePermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write", limit?: number, permits?: number): Promise<boolean>;
  releasePermit(key: string, owner: string, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  extendPermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  /** The permits the live holders of `key` have, summed. */
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
}
