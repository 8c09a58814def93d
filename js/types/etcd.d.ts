// The public types of `locksmith-js/etcd`. An EtcdLockStore is a LockStore.

/** Options of `EtcdLockStore.connect()`. */
export interface EtcdLockStoreOptions {
  /**
   * The members' client URLs: `http://host:2379`, or `https://` for TLS (trusted through
   * the runtime's certificate store, or a `fetch` of yours). One is enough; give several
   * (or all) so the store can move on when one is down. A login may go in the URL
   * (`http://user:password@host:2379`) instead of `username`/`password`.
   */
  endpoints: string | readonly string[];
  /** Put before every etcd key of the store. Default `"locksmith/"`. */
  keyPrefix?: string;
  /** etcd's authentication: the user to log in as (`/v3/auth/authenticate`). */
  username?: string;
  /** The user's password. */
  password?: string;
  /** Milliseconds after which a call fails with StoreUnavailableError. Default 5000. */
  operationTimeoutMs?: number;
  /** Wake waiters on release through a watch (one streamed request while anyone waits). Default true; false: waiters poll. */
  notifyReleases?: boolean;
  /** The `fetch` to use (default: the runtime's), e.g. one with a private CA or client certificates. */
  fetch?: (input: string, init: { method: string; headers: Record<string, string>; body: string; signal: AbortSignal }) => Promise<Response>;
}

/**
 * Locks in etcd (v3.4 or newer) over its JSON gateway: a lease per hold, transactions for
 * every change, the key's create revision as fencing token, a watch for wake-ups.
 * Consensus-backed: a hold survives the loss of any minority of members, the leader
 * included. Also a plain `LockStore`.
 */
export declare class EtcdLockStore {
  /**
   * Connects to a URL, a list of URLs, or `{ endpoints, ... }`; logs in when given a
   * login; checks that a member answers and runs etcd 3.4 or newer. Rejects with
   * InvalidArgumentError for an unknown or bad option, StoreUnavailableError when no
   * member answers in time, LockStoreError when etcd refuses the login or is too old.
   */
  static connect(urlOrOptions: string | readonly string[] | EtcdLockStoreOptions): Promise<EtcdLockStore>;
  /** Connects to `endpoints` with `options` (the same as `connect({ ...options, endpoints })`). */
  static connect(endpoints: string | readonly string[], options?: Omit<EtcdLockStoreOptions, "endpoints">): Promise<EtcdLockStore>;
  private constructor(options: never);
  /** The prefix of every etcd key of this store. */
  readonly keyPrefix: string;
  /** Milliseconds after which a call fails with StoreUnavailableError. */
  readonly operationTimeoutMs: number;
  /** The etcd key of the plain lock on `key`. */
  lockKey(key: string): string;
  /** The prefix of the etcd keys of the semaphore (`"semaphore"`) or read-write lock (`"read"`, `"write"`) on `key`. */
  permitPrefix(key: string, kind: "semaphore" | "read" | "write"): string;
  /** The prefix of the etcd keys of the places in the fair queue of the plain lock (`"lock"`) or semaphore (`"semaphore"`) on `key`. */
  fairQueuePrefix(key: string, kind: "lock" | "semaphore"): string;
  /**
   * Releases the holds this process took through the store — locks, permits, read and
   * write holds, lockAll, holds restored here; not those handed off with `serialize()` —
   * within `timeoutMs` (default 2000), aborting each hold's `signal` with a
   * StoreClosedError; waits on the store reject with StoreClosedError; then stops the watch.
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
  /** Milliseconds left on `owner`'s own hold of `key`, or null when not its (1 for a hold this store did not set). */
  ownerRemainingTime(key: string, owner: string): Promise<number | null>;
  remainingTime(key: string): Promise<number | null>;
  /**
   * The holder of the plain lock on `key` (owner, fencing token, time left, the value it
   * proclaimed), or null when it is free. Time left: to the millisecond for a hold this
   * store set, else from its lease (whole seconds).
   */
  holder(key: string): Promise<{ owner: string; fencingToken: number; remainingMs: number; value: string | null } | null>;
  /** Keeps `value` with `owner`'s live hold of `key` (under its lease) unless the hold keeps one of a `seq` as high already: whether `owner` holds `key`. */
  proclaim(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /** True: a semaphore holder may take several permits (`acquirePermit`'s `permits`, 1 when absent). */
  readonly permitWeights: true;
  /** A semaphore holder takes `permits` of the `limit` (1 when absent); `countPermits` sums them. */
  acquirePermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write", limit?: number, permits?: number): Promise<boolean>;
  releasePermit(key: string, owner: string, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  /**
   * A fair handle's attempt: `owner` takes or renews its place in the fair queue of the plain
   * lock or the semaphore on `key` and is granted when first in line with room: the hold's
   * fencing token, or false. One that does not `waits` keeps no place.
   */
  acquireFair(key: string, owner: string, ttlMs: number, kind: "lock" | "semaphore", limit: number | undefined, permits: number, waits: boolean): Promise<number | false>;
  extendPermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  countPermits(key: string, kind: "semaphore" | "read" | "write"): Promise<number>;
  permitRemainingTime(key: string, owner: string, kind: "semaphore" | "read" | "write"): Promise<number | null>;
  /** Calls `listener` when `key` may have been released; returns the function that stops it. Absent with `notifyReleases: false`. */
  onRelease?(key: string, listener: () => void, kind?: "semaphore" | "read" | "write"): () => void;
}
