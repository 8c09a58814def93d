// The ways to make a lock handle: lock(), lockAll() (MultiLock), semaphore(),
// readWriteLock() and restoreLock(), over the Lock class of a binding.
import { DEFAULT_TTL_MS, limitMessage } from "./defaults.mjs";
import { serializedFields } from "./serialized.mjs";
import { checkArity, checkString, invalid, toLockError } from "./errors.mjs";
import { ttlDurationMs } from "./durations.mjs";
import { OPTIONS_GO, handleOptions, multiKeys } from "./options.mjs";
import { KINDED, NATIVE_HANDLE, RESTORED } from "./lock.mjs";

const FAIR = Object.freeze({ fair: true });
const LOCK_ALL_UNFAIR = "lockAll() cannot be fair: fair queues over several keys can deadlock or starve (take fair locks one key at a time)";
const RW_PHASE_FAIR = "read-write locks take no { fair }: they are phase-fair already (a waiting writer keeps new readers out)";

/** Refuses `{ fair }` given to a handle maker that cannot be fair, in words of its own (`why`). */
function notFair(options, why) {
  if (options !== null && typeof options === "object" && "fair" in options) throw invalid(why);
}

/** The handle makers over `Lock` (from defineLock), with the same `backendOf` and `getLockStore`. */
export function defineHandles(Lock, { backendOf, getLockStore }) {
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
      if (arguments.length > 3) {
        notFair(arguments[3], LOCK_ALL_UNFAIR);
        checkArity(arguments, 3, "new MultiLock(keys, ttlMs?, store?)", OPTIONS_GO);
      }
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
    if (arguments.length > 3) {
      notFair(arguments[3], LOCK_ALL_UNFAIR);
      checkArity(arguments, 3, "lockAll(keys, ttlMs?, store?)", OPTIONS_GO);
    }
    return new MultiLock(keys, ttlMs, store === undefined ? getLockStore() : store);
  }

  /** A lock on `key`, held for `ttlMs` once acquired, in the current store. */
  function lock(key, ttlMs = DEFAULT_TTL_MS, store = undefined, options = undefined) {
    if (arguments.length > 4) checkArity(arguments, 4, "lock(key, ttlMs?, store?, options?)", OPTIONS_GO);
    return handleOptions(options, "lock()") ? new Lock(key, ttlMs, store, FAIR) : new Lock(key, ttlMs, store);
  }

  /**
   * A handle on the semaphore `key` (at most `limit` holders at once), each permit held
   * for `ttlMs` once acquired, in `store`. It has a lock's methods, and `count()`.
   */
  function semaphore(key, limit, ttlMs = DEFAULT_TTL_MS, store = undefined, options = undefined) {
    if (arguments.length > 5) checkArity(arguments, 5, "semaphore(key, limit, ttlMs?, store?, options?)", OPTIONS_GO);
    const fair = handleOptions(options, "semaphore()");
    if (store === undefined) store = getLockStore();
    if (limit === undefined) throw invalid(limitMessage("undefined: semaphore(key, limit, ttlMs?, store?) needs its limit"));
    return new Lock(KINDED, { key, ttlMs, kind: fair ? "fair semaphore" : "semaphore", limit: limit ?? Number.NaN, store });
  }

  /**
   * The read-write lock `key`: `readLock()` handles share it, a `writeLock()` handle has
   * it alone, and a waiting writer keeps new readers out.
   */
  function readWriteLock(key, ttlMs = DEFAULT_TTL_MS, store = undefined) {
    if (arguments.length > 3) {
      notFair(arguments[3], RW_PHASE_FAIR);
      checkArity(arguments, 3, "readWriteLock(key, ttlMs?, store?)", OPTIONS_GO);
    }
    if (store === undefined) store = getLockStore();
    checkString("key", key);
    ttlMs = ttlDurationMs(ttlMs);
    backendOf(store);
    return Object.freeze({
      key,
      ttlMs,
      readLock(...args) {
        notFair(args[0], RW_PHASE_FAIR);
        checkArity(args, 0, "readLock()", OPTIONS_GO.replace("lock(key, ttlMs, store)", "readLock()"));
        return new Lock(KINDED, { key, ttlMs, kind: "read", store });
      },
      writeLock(...args) {
        notFair(args[0], RW_PHASE_FAIR);
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

  return { MultiLock, lock, lockAll, semaphore, readWriteLock, restoreLock };
}
