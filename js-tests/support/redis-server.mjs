// A redis-server of the tests' own on a free loopback port (from REDIS_SERVER or PATH).
// It runs under a small shell that kills it when its stdin closes, so it never
// outlives the test process.
import { spawn } from "node:child_process";
import { createServer, connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

// The server's own log goes to /dev/null, so the first line on stdout is its pid.
const WATCHDOG = 'bin="$1"; shift; "$bin" "$@" >/dev/null & pid=$!; echo "$pid"; read -r _; kill "$pid" 2>/dev/null; wait "$pid"';

/** A port nobody listens on right now. */
export async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

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
  let child;
  let pid;
  const server = {
    port,
    url: `redis://127.0.0.1:${port}`,
    /** The redis-server process id, for signals. */
    get pid() {
      return pid;
    },
    async start() {
      child = spawn(
        "sh",
        [
          "-c",
          WATCHDOG,
          "sh",
          binary,
          ...(config ? [config] : []),
          "--port",
          String(port),
          "--bind",
          "127.0.0.1",
          "--save",
          "",
          "--appendonly",
          "no",
          ...extra,
        ],
        { stdio: ["pipe", "pipe", "inherit"] },
      );
      child.on("error", () => {});
      pid = Number(await new Promise((resolve) => child.stdout.once("data", (d) => resolve(d.toString().split("\n")[0].trim()))));
      if (!Number.isInteger(pid)) throw new Error(`the redis-server watchdog did not report a pid (got ${pid})`);
      const deadline = Date.now() + 10_000;
      while (!(await ping(port))) {
        if (child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`redis-server did not start on port ${port}. Install it (apt-get install redis-server) or set REDIS_SERVER.`);
        }
        await sleep(20);
      }
    },
    async stop() {
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.stdin.end();
      await exited;
    },
    async restart() {
      await server.stop();
      await server.start();
    },
  };
  await server.start();
  return server;
}
