import type { LockStore, PermitKind } from "locksmith-js";

/** Options of the stores over users' own Redis clients. */
export interface RedisClientStoreOptions {
  /** Prefix of every key (default `"locksmith:"`), as RedisLockStore's `keyPrefix`: use the same to share locks. */
  keyPrefix?: string;
  /** A store call that has not settled by then fails with STORE_UNAVAILABLE (default 10 000 ms). */
  operationTimeoutMs?: number;
  /** Wake waiters on release over a subscriber connection of the store's own (default true). */
  notifyReleases?: boolean;
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
  isLocked(key: string): Promise<boolean>;
  remainingTime(key: string): Promise<number | null>;
  isHeldBy(key: string, owner: string): Promise<boolean>;
  ownerRemainingTime(key: string, owner: string): Promise<number | null>;
  onRelease?(key: string, listener: () => void, kind?: PermitKind): () => void;
  /** Closes the subscriber connection the store opened for wake-ups; the client stays open. */
  close(): Promise<void>;
}
