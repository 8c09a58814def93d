// The stores' side of the API: the plain `LockStore` interface of the stores written in
// Rust (NativeStore), the memory and file stores over a binding, and what every store
// is checked for before the API uses it.
import { STORE_NAME } from "./symbols.mjs";
import { holdsOf, releaseHolds } from "./shutdown.mjs";
import {
  InvalidArgumentError,
  StoreClosedError,
  StoreUnavailableError,
  UnsupportedError,
  checkArity,
  checkOptionKeys,
  checkString,
  invalid,
  noteSharedStore,
  toLockError,
  typeName,
  warnOnce,
} from "./errors.mjs";
import { checkNumber } from "./durations.mjs";
import { checkSeq } from "./checks.mjs";

const STORE_METHODS = ["acquire", "release", "extend", "isLocked", "remainingTime"];
/** Optional: a store with all of these has semaphores and read-write locks. */
export const PERMIT_METHODS = ["acquirePermit", "releasePermit", "extendPermit", "countPermits", "permitRemainingTime"];

/** Refuses what cannot be a lock store, saying what it lacks. */
export function checkStore(store) {
  if (store === null || typeof store !== "object") {
    throw invalid(`a lock store must be an object with ${STORE_METHODS.join(", ")}; got ${typeName(store)}`);
  }
  if (typeof store.then === "function" && typeof store.acquire !== "function") {
    throw invalid("the lock store is a promise: did you forget `await`? (`setLockStore(await RedisLockStore.connect(url))`)");
  }
  const missing = STORE_METHODS.filter((m) => typeof store[m] !== "function");
  // Handle options where the store goes: `lock(key, ttl, { fair: true })`.
  if (missing.length === STORE_METHODS.length && "fair" in store) {
    throw invalid("the lock store is an options object ({ fair }): a handle's options come after its store, lock(key, ttlMs, store, { fair: true })");
  }
  if (missing.length > 0) throw invalid(`the lock store has no ${missing.join(", ")} method`);
}

/** Where a store written in Rust keeps its native half. Runtime entries set it. */
export const NATIVE = Symbol("locksmith.native");

/** One call of a native store's plain `LockStore` interface: arguments checked, errors typed. */
async function storeCall(op, key, owner, ttlMs) {
  checkString("key", key);
  if (owner !== undefined) checkString("owner", owner);
  if (ttlMs !== undefined) checkNumber("ttlMs", ttlMs);
  try {
    return await op();
  } catch (err) {
    throw toLockError(err);
  }
}

/**
 * The plain `LockStore` interface of a store implemented natively (the memory stores,
 * Redis): arguments checked, errors typed, answers as promises.
 */
export class NativeStore {
  constructor() {
    // Every native store but the memory ones is shared by other processes (a file, Redis).
    if (this[STORE_NAME] !== "memory") noteSharedStore(this);
  }

  async acquire(key, owner, ttlMs) {
    return storeCall(() => this[NATIVE].acquire(key, owner, ttlMs), key, owner, ttlMs);
  }

  async release(key, owner) {
    return storeCall(() => this[NATIVE].release(key, owner), key, owner);
  }

  async extend(key, owner, ttlMs) {
    return storeCall(() => this[NATIVE].extend(key, owner, ttlMs), key, owner, ttlMs);
  }

  async isLocked(key) {
    return storeCall(() => this[NATIVE].isLocked(key), key);
  }

  async remainingTime(key) {
    return storeCall(() => this[NATIVE].remainingTime(key), key);
  }
}

/**
 * `holder(key)` and `proclaim(key, owner, value, seq)` of the memory and file stores, whose
 * native halves keep a hold's value (core's state). The live holder of the plain lock
 * `key` (an election's leader): its owner token, fencing token, milliseconds left and the
 * value it proclaimed (or null); null when nobody holds it.
 */
function nativeHolder(store, key) {
  return storeCall(async () => holderOf(await store[NATIVE].holder(key)), key);
}

/** Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq` at least this one: true when `owner` holds `key`. */
function nativeProclaim(store, key, owner, value, seq) {
  checkString("value", value);
  checkSeq(seq);
  return storeCall(() => store[NATIVE].proclaim(key, owner, value, seq), key, owner);
}

/**
 * A binding's holder answer as the contract's object: an object, the wasm modules' array
 * `[owner, token, ms, value]` (empty for none) or the main module's string of those
 * joined by NUL; null or undefined for none.
 */
export function holderOf(h) {
  if (typeof h === "string") {
    // The value (the rest, after the third NUL) may hold NULs of its own.
    const parts = h.split("\0", 3);
    const rest = parts.reduce((n, p) => n + p.length + 1, 0);
    h = rest <= h.length ? [...parts, h.slice(rest)] : parts;
  }
  if (Array.isArray(h)) return h.length === 0 ? null : { owner: h[0], fencingToken: Number(h[1]), remainingMs: Number(h[2]), value: h[3] ?? null };
  return h == null ? null : { owner: h.owner, fencingToken: h.fencingToken, remainingMs: h.remainingMs, value: h.value ?? null };
}

/** This copy's error classes, for the errors a store's close() makes for its handles. */
const CLOSE_ERRORS = { InvalidArgumentError, StoreClosedError, StoreUnavailableError };

/**
 * The shutdown record of `store` (shutdown.mjs) when it can be closed (it has `close()`:
 * every shipped store but the memory ones), else undefined.
 */
export function closeRecord(store) {
  return typeof store?.close === "function" ? holdsOf(store, CLOSE_ERRORS) : undefined;
}

/** The memory and file stores over `binding` (the addon's or the wasm module's). */
export function nativeStores(binding) {
  /**
   * Locks in this isolate's memory: native in Node, wasm on the edge. Also a plain
   * `LockStore` object.
   */
  class MemoryLockStore extends NativeStore {
    constructor(...args) {
      // It has no options: one given anyway (a TTL, a name meant for shared()) would
      // otherwise be ignored without a word.
      if (args.some((a) => a !== undefined)) {
        throw invalid(
          `new MemoryLockStore() takes no arguments; got ${args.map(typeName).join(", ")} (a store for every worker thread is MemoryLockStore.shared(name))`,
        );
      }
      super();
      this[NATIVE] = new binding.MemoryStore();
    }

    /**
     * The process-wide store called `name`: every worker thread that asks for it gets
     * the same locks. Node only.
     */
    static shared(name) {
      if (arguments.length > 1) checkArity(arguments, 1, "MemoryLockStore.shared(name)");
      checkString("name", name);
      if (!binding.MemoryStore.shared) {
        throw new UnsupportedError(
          "locksmith: MemoryLockStore.shared() is the native addon's (Node's worker threads share its memory); the WebAssembly build has none: in Node, install this platform's package, or use a store all threads reach (RedisLockStore, PostgresLockStore)",
        );
      }
      const store = Object.create(MemoryLockStore.prototype);
      store[NATIVE] = binding.MemoryStore.shared(name);
      return store;
    }

    /** The live holder of the plain lock `key` (an election's leader) with its value, or null. */
    async holder(key) {
      return nativeHolder(this, key);
    }

    /** Keeps `value` with `owner`'s live hold of `key` unless it keeps a newer one: true when `owner` holds it. */
    async proclaim(key, owner, value, seq) {
      return nativeProclaim(this, key, owner, value, seq);
    }

    /** Drops every hold in this store. */
    clear() {
      if (arguments.length > 0) checkArity(arguments, 0, "clear()");
      this[NATIVE].clear();
    }

    get [STORE_NAME]() {
      return "memory";
    }

    /** A semaphore hold may take several permits (`{ permits }`). */
    get permitWeights() {
      return true;
    }
  }

  const FILE_OPTIONS = ["busyTimeoutMs"];
  const FILE_ACCESS = Symbol("locksmith.fileStore");

  /**
   * Locks in a file every process of this host opens: no server. The native addon's
   * (FileStore in core); the WebAssembly build has no shared files.
   */
  class FileLockStore extends NativeStore {
    #watcher = null;
    #path;

    /**
     * Opens (or makes) the lock file at `path`. `busyTimeoutMs`: how long an operation
     * waits for another process to let go of the file (default 2000).
     */
    static async open(path, options = {}) {
      if (arguments.length > 2) checkArity(arguments, 2, "FileLockStore.open(path, options?)");
      checkString("path", path);
      if (options === null || typeof options !== "object") throw invalid(`FileLockStore.open() options must be an object; got ${typeName(options)}`);
      checkOptionKeys(options, FILE_OPTIONS, "FileLockStore.open()");
      const busy = options.busyTimeoutMs;
      if (busy !== undefined && !(Number.isSafeInteger(busy) && busy >= 0)) {
        throw invalid(`busyTimeoutMs must be a whole number of milliseconds, 0 or more; got ${typeof busy === "number" ? busy : typeName(busy)}`);
      }
      if (!binding.FileStore) {
        throw new UnsupportedError(
          "locksmith: FileLockStore needs the native addon (a lock file shared by the processes of one host); the WebAssembly build has no shared files: in Node, install this platform's package (locksmith-js-<platform>), or use a store with a server (RedisLockStore, PostgresLockStore)",
        );
      }
      const store = new FileLockStore(FILE_ACCESS);
      try {
        store[NATIVE] = binding.FileStore.open(path, options.busyTimeoutMs);
      } catch (err) {
        throw toLockError(err);
      }
      store.#path = path;
      // Another process's write wakes this process's waiters; without a watcher they
      // try again at their retry delay.
      const unwatched = (err) =>
        warnOnce(
          "LOCKSMITH_FILE_UNWATCHED",
          `locksmith: cannot watch the lock file ${path} (${err?.message ?? err}); waiters of this process try again at their retryDelay instead of waking at a release`,
        );
      try {
        store.#watcher = binding.watchFile(path, () => store[NATIVE].changed(), unwatched);
      } catch (err) {
        unwatched(err);
      }
      return store;
    }

    constructor(access) {
      if (access !== FILE_ACCESS) throw invalid("use `await FileLockStore.open(path)` to make a FileLockStore");
      super();
    }

    /** The live holder of the plain lock `key` (an election's leader) with its value, or null. */
    async holder(key) {
      return nativeHolder(this, key);
    }

    /** Keeps `value` with `owner`'s live hold of `key` unless it keeps a newer one: true when `owner` holds it. */
    async proclaim(key, owner, value, seq) {
      return nativeProclaim(this, key, owner, value, seq);
    }

    /** The lock file's path. */
    get path() {
      return this.#path;
    }

    /** A semaphore hold may take several permits (`{ permits }`). */
    get permitWeights() {
      return true;
    }

    get [STORE_NAME]() {
      return "file";
    }

    /**
     * Releases the holds this process took through the store (within `timeoutMs`, 2 s by
     * default; `keepHolds: true` leaves them to their TTL), then stops watching the file;
     * later calls fail with StoreClosedError.
     */
    async close(options) {
      const released = await releaseHolds(this, options, "FileLockStore");
      this.#watcher?.close();
      this.#watcher = null;
      this[NATIVE].close();
      released.check();
    }
  }

  return { MemoryLockStore, FileLockStore };
}
