// A TCP proxy on 127.0.0.1 in front of a store's server (loopback only), for the history
// checker's faults: per-chunk latency (a random 0–N ms per chunk, each direction
// keeping its order), stalls (all traffic held for a while), late delivery (the
// client's requests held back for a while, then delivered in order, also when the client
// gave up and closed its connection meanwhile: the server still applies them), lost
// answers (the server's replies dropped until the next cut) and cuts (every connection
// through it dropped at once).
import { createServer, connect, isIP } from "node:net";

/** Whether `host` names this machine's loopback interface. */
export function isLoopback(host) {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1";
}

/**
 * Starts a proxy to `targetPort` on `targetHost` (a loopback address; anything else is
 * refused). `latencyMs` is the most a chunk is delayed; `random` a `() => [0, 1)`
 * source (seed it to replay a run). Resolves to
 * `{ port, url(scheme), setLatency(ms), stall(ms), holdBack(ms), cut(), close(), stats }`.
 */
export async function startProxy({ targetPort, targetHost = "127.0.0.1", latencyMs = 0, random = Math.random, maxBufferedBytes = 4 << 20 }) {
  if (!isLoopback(targetHost)) throw new Error(`the proxy only connects to loopback addresses, not ${targetHost}`);
  if (!Number.isInteger(targetPort) || targetPort <= 0 || targetPort > 65_535) throw new Error(`bad target port ${targetPort}`);
  let latency = latencyMs;
  let stalledUntil = 0;
  // Until when the client-to-server direction alone is held (holdBack).
  let heldUntil = 0;
  // Whether the server's answers are dropped (loseAnswers, until the next cut).
  let losingAnswers = false;
  const pairs = new Set();
  // Server sides still delivering what a closed client sent (see holdBack).
  const draining = new Set();
  const stats = { connections: 0, chunks: 0, bytes: 0, cuts: 0, stalls: 0, holdBacks: 0, deliveredAfterClose: 0, lostAnswers: 0 };

  /**
   * One direction of a connection: chunks from `from` are written to `to`, each at
   * max(its arrival + a random delay, the previous chunk's time, the stall's end, and for
   * the client's direction (`up`) the hold-back's end).
   */
  function pipe(from, to, up) {
    const until = () => (up ? Math.max(stalledUntil, heldUntil) : stalledUntil);
    const queue = [];
    let queued = 0;
    let last = 0;
    let timer = null;
    const drain = () => {
      timer = null;
      const now = performance.now();
      while (queue.length > 0 && queue[0].at <= now) {
        const { chunk } = queue.shift();
        queued -= chunk.length;
        if (!to.destroyed) to.write(chunk);
      }
      if (queued < maxBufferedBytes && from.isPaused()) from.resume();
      schedule();
      if (queue.length === 0 && onEmpty) {
        const done = onEmpty;
        onEmpty = null;
        done();
      }
    };
    let onEmpty = null;
    const schedule = () => {
      if (timer !== null || queue.length === 0) return;
      timer = setTimeout(drain, Math.max(0, queue[0].at - performance.now()));
    };
    from.on("data", (chunk) => {
      if (!up && losingAnswers) {
        stats.lostAnswers += 1;
        return;
      }
      stats.chunks += 1;
      stats.bytes += chunk.length;
      const now = performance.now();
      const at = Math.max(now + random() * latency, last, until());
      last = at;
      if (at <= now && queue.length === 0) {
        to.write(chunk);
        return;
      }
      queue.push({ chunk, at });
      queued += chunk.length;
      // Bounded: a side that sends faster than the other reads waits.
      if (queued >= maxBufferedBytes) from.pause();
      schedule();
    });
    return {
      /** After a stall began: chunks already queued wait for its end too. */
      restall() {
        for (const item of queue) item.at = Math.max(item.at, until());
        last = Math.max(last, until());
        if (timer !== null) {
          clearTimeout(timer);
          timer = null;
        }
        schedule();
      },
      stop() {
        if (timer !== null) clearTimeout(timer);
        timer = null;
        queue.length = 0;
        onEmpty = null;
      },
      /** Chunks still to be written (a hold-back's). */
      pending: () => queue.length,
      /** Calls `done` once every queued chunk is written. */
      whenEmpty(done) {
        if (queue.length === 0) done();
        else onEmpty = done;
      },
    };
  }

  const server = createServer((client) => {
    stats.connections += 1;
    const upstream = connect({ host: targetHost, port: targetPort });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const pair = { client, upstream, directions: [pipe(client, upstream, true), pipe(upstream, client, false)] };
    pairs.add(pair);
    const end = () => {
      if (!pairs.delete(pair)) return;
      for (const d of pair.directions) d.stop();
      client.destroy();
      upstream.destroy();
    };
    // The client closed with requests still held back: as on a real network, what it sent
    // still reaches the server (in order), and the server's side closes after it.
    const clientGone = () => {
      if (!pairs.has(pair)) return;
      const [up, down] = pair.directions;
      if (up.pending() === 0 || upstream.destroyed) return end();
      pairs.delete(pair);
      down.stop();
      stats.deliveredAfterClose += up.pending();
      draining.add(upstream);
      up.whenEmpty(() => upstream.end());
      upstream.on("close", () => {
        up.stop();
        draining.delete(upstream);
      });
    };
    client.on("error", clientGone);
    client.on("close", clientGone);
    upstream.on("error", end);
    upstream.on("close", end);
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address();

  return {
    port,
    stats,
    /** The URL of the proxy for `scheme` (`redis` by default). */
    url(scheme = "redis") {
      return `${scheme}://127.0.0.1:${port}`;
    },
    /** The most a chunk is delayed from now on. */
    setLatency(ms) {
      latency = ms;
    },
    /** Holds every byte in both directions for `ms` (order kept); new ones wait too. */
    stall(ms) {
      stats.stalls += 1;
      stalledUntil = Math.max(stalledUntil, performance.now() + ms);
      for (const pair of pairs) for (const d of pair.directions) d.restall();
    },
    /**
     * Holds every byte the clients send for `ms` (new ones wait too), then delivers them in
     * order; the server's answers flow meanwhile. A request held past its caller's timeout
     * is applied late, also when the caller closed its connection.
     */
    holdBack(ms) {
      stats.holdBacks += 1;
      heldUntil = Math.max(heldUntil, performance.now() + ms);
      for (const pair of pairs) pair.directions[0].restall();
    },
    /**
     * Drops what the server answers from now until the next `cut()`: requests are applied
     * and their answers lost (then `cut()`, and a client that sends unanswered requests
     * again after reconnecting has the server apply them twice).
     */
    loseAnswers() {
      losingAnswers = true;
    },
    /** Drops every connection through the proxy now (both sides see it close). */
    cut() {
      stats.cuts += 1;
      losingAnswers = false;
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        for (const d of pair.directions) d.stop();
        pair.client.destroy();
        pair.upstream.destroy();
      }
      for (const upstream of [...draining]) upstream.destroy();
      draining.clear();
    },
    /** Stops listening and drops every connection. */
    async close() {
      this.cut();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
