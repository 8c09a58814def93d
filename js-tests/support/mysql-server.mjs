// A MariaDB server of the tests' own (MySQL's protocol and SQL): a fresh data directory
// (mariadb-install-db) in a temporary directory, on a free loopback port, root without a
// password. As root, the directory belongs to and the server runs as the `mysql` user
// (--user=mysql). The server runs under a small shell that stops it when its stdin
// closes, so it never outlives the test process.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";

import { freePort } from "./redis-server.mjs";

const run = promisify(execFile);

// The shell prints the server's pid, then waits for stdin to close and asks the server
// (SIGTERM: a clean shutdown) to stop.
const WATCHDOG = '"$@" >"$LOG" 2>&1 & pid=$!; echo "$pid"; read -r _; kill "$pid" 2>/dev/null; wait "$pid"';

/** Where mariadbd and mariadb-install-db are: MYSQL_BIN, else PATH (mariadbd is in /usr/sbin on Debian). */
async function binaries() {
  const dirs = process.env.MYSQL_BIN ? [process.env.MYSQL_BIN] : [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/usr/bin"];
  const find = (name) => dirs.map((d) => join(d, name)).find((p) => existsSync(p));
  const server = find("mariadbd");
  const install = find("mariadb-install-db");
  return server && install ? { server, install } : undefined;
}

/**
 * Whether MariaDB can be started here; `undefined` when it can, else why not. Under
 * CI=true a missing server fails the run instead (see `requireMysql`).
 */
export async function mysqlMissing() {
  if (!(await binaries())) {
    return process.env.MYSQL_BIN
      ? `MYSQL_BIN=${process.env.MYSQL_BIN} has no mariadbd and mariadb-install-db`
      : "MariaDB is not installed (mariadbd or mariadb-install-db not found): run scripts/setup.sh --mysql";
  }
  try {
    await import("mysql2/promise");
  } catch {
    return "the mysql2 package is not installed (npm install)";
  }
  if (process.getuid?.() === 0 && !(await mysqlIds().catch(() => undefined))) {
    return "running as root, and there is no `mysql` user to run MariaDB as";
  }
  return undefined;
}

/** Options for `describe`/`it`: skips without MariaDB, except under CI=true, where the suite fails. */
export async function requireMysql() {
  const why = await mysqlMissing();
  if (why && process.env.CI === "true") assert.fail(`${why} (CI=true: a missing prerequisite fails the run)`);
  return { skip: why ?? false };
}

/**
 * Starts a server; resolves with `{ url, port, pid(), stop(), start(), restart(), signalAll(signal), dispose() }`.
 * The url is `mysql://root@127.0.0.1:PORT/locksmith` (the database `locksmith`, made here).
 * Commits are not flushed to disk each time (innodb_flush_log_at_trx_commit=2): a
 * restart of the server keeps them, a crash of the machine would not.
 */
export async function startMysql() {
  const bins = await binaries();
  if (!bins) throw new Error(await mysqlMissing());
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(join(tmpdir(), "locksmith-mysql-"));
  const data = join(dir, "data");
  try {
    if (asRoot) await chown(dir, ...(await mysqlIds()));
    await run(bins.install, [
      "--no-defaults",
      ...(asRoot ? ["--user=mysql"] : []),
      `--datadir=${data}`,
      // Its own temporary directory: a server starting elsewhere deletes the `#sql*` files
      // it finds in its tmpdir, and with the shared /tmp that was this install's, mid-way
      // (mariadb-install-db then failed with "Error on delete of '/tmp/#sql-temptable-…'").
      `--tmpdir=${dir}`,
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      "--skip-name-resolve",
    ]);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const port = await freePort();
  let child;
  const server = {
    port,
    url: `mysql://root@127.0.0.1:${port}/locksmith`,
    /** The server's pid while it runs. */
    async pid() {
      return Number((await readFile(join(dir, "pid"), "utf8")).trim());
    },
    async start() {
      const args = [
        "--no-defaults",
        ...(asRoot ? ["--user=mysql"] : []),
        `--datadir=${data}`,
        `--tmpdir=${dir}`,
        `--port=${port}`,
        "--bind-address=127.0.0.1",
        `--socket=${join(dir, "sock")}`,
        `--pid-file=${join(dir, "pid")}`,
        "--skip-name-resolve",
        "--innodb-flush-log-at-trx-commit=2",
        "--innodb-buffer-pool-size=32M",
        "--max-connections=500",
      ];
      child = spawn("sh", ["-c", WATCHDOG, "sh", bins.server, ...args], {
        stdio: ["pipe", "pipe", "inherit"],
        env: { ...process.env, LOG: join(dir, "server.log") },
      });
      child.on("error", () => {});
      await new Promise((resolve) => child.stdout.once("data", resolve));
      const mysql = (await import("mysql2/promise")).default;
      const deadline = Date.now() + 20_000;
      for (;;) {
        let connection;
        try {
          connection = await mysql.createConnection({ host: "127.0.0.1", port, user: "root", connectTimeout: 1_000 });
          connection.on("error", () => {});
          await connection.query("CREATE DATABASE IF NOT EXISTS locksmith");
          await connection.end();
          return;
        } catch (err) {
          connection?.destroy();
          if (child.exitCode !== null || Date.now() > deadline) {
            const log = await readFile(join(dir, "server.log"), "utf8").catch(() => "");
            throw new Error(`MariaDB did not start on port ${port}: ${err.message}\n${log}`);
          }
          await sleep(50);
        }
      }
    },
    /** Sends `signal` (SIGSTOP, SIGCONT) to the server. */
    async signalAll(signal) {
      try {
        process.kill(await server.pid(), signal);
      } catch {}
    },
    /** A clean shutdown: connections end, the data stays. */
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
    /** Stops the server and deletes its data. */
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

async function mysqlIds() {
  const { stdout } = await run("id", ["-u", "mysql"]);
  const { stdout: gid } = await run("id", ["-g", "mysql"]);
  return [Number(stdout), Number(gid)];
}
