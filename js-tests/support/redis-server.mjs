// A redis-server of the tests' own on a free loopback port (from REDIS_SERVER or PATH).
// It runs under a small shell that kills it when its stdin closes, so it never
// outlives the test process.
import { connect } from "node:net";

import { freePort, serverProcess, started, untilAnswers } from "./server-process.mjs";

export { freePort };

function ping(port) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.setTimeout(500);
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      socket.destroy();
      resolve(/^(\+PONG|-NOAUTH)/.test(data.toString()));
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/**
 * Starts a server; `extra` are more redis-server arguments, `config` a configuration
 * file to read first (a Sentinel's: redis-server FILE --sentinel).
 */
export async function startRedis(extra = [], { config } = {}) {
  const port = await freePort();
  const binary = process.env.REDIS_SERVER ?? "redis-server";
  let pid;
  const server = serverProcess({
    async launch(watch) {
      const args = [...(config ? [config] : []), "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...extra];
      // The server's own log goes to /dev/null, so the first line on stdout is its pid.
      const { child, pid: started } = await watch([binary, ...args]);
      pid = started;
      if (!Number.isInteger(pid)) throw new Error(`the redis-server watchdog did not report a pid (got ${pid})`);
      await untilAnswers(child, () => ping(port), {
        ms: 10_000,
        everyMs: 20,
        failed: () => new Error(`redis-server did not start on port ${port}. Install it (apt-get install redis-server) or set REDIS_SERVER.`),
      });
    },
  });
  Object.assign(server, {
    port,
    url: `redis://127.0.0.1:${port}`,
  });
  /** The redis-server process id, for signals. */
  Object.defineProperty(server, "pid", { get: () => pid, enumerable: true });
  return started(server);
}
