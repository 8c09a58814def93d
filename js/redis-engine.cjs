"use strict";
// The Redis engine's driver: Node's own socket (net or tls) under the sans-I/O engine in
// the addon (node/src/redis_engine.rs, redis/src/engine/). No thread in between:
// the commands of one event-loop turn leave in one write, and each chunk that arrives is
// handed to the engine once and settles every reply in it, on this thread.

const net = require("node:net");
const tls = require("node:tls");

const FLUSH = process.env.LOCKSMITH_ENGINE_FLUSH ?? "microtask";
const schedule = FLUSH === "microtask" ? queueMicrotask : FLUSH === "tick" ? process.nextTick : setImmediate;

const KIND_FLAG = 0;
const KIND_TOKEN = 1;
const KIND_MILLIS = 2;

/** `{ host, port, tls, user, password, db }` from a `redis://` or `rediss://` URL. */
function parseRedisUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`INVALID_ARGUMENT locksmith: invalid Redis URL`);
  }
  const secure = parsed.protocol === "rediss:";
  if (!secure && parsed.protocol !== "redis:") {
    throw new Error(`INVALID_ARGUMENT locksmith: a Redis URL starts with redis:// or rediss://; got ${parsed.protocol}//`);
  }
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0) throw new Error("INVALID_ARGUMENT locksmith: the Redis URL's database must be a number");
  const host = parsed.hostname.startsWith("[") ? parsed.hostname.slice(1, -1) : parsed.hostname;
  return {
    host: host || "127.0.0.1",
    port: parsed.port ? Number(parsed.port) : 6379,
    tls: secure,
    user: parsed.username ? decodeURIComponent(parsed.username) : null,
    password: parsed.password ? decodeURIComponent(parsed.password) : null,
    db,
  };
}

/** One connection: a socket, the engine, the promises of pending requests. */
class EngineConnection {
  constructor(addon, options) {
    this.engine = new addon.RedisEngine(options.keyPrefix ?? "locksmith:", options.commandTimeoutMs ?? 2000);
    this.options = options;
    this.target = parseRedisUrl(options.url);
    this.calls = new Map(); // id -> [resolve, reject, kind]
    this.socket = null;
    this.ready = false;
    this.flushQueued = false;
    this.closed = false;
    this.timer = null;
    this.flush = () => {
      this.flushQueued = false;
      if (!this.ready || this.socket === null) return;
      const out = this.engine.takeOutput();
      if (out !== null) this.socket.write(out);
    };
  }

  /** Opens the socket and runs the handshake. */
  connect() {
    return new Promise((resolve, reject) => {
      const { host, port, user, password, db } = this.target;
      const onConnect = () => {
        this.ready = true;
        const out = this.engine.takeOutput();
        if (out !== null) socket.write(out);
      };
      const socket = this.target.tls
        ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ca: this.options.tlsCaCert, rejectUnauthorized: !this.options.tlsInsecure }, onConnect)
        : net.connect({ host, port }, onConnect);
      socket.setNoDelay(true);
      this.socket = socket;
      socket.on("data", (chunk) => this.onData(chunk));
      socket.on("error", () => {});
      socket.on("close", () => this.onClose("the connection closed"));
      this.request(this.engine.handshake(user, password, db), KIND_FLAG).then(resolve, reject);
    });
  }

  onData(chunk) {
    let outcomes;
    try {
      outcomes = this.engine.feed(chunk);
    } catch (err) {
      this.socket.destroy();
      return;
    }
    if (outcomes !== null) this.settle(outcomes);
  }

  onClose(why) {
    this.ready = false;
    this.socket = null;
    const outcomes = this.engine.connectionLost(why);
    if (outcomes !== null) this.settle(outcomes);
  }

  settle(outcomes) {
    let errors;
    for (let i = 0; i < outcomes.length; i += 2) {
      const id = outcomes[i];
      const value = outcomes[i + 1];
      const call = this.calls.get(id);
      if (call === undefined) continue;
      this.calls.delete(id);
      if (value <= -2) {
        errors ??= this.engine.errors();
        call[1](new Error(errors[-2 - value]));
      } else if (call[2] === KIND_TOKEN) {
        call[0](value > 0);
      } else if (call[2] === KIND_MILLIS) {
        call[0](value < 0 ? null : value);
      } else {
        call[0](value === 1);
      }
    }
    if (this.calls.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** The promise of request `id`. */
  request(id, kind) {
    if (!this.flushQueued) {
      this.flushQueued = true;
      schedule(this.flush);
    }
    this.timer ??= setInterval(() => {
      const outcomes = this.engine.expire();
      if (outcomes !== null) {
        this.socket?.destroy();
        this.settle(outcomes);
      }
    }, Math.max(10, Math.min(250, (this.options.commandTimeoutMs ?? 2000) / 4)));
    return new Promise((resolve, reject) => this.calls.set(id, [resolve, reject, kind]));
  }

  acquire(key, owner, ttlMs) {
    return this.request(this.engine.acquire(key, owner, ttlMs), KIND_TOKEN);
  }

  release(key, owner) {
    return this.request(this.engine.release(key, owner), KIND_FLAG);
  }

  extend(key, owner, ttlMs) {
    return this.request(this.engine.extend(key, owner, ttlMs), KIND_FLAG);
  }

  isLocked(key) {
    return this.request(this.engine.isLocked(key), KIND_FLAG);
  }

  remainingTime(key) {
    return this.request(this.engine.remainingTime(key), KIND_MILLIS);
  }

  close() {
    this.closed = true;
    this.socket?.destroy();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

module.exports = { EngineConnection, parseRedisUrl };
