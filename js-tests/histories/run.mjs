// Runs a history: N OS processes (client.mjs) × M async clients on one store, with a
// fault, then the checker over every process's records. Seeded: each run prints its seed,
// and `--seed` replays it (the same operations; timing still differs).
//
//   node js-tests/histories/run.mjs [--seconds 60] [--processes 4] [--clients 8]
//     [--stores memory,js-laggy,redis,redis-proxy,redis-stall,redis-cut,redis-pause,redis-restart,
//               redis-sentinel-failover,redis-sentinel-failover-async,
//               redis-cluster-failover,ioredis,ioredis-restart,
//               ioredis-pause,node-redis,upstash,upstash-proxy,upstash-pause,postgres,
//               postgres-proxy,postgres-commit,postgres-pause,postgres-restart,mysql,mysql-pause,
//               mysql-restart,durable-object,
//               durable-object-restart,durable-object-fair-restart,durable-object-pause,memory-fair,file,file-kill,file-fair-kill,
//               file-pause,etcd,etcd-fair,redis-late,ioredis-late,upstash-late,postgres-late,
//               mysql-late,etcd-late,etcd-fair-late,postgres-competing,mysql-competing,
//               redis-fair,ioredis-fair,redis-restart-fair,redis-late-fair,postgres-fair,
//               postgres-restart-fair,postgres-late-fair,postgres-repeatable-read,
//               postgres-repeatable-read-fair,mysql-fair,mysql-restart-fair,mysql-late-fair,
//               ioredis-pause-fair,postgres-pause-fair,mysql-pause-fair,
//               durable-object-pause-fair,file-pause-fair]
//     [--seed N] [--kinds multi=3,lock=1] [--store-module path]
//
// A row's name may add fault modifiers: `+stall` (client event-loop stalls), `+abort`
// (waits aborted at random moments), e.g. `--stores redis+stall,postgres-late+abort`.
//
// prints one table row per store × fault: holds checked, violations, late signals, holds
// left on the store that nobody owns (orphaned holds: — where the store cannot be listed),
// and how often the fault was applied. Run it under LOCKSMITH_TARGET=wasm for the WebAssembly
// build. Exits 1 on any violation or orphaned hold, except for violations in a row that
// shows what its store does not promise (redis-sentinel-failover-async: two holders
// across a failover without minReplicas), which are printed.
import { execFile, spawn } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { checkHistory, checkOrphans } from "./checker.mjs";
import { HISTORY_KEYS, now, serveClock } from "./client.mjs";
import { startProxy } from "./proxy.mjs";
import { newSeed, seeded } from "./random.mjs";
import { clusterSlots, command, until } from "../support/redis-topology.mjs";

const CLIENT = fileURLToPath(new URL("./client.mjs", import.meta.url));
const CLI = fileURLToPath(new URL("../../js/cli/cli.mjs", import.meta.url));

/**
 * A store's holds of the run's keys as the CLI lists them (`locksmith list <url> h*
 * --json`, js/cli/cli.mjs): a function resolving to `[{ key, kind, remainingMs, owner }]`,
 * the owner as its fingerprint. `url` is the store's: redis://, postgres://, mysql://,
 * etcd://, file://.
 */
export function cliLister(url, { pattern = "h*", args = [] } = {}) {
  return () =>
    new Promise((resolve, reject) => {
      execFile(process.execPath, [CLI, "list", url, pattern, "--json", ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
        // Exit 1: nothing held.
        if (err && err.code !== 1) return reject(new Error(`locksmith list ${url}: ${stderr.trim() || err.message}`));
        resolve(
          stdout
            .split("\n")
            .filter(Boolean)
            .map((line) => JSON.parse(line)),
        );
      });
    });
}

/**
 * Runs one client process (`script`: client.mjs, or a store's own with the same output)
 * with `config`; resolves to its records. Its clock requests are answered (serveClock).
 */
export function runProcess(config, { timeoutMs, onSpawn, script = CLIENT, killed = () => false }) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, JSON.stringify(config)], { stdio: ["ignore", "pipe", "pipe", "ipc"], env: process.env });
    serveClock(child);
    onSpawn?.(child);
    const out = [];
    let err = "";
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      // Killed on purpose (a SIGKILL fault): what it wrote before is its record; a last
      // line cut short is dropped.
      const died = signal === "SIGKILL" && killed();
      if (code !== 0 && !died) {
        reject(new Error(`history client ${config.process} exited with ${code ?? signal}: ${err.trim()}`));
        return;
      }
      const records = Buffer.concat(out)
        .toString()
        .split("\n")
        .filter(Boolean)
        .flatMap((line) => {
          try {
            return [JSON.parse(line)];
          } catch (err) {
            if (died) return [];
            throw err;
          }
        });
      resolve(records);
    });
  });
}

/**
 * The checker over the records of a run's processes: its `slackMs` grows by the worst
 * bound on how far a process's clock may be off the run's (the summaries' `clock`).
 * Resolves to `{ result, holds, summaries, clockErrorMs }`.
 */
export function checkRecords(records, check = {}) {
  const holds = records.filter((r) => r.t === "hold");
  const summaries = records.filter((r) => r.t === "summary");
  // The summaries' bounds, and those a streaming process wrote at its start (a killed one has no summary).
  const clocks = records.filter((r) => r.t === "clock");
  const clockErrorMs = Math.max(0, ...summaries.map((s) => s.clock?.errorMs ?? 0), ...clocks.map((c) => c.clock.errorMs));
  const slackMs = (check.slackMs ?? 2) + clockErrorMs;
  // The processes' event-loop stalls (client.mjs config.stalls), and the acquires that were
  // aborted or failed.
  const stalls = records.filter((r) => r.t === "stall");
  const attempts = records.filter((r) => r.t === "attempt");
  const observations = records.filter((r) => r.t === "observation");
  const places = records.filter((r) => r.t === "place");
  return {
    result: checkHistory(holds, { ...check, stalls: [...(check.stalls ?? []), ...stalls], observations, attempts, places, slackMs }),
    holds,
    summaries,
    clockErrorMs,
    stalls,
    attempts,
  };
}

/**
 * One run: `processes` × `clients` on `store` (a client.mjs store spec) for `seconds`,
 * with `fault` during it (optional): `{ every, apply(random, run) }`, where `run` has the
 * client processes (`children`) and `pause(i, ms)`, which stops process `i` (SIGSTOP)
 * and continues it (SIGCONT) `ms` later; the pauses go to the checker. An `apply` that
 * returns a promise is not started again until it settles; `times`, if given, is how
 * often it is applied at most. `orphans`, if given, lists the store's holds of the run's
 * keys (cliLister): before the run and once every process has exited, when each has
 * released all it held (and closed its store leaving the rest to their TTLs, as a process
 * that keeps running would); the holds left that nobody owns are `orphans` (checkOrphans;
 * null when not checked, or when a process was killed: its holds are nobody's by
 * then). Resolves to
 * `{ seed, result: checkHistory(...), summaries, holds, clockErrorMs, pauses, faults, orphans, stalls, attempts }`.
 */
export async function runHistory({
  store,
  processes = 1,
  clients = 4,
  seconds = 2,
  seed = newSeed(),
  fault = null,
  check = {},
  client = {},
  orphans: list = null,
}) {
  const before = list ? await list() : [];
  const startAt = now() + 600; // every process connected and waiting by then
  const durationMs = seconds * 1_000;
  const children = [];
  // A list of store specs: process i opens the (i mod length)-th (stores of one server, told apart by options).
  const storeOf = (i) => (Array.isArray(store) ? store[i % store.length] : store);
  const pauses = [];
  // When the store was out (a restart: calls in flight then fail), for the fair-order check.
  const outages = [];
  // Processes killed with SIGKILL (a `kills` fault), and when.
  const killedAt = new Map();
  const continuing = new Set();
  const run = {
    children,
    startAt,
    // When the clients stop taking holds (a fault that makes calls late ends before).
    endsAt: startAt + durationMs,
    pause(i, ms) {
      const child = children[i];
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const entry = { process: i, from: now(), to: Infinity };
      child.kill("SIGSTOP");
      pauses.push(entry);
      const resume = new Promise((resolve) =>
        setTimeout(() => {
          child.kill("SIGCONT");
          entry.to = now();
          resolve();
        }, ms),
      );
      continuing.add(resume);
    },
    /** Notes that the store is out from now until the returned function is called. */
    outage() {
      const entry = { from: now(), to: Infinity };
      outages.push(entry);
      return () => (entry.to = now());
    },
  };
  let faults = null;
  let applied = 0;
  const faultErrors = [];
  if (fault?.apply) {
    const random = seeded(seed).fork(1_000);
    let busy = false;
    faults = setInterval(() => {
      if (busy || now() < startAt || applied >= (fault.times ?? Infinity)) return;
      busy = true;
      applied += 1;
      Promise.resolve()
        .then(() => fault.apply(random, run))
        .catch((err) => faultErrors.push(err))
        .finally(() => (busy = false));
    }, fault.every);
  }
  let records;
  const running = [];
  const start = (config) => {
    const i = config.process;
    running.push(
      runProcess(
        { ...config, store: storeOf(i) },
        { timeoutMs: durationMs + 30_000, onSpawn: (child) => (children[i] = child), killed: () => killedAt.has(i) },
      ).then((out) =>
        // A streamed hold's last line counts; a killed process's holds were seen until it died.
        config.stream ? lastLines(out, killedAt.get(i) ?? now()) : out,
      ),
    );
  };
  run.kill = (i) => {
    const child = children[i];
    if (!child || child.exitCode !== null || child.signalCode !== null || killedAt.has(i)) return;
    killedAt.set(i, now());
    child.kill("SIGKILL");
    // A new process takes its place for the rest of the run.
    const left = startAt + durationMs - now();
    if (left > 200) start({ ...client, store, clients, durationMs: left, seed, process: children.length, startAt: 0, stream: true });
  };
  try {
    for (let i = 0; i < processes; i++)
      start({ ...client, store, clients, durationMs, seed, process: i, startAt, stream: client.stream ?? fault?.kills === true, keepHolds: list !== null });
    // Processes started meanwhile (in place of killed ones) are waited for too.
    for (let awaited = 0; awaited < running.length; ) {
      const n = running.length;
      await Promise.all(running.slice(awaited, n));
      awaited = n;
    }
    records = (await Promise.all(running)).flat();
  } finally {
    if (faults) clearInterval(faults);
    await Promise.all(continuing);
    // A fault under way (a restart) finishes before the next run.
    await fault?.settled?.();
  }
  if (faultErrors.length > 0) throw faultErrors[0];
  const checked = checkRecords(records, { ...check, pauses, outages });
  let orphans = null;
  if (list && killedAt.size === 0) {
    const listedAt = now();
    orphans = checkOrphans(await list(), checked.holds, { listedAt, before, slackMs: 50 + checked.clockErrorMs });
  }
  return { seed, ...checked, pauses, kills: [...killedAt.entries()], faults: applied, orphans };
}

/** The errors the client processes of `run` counted, summed. */
function errorTotals(run) {
  const out = {};
  for (const s of run.summaries) for (const [name, n] of Object.entries(s.errors)) out[name] = (out[name] ?? 0) + n;
  return out;
}

/**
 * The last line of each hold and each acquire attempt of a streaming process's records, its
 * observation ending at `at` (a killed process's, when it died). An attempt whose last line
 * says "granted" or "refused" left nothing to check; one still "pending" was in flight when
 * its process died, and the store may have granted it.
 */
export function lastLines(records, at) {
  const holds = new Map();
  const attempts = new Map();
  const rest = [];
  for (const r of records) {
    if (r.t === "hold") holds.set(`${r.client}#${r.seq}`, r);
    else if (r.t === "attempt" && r.id !== undefined) attempts.set(`${r.client}#${r.id}`, r);
    else rest.push(r);
  }
  // A pending attempt's wait ended at `at` too: a fair waiter that died is not overtaken.
  const attempted = [...attempts.values()].filter((a) => a.outcome !== "granted" && a.outcome !== "refused").map((a) => ({ ...a, endAt: a.endAt ?? at }));
  return [...[...holds.values()].map((h) => ({ ...h, endAt: h.endAt ?? at })), ...attempted, ...rest];
}

/** A fault that kills one client process with SIGKILL every `every` ms (a new one takes its place). */
export function kills({ every }) {
  return {
    every,
    kills: true,
    apply: (random, run) => {
      const live = run.children.map((c, i) => [c, i]).filter(([c]) => c.exitCode === null && c.signalCode === null);
      if (live.length > 0) run.kill(live[random.int(0, live.length - 1)][1]);
    },
  };
}

/**
 * A fault that restarts `server` (stop, `downMs`, start on the same port) every `every`
 * ms; `afterStart()`, if given, runs once it is up again (a test's deliberate damage).
 */
export function restarts(server, { every, downMs, afterStart }) {
  let restarting = null;
  return {
    every,
    apply: () => {
      restarting = (async () => {
        await server.stop();
        await new Promise((resolve) => setTimeout(resolve, downMs));
        await server.start();
        await afterStart?.();
      })();
      return restarting;
    },
    settled: () => restarting?.catch(() => {}),
  };
}

/** A fault that stops one client process (SIGSTOP) for `ms` (past its TTL) every `every` ms, then continues it. */
export function pauses({ every, ms }) {
  return { every, apply: (random, run) => run.pause(random.int(0, run.children.length - 1), random.int(ms[0], ms[1])) };
}

/** Runs `step(random, run)` (async), with the fault's `settled()` waiting for the last one. */
function serialFault({ every, times }, step) {
  let running = null;
  return {
    every,
    times,
    apply: (random, run) => (running = step(random, run)),
    settled: () => running?.catch(() => {}),
  };
}

/**
 * Resolves once the Sentinels' master has its replica online and every Sentinel names
 * it: a failover can then go to a replica that has the data.
 */
export async function sentinelsSettled(topology, ms = 30_000) {
  await until(
    "the master to have its replica and the sentinels to agree",
    async () => {
      const ports = await Promise.all(topology.sentinels.map((s) => topology.masterPort(s)));
      if (new Set(ports).size !== 1) return false;
      const info = await command(ports[0], "INFO", "replication");
      if (!(/role:master/.test(info) && /connected_slaves:1/.test(info) && /slave0:.*state=online/.test(info))) return false;
      // Every Sentinel sees the replica as a good one to promote.
      for (const sentinel of topology.sentinels) {
        const replicas = (await command(sentinel.port, "SENTINEL", "replicas", topology.masterName)).map((fields) => {
          const entry = {};
          for (let i = 0; i + 1 < fields.length; i += 2) entry[fields[i]] = fields[i + 1];
          return entry;
        });
        if (!replicas.some((r) => r.flags === "slave" && r["master-link-status"] === "ok" && Number(r["master-port"]) === ports[0])) return false;
      }
      return true;
    },
    ms,
  );
}

/**
 * A fault that fails the Sentinels' master over to its replica (`SENTINEL FAILOVER`,
 * once the replica is online) every `every` ms, `times` at most. The old master is then
 * pointed at the new one at once (`REPLICAOF`), as the Sentinels do when they next look
 * at it (up to 10 s later): until a replica is back, grants with `minReplicas` fail.
 * `afterSwitch(server)`, if given, runs as soon as the new master answers as one, before
 * that (a test's deliberate damage).
 */
export function sentinelFailovers(topology, { every, times, afterSwitch }) {
  return serialFault({ every, times }, async () => {
    await sentinelsSettled(topology);
    const old = await topology.currentMaster();
    const promoted = await topology.failover();
    await afterSwitch?.(promoted);
    await command(old.port, "REPLICAOF", "127.0.0.1", String(promoted.port));
  });
}

/** The hash slot of `key`'s lock key, and the ports of its master and replica now. */
export async function clusterKeyNodes(cluster, key) {
  const via = cluster.nodes.find((n) => n.pid && !n.killed)?.port ?? cluster.nodes[0].port;
  const slot = await command(via, "CLUSTER", "KEYSLOT", `locksmith:{${key}}`);
  const range = (await clusterSlots(via)).find((r) => r.first <= slot && slot <= r.last);
  return { slot, port: range.port, replica: range.replicas[0] };
}

/**
 * A fault that fails the master of `key`'s slot over to its replica with a manual
 * `CLUSTER FAILOVER` (coordinated: the master stops taking writes, the replica catches up
 * with it, then takes over, so no acknowledged write is lost) every `every` ms, `times`
 * at most. `afterSwitch(port)`, if given, runs as soon as the replica answers as master.
 */
export function clusterFailovers(cluster, { key = HISTORY_KEYS[0], every, times, afterSwitch }) {
  return serialFault({ every, times }, async () => {
    let replica;
    await until(
      "the key's master to have a replica in sync",
      async () => {
        ({ replica } = await clusterKeyNodes(cluster, key));
        if (replica === undefined) return false;
        const info = await command(replica, "INFO", "replication");
        return /master_link_status:up/.test(info);
      },
      30_000,
    );
    await command(replica, "CLUSTER", "FAILOVER");
    await until("the replica to take over", async () => (await command(replica, "ROLE"))[0] === "master", 10_000);
    await afterSwitch?.(replica);
  });
}

/**
 * A fault that restarts the Durable Objects of the run's keys (`ctx.abort()`: the next
 * call gets a new instance, built from the object's storage) every `every` ms. `mf` is
 * the Miniflare of js-tests/workerd/store-worker.mjs; `route` ("/restart", or "/forget"
 * for a test's deliberate damage: the object's holds deleted first).
 */
export function objectRestarts(mf, { every, route = "/restart", keys = HISTORY_KEYS }) {
  return serialFault({ every }, async (_random, run) => {
    const over = run.outage();
    try {
      await Promise.all(keys.map(async (key) => (await mf.dispatchFetch(`http://worker${route}?key=${encodeURIComponent(key)}`)).arrayBuffer()));
    } finally {
      over();
    }
  });
}

/**
 * A fault that holds back what the clients send through `proxy` (or to the Upstash REST
 * endpoint: anything with `holdBack(ms)`) for `ms[0]`–`ms[1]` ms every `every` ms, then
 * delivers it in order: requests held past their caller's timeout are applied late. Each
 * hold-back is noted as a store outage (`run.outage()`).
 */
export function lateDelivery(target, { every, ms }) {
  return {
    every,
    apply: (random, run) => {
      // Every request held back is delivered, and answered, 200 ms before the clients stop
      // (a process that exits with a call unanswered leaves what a dead one leaves).
      const held = Math.min(random.int(ms[0], ms[1]), run.endsAt - 200 - now());
      if (held < ms[0] / 2) return;
      // An outage for the fair-order check: a fair waiter whose attempt timed out asks again
      // under a new owner, at the end of the queue (as one cut off by a restart does).
      setTimeout(run.outage(), held);
      target.holdBack(held);
    },
  };
}

// The names under which the SQL stores serialize a key's holds: PostgreSQL's advisory
// lock (hashtext(lockspace), hashtext(name)) and MySQL's row of the key.
const PG_LOCKSPACE = "locksmith:locksmith_locks";
const COMPETING_FAMILIES = ["lock", "semaphore", "rw"];

/**
 * A fault: another session holds what a key's holds change under — on PostgreSQL the
 * key's advisory lock (`pg_advisory_xact_lock(hashtext(ns), hashtext(kind:key))`), on
 * MySQL the key's row (`SELECT … FOR UPDATE` of a lock's row, or the semaphore's or
 * read-write lock's row in the keys table) — in an open transaction for `ms[0]`–`ms[1]`
 * ms, every `every` ms, one key of the run's at a time: the store's calls on it wait
 * (as behind a slow transaction) past their callers' timeouts, then run; over 200 ms
 * before the clients stop. Resolves to
 * `{ fault, close() }`.
 */
export async function competingSession(server, dialect, { every, ms, keys = HISTORY_KEYS }) {
  let session;
  if (dialect === "postgres") {
    const pg = (await import("pg")).default;
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    session = {
      hold: async (family, key, holdMs) => {
        await client.query("BEGIN");
        try {
          await client.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", [PG_LOCKSPACE, `${family}:${key}`]);
          await new Promise((resolve) => setTimeout(resolve, holdMs));
        } finally {
          await client.query("COMMIT");
        }
      },
      close: () => client.end(),
    };
  } else {
    const mysql = (await import("mysql2/promise")).default;
    const connection = await mysql.createConnection(server.url);
    await connection.query("SET SESSION innodb_lock_wait_timeout = 10");
    session = {
      hold: async (family, key, holdMs) => {
        await connection.query("START TRANSACTION");
        try {
          if (family === "lock") await connection.query("SELECT 1 FROM locksmith_locks WHERE `key` = ? FOR UPDATE", [key]);
          else await connection.query("INSERT INTO locksmith_locks_keys (kind, `key`) VALUES (?, ?) ON DUPLICATE KEY UPDATE kind = kind", [family, key]);
          await new Promise((resolve) => setTimeout(resolve, holdMs));
        } finally {
          await connection.query("COMMIT");
        }
      },
      close: () => connection.end(),
    };
  }
  const fault = serialFault({ every }, async (random, run) => {
    // Over 200 ms before the clients stop, as lateDelivery's.
    const held = Math.min(random.int(ms[0], ms[1]), run.endsAt - 200 - now());
    if (held >= ms[0]) await session.hold(random.pick(COMPETING_FAMILIES), random.pick(keys), held);
  });
  return {
    fault,
    close: async () => {
      await fault.settled();
      await session.close();
    },
  };
}

/**
 * The servers a run needs, started on first use and stopped together: `redis`,
 * `redis-aof` (every write fsynced to its append-only file before it answers, so a
 * restart keeps the holds), `upstash` (the REST endpoint over `redis`), `sentinel` (a
 * master, a replica, three Sentinels), `cluster` (three masters with a replica each),
 * `workerd` (the Durable Object store's test worker), `postgres` (durable commits:
 * fsync on; the sessions choose synchronous_commit), `mysql` (MariaDB, with the store's
 * tables made up front).
 */
export function servers() {
  const started = new Map();
  const get = (name) => {
    if (!started.has(name)) started.set(name, starters[name]());
    return started.get(name);
  };
  const starters = {
    redis: async () => (await import("../support/redis-server.mjs")).startRedis(),
    "redis-aof": async () => {
      const { mkdtemp, rm } = await import("node:fs/promises");
      const { tmpdir } = await import("node:os");
      const { join } = await import("node:path");
      const dir = await mkdtemp(join(tmpdir(), "locksmith-redis-aof-"));
      const server = await (await import("../support/redis-server.mjs")).startRedis(["--dir", dir, "--appendonly", "yes", "--appendfsync", "always"]);
      const stop = server.stop;
      server.dispose = async () => {
        await stop();
        await rm(dir, { recursive: true, force: true });
      };
      return server;
    },
    // The project's Upstash REST endpoint (js-tests/support/upstash-rest.mjs) over `redis`.
    upstash: async () => {
      const redis = get("redis"); // first: it stops after the endpoint
      const { startUpstashRest } = await import("../support/upstash-rest.mjs");
      const rest = await startUpstashRest((await redis).url);
      return { ...rest, stop: () => rest.close() };
    },
    sentinel: async () => (await import("../support/redis-topology.mjs")).startSentinels(),
    cluster: async () => (await import("../support/redis-topology.mjs")).startCluster(),
    // js-tests/workerd/store-worker.mjs in workerd (Miniflare), on a loopback port.
    workerd: async () => {
      const { startWorker } = await import("../support/workerd-harness.mjs");
      const worker = await startWorker("workerd/store-worker.mjs", { durableObjects: { LOCKS: { className: "TestLockObject", useSQLite: true } } });
      const url = String(await worker.mf.ready);
      return { mf: worker.mf, url, stop: () => worker.dispose() };
    },
    postgres: async () => {
      const { startPostgres } = await import("../support/postgres-server.mjs");
      const server = await startPostgres({ settings: { fsync: "on" } });
      // The tables, made once up front (not by many processes at once).
      const { PostgresLockStore } = await import("locksmith-js/postgres");
      await (await PostgresLockStore.connect(server.url, { listen: false })).close();
      return server;
    },
    // One etcd member (js-tests/support/etcd-server.mjs): `{ endpoints, url, stop }`.
    etcd: async () => {
      const { startEtcd } = await import("../support/etcd-server.mjs");
      const cluster = await startEtcd({ size: 1 });
      return { endpoints: cluster.endpoints, url: `etcd://${new URL(cluster.endpoints[0]).host}`, stop: () => cluster.dispose() };
    },
    mysql: async () => {
      const { startMysql } = await import("../support/mysql-server.mjs");
      const server = await startMysql();
      // The tables, made once up front (not by many processes at once).
      const { MySqlLockStore } = await import("locksmith-js/mysql");
      await (await MySqlLockStore.connect(server.url)).close();
      return server;
    },
  };
  return {
    get,
    async stop() {
      // The last started first: a server others stand on goes after them.
      for (const starting of [...started.values()].reverse()) {
        const server = await starting.catch(() => null);
        await (server?.dispose ?? server?.stop)?.call(server);
      }
      started.clear();
    },
  };
}

// PostgreSQL's commit_delay (microseconds) for the commit-latency rows: each durable
// commit waits 10 ms.
export const COMMIT_LATENCY = "-c synchronous_commit=on -c commit_delay=10000 -c commit_siblings=0";
// A session whose default isolation is REPEATABLE READ (as a database's, a role's or a pool's setting may make it).
export const REPEATABLE_READ = "-c default_transaction_isolation=repeatable\\ read";

const RESTART_REDIS = "redis-server (AOF, appendfsync always) stopped for 100 ms and started again on its port every 1 s; TTL 600 ms";
const PAUSES = "a client process SIGSTOPped for 150–300 ms (TTL 120 ms) every 600 ms";

// The failover rows: TTL 600 ms, so that a hold outlives the switch and one the new
// master lacked would show as two holders.
export const FAILOVER_TTL_MS = 600;
/** The Sentinel failover row's store: every grant and extend acknowledged by the replica (WAIT 1). */
export const sentinelStore = (topology) => ({ redis: { sentinels: topology.urls, masterName: topology.masterName }, minReplicas: 1, commandTimeoutMs: 1_000 });
export const clusterStore = (cluster) => ({ redis: { cluster: cluster.urls }, commandTimeoutMs: 1_000 });

/** A row's setup (`make(server)`) on the server `name`, its holds listed at the end (cliLister). */
async function listed(s, name, make) {
  const server = await s.get(name);
  return { list: cliLister(server.url), ...(await make(server)) };
}

/** A FileLockStore row on a fresh lock file, its holds listed at the end. */
async function fileRow(rest) {
  const { pathToFileURL: fileUrl } = await import("node:url");
  const { existsSync } = await import("node:fs");
  const file = await lockFile();
  const list = cliLister(fileUrl(file).href);
  // The first process makes the file: before that, nothing is held.
  return { store: { file }, list: async () => (existsSync(file) ? list() : []), ...rest };
}

// The faults that make an outcome uncertain and late. Holds of these rows: a fifth with a
// 3 s TTL (released within a few ms), so that a hold nobody owns outlives the run and is
// found at its end.
export const LONG_TTL = { share: 0.2, ms: 3_000 };
// Event-loop stalls: 50–500 ms of synchronous work every 200–800 ms in each client process.
export const STALLS = { everyMs: [200, 800], ms: [50, 500] };
const STALLS_TEXT = "client event loops stalled 50–500 ms (busy-wait) every 200–800 ms";
// Waits aborted at a random moment: half of the waiting acquires (waits of up to 1 s) get
// a signal that fires within the wait.
const ABORTS_TEXT = "half the waits (up to 1 s) aborted at a random moment";
const LATE_TEXT = (what, timeout) => `${what} held back 400–1200 ms (past the ${timeout} ms timeout) every 1 s, then delivered in order; waits up to 3 s`;
// The late rows' waits: up to 3 s, so that a wait's next attempt follows one given up on.
const LATE_WAITS = [0, 3_000];
// Fair locks and semaphores (lockAll() is not fair: no "multi"), with the other kinds beside them.
export const FAIR_CLIENT = { fair: true, kinds: { lock: 5, semaphore: 3, read: 1, write: 1, election: 1 } };

/**
 * Fault modifiers a row's name may carry (`redis+stall`, `postgres-late+abort`): each
 * adds to the row's client config and its fault text.
 */
export const MODIFIERS = {
  stall: { text: STALLS_TEXT, client: { stalls: STALLS, longTtl: LONG_TTL } },
  abort: { text: ABORTS_TEXT, client: { aborts: 0.5, longTtl: LONG_TTL, waitMs: [0, 1_000] } },
};

/** The setup named `name`: a row of SETUPS, with its `+modifier`s applied. */
export function setupFor(name) {
  const [base, ...mods] = name.split("+");
  const setup = SETUPS[base];
  if (!setup) throw new Error(`unknown store setup ${base}; known: ${Object.keys(SETUPS).join(", ")}`);
  if (mods.length === 0) return setup;
  for (const mod of mods) if (!MODIFIERS[mod]) throw new Error(`unknown fault modifier +${mod}; known: ${Object.keys(MODIFIERS).join(", ")}`);
  const texts = mods.map((m) => MODIFIERS[m].text);
  return {
    ...setup,
    fault: [setup.fault === "none" ? null : setup.fault, ...texts].filter(Boolean).join("; "),
    open: async (s, random) => {
      const opened = await setup.open(s, random);
      let client = { ...opened.client };
      for (const m of mods) client = { ...client, ...MODIFIERS[m].client };
      return { ...opened, client };
    },
  };
}

/**
 * The store × fault setups: `{ store, fault, processes?, mayViolate?, open(servers, random)
 * → { store, fault?, client?, check?, list?, close? } }`. `client` adds to each client process's
 * config (a TTL, say), `check` to the checker's options, `list` lists the store's holds
 * (cliLister) for the orphaned-hold check. A `mayViolate` row shows what a
 * store does not promise: its violations are printed, and do not fail the run.
 */
export const SETUPS = {
  memory: { store: "memory", fault: "none", processes: 1, open: async () => ({ store: "memory" }) },
  "memory-fair": {
    store: "memory, fair locks and semaphores",
    fault: "none",
    processes: 1,
    open: async () => ({ store: "memory", client: FAIR_CLIENT }),
  },
  "js-laggy": {
    store: "a JS store (a user's own)",
    fault: "each call 0–10 ms late each way, one in eight up to 60 ms",
    processes: 1,
    open: async () => ({ store: { laggyJs: 60 } }),
  },
  redis: { store: "RedisLockStore", fault: "none", open: async (s) => listed(s, "redis", (server) => ({ store: { redis: server.url } })) },
  // fencing: false: acquire is one plain SET NX PX, holds carry no token.
  "redis-unfenced": {
    store: "RedisLockStore, fencing: false",
    fault: "none",
    open: async (s) => listed(s, "redis", (server) => ({ store: { redis: server.url, fencing: false } })),
  },
  // Processes with and without fencing on the same keys: token-order holds among the fenced.
  "redis-mixed-fencing": {
    store: "RedisLockStore, fencing on and off by process",
    fault: "none",
    open: async (s) => listed(s, "redis", (server) => ({ store: [{ redis: server.url }, { redis: server.url, fencing: false }] })),
  },
  "redis-proxy": {
    store: "RedisLockStore",
    fault: "proxy latency 0–20 ms",
    open: async (s, random) => {
      const proxy = await startProxy({ targetPort: (await s.get("redis")).port, latencyMs: 20, random });
      return listed(s, "redis", () => ({ store: { redis: proxy.url() }, close: () => proxy.close() }));
    },
  },
  "redis-stall": {
    store: "RedisLockStore",
    fault: "proxy 0–5 ms, a 150 ms stall every 700 ms",
    open: async (s, random) => {
      const proxy = await startProxy({ targetPort: (await s.get("redis")).port, latencyMs: 5, random });
      return listed(s, "redis", () => ({
        store: { redis: proxy.url(), commandTimeoutMs: 300 },
        fault: { every: 700, apply: () => proxy.stall(150) },
        close: () => proxy.close(),
      }));
    },
  },
  "redis-cut": {
    store: "RedisLockStore",
    fault: "proxy 0–5 ms, every connection cut every 900 ms",
    open: async (s, random) => {
      const proxy = await startProxy({ targetPort: (await s.get("redis")).port, latencyMs: 5, random });
      return listed(s, "redis", () => ({
        store: { redis: proxy.url(), commandTimeoutMs: 300 },
        fault: { every: 900, apply: () => proxy.cut() },
        close: () => proxy.close(),
      }));
    },
  },
  "redis-pause": {
    store: "RedisLockStore",
    fault: PAUSES,
    open: async (s) => listed(s, "redis", (server) => ({ store: { redis: server.url }, fault: pauses({ every: 600, ms: [150, 300] }) })),
  },
  "redis-restart": {
    store: "RedisLockStore",
    fault: RESTART_REDIS,
    open: async (s) => {
      return listed(s, "redis-aof", (server) => ({
        store: { redis: server.url, commandTimeoutMs: 300 },
        client: { ttlMs: 600 },
        fault: restarts(server, { every: 1_000, downMs: 100 }),
      }));
    },
  },
  "redis-mixed-fencing-restart": {
    store: "RedisLockStore, fencing on and off by process",
    fault: RESTART_REDIS,
    open: async (s) => {
      return listed(s, "redis-aof", (server) => ({
        store: [
          { redis: server.url, commandTimeoutMs: 300 },
          { redis: server.url, commandTimeoutMs: 300, fencing: false },
        ],
        client: { ttlMs: 600 },
        fault: restarts(server, { every: 1_000, downMs: 100 }),
      }));
    },
  },
  ioredis: { store: "IoRedisLockStore (ioredis)", fault: "none", open: async (s) => listed(s, "redis", (server) => ({ store: { ioredis: server.url } })) },
  "ioredis-restart": {
    store: "IoRedisLockStore (ioredis)",
    fault: RESTART_REDIS,
    open: async (s) => {
      return listed(s, "redis-aof", (server) => ({
        store: { ioredis: server.url, operationTimeoutMs: 1_000 },
        client: { ttlMs: 600 },
        fault: restarts(server, { every: 1_000, downMs: 100 }),
      }));
    },
  },
  "node-redis": {
    store: "NodeRedisLockStore (redis)",
    fault: "none",
    open: async (s) => listed(s, "redis", (server) => ({ store: { nodeRedis: server.url } })),
  },
  "ioredis-pause": {
    store: "IoRedisLockStore (ioredis)",
    fault: PAUSES,
    open: async (s) => listed(s, "redis", (server) => ({ store: { ioredis: server.url }, fault: pauses({ every: 600, ms: [150, 300] }) })),
  },
  "redis-sentinel-failover": {
    store: "RedisLockStore over Sentinel, minReplicas 1",
    fault: "SENTINEL FAILOVER every 5 s (the replica online before each); TTL 600 ms",
    open: async (s) => {
      const topology = await s.get("sentinel");
      await sentinelsSettled(topology);
      return { store: sentinelStore(topology), client: { ttlMs: FAILOVER_TTL_MS }, fault: sentinelFailovers(topology, { every: 5_000 }) };
    },
  },
  // Without minReplicas a Sentinel failover may lose holds, as the README says: the old
  // master takes writes until the Sentinels demote it, and they are gone when it resyncs.
  // Its violations are shown, not failed on.
  "redis-sentinel-failover-async": {
    store: "RedisLockStore over Sentinel, minReplicas 0 (two holders possible by design)",
    fault: "SENTINEL FAILOVER every 5 s (the replica online before each); TTL 600 ms",
    mayViolate: true,
    open: async (s) => {
      const topology = await s.get("sentinel");
      await sentinelsSettled(topology);
      return {
        store: { ...sentinelStore(topology), minReplicas: 0 },
        client: { ttlMs: FAILOVER_TTL_MS },
        fault: sentinelFailovers(topology, { every: 5_000 }),
      };
    },
  },
  "redis-cluster-failover": {
    store: "RedisLockStore over Redis Cluster",
    fault: "CLUSTER FAILOVER of a key's master every 5 s; TTL 600 ms",
    open: async (s) => {
      const cluster = await s.get("cluster");
      return { store: clusterStore(cluster), client: { ttlMs: FAILOVER_TTL_MS }, fault: clusterFailovers(cluster, { every: 5_000 }) };
    },
  },
  upstash: {
    store: "UpstashLockStore (@upstash/redis, REST)",
    fault: "none",
    open: async (s) => {
      const rest = await s.get("upstash");
      return listed(s, "redis", () => ({ store: { upstash: rest.url, token: rest.token } }));
    },
  },
  "upstash-proxy": {
    store: "UpstashLockStore (@upstash/redis, REST)",
    fault: "proxy latency 0–20 ms",
    open: async (s, random) => {
      const rest = await s.get("upstash");
      const proxy = await startProxy({ targetPort: Number(new URL(rest.url).port), latencyMs: 20, random });
      return listed(s, "redis", () => ({ store: { upstash: proxy.url("http"), token: rest.token }, close: () => proxy.close() }));
    },
  },
  "upstash-pause": {
    store: "UpstashLockStore (@upstash/redis, REST)",
    fault: PAUSES,
    open: async (s) => {
      const rest = await s.get("upstash");
      return listed(s, "redis", () => ({ store: { upstash: rest.url, token: rest.token }, fault: pauses({ every: 600, ms: [150, 300] }) }));
    },
  },
  file: { store: "FileLockStore", fault: "none", processes: 8, open: async () => fileRow({}) },
  "file-kill": {
    store: "FileLockStore",
    fault: "a client process killed with SIGKILL every 400 ms (a new one takes its place)",
    processes: 8,
    open: async () => ({ store: { file: await lockFile() }, fault: kills({ every: 400 }) }),
  },
  "file-fair-kill": {
    store: "FileLockStore, fair locks and semaphores",
    fault: "a client process killed with SIGKILL every 400 ms (a new one takes its place)",
    processes: 8,
    open: async () => ({ store: { file: await lockFile() }, client: FAIR_CLIENT, fault: kills({ every: 400 }) }),
  },
  "file-pause": {
    store: "FileLockStore",
    fault: PAUSES,
    processes: 8,
    open: async () => fileRow({ fault: pauses({ every: 600, ms: [150, 300] }) }),
  },
  postgres: { store: "PostgresLockStore", fault: "none", open: async (s) => listed(s, "postgres", (server) => ({ store: { postgres: server.url } })) },
  // Each connection's chunks 0–20 ms late: a hold's calls on different pool connections
  // overtake each other (a lockAll() release's keys and a due check's give-back, say).
  "postgres-proxy": {
    store: "PostgresLockStore",
    fault: "proxy latency 0–20 ms",
    open: async (s, random) => {
      const server = await s.get("postgres");
      const proxy = await startProxy({ targetPort: server.port, latencyMs: 20, random });
      const url = new URL(server.url);
      url.port = String(proxy.port);
      return listed(s, "postgres", () => ({ store: { postgres: url.href }, close: () => proxy.close() }));
    },
  },
  "postgres-commit": {
    store: "PostgresLockStore",
    fault: "commit latency (fsync on, synchronous_commit on, commit_delay 10 ms); TTL 300 ms",
    open: async (s) => listed(s, "postgres", (server) => ({ store: { postgres: server.url, options: COMMIT_LATENCY }, client: { ttlMs: 300 } })),
  },
  // The store's transactions are READ COMMITTED whatever the session's default: under
  // REPEATABLE READ a transaction's snapshot would predate the key's advisory lock.
  "postgres-repeatable-read": {
    store: "PostgresLockStore, sessions REPEATABLE READ by default",
    fault: "none",
    open: async (s) => listed(s, "postgres", (server) => ({ store: { postgres: server.url, options: REPEATABLE_READ } })),
  },
  "postgres-pause": {
    store: "PostgresLockStore",
    fault: PAUSES,
    open: async (s) => listed(s, "postgres", (server) => ({ store: { postgres: server.url }, fault: pauses({ every: 600, ms: [150, 300] }) })),
  },
  "postgres-restart": {
    store: "PostgresLockStore",
    fault: "PostgreSQL stopped (fast shutdown) and started again every 1.5 s; TTL 600 ms",
    open: async (s) => {
      return listed(s, "postgres", (server) => ({
        store: { postgres: server.url, operationTimeoutMs: 1_000 },
        client: { ttlMs: 600 },
        fault: restarts(server, { every: 1_500, downMs: 0 }),
      }));
    },
  },
  mysql: { store: "MySqlLockStore (MariaDB)", fault: "none", open: async (s) => listed(s, "mysql", (server) => ({ store: { mysql: server.url } })) },
  "mysql-pause": {
    store: "MySqlLockStore (MariaDB)",
    fault: PAUSES,
    open: async (s) => listed(s, "mysql", (server) => ({ store: { mysql: server.url }, fault: pauses({ every: 600, ms: [150, 300] }) })),
  },
  "mysql-restart": {
    store: "MySqlLockStore (MariaDB)",
    fault: "mariadbd stopped (clean shutdown) and started again every 1.5 s; TTL 600 ms",
    open: async (s) => {
      return listed(s, "mysql", (server) => ({
        store: { mysql: server.url, operationTimeoutMs: 1_000 },
        client: { ttlMs: 600 },
        fault: restarts(server, { every: 1_500, downMs: 0 }),
      }));
    },
  },
  "durable-object": {
    store: "DurableObjectLockStore (workerd)",
    fault: "none",
    open: async (s) => ({ store: { durableObject: (await s.get("workerd")).url } }),
  },
  "durable-object-restart": {
    store: "DurableObjectLockStore (workerd)",
    fault: "every key's object restarted (ctx.abort, reloaded from storage) every 700 ms; TTL 600 ms",
    open: async (s) => {
      const worker = await s.get("workerd");
      return { store: { durableObject: worker.url }, client: { ttlMs: 600 }, fault: objectRestarts(worker.mf, { every: 700 }) };
    },
  },
  "durable-object-fair-restart": {
    store: "DurableObjectLockStore (workerd), fair locks and semaphores",
    fault: "every key's object restarted (ctx.abort, reloaded from storage) every 700 ms; TTL 600 ms",
    open: async (s) => {
      const worker = await s.get("workerd");
      return { store: { durableObject: worker.url }, client: { ...FAIR_CLIENT, ttlMs: 600 }, fault: objectRestarts(worker.mf, { every: 700 }) };
    },
  },
  "durable-object-pause": {
    store: "DurableObjectLockStore (workerd)",
    fault: PAUSES,
    open: async (s) => ({ store: { durableObject: (await s.get("workerd")).url }, fault: pauses({ every: 600, ms: [150, 300] }) }),
  },
  etcd: { store: "EtcdLockStore", fault: "none", open: async (s) => listed(s, "etcd", (server) => ({ store: { etcd: server.endpoints } })) },
  "etcd-fair": {
    store: "EtcdLockStore, fair locks and semaphores",
    fault: "none",
    open: async (s) => listed(s, "etcd", (server) => ({ store: { etcd: server.endpoints }, client: FAIR_CLIENT })),
  },
  // The faults that make an outcome uncertain and late.
  "redis-late": {
    store: "RedisLockStore",
    fault: LATE_TEXT("proxy: the clients' bytes", 300),
    open: async (s, random) => {
      const proxy = await startProxy({ targetPort: (await s.get("redis")).port, latencyMs: 2, random });
      return listed(s, "redis", () => ({
        store: { redis: proxy.url(), commandTimeoutMs: 300 },
        client: { longTtl: LONG_TTL, waitMs: LATE_WAITS },
        fault: lateDelivery(proxy, { every: 1_000, ms: [400, 1_200] }),
        close: () => proxy.close(),
      }));
    },
  },
  "ioredis-late": {
    store: "IoRedisLockStore (ioredis)",
    fault: LATE_TEXT("proxy: the clients' bytes", 300),
    open: async (s, random) => {
      const proxy = await startProxy({ targetPort: (await s.get("redis")).port, latencyMs: 2, random });
      return listed(s, "redis", () => ({
        store: { ioredis: proxy.url(), operationTimeoutMs: 300 },
        client: { longTtl: LONG_TTL, waitMs: LATE_WAITS },
        fault: lateDelivery(proxy, { every: 1_000, ms: [400, 1_200] }),
        close: () => proxy.close(),
      }));
    },
  },
  "upstash-late": {
    store: "UpstashLockStore (@upstash/redis, REST)",
    fault: LATE_TEXT("REST endpoint: requests", 300),
    open: async (s) => {
      const rest = await s.get("upstash");
      return listed(s, "redis", () => ({
        store: { upstash: rest.url, token: rest.token, operationTimeoutMs: 300 },
        client: { longTtl: LONG_TTL, waitMs: LATE_WAITS },
        fault: lateDelivery(rest, { every: 1_000, ms: [400, 1_200] }),
      }));
    },
  },
  "postgres-late": {
    store: "PostgresLockStore",
    fault: LATE_TEXT("proxy: the clients' bytes", 300),
    open: async (s, random) => {
      const server = await s.get("postgres");
      const proxy = await startProxy({ targetPort: server.port, latencyMs: 2, random });
      const url = new URL(server.url);
      url.port = String(proxy.port);
      return listed(s, "postgres", () => ({
        store: { postgres: url.href, operationTimeoutMs: 300 },
        client: { longTtl: LONG_TTL, waitMs: LATE_WAITS },
        fault: lateDelivery(proxy, { every: 1_000, ms: [400, 1_200] }),
        close: () => proxy.close(),
      }));
    },
  },
  "mysql-late": {
    store: "MySqlLockStore (MariaDB)",
    fault: LATE_TEXT("proxy: the clients' bytes", 300),
    open: async (s, random) => {
      const server = await s.get("mysql");
      const proxy = await startProxy({ targetPort: server.port, latencyMs: 2, random });
      const url = new URL(server.url);
      url.port = String(proxy.port);
      return listed(s, "mysql", () => ({
        store: { mysql: url.href, operationTimeoutMs: 300 },
        client: { longTtl: LONG_TTL, waitMs: LATE_WAITS },
        fault: lateDelivery(proxy, { every: 1_000, ms: [400, 1_200] }),
        close: () => proxy.close(),
      }));
    },
  },
  "etcd-late": {
    store: "EtcdLockStore",
    fault: "one request in 20 held back 1–2.5 s by the store's fetch (past the 1 000 ms timeout), then sent; waits up to 3 s",
    open: async (s) =>
      listed(s, "etcd", (server) => ({
        store: { etcd: server.endpoints, operationTimeoutMs: 1_000, late: { share: 0.05, ms: [1_000, 2_500] } },
        client: { longTtl: LONG_TTL, waitMs: LATE_WAITS },
      })),
  },
  // The member named three times: a request held back past a third of operationTimeoutMs
  // is sent again (to the "next" member), and the first is applied late after an answer.
  "etcd-fair-late": {
    store: "EtcdLockStore, fair locks and semaphores",
    fault:
      "one request in 20 held back 1–2.5 s by the store's fetch (past the 1 000 ms per member), then sent, while the call goes on at the next member (the one member named thrice, operationTimeoutMs 3 000); waits up to 3 s",
    open: async (s) =>
      listed(s, "etcd", (server) => ({
        store: { etcd: [...server.endpoints, ...server.endpoints, ...server.endpoints], operationTimeoutMs: 3_000, late: { share: 0.05, ms: [1_000, 2_500] } },
        client: { ...FAIR_CLIENT, longTtl: LONG_TTL, waitMs: LATE_WAITS },
      })),
  },
  "postgres-competing": {
    store: "PostgresLockStore",
    fault: "another session holds a key's advisory lock 100–1500 ms every 200 ms (operationTimeoutMs 1 000), waits up to 3 s; " + STALLS_TEXT,
    open: async (s) => {
      const server = await s.get("postgres");
      const competing = await competingSession(server, "postgres", { every: 200, ms: [100, 1_500] });
      return {
        list: cliLister(server.url),
        store: { postgres: server.url, operationTimeoutMs: 1_000 },
        // Waits of up to 3 s: an attempt that outlives the timeout is followed by the next.
        client: { longTtl: LONG_TTL, stalls: STALLS, waitMs: [0, 3_000] },
        fault: competing.fault,
        close: competing.close,
      };
    },
  },
  "mysql-competing": {
    store: "MySqlLockStore (MariaDB)",
    fault: "another session holds a key's row (FOR UPDATE) 100–1500 ms every 200 ms (operationTimeoutMs 1 000), waits up to 3 s; " + STALLS_TEXT,
    open: async (s) => {
      const server = await s.get("mysql");
      const competing = await competingSession(server, "mysql", { every: 200, ms: [100, 1_500] });
      return {
        list: cliLister(server.url),
        store: { mysql: server.url, operationTimeoutMs: 1_000 },
        // Waits of up to 3 s: an attempt that outlives the timeout is followed by the next.
        client: { longTtl: LONG_TTL, stalls: STALLS, waitMs: [0, 3_000] },
        fault: competing.fault,
        close: competing.close,
      };
    },
  },
};

/** `setup` with fair locks and semaphores in its clients (FAIR_CLIENT), the other kinds beside them. */
function withFair(setup) {
  return {
    ...setup,
    store: `${setup.store}, fair locks and semaphores`,
    open: async (s, random) => {
      const opened = await setup.open(s, random);
      return { ...opened, client: { ...FAIR_CLIENT, ...opened.client } };
    },
  };
}

// The Redis stores' fair locks and semaphores: the native engine's queues, the same
// scripts through a user's client (whose answers on places the exact fair-order rule
// reads), across restarts and with replies held back past the command timeout.
for (const name of ["redis", "ioredis", "redis-restart", "redis-late"]) SETUPS[`${name}-fair`] = withFair(SETUPS[name]);
// PostgreSQL's and MySQL's: places and marks in the permits table, across restarts and
// with the clients' bytes held back past the operation timeout.
for (const name of ["postgres", "postgres-restart", "postgres-late", "postgres-repeatable-read", "mysql", "mysql-restart", "mysql-late"]) {
  SETUPS[`${name}-fair`] = withFair(SETUPS[name]);
}
// Fair waiters in a process that is stopped (SIGSTOP) past their places' leases, on each
// kind of queue: Redis's scripts, the SQL stores' rows, a Durable Object's, the lock file's.
for (const name of ["ioredis-pause", "postgres-pause", "mysql-pause", "durable-object-pause", "file-pause"]) {
  SETUPS[`${name}-fair`] = withFair(SETUPS[name]);
}

/** A fresh lock file for a FileLockStore run (in the OS's temporary directory). */
export async function lockFile() {
  const { mkdtemp } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  return join(await mkdtemp(join(tmpdir(), "locksmith-history-")), "locks");
}

/**
 * A table row: store, fault, processes × clients, holds checked, violations, late
 * signals, and how often the fault was applied (— for none, or one that is always on).
 */
export function row(setup, processes, clients, { result, faults, orphans }, applied = true) {
  return `| ${setup.store} | ${setup.fault} | ${processes} × ${clients} | ${result.holds} | ${result.violations.length === 0 ? 0 : Object.values(result.byType).reduce((a, b) => a + b, 0)} | ${result.lateSignals} | ${orphans ? orphans.length : "—"} | ${applied ? faults : "—"} |`;
}

export const HEADER =
  "| store | fault | processes × clients | holds checked | violations | late signals | orphaned holds | faults applied |\n|---|---|---|---|---|---|---|---|";

async function main() {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "60" },
      processes: { type: "string", default: "4" },
      clients: { type: "string", default: "8" },
      // Every row; the WebAssembly build has no FileLockStore, so not its rows there.
      stores: {
        type: "string",
        default: Object.keys(SETUPS)
          .filter((name) => process.env.LOCKSMITH_TARGET !== "wasm" || !name.startsWith("file"))
          .join(","),
      },
      seed: { type: "string" },
      bound: { type: "string", default: "250" },
      "reuse-handles": { type: "boolean", default: false },
      kinds: { type: "string" },
      // A path to load the SQL or etcd store from instead of the package (an older version
      // of it, to see a row catch what was fixed since).
      "store-module": { type: "string" },
    },
  });
  // `--kinds multi=3,lock=1`: how often each kind of hold (or an observer's reads of an
  // election's leader, `observe`) is drawn (client.mjs's DEFAULTS.kinds).
  let kinds;
  if (values.kinds !== undefined) {
    kinds = {};
    for (const pair of values.kinds.split(",")) {
      const m = /^(lock|semaphore|read|write|multi|election|observe)=(\d+(?:\.\d+)?)$/.exec(pair);
      if (!m || Object.hasOwn(kinds, m[1]))
        throw new Error(`bad --kinds entry ${JSON.stringify(pair)}: kind=weight, each kind once (lock, semaphore, read, write, multi, election, observe)`);
      kinds[m[1]] = Number(m[2]);
    }
    if (!Object.values(kinds).some((w) => w > 0)) throw new Error("--kinds needs a weight above 0");
  }
  const seed = values.seed === undefined ? newSeed() : Number(values.seed) >>> 0;
  const seconds = Number(values.seconds);
  const clients = Number(values.clients);
  console.log(`history run: seed ${seed} (replay with --seed ${seed}), ${process.env.LOCKSMITH_TARGET ?? "native"} build, ${seconds} s per row`);
  console.log(HEADER);
  let failed = false;
  const running = servers();
  try {
    for (const name of values.stores.split(",")) {
      const setup = setupFor(name);
      const opened = await setup.open(running, seeded(seed).fork(7));
      const processes = setup.processes ?? Number(values.processes);
      try {
        const module = values["store-module"];
        const run = await runHistory({
          store: module && typeof opened.store === "object" ? { ...opened.store, module: resolve(module) } : opened.store,
          processes,
          clients,
          seconds,
          seed,
          fault: opened.fault,
          check: { signalBoundMs: Number(values.bound), ...opened.check },
          client: { reuseHandles: values["reuse-handles"], ...(kinds && { kinds }), ...opened.client },
          orphans: opened.list ?? null,
        });
        console.log(row(setup, processes, clients, run, Boolean(opened.fault?.apply)));
        // What the faults did: acquires aborted and failed, stalls (not in the table).
        const outcome = (o) => run.attempts.filter((a) => a.outcome === o).length;
        console.error(
          `${name}: acquires aborted ${outcome("aborted")}, failed ${outcome("error")}; ${run.stalls.length} stalls; errors ${JSON.stringify(errorTotals(run))}`,
        );
        if (run.result.violations.length > 0) {
          if (setup.mayViolate) console.error(`${name}: ${JSON.stringify(run.result.byType)} (not promised by this store; not a failure)`);
          else failed = true;
          for (const v of run.result.violations.slice(0, setup.mayViolate ? 2 : 10)) console.error(JSON.stringify(v));
        }
        if (run.orphans?.length > 0) {
          failed = true;
          console.error(
            `${name}: ${run.orphans.length} orphaned hold(s) (seed ${seed}); acquires aborted ${run.attempts.filter((a) => a.outcome === "aborted").length}, failed ${run.attempts.filter((a) => a.outcome === "error").length}`,
          );
          for (const o of run.orphans.slice(0, 5)) console.error(JSON.stringify(o));
        }
      } finally {
        await opened.close?.();
      }
    }
  } finally {
    await running.stop();
  }
  process.exitCode = failed ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
