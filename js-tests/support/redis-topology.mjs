// Redis topologies of the tests' own, on free loopback ports: a master with a replica
// watched by three Sentinels, and a Redis Cluster of three masters with a replica each.
// Every process is a redis-server under redis-server.mjs's watchdog, so none outlives
// the test process. Start one per test file: a cluster takes a few seconds to form.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";

import { freePort, startRedis } from "./redis-server.mjs";
import { until } from "./wait.mjs";

const run = promisify(execFile);

// The poller the topologies wait with, for the tests that use them.
export { until };

/** What RedisLockStore.connect(options) answers: "CODE message" for the error it rejects with, or "connected". */
export async function connectAnswer(options) {
  // The build under test, loaded only here: the history runner's processes use this module too.
  const { ls } = await import("./target.mjs");
  try {
    await ls.RedisLockStore.connect(options);
  } catch (err) {
    return `${err.code} ${err.message}`;
  }
  return "connected";
}

/** One command on a short-lived ioredis connection to `port`. */
export async function command(port, ...args) {
  const client = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  client.on("error", () => {});
  try {
    await client.connect();
    return await client.call(...args);
  } finally {
    client.disconnect();
  }
}

/**
 * A master, a replica and three Sentinels (`redis-server FILE --sentinel`) watching the
 * master as `masterName`, with failure detection after a second. `failover()` runs
 * `SENTINEL FAILOVER` and resolves once the Sentinels name the former replica master
 * and it answers as one. With `tls` (`{ cert, key, ca }` file paths) every server also
 * listens with TLS on `tlsPort`, and the servers talk to each other over TLS only (the
 * plain ports stay for the harness's own commands).
 */
export async function startSentinels({ masterName = "locksmith", tls } = {}) {
  // Replication writes an RDB file into the server's directory: a temporary one.
  const dir = mkdtempSync(join(tmpdir(), "locksmith-sentinel-"));
  const tlsArgs = async () => {
    if (!tls) return { args: [] };
    const tlsPort = await freePort();
    const args = [
      "--tls-port",
      String(tlsPort),
      "--tls-cert-file",
      tls.cert,
      "--tls-key-file",
      tls.key,
      "--tls-ca-cert-file",
      tls.ca,
      "--tls-auth-clients",
      "no",
      "--tls-replication",
      "yes",
    ];
    return { tlsPort, args };
  };
  const masterTls = await tlsArgs();
  // A full resync (the old master after a failover) starts at once, not after the
  // diskless sync's default 5 s wait for more replicas.
  const sync = ["--repl-diskless-sync-delay", "0"];
  const master = await startRedis(["--dir", dir, "--dbfilename", "master.rdb", ...sync, ...masterTls.args]);
  const replicaTls = await tlsArgs();
  const linkPort = tls ? masterTls.tlsPort : master.port;
  const replica = await startRedis(["--dir", dir, "--dbfilename", "replica.rdb", ...sync, ...replicaTls.args, "--replicaof", "127.0.0.1", String(linkPort)]);
  Object.assign(master, { tlsPort: masterTls.tlsPort });
  Object.assign(replica, { tlsPort: replicaTls.tlsPort });
  const servers = [master, replica];
  await until("the replica to sync", async () => /master_link_status:up/.test(await command(replica.port, "INFO", "replication")));
  const sentinels = [];
  for (let i = 0; i < 3; i++) {
    const config = join(dir, `sentinel-${i}.conf`);
    const sentinelTls = await tlsArgs();
    const tlsLines = tls
      ? [
          `tls-port ${sentinelTls.tlsPort}`,
          `tls-cert-file ${tls.cert}`,
          `tls-key-file ${tls.key}`,
          `tls-ca-cert-file ${tls.ca}`,
          "tls-auth-clients no",
          "tls-replication yes",
        ]
      : [];
    writeFileSync(
      config,
      [
        `dir ${dir}`,
        ...tlsLines,
        `sentinel monitor ${masterName} 127.0.0.1 ${linkPort} 2`,
        `sentinel down-after-milliseconds ${masterName} 1000`,
        `sentinel failover-timeout ${masterName} 4000`,
        "",
      ].join("\n"),
    );
    const sentinel = await startRedis(["--sentinel"], { config });
    sentinels.push(Object.assign(sentinel, { tlsPort: sentinelTls.tlsPort }));
  }
  const masterPort = async (sentinel = sentinels[0]) => {
    const addr = await command(sentinel.port, "SENTINEL", "get-master-addr-by-name", masterName);
    return Number(addr[1]);
  };
  // A failover needs the replica known to every Sentinel, and the Sentinels known to
  // each other (they meet through the master's hello channel, every 2 s).
  await until("the sentinels to find the replica and each other", async () => {
    for (const sentinel of sentinels) {
      const replicas = await command(sentinel.port, "SENTINEL", "replicas", masterName);
      const peers = await command(sentinel.port, "SENTINEL", "sentinels", masterName);
      if (replicas.length < 1 || peers.length < 2) return false;
      if (!replicas.some((r) => r.join(" ").includes("master-link-status ok") || !r.includes("master-link-status"))) return false;
    }
    return true;
  });
  return {
    masterName,
    master,
    replica,
    sentinels,
    urls: sentinels.map((s) => s.url),
    masterPort,
    /** The server that is master now. */
    async currentMaster() {
      const port = await masterPort();
      return servers.find((s) => s.port === port || s.tlsPort === port);
    },
    /** Forces a failover; resolves with the new master once it answers as master. */
    async failover() {
      const before = await masterPort();
      await command(sentinels[0].port, "SENTINEL", "FAILOVER", masterName);
      await until("the failover", async () => {
        const after = await masterPort();
        if (after === before) return false;
        const role = await command(after, "ROLE");
        return role[0] === "master";
      });
      return servers.find((s) => s.port !== before);
    },
    async stop() {
      await Promise.all([...sentinels, ...servers].map((s) => s.stop()));
    },
  };
}

/** Runs redis-cli with `args`; resolves with its output. */
export async function redisCli(...args) {
  const { stdout } = await run(process.env.REDIS_CLI ?? "redis-cli", args, { timeout: 60_000 });
  return stdout;
}

/** `CLUSTER SLOTS` as `[{ first, last, port, replicas: [port] }]`. */
export async function clusterSlots(port) {
  const slots = await command(port, "CLUSTER", "SLOTS");
  return slots.map(([first, last, master, ...replicas]) => ({ first, last, port: master[1], replicas: replicas.map((r) => r[1]) }));
}

/**
 * A Redis Cluster of three masters with a replica each (`redis-server --cluster-enabled
 * yes` + `redis-cli --cluster create … --cluster-replicas 1`), nodes failing over after
 * a second. `urls` are the seed URLs (every node).
 */
export async function startCluster() {
  const dir = mkdtempSync(join(tmpdir(), "locksmith-cluster-"));
  const nodes = [];
  for (let i = 0; i < 6; i++) {
    nodes.push(
      await startRedis([
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(dir, `nodes-${i}.conf`),
        "--cluster-node-timeout",
        "1000",
        "--dir",
        dir,
        "--dbfilename",
        `node-${i}.rdb`,
        "--repl-diskless-sync-delay",
        "0",
      ]),
    );
  }
  await redisCli("--cluster", "create", ...nodes.map((n) => `127.0.0.1:${n.port}`), "--cluster-replicas", "1", "--cluster-yes");
  await until(
    "the cluster to form",
    async () => {
      for (const node of nodes) {
        if (!/cluster_state:ok/.test(await command(node.port, "CLUSTER", "INFO"))) return false;
        const known = (await command(node.port, "CLUSTER", "NODES")).trim().split("\n");
        if (known.length < 6 || known.some((line) => !line.includes(" connected"))) return false;
      }
      const slots = await clusterSlots(nodes[0].port);
      return slots.length >= 3 && slots.every((s) => s.replicas.length === 1);
    },
    30_000,
  );
  return {
    nodes,
    urls: nodes.map((n) => n.url),
    node: (port) => nodes.find((n) => n.port === port),
    /** The master ports, one per slot range. */
    async masters(via = nodes.find((n) => n.pid)?.port ?? nodes[0].port) {
      return [...new Set((await clusterSlots(via)).map((s) => s.port))];
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}
