// The Redis driver: one connection state machine for both builds — standalone, Sentinel,
// Cluster, the subscriber sockets of release notifications, reconnects, write batching
// and deadlines — between two ports:
//
// - an *engine port* (`binding`): the sans-I/O engine, the addon's NativeEngineStore
//   (node/src/redis_engine.rs) or wasm-redis's WasmRedisEngine, which share one host API
//   (connection-indexed: connection 0 is the server, or a cluster's first node; each
//   call's outcome reported by `turn()` into one Float64Array), with the binding's call
//   table (js/api/calls.mjs) and RESP codec for the driver's own short exchanges;
// - a *socket port* (js/redis/sockets/: node:net/tls, Deno, cloudflare:sockets):
//   `dial(target, options, { open, data, error, close })` → `{ write, destroy }`, and an
//   optional `check(target, options)` that refuses what its sockets cannot do.
//
// The commands of one event-loop turn leave in one write; each chunk read is handed to
// the engine once (which settles every reply in it and runs what they woke) and is not
// kept after; a connection that drops is replaced at once while something waits on it,
// else on the next call. A socket's handshake (AUTH, SELECT, the scripts) is queued when
// that socket is dialed and belongs to it: no reset in between can strip it.
import { StoreUnavailableError, checkOptionKeys, invalid, toLockError, typeName } from "../api/errors.mjs";
import {
  authCommands,
  backoffMs,
  checkMinReplicas,
  checkTopology,
  locateMaster,
  nodeAt,
  parseRedisUrl,
  readSlotMap,
  switchedMaster,
  CONNECT_KEYS,
  CONNECT_OPTIONS,
} from "./topology.mjs";
import { DEFAULT_KEY_PREFIX, MAX_MS } from "../api/defaults.mjs";

// ---------------------------------------------------------------------------------
// Options: one table, one check, for both builds.

/** `RedisLockStore.connect()`'s defaults. */
export const DEFAULTS = Object.freeze({
  keyPrefix: DEFAULT_KEY_PREFIX,
  connectTimeoutMs: 2_000,
  commandTimeoutMs: 2_000,
  reconnectRetries: 2,
  reconnectMaxDelayMs: 1_000,
  notifyReleases: true,
  tlsCaCert: null,
  tlsInsecure: false,
  minReplicas: 0,
  // false: a lock's acquire is one plain SET NX PX, its hold without a fencing token.
  fencing: true,
});

/** A duration option: a whole number of milliseconds from 1 to 2^31 - 1. */
function millis(name, value) {
  if (value === undefined) return DEFAULTS[name];
  if (!Number.isInteger(value) || value < 1 || value > MAX_MS) {
    throw invalid(`${name} must be a whole number of milliseconds from 1 to ${MAX_MS}; got ${value}`);
  }
  return value;
}

/** `RedisLockStore.connect()`'s argument checked, with the defaults filled in. */
export function checkConnectOptions(urlOrOptions) {
  const options = typeof urlOrOptions === "string" ? { url: urlOrOptions } : urlOrOptions;
  if (options === null || typeof options !== "object") {
    throw invalid(`RedisLockStore.connect() needs a URL or an options object; got ${typeName(urlOrOptions)}`);
  }
  checkOptionKeys(options, CONNECT_KEYS, "RedisLockStore.connect()");
  const topology = checkTopology(options);
  for (const [name, type] of Object.entries(CONNECT_OPTIONS)) {
    if (options[name] !== undefined && typeof options[name] !== type) {
      throw invalid(`${name} must be a ${type}; got ${typeName(options[name])}`);
    }
  }
  if (options.reconnectRetries !== undefined && !(Number.isInteger(options.reconnectRetries) && options.reconnectRetries >= 0)) {
    throw invalid(`reconnectRetries must be a whole number >= 0; got ${options.reconnectRetries}`);
  }
  return {
    ...topology,
    minReplicas: checkMinReplicas(options.minReplicas),
    keyPrefix: options.keyPrefix ?? DEFAULTS.keyPrefix,
    connectTimeoutMs: millis("connectTimeoutMs", options.connectTimeoutMs),
    commandTimeoutMs: millis("commandTimeoutMs", options.commandTimeoutMs),
    reconnectRetries: options.reconnectRetries ?? DEFAULTS.reconnectRetries,
    reconnectMaxDelayMs: millis("reconnectMaxDelayMs", options.reconnectMaxDelayMs),
    notifyReleases: options.notifyReleases ?? DEFAULTS.notifyReleases,
    tlsCaCert: options.tlsCaCert ?? DEFAULTS.tlsCaCert,
    tlsInsecure: options.tlsInsecure ?? DEFAULTS.tlsInsecure,
    fencing: options.fencing ?? DEFAULTS.fencing,
  };
}

// ---------------------------------------------------------------------------------
// Timers and bytes

// Timers that do not keep the process alive by themselves (Node, Deno); elsewhere (a
// worker's request) there is nothing to unref.
function unref(timer) {
  if (typeof timer?.unref === "function") timer.unref();
  else if (typeof timer === "number" && typeof Deno === "object" && typeof Deno.unrefTimer === "function") Deno.unrefTimer(timer);
  return timer;
}

const EMPTY = new Uint8Array(0);

/** One byte array of `parts` (always a new one). */
function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * A reader of whole replies from chunks: `push(chunk, onValue)` decodes every complete
 * reply (`onValue(value)`; returning true stops) and keeps a copy of the incomplete rest,
 * never the chunk itself (a socket may reuse its buffer for the next read).
 */
function replyReader(decode) {
  let rest = EMPTY;
  return (chunk, onValue) => {
    let input = rest.length === 0 ? chunk : concat([rest, chunk]);
    for (let next = decode(input); next != null; next = decode(input)) {
      const [value, used] = next;
      input = input.subarray(used);
      if (onValue(value)) return;
    }
    rest = input.length === 0 ? EMPTY : input.slice();
  };
}

const isErrorReply = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

// ---------------------------------------------------------------------------------
// Write batching, across every store of this build

const live = new Set();
let flushQueued = false;
// Calls started since the last write. A turn that starts many (64 loops woken by one
// chunk of replies) writes every EARLY_WRITE of them at once rather than all at the
// turn's end, so the server works on the first ones while the rest are made: one write
// per turn left the server and this thread taking turns (measured at c=64 with a probe
// since folded into `npm run bench`: about 1.4× the pairs/s; 8 to 16 measured alike).
const EARLY_WRITE = 16;
let started = 0;

function flushAll() {
  flushQueued = false;
  // Calls started since the last flush may have gone to sleep (a lock's retry, a hold's
  // watch) without sending anything: a turn arms the timer for them. With none started,
  // every engine is already up to date.
  const turn = started > 0;
  started = 0;
  for (const connection of live) {
    if (turn) connection.take(connection.engine.turn(), false);
    connection.flush();
  }
}

/** A call queued commands: written with the turn's others, or now if EARLY_WRITE are waiting. */
export function callStarted() {
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

// How many numbers one engine turn reports at most (more wait for the next), and the
// size of the reused buffer a turn's output is copied into where the socket allows.
const OUTCOMES = 1 + 2 * 1024;
const OUTPUT_BYTES = 64 * 1024;

/** Stands for the data socket while the Sentinels are asked where the master is. */
const LOCATING = Object.freeze({ destroy() {}, write() {} });

// ---------------------------------------------------------------------------------
// One engine connection's socket: the server's (connection 0) or a cluster node's.

class Link {
  constructor(connection, conn) {
    this.connection = connection;
    this.conn = conn;
    this.socket = null;
    this.ready = false;
    this.target = null;
    this.failures = 0;
    this.timer = null;
    this.lastError = "the connection closed";
    // Bumped by each open(): a handshake, a Sentinel lookup or a socket event of an
    // earlier one does not act on this one.
    this.generation = 0;
    this.attempt = null;
    this.scratch = null;
  }

  /** Opens a socket behind its handshake; resolves once the server accepted it. */
  open() {
    const c = this.connection;
    const generation = ++this.generation;
    return new Promise((resolve, reject) => {
      this.attempt = { resolve, reject };
      if (this.conn === 0 && c.options.sentinels) {
        this.socket = LOCATING;
        c.locate().then(
          (target) => {
            if (c.closed || this.generation !== generation || this.socket !== LOCATING) return;
            c.target = target;
            this.attach(generation);
            c.watch();
          },
          (err) => {
            if (this.generation !== generation || this.socket !== LOCATING) return;
            this.lastError = err.message;
            this.onClose(LOCATING);
          },
        );
      } else {
        this.attach(generation);
      }
    });
  }

  settleAttempt(err) {
    const attempt = this.attempt;
    if (attempt === null) return;
    this.attempt = null;
    if (err) attempt.reject(err);
    else attempt.resolve();
  }

  /** Queues this socket's handshake and dials it; the handshake goes out first. */
  attach(generation) {
    const c = this.connection;
    const target = (this.target = this.conn === 0 ? c.target : c.nodeTarget(this.conn));
    const { user, password } = target;
    c.call((id) => c.engine.handshake(id, this.conn, user ?? undefined, password ?? undefined, this.conn === 0 ? target.db : 0), "nothing").then(
      () => {
        if (this.generation !== generation) return;
        this.failures = 0;
        this.settleAttempt(null);
      },
      (err) => {
        if (this.generation !== generation) return;
        this.settleAttempt(err);
        this.drop(err.message);
      },
    );
    const socket = c.dial(target, {
      open: () => {
        if (this.socket !== socket) return;
        this.ready = true;
        this.flush();
      },
      data: (chunk) => {
        if (this.socket !== socket) return;
        let count;
        try {
          count = c.engine.feed(this.conn, chunk);
        } catch (err) {
          // Out of step: the socket goes, and the engine learns it at once. The engine's
          // words without its code and prefix (they would repeat in the error).
          const detail = toLockError(err).message.replace(/^locksmith: (store unavailable: )?(redis: )?/, "");
          this.drop(`a reply that is not the Redis protocol (is it a Redis port?): ${detail}`);
          return;
        }
        // A READONLY reply: the master was demoted. Ask the Sentinels again — once this
        // chunk's outcomes are settled: dropping the socket runs a turn of its own, which
        // would write over them.
        const demoted = this.conn === 0 && c.options.sentinels && c.engine.takeReplicaSeen();
        c.afterFeed();
        // Even with nothing settled the engine may have more to send (a NOSCRIPT retry).
        c.take(count);
        if (demoted) c.moved("the server became a replica (READONLY)");
      },
      error: (message) => {
        if (this.socket === socket) this.lastError = message;
      },
      close: () => this.onClose(socket),
    });
    this.socket = socket;
  }

  onClose(socket) {
    if (this.socket === socket) this.lose(socket, this.lastError);
  }

  /**
   * The socket is gone (closed, or dropped here): the engine learns it at once, before
   * any other socket can be attached, so no reply of one is matched to a request of another.
   */
  lose(socket, lastError) {
    const c = this.connection;
    this.ready = false;
    this.socket = null;
    this.lastError = "the connection closed";
    const why = this.conn === 0 ? lastError : `${this.target.host}:${this.target.port}: ${lastError}`;
    // A lookup that failed queued no handshake to fail: its attempt fails here.
    if (socket === LOCATING) this.settleAttempt(new StoreUnavailableError(`locksmith: redis: ${why}`));
    c.engine.connectionLost(this.conn, why);
    c.take(c.engine.turn());
    if (c.options.cluster) c.refreshSoon();
    // Reconnect now only if something still waits on this connection; an idle store
    // reconnects on its next call, so a server that stays down keeps neither a retry
    // loop nor the process alive.
    if (!c.closed && c.connected && this.wanted()) this.reconnectSoon();
  }

  /** Whether calls wait on this connection (for connection 0 off a cluster: any lock that waits). */
  wanted() {
    const { engine, options } = this.connection;
    return this.conn === 0 && !options.cluster ? engine.pending > 0 : engine.busy(this.conn);
  }

  reconnectSoon() {
    const c = this.connection;
    if (this.timer !== null || c.closed) return;
    const delay = this.failures === 0 ? 0 : backoffMs(this.failures, c.options.reconnectMaxDelayMs);
    this.failures += 1;
    this.timer = unref(
      setTimeout(() => {
        this.timer = null;
        if (!c.closed) this.open().catch(() => {});
      }, delay),
    );
  }

  /** Writes what the engine has for this connection, or connects if calls wait for one. */
  flush() {
    const c = this.connection;
    if (this.ready) this.write();
    else if (this.socket === null && c.connected && !c.closed && c.engine.busy(this.conn)) this.reconnectSoon();
  }

  write() {
    const { engine, binding } = this.connection;
    const socket = this.socket;
    // The reused buffer only where a write usually completes at once (plain TCP in
    // Node): a socket that keeps what it is given gets a buffer of its own.
    if (binding.scratch !== undefined && socket.reusable) {
      const scratch = (this.scratch ??= binding.scratch(OUTPUT_BYTES));
      const n = engine.takeOutputInto(this.conn, scratch);
      if (n === 0) return;
      if (n > 0) {
        // Still held by the socket (not all written at once): the next bytes go elsewhere.
        if (!socket.write(scratch.subarray(0, n))) this.scratch = null;
        return;
      }
    }
    const out = engine.takeOutput(this.conn);
    if (out != null) socket.write(out);
  }

  /** Drops the socket (a deadline long past, a failover, a refused handshake); a Sentinel lookup goes on. */
  drop(why = this.lastError) {
    const socket = this.socket;
    if (socket === null || socket === LOCATING) return;
    socket.destroy();
    this.lose(socket, why);
  }

  close() {
    clearTimeout(this.timer);
    this.generation += 1;
    this.ready = false;
    const socket = this.socket;
    this.socket = null;
    socket?.destroy();
    this.settleAttempt(new StoreUnavailableError("locksmith: redis: the store was closed"));
  }
}

// ---------------------------------------------------------------------------------
// One engine connection's subscriber socket (release notifications).

class SubscriberLink {
  constructor(connection, conn) {
    this.connection = connection;
    this.conn = conn;
    this.socket = null;
    this.ready = false;
    this.retryAt = 0;
  }

  flush() {
    const { engine } = this.connection;
    if (this.socket !== null) {
      if (this.ready) {
        const out = engine.subscriberOutput(this.conn);
        if (out != null) this.socket.write(out);
      }
      return;
    }
    if (performance.now() >= this.retryAt && engine.subscriberWanted(this.conn)) this.dial();
  }

  dial() {
    const c = this.connection;
    const { engine } = c;
    const target = c.nodeTarget(this.conn);
    const socket = c.dial(target, {
      open: () => {
        if (this.socket !== socket) return;
        this.ready = true;
        engine.subscriberConnected(this.conn, target.user ?? undefined, target.password ?? undefined);
        const out = engine.subscriberOutput(this.conn);
        if (out != null) socket.write(out);
      },
      data: (chunk) => {
        if (this.socket !== socket) return;
        let count;
        try {
          count = engine.subscriberFeed(this.conn, chunk);
        } catch {
          socket.destroy();
          return;
        }
        // A redirected SSUBSCRIBE: the slot map is read again.
        c.afterFeed();
        // A woken waiter's attempt is queued even when no call finished.
        flushSoon();
        c.take(count);
      },
      error: () => {},
      close: () => {
        if (this.socket !== socket) return;
        this.socket = null;
        this.ready = false;
        engine.subscriberLost(this.conn);
        // Waiters fall back to their retry delay meanwhile.
        this.retryAt = performance.now() + 100;
      },
    });
    this.socket = socket;
    this.ready = false;
  }

  drop() {
    this.socket?.destroy();
  }

  close() {
    const socket = this.socket;
    this.socket = null;
    this.ready = false;
    socket?.destroy();
  }
}

// ---------------------------------------------------------------------------------
// One store's connections.

class Connection {
  constructor(binding, sockets, engine, options) {
    this.binding = binding;
    this.sockets = sockets;
    this.engine = engine;
    this.outcomes = binding.outcomes(engine, OUTCOMES);
    this.options = options;
    this.target = parseRedisUrl(options.url);
    this.closed = false;
    this.connected = false;
    // By engine connection: 0 is the server (or the cluster's first node).
    this.links = [new Link(this, 0)];
    this.subscribers = [new SubscriberLink(this, 0)];
    // Sentinel: `target` holds the master's credentials; its address comes from the
    // Sentinels on every (re)connect, and a watcher follows `+switch-master`.
    this.sentinelAt = 0;
    this.watcher = null;
    this.watchTimer = null;
    // Short exchanges in flight (Sentinels, ROLE, CLUSTER SLOTS), ended by close().
    this.exchanges = new Set();
    this.clusterEnabled = false;
    this.refreshing = null;
    this.refreshAgain = false;
    this.sleepTimer = null;
    this.sleepAt = Infinity;
    const tick = Math.max(10, Math.min(250, Math.floor(options.commandTimeoutMs / 4)));
    this.expiry = unref(setInterval(() => this.tick(), tick));
    // Run once each call is on record (one function for every call, not one per call).
    this.afterStart = () => {
      // A closed store's calls finish at once (STORE_CLOSED); nothing flushes it any more.
      if (this.closed) this.take(this.engine.turn(), false);
      else callStarted();
    };
    live.add(this);
  }

  /** Starts an engine call (`start(id)`); its promise, decoded by `kind`. */
  call(start, kind, background = false) {
    return this.binding.calls.start(start, kind, background, this.afterStart, this);
  }

  /** Deadlines: requests past theirs fail; sockets whose replies are long overdue go. */
  tick() {
    const { engine } = this;
    for (const conn of engine.expire()) this.links[conn]?.drop();
    if (this.options.notifyReleases) for (const conn of engine.subscriberTick()) this.subscribers[conn]?.drop();
    // Requests a cluster asked to retry (TRYAGAIN, CLUSTERDOWN) were queued again.
    if (this.options.cluster) flushSoon();
    this.take(engine.turn());
  }

  /**
   * Settles what a turn of the engine finished (`count` numbers of `this.outcomes`;
   * 0: nothing) and arms the sleep timer for the engine's own sleeps.
   */
  take(count, thenFlush = true) {
    if (count === 0) return;
    const outcomes = this.outcomes;
    const next = outcomes[0];
    if (next >= 0) {
      const at = performance.now() + next;
      if (at < this.sleepAt) {
        clearTimeout(this.sleepTimer);
        this.sleepAt = at;
        this.sleepTimer = unref(
          setTimeout(() => {
            this.sleepAt = Infinity;
            this.take(this.engine.fire());
            flushSoon();
          }, next),
        );
      }
    }
    if (count > 1) this.binding.calls.settle(outcomes, count, this.engine);
    // A full array: more calls finished than it holds.
    if (count === outcomes.length) this.take(this.engine.turn(), false);
    if (thenFlush) flushSoon();
  }

  flush() {
    if (this.closed) return;
    const connections = this.options.cluster ? this.engine.connections : 1;
    for (let conn = 0; conn < connections; conn++) {
      (this.links[conn] ??= new Link(this, conn)).flush();
      if (this.options.notifyReleases) (this.subscribers[conn] ??= new SubscriberLink(this, conn)).flush();
    }
  }

  /** After a chunk was fed: a cluster's redirects may want the slot map read again. */
  afterFeed() {
    flushSoon();
    if (this.options.cluster && this.engine.takeTopologyStale()) this.refreshSoon();
  }

  /** A socket to `target` with a connect timeout; `on` gets open, data(chunk), error(message), close. */
  dial(target, on) {
    let opened = false;
    let returned = false;
    // Events a socket reports before dial() returns wait until it has.
    const later =
      (fn) =>
      (...args) =>
        returned ? fn(...args) : queueMicrotask(() => fn(...args));
    const timer = unref(
      setTimeout(() => {
        if (opened) return;
        // A rediss:// URL for a server without TLS waits here for a handshake that never comes.
        const hint = target.tls ? " (a rediss:// URL: does the server speak TLS on that port?)" : "";
        on.error(`connecting to ${target.host}:${target.port} timed out after ${this.options.connectTimeoutMs} ms${hint}`);
        socket.destroy();
      }, this.options.connectTimeoutMs),
    );
    const socket = this.sockets.dial(target, this.options, {
      open: later(() => {
        opened = true;
        clearTimeout(timer);
        on.open();
      }),
      data: later(on.data),
      error: later(on.error),
      close: later(() => {
        clearTimeout(timer);
        on.close();
      }),
    });
    returned = true;
    return socket;
  }

  /**
   * One short exchange with a server (a Sentinel, or a node whose role or slots are
   * asked): connects, logs in with the target's credentials, sends `commands` (arrays
   * of strings) and resolves with their decoded replies. An error reply, a refused
   * connection, no answer within `connectTimeoutMs` or close() rejects.
   */
  exchange(target, commands) {
    const { command, decode } = this.binding;
    return new Promise((resolve, reject) => {
      const all = [...authCommands(target), ...commands];
      const skip = all.length - commands.length;
      const replies = [];
      const read = replyReader(decode);
      let settled = false;
      let opened = false;
      // Declared before the dial: a socket port may report an error before dial() returns.
      let socket = null;
      let timer;
      const finish = (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.exchanges.delete(entry);
        socket?.destroy();
        if (err) reject(err);
        else resolve(replies.slice(skip));
      };
      const entry = { end: () => finish(new Error("the store was closed")) };
      if (this.closed) {
        finish(new Error("the store was closed"));
        return;
      }
      // Bounded, and not unref'd: a connect() that starts by asking the Sentinels waits on it.
      timer = setTimeout(() => finish(new Error(`no answer within ${this.options.connectTimeoutMs} ms`)), this.options.connectTimeoutMs);
      socket = this.sockets.dial(target, this.options, {
        open: () =>
          queueMicrotask(() => {
            opened = true;
            if (!settled) socket.write(concat(all.map((args) => command(args))));
          }),
        data: (chunk) => {
          if (settled) return;
          try {
            read(chunk, (value) => {
              if (isErrorReply(value)) finish(new Error(value.error));
              else if (replies.push(value) === all.length) finish(null);
              return settled;
            });
          } catch (err) {
            finish(err);
          }
        },
        error: (message) => finish(new Error(message)),
        close: () => finish(new Error(opened ? "the connection closed" : "the connection was refused")),
      });
      if (settled) socket.destroy();
      else this.exchanges.add(entry);
    });
  }

  /** Sentinel: the master, checked to be one (`locateMaster` in js/redis/topology.mjs). */
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
    const { command, decode } = this.binding;
    const sentinel = sentinels[this.sentinelAt];
    const read = replyReader(decode);
    const socket = this.sockets.dial(sentinel, this.options, {
      open: () =>
        queueMicrotask(() => {
          if (this.watcher === socket) socket.write(concat([...authCommands(sentinel), ["SUBSCRIBE", "+switch-master"]].map((args) => command(args))));
        }),
      data: (chunk) => {
        if (this.watcher !== socket) return;
        try {
          read(chunk, (value) => {
            if (isErrorReply(value)) {
              socket.destroy(); // a refused AUTH
              return true;
            }
            const to = switchedMaster(value, masterName);
            if (to !== null && (to.host !== this.target.host || to.port !== this.target.port)) this.moved(`the master moved to ${to.host}:${to.port}`);
            return false;
          });
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
    this.links[0].drop(why);
    this.subscribers[0].drop();
  }

  /** Connection `conn`'s server: a cluster node, with the seeds' scheme and login, or the server. */
  nodeTarget(conn) {
    const address = this.options.cluster ? this.engine.address(conn) : null;
    return address == null ? this.target : nodeAt(address, this.target);
  }

  /**
   * Cluster: reads `CLUSTER SLOTS` from a node that answers (those connected first,
   * then the seeds) into the engine's slot map.
   */
  async refreshTopology() {
    const known = [];
    for (let conn = 0; conn < this.engine.connections; conn++) known.push(this.nodeTarget(conn));
    const { target, firsts, lasts, addresses } = await readSlotMap((server, commands) => this.exchange(server, commands), [...known, ...this.options.cluster]);
    if (this.closed) return;
    if (!this.clusterEnabled) {
      // The first seed that answered is connection 0.
      this.target = { ...this.target, host: target.host, port: target.port };
      this.engine.enableCluster(`${target.host}:${target.port}`);
      this.clusterEnabled = true;
    }
    this.engine.setSlots(firsts, lasts, addresses);
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

  /** The first connection, with `reconnectRetries` more tries. */
  async start() {
    for (let attempt = 0; ; attempt++) {
      try {
        if (this.options.cluster) await this.refreshTopology();
        await this.links[0].open();
        this.connected = true;
        return;
      } catch (err) {
        const lockError = toLockError(err);
        if (this.closed || lockError.code !== "STORE_UNAVAILABLE" || attempt >= this.options.reconnectRetries) {
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
    clearTimeout(this.sleepTimer);
    // Armed again below for what still sleeps (a held lock's watch ends at its TTL).
    this.sleepAt = Infinity;
    this.engine.close();
    this.take(this.engine.turn(), false);
    // Waiters subscribed to releases wake now and find the store closed, rather than
    // sleeping out their retry delay.
    this.binding.calls.resolveListeners(this);
    for (const link of this.links) link?.close();
    for (const sub of this.subscribers) sub?.close();
    clearTimeout(this.watchTimer);
    const watcher = this.watcher;
    this.watcher = null;
    watcher?.destroy();
    for (const exchange of [...this.exchanges]) exchange.end();
  }
}

/**
 * Connects a store's engine with checked options (`checkConnectOptions`): resolves to
 * its Connection once the first server accepted the handshake.
 */
export async function connectEngine(binding, sockets, options) {
  try {
    binding.checkUrl(options.url, options.tlsInsecure, options.tlsCaCert !== null);
  } catch (err) {
    throw toLockError(err);
  }
  for (const target of [parseRedisUrl(options.url), ...(options.sentinels ?? []), ...(options.cluster ?? [])]) sockets.check?.(target, options);
  let engine;
  try {
    engine = new binding.Engine(options.keyPrefix, options.commandTimeoutMs, options.notifyReleases, options.fencing);
  } catch (err) {
    throw toLockError(err);
  }
  // WAIT answers within half the command timeout, so its answer, not the deadline,
  // says how many replicas acknowledged.
  if (options.minReplicas > 0) engine.setMinReplicas(options.minReplicas, Math.max(1, Math.floor(options.commandTimeoutMs / 2)));
  const connection = new Connection(binding, sockets, engine, options);
  await connection.start();
  return connection;
}
