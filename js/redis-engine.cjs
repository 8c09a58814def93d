"use strict";
// The Redis store's driver: Node's own socket (net or tls) under the sans-I/O engine in
// the addon (node/src/redis_engine.rs, redis/src/engine/). No thread in between: the
// commands of one event-loop turn leave in one write, and each chunk that arrives is
// handed to the engine once, which settles every reply in it and runs the lock tasks
// they woke, on this thread.

const net = require("node:net");
const tls = require("node:tls");

const { authCommands, backoffMs, locateMaster, nodeAt, parseRedisUrl, readSlotMap, switchedMaster } = require("./gen/redis-topology.cjs");

/** A socket to `target` (plain or TLS, per its scheme); `onConnect` runs once it is up. */
function dialTarget(target, options, onConnect) {
  const { host, port } = target;
  let socket;
  if (target.tls) {
    socket = tls.connect(
      {
        host,
        port,
        servername: net.isIP(host) ? undefined : host,
        ca: options.tlsCaCert ?? undefined,
        rejectUnauthorized: !options.tlsInsecure,
        checkServerIdentity: options.tlsInsecure ? () => undefined : tls.checkServerIdentity,
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

/**
 * One short exchange with a server (a Sentinel, or a node whose role or slots are
 * asked): connects, logs in with the target's credentials, sends `commands` (arrays of
 * strings) and resolves with their replies, decoded by the addon. An error reply, a
 * refused connection or no answer within `options.connectTimeoutMs` rejects.
 */
function exchange(addon, target, options, commands) {
  return new Promise((resolve, reject) => {
    const all = authCommands(target);
    const skip = all.length;
    all.push(...commands);
    const replies = [];
    let input = Buffer.alloc(0);
    let settled = false;
    const finish = (err) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err) reject(err);
      else resolve(replies.slice(skip));
    };
    const socket = dialTarget(target, options, () => {
      socket.write(Buffer.concat(all.map((args) => addon.redisCommand(args))));
    });
    // Short-lived and bounded by its timeout: it may keep Node running meanwhile (a
    // connect() that starts by reading the cluster's slots waits on it alone).
    socket.ref();
    socket.setTimeout(options.connectTimeoutMs, () => finish(new Error(`no answer within ${options.connectTimeoutMs} ms`)));
    socket.on("data", (chunk) => {
      input = input.length === 0 ? chunk : Buffer.concat([input, chunk]);
      try {
        for (let next = addon.redisDecode(input); next !== null; next = addon.redisDecode(input)) {
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
    });
    socket.on("error", (err) => finish(err));
    socket.on("close", () => finish(new Error("the connection closed")));
  });
}

/** Stands for the data socket while the Sentinels are asked where the master is. */
const LOCATING = Object.freeze({ destroy() {}, write() {} });

/**
 * The driver, over the addon's completion channel: `viaCompletions(start)` makes a
 * call id and its promise; `settle(outcomes, count, native)` settles finished calls.
 */
function makeEngineDriver({ addon, completions, viaCompletions, settle, invalid, toLockError }) {
  const live = new Set();
  let flushQueued = false;
  // Calls started since the last write. A turn that starts many (64 loops woken by one
  // chunk of replies) writes every EARLY_WRITE of them at once rather than all at the
  // turn's end, so the server works on the first ones while the rest are made: one
  // write per turn left the server and this thread taking turns (measured at c=64 with
  // bench/c64-probe.mjs: about 1.4× the pairs/s; 8 to 16 measured alike).
  const EARLY_WRITE = 16;
  let started = 0;

  function flushAll() {
    flushQueued = false;
    started = 0;
    for (const connection of live) {
      // Tasks started this turn may have gone to sleep (auto-extend, a hold's watch)
      // without sending anything: arm the timer for them before writing.
      connection.take(connection.native.turn(), false);
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

  // How many finished calls one engine turn reports at most (more wait for the next),
  // and the size of the buffer a turn's output is copied into (larger output comes as
  // a buffer of its own).
  const OUTCOMES = 1 + 2 * 1024;
  const OUTPUT_BYTES = 64 * 1024;

  class EngineConnection {
    constructor(native, options) {
      this.native = native;
      // Filled by the addon on each turn (see node/src/redis_engine.rs), through its bytes.
      const bytes = Buffer.allocUnsafeSlow(8 * OUTCOMES);
      this.outcomes = new Float64Array(bytes.buffer, bytes.byteOffset, OUTCOMES);
      native.useOutcomes(bytes);
      this.output = Buffer.allocUnsafeSlow(OUTPUT_BYTES);
      this.options = options;
      this.target = parseRedisUrl(options.url, invalid);
      // Sentinel: `target` holds the master's credentials; its address comes from the
      // Sentinels on every (re)connect, and a watcher follows `+switch-master`.
      this.sentinelAt = 0;
      this.watcher = null;
      this.watchTimer = null;
      this.socket = null;
      this.ready = false;
      this.closed = false;
      this.failures = 0;
      this.sleepTimer = null;
      this.sleepAt = Infinity;
      this.reconnectTimer = null;
      this.lastError = "the connection closed";
      const tick = Math.max(10, Math.min(250, Math.floor(options.commandTimeoutMs / 4)));
      // Cluster: connection 0 (the seed's node) is `socket` as above; the other nodes'
      // connections are `nodes[conn]`, made when the engine first routes to them.
      this.nodes = [];
      this.clusterEnabled = false;
      this.refreshing = null;
      this.refreshAgain = false;
      this.sub = null; // the subscriber socket (release notifications), opened when wanted
      this.subReady = false;
      this.subRetryAt = 0;
      this.expiry = setInterval(() => {
        if (this.options.cluster) {
          for (const conn of this.native.expireAll()) (conn === 0 ? this.socket : this.nodes[conn]?.socket)?.destroy();
          if (this.options.notifyReleases) {
            for (const node of this.nodes) if (node && this.native.subscriberTickOn(node.conn)) node.sub?.destroy();
          }
          // Requests a cluster asked to retry (TRYAGAIN, CLUSTERDOWN) were queued again.
          flushSoon();
        } else if (this.native.expire()) this.socket?.destroy();
        if (this.options.notifyReleases && this.native.subscriberTick()) this.sub?.destroy();
        this.take(this.native.turn());
      }, tick);
      this.expiry.unref();
      live.add(this);
    }

    flush() {
      if (this.ready) this.writeOutput(); else if (this.socket === null && this.connected && !this.closed && (!this.options.cluster || this.native.busyOn(0))) {
        // A call (or a waking waiter) on a store whose connection went while it was
        // idle: connect again; its commands wait behind the handshake.
        this.reconnectSoon();
      }
      if (this.options.cluster && !this.closed) this.flushNodes();
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

    /** Writes the data connection's pending bytes, through the reused output buffer. */
    writeOutput() {
      // The reused buffer only where a write usually completes at once: plain TCP with
      // nothing queued. A TLS socket, or one with writes queued, keeps what it is given
      // for a while: it gets a buffer of its own, of the exact size.
      if (this.target.tls || this.socket.writableLength > 0) {
        const out = this.native.takeOutput();
        if (out !== null) this.socket.write(out);
        return;
      }
      const n = this.native.takeOutputInto(this.output);
      if (n === 0) return;
      if (n < 0) {
        this.socket.write(this.native.takeOutput());
        return;
      }
      this.socket.write(this.output.subarray(0, n));
      // Still held by the socket (not all written at once): the next bytes go elsewhere.
      if (this.socket.writableLength > 0) this.output = Buffer.allocUnsafeSlow(OUTPUT_BYTES);
    }

    /** A socket to the server, plain or TLS; `onConnect` runs once it is up. */
    dial(onConnect) {
      return dialTarget(this.target, this.options, onConnect);
    }

    /** Sentinel: the master, checked to be one (`locateMaster` in js/redis-topology.mjs). */
    async locate() {
      const { target, at } = await locateMaster(
        (server, commands) => exchange(addon, server, this.options, commands),
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
      const sentinel = sentinels[this.sentinelAt];
      let input = Buffer.alloc(0);
      const socket = dialTarget(sentinel, this.options, () => {
        socket.write(Buffer.concat([...authCommands(sentinel), ["SUBSCRIBE", "+switch-master"]].map((args) => addon.redisCommand(args))));
      });
      this.watcher = socket;
      socket.on("data", (chunk) => {
        input = input.length === 0 ? chunk : Buffer.concat([input, chunk]);
        try {
          for (let next = addon.redisDecode(input); next !== null; next = addon.redisDecode(input)) {
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
      });
      socket.on("error", () => {});
      socket.on("close", () => {
        if (this.watcher !== socket) return;
        this.watcher = null;
        if (this.closed) return;
        // The next Sentinel, in a second.
        this.sentinelAt = (this.sentinelAt + 1) % sentinels.length;
        this.watchTimer = setTimeout(() => {
          this.watchTimer = null;
          this.watch();
        }, 1_000);
        this.watchTimer.unref();
      });
    }

    /** The server is no longer the master: drop both sockets; reconnecting asks the Sentinels again. */
    moved(why) {
      if (this.socket !== null && this.socket !== LOCATING) {
        this.lastError = why;
        this.socket.destroy();
      }
      this.sub?.destroy();
    }

    /** The subscriber connection: SUBSCRIBE confirmations and release messages. */
    openSubscriber() {
      // Cluster: connection 0's node (sharded pub/sub: the channels of its slots).
      const target = this.options.cluster ? this.nodeTarget(0) : this.target;
      this.dialSubscriber(this, target, {
        connected: (user, password) => this.native.subscriberConnected(user, password),
        output: () => this.native.subscriberOutput(),
        feed: (chunk) => this.native.subscriberFeed(chunk),
        lost: () => this.native.subscriberLost(),
      });
    }

    /**
     * A subscriber socket to `target` for `holder` — this store, or a cluster node; both
     * keep `sub`, `subReady` and `subRetryAt` — driven through `calls`, the addon's
     * methods for that subscriber.
     */
    dialSubscriber(holder, target, calls) {
      const sub = dialTarget(target, this.options, () => {
        // A socket replaced before it connected (its node dropped meanwhile) is not the holder's.
        if (holder.sub !== sub) return;
        holder.subReady = true;
        calls.connected(target.user, target.password);
        const out = calls.output();
        if (out !== null) sub.write(out);
      });
      holder.sub = sub;
      holder.subReady = false;
      sub.setTimeout(this.options.connectTimeoutMs, () => {
        if (!holder.subReady) sub.destroy();
      });
      sub.on("data", (chunk) => {
        let count;
        try {
          count = calls.feed(chunk);
        } catch {
          sub.destroy();
          return;
        }
        sub.setTimeout(0);
        // A woken waiter's attempt is queued even when no call finished.
        flushSoon();
        this.take(count);
      });
      sub.on("error", () => {});
      sub.on("close", () => {
        if (holder.sub !== sub) return;
        holder.sub = null;
        holder.subReady = false;
        calls.lost();
        // Waiters fall back to their retry delay meanwhile.
        holder.subRetryAt = performance.now() + 100;
      });
    }

    /**
     * Settles what a turn of the engine finished (`count` numbers of `this.outcomes`;
     * 0: nothing) and arms the sleep timer.
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
          this.sleepTimer = setTimeout(() => {
            this.sleepAt = Infinity;
            this.take(this.native.fire());
            flushSoon();
          }, next);
          this.sleepTimer.unref();
        }
      }
      if (count > 1) settle(outcomes, count, this.native);
      // A full array: more calls finished than it holds.
      if (count === OUTCOMES) this.take(this.native.turn(), false);
      if (thenFlush) flushSoon();
    }

    /**
     * Cluster: reads `CLUSTER SLOTS` from a node that answers (those connected first,
     * then the seeds) into the engine's slot map.
     */
    async refreshTopology() {
      const known = [];
      for (let conn = 0; conn < this.native.connections; conn++) known.push(this.nodeTarget(conn));
      const { target, firsts, lasts, addresses } = await readSlotMap((server, commands) => exchange(addon, server, this.options, commands), [...known, ...this.options.cluster]);
      if (!this.clusterEnabled) {
        // The first seed that answered is connection 0.
        this.target = { ...this.target, host: target.host, port: target.port };
        this.native.enableCluster(`${target.host}:${target.port}`);
        this.clusterEnabled = true;
      }
      this.native.setSlots(firsts, lasts, addresses);
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
        .then(() => new Promise((resolve) => setTimeout(resolve, 100).unref()))
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
      const address = this.native.address(conn);
      return address === null ? this.target : nodeAt(address, this.target);
    }

    /** Cluster: writes each node's commands, connecting to the nodes that have some. */
    flushNodes() {
      for (let conn = 1; conn < this.native.connections; conn++) {
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
          const out = this.native.takeOutputOn(conn);
          if (out !== null) node.socket.write(out);
        } else if (node.socket === null && node.timer === null && this.native.busyOn(conn)) {
          const delay = node.failures === 0 ? 0 : backoffMs(node.failures, this.options.reconnectMaxDelayMs);
          node.failures += 1;
          node.timer = setTimeout(() => {
            node.timer = null;
            if (!this.closed) this.openNode(node);
          }, delay);
          node.timer.unref();
        }
      }
    }

    /** Cluster: a node's subscriber socket (sharded pub/sub on the channels of its slots). */
    flushNodeSubscriber(node) {
      const { conn } = node;
      if (node.sub !== null) {
        if (node.subReady) {
          const out = this.native.subscriberOutputOn(conn);
          if (out !== null) node.sub.write(out);
        }
        return;
      }
      if (performance.now() < node.subRetryAt || !this.native.subscriberWantedOn(conn)) return;
      this.dialSubscriber(node, this.nodeTarget(conn), {
        connected: (user, password) => this.native.subscriberConnectedOn(conn, user, password),
        output: () => this.native.subscriberOutputOn(conn),
        feed: (chunk) => this.native.subscriberFeedOn(conn, chunk),
        lost: () => this.native.subscriberLostOn(conn),
      });
    }

    /** Cluster: a connection to one more node, its handshake in front of what waits for it. */
    openNode(node) {
      const { conn } = node;
      node.target = this.nodeTarget(conn);
      const { user, password } = node.target;
      viaCompletions((id) => this.native.handshakeStartOn(completions, id, conn, user, password)).then(
        () => {
          node.failures = 0;
          node.socket?.setTimeout(0);
        },
        () => node.socket?.destroy(),
      );
      const socket = dialTarget(node.target, this.options, () => {
        node.ready = true;
        flushSoon();
      });
      node.socket = socket;
      socket.setTimeout(this.options.connectTimeoutMs, () => {
        if (!node.ready) {
          node.lastError = `connecting to ${node.target.host}:${node.target.port} timed out after ${this.options.connectTimeoutMs} ms`;
          socket.destroy();
        }
      });
      socket.on("data", (chunk) => {
        let count;
        try {
          count = this.native.feedOn(conn, chunk);
        } catch {
          socket.destroy();
          return;
        }
        this.afterFeed();
        this.take(count);
      });
      socket.on("error", (err) => {
        node.lastError = err.message;
      });
      socket.on("close", () => {
        if (node.socket !== socket) return;
        node.socket = null;
        node.ready = false;
        this.native.connectionLostOn(conn, `${node.target.host}:${node.target.port}: ${node.lastError}`);
        node.lastError = "the connection closed";
        this.take(this.native.turn());
        this.refreshSoon();
      });
    }

    /** After a chunk was fed: a cluster's redirects may want the slot map read again. */
    afterFeed() {
      flushSoon();
      if (this.options.cluster && this.native.takeTopologyStale()) this.refreshSoon();
    }

    /** Opens a socket and queues the handshake; resolves when the server accepted it. */
    open() {
      const { user, password, db } = this.target;
      const handshake = viaCompletions((id) => this.native.handshakeStart(completions, id, user, password, db));
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
          this.socket?.setTimeout?.(0);
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
        let count;
        try {
          count = this.native.feed(chunk);
        } catch {
          socket.destroy();
          return;
        }
        // A READONLY reply: the master was demoted. Ask the Sentinels again.
        if (this.options.sentinels && this.native.takeReplicaSeen()) this.moved("the server became a replica (READONLY)");
        // Even with nothing settled the engine may have more to send (a NOSCRIPT retry).
        this.afterFeed();
        this.take(count);
      });
      socket.on("error", (err) => {
        this.lastError = err.message;
      });
      socket.on("close", () => this.onClose(socket));
    }

    onClose(socket) {
      if (this.socket !== socket) return;
      this.ready = false;
      this.socket = null;
      this.native.connectionLost(this.lastError);
      this.take(this.native.turn());
      this.lastError = "the connection closed";
      if (this.options.cluster) this.refreshSoon();
      // Reconnect now only if some lock still waits; an idle store reconnects on its next
      // call, so a server that stays down keeps neither a retry loop nor the process alive.
      if (!this.closed && this.connected && (this.options.cluster ? this.native.busyOn(0) : this.native.pending > 0)) this.reconnectSoon();
    }

    reconnectSoon() {
      if (this.reconnectTimer !== null || this.closed) return;
      const delay = this.failures === 0 ? 0 : backoffMs(this.failures, this.options.reconnectMaxDelayMs);
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
      clearTimeout(this.sleepTimer);
      // Armed again below for what still sleeps (a held lock's watch ends at its TTL).
      this.sleepAt = Infinity;
      clearTimeout(this.reconnectTimer);
      this.native.close();
      this.take(this.native.turn());
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
      callStarted();
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
    // WAIT answers within half the command timeout, so its answer, not the deadline,
    // says how many replicas acknowledged.
    if (options.minReplicas > 0) native.setMinReplicas(options.minReplicas, Math.max(1, Math.floor(options.commandTimeoutMs / 2)));
    const connection = new EngineConnection(native, options);
    await connection.start();
    return new EngineBackend(native, connection);
  }

  return { connect, flushSoon, started: callStarted };
}

module.exports = { makeEngineDriver };
