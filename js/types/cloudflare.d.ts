// locksmith-js/cloudflare: locks in Durable Objects, for Cloudflare Workers.
// The runtime's types ("cloudflare:workers") come from @cloudflare/workers-types or the
// file `wrangler types` writes, as in every Workers project.
import { DurableObject } from "cloudflare:workers";
import type { CloseOptions, LockStore } from "./index.js";

/**
 * The Durable Object class that holds the locks of one key: its plain lock, semaphore
 * and read-write lock, with fencing tokens, expiry by alarm, and waiters that wait inside
 * it. Re-export it from your worker's main module and bind it (`durable_objects.bindings`
 * with `class_name = "LockDurableObject"`, and a migration that adds the class).
 * Its methods are called by `DurableObjectLockStore` over Durable Object RPC. It is the
 * runtime's `DurableObject` (so `DurableObjectNamespace<LockDurableObject>`, as
 * `wrangler types` writes the binding, is a namespace of it); `Env` is the worker's bindings.
 */
export declare class LockDurableObject<Env = unknown> extends DurableObject<Env> {
  acquire(owner: string, ttlMs: number): number | false;
  release(owner: string): boolean;
  extend(owner: string, ttlMs: number): boolean;
  isLocked(): boolean;
  isHeldBy(owner: string): boolean;
  ownerRemainingTime(owner: string): number | null;
  remainingTime(): number | null;
  /** The plain lock's holder, with the value it proclaimed (or null); null when the lock is free. */
  holder(): { owner: string; fencingToken: number; remainingMs: number; value: string | null } | null;
  /** Keeps `value` with `owner`'s hold unless it keeps one of a `seq` as high already: whether `owner` holds the lock. */
  proclaim(owner: string, value: string, seq: number): boolean;
  /**
   * `waitId`: the store's wait that a refused contender listens on (see `waitForRelease`);
   * `permits`: a semaphore holder's permits, 1 when absent.
   */
  acquirePermit(owner: string, ttlMs: number, kind: "semaphore" | "read" | "write", limit: number, waitId?: string, permits?: number): number | false;
  releasePermit(owner: string, kind: "semaphore" | "read" | "write"): boolean;
  extendPermit(owner: string, ttlMs: number, kind: "semaphore" | "read" | "write"): boolean;
  countPermits(kind: "semaphore" | "read" | "write"): number;
  permitRemainingTime(owner: string, kind: "semaphore" | "read" | "write"): number | null;
  /** Pending until the key may have been freed (or `cancelWait(id)`, or at most 10 s). */
  waitForRelease(id: string, kind: "lock" | "semaphore" | "read" | "write", capMs?: number): "free" | "released" | "cancelled" | "cap" | Promise<"released" | "cancelled" | "cap">;
  cancelWait(id: string): boolean;
  alarm(): Promise<void>;
}

/** The parts of a Durable Object namespace binding (`env.LOCKS`) the store uses. */
export interface LockDurableObjectNamespace {
  idFromName(name: string): unknown;
  get(id: any, options?: { locationHint?: string }): any;
}

/** Options of `new DurableObjectLockStore(namespace, options)`. */
export interface DurableObjectLockStoreOptions {
  /** A store call that has not settled by then fails with StoreUnavailableError. Default 10 000. */
  operationTimeoutMs?: number;
  /** Where new objects are created, e.g. `"weur"` (Cloudflare's location hints). */
  locationHint?: string;
  /** Wake waiters from inside the object on release and expiry. Default true; false: they retry at their retryDelay only. */
  notifyReleases?: boolean;
}

/**
 * A `LockStore` over a namespace bound to `LockDurableObject`: one object per key.
 * Acquires resolve to `true`/`false` (locks get the fencing token by their own path); it has the permit methods (semaphores and
 * read-write locks) and `onRelease`. Throws InvalidArgumentError for a value that is not
 * a namespace, or an unknown or bad option.
 */
export declare class DurableObjectLockStore implements LockStore {
  constructor(namespace: LockDurableObjectNamespace, options?: DurableObjectLockStoreOptions);
  readonly operationTimeoutMs?: number;
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  isHeldBy(key: string, owner: string): Promise<boolean>;
  ownerRemainingTime(key: string, owner: string): Promise<number | null>;
  remainingTime(key: string): Promise<number | null>;
  /** The holder of the plain lock on `key` (owner, fencing token, time left, the value it proclaimed), or null when it is free. */
  holder(key: string): Promise<{ owner: string; fencingToken: number; remainingMs: number; value: string | null } | null>;
  /** Keeps `value` with `owner`'s live hold of `key` unless the hold keeps one of a `seq` as high already: whether `owner` holds `key`. */
  proclaim(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /** True: a semaphore holder may take several permits (`acquirePermit`'s `permits`, 1 when absent). */
  readonly permitWeights: true;
  /** A semaphore holder takes `permits` of the `limit` (1 when absent); `countPermits` sums them. */
  acquirePermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write", limit: number, permits?: number): Promise<boolean>;
  releasePermit(key: string, owner: string, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  extendPermit(key: string, owner: string, ttlMs: number, kind: "semaphore" | "read" | "write"): Promise<boolean>;
  countPermits(key: string, kind: "semaphore" | "read" | "write"): Promise<number>;
  permitRemainingTime(key: string, owner: string, kind: "semaphore" | "read" | "write"): Promise<number | null>;
  /** Calls `listener` when `key` may have been freed; returns the unsubscribe function. */
  onRelease?(key: string, listener: () => void, kind?: "semaphore" | "read" | "write"): () => void;
  /**
   * Releases the holds this process took through the store — locks, permits, read and
   * write holds, lockAll, holds restored here; not those handed off with `serialize()` —
   * within `timeoutMs` (default 2000), aborting each hold's `signal` with a
   * StoreClosedError; waits on the store reject with StoreClosedError; then refuses acquires through it (it has no connection of its own).
   * Later calls fail with StoreClosedError. Rejects with StoreUnavailableError
   * (`holdMayRemain`, `keys`) when a hold could not be released in time (the store is
   * closed all the same); `{ keepHolds: true }` leaves the holds to their TTL.
   */
  close(options?: CloseOptions): Promise<void>;
}
