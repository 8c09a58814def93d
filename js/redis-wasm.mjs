// RedisLockStore in the WebAssembly build: the Redis engine (redis/src/engine, built as a
// second wasm module by wasm-redis/, loaded at the first connect) driven by the runtime's
// own socket — `connect()` from `cloudflare:sockets` on workerd, `Deno.connect` on Deno,
// `node:net` in Node. The entry of each runtime says which (`useRedisRuntime`); where
// none does (browsers, Vercel Edge: no TCP), connecting rejects with UnsupportedError.
//
// The store is a plain JS store (acquire resolving to the fencing token, release,
// extend, isLocked, remainingTime, isHeldBy, onRelease, and the permit methods of
// semaphores and read-write locks): the main module's lock logic
// uses it through its JS-store bridge, so the locks, waits and TTL rules are the same
// code as for every other store. Keys, scripts and fencing counter are the engine's,
// the same as the native RedisLockStore's: a lock taken by either is the other's to
// release.
//
// As in js/redis-engine.cjs: the commands of one event-loop turn leave in one write,
// each chunk read goes to the engine once, and a connection that drops is replaced on
// the next call (or at once while something waits).
import {
  UnsupportedError,
  StoreClosedError,
  checkOptionKeys,
  checkString,
  invalid,
  toLockError,
  typeName,
} from "./api.mjs";

let runtime;

let loading;

/**
 * Called by the entry of a runtime with TCP sockets: `load()` resolves to `{ engine,
 * socket }`, the initialised engine module (wasm-redis/) and the runtime's socket
 * (`dial(target, options, handlers)` → `{ write(bytes), destroy() }`, and an optional
 * `check(target, options)` that refuses what its sockets cannot do).
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

/** `{ host, port, tls, user, password, db }` from a `redis://` or `rediss://` URL. */
function parseRedisUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid("invalid Redis URL: it should look like redis://[user:password@]host:port[/db]");
  }
  const secure = parsed.protocol === "rediss:";
  if (!secure && parsed.protocol !== "redis:") {
    throw invalid(`invalid Redis URL: the scheme must be redis:// or rediss://, not ${parsed.protocol}//`);
  }
  const path = parsed.pathname.replace(/^\/+/, "");
  const db = path === "" ? 0 : Number(path);
  if (!Number.isInteger(db) || db < 0) throw invalid("invalid Redis URL: the database after the host must be a number");
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  return {
    host: host || "127.0.0.1",
    port: parsed.port ? Number(parsed.port) : 6379,
    tls: secure,
    user: parsed.username ? decodeURIComponent(parsed.username) : null,
    password: parsed.password ? decodeURIComponent(parsed.password) : null,
    db,
  };
}

const CONNECT_OPTIONS = {
  keyPrefix: "string",
  connectTimeoutMs: "number",
  commandTimeoutMs: "number",
  reconnectRetries: "number",
  reconnectMaxDelayMs: "number",
  notifyReleases: "boolean",
  tlsCaCert: "string",
  tlsInsecure: "boolean",
};
const CONNECT_KEYS = ["url", ...Object.keys(CONNECT_OPTIONS)];
const NATIVE_ONLY = ["sentinels", "masterName", "cluster", "minReplicas"];
const MAX_MS = 2_147_483_647;

/** A duration option: a whole number of milliseconds from 1 to 2^31 - 1. */
function millis(name, value, fallback) {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1 || value > MAX_MS) {
    throw invalid(`${name} must be a whole number of milliseconds from 1 to ${MAX_MS}; got ${value}`);
  }
  return value;
}

/** The options as the native RedisLockStore checks them, with its defaults. */
function checkOptions(urlOrOptions) {
  const options = typeof urlOrOptions === "string" ? { url: urlOrOptions } : urlOrOptions;
  if (options === null || typeof options !== "object") {
    throw invalid(`RedisLockStore.connect() needs a URL or an options object; got ${typeName(urlOrOptions)}`);
  }
  // The addon's Sentinel and Cluster support lives in its Node driver; say so rather than
  // calling the options unknown.
  for (const name of NATIVE_ONLY) {
    if (options[name] !== undefined) {
      throw new UnsupportedError(
        `locksmith: RedisLockStore.connect({ ${name} }) (Redis Sentinel, Cluster and replica acknowledgement) needs the native addon; the WebAssembly build connects to one server by url`,
      );
    }
  }
  checkOptionKeys(options, CONNECT_KEYS, "RedisLockStore.connect()");
  checkString("url", options.url);
  for (const [name, type] of Object.entries(CONNECT_OPTIONS)) {
    if (options[name] !== undefined && typeof options[name] !== type) {
      throw invalid(`${name} must be a ${type}; got ${typeName(options[name])}`);
    }
  }
  if (options.reconnectRetries !== undefined && !(Number.isInteger(options.reconnectRetries) && options.reconnectRetries >= 0)) {
    throw invalid(`reconnectRetries must be a whole number >= 0; got ${options.reconnectRetries}`);
  }
  return {
    url: options.url,
    keyPrefix: options.keyPrefix ?? "locksmith:",
    connectTimeoutMs: millis("connectTimeoutMs", options.connectTimeoutMs, 2_000),
    commandTimeoutMs: millis("commandTimeoutMs", options.commandTimeoutMs, 2_000),
    reconnectRetries: options.reconnectRetries ?? 2,
    reconnectMaxDelayMs: millis("reconnectMaxDelayMs", options.reconnectMaxDelayMs, 1_000),
    notifyReleases: options.notifyReleases ?? true,
    tlsCaCert: options.tlsCaCert ?? null,
    tlsInsecure: options.tlsInsecure ?? false,
  };
}

// Timers that do not keep the process alive by themselves (Node, Deno); elsewhere (a
// worker's request) there is nothing to unref.
function unref(timer) {
  if (typeof timer?.unref === "function") timer.unref();
  else if (typeof timer === "number" && typeof Deno === "object" && typeof Deno.unrefTimer === "function") Deno.unrefTimer(timer);
  return timer;
}

// Calls waiting for the engine, by id: `{ resolve, reject, kind, background }`. Sockets
// and timers are unref'd; a ref'd timer keeps the process alive while a call that is not
// a background one (a release subscription) waits.
const calls = new Map();
const MAX_CALL_ID = 0xffff_ffff;
let nextId = 0;
let holding = 0;
let keepAlive;
/** The value `turn()` gives a cancelled release subscription (wasm-redis/src/lib.rs). */
const CANCELLED = -1e300;

function newId() {
  let id = nextId;
  while (calls.has(id)) id = id === MAX_CALL_ID ? 0 : id + 1;
  nextId = id === MAX_CALL_ID ? 0 : id + 1;
  return id;
}

function track(id, call) {
  calls.set(id, call);
  if (!call.background && holding++ === 0) keepAlive = setInterval(() => {}, 1 << 30);
}

function finish(id) {
  const call = calls.get(id);
  if (call === undefined) return undefined;
  calls.delete(id);
  if (!call.background && --holding === 0) {
    clearInterval(keepAlive);
    keepAlive = undefined;
  }
  return call;
}

/** Settles the calls in a turn's `[id, value, ...]`. */
function settle(outcomes, engine) {
  if (outcomes === undefined) return;
  let errors;
  for (let i = 0; i < outcomes.length; i += 2) {
    const call = finish(outcomes[i]);
    const value = outcomes[i + 1];
    if (call === undefined || value === CANCELLED) continue;
    if (value <= -2) {
      errors ??= engine.errors();
      call.reject(toLockError(new Error(errors[-2 - value])));
    } else if (call.kind === "listener") {
      call.resolve();
    } else if (call.kind === "token") {
      // The fencing token; 0: not taken; -1: taken without a token.
      call.resolve(value > 0 ? value : value === -1);
    } else if (call.kind === "number") {
      call.resolve(value < 0 ? null : value);
    } else if (call.kind === "flag") {
      call.resolve(value === 1);
    } else {
      call.resolve(undefined);
    }
  }
}

const live = new Set();
let flushQueued = false;

function flushAll() {
  flushQueued = false;
  for (const connection of live) {
    settle(connection.engine.turn(), connection.engine);
    connection.flush();
  }
}

/** Writes every connection's pending commands once this turn's code has run. */
function flushSoon() {
  if (!flushQueued) {
    flushQueued = true;
    queueMicrotask(flushAll);
  }
}

class Connection {
  constructor(engine, options, socket) {
    this.engine = engine;
    this.runtimeSocket = socket;
    this.options = options;
    this.target = parseRedisUrl(options.url);
    this.socket = null;
    this.ready = false;
    this.closed = false;
    this.connected = false;
    this.failures = 0;
    this.reconnectTimer = null;
    this.lastError = "the connection closed";
    this.sub = null; // the subscriber socket (release notifications), opened when wanted
    this.subReady = false;
    this.subRetryAt = 0;
    const tick = Math.max(10, Math.min(250, Math.floor(options.commandTimeoutMs / 4)));
    this.expiry = unref(
      setInterval(() => {
        if (this.engine.expire()) this.socket?.destroy();
        if (this.options.notifyReleases && this.engine.subscriberTick()) this.sub?.destroy();
        this.take();
      }, tick),
    );
    live.add(this);
  }

  /** Settles what the engine finished and writes what it has to send, this turn. */
  take() {
    settle(this.engine.turn(), this.engine);
    flushSoon();
  }

  flush() {
    if (this.ready) {
      const out = this.engine.takeOutput();
      if (out !== undefined) this.socket.write(out);
    } else if (this.socket === null && this.connected && !this.closed && this.engine.pending > 0) {
      // A call on a store whose connection went while it was idle: connect again; its
      // commands wait behind the handshake.
      this.reconnectSoon();
    }
    if (!this.options.notifyReleases || this.closed) return;
    if (this.sub !== null) {
      if (this.subReady) {
        const out = this.engine.subscriberOutput();
        if (out !== undefined) this.sub.write(out);
      }
    } else if (performance.now() >= this.subRetryAt && this.engine.subscriberWanted) {
      this.openSubscriber();
    }
  }

  /** A socket with a connect timeout; `on` gets open, data(chunk), error(message), close. */
  dial(on) {
    let opened = false;
    const timer = unref(
      setTimeout(() => {
        if (!opened) {
          on.error(`connecting timed out after ${this.options.connectTimeoutMs} ms`);
          socket.destroy();
        }
      }, this.options.connectTimeoutMs),
    );
    const socket = this.runtimeSocket.dial(this.target, this.options, {
      ...on,
      open: () => {
        opened = true;
        clearTimeout(timer);
        on.open();
      },
      close: () => {
        clearTimeout(timer);
        on.close();
      },
    });
    return socket;
  }

  /** The subscriber connection: SUBSCRIBE confirmations and release messages. */
  openSubscriber() {
    const { user, password } = this.target;
    const sub = this.dial({
      open: () => {
        if (this.sub !== sub) return;
        this.subReady = true;
        this.engine.subscriberConnected(user ?? undefined, password ?? undefined);
        const out = this.engine.subscriberOutput();
        if (out !== undefined) sub.write(out);
      },
      data: (chunk) => {
        try {
          this.engine.subscriberFeed(chunk);
        } catch {
          sub.destroy();
        }
        this.take();
      },
      error: () => {},
      close: () => {
        if (this.sub !== sub) return;
        this.sub = null;
        this.subReady = false;
        this.engine.subscriberLost();
        // Waiters fall back to their retry delay meanwhile.
        this.subRetryAt = performance.now() + 100;
      },
    });
    this.sub = sub;
    this.subReady = false;
  }

  /** Opens a socket and queues the handshake; resolves when the server accepted it. */
  open() {
    const { user, password, db } = this.target;
    const handshake = new Promise((resolve, reject) => {
      const id = newId();
      track(id, { resolve, reject, kind: "nothing", background: false });
      this.engine.handshake(id, user ?? undefined, password ?? undefined, db);
    });
    const socket = this.dial({
      open: () => {
        if (this.socket !== socket) return;
        this.ready = true;
        this.flush();
      },
      data: (chunk) => {
        try {
          this.engine.feed(chunk);
        } catch {
          socket.destroy();
        }
        // Even with nothing settled the engine may have more to send (a NOSCRIPT retry).
        this.take();
      },
      error: (message) => {
        this.lastError = message;
      },
      close: () => this.onClose(socket),
    });
    this.socket = socket;
    return handshake.then(
      () => {
        this.failures = 0;
      },
      (err) => {
        socket.destroy();
        throw err;
      },
    );
  }

  onClose(socket) {
    if (this.socket !== socket) return;
    this.ready = false;
    this.socket = null;
    this.engine.connectionLost(this.lastError);
    this.take();
    this.lastError = "the connection closed";
    // Reconnect now only if some call still waits; an idle store reconnects on its next
    // call, so a server that stays down keeps neither a retry loop nor the process alive.
    if (!this.closed && this.connected && this.engine.pending > 0) this.reconnectSoon();
  }

  reconnectSoon() {
    if (this.reconnectTimer !== null || this.closed) return;
    const delay = this.failures === 0 ? 0 : Math.min(50 * 2 ** this.failures, this.options.reconnectMaxDelayMs);
    this.failures += 1;
    this.reconnectTimer = unref(
      setTimeout(() => {
        this.reconnectTimer = null;
        if (this.closed) return;
        this.open().catch(() => {});
      }, delay),
    );
  }

  /** The first connection, with `reconnectRetries` more tries. */
  async start() {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.open();
        this.connected = true;
        return;
      } catch (err) {
        const lockError = toLockError(err);
        if (lockError.code !== "STORE_UNAVAILABLE" || attempt >= this.options.reconnectRetries) {
          this.close();
          throw lockError;
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** attempt, this.options.reconnectMaxDelayMs)));
      }
    }
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    live.delete(this);
    clearInterval(this.expiry);
    clearTimeout(this.reconnectTimer);
    this.engine.close();
    settle(this.engine.turn(), this.engine);
    // Waiters subscribed to releases wake now and find the store closed, rather than
    // sleeping out their retry delay.
    for (const [id, call] of calls) {
      if (call.connection === this && call.kind === "listener") {
        finish(id);
        call.resolve();
      }
    }
    this.ready = false;
    this.socket?.destroy();
    this.sub?.destroy();
  }
}

const ACCESS = Symbol("locksmith.redis");

function checked(value, name = "key") {
  checkString(name, value);
  return value;
}

function checkedLimit(value) {
  if (value !== undefined && typeof value !== "number") throw invalid(`limit must be a whole number from 1 to 4294967295; got ${typeName(value)}`);
  return value;
}

function checkedMs(value) {
  if (typeof value !== "number") throw invalid(`ttlMs must be a number of milliseconds; got ${typeName(value)}`);
  return value;
}

/**
 * Locks in Redis, over the runtime's own TCP socket. A plain `LockStore` object with
 * fencing tokens, exact ownership and release wake-ups.
 */
export class RedisLockStore {
  #engine;
  #connection;

  /**
   * Connects to `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS), or to
   * `{ url, keyPrefix, connectTimeoutMs, commandTimeoutMs, reconnectRetries,
   * reconnectMaxDelayMs, notifyReleases, tlsCaCert, tlsInsecure }`, as in Node.
   */
  static async connect(urlOrOptions) {
    const options = checkOptions(urlOrOptions);
    if (runtime === undefined) {
      throw new UnsupportedError(
        "locksmith: RedisLockStore needs TCP sockets, and this runtime has none for it (a browser, Vercel Edge); use a store over HTTP here, such as locksmith/upstash",
      );
    }
    parseRedisUrl(options.url);
    let module;
    let socket;
    try {
      ({ engine: module, socket } = await loadRuntime());
    } catch (err) {
      throw new UnsupportedError(`locksmith: the Redis engine's WebAssembly module did not load: ${err?.message ?? err}`);
    }
    try {
      module.checkUrlSettings(options.url, options.tlsInsecure, options.tlsCaCert !== null);
    } catch (err) {
      throw toLockError(err);
    }
    socket.check?.(parseRedisUrl(options.url), options);
    let engine;
    try {
      engine = new module.WasmRedisEngine(options.keyPrefix, options.commandTimeoutMs, options.notifyReleases);
    } catch (err) {
      throw toLockError(err);
    }
    const connection = new Connection(engine, options, socket);
    await connection.start();
    const store = new RedisLockStore(ACCESS);
    store.#engine = engine;
    store.#connection = connection;
    // The bridge's own bound on a call: past the engine's command timeout, which ends it first.
    store.operationTimeoutMs = options.connectTimeoutMs + options.commandTimeoutMs + 1_000;
    return store;
  }

  constructor(access) {
    if (access !== ACCESS) throw invalid("use `await RedisLockStore.connect(url)` to make a RedisLockStore");
  }

  /** The prefix put before every lock key. */
  get keyPrefix() {
    return this.#engine.keyPrefix;
  }

  #call(kind, start, background = false) {
    return new Promise((resolve, reject) => {
      const id = newId();
      try {
        start(id);
      } catch (err) {
        reject(toLockError(err));
        return;
      }
      track(id, { resolve, reject, kind, background, connection: this.#connection });
      // A closed store's calls finish at once (STORE_CLOSED); nothing flushes it any more.
      if (this.#connection.closed) settle(this.#engine.turn(), this.#engine);
      else flushSoon();
    });
  }

  /** Takes `key` for `owner` if it is free: its fencing token, or `false`. */
  acquire(key, owner, ttlMs) {
    return this.#call("token", (id) => this.#engine.acquire(id, checked(key), checked(owner, "owner"), checkedMs(ttlMs)));
  }

  /** Frees `key` if `owner` holds it. */
  release(key, owner) {
    return this.#call("flag", (id) => this.#engine.release(id, checked(key), checked(owner, "owner")));
  }

  /** Pushes `key`'s expiry `ttlMs` from now if `owner` holds it. */
  extend(key, owner, ttlMs) {
    return this.#call("flag", (id) => this.#engine.extend(id, checked(key), checked(owner, "owner"), checkedMs(ttlMs)));
  }

  /** Whether anyone holds `key`. */
  isLocked(key) {
    return this.#call("flag", (id) => this.#engine.isLocked(id, checked(key)));
  }

  /** Whether `owner` holds `key`. */
  isHeldBy(key, owner) {
    return this.#call("flag", (id) => this.#engine.isHeldBy(id, checked(key), checked(owner, "owner")));
  }

  /** Milliseconds until `key`'s hold expires, or null when nobody holds it. */
  remainingTime(key) {
    return this.#call("number", (id) => this.#engine.remainingTime(id, checked(key)));
  }

  /** Takes a hold of `key` of `kind` (`semaphore` with `limit`, `read`, `write`): its fencing token, or `false`. */
  acquirePermit(key, owner, ttlMs, kind, limit) {
    return this.#call("token", (id) =>
      this.#engine.acquirePermit(id, checked(key), checked(owner, "owner"), checkedMs(ttlMs), checked(kind, "kind"), checkedLimit(limit)),
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
      this.#connection.take();
    };
  }

  /** Closes the connections; later calls fail with StoreClosedError. */
  async close() {
    this.#connection.close();
  }
}
