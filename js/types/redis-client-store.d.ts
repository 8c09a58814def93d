import type { CloseOptions, LockStore, PermitKind } from "locksmith-js";

/** Options of the stores over users' own Redis clients. */
export interface RedisClientStoreOptions {
  /** Prefix of every key (default `"locksmith:"`), as RedisLockStore's `keyPrefix`: use the same to share locks. */
  keyPrefix?: string;
  /** A store call that has not settled by then fails with STORE_UNAVAILABLE (default 10 000 ms). */
  operationTimeoutMs?: number;
  /** Wake waiters on release over a subscriber connection of the store's own (default true). */
  notifyReleases?: boolean;
  /**
   * `false`: a lock's acquire is one plain `SET key owner NX PX ttl GET` (no script) and
   * its hold has no fencing token, as with RedisLockStore's `fencing: false` (default true).
   */
  fencing?: boolean;
}

/** A lock store over a Redis client the application already has. */
export declare class RedisClientStore implements LockStore {
  /** The prefix of every key this store writes. */
  readonly keyPrefix: string;
  readonly operationTimeoutMs: number;
  /** The Redis key of the lock `key`: `<prefix>{<key>}`. */
  lockKey(key: string): string;
  /** `true` when taken, `false` when held (locks get the fencing token by their own path). */
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** A fair lock's or semaphore's attempt (`{ fair: true }`). */
  acquireFair(key: string, owner: string, ttlMs: number, kind: "lock" | "semaphore", limit: number | undefined, permits: number, waits: boolean): Promise<boolean | number>;
  /** A fair lock's release: frees the hold, or gives up `owner`'s place in the queue. */
  releaseFair(key: string, owner: string): Promise<boolean>;
  /** A fair lock's extend: its fair mark kept at least as long. */
  extendFair(key: string, owner: string, ttlMs: number): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  remainingTime(key: string): Promise<number | null>;
  isHeldBy(key: string, owner: string): Promise<boolean>;
  ownerRemainingTime(key: string, owner: string): Promise<number | null>;
  onRelease?(key: string, listener: () => void, kind?: PermitKind): () => void;
  /**
   * The live holder of the plain lock `key` (an election's leader): its owner token, the
   * fencing token its acquire minted (null with `fencing: false`), the milliseconds it has
   * left and the value it proclaimed (kept in `<prefix>{<key>}:value`), or null when nobody
   * holds it.
   */
  holder(key: string): Promise<{ owner: string; fencingToken: number | null; remainingMs: number; value: string | null } | null>;
  /** Keeps `value` with `owner`'s live hold of `key`, unless the hold keeps one with a `seq` as large: `true` when `owner` holds `key`. */
  proclaim(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /**
   * Releases the holds this process took through the store — locks, permits, read and
   * write holds, lockAll, holds restored here; not those handed off with `serialize()` —
   * within `timeoutMs` (default 2000), aborting each hold's `signal` with a
   * StoreClosedError; waits on the store reject with StoreClosedError; then closes the subscriber connection the store opened for wake-ups; your client stays open (call close() before its quit()).
   * Later calls fail with StoreClosedError. Rejects with StoreUnavailableError
   * (`holdMayRemain`, `keys`) when a hold could not be released in time (the store is
   * closed all the same); `{ keepHolds: true }` leaves the holds to their TTL.
   */
  close(options?: CloseOptions): Promise<void>;
}
