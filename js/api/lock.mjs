// The lock handle: `Lock`, over a native handle (`NativeLock`) made by its store's
// backend (and pooled: pool.mjs). The handle keeps what JS must (its promise fast paths,
// the store's shutdown record, the hold's signal, the diagnostics); the lock logic is
// core's.
import { acquireChannel, extendChannel, lostChannel, lostWatched, releaseChannel, traced } from "./diagnostics.mjs";
import { DEFAULT_TTL_MS, limitMessage } from "./defaults.mjs";
import { noteHold } from "./shutdown.mjs";
import { UnsupportedError, checkArity, checkString, invalid, toLockError, typeName } from "./errors.mjs";
import { durationMs, ttlDurationMs } from "./durations.mjs";
import { OPTIONS_GO, acquireOptions, arityRejection, handleOptions, immediateOptions } from "./options.mjs";
import { abortedBy, closedDuringRun, closedWhileWaiting, endedByClose, lostDuringRun, releaseGrantAfterClose, storeClosed } from "./lock-errors.mjs";
import { extendOutcome, observeAcquire, releaseOutcome, storeName, traceCall } from "./lock-tracing.mjs";
import { HoldSignal } from "./hold-signal.mjs";
import { ABORTED, ABORTED_IN_FLIGHT, acquireAbortable } from "./abortable.mjs";
import { answeredLater, answersLater, giveBack, ownNative, takeBack, takeNative } from "./pool.mjs";
import { closeRecord } from "./stores.mjs";

// Settled promises are immutable: the synchronous fast paths hand out these two.
const RESOLVED_TRUE = Promise.resolve(true);
const RESOLVED_FALSE = Promise.resolve(false);

// The bits of the native `finishRunNow()` (node/src/lock.rs): released; lost before.
const RUN_RELEASED = 1;
const RUN_LOST = 2;

/** What `new Lock()` takes first from restoreLock() (then `[backend, native, store]`) and from the kinded makers (then a spec). */
export const RESTORED = Symbol("locksmith.restored");
export const KINDED = Symbol("locksmith.kinded");
/** Lock's hook for MultiLock's getters. */
export const NATIVE_HANDLE = Symbol("locksmith.nativeHandle");

// `Symbol.asyncDispose` where the runtime has it; the well-known fallback elsewhere
// (what TypeScript's `await using` looks up when the runtime lacks the symbol).
export const ASYNC_DISPOSE = Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose");

const acquireAsync = (native) => native.acquire(undefined, undefined);
const releaseAsync = (native) => native.release();

/**
 * The Lock class over `binding` (its AbortToken, and afterAbort when it has one);
 * `backendOf(store)` gives a store's native side, `getLockStore()` the current store.
 */
export function defineLock(binding, { backendOf, getLockStore }) {
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
    /** The current hold's signal (hold-signal.mjs), once asked for. */
    #holdSignal;
    /** `lock`, `semaphore`, `read` or `write`: only plain locks share pooled handles. */
    #kind = "lock";
    /** A fair lock or semaphore (`{ fair: true }`): it keeps its own native half. */
    #fair = false;
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
    constructor(key, ttlMs = DEFAULT_TTL_MS, store = undefined, options = undefined) {
      if (key === RESTORED) {
        const [backend, native, store] = ttlMs;
        ownNative(native, this);
        this.#backend = backend;
        this.#native = native;
        this.#store = store;
        this.#key = native.key;
        this.#ttlMs = native.ttlMs;
        this.#setKind(native.kind);
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
        ownNative(this.#native, this);
        this.#backend = backend;
        this.#store = spec.store;
        this.#record = closeRecord(spec.store);
        // A lock on several keys goes by their list (`a, b`) in messages and diagnostics.
        this.#key = spec.kind === "multi" ? this.#native.key : spec.key;
        this.#ttlMs = spec.ttlMs;
        this.#setKind(spec.kind);
        return;
      }
      if (arguments.length > 4) checkArity(arguments, 4, "new Lock(key, ttlMs?, store?, options?)", OPTIONS_GO);
      // A fair lock: a kinded handle of its own (never pooled).
      if (handleOptions(options, "new Lock()")) return new Lock(KINDED, { key, ttlMs, kind: "fair lock", store: store === undefined ? getLockStore() : store });
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
        if (takeBack(this.#backend, returned, this) !== undefined) return (this.#native = returned);
      }
      return (this.#native = takeNative(this.#backend, this.#key, this.#ttlMs, this));
    }

    /** `kind` as the native handle names it: `fair lock` and `fair semaphore` are fair. */
    #setKind(kind) {
      this.#fair = kind.startsWith("fair ");
      this.#kind = this.#fair ? kind.slice(5) : kind;
    }

    /** Whether this handle is fair (`{ fair: true }`): granted in the order the store queued its waiters. */
    get fair() {
      return this.#fair;
    }

    #giveBack(native) {
      // A semaphore, read-write or fair handle keeps its own native half.
      if (this.#kind !== "lock" || this.#fair) return;
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
     * `after(value, native)` runs (as a method of this lock) before the handle is settled;
     * its `true` says the handle holds what it was just granted, so it is not given back
     * and its store need not be asked.
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
          if (after === undefined || after.call(this, value, native) !== true) this.#settle();
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
        const closed = closedDuringRun(this.#endedBy.closed, this.#key);
        if (failed) closed.cause = failure;
        else closed.result = result;
        throw closed;
      }
      const finished = this.#finishRunNow();
      if (finished !== undefined) {
        if (finished.lost !== null) {
          if (failed) finished.lost.cause = failure;
          else finished.lost.result = result;
          throw finished.lost;
        }
        if (failed) throw failure;
        return [true, result];
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
      return lostDuringRun(this.#key, this.#holdSignal?.reason(native));
    }

    /**
     * run()'s end on a store that never waits: `#lostDuringRun()` and the release in
     * one native call (`{ lost }`, the error or null), or undefined when that does not
     * apply (an async store, a call in flight, the store's shutdown record or the
     * release's tracing channel to keep) and run() takes the general path.
     */
    #finishRunNow() {
      const native = this.#native;
      if (native === undefined || this.#busy !== 0 || this.#entry !== undefined || native.finishRunNow === undefined) return undefined;
      if (answersLater(this.#backend, this.#kind) || (releaseChannel !== undefined && traced(releaseChannel))) return undefined;
      const code = native.finishRunNow();
      if (code === null) return answeredLater(this.#backend, this.#kind);
      // Read before the release ends the hold's signal as released.
      const lost = code & RUN_LOST ? lostDuringRun(this.#key, this.#holdSignal?.reason(native)) : null;
      if (code & RUN_RELEASED) {
        this.#holdSignal?.released(this.#key);
        this.#giveBack(native);
      } else {
        this.#settle();
      }
      return { lost };
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
        return Promise.reject(storeClosed(record.closed, `: the acquire of ${JSON.stringify(this.#key)} is refused; nothing is held`, this.#key));
      const entry = this.#closeEntry();
      noteHold(record, entry);
      const acquiring = this.#acquireOpen(options).then(
        (taken) => {
          if (taken && record.closed !== undefined) return releaseGrantAfterClose(() => this.#release(), record.closed, this.#key);
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
      const reason = endedByClose(closed, this.#key);
      const end = () => {
        const native = this.#native;
        // Only a hold still certainly held: a lost one (its signal says so) is not released.
        if (native === undefined || native.holdGeneration === null) return false;
        if (this.#endedBy?.hold !== this.#holds) this.#endedBy = { reason, hold: this.#holds, closed };
        this.#holdSignal?.end(native, this.#endedBy.reason);
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
        let now = null;
        try {
          if (!answersLater(this.#backend, this.#kind)) now = native.tryAcquire();
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
      if (this.#busy === 0) return this.#acquireFirst(options);
      return this.#acquireWaiting(options);
    }

    /**
     * An acquire with options whose first attempt, on a store that never waits, settles
     * it (taken, or not taken and no wait asked for): no async frames, an already-settled
     * promise. Otherwise `#acquireWaiting` goes on from that attempt.
     */
    #acquireFirst(options) {
      let checked;
      try {
        checked = acquireOptions(options, this.#kind);
      } catch (err) {
        return Promise.reject(err);
      }
      const { timeout, retryDelay, autoExtend, signal, permits } = checked;
      if (autoExtend !== undefined || signal !== undefined || permits !== this.#permits) return this.#acquireWaiting(options, checked);
      const native = this.#handle();
      let now;
      try {
        now = native.tryAcquireNow(timeout, retryDelay);
      } catch (err) {
        this.#settle();
        return Promise.reject(toLockError(err, this.#key));
      }
      if (now === true) {
        this.#holds += 1;
        if (lostWatched()) this.#watchLoss(native);
        return RESOLVED_TRUE;
      }
      if (now === false && !(timeout > 0)) {
        this.#settle();
        return RESOLVED_FALSE;
      }
      return this.#acquireWaiting(options, checked, now);
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
      return observeAcquire(context, native, options, started, {
        acquire: () => this.#acquireWaiting(options),
        hold: () => this.#holds,
        done: () => {
          this.#busy -= 1;
          this.#settle();
        },
      });
    }

    /** `call(arg)` (a method of this lock) published on the tracing channel `channel` (see lock-tracing.mjs). */
    #traced(channel, ttlMs, outcome, call, arg) {
      return traceCall(channel, this.#context(ttlMs), outcome, () => call.call(this, arg));
    }

    /** A diagnostics channel's context for a call on this lock. */
    #context(ttlMs) {
      return { key: this.#key, kind: this.#kind, fair: this.#fair, store: storeName(this.#store), ttlMs, lock: this, hold: this.#holds, outcome: undefined };
    }

    /** After an async acquire (see `#started`): a grant is numbered and watched for `locksmith:lost`. */
    #granted(taken, native) {
      if (!taken) return false;
      this.#holds += 1;
      if (lostWatched()) this.#watchLoss(native);
      return true;
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
        lostChannel.publish({ key: this.#key, kind: this.#kind, fair: this.#fair, store: storeName(this.#store), reason: error.code, error, lock: this, hold });
      });
    }

    /**
     * `acquire()` in full. `checked`: the options as acquireOptions() checked them;
     * `first`: the outcome of the first attempt (tryAcquireNow()) when already made.
     */
    async #acquireWaiting(options, checked = acquireOptions(options, this.#kind), first = undefined) {
      const { timeout, retryDelay, autoExtend, signal, permits } = checked;
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
        const now = first !== undefined ? first : native.tryAcquireNow(timeout, retryDelay);
        // A wait on a store that can be closed ends when its close() begins.
        const closing = timeout > 0 ? this.#record : undefined;
        let taken;
        if (now === true || (now === false && !(timeout > 0))) taken = now;
        // After a refused attempt here, the wait starts with its pause (no second attempt at once).
        else if (signal === undefined && closing === undefined) taken = await native.acquire(timeout, retryDelay, now === false);
        else {
          taken = await acquireAbortable(binding, native, this.#key, { timeout, retryDelay, signal, closing, afterRefusedTry: now === false });
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
        throw closedWhileWaiting(this.#record.closed, this.#key, mayRemain);
      }
      return taken;
    }

    /**
     * An AbortSignal for the current hold: it aborts when the hold ends — released
     * (an AbortError), or lost (LockNotHeldError: the TTL passed, an extend found the
     * key gone or someone else's; StoreUnavailableError: the store was out of reach
     * until the hold expired). Already aborted when nothing is held.
     */
    get signal() {
      const ended = this.#endedBy;
      this.#holdSignal ??= new HoldSignal();
      return this.#holdSignal.of(this.#native, this.#key, ended !== undefined && ended.hold === this.#holds ? ended : undefined);
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
        let now = null;
        try {
          if (!answersLater(this.#backend, this.#kind)) now = native.releaseNow();
        } catch (err) {
          return Promise.reject(toLockError(err, this.#key));
        }
        if (now === true) {
          this.#holdSignal?.released(this.#key);
          this.#giveBack(native);
          return RESOLVED_TRUE;
        }
        if (now === false) {
          this.#settle();
          return RESOLVED_FALSE;
        }
        answeredLater(this.#backend, this.#kind);
      }
      return this.#started(this.#handle(), releaseAsync, (released) => {
        if (released) this.#holdSignal?.released(this.#key);
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

  return Lock;
}
