// The public types of `locksmith-js/testing`: a virtual clock and a store with controls,
// for tests of code that uses locks, without sleeping.
import type { Duration, LockError, LockStore, PermitKind } from "./index.js";

/** Options of `new TestClock()`. */
export interface TestClockOptions {
  /** What the clock's wall time (`unixTimeMs()`) reads at time 0: ms since 1970, or a Date. Default: 2026-01-01T00:00:00Z. */
  startMs?: number | Date;
}

/**
 * A clock that moves only when told. It times every lock over a `TestStore` on it: TTLs
 * and expiry, retry delays and wait timeouts, `autoExtend`, a hold's deadline and
 * `signal`, and the wait for a store call's answer. It never touches the global timers,
 * so a test runner's fake timers, on or off, change nothing.
 */
export declare class TestClock {
  constructor(options?: TestClockOptions);
  /** Milliseconds since the clock was made. */
  now(): number;
  /** The clock's wall time, in ms since 1970. */
  unixTimeMs(): number;
  /**
   * Moves the clock forward by `duration`, running in order everything of the locks over
   * it that falls due on the way; resolves once nothing is running and nothing more is
   * due. `advance(0)` lets work on its way settle without moving time. One at a time.
   */
  advance(duration: Duration): Promise<void>;
  /** Resolves when the clock has moved `duration` past now. */
  sleep(duration: Duration): Promise<void>;
  /** Resolves when the clock reaches `ms`. */
  sleepUntil(ms: number): Promise<void>;
}

/** The store calls a fault can pick (`calls`): the JS store contract's methods. */
export type StoreCall =
  | "acquire"
  | "release"
  | "extend"
  | "isLocked"
  | "remainingTime"
  | "isHeldBy"
  | "ownerRemainingTime"
  | "acquirePermit"
  | "releasePermit"
  | "extendPermit"
  | "countPermits"
  | "permitRemainingTime"
  | "acquireAll"
  | "acquireFair"
  | "holder"
  | "proclaim";

export declare const STORE_CALLS: readonly StoreCall[];

/** Which calls a fault acts on: all of them unless `calls` names some. */
export interface FaultOptions {
  calls?: StoreCall[];
}

/** Options of `delay()`. */
export interface DelayOptions extends FaultOptions {
  /** How many calls the delay acts on. Default: every call until `clearFaults()`. */
  count?: number;
  /** How late each answer comes back, too. A function is asked per call. */
  answer?: Duration | ((call: StoreCall) => number);
}

/** A hold still held, as `held()` lists it. */
export interface HeldKey {
  key: string;
  kind: "lock" | PermitKind;
}

/** The faults a test can inject into a store's calls (a `TestStore`, or `withFaults(store)`). */
export interface FaultControls {
  /** The next `count` calls (default 1) fail with `StoreUnavailableError` before they reach the store. */
  failNext(count?: number, options?: FaultOptions): void;
  /** Every call fails for `duration` from now: an outage. */
  failFor(duration: Duration, options?: FaultOptions): void;
  /** Calls reach the store `duration` late (a function is asked per call). */
  delay(duration: Duration | ((call: StoreCall) => number), options?: DelayOptions): void;
  /**
   * The next `count` calls (default 1) reach the store and are applied, and their answers
   * never come back: the caller gives up at the store's `operationTimeoutMs`, not knowing
   * the outcome (an acquire may have been granted; locksmith then frees it).
   */
  loseAnswers(count?: number, options?: FaultOptions): void;
  /** Disarms every fault. */
  clearFaults(): void;
  /** The keys granted through this store that are still held. */
  held(): Promise<HeldKey[]>;
  /** Rejects with a `LockError` (`code` `HOLDS_REMAIN`, `held`) when a key granted through this store is still held. */
  assertNothingHeld(): Promise<void>;
}

/** Options of `new TestStore()`. */
export interface TestStoreOptions {
  /** The clock of the store and of every lock over it. Default: a new `TestClock`. */
  clock?: TestClock;
  /** How long a lock waits for a call's answer (a lost one) before giving up, on the clock. Default 10 000. */
  operationTimeoutMs?: number;
}

/** Options of `takeKey()`. */
export interface TakeKeyOptions {
  /** The owner token of the hold that takes the key. Default `"another-owner"`. */
  owner?: string;
  /** That hold's TTL. Default 30 s. */
  ttl?: Duration;
}

/**
 * A lock store for tests: the memory store's semantics (locks, weighted semaphores,
 * read-write locks, `lockAll()`, fencing tokens) on a `TestClock`, with controls that end
 * holds, give keys to other owners and inject store faults. Pass it to `lock()` (or
 * `setLockStore()`) as any store.
 */
export declare class TestStore implements LockStore, FaultControls {
  constructor(options?: TestStoreOptions);
  /** The clock of this store and of every lock over it. */
  readonly clock: TestClock;
  readonly permitWeights: true;
  operationTimeoutMs: number;
  /** Its fencing token when taken (a number), else false. */
  acquire(key: string, owner: string, ttlMs: number): Promise<number | false>;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  remainingTime(key: string): Promise<number | null>;
  isHeldBy(key: string, owner: string): Promise<boolean>;
  ownerRemainingTime(key: string, owner: string): Promise<number | null>;
  acquirePermit(key: string, owner: string, ttlMs: number, kind: PermitKind, limit: number | undefined, permits?: number): Promise<boolean>;
  releasePermit(key: string, owner: string, kind: PermitKind): Promise<boolean>;
  extendPermit(key: string, owner: string, ttlMs: number, kind: PermitKind): Promise<boolean>;
  countPermits(key: string, kind: PermitKind): Promise<number>;
  permitRemainingTime(key: string, owner: string, kind: PermitKind): Promise<number | null>;
  acquireAll(keys: string[], owner: string, ttlMs: number): Promise<number[] | false>;
  acquireFair(key: string, owner: string, ttlMs: number, kind: "lock" | "semaphore", limit: number | undefined, permits: number, waits: boolean): Promise<number | false>;
  onRelease(key: string, listener: () => void, kind?: PermitKind): () => void;
  /**
   * Ends every hold of `key` now, as a failover that lost them would; their holders find
   * out at their next extend or check (advance the clock). Resolves to whether there was one.
   */
  endHold(key: string): Promise<boolean>;
  /**
   * Ends the leadership of the election `name` (`election(name)`) now, as a failover would:
   * the leader's signal aborts at its next extend or check, and a standby takes over.
   * Resolves to whether it had a leader.
   */
  endLeadership(name: string): Promise<boolean>;
  /** Ends every hold of `key` and gives the key to another owner; resolves to that hold's fencing token. */
  takeKey(key: string, options?: TakeKeyOptions): Promise<number>;
}
/** The fault controls (FaultControls), merged into the class's type. */
export interface TestStore extends FaultControls {}

/**
 * `store` (any store whose calls are made in JS: PostgreSQL, MySQL, etcd, Upstash, the
 * stores over your Redis client, the WebAssembly build's `RedisLockStore`, your own)
 * with the same faults, on real time, for tests against a real server. The native
 * build's `MemoryLockStore`, `FileLockStore` and `RedisLockStore` are refused
 * (`UnsupportedError`): their calls never leave the addon.
 */
export declare function withFaults<S extends LockStore>(store: S): S & FaultControls;

/** What `assertNothingHeld()` rejects with. */
export interface HoldsRemainError extends LockError {
  readonly code: "HOLDS_REMAIN";
  readonly held: HeldKey[];
}
