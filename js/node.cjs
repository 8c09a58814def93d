"use strict";
// locksmith for Node: the native addon under the shared JS surface.

const { makeApi, NATIVE, NativeStore, toLockError, typeName, invalid, checkOptionKeys } = require("./gen/api.cjs");
const { makeEngineDriver } = require("./redis-engine.cjs");
const { checkMinReplicas, checkTopology, CONNECT_KEYS, CONNECT_OPTIONS } = require("./gen/redis-topology.cjs");

const { loadAddon } = require("./native-loader.cjs");

const addon = loadAddon();

// Async lock calls resolve through one completion channel (see node/src/completion.rs):
// the promise lives here, keyed by a call id, and the addon reports outcomes in bulk.
// Ids are the addon's u32: they count up to 2^32 - 1, wrap to 0, and skip any id whose
// call is still pending, so an id is never reused while its promise waits.
const pending = new Map();
const MAX_CALL_ID = 0xffff_ffff;
// Where the ids start. Tests set LOCKSMITH_TEST_FIRST_CALL_ID to reach the wrap-around
// without making four billion calls first.
let nextId = Number(process.env.LOCKSMITH_TEST_FIRST_CALL_ID ?? 0) >>> 0;
// A timer ref'd while calls are pending (the channel itself does not hold Node open),
// unref'd when none is: made once, since a ref/unref costs less than a new timer.
let keepAlive;
// Pending calls that keep Node alive. Background calls (watching a hold's end) do not:
// a process whose only work left is a held lock's signal may exit.
let holding = 0;

/** Takes call `id` off the pending list; `undefined` if it is not there. */
function finish(id) {
  const call = pending.get(id);
  if (call === undefined) return undefined;
  pending.delete(id);
  if (!call.background && --holding === 0) keepAlive.unref();
  return call;
}

const completions = new addon.Completions((done) => {
  const call = finish(done.id);
  if (call === undefined) return;
  if (done.error != null) call.reject(new Error(done.error));
  else call.resolve(call.number ? (done.number ?? null) : done.flag ?? undefined);
});

// Set below to the Redis engine driver's: a call that runs as a local task of an engine
// store (`start` returns true) has commands to write.
let engineCallStarted = () => {};

/** Starts `start(id)` and returns the promise of its outcome. */
function viaCompletions(start, number = false, background = false) {
  let id = nextId;
  while (pending.has(id)) id = id === MAX_CALL_ID ? 0 : id + 1;
  nextId = id === MAX_CALL_ID ? 0 : id + 1;
  return new Promise((resolve, reject) => {
    let queued;
    try {
      queued = start(id);
    } catch (err) {
      reject(err);
      return;
    }
    pending.set(id, { resolve, reject, number, background });
    if (!background && holding++ === 0) (keepAlive ??= setInterval(() => {}, 1 << 30)).ref();
    // The engine may write at once (several calls waiting): after the call is on record.
    if (queued === true) engineCallStarted();
  });
}

const NativeLock = addon.NativeLock.prototype;
Object.assign(NativeLock, {
  acquire(timeout, retryDelay) {
    return viaCompletions((id) => this.acquireStart(completions, id, timeout, retryDelay));
  },
  release() {
    return viaCompletions((id) => this.releaseStart(completions, id));
  },
  watch() {
    return viaCompletions((id) => this.watchStart(completions, id), false, true);
  },
  autoExtend(intervalMs, maxHoldMs) {
    // Validates at once (a throw here is the caller's); runs in the background after.
    let started;
    const running = viaCompletions((id) => (started = this.autoExtendStart(completions, id, intervalMs, maxHoldMs)), false, true);
    running.catch(() => {});
    return started;
  },
  extend(ttlMs) {
    return viaCompletions((id) => this.extendStart(completions, id, ttlMs));
  },
  isLocked() {
    return viaCompletions((id) => this.isLockedStart(completions, id));
  },
  count() {
    return viaCompletions((id) => this.countStart(completions, id), true);
  },
  isExpired() {
    return viaCompletions((id) => this.isExpiredStart(completions, id));
  },
  remainingTime() {
    return viaCompletions((id) => this.remainingTimeStart(completions, id), true);
  },
});

const api = makeApi({
  MemoryStore: addon.NativeMemoryStore,
  // The addon calls JS stores error-first (Node's threadsafe-function convention).
  bridge: (dispatch, timeoutMs, hasIsHeldBy, hasPermits, hasOnRelease, _hasWaiters, hasOwnerRemainingTime) =>
    new addon.JsStoreBridge((_err, call) => dispatch(call), timeoutMs, hasIsHeldBy, hasPermits, hasOnRelease, hasOwnerRemainingTime),
});

// The Redis store: the sans-I/O engine driven by Node's sockets (js/redis-engine.cjs).
// LOCKSMITH_REDIS_CLIENT=redis-rs (read at connect) selects the earlier client, redis-rs
// on a tokio thread.

/** Settles the calls in an engine turn's `[next timer, id, value, ...]`, `count` numbers long (see node/src/redis_engine.rs). */
function settleEngineCalls(outcomes, count, native) {
  let errors;
  for (let i = 1; i < count; i += 2) {
    const id = outcomes[i];
    const value = outcomes[i + 1];
    const call = finish(id);
    if (call === undefined) continue;
    if (value <= -2) {
      errors ??= native.errors();
      call.reject(new Error(errors[-2 - value]));
    } else if (call.number) {
      call.resolve(value < 0 ? null : value);
    } else {
      call.resolve(value === 1 ? true : value === 0 ? false : undefined);
    }
  }
}

const engineDriver = makeEngineDriver({
  addon,
  completions,
  viaCompletions,
  settle: settleEngineCalls,
  invalid,
  toLockError,
});
engineCallStarted = engineDriver.started;


/** Locks in Redis, through the native client. Also a plain `LockStore` object. */
class RedisLockStore extends NativeStore {
  /**
   * Connects to `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS), or to
   * `{ url, keyPrefix, connectTimeoutMs, commandTimeoutMs, reconnectRetries,
   * reconnectMaxDelayMs, notifyReleases, tlsCaCert, tlsInsecure }`, with `sentinels`
   * and `masterName` (Redis Sentinel; `username`, `password`, `db` for the master) or
   * `cluster` (Redis Cluster seed URLs) instead of `url`. Unknown options are refused.
   */
  static async connect(urlOrOptions) {
    const options = typeof urlOrOptions === "string" ? { url: urlOrOptions } : urlOrOptions;
    if (options === null || typeof options !== "object") {
      throw invalid(`RedisLockStore.connect() needs a URL or an options object; got ${typeName(urlOrOptions)}`);
    }
    checkOptionKeys(options, CONNECT_KEYS, "RedisLockStore.connect()");
    const topology = checkTopology(options, invalid);
    for (const [name, type] of Object.entries(CONNECT_OPTIONS)) {
      if (options[name] !== undefined && typeof options[name] !== type) {
        throw invalid(`${name} must be a ${type}; got ${typeName(options[name])}`);
      }
    }
    checkMinReplicas(options.minReplicas, invalid);
    if (options.reconnectRetries !== undefined && !(Number.isInteger(options.reconnectRetries) && options.reconnectRetries >= 0)) {
      throw invalid(`reconnectRetries must be a whole number >= 0; got ${options.reconnectRetries}`);
    }
    let native;
    try {
      const { sentinels, masterName, username, password, db, cluster, minReplicas, ...rest } = options;
      native = process.env.LOCKSMITH_REDIS_CLIENT === "redis-rs" && options.url !== undefined && !minReplicas
        ? await addon.connectRedis({ ...rest })
        : await engineDriver.connect({ ...addon.checkRedisOptions({ ...rest, url: topology.url }), ...topology, minReplicas: minReplicas ?? 0 });
    } catch (err) {
      throw toLockError(err);
    }
    const store = new RedisLockStore(ACCESS);
    store[NATIVE] = native;
    return store;
  }

  constructor(access) {
    super();
    if (access !== ACCESS) throw invalid("use `await RedisLockStore.connect(url)` to make a RedisLockStore");
  }

  /** The prefix put before every lock key. */
  get keyPrefix() {
    return this[NATIVE].keyPrefix;
  }

  /** Closes the connections; later calls fail with StoreClosedError. */
  async close() {
    this[NATIVE].close();
  }
}

const ACCESS = Symbol("locksmith.redis");

module.exports = { ...api, RedisLockStore };
