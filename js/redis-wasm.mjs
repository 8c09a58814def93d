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
// the next call (or at once while something waits). Redis Sentinel and Cluster work as
// there too: the steps that touch no socket are js/redis-topology.mjs, shared with it.
import {
  UnsupportedError,
  StoreClosedError,
  checkOptionKeys,
  checkString,
  invalid,
  toLockError,
  typeName,
} from "./api.mjs";
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, HAS_WAITERS } from "./symbols.mjs";
import {
  authCommands,
  backoffMs,
  checkMinReplicas,
  checkTopology,
  locateMaster,
  nodeAt,
  parseRedisUrl as parseUrl,
  readSlotMap,
  switchedMaster,
  CONNECT_KEYS,
  CONNECT_OPTIONS,
} from "./redis-topology.mjs";

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
const parseRedisUrl = (url) => parseUrl(url, invalid);

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
  checkOptionKeys(options, CONNECT_KEYS, "RedisLockStore.connect()");
  const topology = checkTopology(options, invalid);
  for (const [name, type] of Object.entries(CONNECT_OPTIONS)) {
    if (options[name] !== undefined && typeof options[name] !== type) {
      throw invalid(`${name} must be a ${type}; got ${typeName(options[name])}`);
    }
  }
  if (options.reconnectRetries !== undefined && !(Number.isInteger(options.reconnectRetries) && options.reconnectRetries >= 0)) {
    throw invalid(`reconnectRetries must be a whole number >= 0; got ${options.reconnectRetries}`);
  }
  const minReplicas = checkMinReplicas(options.minReplicas, invalid);
  return {
    ...topology,
    minReplicas,
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

/** Stands for the data socket while the Sentinels are asked where the master is. */
const LOCATING = Object.freeze({ destroy() {}, write() {} });

/** One byte array of `parts`. */
function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const live = new Set();
let flushQueued = false;
// Calls started since the last write: a turn that starts many writes every EARLY_WRITE
// of them at once, so the server starts on them while the rest are made (as in
// js/redis-engine.cjs).
const EARLY_WRITE = 16;
let started = 0;

function flushAll() {
  flushQueued = false;
  started = 0;
  for (const connection of live) {
    settle(connection.engine.turn(), connection.engine);
    connection.flush();
  }
}

/** A call queued commands: written with the turn's others, or now if EARLY_WRITE are waiting. */
function callStarted() {
  if (++started >= EARLY_WRITE) flushAll();
  else flushSoon();
}

/** Writes every connection's pending commands once this turn's code has run. */
function flushSoon() {
  if (!flushQueued) {
    flushQueued = true;
    queueMicrotask(flushAll);
  }
}

class Connection {
  constructor(engine, options, socket, module) {
    this.engine = engine;
    this.module = module;
    this.runtimeSocket = socket;
    this.options = options;
    this.target = parseRedisUrl(options.url);
    // Sentinel: `target` holds the master's credentials; its address comes from the
    // Sentinels on every (re)connect, and a watcher follows `+switch-master`.
    this.sentinelAt = 0;
    this.watcher = null;
    this.watchTimer = null;
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
    // Cluster: connection 0 (the seed's node) is `socket` as above; the other nodes'
    // connections are `nodes[conn]`, made when the engine first routes to them.
    this.nodes = [];
    this.clusterEnabled = false;
    this.refreshing = null;
    this.refreshAgain = false;
    const tick = Math.max(10, Math.min(250, Math.floor(options.commandTimeoutMs / 4)));
    this.expiry = unref(
      setInterval(() => {
        if (this.options.cluster) {
          for (const conn of this.engine.expireAll()) (conn === 0 ? this.socket : this.nodes[conn]?.socket)?.destroy();
          if (this.options.notifyReleases) {
            for (const node of this.nodes) if (node && this.engine.subscriberTickOn(node.conn)) node.sub?.destroy();
          }
        } else if (this.engine.expire()) this.socket?.destroy();
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
    } else if (this.socket === null && this.connected && !this.closed && (this.options.cluster ? this.engine.busyOn(0) : this.engine.pending > 0)) {
      // A call on a store whose connection went while it was idle: connect again; its
      // commands wait behind the handshake.
      this.reconnectSoon();
    }
    if (this.options.cluster && !this.closed) this.flushNodes();
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

  /**
   * A socket to `target` (the server by default) with a connect timeout; `on` gets
   * open, data(chunk), error(message), close.
   */
  dial(on, target = this.target) {
    let opened = false;
    const timer = unref(
      setTimeout(() => {
        if (!opened) {
          on.error(`connecting timed out after ${this.options.connectTimeoutMs} ms`);
          socket.destroy();
        }
      }, this.options.connectTimeoutMs),
    );
    const socket = this.runtimeSocket.dial(target, this.options, {
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
    // Cluster: connection 0's node (sharded pub/sub: the channels of its slots).
    const target = this.options.cluster ? this.nodeTarget(0) : this.target;
    this.dialSubscriber(this, target, {
      connected: (user, password) => this.engine.subscriberConnected(user, password),
      output: () => this.engine.subscriberOutput(),
      feed: (chunk) => this.engine.subscriberFeed(chunk),
      lost: () => this.engine.subscriberLost(),
    });
  }

  /**
   * A subscriber socket to `target` for `holder` — this store, or a cluster node; both
   * keep `sub`, `subReady` and `subRetryAt` — driven through `calls`, the engine's
   * methods for that subscriber.
   */
  dialSubscriber(holder, target, calls) {
    const sub = this.dial({
      open: () => {
        // A socket replaced before it connected is not the holder's.
        if (holder.sub !== sub) return;
        holder.subReady = true;
        calls.connected(target.user ?? undefined, target.password ?? undefined);
        const out = calls.output();
        if (out !== undefined) sub.write(out);
      },
      data: (chunk) => {
        try {
          calls.feed(chunk);
        } catch {
          sub.destroy();
        }
        this.take();
      },
      error: () => {},
      close: () => {
        if (holder.sub !== sub) return;
        holder.sub = null;
        holder.subReady = false;
        calls.lost();
        // Waiters fall back to their retry delay meanwhile.
        holder.subRetryAt = performance.now() + 100;
      },
    }, target);
    holder.sub = sub;
    holder.subReady = false;
  }

  /**
   * Cluster: reads `CLUSTER SLOTS` from a node that answers (those connected first,
   * then the seeds) into the engine's slot map.
   */
  async refreshTopology() {
    const known = [];
    for (let conn = 0; conn < this.engine.connections; conn++) known.push(this.nodeTarget(conn));
    const { target, firsts, lasts, addresses } = await readSlotMap((server, commands) => this.exchange(server, commands), [...known, ...this.options.cluster]);
    if (!this.clusterEnabled) {
      // The first seed that answered is connection 0.
      this.target = { ...this.target, host: target.host, port: target.port };
      this.engine.enableCluster(`${target.host}:${target.port}`);
      this.clusterEnabled = true;
    }
    this.engine.setSlots(Uint32Array.from(firsts), Uint32Array.from(lasts), addresses);
  }

  /** Cluster: reads the topology again soon (once at a time, at most every 100 ms). */
  refreshSoon() {
    if (this.closed) return;
    if (this.refreshing !== null) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = this.refreshTopology()
      .catch(() => {})
      .then(() => new Promise((resolve) => unref(setTimeout(resolve, 100))))
      .then(() => {
        this.refreshing = null;
        flushSoon();
        if (this.refreshAgain) {
          this.refreshAgain = false;
          this.refreshSoon();
        }
      });
  }

  /** Cluster: connection `conn`'s node, with the seeds' scheme and login. */
  nodeTarget(conn) {
    const address = this.engine.address(conn);
    return address === undefined ? this.target : nodeAt(address, this.target);
  }

  /** Cluster: writes each node's commands, connecting to the nodes that have some. */
  flushNodes() {
    for (let conn = 1; conn < this.engine.connections; conn++) {
      const node = (this.nodes[conn] ??= {
        conn,
        socket: null,
        ready: false,
        failures: 0,
        timer: null,
        target: null,
        lastError: "the connection closed",
        sub: null,
        subReady: false,
        subRetryAt: 0,
      });
      if (this.options.notifyReleases) this.flushNodeSubscriber(node);
      if (node.ready) {
        const out = this.engine.takeOutputOn(conn);
        if (out !== undefined) node.socket.write(out);
      } else if (node.socket === null && node.timer === null && this.engine.busyOn(conn)) {
        const delay = node.failures === 0 ? 0 : backoffMs(node.failures, this.options.reconnectMaxDelayMs);
        node.failures += 1;
        node.timer = unref(
          setTimeout(() => {
            node.timer = null;
            if (!this.closed) this.openNode(node);
          }, delay),
        );
      }
    }
  }

  /** Cluster: a node's subscriber socket (sharded pub/sub on the channels of its slots). */
  flushNodeSubscriber(node) {
    const { conn } = node;
    if (node.sub !== null) {
      if (node.subReady) {
        const out = this.engine.subscriberOutputOn(conn);
        if (out !== undefined) node.sub.write(out);
      }
      return;
    }
    if (performance.now() < node.subRetryAt || !this.engine.subscriberWantedOn(conn)) return;
    this.dialSubscriber(node, this.nodeTarget(conn), {
      connected: (user, password) => this.engine.subscriberConnectedOn(conn, user, password),
      output: () => this.engine.subscriberOutputOn(conn),
      feed: (chunk) => this.engine.subscriberFeedOn(conn, chunk),
      lost: () => this.engine.subscriberLostOn(conn),
    });
  }

  /** Cluster: a connection to one more node, its handshake in front of what waits for it. */
  openNode(node) {
    const { conn } = node;
    node.target = this.nodeTarget(conn);
    const { user, password } = node.target;
    new Promise((resolve, reject) => {
      const id = newId();
      track(id, { resolve, reject, kind: "nothing", background: false });
      this.engine.handshakeOn(id, conn, user ?? undefined, password ?? undefined);
    }).then(
      () => {
        node.failures = 0;
      },
      () => node.socket?.destroy(),
    );
    const socket = this.dial(
      {
        open: () => {
          if (node.socket !== socket) return;
          node.ready = true;
          flushSoon();
        },
        data: (chunk) => {
          try {
            this.engine.feedOn(conn, chunk);
          } catch {
            socket.destroy();
          }
          this.afterFeed();
          this.take();
        },
        error: (message) => {
          node.lastError = `${message}`;
        },
        close: () => {
          if (node.socket !== socket) return;
          node.socket = null;
          node.ready = false;
          this.engine.connectionLostOn(conn, `${node.target.host}:${node.target.port}: ${node.lastError}`);
          node.lastError = "the connection closed";
          this.take();
          this.refreshSoon();
        },
      },
      node.target,
    );
    node.socket = socket;
  }

  /** After a chunk was fed: a cluster's redirects may want the slot map read again. */
  afterFeed() {
    if (this.options.cluster && this.engine.takeTopologyStale()) this.refreshSoon();
  }

  /**
   * One short exchange with a server (a Sentinel, or a server whose role is asked):
   * connects, logs in with the target's credentials, sends `commands` (arrays of
   * strings) and resolves with their decoded replies. An error reply, a refused
   * connection or no answer within `connectTimeoutMs` rejects.
   */
  exchange(target, commands) {
    const { redisCommand, redisDecode } = this.module;
    return new Promise((resolve, reject) => {
      const all = authCommands(target);
      const skip = all.length;
      all.push(...commands);
      const replies = [];
      let input = new Uint8Array(0);
      let settled = false;
      let socket = null;
      let opened = false;
      const finish = (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket?.destroy();
        if (err) reject(err);
        else resolve(replies.slice(skip));
      };
      // Bounded, and not unref'd: a connect() that starts by asking the Sentinels waits on it.
      const timer = setTimeout(() => finish(new Error(`no answer within ${this.options.connectTimeoutMs} ms`)), this.options.connectTimeoutMs);
      socket = this.runtimeSocket.dial(target, this.options, {
        open: () => {
          opened = true;
          // A socket may open before dial() returns; write once it is known.
          queueMicrotask(() => {
            if (!settled) socket.write(concat(all.map((args) => redisCommand(args))));
          });
        },
        data: (chunk) => {
          input = input.length === 0 ? chunk : concat([input, chunk]);
          try {
            for (let next = redisDecode(input); next !== undefined; next = redisDecode(input)) {
              const [value, used] = next;
              input = input.subarray(used);
              if (value !== null && typeof value === "object" && !Array.isArray(value)) {
                finish(new Error(value.error));
                return;
              }
              replies.push(value);
              if (replies.length === all.length) {
                finish(null);
                return;
              }
            }
          } catch (err) {
            finish(err);
          }
        },
        error: (message) => finish(new Error(message)),
        close: () => finish(new Error(opened ? "the connection closed" : "the connection was refused")),
      });
      if (settled) socket.destroy();
    });
  }

  /** Sentinel: the master, checked to be one (`locateMaster` in js/redis-topology.mjs). */
  async locate() {
    const { target, at } = await locateMaster(
      (server, commands) => this.exchange(server, commands),
      this.options.sentinels,
      this.options.masterName,
      this.target,
    );
    this.sentinelAt = at;
    return target;
  }

  /**
   * Sentinel: a subscription to `+switch-master` on one Sentinel. When the master
   * moves, the data and subscriber sockets are dropped; the next call (or a waiting
   * lock at once) connects to the new master.
   */
  watch() {
    if (this.closed || this.watcher !== null || !this.options.sentinels) return;
    const { sentinels, masterName } = this.options;
    const { redisCommand, redisDecode } = this.module;
    const sentinel = sentinels[this.sentinelAt];
    let input = new Uint8Array(0);
    const socket = this.runtimeSocket.dial(sentinel, this.options, {
      open: () => {
        queueMicrotask(() => {
          if (this.watcher === socket) socket.write(concat([...authCommands(sentinel), ["SUBSCRIBE", "+switch-master"]].map((args) => redisCommand(args))));
        });
      },
      data: (chunk) => {
        input = input.length === 0 ? chunk : concat([input, chunk]);
        try {
          for (let next = redisDecode(input); next !== undefined; next = redisDecode(input)) {
            const [value, used] = next;
            input = input.subarray(used);
            if (!Array.isArray(value)) {
              if (value !== null && typeof value === "object") socket.destroy(); // a refused AUTH
              continue;
            }
            const to = switchedMaster(value, masterName);
            if (to !== null && (to.host !== this.target.host || to.port !== this.target.port)) this.moved(`the master moved to ${to.host}:${to.port}`);
          }
        } catch {
          socket.destroy();
        }
      },
      error: () => {},
      close: () => {
        if (this.watcher !== socket) return;
        this.watcher = null;
        if (this.closed) return;
        // The next Sentinel, in a second.
        this.sentinelAt = (this.sentinelAt + 1) % sentinels.length;
        this.watchTimer = unref(
          setTimeout(() => {
            this.watchTimer = null;
            this.watch();
          }, 1_000),
        );
      },
    });
    this.watcher = socket;
  }

  /** The server is no longer the master: drop both sockets; reconnecting asks the Sentinels again. */
  moved(why) {
    if (this.socket !== null && this.socket !== LOCATING) {
      this.lastError = why;
      this.socket.destroy();
    }
    this.sub?.destroy();
  }

  /** Opens a socket and queues the handshake; resolves when the server accepted it. */
  open() {
    const { user, password, db } = this.target;
    const handshake = new Promise((resolve, reject) => {
      const id = newId();
      track(id, { resolve, reject, kind: "nothing", background: false });
      this.engine.handshake(id, user ?? undefined, password ?? undefined, db);
    });
    if (this.options.sentinels) {
      this.socket = LOCATING;
      this.locate().then(
        (target) => {
          if (this.closed || this.socket !== LOCATING) return;
          this.target = target;
          this.attach();
          this.watch();
        },
        (err) => {
          if (this.socket !== LOCATING) return;
          this.lastError = err.message;
          this.onClose(LOCATING);
        },
      );
    } else {
      this.attach();
    }
    return handshake.then(
      () => {
        this.failures = 0;
      },
      (err) => {
        this.socket?.destroy();
        throw err;
      },
    );
  }

  /** Dials `target` as the data socket; the handshake queued by `open()` goes first. */
  attach() {
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
        // A READONLY reply: the master was demoted. Ask the Sentinels again.
        if (this.options.sentinels && this.engine.takeReplicaSeen()) this.moved("the server became a replica (READONLY)");
        this.afterFeed();
        // Even with nothing settled the engine may have more to send (a NOSCRIPT retry).
        this.take();
      },
      error: (message) => {
        this.lastError = message;
      },
      close: () => this.onClose(socket),
    });
    this.socket = socket;
  }

  onClose(socket) {
    if (this.socket !== socket) return;
    this.ready = false;
    this.socket = null;
    this.engine.connectionLost(this.lastError);
    this.take();
    this.lastError = "the connection closed";
    if (this.options.cluster) this.refreshSoon();
    // Reconnect now only if some call still waits; an idle store reconnects on its next
    // call, so a server that stays down keeps neither a retry loop nor the process alive.
    if (!this.closed && this.connected && (this.options.cluster ? this.engine.busyOn(0) : this.engine.pending > 0)) this.reconnectSoon();
  }

  reconnectSoon() {
    if (this.reconnectTimer !== null || this.closed) return;
    const delay = this.failures === 0 ? 0 : backoffMs(this.failures, this.options.reconnectMaxDelayMs);
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
        if (this.options.cluster) await this.refreshTopology();
        await this.open();
        this.connected = true;
        return;
      } catch (err) {
        const lockError = toLockError(err);
        if (lockError.code !== "STORE_UNAVAILABLE" || attempt >= this.options.reconnectRetries) {
          this.close();
          throw lockError;
        }
        await new Promise((resolve) => setTimeout(resolve, backoffMs(attempt, this.options.reconnectMaxDelayMs)));
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
    clearTimeout(this.watchTimer);
    this.watcher?.destroy();
    for (const node of this.nodes) {
      if (!node) continue;
      clearTimeout(node.timer);
      node.socket?.destroy();
      node.sub?.destroy();
    }
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
   * reconnectMaxDelayMs, notifyReleases, tlsCaCert, tlsInsecure, minReplicas }`, with
   * `sentinels` and `masterName` (`username`, `password`, `db`) or `cluster` instead of
   * `url`, as in Node.
   */
  static async connect(urlOrOptions) {
    const options = checkOptions(urlOrOptions);
    if (runtime === undefined) {
      throw new UnsupportedError(
        "locksmith: RedisLockStore needs TCP sockets, and this runtime has none for it (a browser, Vercel Edge); use a store over HTTP here, such as locksmith-js/upstash",
      );
    }
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
    for (const target of [parseRedisUrl(options.url), ...(options.sentinels ?? []), ...(options.cluster ?? [])]) socket.check?.(target, options);
    let engine;
    try {
      engine = new module.WasmRedisEngine(options.keyPrefix, options.commandTimeoutMs, options.notifyReleases);
    } catch (err) {
      throw toLockError(err);
    }
    // WAIT answers within half the command timeout, so its answer, not the deadline,
    // says how many replicas acknowledged.
    if (options.minReplicas > 0) engine.setMinReplicas(options.minReplicas, Math.max(1, Math.floor(options.commandTimeoutMs / 2)));
    const connection = new Connection(engine, options, socket, module);
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
      else callStarted();
    });
  }

  /** Takes `key` for `owner` if it is free: `true`, or `false` when someone holds it. */
  async acquire(key, owner, ttlMs) {
    return (await this[ACQUIRE_TOKEN](key, owner, ttlMs)) !== false;
  }

  /** `acquire()` answering the hold's fencing token (how locks get it), or `false`. */
  [ACQUIRE_TOKEN](key, owner, ttlMs) {
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

  /** Takes a hold of `key` of `kind` (`semaphore` with `limit`, `read`, `write`): `true`, or `false`. */
  async acquirePermit(key, owner, ttlMs, kind, limit) {
    return (await this[ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit)) !== false;
  }

  /** `acquirePermit()` answering the hold's fencing token, or `false`. */
  [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit) {
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
      this.#connection.take();
    };
  }

  /** Closes the connections; later calls fail with StoreClosedError. */
  async close() {
    this.#connection.close();
  }
}
