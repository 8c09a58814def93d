"use strict";
// The Redis store's driver: Node's own socket (net or tls) under the sans-I/O engine in
// the addon (node/src/redis_engine.rs, redis/src/engine/). No thread in between: the
// commands of one event-loop turn leave in one write, and each chunk that arrives is
// handed to the engine once, which settles every reply in it and runs the lock tasks
// they woke, on this thread.

const net = require("node:net");
const tls = require("node:tls");

/** `{ host, port, tls, user, password, db }` from a `redis://` or `rediss://` URL. */
function parseRedisUrl(url, invalid) {
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

/**
 * The driver, over the addon's completion channel: `viaCompletions(start)` makes a
 * call id and its promise; `settle(outcomes, errors)` settles finished calls.
 */
function makeEngineDriver({ addon, completions, viaCompletions, settle, invalid, toLockError }) {
  const live = new Set();
  let flushQueued = false;

  function flushAll() {
    flushQueued = false;
    for (const connection of live) {
      // Tasks started this turn may have gone to sleep (auto-extend, a hold's watch)
      // without sending anything: arm the timer for them before writing.
      connection.take(connection.native.turn(), false);
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

  class EngineConnection {
    constructor(native, options) {
      this.native = native;
      this.options = options;
      this.target = parseRedisUrl(options.url, invalid);
      this.socket = null;
      this.ready = false;
      this.closed = false;
      this.failures = 0;
      this.sleepTimer = null;
      this.sleepAt = Infinity;
      this.reconnectTimer = null;
      this.lastError = "the connection closed";
      const tick = Math.max(10, Math.min(250, Math.floor(options.commandTimeoutMs / 4)));
      this.sub = null; // the subscriber socket (release notifications), opened when wanted
      this.subReady = false;
      this.subRetryAt = 0;
      this.expiry = setInterval(() => {
        if (this.native.expire()) this.socket?.destroy();
        if (this.options.notifyReleases && this.native.subscriberTick()) this.sub?.destroy();
        this.take(this.native.turn());
      }, tick);
      this.expiry.unref();
      live.add(this);
    }

    flush() {
      if (this.ready) {
        const out = this.native.takeOutput();
        if (out !== null) this.socket.write(out);
      } else if (this.socket === null && this.connected && !this.closed) {
        // A call (or a waking waiter) on a store whose connection went while it was
        // idle: connect again; its commands wait behind the handshake.
        this.reconnectSoon();
      }
      if (!this.options.notifyReleases || this.closed) return;
      if (this.sub !== null) {
        if (this.subReady) {
          const out = this.native.subscriberOutput();
          if (out !== null) this.sub.write(out);
        }
      } else if (performance.now() >= this.subRetryAt && this.native.subscriberWanted) {
        this.openSubscriber();
      }
    }

    /** A socket to the server, plain or TLS; `onConnect` runs once it is up. */
    dial(onConnect) {
      const { host, port } = this.target;
      let socket;
      if (this.target.tls) {
        socket = tls.connect(
          {
            host,
            port,
            servername: net.isIP(host) ? undefined : host,
            ca: this.options.tlsCaCert ?? undefined,
            rejectUnauthorized: !this.options.tlsInsecure,
            checkServerIdentity: this.options.tlsInsecure ? () => undefined : tls.checkServerIdentity,
          },
          onConnect,
        );
      } else {
        socket = net.connect({ host, port }, onConnect);
      }
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 10_000);
      socket.unref();
      return socket;
    }

    /** The subscriber connection: SUBSCRIBE confirmations and release messages. */
    openSubscriber() {
      const { user, password } = this.target;
      const sub = this.dial(() => {
        this.subReady = true;
        this.native.subscriberConnected(user, password);
        const out = this.native.subscriberOutput();
        if (out !== null) sub.write(out);
      });
      this.sub = sub;
      this.subReady = false;
      sub.setTimeout(this.options.connectTimeoutMs, () => {
        if (!this.subReady) sub.destroy();
      });
      sub.on("data", (chunk) => {
        let outcomes;
        try {
          outcomes = this.native.subscriberFeed(chunk);
        } catch {
          sub.destroy();
          return;
        }
        sub.setTimeout(0);
        this.take(outcomes);
      });
      sub.on("error", () => {});
      sub.on("close", () => {
        if (this.sub !== sub) return;
        this.sub = null;
        this.subReady = false;
        this.native.subscriberLost();
        // Waiters fall back to their retry delay meanwhile.
        this.subRetryAt = performance.now() + 100;
      });
    }

    /** Settles what a turn of the engine finished and arms the sleep timer. */
    take(outcomes, thenFlush = true) {
      if (outcomes === null) return;
      const next = outcomes[0];
      if (next >= 0) {
        const at = performance.now() + next;
        if (at < this.sleepAt) {
          clearTimeout(this.sleepTimer);
          this.sleepAt = at;
          this.sleepTimer = setTimeout(() => {
            this.sleepAt = Infinity;
            this.take(this.native.fire());
            flushSoon();
          }, next);
          this.sleepTimer.unref();
        }
      }
      if (outcomes.length > 1) settle(outcomes, this.native);
      if (thenFlush) flushSoon();
    }

    /** Opens a socket and queues the handshake; resolves when the server accepted it. */
    open() {
      const { user, password, db } = this.target;
      const handshake = viaCompletions((id) => this.native.handshakeStart(completions, id, user, password, db));
      const socket = this.dial(() => {
        this.ready = true;
        this.flush();
      });
      socket.setTimeout(this.options.connectTimeoutMs, () => {
        if (!this.ready) {
          this.lastError = `connecting timed out after ${this.options.connectTimeoutMs} ms`;
          socket.destroy();
        }
      });
      this.socket = socket;
      socket.on("data", (chunk) => {
        let outcomes;
        try {
          outcomes = this.native.feed(chunk);
        } catch {
          socket.destroy();
          return;
        }
        // Even with nothing settled the engine may have more to send (a NOSCRIPT retry).
        flushSoon();
        this.take(outcomes);
      });
      socket.on("error", (err) => {
        this.lastError = err.message;
      });
      socket.on("close", () => this.onClose(socket));
      return handshake.then(
        () => {
          socket.setTimeout(0);
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
      this.native.connectionLost(this.lastError);
      this.take(this.native.turn());
      this.lastError = "the connection closed";
      // Reconnect now only if some lock still waits; an idle store reconnects on its next
      // call, so a server that stays down keeps neither a retry loop nor the process alive.
      if (!this.closed && this.connected && this.native.pending > 0) this.reconnectSoon();
    }

    reconnectSoon() {
      if (this.reconnectTimer !== null || this.closed) return;
      const delay = this.failures === 0 ? 0 : Math.min(50 * 2 ** this.failures, this.options.reconnectMaxDelayMs);
      this.failures += 1;
      this.reconnectTimer = setTimeout(() => {
        this.reconnectTimer = null;
        if (this.closed) return;
        this.open().catch(() => {});
      }, delay);
      this.reconnectTimer.unref();
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
      clearTimeout(this.sleepTimer);
      // Armed again below for what still sleeps (a held lock's watch ends at its TTL).
      this.sleepAt = Infinity;
      clearTimeout(this.reconnectTimer);
      this.native.close();
      this.take(this.native.turn());
      this.ready = false;
      this.socket?.destroy();
      this.sub?.destroy();
    }
  }

  /** The native side of a RedisLockStore on the engine, as api.mjs uses a backend. */
  class EngineBackend {
    constructor(native, connection) {
      this.native = native;
      this.connection = connection;
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

    restore(serialized) {
      return this.native.restore(serialized);
    }

    #call(start, number = false) {
      const promise = viaCompletions(start, number);
      flushSoon();
      return promise;
    }

    acquire(key, owner, ttlMs) {
      return this.#call((id) => this.native.acquireStart(completions, id, key, owner, ttlMs));
    }

    release(key, owner) {
      return this.#call((id) => this.native.releaseStart(completions, id, key, owner));
    }

    extend(key, owner, ttlMs) {
      return this.#call((id) => this.native.extendStart(completions, id, key, owner, ttlMs));
    }

    isLocked(key) {
      return this.#call((id) => this.native.isLockedStart(completions, id, key));
    }

    remainingTime(key) {
      return this.#call((id) => this.native.remainingTimeStart(completions, id, key), true);
    }

    close() {
      this.connection.close();
    }
  }

  /** Connects with checked options (see `checkRedisOptions` in the addon). */
  async function connect(options) {
    const native = new addon.NativeEngineStore(options.keyPrefix, options.commandTimeoutMs, options.notifyReleases);
    const connection = new EngineConnection(native, options);
    await connection.start();
    return new EngineBackend(native, connection);
  }

  return { connect, flushSoon };
}

module.exports = { makeEngineDriver, parseRedisUrl };
