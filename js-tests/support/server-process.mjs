// A server process of the tests' own (redis-server, PostgreSQL, MariaDB): a free loopback
// port for it, a small shell that runs it and stops it when its stdin closes (so it never
// outlives the test process), a wait until it answers, and its start, stop, restart and
// dispose.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A port nobody listens on right now. */
export async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Options for `describe`/`it` from why a server cannot run here (undefined: it can): a skip, except under CI=true, where the suite fails. */
export function required(why) {
  if (why && process.env.CI === "true") assert.fail(`${why} (CI=true: a missing prerequisite fails the run)`);
  return { skip: why ?? false };
}

/** The uid and gid of the system user `name` (a server that refuses to run as root runs as it); rejects when there is none. */
export async function userIds(name) {
  const { stdout } = await run("id", ["-u", name]);
  const { stdout: gid } = await run("id", ["-g", name]);
  return [Number(stdout), Number(gid)];
}

/**
 * Runs `argv` under a shell that prints its pid, then waits for its own stdin to close and
 * runs `stop` (a shell command; `$pid` is the server's) and waits for the server to end.
 * `output` redirects the server's output (shell syntax; `$LOG` is `env.LOG`). Resolves
 * `{ child, pid }`: the shell's child process and the server's pid.
 */
export async function watched(argv, { output = ">/dev/null", stop = 'kill "$pid" 2>/dev/null', env } = {}) {
  const script = `"$@" ${output} & pid=$!; echo "$pid"; read -r _; ${stop}; wait "$pid"`;
  const child = spawn("sh", ["-c", script, "sh", ...argv], { stdio: ["pipe", "pipe", "inherit"], ...(env ? { env: { ...process.env, ...env } } : {}) });
  child.on("error", () => {});
  const pid = Number(await new Promise((resolve) => child.stdout.once("data", (d) => resolve(d.toString().split("\n")[0].trim()))));
  return { child, pid };
}

/**
 * Calls `answers()` every `everyMs` until it resolves true (a throw counts as not yet); rejects
 * with `failed(lastError)` once `child` exited or `ms` passed.
 */
export async function untilAnswers(child, answers, { ms, everyMs = 50, failed }) {
  const deadline = Date.now() + ms;
  for (;;) {
    let error;
    try {
      if (await answers()) return;
    } catch (err) {
      error = err;
    }
    if (child.exitCode !== null || Date.now() > deadline) throw await failed(error);
    await sleep(everyMs);
  }
}

/**
 * A server's `{ start(), stop(), restart(), dispose() }`: `launch(watch)` starts it with
 * `watch` (watched(), whose shell stop() then ends) and resolves once it answers; stop()
 * closes the shell's stdin and waits for it to end; dispose() stops it and calls
 * `remove()` (its files). Add the rest with Object.assign.
 */
export function serverProcess({ launch, remove = async () => {} }) {
  let child;
  const watch = async (argv, options) => {
    const started = await watched(argv, options);
    child = started.child;
    return started;
  };
  const server = {
    async start() {
      await launch(watch);
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
    async dispose() {
      await server.stop();
      await remove();
    },
  };
  return server;
}

/** Starts `server` (from serverProcess()); if that fails, disposes of it and rejects. */
export async function started(server) {
  try {
    await server.start();
  } catch (err) {
    await server.dispose();
    throw err;
  }
  return server;
}
