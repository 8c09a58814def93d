// The JS surface of locksmith, the same in every runtime. A binding (the native addon
// in Node, the wasm build elsewhere) supplies the native pieces; all lock logic lives
// in the Rust core behind them. This file converts arguments and maps errors to
// classes; the stores are in stores.mjs, the bridge to JS stores in bridge.mjs.
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, HAS_WAITERS, STORE_NAME } from "./symbols.mjs";
import { acquireChannel, extendChannel, lostChannel, lostWatched, releaseChannel, traced } from "./diagnostics.mjs";
import { DEFAULT_TTL_MS, limitMessage } from "./defaults.mjs";
import { serializedFields } from "./serialized.mjs";
import { noteHold } from "./shutdown.mjs";
import {
  AbortError,
  LockError,
  LockNotHeldError,
  InvalidArgumentError,
  InvalidSerializedLockError,
  StoreUnavailableError,
  StoreContractViolationError,
  LockStoreError,
  StoreClosedError,
  StoreNotSetError,
  UnsupportedError,
  checkArity,
  checkOptionKeys,
  checkString,
  invalid,
  noteDefaultStore,
  storeRequired,
  toLockError,
  typeName,
} from "./errors.mjs";
import { durationMs, optionalDurationMs, ttlDurationMs } from "./durations.mjs";
import { warnIfProcessLocal } from "./warnings.mjs";
import { NATIVE, closeRecord, nativeStores } from "./stores.mjs";
import { jsStoreBridges } from "./bridge.mjs";

// The error classes and the shared checks are the API's exports too.
export * from "./errors.mjs";
// The stores' argument checks, for the CommonJS stores through js/gen/api.cjs.
export { checkKind, checkMs, checkPermits } from "./checks.mjs";
// Every shipped store's close() starts with releaseHolds() (see shutdown.mjs).
export { DEFAULT_CLOSE_TIMEOUT_MS, closeOptions, releaseHolds } from "./shutdown.mjs";

// Settled promises are immutable: the synchronous fast paths hand out these two.
const RESOLVED_TRUE = Promise.resolve(true);
const RESOLVED_FALSE = Promise.resolve(false);

const ACQUIRE_OPTIONS = ["timeout", "retryDelay", "autoExtend", "signal", "permits"];
/** A handle other than a semaphore's: `permits` is refused in words of its own, not listed. */
const LOCK_ACQUIRE_OPTIONS = ACQUIRE_OPTIONS.filter((o) => o !== "permits");
const PERMITS = ["permits"];
/** Where acquire options go, for a handle maker given more arguments than it takes. */
const OPTIONS_GO = "acquire options ({ timeout, signal, … }) go to acquire() or run(): lock(key, ttlMs, store).run(fn, { timeout })";
/** Lock's hook for MultiLock's getters. */
const NATIVE_HANDLE = Symbol("locksmith.nativeHandle");
const IMMEDIATE_OPTIONS = ["signal", "permits"];

/** `checkArity` for a method that answers with a promise: its refusal as a rejected promise, or undefined. */
function arityRejection(args, max, signature) {
  try {
    checkArity(args, max, signature);
  } catch (err) {
    return Promise.reject(err);
  }
  return undefined;
}

/** `signal`: an AbortSignal, or undefined. */
function parseSignal(value) {
  if (value === undefined || value === null) return undefined;
  if (
    typeof value !== "object" ||
    typeof value.aborted !== "boolean" ||
    typeof value.addEventListener !== "function" ||
    typeof value.removeEventListener !== "function"
  ) {
    throw invalid(`signal must be an AbortSignal (from an AbortController, or AbortSignal.timeout()); got ${typeName(value)}`);
  }
  return value;
}

/**
 * What an acquire ended by `signal` rejects with: the signal's reason when the caller
 * gave one, else an AbortError (the platform's default reason becomes its `cause`).
 * `mayRemain`: an attempt was on its way, released once it settles: then always an
 * AbortError with `holdMayRemain` (the signal's reason as its `reason`), which says so.
 */
function abortedBy(signal, key, unreleased, mayRemain = false) {
  const reason = signal.reason;
  const defaultReason = reason === undefined || (typeof DOMException === "function" && reason instanceof DOMException && reason.name === "AbortError");
  // A grant that raced the abort and could not be given back stays until its TTL, and an
  // attempt on its way may still be granted: said so (the release's error, or the
  // signal's reason, as the cause) rather than "nothing is held".
  if (unreleased !== undefined || mayRemain) {
    const err = new AbortError(
      unreleased !== undefined
        ? `locksmith: the acquire of ${JSON.stringify(key)} was aborted, but the grant that raced the abort could not be released (${unreleased.message.replace(/^locksmith: /, "")}): it is held until its TTL passes`
        : `locksmith: the acquire of ${JSON.stringify(key)} was aborted with an attempt on its way: a hold it takes is released once it settles, or stays until its TTL passes`,
      unreleased !== undefined ? { cause: unreleased } : reason === undefined ? undefined : { cause: reason },
    );
    err.key = key;
    err.reason = reason;
    err.holdMayRemain = true;
    return err;
  }
  if (!defaultReason) return reason;
  const err = new AbortError(
    `locksmith: the acquire of ${JSON.stringify(key)} was aborted; nothing is held`,
    reason === undefined ? undefined : { cause: reason },
  );
  err.key = key;
  return err;
}

/** Immediate variants' options: `{ signal, permits }` (`permits` listed for a semaphore only), checked. */
function immediateOptions(options, where, semaphore) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== "object" || Array.isArray(options)) throw invalid(`${where} options must be an object; got ${typeName(options)}`);
  if (semaphore) checkOptionKeys(options, IMMEDIATE_OPTIONS, where);
  else checkOptionKeys(options, ["signal"], where, PERMITS);
  if (options.signal === undefined && options.permits === undefined) return undefined;
  return { timeout: 0, signal: options.signal, permits: options.permits };
}

/** lockAll()'s keys, checked, one per line for the native handle (core checks the rest). */
function multiKeys(keys) {
  if (!Array.isArray(keys)) throw invalid(`lockAll() needs an array of keys; got ${typeName(keys)}`);
  if (keys.length === 0) throw invalid("lockAll() takes 1 to 64 keys; got 0");
  for (const key of keys) {
    checkString("key", key);
    // The separator below: core refuses control characters in a key all the same.
    if (key.includes("\n")) throw invalid("key must not contain control characters; found U+000A");
  }
  return keys.join("\n");
}

/** `permits`: a whole number of at least 1 (the handle checks its kind and limit), or undefined for 1. */
function parsePermits(value) {
  if (value === undefined) return 1;
  if (typeof value !== "number") throw invalid(`permits must be a whole number of permits; got ${typeName(value)}`);
  if (!Number.isInteger(value) || value < 1) throw invalid(`permits must be a whole number from 1 to the semaphore's limit; got ${value}`);
  return value;
}
const AUTO_EXTEND_OPTIONS = ["intervalMs", "maxHoldMs"];

/** `autoExtend`: `true`, or `{ intervalMs, maxHoldMs }`; `undefined` when off. */
function parseAutoExtend(value) {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalid(`autoExtend must be true, false or { intervalMs, maxHoldMs }; got ${typeName(value)}`);
  }
  checkOptionKeys(value, AUTO_EXTEND_OPTIONS, "autoExtend");
  return {
    intervalMs: optionalDurationMs("autoExtend.intervalMs", value.intervalMs),
    maxHoldMs: optionalDurationMs("autoExtend.maxHoldMs", value.maxHoldMs),
  };
}

// `Symbol.asyncDispose` where the runtime has it; the well-known fallback elsewhere
// (what TypeScript's `await using` looks up when the runtime lacks the symbol).
const ASYNC_DISPOSE = Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose");

/** The reason a hold's signal aborts with when the holder released it. */
function releasedReason(key) {
  const message = `locksmith: the lock on ${JSON.stringify(key)} was released`;
  return typeof DOMException === "function" ? new DOMException(message, "AbortError") : Object.assign(new Error(message), { name: "AbortError" });
}

// A store written in Rust keeps its native half under NATIVE (runtime entries set it).
export { NATIVE, NativeStore } from "./stores.mjs";
export { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, HAS_WAITERS, STORE_NAME };

/** Builds the public API over a binding. */
export function makeApi(binding) {
  const { MemoryLockStore, FileLockStore } = nativeStores(binding);
  const bridgeFor = jsStoreBridges(binding);

  /** The native side of `store`: its own for a native store, a bridge for any other. */
  function backendOf(store) {
    return store?.[NATIVE] ?? bridgeFor(store);
  }

  let currentStore;

  /** Sets the store that `lock()` and `restoreLock()` use; returns it. */
  function setLockStore(store) {
    checkArity(arguments, 1, "setLockStore(store)");
    backendOf(store);
    currentStore = store;
    return store;
  }

  /** The store that `lock()` and `restoreLock()` use. */
  function getLockStore() {
    checkArity(arguments, 0, "getLockStore()");
    if (currentStore === undefined) {
      if (storeRequired()) {
        throw new StoreNotSetError(
          "locksmith: no lock store was set, and LOCKSMITH_REQUIRE_STORE=1 asks every lock to name its store rather than use the default (this process's own memory): " +
            "call setLockStore(store) before the first lock, or pass the store: lock(key, ttlMs, store)",
        );
      }
      currentStore = new MemoryLockStore();
      noteDefaultStore();
      warnIfProcessLocal();
    }
    return currentStore;
  }

  // -------------------------------------------------------------------------------
  // Locks

  const RESTORED = Symbol("locksmith.restored");
  const KINDED = Symbol("locksmith.kinded");

  // Native lock handles cost far more to create than to reuse. A handle with nothing to
  // remember (never acquired, or released) goes back to its backend's pool, and the
  // next Lock on that backend resets it to its own key and TTL.
  const POOL_LIMIT = 256;
  const POOL = Symbol("locksmith.pool");

  const USER = Symbol("locksmith.user");

  function takeNative(backend, key, ttlMs, user) {
    let native = backend[POOL]?.pop();
    if (native === undefined) native = backend.lock(key, ttlMs);
    else native.reset(key, ttlMs);
    native[USER] = user;
    return native;
  }

  function giveBack(backend, native) {
    const pool = (backend[POOL] ??= []);
    if (pool.length < POOL_LIMIT) pool.push(native);
  }

  const acquireAsync = (native) => native.acquire(undefined, undefined);
  const releaseAsync = (native) => native.release();

  /** A store's name in diagnostics: a shipped store's own, else "custom". */
  const storeName = (store) => {
    const name = store?.[STORE_NAME];
    return typeof name === "string" ? name : "custom";
  };

  /** Whether acquire `options` wait (a timeout above 0): a refusal is then a timeout, not busy. */
  const waits = (options) => {
    try {
      return optionalDurationMs("timeout", options?.timeout) > 0;
    } catch {
      return false;
    }
  };

  /** What an aborted acquire's inner steps return, for the caller to reject with the signal's reason. */
  const ABORTED = Symbol("locksmith.aborted");
  // Aborted with an attempt on its way (released once it settles: a hold may remain).
  const ABORTED_IN_FLIGHT = Symbol("locksmith.aborted-in-flight");

  const releaseOutcome = (released) => (released ? "released" : "not-held");
  const extendOutcome = () => "extended";

  /** A lock on one key. */
  class Lock {
    #backend;
    #native;
    #key;
    #ttlMs;
    #busy = 0;
    /** The store, for its name in diagnostics. */
    #store;
    /** How many holds this handle has been granted: a hold's number in diagnostics. */
    #holds = 0;
    /** How many of a semaphore's permits the native handle's next acquire takes. */
    #permits = 1;

    #returned;
    /** The current hold's signal: `{ generation, controller }`. */
    #watch;
    /** `lock`, `semaphore`, `read` or `write`: only plain locks share pooled handles. */
    #kind = "lock";
    /** The store's shutdown record (shutdown.mjs), when the store can be closed. */
    #record;
    /** This handle's entry in the record, made at its first acquire. */
    #entry;
    /** The last acquire's promise, for close() to wait for. */
    #inflight;
    /** `{ reason, hold, closed }` once the store's close() (`closed`, its StoreClosedError) ended hold number `hold`. */
    #endedBy;

    // `store` has no default parameter: the restored and kinded paths below must not
    // touch the default store (getLockStore() makes one, and warns in a worker).
    constructor(key, ttlMs = DEFAULT_TTL_MS, store = undefined) {
      if (key === RESTORED) {
        const [backend, native, store] = ttlMs;
        native[USER] = this;
        this.#backend = backend;
        this.#native = native;
        this.#store = store;
        this.#key = native.key;
        this.#ttlMs = native.ttlMs;
        this.#kind = native.kind;
        this.#holds = 1;
        if (lostWatched()) this.#watchLoss(native);
        // A hold restored here is this process's: the store's close() releases it.
        this.#record = closeRecord(store);
        if (this.#record !== undefined && native.hasOwner) noteHold(this.#record, this.#closeEntry());
        return;
      }
      if (key === KINDED) {
        // semaphore() and readWriteLock(): { key, ttlMs, kind, limit, store }.
        const spec = ttlMs;
        checkString("key", spec.key);
        spec.ttlMs = ttlDurationMs(spec.ttlMs);
        if (spec.limit !== undefined && typeof spec.limit !== "number") {
          throw invalid(limitMessage(typeName(spec.limit)));
        }
        const backend = backendOf(spec.store);
        if (typeof backend.handle !== "function") {
          throw new UnsupportedError(`locksmith: this store has no semaphores or read-write locks`);
        }
        try {
          this.#native = backend.handle(spec.key, spec.ttlMs, spec.kind, spec.limit);
        } catch (err) {
          throw toLockError(err, spec.kind === "multi" ? undefined : spec.key);
        }
        this.#native[USER] = this;
        this.#backend = backend;
        this.#store = spec.store;
        this.#record = closeRecord(spec.store);
        // A lock on several keys goes by their list (`a, b`) in messages and diagnostics.
        this.#key = spec.kind === "multi" ? this.#native.key : spec.key;
        this.#ttlMs = spec.ttlMs;
        this.#kind = spec.kind;
        return;
      }
      if (arguments.length > 3) checkArity(arguments, 3, "new Lock(key, ttlMs?, store?)", OPTIONS_GO);
      checkString("key", key);
      ttlMs = ttlDurationMs(ttlMs);
      if (store === undefined) store = getLockStore();
      const backend = backendOf(store);
      try {
        this.#native = takeNative(backend, key, ttlMs, this);
      } catch (err) {
        throw toLockError(err, key);
      }
      this.#backend = backend;
      this.#store = store;
      this.#record = closeRecord(store);
      this.#key = key;
      this.#ttlMs = ttlMs;
    }

    /**
     * This lock's native handle. After giving its own back, a lock takes it again if
     * nobody else did meanwhile (no reset needed), else any from the pool.
     */
    #handle() {
      if (this.#native !== undefined) return this.#native;
      const returned = this.#returned;
      if (returned !== undefined) {
        this.#returned = undefined;
        const pool = this.#backend[POOL];
        if (returned[USER] === this && pool[pool.length - 1] === returned) {
          pool.pop();
          return (this.#native = returned);
        }
      }
      return (this.#native = takeNative(this.#backend, this.#key, this.#ttlMs, this));
    }

    #giveBack(native) {
      // A semaphore or read-write handle keeps its own native half.
      if (this.#kind !== "lock") return;
      this.#native = undefined;
      this.#returned = native;
      giveBack(this.#backend, native);
    }

    /** Gives the handle back when no call is in flight and it holds nothing. */
    #settle() {
      const native = this.#native;
      if (native !== undefined && this.#busy === 0 && !native.hasOwner) this.#giveBack(native);
    }

    /**
     * `#call` for a native call already made (`start` gives its promise), without the
     * async frames: the hot path of a store that answers asynchronously (Redis).
     * `after(value, native)` runs (as a method of this lock) before the handle is settled.
     */
    #started(native, start, after) {
      this.#busy += 1;
      let promise;
      try {
        promise = start(native);
      } catch (err) {
        this.#busy -= 1;
        this.#settle();
        return Promise.reject(toLockError(err, this.#key));
      }
      return promise.then(
        (value) => {
          this.#busy -= 1;
          if (after !== undefined) after.call(this, value, native);
          this.#settle();
          return value;
        },
        (err) => {
          this.#busy -= 1;
          this.#settle();
          throw toLockError(err, this.#key);
        },
      );
    }

    /** Runs an async native call with the handle, settling it afterwards. */
    async #call(op) {
      const native = this.#handle();
      this.#busy += 1;
      try {
        return await op(native);
      } catch (err) {
        throw toLockError(err, this.#key);
      } finally {
        this.#busy -= 1;
        this.#settle();
      }
    }

    get key() {
      return this.#key;
    }

    get ttlMs() {
      return this.#ttlMs;
    }

    /** The fencing token of the current hold, or null when not held or the store gives none. */
    get fencingToken() {
      return this.#native === undefined ? null : this.#native.fencingToken;
    }

    /**
     * Acquires, runs `fn(lock)`, and always releases. `[ran, result]`. When the hold was
     * lost before `fn` settled (its TTL passed, an extend failed), the work was not
     * protected throughout: it rejects with LockNotHeldError carrying `fn`'s outcome
     * (`err.result` its value, `err.cause` its rejection).
     */
    async run(fn, options) {
      if (arguments.length > 2) checkArity(arguments, 2, "run(fn, options?)");
      if (typeof fn !== "function") throw invalid(`run() needs a function; got ${typeName(fn)}`);
      if (!(await this.acquire(options))) return [false, undefined];
      const hold = this.#holds;
      let result;
      let failure;
      let failed = false;
      try {
        result = await fn(this);
      } catch (err) {
        failed = true;
        failure = err;
      }
      // Auto-extend ends with the function, whether or not the release below succeeds.
      if (options?.autoExtend) this.#native?.stopAutoExtend();
      // The store was closed while the function ran: its close() ended the hold.
      if (this.#endedBy !== undefined && this.#endedBy.hold === hold) {
        await this.release().catch(() => {});
        const closed = new StoreClosedError(
          `${this.#endedBy.closed.message} before run()'s function settled, and its close() ended the hold on ${JSON.stringify(this.#key)}: the work was not protected throughout`,
        );
        closed.key = this.#key;
        if (failed) closed.cause = failure;
        else closed.result = result;
        throw closed;
      }
      const lost = this.#lostDuringRun();
      if (failed || lost !== null) {
        // The callback's error (or the loss) is the one to see; a failed release leaves
        // the hold to its TTL.
        await this.release().catch(() => {});
        if (lost !== null) {
          if (failed) lost.cause = failure;
          else lost.result = result;
          throw lost;
        }
        throw failure;
      }
      try {
        await this.release();
      } catch (err) {
        // The work is done: keep its result with the error.
        err.result = result;
        throw err;
      }
      return [true, result];
    }

    /** After run()'s function settled: the error to reject with if the hold was lost meanwhile, else null. */
    #lostDuringRun() {
      const native = this.#native;
      // Released by the function itself, or still certainly held: not lost.
      if (native === undefined || native.holdGeneration !== null || !native.hasOwner) return null;
      const watched = this.#watch?.native === native ? this.#watch.controller.signal : undefined;
      const why = watched?.aborted && typeof watched.reason?.message === "string" ? watched.reason.message.replace(/^locksmith: /, "") : undefined;
      return new LockNotHeldError(
        `locksmith: lock ${JSON.stringify(this.#key)} was lost before run()'s function settled, so the work was not protected throughout${why ? ` (${why})` : " (its TTL passed without an extend)"}`,
        this.#key,
      );
    }

    /** `run()` that never waits. */
    async runImmediately(fn, options) {
      if (arguments.length > 2) checkArity(arguments, 2, "runImmediately(fn, options?)");
      return this.run(fn, immediateOptions(options, "runImmediately()", this.#kind === "semaphore") ?? { timeout: 0 });
    }

    /** Takes the lock, waiting up to `options.timeout` ms. `true` if taken. */
    acquire(options) {
      const refused = arguments.length > 1 ? arityRejection(arguments, 1, "acquire(options?)") : undefined;
      if (refused !== undefined) return refused;
      if (this.#record !== undefined) return this.#acquireClosable(options);
      return this.#acquireOpen(options);
    }

    /**
     * `acquire()` on a store that can be closed: refused once its close() began; noted in
     * the store's record, so close() ends it (a wait rejects with StoreClosedError) or
     * releases what it takes; a grant that arrives after close() began is released and
     * the acquire rejects with StoreClosedError.
     */
    #acquireClosable(options) {
      const record = this.#record;
      if (record.closed !== undefined)
        return Promise.reject(this.#storeClosed(record.closed, `: the acquire of ${JSON.stringify(this.#key)} is refused; nothing is held`));
      const entry = this.#closeEntry();
      noteHold(record, entry);
      const acquiring = this.#acquireOpen(options).then(
        (taken) => {
          if (taken && record.closed !== undefined) return this.#grantAfterClose(record.closed);
          if (!taken && !entry.live()) record.holds.delete(entry);
          return taken;
        },
        (err) => {
          if (!entry.live()) record.holds.delete(entry);
          throw err;
        },
      );
      this.#inflight = acquiring;
      return acquiring;
    }

    /** A StoreClosedError for this handle's acquire: `closed`'s words, then `tail`. */
    #storeClosed(closed, tail, mayRemain = false) {
      const err = new StoreClosedError(`${closed.message}${tail}`);
      err.key = this.#key;
      err.holdMayRemain = mayRemain;
      return err;
    }

    /** An acquire granted after the store's close() began: released, and StoreClosedError. */
    async #grantAfterClose(closed) {
      let unreleased;
      try {
        await this.#release();
      } catch (err) {
        unreleased = toLockError(err, this.#key);
      }
      const err = new StoreClosedError(
        `${closed.message} while the acquire of ${JSON.stringify(this.#key)} was on its way; ${
          unreleased === undefined
            ? "its grant was released"
            : `its grant could not be released (${unreleased.message.replace(/^locksmith: /, "")}): it is held until its TTL passes`
        }`,
        unreleased === undefined ? undefined : { cause: unreleased },
      );
      err.key = this.#key;
      err.holdMayRemain = unreleased !== undefined;
      throw err;
    }

    /** This handle's entry in its store's shutdown record (see shutdown.mjs). */
    #closeEntry() {
      this.#entry ??= {
        key: this.#key,
        live: () => this.#busy > 0 || (this.#native !== undefined && this.#native.holdGeneration !== null),
        end: (closed) => this.#endForClose(closed),
      };
      return this.#entry;
    }

    /**
     * The store's close(): the hold's signal aborts with a StoreClosedError, an acquire
     * on its way settles (a grant then is released by #acquireClosable), and the hold is
     * released. Rejects when the release fails. A hold already lost (its TTL passed, or
     * the store found it gone or someone else's) is left as it is.
     */
    async #endForClose(closed) {
      const reason = new StoreClosedError(`${closed.message}, which ended the hold on ${JSON.stringify(this.#key)}`);
      reason.key = this.#key;
      const end = () => {
        const native = this.#native;
        // Only a hold still certainly held: a lost one (its signal says so) is not released.
        if (native === undefined || native.holdGeneration === null) return false;
        if (this.#endedBy?.hold !== this.#holds) this.#endedBy = { reason, hold: this.#holds, closed };
        const watch = this.#watch;
        if (watch !== undefined && watch.native === native && !watch.controller.signal.aborted) watch.controller.abort(this.#endedBy.reason);
        return true;
      };
      end();
      await this.#inflight?.catch(() => {});
      if (!end()) return;
      await this.#releaseOpen();
    }

    #acquireOpen(options) {
      if (acquireChannel !== undefined && traced(acquireChannel)) return this.#tracedAcquire(options);
      // The fast path: no options, a synchronous store — one native call, and an
      // already-settled promise.
      if (options === undefined && this.#busy === 0 && this.#permits === 1) {
        const native = this.#handle();
        let now;
        try {
          now = native.tryAcquire();
        } catch (err) {
          return Promise.reject(toLockError(err, this.#key));
        }
        if (now === true) {
          this.#holds += 1;
          if (lostWatched()) this.#watchLoss(native);
          return RESOLVED_TRUE;
        }
        if (now === false) {
          this.#settle();
          return RESOLVED_FALSE;
        }
        // An asynchronous store: straight to the store, as `#acquireWaiting` would.
        return this.#started(native, acquireAsync, this.#granted);
      }
      return this.#acquireWaiting(options);
    }

    /** `acquire()` published on `locksmith:acquire`, with its outcome, attempts, wait and fencing token. */
    #tracedAcquire(options) {
      const context = this.#context(this.#ttlMs);
      context.hold = null;
      context.attempts = 0;
      context.waitedMs = 0;
      context.fencingToken = null;
      return acquireChannel.tracePromise(() => this.#acquireObserved(options, context), context);
    }

    async #acquireObserved(options, context) {
      const started = performance.now();
      const native = this.#handle();
      // Busy throughout, so the native handle (and its count of attempts) stays this lock's until read.
      this.#busy += 1;
      const before = native.attempts;
      try {
        const taken = await this.#acquireWaiting(options);
        context.outcome = taken ? "acquired" : waits(options) ? "timeout" : "busy";
        if (taken) context.hold = this.#holds;
        return taken;
      } catch (err) {
        const signal = options?.signal;
        context.outcome = signal?.aborted === true && (err === signal.reason || err?.code === "ABORTED") ? "aborted" : "error";
        throw err;
      } finally {
        context.attempts = (native.attempts - before) >>> 0;
        context.waitedMs = performance.now() - started;
        context.fencingToken = native.fencingToken ?? null;
        this.#busy -= 1;
        this.#settle();
      }
    }

    /**
     * `call(arg)` published on the tracing channel `channel`; the outcome is `outcome(value)`,
     * or "not-held" / "error" for a rejection.
     */
    #traced(channel, ttlMs, outcome, call, arg) {
      const context = this.#context(ttlMs);
      return channel.tracePromise(() => {
        let promise;
        try {
          promise = call.call(this, arg);
        } catch (err) {
          promise = Promise.reject(err);
        }
        return promise.then(
          (value) => {
            context.outcome = outcome(value);
            return value;
          },
          (err) => {
            context.outcome = err?.code === "LOCK_NOT_HELD" ? "not-held" : "error";
            throw err;
          },
        );
      }, context);
    }

    /** A diagnostics channel's context for a call on this lock. */
    #context(ttlMs) {
      return { key: this.#key, kind: this.#kind, store: storeName(this.#store), ttlMs, lock: this, hold: this.#holds, outcome: undefined };
    }

    /** After an async acquire (see `#started`): a grant is numbered and watched for `locksmith:lost`. */
    #granted(taken, native) {
      if (!taken) return;
      this.#holds += 1;
      if (lostWatched()) this.#watchLoss(native);
    }

    /**
     * Publishes on `locksmith:lost` if the hold `native` now has ends by loss (its TTL
     * passed without an extend, an extend found it gone) rather than by a release.
     */
    #watchLoss(native) {
      if (native.holdGeneration === null) return;
      const hold = this.#holds;
      native.watch().then(undefined, (err) => {
        if (!lostWatched()) return;
        const error = toLockError(err, this.#key);
        lostChannel.publish({ key: this.#key, kind: this.#kind, store: storeName(this.#store), reason: error.code, error, lock: this, hold });
      });
    }

    async #acquireWaiting(options) {
      let timeout;
      let retryDelay;
      let autoExtend;
      let signal;
      let permits = 1;
      if (options !== undefined && options !== null) {
        if (typeof options !== "object" || Array.isArray(options)) {
          // A bare duration where the options go (`run(fn, 5000)`) was meant as a timeout.
          const meant = typeof options === "number" || typeof options === "string" ? JSON.stringify(options) : undefined;
          throw invalid(
            `acquire options must be an object; got ${typeName(options)}${meant === undefined ? "" : ` (${meant}): to wait, write { timeout: ${meant} }`}`,
          );
        }
        if (this.#kind === "semaphore") checkOptionKeys(options, ACQUIRE_OPTIONS, "acquire() and run()");
        else checkOptionKeys(options, LOCK_ACQUIRE_OPTIONS, "acquire() and run()", PERMITS);
        timeout = optionalDurationMs("timeout", options.timeout);
        retryDelay = optionalDurationMs("retryDelay", options.retryDelay);
        autoExtend = parseAutoExtend(options.autoExtend);
        signal = parseSignal(options.signal);
        if (options.permits !== undefined && this.#kind !== "semaphore") {
          // Any value, 1 too: the types give `permits` to semaphores only.
          // Core's words for the same refusal (validate::permits, Lock::set_permits).
          const takes = this.#kind === "multi" ? "a lockAll() handle takes each of its keys once" : `a ${this.#kind} handle takes one hold`;
          throw invalid(`permits is a semaphore's option; ${takes}`);
        }
        permits = parsePermits(options.permits);
      }
      // Already aborted: nothing is tried (the options were checked all the same).
      if (signal?.aborted) throw abortedBy(signal, this.#key);
      // The error of a release that failed to give back a grant that raced the abort.
      let unreleased;
      const taken = await this.#call(async (native) => {
        if (autoExtend) native.checkAutoExtend(autoExtend.intervalMs, autoExtend.maxHoldMs);
        if (permits !== this.#permits) {
          native.setPermits(permits);
          this.#permits = permits;
        }
        const now = native.tryAcquireNow(timeout, retryDelay);
        // A wait on a store that can be closed ends when its close() begins.
        const closing = timeout > 0 ? this.#record : undefined;
        let taken;
        if (now === true || (now === false && !(timeout > 0))) taken = now;
        else if (signal === undefined && closing === undefined) taken = await native.acquire(timeout, retryDelay);
        else {
          taken = await this.#acquireAbortable(native, timeout, retryDelay, signal, closing);
          if (taken === ABORTED || taken === ABORTED_IN_FLIGHT) return taken;
        }
        // A grant that raced the abort (the signal fired before its answer arrived) is given back.
        if (taken && signal?.aborted) {
          try {
            await native.release();
          } catch (err) {
            unreleased = toLockError(err, this.#key);
          }
          return ABORTED;
        }
        if (taken && autoExtend) native.autoExtend(autoExtend.intervalMs, autoExtend.maxHoldMs);
        if (taken) {
          this.#holds += 1;
          if (lostWatched()) this.#watchLoss(native);
        }
        return taken;
      });
      if (taken === ABORTED || taken === ABORTED_IN_FLIGHT) {
        const mayRemain = taken === ABORTED_IN_FLIGHT;
        if (signal?.aborted || this.#record?.closed === undefined) throw abortedBy(signal, this.#key, unreleased, mayRemain);
        throw this.#storeClosed(
          this.#record.closed,
          ` while the acquire of ${JSON.stringify(this.#key)} waited${
            mayRemain ? ", with an attempt on its way: a hold it takes is released once it settles, or stays until its TTL passes" : "; nothing is held"
          }`,
          mayRemain,
        );
      }
      return taken;
    }

    /**
     * The store's acquire, ended by `signal` or by `closing` (the store's record: its
     * close()): ABORTED then, or ABORTED_IN_FLIGHT when an attempt was on its way.
     * A wait joins the record's `waits`, which one listener of its signal ends, rather
     * than listening itself (eleven listeners on one signal make Node warn of a leak).
     */
    async #acquireAbortable(native, timeout, retryDelay, signal, closing) {
      const token = new binding.AbortToken();
      const onAbort = () => {
        token.abort();
        binding.afterAbort?.();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      closing?.waits.add(onAbort);
      if (closing?.signal.aborted) onAbort();
      try {
        return await native.acquireAbortable(timeout, retryDelay, token);
      } catch (err) {
        const error = toLockError(err, this.#key);
        if (error.code === "ABORTED") {
          return error.holdMayRemain === true ? ABORTED_IN_FLIGHT : ABORTED;
        }
        throw err;
      } finally {
        try {
          signal?.removeEventListener("abort", onAbort);
          closing?.waits.delete(onAbort);
        } catch {
          // The acquire's answer stands; the token only outlives it.
        }
      }
    }

    /**
     * An AbortSignal for the current hold: it aborts when the hold ends — released
     * (an AbortError), or lost (LockNotHeldError: the TTL passed, an extend found the
     * key gone or someone else's; StoreUnavailableError: the store was out of reach
     * until the hold expired). Already aborted when nothing is held.
     */
    get signal() {
      const native = this.#native;
      const generation = native === undefined ? null : native.holdGeneration;
      const watch = this.#watch;
      // Ended by the store's close() (StoreClosedError), even while its release is on its way.
      const ended = this.#endedBy;
      if (ended !== undefined && ended.hold === this.#holds) {
        if (watch === undefined) return AbortSignal.abort(ended.reason);
        if (!watch.controller.signal.aborted) watch.controller.abort(ended.reason);
        return watch.controller.signal;
      }
      if (generation === null) {
        // Nothing certainly held: released, never taken, or (an owner still recorded)
        // past its deadline — lost, and the signal says so at once.
        const lost = native?.hasOwner === true;
        const reason = lost
          ? new LockNotHeldError(`locksmith: lock ${JSON.stringify(this.#key)} is not held by this handle (its TTL passed without an extend)`, this.#key)
          : undefined;
        if (watch !== undefined) {
          if (!watch.controller.signal.aborted) watch.controller.abort(reason ?? releasedReason(this.#key));
          return watch.controller.signal;
        }
        return AbortSignal.abort(
          reason ?? new LockNotHeldError(`locksmith: lock ${JSON.stringify(this.#key)} is not held by this handle (nothing is held)`, this.#key),
        );
      }
      // The same hold: the same native handle and generation, and not ended (a pooled
      // handle is reused, and reset, so its generation alone does not tell two holds
      // apart; a live hold's signal is never aborted).
      if (watch !== undefined && watch.native === native && watch.generation === generation && !watch.controller.signal.aborted) {
        return watch.controller.signal;
      }
      if (watch !== undefined && !watch.controller.signal.aborted) {
        watch.controller.abort(
          new LockNotHeldError(`locksmith: lock ${JSON.stringify(this.#key)} is not held by this handle (it expired and was lost)`, this.#key),
        );
      }
      const controller = new AbortController();
      this.#watch = { native, generation, controller };
      const key = this.#key;
      native.watch().then(
        () => controller.abort(releasedReason(key)),
        (err) => controller.abort(toLockError(err, key)),
      );
      return controller.signal;
    }

    /** Ends the current hold's signal as released (the watcher may say so later too). */
    #released() {
      const watch = this.#watch;
      if (watch !== undefined && !watch.controller.signal.aborted) watch.controller.abort(releasedReason(this.#key));
    }

    /** Takes the lock only if it is free right now. */
    acquireImmediately(options) {
      const refused = arguments.length > 1 ? arityRejection(arguments, 1, "acquireImmediately(options?)") : undefined;
      if (refused !== undefined) return refused;
      if (options === undefined) return this.acquire();
      let checked;
      try {
        checked = immediateOptions(options, "acquireImmediately()", this.#kind === "semaphore");
      } catch (err) {
        return Promise.reject(err);
      }
      return this.acquire(checked);
    }

    /** Frees the lock if this handle holds it; `false` if it no longer did. */
    release() {
      const refused = arguments.length > 0 ? arityRejection(arguments, 0, "release()") : undefined;
      if (refused !== undefined) return refused;
      if (this.#entry !== undefined) {
        // Released (or found not held): out of the store's shutdown record.
        const entry = this.#entry;
        return this.#releaseOpen().then((released) => {
          if (!entry.live()) this.#record.holds.delete(entry);
          return released;
        });
      }
      return this.#releaseOpen();
    }

    #releaseOpen() {
      if (releaseChannel !== undefined && traced(releaseChannel)) return this.#traced(releaseChannel, this.#ttlMs, releaseOutcome, this.#release);
      return this.#release();
    }

    #release() {
      if (this.#busy === 0) {
        const native = this.#native;
        if (native === undefined) return RESOLVED_FALSE;
        let now;
        try {
          now = native.releaseNow();
        } catch (err) {
          return Promise.reject(toLockError(err, this.#key));
        }
        if (now === true) {
          this.#released();
          this.#giveBack(native);
          return RESOLVED_TRUE;
        }
        if (now === false) {
          this.#settle();
          return RESOLVED_FALSE;
        }
      }
      return this.#started(this.#handle(), releaseAsync, (released) => {
        if (released) this.#released();
      });
    }

    /** Releases a held lock; harmless when nothing is held. For `await using`. */
    async [ASYNC_DISPOSE]() {
      await this.release();
    }

    /** Pushes the expiry `ttlMs` (default: the lock's TTL) from now; throws LockNotHeldError if lost. */
    extend(ttlMs) {
      const refused = arguments.length > 1 ? arityRejection(arguments, 1, "extend(ttlMs?)") : undefined;
      if (refused !== undefined) return refused;
      if (extendChannel !== undefined && traced(extendChannel)) {
        let requested = this.#ttlMs;
        try {
          if (ttlMs !== undefined) requested = durationMs("ttlMs", ttlMs);
        } catch {
          // #extend rejects with the error.
        }
        return this.#traced(extendChannel, requested, extendOutcome, this.#extend, ttlMs);
      }
      return this.#extend(ttlMs);
    }

    async #extend(ttlMs) {
      if (ttlMs !== undefined) ttlMs = ttlDurationMs(ttlMs);
      return this.#call((native) => (native.extendNow(ttlMs) ? undefined : native.extend(ttlMs)));
    }

    /** How many holds of the key are live now: permits of a semaphore, readers (or one writer); 0 or 1 for a lock. */
    count() {
      const refused = arguments.length > 0 ? arityRejection(arguments, 0, "count()") : undefined;
      if (refused !== undefined) return refused;
      return this.#call((native) => native.count());
    }

    /** Whether anyone holds the key. */
    isLocked() {
      const refused = arguments.length > 0 ? arityRejection(arguments, 0, "isLocked()") : undefined;
      if (refused !== undefined) return refused;
      return this.#call((native) => native.isLocked());
    }

    /** Whether this handle held the key and no longer does. */
    async isExpired() {
      checkArity(arguments, 0, "isExpired()");
      if (this.#native === undefined) return false;
      return this.#call((native) => native.isExpired());
    }

    /** Milliseconds until the key's hold expires, or null when nobody holds it. */
    getRemainingTime() {
      const refused = arguments.length > 0 ? arityRejection(arguments, 0, "getRemainingTime()") : undefined;
      if (refused !== undefined) return refused;
      return this.#call((native) => native.remainingTime());
    }

    /** The key, TTL and owner token as a string for `restoreLock()`. A bearer secret. */
    serialize() {
      checkArity(arguments, 0, "serialize()");
      try {
        const serialized = this.#handle().serialize();
        // Handed to another process (or kept for one): the store's close() leaves it alone.
        if (this.#entry !== undefined) this.#record.holds.delete(this.#entry);
        return serialized;
      } catch (err) {
        throw toLockError(err, this.#key);
      } finally {
        this.#settle();
      }
    }

    get [Symbol.toStringTag]() {
      return "Lock";
    }

    /** The native handle, for MultiLock's getters. */
    [NATIVE_HANDLE]() {
      return this.#native;
    }
  }

  /**
   * A lock on several keys at once, all or nothing: after an attempt it holds every key
   * or none, and while it waits it holds none. It has a lock's methods; `keys` lists the
   * keys in the order they are taken, and `fencingTokens` gives each key's token.
   */
  class MultiLock extends Lock {
    #keys;

    constructor(keys, ttlMs = DEFAULT_TTL_MS, store = undefined) {
      if (keys === RESTORED) {
        super(RESTORED, ttlMs);
        return;
      }
      if (arguments.length > 3) checkArity(arguments, 3, "new MultiLock(keys, ttlMs?, store?)", OPTIONS_GO);
      super(KINDED, { key: multiKeys(keys), ttlMs, kind: "multi", store: store === undefined ? getLockStore() : store });
    }

    /** The keys, in the canonical order every lockAll() takes them in. */
    get keys() {
      this.#keys ??= Object.freeze(this[NATIVE_HANDLE]().keys.split("\n"));
      return this.#keys;
    }

    /** Each key's fencing token in the current hold (null where the store gives none); null when not held. */
    get fencingTokens() {
      const native = this[NATIVE_HANDLE]();
      const tokens = native.fencingTokens;
      if (tokens.length === 0) return null;
      const out = {};
      this.keys.forEach((key, i) => {
        out[key] = Number.isNaN(tokens[i]) ? null : tokens[i];
      });
      return Object.freeze(out);
    }

    /** A multi lock's hold is of its keys: a single fencing token has no meaning; see `fencingTokens`. */
    get fencingToken() {
      return null;
    }

    get [Symbol.toStringTag]() {
      return "MultiLock";
    }
  }

  /** A lock on every one of `keys` at once (all or nothing), held for `ttlMs` once acquired. */
  function lockAll(keys, ttlMs = DEFAULT_TTL_MS, store = undefined) {
    if (arguments.length > 3) checkArity(arguments, 3, "lockAll(keys, ttlMs?, store?)", OPTIONS_GO);
    return new MultiLock(keys, ttlMs, store === undefined ? getLockStore() : store);
  }

  /** A lock on `key`, held for `ttlMs` once acquired, in the current store. */
  function lock(key, ttlMs = DEFAULT_TTL_MS, store = undefined) {
    if (arguments.length > 3) checkArity(arguments, 3, "lock(key, ttlMs?, store?)", OPTIONS_GO);
    return new Lock(key, ttlMs, store);
  }

  /**
   * A handle on the semaphore `key` (at most `limit` holders at once), each permit held
   * for `ttlMs` once acquired, in `store`. It has a lock's methods, and `count()`.
   */
  function semaphore(key, limit, ttlMs = DEFAULT_TTL_MS, store = undefined) {
    if (arguments.length > 4) checkArity(arguments, 4, "semaphore(key, limit, ttlMs?, store?)", OPTIONS_GO);
    if (store === undefined) store = getLockStore();
    if (limit === undefined) throw invalid(limitMessage("undefined: semaphore(key, limit, ttlMs?, store?) needs its limit"));
    return new Lock(KINDED, { key, ttlMs, kind: "semaphore", limit: limit ?? Number.NaN, store });
  }

  /**
   * The read-write lock `key`: `readLock()` handles share it, a `writeLock()` handle has
   * it alone, and a waiting writer keeps new readers out.
   */
  function readWriteLock(key, ttlMs = DEFAULT_TTL_MS, store = undefined) {
    if (arguments.length > 3) checkArity(arguments, 3, "readWriteLock(key, ttlMs?, store?)", OPTIONS_GO);
    if (store === undefined) store = getLockStore();
    checkString("key", key);
    ttlMs = ttlDurationMs(ttlMs);
    backendOf(store);
    return Object.freeze({
      key,
      ttlMs,
      readLock(...args) {
        checkArity(args, 0, "readLock()", OPTIONS_GO.replace("lock(key, ttlMs, store)", "readLock()"));
        return new Lock(KINDED, { key, ttlMs, kind: "read", store });
      },
      writeLock(...args) {
        checkArity(args, 0, "writeLock()", OPTIONS_GO.replace("lock(key, ttlMs, store)", "writeLock()"));
        return new Lock(KINDED, { key, ttlMs, kind: "write", store });
      },
    });
  }

  /** Rebuilds a lock from `serialize()`, owner token and all. */
  function restoreLock(serialized, store = undefined) {
    if (arguments.length > 2) checkArity(arguments, 2, "restoreLock(serialized, store?)");
    if (store === undefined) store = getLockStore();
    checkString("serialized", serialized);
    const backend = backendOf(store);
    try {
      const native = backend.restore(serializedFields(serialized));
      return native.kind === "multi" ? new MultiLock(RESTORED, [backend, native, store]) : new Lock(RESTORED, [backend, native, store]);
    } catch (err) {
      throw toLockError(err);
    }
  }

  return {
    lock,
    lockAll,
    MultiLock,
    semaphore,
    readWriteLock,
    Lock,
    restoreLock,
    setLockStore,
    getLockStore,
    MemoryLockStore,
    FileLockStore,
    LockError,
    LockNotHeldError,
    InvalidArgumentError,
    InvalidSerializedLockError,
    StoreUnavailableError,
    StoreContractViolationError,
    LockStoreError,
    StoreClosedError,
    StoreNotSetError,
    UnsupportedError,
    AbortError,
  };
}
