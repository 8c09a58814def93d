"use strict";
// locksmith for Node: the native addon under the shared JS surface.

const { makeApi, NATIVE, NativeStore, NO_TOKENS, STORE_NAME, toLockError, invalid, releaseHolds } = require("./gen/api.cjs");
const { Calls, callStarted, checkConnectOptions, connectEngine, nodeSockets } = require("./gen/redis-driver.cjs");

const { loadAddon } = require("./native-loader.cjs");

const addon = loadAddon();

// A call on its way from the addon's thread as the event loop runs out of work (a lock's
// background task woke just then) would reach a torn-down environment, which aborts the
// process (node/src/exit.rs): the loop gets another turn while one is on its way.
// (A bounded number of turns: a worker thread that ended with calls on their way never
// counts them as delivered.)
let exitTurns = 0;
process.on("beforeExit", () => {
  if (addon.callsInTransit() === 0) exitTurns = 0;
  else if (exitTurns++ < 1_000) turn(() => {});
});

/**
 * Calls `then` at the event loop's next turn, through a message port: a test runner's
 * fake timers (which replace setImmediate and node:timers) must not stop it.
 */
function turn(then) {
  const { port1, port2 } = new MessageChannel();
  port1.onmessage = () => {
    port1.close();
    then();
  };
  port2.postMessage(null);
}

// Async calls resolve through one call table (js/api/calls.mjs): the promise lives there,
// keyed by a call id, and the addon reports outcomes in bulk — through its completion
// channel (see node/src/completion.rs) or, for calls that run as tasks of a Redis
// engine store, through the engine's outcome array. Tests set
// LOCKSMITH_TEST_FIRST_CALL_ID to reach the ids' wrap-around without making four
// billion calls first.
const calls = new Calls({ firstId: Number(process.env.LOCKSMITH_TEST_FIRST_CALL_ID ?? 0) });
const completions = new addon.Completions((done) => calls.deliver(done));

// What a native call's start answers (node/src/lock.rs): 0, it runs on tokio; 1, it is
// a local task of an engine store with commands for the driver to write; 2, it finished
// at once on this thread (a lock file's calls, mostly), its outcome waiting here.
const afterStart = (started) => {
  if (started === 1) callStarted(calls.inFlight === 1);
  else if (started === 2) calls.deliver(completions.takeInline());
};

/** Starts `start(id)` and returns the promise of its outcome. */
// A lock over a test kit store (locksmith-js/testing; the bridge below marks it) waits on
// its TestClock, which only the test moves: its calls keep the process alive only while
// the addon's thread has work of theirs (`pendingWork()`), as in the WebAssembly build,
// so a test that leaves one waiting ends rather than hangs.
const ON_TEST_CLOCK = Symbol("locksmith.onTestClock");
/** The clocks (their native sides) whose locks have calls on the addon's thread now. */
const busyClocks = new Set();

function whileClockWork(clock) {
  if (busyClocks.has(clock)) return;
  const idle = busyClocks.size === 0;
  busyClocks.add(clock);
  if (!idle) return;
  const check = () => {
    for (const busy of busyClocks) if (busy.pendingWork() === 0) busyClocks.delete(busy);
    if (busyClocks.size > 0) turn(check);
  };
  turn(check);
}

function viaCompletions(start, number = false, background = false, clock = undefined) {
  if (clock !== undefined) {
    whileClockWork(clock);
    return calls.start(start, number ? "number" : "flag", true, afterStart);
  }
  return calls.start(start, number ? "number" : "flag", background, afterStart);
}

const NativeLock = addon.NativeLock.prototype;
Object.assign(NativeLock, {
  acquire(timeout, retryDelay, afterRefusedTry) {
    return viaCompletions((id) => this.acquireStart(completions, id, timeout, retryDelay, afterRefusedTry), false, false, this[ON_TEST_CLOCK]);
  },
  acquireAbortable(timeout, retryDelay, abort, afterRefusedTry) {
    return viaCompletions((id) => this.acquireAbortableStart(completions, id, timeout, retryDelay, abort, afterRefusedTry), false, false, this[ON_TEST_CLOCK]);
  },
  release() {
    return viaCompletions((id) => this.releaseStart(completions, id), false, false, this[ON_TEST_CLOCK]);
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
    return viaCompletions((id) => this.extendStart(completions, id, ttlMs), false, false, this[ON_TEST_CLOCK]);
  },
  isLocked() {
    return viaCompletions((id) => this.isLockedStart(completions, id), false, false, this[ON_TEST_CLOCK]);
  },
  count() {
    return viaCompletions((id) => this.countStart(completions, id), true, false, this[ON_TEST_CLOCK]);
  },
  isExpired() {
    return viaCompletions((id) => this.isExpiredStart(completions, id), false, false, this[ON_TEST_CLOCK]);
  },
  remainingTime() {
    return viaCompletions((id) => this.remainingTimeStart(completions, id), true, false, this[ON_TEST_CLOCK]);
  },
});

const api = makeApi({
  MemoryStore: addon.NativeMemoryStore,
  FileStore: addon.NativeFileStore,
  // Another process's write to a lock file: inotify, FSEvents or ReadDirectoryChangesW
  // through libuv, on this event loop; it does not keep the process alive.
  watchFile(path, onChange, onError) {
    const watcher = require("node:fs").watch(path, { persistent: false }, onChange);
    watcher.on("error", onError);
    return watcher;
  },
  AbortToken: addon.AbortToken,
  // An abort wakes its acquire; one of a Redis engine store's locks then runs at the
  // engine's next turn, which this asks for.
  afterAbort: (native) => {
    callStarted();
    // A lock on a test clock: its woken task runs on the addon's thread now.
    if (native?.[ON_TEST_CLOCK] !== undefined) whileClockWork(native[ON_TEST_CLOCK]);
  },
  // The addon calls JS stores error-first (Node's threadsafe-function convention).
  // `capabilities`: what the JS store offers beyond the required methods (js/api/bridge.mjs).
  // `clock`: the test kit's clock (its VirtualClock below), for a TestStore.
  bridge(dispatch, timeoutMs, capabilities, clock) {
    const bridge = new addon.JsStoreBridge(
      (_err, call) => dispatch(call),
      timeoutMs,
      capabilities.isHeldBy,
      capabilities.permits,
      capabilities.onRelease,
      capabilities.ownerRemainingTime,
      capabilities.permitWeights,
      capabilities.acquireAll,
      clock,
      capabilities.fair,
    );
    if (clock !== undefined) {
      for (const make of ["lock", "handle", "restore"]) {
        const original = bridge[make];
        bridge[make] = (...args) => {
          const native = original.apply(bridge, args);
          native[ON_TEST_CLOCK] = clock;
          return native;
        };
      }
    }
    return bridge;
  },
  // The test kit (locksmith-js/testing): the clock's native side (which counts its locks'
  // work on the addon's thread), and a TestStore's memory store on the clock.
  VirtualClock: addon.VirtualClock,
  // Something on the JS side (a TestStore's answer, a release) may have woken the clock's
  // locks' tasks: the process stays up while they run.
  clockActive: (clock) => whileClockWork(clock),
  testMemory: (clock) => addon.NativeMemoryStore.onClock(clock),
});

// The Redis store: the sans-I/O engine in the addon under the one driver
// (js/redis/driver.mjs) and Node's sockets.
const binding = {
  Engine: addon.NativeEngineStore,
  calls,
  command: addon.redisCommand,
  decode: addon.redisDecode,
  checkUrl: addon.checkUrlSettings,
  outcomes(engine, n) {
    // Filled by the addon on each turn through its bytes (see node/src/redis_engine.rs).
    const bytes = Buffer.allocUnsafeSlow(8 * n);
    engine.useOutcomes(bytes);
    return new Float64Array(bytes.buffer, bytes.byteOffset, n);
  },
  // The output of a turn is copied into a reused buffer where the socket allows.
  scratch: (n) => Buffer.allocUnsafeSlow(n),
};

/** The native side of a RedisLockStore on the engine, as js/api uses a backend (lock.mjs, handles.mjs, stores.mjs). */
class EngineBackend {
  constructor(connection) {
    this.connection = connection;
    this.native = connection.engine;
  }

  get keyPrefix() {
    return this.native.keyPrefix;
  }

  lock(key, ttlMs) {
    return this.native.lock(key, ttlMs);
  }

  handle(key, ttlMs, kind, limit) {
    return this.native.handle(key, ttlMs, kind, limit);
  }

  restore(fields) {
    return this.native.restore(fields);
  }

  acquire(key, owner, ttlMs) {
    return this.connection.call((id) => this.native.acquire(id, key, owner, ttlMs), "flag");
  }

  release(key, owner) {
    return this.connection.call((id) => this.native.release(id, key, owner), "flag");
  }

  extend(key, owner, ttlMs) {
    return this.connection.call((id) => this.native.extend(id, key, owner, ttlMs), "flag");
  }

  isLocked(key) {
    return this.connection.call((id) => this.native.isLocked(id, key), "flag");
  }

  remainingTime(key) {
    return this.connection.call((id) => this.native.remainingTime(id, key), "number");
  }

  close() {
    this.connection.close();
  }
}

/** Locks in Redis, through the addon's engine. Also a plain `LockStore` object. */
class RedisLockStore extends NativeStore {
  get [STORE_NAME]() {
    return "redis";
  }

  /** A semaphore hold may take several permits (`{ permits }`). */
  get permitWeights() {
    return true;
  }

  /** Connected with `fencing: false`: its holds carry no fencing token. */
  get [NO_TOKENS]() {
    return this[NATIVE].connection.options.fencing === false;
  }

  /**
   * Connects to `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS), with
   * the other options as a second argument if any, or to `{ url, keyPrefix,
   * connectTimeoutMs, commandTimeoutMs, reconnectRetries, reconnectMaxDelayMs,
   * notifyReleases, tlsCaCert, tlsInsecure, minReplicas, fencing }`, with `sentinels` and
   * `masterName` (Redis Sentinel; `username`, `password`, `db` for the master) or
   * `cluster` (Redis Cluster seed URLs) instead of `url`. Unknown options are refused.
   */
  static async connect(...args) {
    const options = checkConnectOptions(args);
    if (process.env.LOCKSMITH_REDIS_CLIENT !== undefined && !warnedRedisClient) {
      warnedRedisClient = true;
      process.emitWarning(
        "LOCKSMITH_REDIS_CLIENT is no longer read: the redis-rs client was retired, and RedisLockStore always uses locksmith's own Redis engine",
        {
          code: "LOCKSMITH_REDIS_CLIENT_IGNORED",
        },
      );
    }
    let native;
    try {
      native = new EngineBackend(await connectEngine(binding, RedisLockStore[TEST_SOCKETS] ?? nodeSockets, options));
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

  /**
   * The live holder of the plain lock `key` (an election's leader): `{ owner,
   * fencingToken, remainingMs, value }`, or null when nobody holds it. Run by the driver
   * on a side link of its own (the engine has no op for it): js/redis/driver.mjs.
   */
  async holder(key) {
    return this[NATIVE].connection.holder(key);
  }

  /** Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq` at least this one: `true` when `owner` holds `key`. */
  async proclaim(key, owner, value, seq) {
    return this[NATIVE].connection.proclaim(key, owner, value, seq);
  }

  /**
   * Releases the holds this process took through the store (within `timeoutMs`, 2 s by
   * default; `keepHolds: true` leaves them to their TTL), then closes the connections;
   * later calls fail with StoreClosedError.
   */
  async close(options) {
    const { connection, native: engine } = this[NATIVE];
    // The engine's commands still on their way (an acquire's clean-up release) go out
    // first: requests unanswered or unwritten on any connection (not its timers).
    const released = await releaseHolds(this, options, "RedisLockStore", () => {
      if (connection.closed) return false;
      for (let conn = 0; conn < engine.connections; conn++) if (engine.busy(conn)) return true;
      return false;
    });
    this[NATIVE].close();
    released.check();
  }
}

const ACCESS = Symbol("locksmith.redis");
let warnedRedisClient = false;
// Tests of the driver put a scripted socket port here (js-tests/support/fake-redis.mjs).
const TEST_SOCKETS = Symbol.for("locksmith.test.redisSockets");

module.exports = { ...api, RedisLockStore };
