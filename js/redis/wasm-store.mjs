// RedisLockStore in the WebAssembly build: the Redis engine (redis/src/engine, built as a
// second wasm module by wasm-redis/, loaded at the first connect) under the one driver
// (js/redis/driver.mjs) and the runtime's own socket — `connect()` from
// `cloudflare:sockets` on workerd, `Deno.connect` on Deno, `node:net` in Node. The entry
// of each runtime says which (`useRedisRuntime`); where none does (browsers, Vercel
// Edge: no TCP), connecting rejects with UnsupportedError.
//
// The store is a plain JS store (acquire, release, extend, isLocked, remainingTime,
// isHeldBy, ownerRemainingTime, onRelease, the permit methods of semaphores and
// read-write locks, holder and proclaim for elections; fencing tokens through
// ACQUIRE_TOKEN): the main module's lock logic
// uses it through its JS-store bridge, so the locks, waits and TTL rules are the same
// code as for every other store. Keys, scripts and fencing counter are the engine's, the
// same as the native RedisLockStore's: a lock taken by either is the other's to release.
import { StoreClosedError, UnsupportedError, checkString, invalid, noteSharedStore, toLockError, typeName } from "../api/errors.mjs";
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, HAS_WAITERS, NO_TOKENS, STORE_NAME } from "../api/symbols.mjs";
import { Calls } from "../api/calls.mjs";
import { limitMessage } from "../api/defaults.mjs";
import { releaseHolds } from "../api/shutdown.mjs";
import { checkConnectOptions, connectEngine, operationTimeoutMs } from "./driver.mjs";

let runtime;
let loading;

/**
 * Called by the entry of a runtime with TCP sockets: `load()` resolves to `{ engine,
 * socket }`, the initialised engine module (wasm-redis/) and the runtime's socket port
 * (js/redis/sockets/).
 */
export function useRedisRuntime(load) {
  runtime = load;
}

/** Loads the engine module once, at the first connect. */
function loadRuntime() {
  loading ??= runtime().catch((err) => {
    loading = undefined;
    throw err;
  });
  return loading;
}

/**
 * The engine module (wasm-redis/), loaded once: the test kit's TestStore keeps its memory
 * store there. Where the runtime gave no loader (a browser), UnsupportedError.
 */
export async function loadEngine() {
  if (runtime === undefined) {
    throw new UnsupportedError(
      "locksmith: the test kit's TestStore needs the second WebAssembly module, which this runtime does not load (a browser); run its tests in Node, Deno or workerd",
    );
  }
  return (await loadRuntime()).engine;
}

// The engine module's calls in flight: one table for every store of this build.
const calls = new Calls({ mapError: (message) => toLockError(new Error(message)), mapThrown: (err) => toLockError(err) });

let binding;

/** The engine port of js/redis/driver.mjs over the wasm-redis module. */
function bindingOf(module) {
  binding ??= {
    Engine: module.WasmRedisEngine,
    calls,
    command: module.redisCommand,
    decode: module.redisDecode,
    checkUrl: module.checkUrlSettings,
    outcomes(engine, n) {
      const outcomes = new Float64Array(n);
      engine.useOutcomes(outcomes);
      return outcomes;
    },
  };
  return binding;
}

const ACCESS = Symbol("locksmith.redis");
// Tests of the driver put a scripted socket port here (js-tests/support/fake-redis.mjs).
const TEST_SOCKETS = Symbol.for("locksmith.test.redisSockets");

function checked(value, name = "key") {
  checkString(name, value);
  return value;
}

function checkedLimit(value) {
  if (value !== undefined && typeof value !== "number") throw invalid(limitMessage(typeName(value)));
  return value;
}

function checkedPermits(value) {
  if (value !== undefined && typeof value !== "number") throw invalid(`permits must be a whole number of permits; got ${typeName(value)}`);
  return value;
}

function checkedMs(value) {
  if (typeof value !== "number") throw invalid(`ttlMs must be a number of milliseconds; got ${typeName(value)}`);
  return value;
}

/**
 * Locks in Redis, over the runtime's own TCP socket. A plain `LockStore` object with
 * fencing tokens (unless `fencing: false`: then a lock's acquire answers `true`, taken
 * without a token), exact ownership and release wake-ups.
 */
export class RedisLockStore {
  #engine;
  #connection;
  /** A semaphore hold may take several permits (the JS store contract's `permitWeights`). */
  permitWeights = true;

  get [STORE_NAME]() {
    return "redis";
  }

  /** Connected with `fencing: false`: its holds carry no fencing token. */
  get [NO_TOKENS]() {
    return this.#connection.options.fencing === false;
  }

  /**
   * Connects to `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS), with
   * the other options as a second argument if any, or to
   * `{ url, keyPrefix, connectTimeoutMs, commandTimeoutMs, reconnectRetries,
   * reconnectMaxDelayMs, notifyReleases, tlsCaCert, tlsInsecure, minReplicas, fencing }`, with
   * `sentinels` and `masterName` (`username`, `password`, `db`) or `cluster` instead of
   * `url`, as in Node.
   */
  static async connect(...args) {
    const options = checkConnectOptions(args);
    if (runtime === undefined) {
      throw new UnsupportedError(
        "locksmith: RedisLockStore needs TCP sockets, and this runtime has none for it (a browser, Vercel Edge); use a store over HTTP here, such as locksmith-js/upstash",
      );
    }
    let module;
    let sockets;
    try {
      ({ engine: module, socket: sockets } = await loadRuntime());
    } catch (err) {
      throw new UnsupportedError(`locksmith: the Redis engine's WebAssembly module did not load: ${err?.message ?? err}`);
    }
    const connection = await connectEngine(bindingOf(module), RedisLockStore[TEST_SOCKETS] ?? sockets, options);
    const engine = connection.engine;
    const store = new RedisLockStore(ACCESS);
    store.#engine = engine;
    store.#connection = connection;
    // The bridge's own bound on a call: past the engine's command timeout, which ends it first.
    store.operationTimeoutMs = operationTimeoutMs(options);
    return store;
  }

  constructor(access) {
    if (access !== ACCESS) throw invalid("use `await RedisLockStore.connect(url)` to make a RedisLockStore");
    noteSharedStore(this);
  }

  /** The prefix put before every lock key. */
  get keyPrefix() {
    return this.#engine.keyPrefix;
  }

  #call(kind, start, background = false) {
    return this.#connection.call(start, kind, background);
  }

  /** Takes `key` for `owner` if it is free: `true`, or `false` when someone holds it. */
  async acquire(key, owner, ttlMs) {
    return (await this[ACQUIRE_TOKEN](key, owner, ttlMs)) !== false;
  }

  /** `acquire()` answering the hold's fencing token (how locks get it), or `false`. */
  [ACQUIRE_TOKEN](key, owner, ttlMs) {
    return this.#call("token", (id) => this.#engine.acquire(id, checked(key), checked(owner, "owner"), checkedMs(ttlMs)));
  }

  /**
   * Takes every one of `keys` (lockAll's, in its canonical order) for `owner`, or none: in
   * one script on one server, or when the keys share a cluster slot. Each key's fencing
   * token, or the index of a key that is held; `null` for keys across a cluster's slots
   * (the lock then takes them one at a time).
   */
  acquireAll(keys, owner, ttlMs) {
    for (const key of keys) checked(key);
    return this.#call("all", (id) => this.#engine.acquireAll(id, keys.join("\n"), checked(owner, "owner"), checkedMs(ttlMs)));
  }

  /** Frees `key` if `owner` holds it. */
  release(key, owner) {
    return this.#call("flag", (id) => this.#engine.release(id, checked(key), checked(owner, "owner")));
  }

  /** A fair lock's release (the store contract's `releaseFair`): frees the hold, or gives up `owner`'s place. */
  releaseFair(key, owner) {
    return this.#call("flag", (id) => this.#engine.releaseFair(id, checked(key), checked(owner, "owner")));
  }

  /** A fair lock's extend (the store contract's `extendFair`): its fair mark kept at least as long. */
  extendFair(key, owner, ttlMs) {
    return this.#call("flag", (id) => this.#engine.extendFair(id, checked(key), checked(owner, "owner"), checkedMs(ttlMs)));
  }

  /** Pushes `key`'s expiry `ttlMs` from now if `owner` holds it. */
  extend(key, owner, ttlMs) {
    return this.#call("flag", (id) => this.#engine.extend(id, checked(key), checked(owner, "owner"), checkedMs(ttlMs)));
  }

  /** Whether anyone holds `key`. */
  isLocked(key) {
    return this.#call("flag", (id) => this.#engine.isLocked(id, checked(key)));
  }

  /** Milliseconds left on `owner`'s own hold of `key`, or null when not its (one script). */
  ownerRemainingTime(key, owner) {
    return this.#call("number", (id) => this.#engine.ownerRemainingTime(id, checked(key), checked(owner, "owner")));
  }

  /** Whether `owner` holds `key`. */
  isHeldBy(key, owner) {
    return this.#call("flag", (id) => this.#engine.isHeldBy(id, checked(key), checked(owner, "owner")));
  }

  /** Milliseconds until `key`'s hold expires, or null when nobody holds it. */
  remainingTime(key) {
    return this.#call("number", (id) => this.#engine.remainingTime(id, checked(key)));
  }

  /**
   * Takes a hold of `key` of `kind` (`semaphore` with `limit`, and `permits` of its
   * permits, default 1; `read`, `write`): `true`, or `false`.
   */
  async acquirePermit(key, owner, ttlMs, kind, limit, permits) {
    return (await this[ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits)) !== false;
  }

  /** `acquirePermit()` answering the hold's fencing token, or `false`. */
  [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits) {
    return this.#call("token", (id) =>
      this.#engine.acquirePermit(
        id,
        checked(key),
        checked(owner, "owner"),
        checkedMs(ttlMs),
        checked(kind, "kind"),
        checkedLimit(limit),
        checkedPermits(permits),
      ),
    );
  }

  /**
   * A fair handle's attempt (`{ fair: true }`; the store contract's `acquireFair`) on a
   * lock or a semaphore's `permits`: taken when `owner` is first in the key's queue and
   * the key has room, else `owner` keeps its place (`waits`). The fencing token, `true`
   * (a lock's with `fencing: false`: no token) or `false`.
   */
  acquireFair(key, owner, ttlMs, kind, limit, permits, waits) {
    return this.#call("token", (id) =>
      this.#engine.acquireFair(
        id,
        checked(key),
        checked(owner, "owner"),
        checkedMs(ttlMs),
        checked(kind, "kind"),
        checkedLimit(limit),
        checkedPermits(permits),
        waits === true,
      ),
    );
  }

  /** Gives back `owner`'s hold of `key`. */
  releasePermit(key, owner, kind) {
    return this.#call("flag", (id) => this.#engine.releasePermit(id, checked(key), checked(owner, "owner"), checked(kind, "kind")));
  }

  /** Pushes the expiry of `owner`'s hold of `key` `ttlMs` from now. */
  extendPermit(key, owner, ttlMs, kind) {
    return this.#call("flag", (id) => this.#engine.extendPermit(id, checked(key), checked(owner, "owner"), checkedMs(ttlMs), checked(kind, "kind")));
  }

  /** How many holds of `key` are live. */
  countPermits(key, kind) {
    return this.#call("number", (id) => this.#engine.countPermits(id, checked(key), checked(kind, "kind")));
  }

  /** Milliseconds until `owner`'s hold of `key` expires, or null. */
  permitRemainingTime(key, owner, kind) {
    return this.#call("number", (id) => this.#engine.permitRemainingTime(id, checked(key), checked(owner, "owner"), checked(kind, "kind")));
  }

  /**
   * The live holder of the plain lock `key` (an election's leader): `{ owner,
   * fencingToken, remainingMs, value }`, or null when nobody holds it. Run by the driver
   * on a side link of its own (the engine has no op for it).
   */
  holder(key) {
    return this.#connection.holder(key);
  }

  /** Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq` at least this one: `true` when `owner` holds `key`. */
  proclaim(key, owner, value, seq) {
    return this.#connection.proclaim(key, owner, value, seq);
  }

  /** Whether locks of this process wait for `key`'s release (see HAS_WAITERS in api.mjs). */
  [HAS_WAITERS](key) {
    return !this.#connection.closed && typeof key === "string" && this.#engine.hasWaiters(key);
  }

  /**
   * Calls `listener` once when `key` (its holds of `kind`, when given) may have been
   * released — a release message, or the subscription that carries them confirmed;
   * returns the function that stops waiting.
   */
  onRelease(key, listener, kind) {
    if (this.#connection.closed || !this.#connection.options.notifyReleases) return () => {};
    let id;
    this.#call(
      "listener",
      (callId) => {
        id = callId;
        if (!this.#engine.onRelease(callId, checked(key), kind === undefined ? undefined : checked(kind, "kind"))) {
          throw new StoreClosedError("locksmith: no release notifications");
        }
      },
      true,
    ).then(
      () => listener(),
      () => {},
    );
    return () => {
      if (this.#connection.closed) return;
      this.#engine.offRelease(id);
      this.#connection.take(this.#engine.turn());
    };
  }

  /**
   * Releases the holds this isolate took through the store (within `timeoutMs`, 2 s by
   * default; `keepHolds: true` leaves them to their TTL), then closes the connections;
   * later calls fail with StoreClosedError.
   */
  async close(options) {
    const released = await releaseHolds(this, options, "RedisLockStore");
    this.#connection.close();
    released.check();
  }
}
