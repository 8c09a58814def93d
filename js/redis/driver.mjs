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
import {
  LockStoreError,
  StoreClosedError,
  StoreUnavailableError,
  checkOptionKeys,
  checkString,
  connectArguments,
  invalid,
  toLockError,
  typeName,
} from "../api/errors.mjs";
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
import { holder as HOLDER, proclaim as PROCLAIM } from "../gen/redis-scripts.mjs";
import { holderKeys, holderOf, proclaimArgs } from "./holder.mjs";

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

/** `RedisLockStore.connect()`'s arguments (a URL and options, or the options alone) checked, with the defaults filled in. */
export function checkConnectOptions(args) {
  const urlOrOptions = connectArguments(args, "url", "RedisLockStore.connect()");
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

/**
 * The bound on one call of a store with these options as a whole (connecting, then the
 * command): the JS-store bridge's `operationTimeoutMs` of the WebAssembly build's store,
 * and the bound on the driver's own scripts (`Connection.script`) in both builds.
 */
export const operationTimeoutMs = (options) => options.connectTimeoutMs + options.commandTimeoutMs + 1_000;

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

// What an engine turn answers beside the count of numbers it reported (`4 * count +
// wants`): what the driver has to do now. Bits: some connection has bytes to write; some
// subscriber wants a socket or has bytes to write (EngineStore::host_wants). A turn that
// wants nothing (most replies at concurrency 1) costs no crossing after it.
const WANTS_WRITE = 1;
const WANTS_SUBSCRIBER = 2;
const WANTS_ALL = WANTS_WRITE | WANTS_SUBSCRIBER;

function flushAll() {
  flushQueued = false;
  // Calls started since the last flush may have gone to sleep (a lock's retry, a hold's
  // watch) without sending anything: a turn arms the timer for them. With none started,
  // every engine is already up to date.
  const turn = started > 0;
  started = 0;
  for (const connection of live) {
    if (turn) {
      // The calls' commands go out first and the turn comes after, while the server
      // works: at concurrency 1 it is off the round trip.
      connection.flush(WANTS_WRITE);
      connection.take(connection.engine.turn(), false);
    }
    connection.flushWanted();
  }
}

/**
 * A call queued commands: written with the turn's others, or now if EARLY_WRITE are
 * waiting. `alone`: no other call that keeps the process alive is in flight (a hold's
 * background watch does not count), so none will join it this turn (one loop taking a
 * lock after another): written now, ahead of what the caller's code does next.
 */
export function callStarted(alone = false) {
  if (++started >= EARLY_WRITE || alone) flushAll();
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

  /**
   * Dials this socket and queues its handshake, which the engine puts in front of
   * everything else. The socket is the link's before the handshake is queued, so a flush
   * run inside that call (the driver's own calls wait for the turn's end today) would find
   * it, not yet open, rather than no socket, and would not dial a second one beside it.
   */
  attach(generation) {
    const c = this.connection;
    const target = (this.target = this.conn === 0 ? c.target : c.nodeTarget(this.conn));
    const { user, password } = target;
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
        // A woken waiter's attempt is queued even when no call finished: the turn says
        // what to write.
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
// The side link: the store's own commands outside the engine, which has no op for them
// (holder() and proclaim(), which elections read every few ms and write). One more
// socket per server, opened at the first such call, kept for the next ones (an
// observer's reads come every ~50 ms) and closed by close(). Requests go out in order
// and their replies are matched in order; a request whose call gave up (it timed out)
// keeps its place, and its reply is skipped when it comes, so no later reply is taken
// for another's. A server that has not answered it a command timeout later is taken for
// gone: the socket goes, failing what waits on it.
//
// A side link that ends before it was answered (refused, timed out, closed at once)
// counts as a failure of its server: the next dial there waits as the engine's
// reconnects do (`backoffMs`), and calls meanwhile fail at once. A side link that ends
// makes a Cluster read its slot map again (the slot's master may have failed over: an
// observer's engine, idle, would never notice), and one that could not reach the master
// the Sentinels named makes the next call ask them again.

/** The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag, mod 16384. */
export function keySlot(key) {
  let bytes = new TextEncoder().encode(key);
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc & 16383;
}

const unavailable = (why) => new StoreUnavailableError(`locksmith: store unavailable: redis: ${why}`);

/** The key of `Connection.sideFailures` for the Sentinels' lookup of the side link's master. */
const SENTINEL_LOOKUP = "sentinel lookup";

/** A server's error reply as the store's error: a passing state (TRANSIENT_CODES in redis/src/lib.rs) is unavailable. */
function serverError(message) {
  const code = message.split(" ")[0];
  if (["READONLY", "LOADING", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN"].includes(code)) return unavailable(message);
  return new LockStoreError(`locksmith: store error: redis: ${message}`);
}

class SideLink {
  constructor(connection, target) {
    this.connection = connection;
    this.target = target;
    this.where = `${target.host}:${target.port}`;
    this.closed = false;
    this.opened = false;
    // Whether the server answered on this socket (a refused login does not count).
    this.answered = false;
    this.lastError = "the connection closed";
    // Requests sent or to send, oldest first: { count, replies, resolve, reject, abandoned }.
    this.pending = [];
    this.unsent = [];
    // How many of `pending` were given up on, and the timer that drops the socket if the
    // server does not answer them.
    this.abandoned = 0;
    this.stallTimer = null;
    this.read = replyReader(connection.binding.decode);
    // The handshake goes first: the login, and the database (not on a Cluster).
    const login = [...authCommands(target), ...(target.db ? [["SELECT", String(target.db)]] : [])];
    if (login.length > 0) {
      this.send(login).then(
        (replies) => {
          const refused = replies.find(isErrorReply);
          if (refused === undefined) return;
          this.lastError = `refused the handshake (AUTH, SELECT): ${refused.error}`;
          this.drop(new LockStoreError(`locksmith: store error: redis refused the handshake (AUTH, SELECT): ${refused.error}`));
        },
        () => {},
      );
    }
    this.socket = connection.dial(target, {
      open: () => {
        if (this.closed) return;
        this.opened = true;
        const unsent = this.unsent;
        this.unsent = [];
        if (unsent.length > 0) this.socket.write(concat(unsent));
      },
      data: (chunk) => this.onData(chunk),
      error: (message) => {
        this.lastError = message;
      },
      close: () => this.drop(unavailable(`${this.where}: ${this.lastError}`)),
    });
  }

  /**
   * Sends `commands` (arrays of strings) at once; resolves with their replies (error
   * replies as `{ error }`). `call`, when given, gets the request as `call.request` (for
   * `abandon`).
   */
  send(commands, call = undefined) {
    if (this.closed) return Promise.reject(unavailable(`${this.where}: ${this.lastError}`));
    const bytes = concat(commands.map((args) => this.connection.binding.command(args)));
    return new Promise((resolve, reject) => {
      const request = { count: commands.length, replies: [], resolve, reject, abandoned: false };
      if (call !== undefined) call.request = request;
      this.pending.push(request);
      if (this.opened) this.socket.write(bytes);
      else this.unsent.push(bytes);
    });
  }

  onData(chunk) {
    if (this.closed) return;
    try {
      this.read(chunk, (value) => {
        const request = this.pending[0];
        if (request === undefined) {
          this.drop(unavailable(`${this.where}: a reply that no request waits for`));
          return true;
        }
        if (request.replies.push(value) === request.count) {
          this.pending.shift();
          const refused = request.replies.find(isErrorReply);
          // A server that turns clients away says so in its first reply, then closes: no
          // answer, and the link's failure counts toward the backoff.
          if (refused !== undefined && /max number of clients/i.test(refused.error)) {
            const err = unavailable(`${this.where}: ${refused.error}`);
            if (!request.abandoned) request.reject(err);
            this.drop(err);
            return true;
          }
          // Answered once a request comes back whole and not refused: a refused login (AUTH,
          // SELECT) is no answer, so a server that refuses it is dialed again only after a
          // backoff that doubles.
          if (!this.answered && refused === undefined) {
            this.answered = true;
            this.connection.sideFailures.delete(this.where);
          }
          if (!request.abandoned) request.resolve(request.replies);
          else if (--this.abandoned === 0) this.stalled(false);
          // The server answers: the requests given up on behind this one get their time again.
          else this.stalled(true);
        }
        return false;
      });
    } catch (err) {
      this.drop(unavailable(`${this.where}: a reply that is not the Redis protocol: ${err?.message ?? err}`));
    }
  }

  /**
   * `request`'s call gave up on it (it timed out with `error`): it fails alone. Its reply
   * still comes in its turn (a server answers in order) and is skipped then, so the
   * calls behind it get their own; a server that does not answer it within a command
   * timeout more is taken for gone, and the socket goes.
   */
  abandon(request, error) {
    if (this.closed || request.abandoned || !this.pending.includes(request)) return;
    request.abandoned = true;
    request.reject(error);
    this.abandoned += 1;
    if (this.stallTimer === null) this.stalled(true);
  }

  /** Arms (again) or clears the timer that drops a socket whose abandoned requests stay unanswered. */
  stalled(waiting) {
    clearTimeout(this.stallTimer);
    this.stallTimer = null;
    if (!waiting) return;
    const ms = this.connection.options.commandTimeoutMs;
    this.stallTimer = unref(
      setTimeout(() => {
        this.stallTimer = null;
        this.drop(unavailable(`${this.where}: no reply within ${ms} ms to a call that had timed out: the connection was dropped`));
      }, ms),
    );
  }

  /**
   * Closes the socket; what waits on it fails with `error`. `failed`: the link ended by
   * itself or by a fault (not by close() or a master that moved), so the connection
   * learns it (`Connection.sideLinkEnded`).
   */
  drop(error, failed = true) {
    if (this.closed) return;
    this.closed = true;
    this.stalled(false);
    const c = this.connection;
    if (c.sideLinks.get(this.where) === this) c.sideLinks.delete(this.where);
    this.socket?.destroy();
    const pending = this.pending;
    this.pending = [];
    for (const request of pending) if (!request.abandoned) request.reject(error);
    if (failed) c.sideLinkEnded(this);
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
    // The side links by server address (`host:port`), for the store's own scripts; on
    // Sentinel, the master they use while the engine's socket is down (a lookup's promise).
    this.sideLinks = new Map();
    this.sideMaster = null;
    // The servers (`host:port`) a side link failed to reach, and the Sentinels' lookup for
    // one (`SENTINEL_LOOKUP`): `{ failures, retryAt, why }`, gone at the next success.
    this.sideFailures = new Map();
    // Cluster: the masters' slot ranges as last read, for the side links.
    this.slotMap = null;
    this.clusterEnabled = false;
    this.refreshing = null;
    this.refreshAgain = false;
    this.sleepTimer = null;
    this.sleepAt = Infinity;
    // What the engine's turns asked of the driver since the last flush (WANTS_*).
    this.wants = WANTS_ALL;
    const tick = Math.max(10, Math.min(250, Math.floor(options.commandTimeoutMs / 4)));
    this.expiry = unref(setInterval(() => this.tick(), tick));
    // Run once each call is on record (one function for every call, not one per call).
    this.afterStart = () => {
      // A closed store's calls finish at once (STORE_CLOSED); nothing flushes it any more.
      if (this.closed) this.take(this.engine.turn(), false);
      // The driver's own calls (handshakes; the WebAssembly build's lock calls) are
      // written with the turn's others, never at once (`alone`).
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
    if (this.options.cluster) this.flushAllSoon();
    this.take(engine.turn());
  }

  /**
   * Settles what a turn of the engine finished (its `result`, `4 * count + wants`:
   * `count` numbers of `this.outcomes`, 0 for none), arms the sleep timer for the
   * engine's own sleeps, and keeps what the turn wants done (WANTS_*) for the next flush.
   */
  take(result, thenFlush = true) {
    if (result === 0) return;
    this.wants |= result & WANTS_ALL;
    const count = result >>> 2;
    if (count > 0) {
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
            }, next),
          );
        }
      }
      if (count > 1) this.binding.calls.settle(outcomes, count, this.engine);
      // A full array: more calls finished than it holds.
      if (count === outcomes.length) this.take(this.engine.turn(), false);
    }
    if (thenFlush && this.wants !== 0) flushSoon();
  }

  /**
   * Writes what the engine has for each connection (`WANTS_WRITE`), and sees to the
   * subscribers (`WANTS_SUBSCRIBER`): by default both.
   */
  flush(wants = WANTS_ALL) {
    if (this.closed) return;
    // Done here: a link not open yet writes when it opens, a subscriber before its retry
    // time is seen to again by the turns that still want it.
    this.wants &= ~wants;
    const connections = this.options.cluster ? this.engine.connections : 1;
    for (let conn = 0; conn < connections; conn++) {
      if (wants & WANTS_WRITE) (this.links[conn] ??= new Link(this, conn)).flush();
      if (wants & WANTS_SUBSCRIBER && this.options.notifyReleases) (this.subscribers[conn] ??= new SubscriberLink(this, conn)).flush();
    }
  }

  /** `flush()` for what the engine's last turns wanted. */
  flushWanted() {
    if (this.wants !== 0) this.flush(this.wants);
  }

  /** Everything is looked at on the next flush, whatever the turns said (the slot map changed). */
  flushAllSoon() {
    this.wants = WANTS_ALL;
    flushSoon();
  }

  /** After a chunk was fed: a cluster's redirects may want the slot map read again. */
  afterFeed() {
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
            if (to !== null) this.masterSwitched(to);
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

  /**
   * Sentinel: `+switch-master` named `to`. The engine's sockets follow when it is not
   * their server; the side link follows when it is not its own, which can differ: with
   * the engine idle, its server is the one it last connected to, while the side link
   * went to the master the Sentinels named since (M1, then M2, then M1 again).
   */
  masterSwitched(to) {
    const where = `${to.host}:${to.port}`;
    if (to.host !== this.target.host || to.port !== this.target.port) this.moved(`the master moved to ${where}`);
    else if (this.sideMaster !== null || [...this.sideLinks.keys()].some((at) => at !== where)) this.sideMoved(`the master moved to ${where}`, where);
  }

  /** The server is no longer the master: drop every socket; reconnecting asks the Sentinels again. */
  moved(why) {
    this.links[0].drop(why);
    this.subscribers[0].drop();
    this.sideMoved(why);
  }

  /** Sentinel: the side links go (but the one at `keep`); the next call asks the Sentinels where the master is. */
  sideMoved(why, keep = null) {
    this.sideMaster = null;
    for (const link of [...this.sideLinks.values()]) if (link.where !== keep) link.drop(unavailable(why), false);
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
    this.slotMap = { firsts, lasts, addresses };
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
        this.flushAllSoon();
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
    for (const link of [...this.sideLinks.values()]) link.drop(new StoreClosedError("locksmith: store is closed"), false);
  }

  // The store's own scripts, over the side links.

  /** The Redis key of the lock `key` (`<prefix>{<key>}`), refused on a Cluster when its hash tag is empty (as the engine refuses it). */
  lockKey(key) {
    checkString("key", key);
    const lockKey = `${this.engine.keyPrefix}{${key}}`;
    const open = lockKey.indexOf("{");
    if (this.options.cluster && lockKey[open + 1] === "}") {
      throw invalid(
        `on a Redis Cluster, key ${JSON.stringify(key)} cannot be locked: its Redis key ${lockKey} has an empty hash tag ("{}"), so the lock's keys would fall in different hash slots; use a key that does not start with "}" and a keyPrefix without "{}" (on a single server it works as it is)`,
      );
    }
    return lockKey;
  }

  /**
   * The server for a script on `lockKey`: the master of its slot (Cluster), the master
   * the engine's socket is on, or while that is down the one the Sentinels name now; the
   * server.
   */
  async sideTarget(lockKey) {
    if (this.options.cluster) {
      const map = this.slotMap;
      const slot = keySlot(lockKey);
      const at = map === null ? -1 : map.firsts.findIndex((first, i) => first <= slot && slot <= map.lasts[i]);
      // A slot no master serves in the map: a node that knows will say MOVED.
      return at < 0 ? this.target : nodeAt(map.addresses[at], this.target);
    }
    if (!this.options.sentinels) return this.target;
    if (this.links[0].ready) {
      // A master looked up earlier may be stale by the time the engine's socket is down again.
      this.sideMaster = null;
      return this.target;
    }
    if (this.sideMaster === null) this.backingOff(SENTINEL_LOOKUP, "the sentinels' lookup of the master");
    const lookup = (this.sideMaster ??= this.locate());
    try {
      const target = await lookup;
      this.sideFailures.delete(SENTINEL_LOOKUP);
      return target;
    } catch (err) {
      const why = err?.message ?? String(err);
      if (this.sideMaster === lookup) {
        this.sideMaster = null;
        this.sideFailed(SENTINEL_LOOKUP, why);
      }
      throw unavailable(why);
    }
  }

  /** Throws STORE_UNAVAILABLE while `what` (a key of `sideFailures`) waits out its failures' backoff. */
  backingOff(what, name = what) {
    const failure = this.sideFailures.get(what);
    const wait = failure === undefined ? 0 : Math.ceil(failure.retryAt - performance.now());
    if (wait > 0) throw unavailable(`${name}: ${failure.why} (tried again in ${wait} ms)`);
  }

  /** One more failure of `what` (a server's `host:port`, or SENTINEL_LOOKUP): the next try waits `backoffMs`. */
  sideFailed(what, why) {
    const failures = (this.sideFailures.get(what)?.failures ?? 0) + 1;
    this.sideFailures.set(what, { failures, retryAt: performance.now() + backoffMs(failures - 1, this.options.reconnectMaxDelayMs), why });
  }

  /**
   * A side link ended by itself or by a fault. Never answered: a failure of its server
   * (backoff), and on Sentinel the master it was told of is not trusted any more. On a
   * Cluster the slot map is read again: the slot's master may have failed over.
   */
  sideLinkEnded(link) {
    if (this.closed) return;
    if (!link.answered) {
      this.sideFailed(link.where, link.lastError);
      if (this.options.sentinels) this.sideMaster = null;
    }
    if (this.options.cluster) this.refreshSoon();
  }

  /**
   * The side link to `target`, opened now if there is none (unless its server failed
   * lately: then STORE_UNAVAILABLE at once); on one server, the only one.
   */
  sideLink(target) {
    const where = `${target.host}:${target.port}`;
    let link = this.sideLinks.get(where);
    if (link !== undefined) return link;
    this.backingOff(where);
    if (!this.options.cluster) for (const other of [...this.sideLinks.values()]) other.drop(unavailable("the master moved"), false);
    link = new SideLink(this, target);
    this.sideLinks.set(where, link);
    return link;
  }

  /**
   * Runs the Lua `script` (js/gen/redis-scripts.mjs) with `keys` (the first a lock key,
   * the others in its slot) and `args` over a side link: EVALSHA, EVAL where the server
   * lacks the script, and for a `write` with minReplicas, WAIT as the engine's writes do.
   * A Cluster's MOVED and ASK are followed; a READONLY on Sentinel sends every socket
   * to the master the Sentinels name. Resolves with the script's reply; rejects within
   * operationTimeoutMs with the store's errors (StoreUnavailableError when the server did
   * not answer or is in a passing state, LockStoreError for its other errors,
   * StoreClosedError once closed).
   */
  async script(script, keys, args, write = false) {
    if (this.closed) throw new StoreClosedError("locksmith: store is closed");
    const timeoutMs = operationTimeoutMs(this.options);
    // The link the call is on now, and whether it is over (then it sends nothing more).
    const call = { link: null, request: null, late: false };
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => {
        call.late = true;
        const error = new StoreUnavailableError(`locksmith: store unavailable: redis did not answer within ${timeoutMs} ms`);
        // This call alone fails: its reply, if it comes, is skipped (SideLink.abandon), and
        // the calls behind it on the link get theirs.
        if (call.request !== null) call.link?.abandon(call.request, error);
        reject(error);
      }, timeoutMs);
    });
    try {
      return await Promise.race([late, this.#runScript(script, keys, args, write, call)]);
    } catch (err) {
      // Whatever close() cut short (a Sentinel lookup, a socket) says so.
      if (this.closed && !(err instanceof StoreClosedError)) throw new StoreClosedError("locksmith: store is closed");
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async #runScript(script, keys, args, write, call) {
    const { minReplicas, commandTimeoutMs, cluster, sentinels } = this.options;
    const waitMs = Math.max(1, Math.floor(commandTimeoutMs / 2));
    const wait = write && minReplicas > 0 ? [["WAIT", String(minReplicas), String(waitMs)]] : [];
    let target = await this.sideTarget(keys[0]);
    let asking = false;
    let source = false;
    for (let redirects = 0; ; ) {
      if (this.closed) throw new StoreClosedError("locksmith: store is closed");
      if (call.late) throw unavailable("the call ran out of time");
      const run = source ? ["EVAL", script.source] : ["EVALSHA", script.sha];
      const link = (call.link = this.sideLink(target));
      const replies = await link.send([...(asking ? [["ASKING"]] : []), [...run, String(keys.length), ...keys, ...args], ...wait], call);
      const reply = replies[asking ? 1 : 0];
      if (!isErrorReply(reply)) {
        if (wait.length > 0) {
          const acked = replies[replies.length - 1];
          if (isErrorReply(acked)) throw unavailable(`the write ran, but WAIT for ${minReplicas} replicas failed: ${acked.error}`);
          if (acked < minReplicas) {
            throw unavailable(`${acked} of the ${minReplicas} replicas asked for (minReplicas) acknowledged the write within ${waitMs} ms`);
          }
        }
        return reply;
      }
      const message = reply.error;
      if (message.startsWith("NOSCRIPT") && !source) {
        source = true;
        continue;
      }
      const redirect = cluster ? /^(MOVED|ASK) \d+ (\S+)/.exec(message) : null;
      if (redirect !== null) {
        if (redirect[1] === "MOVED") this.refreshSoon();
        // Still sent on after 5: the slots are moving (a reshard, a failover). A campaign
        // tries again; by then the slot map may say where the key is.
        if (redirects >= 5) throw unavailable(`${message} (still redirected after ${redirects} redirects: the cluster's slots are moving)`);
        redirects += 1;
        asking = redirect[1] === "ASK";
        target = nodeAt(redirect[2], this.target);
        continue;
      }
      // A cluster in a passing state (a failover under way): the slot map may have changed.
      if (cluster && /^(CLUSTERDOWN|TRYAGAIN)\b/.test(message)) this.refreshSoon();
      // The master was demoted: every socket goes to the one the Sentinels name now.
      if (message.startsWith("READONLY") && sentinels) this.moved("the server became a replica (READONLY)");
      throw serverError(message);
    }
  }

  /** The store contract's `holder(key)`: the live holder of the plain lock `key`, or null (holder.lua). */
  async holder(key) {
    const lockKey = this.lockKey(key);
    return holderOf(await this.script(HOLDER, holderKeys(lockKey), []), this.options.fencing, lockKey);
  }

  /** The store contract's `proclaim(key, owner, value, seq)`: `true` when `owner` holds `key` (proclaim.lua). */
  async proclaim(key, owner, value, seq) {
    const lockKey = this.lockKey(key);
    const args = proclaimArgs(owner, value, seq, this.options.fencing);
    return Number(await this.script(PROCLAIM, holderKeys(lockKey), args, true)) === 1;
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
