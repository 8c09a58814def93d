// A MariaDB server of the tests' own (MySQL's protocol and SQL): a fresh data directory
// (mariadb-install-db) in a temporary directory, on a free loopback port, root without a
// password. As root, the directory belongs to and the server runs as the `mysql` user
// (--user=mysql). The server runs under a small shell that stops it when its stdin
// closes, so it never outlives the test process.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

import { freePort, required, serverProcess, started, untilAnswers, userIds } from "./server-process.mjs";

const run = promisify(execFile);

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
  if (process.getuid?.() === 0 && !(await userIds("mysql").catch(() => undefined))) {
    return "running as root, and there is no `mysql` user to run MariaDB as";
  }
  return undefined;
}

/** Options for `describe`/`it`: skips without MariaDB, except under CI=true, where the suite fails. */
export async function requireMysql() {
  return required(await mysqlMissing());
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
    if (asRoot) await chown(dir, ...(await userIds("mysql")));
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
  const server = serverProcess({
    async launch(watch) {
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
      // Stopped by SIGTERM once the watchdog's stdin closes: a clean shutdown.
      const { child } = await watch([bins.server, ...args], { output: '>"$LOG" 2>&1', env: { LOG: join(dir, "server.log") } });
      const mysql = (await import("mysql2/promise")).default;
      await untilAnswers(
        child,
        async () => {
          let connection;
          try {
            connection = await mysql.createConnection({ host: "127.0.0.1", port, user: "root", connectTimeout: 1_000 });
            connection.on("error", () => {});
            await connection.query("CREATE DATABASE IF NOT EXISTS locksmith");
            await connection.end();
            return true;
          } catch (err) {
            connection?.destroy();
            throw err;
          }
        },
        {
          ms: 20_000,
          failed: async (err) => {
            const log = await readFile(join(dir, "server.log"), "utf8").catch(() => "");
            return new Error(`MariaDB did not start on port ${port}: ${err?.message}\n${log}`);
          },
        },
      );
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  });
  Object.assign(server, {
    port,
    url: `mysql://root@127.0.0.1:${port}/locksmith`,
    /** The server's pid while it runs. */
    async pid() {
      return Number((await readFile(join(dir, "pid"), "utf8")).trim());
    },
    /** Sends `signal` (SIGSTOP, SIGCONT) to the server. */
    async signalAll(signal) {
      try {
        process.kill(await server.pid(), signal);
      } catch {}
    },
  });
  return started(server);
}
