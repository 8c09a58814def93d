// A PostgreSQL server of the tests' own: a fresh cluster (initdb) in a temporary
// directory, on a free loopback port. PostgreSQL refuses to run as root, so as root the
// cluster belongs to, and the server runs as, the `postgres` user (runuser). The server
// runs under a small shell that stops it when its stdin closes, so it never outlives
// the test process.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import pg from "pg";

import { freePort } from "./redis-server.mjs";

const run = promisify(execFile);
const USER = "locksmith";

// The shell prints the server's pid, then waits for stdin to close and asks the
// postmaster (its pid is the first line of postmaster.pid) for a fast shutdown.
const WATCHDOG =
  'data="$1"; shift; "$@" >"$data/../server.log" 2>&1 & pid=$!; echo "$pid"; read -r _; ' +
  'kill -INT "$(head -1 "$data/postmaster.pid" 2>/dev/null)" 2>/dev/null || kill "$pid" 2>/dev/null; wait "$pid"';

/** The directory with initdb and postgres: PATH first, else Debian's /usr/lib/postgresql/<version>/bin. */
async function binDir() {
  if (process.env.PG_BIN) return existsSync(join(process.env.PG_BIN, "initdb")) ? process.env.PG_BIN : undefined;
  const onPath = await run("sh", ["-c", "command -v initdb"]).then(
    ({ stdout }) => stdout.trim(),
    () => "",
  );
  if (onPath) return join(onPath, "..");
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, "bin/initdb"))) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], "bin") : undefined;
}

/**
 * Whether PostgreSQL can be started here; `undefined` when it can, else why not. Under
 * CI=true a missing server fails the run instead (see `requirePostgres`).
 */
export async function postgresMissing() {
  const bin = await binDir();
  if (!bin) {
    return process.env.PG_BIN
      ? `PG_BIN=${process.env.PG_BIN} has no initdb`
      : "PostgreSQL is not installed (initdb not on PATH nor in /usr/lib/postgresql/*/bin): run scripts/setup.sh --postgres";
  }
  if (
    process.getuid?.() === 0 &&
    !(await postgresIds().then(
      () => true,
      () => false,
    ))
  ) {
    return "running as root, and there is no `postgres` user to run PostgreSQL as (it refuses to run as root)";
  }
  return undefined;
}

/** Options for `describe`/`it`: skips without PostgreSQL, except under CI=true, where the suite fails. */
export async function requirePostgres() {
  const why = await postgresMissing();
  if (why && process.env.CI === "true") assert.fail(`${why} (CI=true: a missing prerequisite fails the run)`);
  return { skip: why ?? false };
}

// The server's settings unless a test asks for others: fast and not durable.
const DEFAULT_SETTINGS = { fsync: "off", synchronous_commit: "off", full_page_writes: "off", max_connections: "200" };

/**
 * Starts a server; resolves with `{ url, port, pid, stop(), start(), restart(), dispose() }`.
 * `settings` replace or add to the server's settings (`{ fsync: "on" }`: durable commits,
 * e.g. for a test of commit latency).
 */
export async function startPostgres({ settings = {} } = {}) {
  const bin = await binDir();
  if (!bin) throw new Error(await postgresMissing());
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(join(tmpdir(), "locksmith-pg-"));
  const data = join(dir, "data");
  const as = (cmd, args) => (asRoot ? ["runuser", ["-u", "postgres", "--", cmd, ...args]] : [cmd, args]);
  try {
    if (asRoot) await chown(dir, ...(await postgresIds()));
    await run(...as(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", USER, "-E", "UTF8", "--no-sync", "--no-instructions"]));
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const port = await freePort();
  let child;
  let launcher; // the pid of what the watchdog started: runuser as root, else postgres itself
  const server = {
    port,
    url: `postgres://${USER}@127.0.0.1:${port}/postgres`,
    /** The postmaster's pid while it runs. */
    async pid() {
      return Number((await readFile(join(data, "postmaster.pid"), "utf8")).split("\n")[0]);
    },
    async start() {
      const [cmd, args] = as(join(bin, "postgres"), [
        "-D",
        data,
        "-p",
        String(port),
        "-k",
        dir,
        "-c",
        "listen_addresses=127.0.0.1",
        ...Object.entries({ ...DEFAULT_SETTINGS, ...settings }).flatMap(([name, value]) => ["-c", `${name}=${value}`]),
      ]);
      child = spawn("sh", ["-c", WATCHDOG, "sh", data, cmd, ...args], { stdio: ["pipe", "pipe", "inherit"] });
      child.on("error", () => {});
      launcher = Number(await new Promise((resolve) => child.stdout.once("data", (d) => resolve(d.toString().split("\n")[0].trim()))));
      const deadline = Date.now() + 20_000;
      for (;;) {
        const client = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: 1_000 });
        client.on("error", () => {});
        try {
          await client.connect();
          await client.query("SELECT 1");
          await client.end();
          return;
        } catch (err) {
          await client.end().catch(() => {});
          if (child.exitCode !== null || Date.now() > deadline) {
            const log = await readFile(join(dir, "server.log"), "utf8").catch(() => "");
            throw new Error(`PostgreSQL did not start on port ${port}: ${err.message}\n${log}`);
          }
          await sleep(50);
        }
      }
    },
    /** Sends `signal` to the postmaster and every process it started (its sessions too). */
    async signalAll(signal) {
      const postmaster = await server.pid();
      const children = [];
      for (const entry of await readdir("/proc")) {
        if (!/^\d+$/.test(entry)) continue;
        const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
        // pid (comm) state ppid ...: the comm may hold spaces, so read after its ')'.
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
        if (ppid === postmaster) children.push(Number(entry));
      }
      // runuser stops itself when its child stops, and continues it when continued.
      const launchers = asRoot && signal === "SIGCONT" ? [launcher] : [];
      for (const pid of [postmaster, ...children, ...launchers]) {
        try {
          process.kill(pid, signal);
        } catch {}
      }
    },
    /** Fast shutdown: sessions end, the data stays. */
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
    /** Stops the server and deletes its cluster. */
    async dispose() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await server.start();
  } catch (err) {
    await server.dispose();
    throw err;
  }
  return server;
}

async function postgresIds() {
  const { stdout } = await run("id", ["-u", "postgres"]);
  const { stdout: gid } = await run("id", ["-g", "postgres"]);
  return [Number(stdout), Number(gid)];
}
