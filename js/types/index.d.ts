// The public types of locksmith, the same for every runtime (Node addon and WebAssembly).
/// <reference lib="esnext.disposable" />

/**
 * A length of time: milliseconds as a number, or a string with its unit — `"250ms"`,
 * `"30s"`, `"5m"`, `"1h"` (fractions too: `"1.5s"`). Any other string is refused with
 * InvalidArgumentError. A TTL given as a bare number under 1000 gets a one-time process
 * warning (`LOCKSMITH_SHORT_TTL`): `lock(key, 30)` is 30 ms, not 30 s.
 */
export type Duration = number | `${number}ms` | `${number}s` | `${number}m` | `${number}h`;

type Digit = "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9";
/** `true` when `S` is one or more ASCII digits. */
type Digits<S extends string> = S extends `${Digit}${infer Rest}` ? (Rest extends "" ? true : Digits<Rest>) : false;
/** `true` when `S` is a duration string's number as the parser reads it: `5`, `1.5`, `.5`. */
type DurationNumber<S extends string> = S extends `${infer Whole}.${infer Fraction}`
  ? Whole extends ""
    ? Digits<Fraction>
    : Digits<Whole> extends true
      ? Digits<Fraction>
      : false
  : Digits<S>;
/** `true` when `S` is a duration string the parser takes: digits, an optional fraction, a unit. */
type DurationText<S extends string> = S extends `${infer N}ms`
  ? DurationNumber<N>
  : S extends `${infer N}s`
    ? DurationNumber<N>
    : S extends `${infer N}m`
      ? DurationNumber<N>
      : S extends `${infer N}h`
        ? DurationNumber<N>
        : false;
/** What a duration string the parser refuses (`"5 s"`, `"1e3ms"`, `"-5s"`) is checked against: nothing is. */
export interface InvalidDuration {
  readonly 'locksmith: a duration string is digits, an optional fraction and a unit ("30s", "1.5s", "250ms"), with no sign, space or exponent': never;
}
/**
 * `unknown` (no constraint) for a duration the parser takes — a number, a value typed
 * `Duration`, or a string literal such as `"30s"` — and `InvalidDuration` for a string
 * literal that `Duration` admits and the parser refuses.
 */
export type CheckDuration<D> = D extends string
  ? `${number}ms` extends D
    ? unknown
    : `${number}s` extends D
      ? unknown
      : `${number}m` extends D
        ? unknown
        : `${number}h` extends D
          ? unknown
          : DurationText<D> extends true
            ? unknown
            : InvalidDuration
  : unknown;
/**
 * The `this` of a call taking the duration `D`: anything for a duration the parser takes,
 * `InvalidDuration` for one it refuses, so that `lock("k", "5 s")` does not compile ("the
 * 'this' context … is not assignable to … 'InvalidDuration'"). The check sits on `this`
 * because `D` itself must stay a bare parameter: TypeScript infers a union argument (a
 * value typed `Duration`) whole only into a bare type parameter.
 */
export type DurationThis<D> = CheckDuration<D> extends InvalidDuration ? InvalidDuration : unknown;
/** `T`, left out of type inference (the long-standing spelling of TypeScript 5.4's `NoInfer`). */
type Deferred<T> = [T][T extends unknown ? 0 : never];
/** The checks of `CheckDuration` on the durations of an options object (`timeout`, `retryDelay`, `autoExtend`'s). */
export type CheckAcquireOptions<O> = O extends object
  ? {
      timeout?: "timeout" extends keyof O ? CheckDuration<O["timeout" & keyof O]> : unknown;
      retryDelay?: "retryDelay" extends keyof O ? CheckDuration<O["retryDelay" & keyof O]> : unknown;
      autoExtend?: "autoExtend" extends keyof O
        ? O["autoExtend" & keyof O] extends infer A
          ? A extends object
            ? {
                intervalMs?: "intervalMs" extends keyof A ? CheckDuration<A["intervalMs" & keyof A]> : unknown;
                maxHoldMs?: "maxHoldMs" extends keyof A ? CheckDuration<A["maxHoldMs" & keyof A]> : unknown;
              }
            : unknown
          : unknown
        : unknown;
    }
  : unknown;

/** How long to wait for a held lock, and how often to try again meanwhile. */
export interface AcquireOptions {
  /**
   * How long to wait in all (milliseconds, or a string like `"5s"`). Default 0: one
   * attempt, no waiting. `Infinity` waits until the lock is taken; give a `signal` to end
   * such a wait (`AbortSignal.timeout(ms)`, or a controller aborted at shutdown).
   */
  timeout?: Duration;
  /** How long between attempts (milliseconds, or a string like `"100ms"`). Default 50. Stores that signal releases wake waiters sooner. */
  retryDelay?: Duration;
  /**
   * Keep the hold extended in the background until it is released (or, in `run()`,
   * until the function settles): `true` extends every third of the TTL; `intervalMs`
   * sets the interval (at most half the TTL), `maxHoldMs` a cap on the whole hold, after which
   * it expires at its TTL. Failed extends are retried until the hold would expire;
   * `lock.signal` says when it was lost.
   */
  autoExtend?: boolean | AutoExtendOptions;
  /**
   * Ends a wait: once it aborts, the acquire rejects with the signal's `reason` (or an
   * `AbortError` when it gave none) and nothing is held — a grant that raced the abort is
   * released. Already aborted, nothing is tried. After the acquire resolved, aborting
   * does nothing to the hold (release it, or watch `lock.signal`).
   */
  signal?: AbortSignal | null;
}

/** The options of `acquireImmediately()` and `runImmediately()`. */
export interface ImmediateOptions {
  /** As `AcquireOptions.signal`: an already-aborted signal takes nothing; one that aborts during the attempt leaves nothing held. */
  signal?: AbortSignal | null;
}

/** The object form of `AcquireOptions.autoExtend`. */
export interface AutoExtendOptions {
  /** Time between extends (milliseconds, or a string like `"10s"`), at most half the TTL. Default: a third of the TTL. */
  intervalMs?: Duration;
  /** Stop extending once the hold has lasted this long (milliseconds, or a string like `"1h"`). Default: no cap. */
  maxHoldMs?: Duration;
}

/** A plain lock's live holder, as a store's `holder(key)` answers it. */
export interface StoreHolder {
  readonly owner: string;
  readonly fencingToken: number | null;
  readonly remainingMs: number;
  /** The value it proclaimed (an election leader's record), or null. */
  readonly value: string | null;
}

/**
 * Where locks live. `acquire` must be atomic (set-if-absent); `release` and `extend`
 * must act only when `owner` matches. Any object with these five methods is a store.
 */
export interface LockStore {
  /**
   * Takes `key` for `owner` for `ttlMs` if nobody holds it: `false` if held, `true` if
   * taken, or a fencing token (a positive safe integer that only grows per key) if taken
   * by a store that keeps one.
   */
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean | number>;
  /** Frees `key` if `owner` holds it. */
  release(key: string, owner: string): Promise<boolean>;
  /** Sets `key`'s expiry to `ttlMs` from now if `owner` holds it. */
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Whether anyone holds `key`. */
  isLocked(key: string): Promise<boolean>;
  /** Milliseconds until `key`'s hold expires, or null when nobody holds it. */
  remainingTime(key: string): Promise<number | null>;
  /** Optional: whether `owner` holds `key` now. Makes `isExpired()` exact. */
  isHeldBy?(key: string, owner: string): Promise<boolean>;
  /**
   * Optional: milliseconds left on `owner`'s own hold of `key`, or null when `owner` does
   * not hold it, answered in one atomic question. A hold's due check asks it shortly
   * before the hold's local deadline, so a hold extended elsewhere (by a restored copy)
   * stays live; without it, a hold counts as lost at its local deadline unless an
   * extend succeeded.
   */
  ownerRemainingTime?(key: string, owner: string): Promise<number | null>;
  /**
   * Optional, with `proclaim`: the live holder of the plain lock `key`, read in one atomic
   * step: its owner token, its fencing token (null without tokens), the milliseconds it
   * has left (a whole number, at least 1) and the last value proclaimed for this hold (or
   * null); null when nobody holds `key`. An election's `leader()` and `observe()` read it.
   */
  holder?(key: string): Promise<StoreHolder | null>;
  /**
   * Optional, with `holder`: keeps `value` with `owner`'s live hold of `key` in one atomic
   * step, unless the hold keeps a value of a `seq` as large already; true when `owner`
   * holds `key` (replaced or not), false otherwise. A later hold starts without a value;
   * an extend keeps it. Without the pair, an election's `leader()`, `observe()` and
   * `value` fail with UnsupportedError.
   */
  proclaim?(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /** Optional: ms after which a call that has not settled fails with STORE_UNAVAILABLE. Default 10 000. */
  operationTimeoutMs?: number;
  /**
   * Optional: call `listener` whenever `key` may have become free, so a waiting acquire
   * tries again at once instead of after its `retryDelay`. `kind` is undefined for a plain
   * lock. Returns a function that ends the subscription; locksmith calls it when the wait
   * is over.
   */
  onRelease?(key: string, listener: () => void, kind?: PermitKind): () => void;
  /**
   * `lockAll()` in one step: takes every one of `keys` (distinct, in lockAll's canonical
   * order) for `owner`, or none, atomically. Resolves to `false` or the index of a key it
   * found held (nothing taken), `true` or one fencing token (or `null`) per key (every
   * key taken), or `null` when it cannot take these keys in one step. Without it,
   * `lockAll()` takes the keys one `acquire` at a time, giving back what it took.
   */
  acquireAll?(keys: string[], owner: string, ttlMs: number): Promise<boolean | number | (number | null)[] | null>;
  /**
   * Optional: fair locks and semaphores (`{ fair: true }`; docs/stores.md). `owner` takes its
   * place at the end of the key's queue, or renews it (a place lasts `ttlMs` from its
   * latest attempt), and is granted the key when it is first in the queue and the key has
   * room (`permits` of a semaphore's `limit`); granted, it leaves the queue. With `waits`
   * false it keeps no place. Resolves like `acquire()`. Its `release`/`releasePermit` of an
   * owner that holds nothing gives up that owner's place; a handle that disagrees with the
   * key's holders or waiters on fairness is refused with an InvalidArgumentError.
   */
  acquireFair?(key: string, owner: string, ttlMs: number, kind: "lock" | "semaphore", limit: number | undefined, permits: number, waits: boolean): Promise<boolean | number>;
  /**
   * Optional: a fair lock's release, for a store that keeps fair locks otherwise than plain
   * ones (the Redis stores); without it, `release` serves both. As `release`, and an owner
   * that holds nothing gives up its place in the queue.
   */
  releaseFair?(key: string, owner: string): Promise<boolean>;
  /** Optional: a fair lock's extend, likewise; without it, `extend` serves both. */
  extendFair?(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /**
   * Optional, all five or none: semaphores and read-write locks (docs/stores.md). With
   * `permitWeights: true`, `acquirePermit` gets a sixth argument, `permits` (1 when
   * absent): that many of the semaphore's permits for one holder.
   */
  acquirePermit?(key: string, owner: string, ttlMs: number, kind: PermitKind, limit: number | undefined, permits?: number): Promise<boolean | number>;
  releasePermit?(key: string, owner: string, kind: PermitKind): Promise<boolean>;
  extendPermit?(key: string, owner: string, ttlMs: number, kind: PermitKind): Promise<boolean>;
  /** The live holds of `key`; for a semaphore on a store with `permitWeights`, the permits they hold. */
  countPermits?(key: string, kind: PermitKind): Promise<number>;
  /**
   * Optional: `true` when a semaphore hold may take several permits (`acquirePermit`'s
   * sixth argument). Without it, a `{ permits }` above 1 fails with UnsupportedError.
   */
  readonly permitWeights?: boolean;
  permitRemainingTime?(key: string, owner: string, kind: PermitKind): Promise<number | null>;
}

/** The holds a key admits besides a plain lock. */
export type PermitKind = "semaphore" | "read" | "write";

/**
 * What `run()` resolves to: `[true, result]` when `fn` ran, `[false, undefined]` when the
 * lock was held elsewhere (`fn` never ran).
 */
export type RunResult<T> = [ran: true, result: T] | [ran: false, result: undefined];

/**
 * A handle's own options, the last argument of `lock()`, `semaphore()` and `new Lock()`
 * (acquire options go to `acquire()` or `run()`).
 */
export interface HandleOptions {
  /**
   * First come, first served: waiters are granted in the order the store queued them,
   * across processes, and a semaphore's later, smaller request never overtakes an
   * earlier, larger one. A waiter's place lasts the TTL from its latest attempt, so one
   * that crashed cannot hold the queue up. Every handle of a key must agree: one that
   * differs from the key's holders or waiters is refused (`INVALID_ARGUMENT`). Stores
   * without fair queues answer `UNSUPPORTED`. Default `false`.
   */
  fair?: boolean;
}

/** A lock on one key. */
export declare class Lock {
  /** A lock on `key`, held for `ttlMs` (milliseconds or a string like `"30s"`; default 30 000) once acquired, in `store` (default: the current store). */
  constructor(key: string, ttlMs?: Duration, store?: LockStore, options?: HandleOptions);
  /** The key. */
  readonly key: string;
  /** Whether this handle is fair (`{ fair: true }`). */
  readonly fair: boolean;
  /** How long each acquisition holds the key, in milliseconds (a string TTL converted), and `extend()`'s default. */
  readonly ttlMs: number;
  /** The fencing token of the current hold; null when not held or the store gives none. */
  readonly fencingToken: number | null;
  /**
   * Acquires, runs `fn`, and always releases. `ran` is false (and `fn` never ran) when the
   * lock was taken; the result then is `undefined`, so `if (!ran) return;` narrows it to `T`.
   */
  run<T, O extends AcquireOptions = AcquireOptions>(fn: (lock: Lock) => T | PromiseLike<T>, options?: O & Deferred<CheckAcquireOptions<O>>): Promise<RunResult<T>>;
  /** `run()` that never waits. */
  runImmediately<T>(fn: (lock: Lock) => T | PromiseLike<T>, options?: ImmediateOptions): Promise<RunResult<T>>;
  /** Takes the lock, waiting up to `options.timeout`. */
  acquire<O extends AcquireOptions = AcquireOptions>(options?: O & Deferred<CheckAcquireOptions<O>>): Promise<boolean>;
  /** Takes the lock only if it is free now. */
  acquireImmediately(options?: ImmediateOptions): Promise<boolean>;
  /** Frees the lock; false if this handle no longer held it. */
  release(): Promise<boolean>;
  /** Pushes the expiry `ttlMs` (default: the lock's TTL) from now. Rejects with LockNotHeldError if the lock was lost. */
  extend<D extends Duration = Duration>(this: DurationThis<D>, ttlMs?: D): Promise<void>;
  /** Whether anyone holds the key (not necessarily this handle). */
  isLocked(): Promise<boolean>;
  /** How many holds of the key are live: a semaphore's permits, readers (or one writer); 0 or 1 for a lock. */
  count(): Promise<number>;
  /** Whether this handle held the key and no longer does. */
  isExpired(): Promise<boolean>;
  /** Milliseconds until the key's hold expires, or null when nobody holds it. */
  getRemainingTime(): Promise<number | null>;
  /** Key, TTL and owner token as a string for `restoreLock()`. A bearer secret. Throws LockNotHeldError when not held. */
  serialize(): string;
  /**
   * An AbortSignal for the current hold. It aborts when the hold ends: released (an
   * `AbortError`), or lost — the TTL passed without an extend, an extend found the key
   * gone or someone else's (LockNotHeldError), or the store was out of reach until the
   * hold expired (StoreUnavailableError) — or ended by the store's `close()`
   * (StoreClosedError). Already aborted when nothing is held.
   */
  readonly signal: AbortSignal;
  /** Releases a held lock; harmless when nothing is held. `await using l = lock("k")`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A lock on `key` in the current store, held for `ttlMs` (milliseconds or a string like `"30s"`; default 30 000) once acquired. */
export declare function lock<D extends Duration = Duration>(this: DurationThis<D>, key: string, ttlMs?: D, store?: LockStore, options?: HandleOptions): Lock;

/** A semaphore handle's acquire options: a lock's, and how many permits to take. */
export interface SemaphoreAcquireOptions extends AcquireOptions {
  /** How many of the semaphore's permits this hold takes: 1 (the default) to its limit. A holder of n counts n toward the limit. */
  permits?: number;
}

/** A semaphore handle's `acquireImmediately()` / `runImmediately()` options. */
export interface SemaphoreImmediateOptions extends ImmediateOptions {
  /** As `SemaphoreAcquireOptions.permits`. */
  permits?: number;
}

/**
 * A handle on a semaphore: a `Lock` whose acquires may take several permits at once
 * (`{ permits: n }`); `extend()` and `release()` act on the hold as taken, and `count()`
 * says how many permits are in use.
 */
export interface Semaphore extends Lock {
  acquire<O extends SemaphoreAcquireOptions = SemaphoreAcquireOptions>(options?: O & Deferred<CheckAcquireOptions<O>>): Promise<boolean>;
  acquireImmediately(options?: SemaphoreImmediateOptions): Promise<boolean>;
  run<T, O extends SemaphoreAcquireOptions = SemaphoreAcquireOptions>(
    fn: (lock: Lock) => T | PromiseLike<T>,
    options?: O & Deferred<CheckAcquireOptions<O>>,
  ): Promise<RunResult<T>>;
  runImmediately<T>(fn: (lock: Lock) => T | PromiseLike<T>, options?: SemaphoreImmediateOptions): Promise<RunResult<T>>;
}

/**
 * A handle on the semaphore `key`: at most `limit` permits in use at once, each hold
 * lasting `ttlMs` (default 30 000) once acquired, in `store` (default: the current store).
 * It has a lock's methods; an acquire may take several permits (`{ permits }`), and
 * `count()` says how many are in use now. Stores without semaphores refuse with
 * UnsupportedError; stores without weights refuse `permits` above 1 likewise.
 */
export declare function semaphore<D extends Duration = Duration>(
  this: DurationThis<D>,
  key: string,
  limit: number,
  ttlMs?: D,
  store?: LockStore,
  options?: HandleOptions,
): Semaphore;

/** The read-write lock `key`. */
export interface ReadWriteLock {
  readonly key: string;
  /** In milliseconds. */
  readonly ttlMs: number;
  /** A handle that shares the key with other readers, never with a writer. */
  readLock(): Lock;
  /** A handle that has the key alone; while it waits, new readers wait behind it. */
  writeLock(): Lock;
}

/** The read-write lock `key`, each hold lasting `ttlMs` (default 30 000) once acquired. */
export declare function readWriteLock<D extends Duration = Duration>(this: DurationThis<D>, key: string, ttlMs?: D, store?: LockStore): ReadWriteLock;

/** The options of `election()`. */
export interface ElectionOptions {
  /**
   * The leader's lease (default 15 s): a standby takes over this long after a leader
   * that stopped extending (its process killed), at most. The leader extends it on its own.
   */
  ttl?: Duration;
  /**
   * The pause between a standby's attempts on a store that does not notify releases,
   * and before `run()` campaigns again after a term (default 50 ms).
   */
  retryDelay?: Duration;
  /** The store (default: the configured one, as for `lock()`). It must give fencing tokens. */
  store?: LockStore;
}

/** A value a leader proclaims: JSON, at most 4096 bytes as JSON text. */
export type LeaderValue = string | number | boolean | null | LeaderValue[] | { [key: string]: LeaderValue };

/** The options of `campaign()` and `run()`. */
export interface CampaignOptions {
  /** Ends a campaign (it rejects as an aborted `acquire()` does: with the signal's reason, or an AbortError), or `run()` (it resolves once `fn` has settled). */
  signal?: AbortSignal;
  /**
   * What the leader proclaims while it leads (a host and port, a URL): `leader()`,
   * `observe()` and `locksmith leader` show it. It needs a store with `holder` and
   * `proclaim` (every shipped store has them).
   */
  value?: LeaderValue;
}

/** Who leads an election, as `leader()` and `observe()` tell it. */
export interface LeaderInfo {
  /** The leader's term (its fencing token). */
  readonly term: number;
  /** The value it proclaims, or null. */
  readonly value: LeaderValue;
  /** When it won, by its own clock; null when its store has not kept it (yet). */
  readonly since: Date | null;
}

/** The options of `observe()`. */
export interface ObserveOptions {
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** How often the store is read (default: the election's retry delay, 50 ms). */
  interval?: Duration;
}

/** What `campaign()` won: this process leads until `resign()` or until the leadership is lost. */
export declare class Leadership {
  private constructor();
  /** The leader's term: its fencing token, which grows with each new leader (not by one). A resource that remembers the largest term it has seen can refuse a deposed leader's writes. */
  readonly term: number;
  /**
   * Aborts when the leadership ends: resigned, or lost (an extend refused, the deadline
   * passed, the store unreachable for too long). It aborts on a timer: after a long stall
   * of the event loop it can be late; `isLeader` is exact.
   */
  readonly signal: AbortSignal;
  /** Whether this process still leads, as far as it knows, compared with the lease's deadline now. */
  readonly isLeader: boolean;
  /** Ends the leadership now, so a standby takes over; `true` if it still held it. */
  resign(): Promise<boolean>;
  /** The value this leader proclaims (campaign()'s `value`, or the last `proclaim()`'s), or null. */
  readonly value: LeaderValue;
  /** Changes the value it proclaims, in the same term; rejects with LockNotHeldError once the leadership is lost. */
  proclaim(value: LeaderValue): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** An election: one process leads, the others stand by. Its name lives apart from lock keys. */
export declare class Election {
  private constructor();
  readonly name: string;
  /** Waits until this process leads (or until `signal` aborts: it rejects as an aborted `acquire()` does). */
  campaign(options?: CampaignOptions): Promise<Leadership>;
  /**
   * Leads whenever it can until `signal` aborts: campaigns, calls `fn` while leader (its
   * signal aborts when the leadership ends or `signal` aborts; `info.leadership.isLeader`
   * is the exact check), resigns once `fn` has settled, campaigns again after the retry
   * delay. Rejects with `fn`'s error, after resigning.
   */
  run(fn: (signal: AbortSignal, info: { readonly term: number; readonly leadership: Leadership }) => unknown, options?: CampaignOptions): Promise<void>;
  /** Who leads now, or null. */
  leader(): Promise<LeaderInfo | null>;
  /**
   * The leader now (or null), then each change of leader or of its value, read every
   * `interval`; it may skip a leader that came and went between two reads, and terms
   * never go back. Ends at `signal`'s abort or a `break`.
   */
  observe(options?: ObserveOptions): AsyncIterableIterator<LeaderInfo | null>;
}

/** The election `name` (1 to 1014 bytes, no control characters) over `options.store`. */
export declare function election<D extends Duration = Duration>(this: DurationThis<D>, name: string, options?: ElectionOptions & { ttl?: D }): Election;

/** What a `MultiLock`'s `serialize()` returns: a string that `restoreLock()` turns back into a `MultiLock`. */
export type SerializedMultiLock = string & { readonly __locksmithMultiLock: true };

/**
 * A lock on several keys at once, all or nothing: after an attempt this handle holds
 * every key or none, and while it waits it holds none. Keys are taken in one canonical
 * order, so two `lockAll()` calls over overlapping keys never deadlock. It has a lock's
 * methods: `isLocked()` says whether anyone holds any of its keys, `getRemainingTime()`
 * the soonest expiry among them, `count()` how many of them are held.
 */
export declare class MultiLock extends Lock {
  /** A lock on every one of `keys` (1 to 64, distinct), held for `ttlMs` once acquired, in `store`. */
  constructor(keys: readonly string[], ttlMs?: Duration, store?: LockStore);
  /** The keys, comma-separated (`"a, b"`), as messages and diagnostics name the lock. */
  readonly key: string;
  /** The keys, in the canonical order every `lockAll()` takes them in. */
  readonly keys: readonly string[];
  /** Each key's fencing token in the current hold (null where the store gives none); null when not held. */
  readonly fencingTokens: Readonly<Record<string, number | null>> | null;
  /** Always null: each key has its own token (`fencingTokens`). */
  readonly fencingToken: null;
  run<T, O extends AcquireOptions = AcquireOptions>(fn: (lock: MultiLock) => T | PromiseLike<T>, options?: O & Deferred<CheckAcquireOptions<O>>): Promise<RunResult<T>>;
  runImmediately<T>(fn: (lock: MultiLock) => T | PromiseLike<T>, options?: ImmediateOptions): Promise<RunResult<T>>;
  /** Keys, TTL and owner token as a string for `restoreLock()`, which gives a `MultiLock` back. A bearer secret. */
  serialize(): SerializedMultiLock;
}

/**
 * A lock on every one of `keys` at once (all or nothing), held for `ttlMs` (default
 * 30 000) once acquired, in `store` (default: the current store). 1 to 64 distinct keys;
 * anything else is an InvalidArgumentError.
 */
export declare function lockAll<D extends Duration = Duration>(this: DurationThis<D>, keys: readonly string[], ttlMs?: D, store?: LockStore): MultiLock;

/**
 * Rebuilds a lock from `serialize()`, owner token and all, in `store` (default: the
 * current store): a `MultiLock` from a `MultiLock`'s (typed so for a
 * `SerializedMultiLock`; for a plain `string` or `any`, a `Lock`, which a `MultiLock` is).
 */
export declare function restoreLock<S extends string>(
  serialized: S,
  store?: LockStore,
): string extends S ? Lock : S extends SerializedMultiLock ? MultiLock : Lock;

/** Sets the store `lock()` and `restoreLock()` use; returns it. */
export declare function setLockStore<S extends LockStore>(store: S): S;

/**
 * The store `lock()` and `restoreLock()` use (a MemoryLockStore until set). With
 * `LOCKSMITH_REQUIRE_STORE=1` in the environment there is no default: a lock that names no
 * store, before `setLockStore()`, throws StoreNotSetError.
 */
export declare function getLockStore(): LockStore;

/** Locks in this isolate's memory (native in Node, wasm on the edge). The default store. */
export declare class MemoryLockStore implements LockStore {
  constructor();
  /** The process-wide store called `name`, shared by every worker thread. Node's native build only. */
  static shared(name: string): MemoryLockStore;
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  remainingTime(key: string): Promise<number | null>;
  /** The live holder of the plain lock `key` (an election's leader), with the value it proclaimed; null when nobody holds it. */
  holder(key: string): Promise<StoreHolder | null>;
  /** Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq` at least this one: `true` when `owner` holds `key`. */
  proclaim(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /** Drops every hold. */
  clear(): void;
  /** Semaphore holds may take several permits. */
  readonly permitWeights: true;
}

/** Options of `FileLockStore.open()`. */
export interface FileLockStoreOptions {
  /** How long an operation waits for another process to let go of the lock file before it fails with `STORE_UNAVAILABLE` (ms; default 2000). */
  busyTimeoutMs?: number;
}

/**
 * Locks in a file that every process of one host opens: no server. Locks, weighted
 * semaphores and read-write locks, with fencing tokens; a holder killed with SIGKILL
 * frees its holds at their TTL. The native addon's: the WebAssembly build rejects
 * `open()` with `UnsupportedError`.
 */
export declare class FileLockStore implements LockStore {
  private constructor();
  /** Opens (or makes) the lock file at `path`. */
  static open(path: string, options?: FileLockStoreOptions): Promise<FileLockStore>;
  /** The lock file's path. */
  readonly path: string;
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  remainingTime(key: string): Promise<number | null>;
  /** The live holder of the plain lock `key` (an election's leader), with the value it proclaimed; null when nobody holds it. */
  holder(key: string): Promise<StoreHolder | null>;
  /** Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq` at least this one: `true` when `owner` holds `key`. */
  proclaim(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /** Semaphore holds may take several permits. */
  readonly permitWeights: true;
  /**
   * Releases the holds this process took through the store — locks, permits, read and
   * write holds, lockAll, holds restored here; not those handed off with `serialize()` —
   * within `timeoutMs` (default 2000), aborting each hold's `signal` with a
   * StoreClosedError; waits on the store reject with StoreClosedError; then stops watching the file.
   * Later calls fail with StoreClosedError. Rejects with StoreUnavailableError
   * (`holdMayRemain`, `keys`) when a hold could not be released in time (the store is
   * closed all the same); `{ keepHolds: true }` leaves the holds to their TTL.
   */
  close(options?: CloseOptions): Promise<void>;
}

/** Options of `RedisLockStore.connect()`. */
export interface RedisConnectOptions {
  /** `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS. One of `url`, `sentinels` and `cluster`. */
  url?: string;
  /**
   * Redis Sentinel: the Sentinels' URLs (`redis://` or `rediss://`, all alike; a
   * Sentinel's own login goes in its URL). The store asks them for the master named
   * `masterName` and follows it through failovers.
   */
  sentinels?: string[];
  /** With `sentinels`: the name the Sentinels monitor the master by. */
  masterName?: string;
  /** With `sentinels`: the master's ACL user (needs `password`). */
  username?: string;
  /** With `sentinels`: the master's password. */
  password?: string;
  /** With `sentinels`: the master's database. Default 0. */
  db?: number;
  /**
   * Redis Cluster: nodes to start from (`redis://` or `rediss://`, all alike, with the
   * login every node shares; database 0). The store reads the slot map and sends each
   * operation to the master of its key's slot, following `MOVED` and `ASK`.
   */
  cluster?: string[];
  /** Put before every key. Default `"locksmith:"`. */
  keyPrefix?: string;
  /** How long connecting may take. Default 2000. */
  connectTimeoutMs?: number;
  /** How long one command may take. Default 2000. */
  commandTimeoutMs?: number;
  /** Connection attempts per reconnect. Default 2. */
  reconnectRetries?: number;
  /** The longest pause between reconnect attempts. Default 1000. */
  reconnectMaxDelayMs?: number;
  /** Wake waiters on release through pub/sub. Default true. */
  notifyReleases?: boolean;
  /** For `rediss://`: the certificate authority to trust (PEM) instead of the system's roots. */
  tlsCaCert?: string;
  /**
   * For `rediss://`: skip certificate and host name checks. Anyone on the path can read
   * and change the traffic: development only. Default false. (A `#insecure` URL
   * fragment is refused.)
   */
  tlsInsecure?: boolean;
  /**
   * Replicas that must acknowledge each acquire and extend (`WAIT`, up to half of
   * `commandTimeoutMs`) before it counts; fewer fail it with StoreUnavailableError and
   * free what it took. Narrows, does not close, what a failover can lose. Default 0 (off).
   */
  minReplicas?: number;
  /**
   * `false`: a lock's acquire is one plain `SET key owner NX PX ttl` (no script, no fencing
   * counter) and its hold has no fencing token (`fencingToken` is `null`), for locks taken
   * for efficiency rather than correctness. Ownership, release, extend, waits and
   * wake-ups are unchanged; lockAll, semaphores and read-write locks keep their scripts and
   * tokens. Fenced and unfenced stores on one key exclude each other, and the fenced ones'
   * tokens still grow. Default true.
   */
  fencing?: boolean;
}

/**
 * Locks in Redis, semaphores and read-write locks included. Also a plain `LockStore`. In
 * Node, the addon's Redis engine over Node's sockets; in the WebAssembly build
 * (`backend === "wasm"`), the same engine as a second wasm module over the runtime's TCP
 * socket (Cloudflare Workers' `connect()`, `Deno.connect`, `node:net`). Where the runtime
 * has none (browsers, Vercel Edge), `connect()` rejects with code UNSUPPORTED.
 */
export declare class RedisLockStore implements LockStore {
  private constructor();
  /**
   * Connects; rejects with StoreUnavailableError when Redis cannot be reached in time,
   * with LockStoreError when the server is older than Redis 7.0, and with
   * InvalidArgumentError for an unknown option. On Cloudflare Workers `tlsCaCert` and
   * `tlsInsecure`, on Deno `tlsInsecure`, reject with UnsupportedError.
   */
  static connect(urlOrOptions: string | RedisConnectOptions): Promise<RedisLockStore>;
  /** Connects to `url` with `options` (the same as `connect({ ...options, url })`). */
  static connect(url: string, options?: Omit<RedisConnectOptions, "url" | "sentinels" | "masterName" | "username" | "password" | "db" | "cluster">): Promise<RedisLockStore>;
  /** The prefix put before every key. */
  readonly keyPrefix: string;
  /** Semaphore holds may take several permits. */
  readonly permitWeights: true;
  /**
   * Releases the holds this process took through the store — locks, permits, read and
   * write holds, lockAll, holds restored here; not those handed off with `serialize()` —
   * within `timeoutMs` (default 2000), aborting each hold's `signal` with a
   * StoreClosedError; waits on the store reject with StoreClosedError; then closes the connections.
   * Later calls fail with StoreClosedError. Rejects with StoreUnavailableError
   * (`holdMayRemain`, `keys`) when a hold could not be released in time (the store is
   * closed all the same); `{ keepHolds: true }` leaves the holds to their TTL.
   */
  close(options?: CloseOptions): Promise<void>;
  /** `true` when taken, `false` when someone holds it (the lock gets its fencing token by its own path). */
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  remainingTime(key: string): Promise<number | null>;
  /** The live holder of the plain lock `key` (an election's leader), with the value it proclaimed; null when nobody holds it. */
  holder(key: string): Promise<StoreHolder | null>;
  /** Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq` at least this one: `true` when `owner` holds `key`. */
  proclaim(key: string, owner: string, value: string, seq: number): Promise<boolean>;
  /** The WebAssembly build's: whether `owner` holds `key`. */
  isHeldBy?(key: string, owner: string): Promise<boolean>;
  /** The WebAssembly build's: calls `listener` when `key` may have been released; returns the unsubscribe function. */
  onRelease?(key: string, listener: () => void): () => void;
  /** The WebAssembly build's: a fair lock's or semaphore's attempt, and a fair lock's release and extend (`{ fair: true }`). */
  acquireFair?(key: string, owner: string, ttlMs: number, kind: "lock" | "semaphore", limit: number | undefined, permits: number, waits: boolean): Promise<boolean | number>;
  releaseFair?(key: string, owner: string): Promise<boolean>;
  extendFair?(key: string, owner: string, ttlMs: number): Promise<boolean>;
}

/** What a handle holds, as the diagnostics channels name it. */
export type LockKind = "lock" | "semaphore" | "read" | "write" | "multi";

/**
 * The context of an event on the tracing channels `locksmith:acquire`,
 * `locksmith:release` and `locksmith:extend` (`node:diagnostics_channel`; see
 * docs/observability.md). `outcome`, and an acquire's `attempts`, `waitedMs` and
 * `fencingToken`, are set by the `asyncStart`, `asyncEnd` and `error` events.
 */
export interface LockTraceContext {
  /** The lock's key. */
  readonly key: string;
  readonly kind: LockKind;
  /** Whether the handle is fair (`{ fair: true }`): its acquire holds a place in the key's queue until answered. */
  readonly fair: boolean;
  /** The store's short name: `memory`, `redis`, `postgres`, `durable-object`, `ioredis`, `node-redis`, `upstash`, `etcd`, or `custom` for a store of your own. */
  readonly store: string;
  /** The hold's TTL in milliseconds (for extend, the TTL asked for). */
  readonly ttlMs: number;
  /** The handle the call was made on: the same object from a grant to its release. */
  readonly lock: Lock;
  /** The hold's number on `lock` (1, 2, …): a granted acquire's, or for release and extend the handle's latest. Null on an acquire that got nothing. */
  hold: number | null;
  /** acquire: acquired, busy, timeout, aborted, error; release: released, not-held, error; extend: extended, not-held, error. */
  outcome?: "acquired" | "busy" | "timeout" | "aborted" | "released" | "extended" | "not-held" | "error";
  /** acquire: how many attempts the call sent to the store. */
  attempts?: number;
  /** acquire: milliseconds from the call to its answer. */
  waitedMs?: number;
  /** acquire: the granted hold's fencing token (null when refused or the store gives none). */
  fencingToken?: number | null;
  /** The call's value (tracePromise sets it). */
  result?: unknown;
  /** The call's error, on `error` events. */
  error?: unknown;
}

/** A message of the channel `locksmith:lost`: a hold ended by loss, not by a release. */
export interface LockLostMessage {
  readonly key: string;
  readonly kind: LockKind;
  /** Whether the handle is fair (`{ fair: true }`). */
  readonly fair: boolean;
  readonly store: string;
  /** The error's code: `LOCK_NOT_HELD` (its TTL passed, an extend found it gone) or `STORE_UNAVAILABLE` (the store was out of reach until it expired). */
  readonly reason: LockErrorCode;
  readonly error: LockError;
  readonly lock: Lock;
  /** The number of the hold that was lost, on `lock` (see `LockTraceContext.hold`). */
  readonly hold: number;
}

/** Which build serves the API: the native addon, or the WebAssembly build where no addon loads (and on the edge). */
export declare const backend: "native" | "wasm";

/** The stable error codes. */
export type LockErrorCode =
  | "LOCK_NOT_HELD"
  | "INVALID_ARGUMENT"
  | "INVALID_SERIALIZED_LOCK"
  | "STORE_UNAVAILABLE"
  | "STORE_CONTRACT_VIOLATION"
  | "STORE_ERROR"
  | "STORE_CLOSED"
  | "STORE_NOT_SET"
  | "UNSUPPORTED"
  | "ABORTED"
  | "NO_RANDOM_SOURCE"
  | "NOT_INITIALIZED"
  | "HOLDS_REMAIN"
  | "CLOCK_BUSY"
  | "INTERNAL_ERROR";

/** Base class of every error locksmith throws. */
export declare class LockError extends Error {
  readonly code: LockErrorCode;
  /** Set by `run()` when the work finished but the release failed: the work's result. */
  result?: unknown;
}
/** The lock is not held by this handle: lost to expiry, released, or never acquired. */
export declare class LockNotHeldError extends LockError {
  readonly code: "LOCK_NOT_HELD";
  readonly key: string;
}
/** An argument failed validation. */
export declare class InvalidArgumentError extends LockError {
  readonly code: "INVALID_ARGUMENT";
}
/** `restoreLock()` was given something other than `serialize()`'s output. */
export declare class InvalidSerializedLockError extends LockError {
  readonly code: "INVALID_SERIALIZED_LOCK";
}
/** The store could not be reached, failed, or did not answer in time. */
export declare class StoreUnavailableError extends LockError {
  readonly code: "STORE_UNAVAILABLE";
  /** An attempt got no answer (or a release did not finish): a hold may remain until its TTL. */
  readonly holdMayRemain: boolean;
  /** From `close()`: the keys whose holds it could not release in time. */
  readonly keys?: string[];
}
/** The store answered something the LockStore contract does not allow. */
export declare class StoreContractViolationError extends LockError {
  readonly code: "STORE_CONTRACT_VIOLATION";
}
/** The store was reached and refused the operation. */
export declare class LockStoreError extends LockError {
  readonly code: "STORE_ERROR";
}
/**
 * The store was closed (`store.close()`): a call through it, a wait on it, or a hold it
 * ended — a hold's `signal` aborts with one, and `run()` rejects with one (the function's
 * value in `result`, its rejection in `cause`) when the store closed while it ran.
 */
export declare class StoreClosedError extends LockError {
  readonly code: "STORE_CLOSED";
  /** The key of the hold or acquire it ended, where there is one. */
  readonly key?: string;
  /** From an acquire on its way when the store closed: a grant it got may stay until its TTL. */
  readonly holdMayRemain?: boolean;
}

/** Options of a store's `close()`. */
export interface CloseOptions {
  /**
   * Leave the holds this process took through the store in place, until their TTL,
   * instead of releasing them (waits on the store end all the same). Default false.
   */
  keepHolds?: boolean;
  /**
   * How long close() tries to release the holds, in milliseconds (default 2000). Past it
   * the store closes all the same and close() rejects with StoreUnavailableError
   * (`holdMayRemain: true`, `keys`: the keys that may stay until their TTL).
   */
  timeoutMs?: number;
}
/** `LOCKSMITH_REQUIRE_STORE=1`, and a lock named no store before `setLockStore()`: call it, or pass the store. */
export declare class StoreNotSetError extends LockError {
  readonly code: "STORE_NOT_SET";
}
/** The store cannot do this: a semaphore or read-write lock on a store without them. */
export declare class UnsupportedError extends LockError {
  readonly code: "UNSUPPORTED";
}

/** An acquire ended by its `signal` when it gave no reason of its own, or with an attempt on its way (`holdMayRemain`). `name` is `"AbortError"`. */
export declare class AbortError extends LockError {
  readonly code: "ABORTED";
  readonly name: "AbortError";
  /** The key whose acquire was aborted. */
  readonly key: string;
  /**
   * Whether a hold nobody owns may remain: an attempt was on its way when the wait was
   * aborted (it is released once it settles), or a grant that raced the abort could not
   * be released. Until then, or at worst its TTL, the key may stay held.
   */
  readonly holdMayRemain: boolean;
  /** The signal's own reason, when this error stands in for it (see `holdMayRemain`). */
  readonly reason?: unknown;
}
