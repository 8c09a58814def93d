// A PostgreSQL server of the tests' own: a fresh cluster (initdb) in a temporary
// directory, on a free loopback port. PostgreSQL refuses to run as root, so as root the
// cluster belongs to, and the server runs as, the `postgres` user (runuser). The server
// runs under a small shell that stops it when its stdin closes, so it never outlives
// the test process.
import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

import { freePort, required, serverProcess, started, untilAnswers, userIds } from "./server-process.mjs";

const run = promisify(execFile);
const USER = "locksmith";

// Once the watchdog's stdin closes, it asks the postmaster (its pid is the first line of
// postmaster.pid) for a fast shutdown.
const FAST_SHUTDOWN = 'kill -INT "$(head -1 "$DATA/postmaster.pid" 2>/dev/null)" 2>/dev/null || kill "$pid" 2>/dev/null';

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
    !(await userIds("postgres").then(
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
  return required(await postgresMissing());
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
    if (asRoot) await chown(dir, ...(await userIds("postgres")));
    await run(...as(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", USER, "-E", "UTF8", "--no-sync", "--no-instructions"]));
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const port = await freePort();
  let launcher; // the pid of what the watchdog started: runuser as root, else postgres itself
  const url = `postgres://${USER}@127.0.0.1:${port}/postgres`;
  const server = serverProcess({
    async launch(watch) {
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
      const watchdog = await watch([cmd, ...args], { output: '>"$DATA/../server.log" 2>&1', stop: FAST_SHUTDOWN, env: { DATA: data } });
      launcher = watchdog.pid;
      await untilAnswers(
        watchdog.child,
        async () => {
          const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
          client.on("error", () => {});
          try {
            await client.connect();
            await client.query("SELECT 1");
            await client.end();
            return true;
          } catch (err) {
            await client.end().catch(() => {});
            throw err;
          }
        },
        {
          ms: 20_000,
          failed: async (err) => {
            const log = await readFile(join(dir, "server.log"), "utf8").catch(() => "");
            return new Error(`PostgreSQL did not start on port ${port}: ${err?.message}\n${log}`);
          },
        },
      );
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  });
  Object.assign(server, {
    port,
    url,
    /** The postmaster's pid while it runs. */
    async pid() {
      return Number((await readFile(join(data, "postmaster.pid"), "utf8")).split("\n")[0]);
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
  });
  return started(server);
}
