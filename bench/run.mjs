// `npm run bench`: locksmith against the libraries users would otherwise pick, in one
// process run, rounds interleaved (each round runs every contender once), and leader
// election's takeover times on every store (bench/election.mjs). Writes
// bench/results/<timestamp>.json (one file per run), BENCHMARKS.md and bench/results/chart.svg.
// BENCH_ROUNDS (default 5) and BENCH_QUICK=1 (smaller runs) tune the effort; a quick run
// writes to bench/results/tmp/ instead (see the end of this file).
// `node bench/run.mjs election` (or any of the WORKLOADS below) runs those workloads only:
// its results file has only theirs, and of BENCHMARKS.md it rewrites only the election
// and fair locks sections (the rest stays the last full run's). `fair` (bench/fair.mjs):
// what fair locks cost against unfair ones, per store with fair queues.
// The native RedisLockStore runs in both modes, fenced and `fencing: false`, as does the
// store over users' ioredis clients; every figure of theirs names its mode. For each Redis
// workload the bench also takes the server's CPU and each command type's time per pair
// (INFO cpu, INFO commandstats) and, at concurrency 1, the bare floor: each contender's
// pair replayed from a minimal RESP client (bench/server-cost.mjs), so BENCHMARKS.md says
// where the Redis time goes from this run's figures.
// Every critical section is checked for mutual exclusion (bench/exclusion.mjs); a run that
// sees an overlap still writes its results, then exits non-zero.
// `node bench/run.mjs --self-test` shows the check failing on a lock that is not one, and
// the contended workload's round-trip count (bench/round-trips.mjs) counting known traffic
// exactly and refusing counts it cannot trust, and the bare floor making the server run
// what a locksmith pair of each mode does.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { Mutex as AsyncMutex } from "async-mutex";
import { Cluster, Redis } from "ioredis";
import Redlock from "redlock";
import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock";
import { Mutex as SemaphoreMutex } from "redis-semaphore";
import { Miniflare } from "miniflare";

import * as native from "../js/node.mjs";
import * as wasm from "../js/wasm.mjs";
import { startRedis } from "../js-tests/support/redis-server.mjs";
import { startCluster } from "../js-tests/support/redis-topology.mjs";
import { IoRedisLockStore } from "../js/stores/ioredis.mjs";
import { PlainLock } from "./baseline.mjs";
import { concurrentSections, contendOnOneKey, exclusionCheck, exclusionVerdict } from "./exclusion.mjs";
import { electionBench, electionSelfTest, electionVerdict } from "./election.mjs";
import { fairBench, fairVerdict } from "./fair.mjs";
import { FENCED, isFull, pingsName, UNFENCED } from "./report.mjs";
import { countRequests, knownTraffic } from "./round-trips.mjs";
import { capturePair, replay, respClient, SCRIPT_COMMANDS, sampleServer, serverCost } from "./server-cost.mjs";
import { jainIndex, median, percentile, summarize } from "./stats.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const QUICK = process.env.BENCH_QUICK === "1";
const scale = (n) => (QUICK ? Math.max(1, Math.floor(n / 10)) : n);
const log = (...a) => console.log(...a);
const now = () => performance.now();
/** The native build, as the election workload's leader processes import it too. */
const nativeBuild = { ls: native, entry: new URL("../js/node.mjs", import.meta.url).href };

/** The workloads, in the order a run makes them. */
const WORKLOADS = ["memory", "redis", "file", "cluster", "ceiling", "wasm", "election", "fair"];
const asked = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const unknown = asked.filter((w) => !WORKLOADS.includes(w));
if (unknown.length) {
  console.error(`locksmith bench: no workload ${unknown.join(", ")}; the workloads are ${WORKLOADS.join(", ")}`);
  process.exit(2);
}
const selected = asked.length ? WORKLOADS.filter((w) => asked.includes(w)) : WORKLOADS;

/** Per workload and contender: critical sections run and overlaps seen, over every round. */
const exclusion = {};
function recordExclusion(workload, name, { sections, overlaps }) {
  const r = ((exclusion[workload] ??= {})[name] ??= { sections: 0, overlaps: 0 });
  r.sections += sections;
  r.overlaps += overlaps;
  if (overlaps) console.error(`  !! ${workload} | ${name}: ${overlaps} overlapping critical sections`);
}

/**
 * Runs `contenders` (name → async () => number) ROUNDS times, interleaved. The order
 * turns by one each round, so no contender always runs first or right after the same
 * other one (a GC debt or a warm cache left behind hits each in turn).
 */
async function interleaved(label, contenders, { warm = true } = {}) {
  const samples = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
  const entries = Object.entries(contenders);
  if (warm) await warmUp(label, contenders);
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < entries.length; i++) {
      const [name, run] = entries[(i + round) % entries.length];
      samples[name].push(await run());
    }
  }
  const out = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)]));
  for (const [name, s] of Object.entries(out)) log(`  ${label} | ${name}: median ${fmt(s.median)} (min ${fmt(s.min)}, max ${fmt(s.max)})`);
  return out;
}

/**
 * Runs each contender's workload once, untimed, before the timed rounds, the same for
 * every contender. V8 optimizes a library's hot path only after many calls: on this
 * machine locksmith's Redis path took about three rounds of the concurrency-64 workload
 * (25,600 pairs each) to settle, the peers on ioredis one or two, so a first round
 * measured how soon each library gets compiled rather than what it costs in a service
 * that has been taking locks for a while.
 */
async function warmUp(label, contenders) {
  log(`  ${label}: warm-up (untimed)`);
  for (const run of Object.values(contenders)) await run();
}

const fmt = (n) => (n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(3));

// ---------------------------------------------------------------------------------
// Memory

async function sequentialPairs(make, n) {
  const l = make();
  const t = now();
  for (let i = 0; i < n; i++) {
    await l.acquire();
    await l.release();
  }
  return n / ((now() - t) / 1000);
}

/** `loops` concurrent loops of run() over 1 000 keys; each critical section holds across one turn. */
async function concurrentRuns(name, runOn, loops, perLoop) {
  const check = exclusionCheck();
  const t = now();
  await concurrentSections(runOn, { loops, perLoop, check });
  const rate = check.sections / ((now() - t) / 1000);
  recordExclusion("memory run() ×64", name, check);
  return rate;
}

async function memoryBench() {
  log("memory");
  const nativeStore = new native.MemoryLockStore();
  const wasmStore = new wasm.MemoryLockStore();
  const mutexes = new Map();
  const mutexFor = (key) => {
    let m = mutexes.get(key);
    if (!m) mutexes.set(key, (m = new AsyncMutex()));
    return m;
  };
  const n = scale(200_000);
  const sequential = await interleaved("sequential pairs/s", {
    "locksmith (native)": () => sequentialPairs(() => new native.Lock("invoice:42", 30_000, nativeStore), n),
    "plain-JS baseline": () => sequentialPairs(() => new PlainLock("invoice:42"), n),
    "async-mutex": () =>
      sequentialPairs(() => {
        const m = new AsyncMutex();
        let release;
        return { acquire: async () => ((release = await m.acquire()), true), release: async () => (release(), true) };
      }, n),
    "locksmith (wasm)": () => sequentialPairs(() => new wasm.Lock("invoice:42", 30_000, wasmStore), n),
  });
  const per = scale(3_000);
  const concurrent = await interleaved("64 loops × run() over 1000 keys, runs/s", {
    "locksmith (native)": () => concurrentRuns("locksmith (native)", (key, fn) => new native.Lock(key, 30_000, nativeStore).run(fn), 64, per),
    "plain-JS baseline": () => concurrentRuns("plain-JS baseline", (key, fn) => new PlainLock(key).run(fn), 64, per),
    "async-mutex": () => concurrentRuns("async-mutex", (key, fn) => mutexFor(key).runExclusive(fn), 64, per),
    "locksmith (wasm)": () => concurrentRuns("locksmith (wasm)", (key, fn) => new wasm.Lock(key, 30_000, wasmStore).run(fn), 64, per),
  });
  return { sequential, concurrent };
}

// ---------------------------------------------------------------------------------
// One host, no server: FileLockStore, proper-lockfile, and RedisLockStore on loopback

/** Concurrency 1: the p50 of `n` acquire+release pairs of `once()`, in µs. */
async function pairP50(once, n) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const t = now();
    await once(i);
    times.push((now() - t) * 1000);
  }
  return median(times);
}

async function fileBench(server) {
  log("one host");
  const dir = mkdtempSync(join(os.tmpdir(), "locksmith-bench-file-"));
  const store = await native.FileLockStore.open(join(dir, "locks"));
  const redisStore = await native.RedisLockStore.connect(server.url);
  const unfencedStore = await native.RedisLockStore.connect({ url: server.url, fencing: false });
  const lockfile = (await import("proper-lockfile")).default;
  // proper-lockfile locks a file path (a directory beside it, with its mtime refreshed).
  const resources = Array.from({ length: 100 }, (_, i) => join(dir, `resource-${i}`));
  for (const path of resources) writeFileSync(path, "");
  const n = scale(3_000);
  try {
    const c1 = await interleaved("concurrency 1, pair p50 µs", {
      "locksmith FileLockStore": () =>
        pairP50(async (i) => {
          const l = new native.Lock(`file:${i % 100}`, 30_000, store);
          if (!(await l.acquire())) throw new Error("locksmith bench: a free key was refused");
          await l.release();
        }, n),
      "proper-lockfile": () =>
        pairP50(async (i) => {
          const release = await lockfile.lock(resources[i % 100], { realpath: false, retries: 0 });
          await release();
        }, n),
      "RedisLockStore on loopback (fenced)": () =>
        pairP50(async (i) => {
          const l = new native.Lock(`file-bench:${i % 100}`, 30_000, redisStore);
          if (!(await l.acquire())) throw new Error("locksmith bench: a free key was refused");
          await l.release();
        }, n),
      "RedisLockStore on loopback (fencing: false)": () =>
        pairP50(async (i) => {
          const l = new native.Lock(`file-bench-unfenced:${i % 100}`, 30_000, unfencedStore);
          if (!(await l.acquire())) throw new Error("locksmith bench: a free key was refused");
          await l.release();
        }, n),
    });
    return { c1 };
  } finally {
    await store.close();
    await redisStore.close();
    await unfencedStore.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------
// Redis

/**
 * The Redis contenders, by name: each makes its own clients and returns `once(key)` (one
 * acquire + release that must succeed), `wait(key, fn)` (wait for the lock, run `fn`,
 * release) and `close()`. locksmith runs in both modes: fenced (the default: every hold
 * gets a fencing token from the acquire script) and `fencing: false` (one plain
 * `SET NX PX` per acquire, holds without tokens), natively and over the users' own ioredis
 * client (locksmith-js/ioredis). All peers run on ioredis; the waiting ones poll every 20 ms.
 */
const redisContenders = {
  [FENCED]: async (url) => storeContender(await native.RedisLockStore.connect(url)),
  [UNFENCED]: async (url) => storeContender(await native.RedisLockStore.connect({ url, fencing: false })),
  "locksmith-js/ioredis (fenced)": async (url) => clientStoreContender(new Redis(url), {}),
  "locksmith-js/ioredis (fencing: false)": async (url) => clientStoreContender(new Redis(url), { fencing: false }),
  redlock: async (url) => redlockContender(Redlock, url),
  "@sesamecare-oss/redlock": async (url) => redlockContender(SesameRedlock, url),
  "redis-semaphore": async (url) => semaphoreContender(new Redis(url)),
  // The same library on a client that sends the commands of one event-loop turn as one
  // pipeline.
  "redis-semaphore (auto-pipelining)": async (url) => semaphoreContender(new Redis(url, { enableAutoPipelining: true })),
};

function storeContender(store, close = () => store.close()) {
  return {
    once: async (key) => {
      const l = new native.Lock(key, 30_000, store);
      if (!(await l.acquire())) throw new Error("not acquired");
      await l.release();
    },
    wait: async (key, fn) => {
      const l = new native.Lock(key, 30_000, store);
      if (!(await l.acquire({ timeout: 60_000, retryDelay: 20 }))) throw new Error("timed out");
      await fn();
      await l.release();
    },
    close,
  };
}

function clientStoreContender(client, options) {
  const store = new IoRedisLockStore(client, options);
  return storeContender(store, async () => {
    await store.close();
    await client.quit();
  });
}

function redlockContender(Kind, url) {
  const clients = [new Redis(url), new Redis(url)];
  const once = new Kind([clients[0]], { retryCount: 0 });
  const waiting = new Kind([clients[1]], { retryCount: 1_000, retryDelay: 20, retryJitter: 5 });
  return {
    once: async (key) => (await once.acquire([key], 30_000)).release(),
    wait: async (key, fn) => {
      const l = await waiting.acquire([key], 30_000);
      await fn();
      await l.release();
    },
    close: () => Promise.all(clients.map((c) => c.quit())),
  };
}

function semaphoreContender(client) {
  return {
    once: async (key) => {
      const m = new SemaphoreMutex(client, key, { lockTimeout: 30_000, acquireAttemptsLimit: 1 });
      await m.acquire();
      await m.release();
    },
    wait: async (key, fn) => {
      const m = new SemaphoreMutex(client, key, { lockTimeout: 30_000, acquireTimeout: 60_000, retryInterval: 20 });
      await m.acquire();
      await fn();
      await m.release();
    },
    close: () => client.quit(),
  };
}

async function redisPeers(url) {
  const peers = {};
  for (const [name, make] of Object.entries(redisContenders)) peers[name] = await make(url);
  return { peers, close: () => Promise.all(Object.values(peers).map((p) => p.close())) };
}

/**
 * Client round trips per critical section of each contender on the contended workload, in
 * a pass of its own (MONITOR slows the server): a fresh instance of the contender, warmed
 * up, then 16 workers on one key for `ms` while the server shows what its connections send.
 */
async function roundTrips(server, admin, ms) {
  const out = {};
  for (const [name, make] of Object.entries(redisContenders)) {
    const key = `round-trips:${name}`;
    let peer;
    try {
      const counted = await countRequests(
        admin,
        server.port,
        async () => {
          peer = await make(server.url);
          await contendOnOneKey(peer.wait, { key, workers: 16, ms: Math.min(300, ms) });
        },
        () => contendOnOneKey(peer.wait, { key, workers: 16, ms }),
      );
      const { sections, overlaps } = counted.result;
      recordExclusion("Redis contended", name, { sections, overlaps });
      if (sections === 0) throw new Error(`locksmith bench: ${name} ran no critical section while its round trips were counted`);
      const perCritical = counted.requests / sections;
      // Every critical section takes at least one request to acquire: fewer is a miscount.
      if (perCritical < 1) throw new Error(`locksmith bench: ${name}: ${counted.requests} requests for ${sections} critical sections cannot be right`);
      out[name] = {
        perCritical,
        requests: counted.requests,
        scriptedCommands: counted.scripted,
        connections: counted.connections,
        criticals: sections,
        criticalsPerSec: sections / (ms / 1000),
      };
      log(
        `  ${name}: ${fmt(perCritical)} client round trips per critical (${counted.requests} requests on ${counted.connections} connections, ${sections} criticals under MONITOR; ${counted.others} commands from other connections meanwhile)`,
      );
    } finally {
      await peer?.close();
    }
  }
  return out;
}

/** The medians over rounds of `serverCost()`s: CPU and scripts' µs per unit, each command type's calls and µs. */
function medianCost(list) {
  const names = [...new Set(list.flatMap((c) => Object.keys(c.commands)))];
  const commands = Object.fromEntries(
    names.map((n) => [n, { calls: median(list.map((c) => c.commands[n]?.calls ?? 0)), usec: median(list.map((c) => c.commands[n]?.usec ?? 0)) }]),
  );
  return { cpuUs: summarize(list.map((c) => c.cpuUs)), scriptsUs: median(list.map((c) => c.scriptsUs)), commands };
}

/** `evalsha 2× 8.1 µs, set 2× 1.2 µs, ...`: a cost's command types, most time first. */
const commandList = (commands) =>
  Object.entries(commands)
    .filter(([, v]) => v.calls >= 0.005)
    .sort((a, b) => b[1].usec - a[1].usec)
    .map(([n, v]) => `${n} ${v.calls.toFixed(v.calls % 1 ? 2 : 0)}× ${v.usec.toFixed(2)} µs`)
    .join(", ");

function logCosts(what, costs, unit = "pair") {
  for (const [name, c] of Object.entries(costs))
    log(`  server ${what} | ${name}: CPU ${c.cpuUs.median.toFixed(2)} µs per ${unit}, scripts ${c.scriptsUs.toFixed(2)} µs (${commandList(c.commands)})`);
}

/**
 * Measures `run()` (which makes `units` pairs or critical sections) and pushes what the
 * server spent per unit to `costs[name]`, and this process's CPU per unit to `node[name]`.
 */
async function costed(admin, costs, node, name, units, run) {
  const before = await sampleServer(admin);
  const cpu = process.cpuUsage();
  const out = await run();
  const used = process.cpuUsage(cpu);
  (node[name] ??= []).push((used.user + used.system) / (typeof units === "function" ? units(out) : units));
  (costs[name] ??= []).push(serverCost(before, await sampleServer(admin), typeof units === "function" ? units(out) : units));
  return out;
}

/**
 * The commands one pair of each contender sends, seen by MONITOR: a fresh instance, warmed
 * up on its key, then one pair. The bare floor replays them.
 */
async function capturePairs(server, admin) {
  const out = {};
  for (const [name, make] of Object.entries(redisContenders)) {
    const key = `floor:${name}`;
    let peer;
    try {
      const captured = await capturePair(
        admin,
        server.port,
        async () => {
          peer = await make(server.url);
          for (let i = 0; i < 20; i++) await peer.once(key);
        },
        () => peer.once(key),
      );
      out[name] = captured;
      const scripted = captured.scripted.length ? ` (its scripts run ${captured.scripted.join(", ")})` : "";
      log(`  a pair of ${name}: ${captured.commands.map((c) => c[0].toUpperCase()).join(", ")}${scripted}`);
    } finally {
      await peer?.close();
    }
  }
  return out;
}

/**
 * Whether two costs ran the same command types about as many times per unit (a client that
 * sends a script's source once, EVAL, before its hash, EVALSHA, runs the same script).
 */
function sameCalls(a, b) {
  const calls = (cost) => {
    const out = {};
    for (const [n, v] of Object.entries(cost.commands)) {
      const family = SCRIPT_COMMANDS.includes(n) ? "scripts" : n;
      out[family] = (out[family] ?? 0) + v.calls;
    }
    return out;
  };
  const [x, y] = [calls(a), calls(b)];
  return [...new Set([...Object.keys(x), ...Object.keys(y)])].every((n) => Math.abs((x[n] ?? 0) - (y[n] ?? 0)) < 0.05);
}

async function redisBench(server) {
  log("redis");
  const admin = new Redis(server.url);
  log("  the commands of one pair (MONITOR)");
  const captured = await capturePairs(server, admin).catch(async (err) => {
    await admin.quit();
    throw err;
  });
  const { peers, close } = await redisPeers(server.url);
  const raw = await respClient(server.port);
  const costs = { c1: {}, floor: {}, c64: {}, contended: {} };
  const nodeCpu = { c1: {}, floor: {}, c64: {}, contended: {} };
  try {
    // Every contender warms up before the rounds (see warmUp()), the same way: three rounds'
    // worth of the concurrency-64 workload, then a short contended pass. The rounds below
    // record costs as they go, so they are not warmed one by one.
    const per = scale(400);
    log("  warm-up (untimed): concurrency 64 and contended, each contender");
    for (const [name, p] of Object.entries(peers)) {
      await Promise.all(
        Array.from({ length: 64 }, async (_, j) => {
          for (let i = 0; i < 3 * per; i++) await p.once(`warm:${name}:${j}`);
        }),
      );
      const warm = await contendOnOneKey(p.wait, { key: `warm-contended:${name}`, workers: 16, ms: QUICK ? 100 : 500 });
      recordExclusion("Redis contended", name, warm);
    }
    // Concurrency 1: pair latency.
    const n1 = scale(2_000);
    const latency = {};
    const c1 = await interleaved(
      "concurrency 1, pair p50 µs",
      Object.fromEntries(
        Object.entries(peers).map(([name, p]) => [
          name,
          () =>
            costed(admin, costs.c1, nodeCpu.c1, name, n1, async () => {
              const times = [];
              for (let i = 0; i < n1; i++) {
                const t = now();
                await p.once(`c1:${name}:${i % 100}`);
                times.push((now() - t) * 1000);
              }
              (latency[name] ??= []).push(percentile(times, 99));
              return median(times);
            }),
        ]),
      ),
      { warm: false },
    );
    const p99 = Object.fromEntries(Object.entries(latency).map(([k, v]) => [k, summarize(v)]));
    // The bare floor at concurrency 1: each contender's pair (the commands MONITOR showed)
    // from a minimal RESP client, each command after the previous reply; and as many PINGs
    // as locksmith's pair has commands: the round trips alone.
    const floorRuns = Object.fromEntries(Object.entries(captured).map(([name, c]) => [name, () => replay(raw, c.commands)]));
    const pings = Array.from({ length: captured[FENCED].commands.length }, () => ["PING"]);
    floorRuns[pingsName(pings.length)] = () => replay(raw, pings);
    for (const pair of Object.values(floorRuns)) for (let i = 0; i < 100; i++) await pair(); // warm-up
    const floor = await interleaved(
      "concurrency 1, the same commands from a bare RESP client, pair p50 µs",
      Object.fromEntries(
        Object.entries(floorRuns).map(([name, pair]) => [
          name,
          () =>
            costed(admin, costs.floor, nodeCpu.floor, name, n1, async () => {
              const times = [];
              for (let i = 0; i < n1; i++) {
                const t = now();
                await pair();
                times.push((now() - t) * 1000);
              }
              return median(times);
            }),
        ]),
      ),
      { warm: false },
    );
    // Concurrency 64, distinct keys: pairs/s, and the CPU each side spends per pair (the
    // server's from INFO, this process's from process.cpuUsage()): the two take turns, so
    // whichever spends more per pair bounds the rate.
    const c64 = await interleaved(
      "concurrency 64 distinct keys, pairs/s",
      Object.fromEntries(
        Object.entries(peers).map(([name, p]) => [
          name,
          () =>
            costed(admin, costs.c64, nodeCpu.c64, name, 64 * per, async () => {
              const t = now();
              await Promise.all(
                Array.from({ length: 64 }, async (_, j) => {
                  for (let i = 0; i < per; i++) await p.once(`c64:${name}:${j}`);
                }),
              );
              return (64 * per) / ((now() - t) / 1000);
            }),
        ]),
      ),
      { warm: false },
    );
    // Contended: 16 workers on one key; each critical section yields a turn while held.
    const seconds = QUICK ? 1 : 3;
    const gaps = {};
    const commands = {};
    const fairness = {};
    const contended = await interleaved(
      "16 workers on one key, criticals/s",
      Object.fromEntries(
        Object.entries(peers).map(([name, p]) => [
          name,
          async () => {
            const key = `contended:${name}`;
            const before = await totalCommands(admin);
            const { events, sections, overlaps, perWorker } = await costed(
              admin,
              costs.contended,
              nodeCpu.contended,
              name,
              (r) => r.sections,
              () => contendOnOneKey(p.wait, { key, workers: 16, ms: seconds * 1000 }),
            );
            recordExclusion("Redis contended", name, { sections, overlaps });
            (fairness[name] ??= []).push(jainIndex(perWorker));
            const criticals = sections;
            const gapList = [];
            for (let i = 1; i + 1 < events.length; i += 2) gapList.push((events[i + 1][1] - events[i][1]) * 1000);
            (gaps[name] ??= { p50: [], p99: [] }).p50.push(percentile(gapList, 50));
            gaps[name].p99.push(percentile(gapList, 99));
            // Less the two INFO calls of the cost's samples and the one of this count.
            const used = (await totalCommands(admin)) - before - 3;
            (commands[name] ??= []).push(used / criticals);
            return criticals / seconds;
          },
        ]),
      ),
      { warm: false },
    );
    const handoff = Object.fromEntries(Object.entries(gaps).map(([k, v]) => [k, { p50: summarize(v.p50), p99: summarize(v.p99) }]));
    for (const [k, v] of Object.entries(handoff))
      log(
        `  release→acquire gap | ${k}: p50 ${fmt(v.p50.median)} µs, p99 ${fmt(v.p99.median)} µs; ${fmt(median(commands[k]))} commands per critical; fairness ${median(fairness[k]).toFixed(3)}`,
      );
    const perCritical = Object.fromEntries(Object.entries(commands).map(([k, v]) => [k, summarize(v)]));
    const jain = Object.fromEntries(Object.entries(fairness).map(([k, v]) => [k, summarize(v)]));
    log("  client round trips per critical (one pass each under MONITOR)");
    const trips = await roundTrips(server, admin, 1000);

    const serverCosts = Object.fromEntries(
      Object.entries(costs).map(([w, byName]) => [w, Object.fromEntries(Object.entries(byName).map(([k, v]) => [k, medianCost(v)]))]),
    );
    const nodeCpuPer = Object.fromEntries(
      Object.entries(nodeCpu).map(([w, byName]) => [w, Object.fromEntries(Object.entries(byName).map(([k, v]) => [k, summarize(v)]))]),
    );
    // A floor that did not make the server do what the client's pair does is not its floor.
    const sameCommands = Object.fromEntries(Object.keys(captured).map((k) => [k, sameCalls(serverCosts.floor[k], serverCosts.c1[k])]));
    logCosts("at c=1", serverCosts.c1);
    logCosts("at c=1, the bare floor", serverCosts.floor);
    for (const [k, same] of Object.entries(sameCommands))
      if (!same) log(`  !! the bare floor of ${k} did not run the same commands per pair as its client (the keys' state differs?)`);
    logCosts("at c=64", serverCosts.c64);
    for (const [k, v] of Object.entries(nodeCpuPer.c64)) log(`  node CPU at c=64 | ${k}: ${v.median.toFixed(2)} µs per pair`);
    logCosts("contended", serverCosts.contended, "critical");
    return {
      c1,
      c1p99: p99,
      floor: {
        p50: floor,
        commands: Object.fromEntries(
          Object.entries(captured).map(([k, v]) => [k, { commands: v.commands.map((c) => c[0].toUpperCase()), scripted: v.scripted }]),
        ),
        sameCommands,
      },
      c64,
      serverCpuPerPair: Object.fromEntries(Object.entries(serverCosts.c64).map(([k, v]) => [k, v.cpuUs])),
      serverCost: serverCosts,
      nodeCpuPerPair: nodeCpuPer,
      contended: { criticals: contended, handoff, commandsPerCritical: perCritical, fairness: jain, roundTrips: trips },
    };
  } finally {
    raw.close();
    await close();
    await admin.quit();
  }
}

// ---------------------------------------------------------------------------------
// Redis Cluster: three masters (a replica each), 64 loops on distinct keys, which the
// keys' hash slots spread over the masters.

async function clusterBench() {
  log("redis cluster");
  const cluster = await startCluster();
  const seeds = cluster.urls.map((url) => ({ host: "127.0.0.1", port: Number(new URL(url).port) }));
  const clients = [];
  const ioCluster = () => {
    const c = new Cluster(seeds);
    clients.push(c);
    return c;
  };
  const store = await native.RedisLockStore.connect({ cluster: cluster.urls });
  const unfenced = await native.RedisLockStore.connect({ cluster: cluster.urls, fencing: false });
  const theirs = new IoRedisLockStore(ioCluster());
  const semClient = ioCluster();
  const pair = (s) => async (key) => {
    const l = new native.Lock(key, 30_000, s);
    if (!(await l.acquire())) throw new Error("not acquired");
    await l.release();
  };
  const peers = {
    "locksmith (cluster, fenced)": pair(store),
    "locksmith (cluster, fencing: false)": pair(unfenced),
    "locksmith-js/ioredis on an ioredis Cluster (fenced)": pair(theirs),
    "redis-semaphore on an ioredis Cluster": async (key) => {
      const m = new SemaphoreMutex(semClient, key, { lockTimeout: 30_000, acquireAttemptsLimit: 1 });
      await m.acquire();
      await m.release();
    },
  };
  try {
    const per = scale(400);
    const c64 = await interleaved(
      "cluster, concurrency 64 distinct keys, pairs/s",
      Object.fromEntries(
        Object.entries(peers).map(([name, once]) => [
          name,
          async () => {
            const t = now();
            await Promise.all(
              Array.from({ length: 64 }, async (_, j) => {
                for (let i = 0; i < per; i++) await once(`cluster:${name}:${j}`);
              }),
            );
            return (64 * per) / ((now() - t) / 1000);
          },
        ]),
      ),
    );
    return { masters: (await cluster.masters()).length, c64 };
  } finally {
    await store.close();
    await unfenced.close();
    await theirs.close();
    for (const c of clients) c.disconnect();
    await cluster.stop();
  }
}

async function totalCommands(admin) {
  const info = await admin.info("stats");
  return Number(/total_commands_processed:(\d+)/.exec(info)[1]);
}

function ceiling(server) {
  log("redis-benchmark ceiling");
  const sha = execFileSync("redis-cli", ["-p", String(server.port), "SCRIPT", "LOAD", readFileSync(join(root, "redis/src/lua/release.lua"), "utf8")])
    .toString()
    .trim();
  const bench = (pipeline, args) => {
    const out = execFileSync("redis-benchmark", [
      "-p",
      String(server.port),
      "-c",
      "64",
      "-n",
      String(scale(200_000)),
      "-r",
      "100000",
      "-P",
      String(pipeline),
      "-q",
      ...args,
    ]).toString();
    return Number(/([\d.]+) requests per second/.exec(out.split("\r").pop())[1]);
  };
  const result = {};
  for (const pipeline of [1, 16]) {
    const set = bench(pipeline, ["SET", "bench:__rand_int__", "owner", "PX", "30000", "NX"]);
    const release = bench(pipeline, ["EVALSHA", sha, "1", "bench:__rand_int__", "owner"]);
    result[`P${pipeline}`] = { setPerSec: set, releasePerSec: release, pairsPerSec: 1 / (1 / set + 1 / release) };
    log(`  -P ${pipeline}: SET NX PX ${fmt(set)}/s, release ${fmt(release)}/s → ${fmt(result[`P${pipeline}`].pairsPerSec)} pairs/s`);
  }
  return result;
}

// ---------------------------------------------------------------------------------
// wasm

async function wasmBench() {
  log("wasm");
  const bytes = readFileSync(join(root, "js/wasm/locksmith_wasm_bg.wasm"));
  const size = { rawBytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length };
  log(`  size: ${(size.rawBytes / 1024).toFixed(1)} KB raw, ${(size.gzipBytes / 1024).toFixed(1)} KB gzipped`);
  // The Redis engine's own module, loaded only by RedisLockStore.connect().
  const redisBytes = readFileSync(join(root, "js/wasm/locksmith_wasm_redis_bg.wasm"));
  size.redis = { rawBytes: redisBytes.length, gzipBytes: gzipSync(redisBytes, { level: 9 }).length };
  log(`  Redis engine module: ${(size.redis.rawBytes / 1024).toFixed(1)} KB raw, ${(size.redis.gzipBytes / 1024).toFixed(1)} KB gzipped`);
  const inst = [];
  for (let i = 0; i < 20; i++) {
    const t = now();
    const module = await WebAssembly.compile(bytes);
    await WebAssembly.instantiate(module, wasmImportsStub(module));
    inst.push(now() - t);
  }
  const instantiateMs = summarize(inst);
  log(`  compile + instantiate: median ${instantiateMs.median.toFixed(2)} ms`);

  // workerd: N pairs inside one request, timed from outside, minus an empty request.
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(root, "bench/workerd-bench.mjs"),
    modulesRoot: root,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: "2025-01-01",
  });
  const n = scale(100_000);
  const timed = async (path) => {
    const t = now();
    await (await mf.dispatchFetch(`http://bench${path}`)).text();
    return now() - t;
  };
  try {
    await timed(`/locksmith?n=10`);
    await timed(`/baseline?n=10`);
    const workerd = await interleaved("workerd memory pairs/s", {
      "locksmith (wasm)": async () => n / (((await timed(`/locksmith?n=${n}`)) - (await timed("/locksmith?n=0"))) / 1000),
      "plain-JS baseline": async () => n / (((await timed(`/baseline?n=${n}`)) - (await timed("/baseline?n=0"))) / 1000),
    });
    return { size, instantiateMs, workerd };
  } finally {
    await mf.dispose();
  }
}

function wasmImportsStub(module) {
  const imports = {};
  for (const { module: m, name } of WebAssembly.Module.imports(module)) (imports[m] ??= {})[name] = () => {};
  return imports;
}

// ---------------------------------------------------------------------------------

if (process.argv.includes("--self-test")) {
  await selfTest();
  process.exit(0);
}

/**
 * The exclusion check must be able to say no: a Lock over a store whose acquire always
 * answers true lets holders overlap, and the check must see it; a real store must not.
 */
async function selfTest() {
  const grantsAll = {
    acquire: async () => true,
    release: async () => true,
    extend: async () => true,
    isLocked: async () => true,
    remainingTime: async () => null,
  };
  const over = (store) => async (key, fn) => {
    const l = new native.Lock(key, 30_000, store);
    if (!(await l.acquire({ timeout: 60_000, retryDelay: 1 }))) throw new Error("timed out");
    await fn();
    await l.release();
  };
  const records = {
    "self-test": {
      "a store that grants every acquire": await contendOnOneKey(over(grantsAll), { key: "self-test", ms: 300 }),
      MemoryLockStore: await contendOnOneKey(over(new native.MemoryLockStore()), { key: "self-test", ms: 300 }),
    },
  };
  for (const [name, r] of Object.entries(records["self-test"])) log(`  ${name}: ${r.sections} sections, ${r.overlaps} overlaps`);
  const broken = exclusionVerdict({ x: { y: records["self-test"]["a store that grants every acquire"] } });
  const real = exclusionVerdict({ x: { y: records["self-test"].MemoryLockStore } });
  if (broken.ok || !real.ok) {
    console.error(`self-test failed: broken lock verdict ${JSON.stringify(broken)}, real lock verdict ${JSON.stringify(real)}`);
    process.exit(1);
  }
  log("self-test passed: the check caught the broken lock and passed the real one");
  await roundTripSelfTest();
  await floorSelfTest();
  const failures = await electionSelfTest(nativeBuild, log);
  if (failures.length) {
    console.error(`self-test failed: ${failures.join("; ")}`);
    process.exit(1);
  }
  log("self-test passed: the takeover measurement caught a standby leading beside a live leader, and timed a real takeover from after the lease's end");
}

/**
 * The bare floor must make the server do what locksmith's own pair does: a pair of each
 * mode, captured and replayed from the minimal client, runs the same commands per pair
 * on the server (INFO commandstats) as the store's pairs.
 */
async function floorSelfTest() {
  const server = await startRedis();
  const admin = new Redis(server.url);
  const raw = await respClient(server.port);
  const failures = [];
  try {
    for (const name of [FENCED, UNFENCED]) {
      let peer;
      const key = `self-test-floor:${name}`;
      const captured = await capturePair(
        admin,
        server.port,
        async () => {
          peer = await redisContenders[name](server.url);
          await peer.once(key);
        },
        () => peer.once(key),
      );
      const costOf = async (pair) => {
        const before = await sampleServer(admin);
        for (let i = 0; i < 50; i++) await pair();
        return serverCost(before, await sampleServer(admin), 50);
      };
      const theirs = await costOf(() => peer.once(key));
      const ours = await costOf(() => replay(raw, captured.commands));
      await peer.close();
      const calls = (c) => JSON.stringify(Object.fromEntries(Object.entries(c.commands).map(([k, v]) => [k, v.calls])));
      log(`  ${name}: its pair ${calls(theirs)}, the bare floor's ${calls(ours)}`);
      if (!sameCalls(theirs, ours)) failures.push(`${name}: the bare floor ran ${calls(ours)} per pair, the store ${calls(theirs)}`);
    }
  } finally {
    raw.close();
    await admin.quit();
    await server.stop();
  }
  if (failures.length) {
    console.error(`self-test failed: ${failures.join("; ")}`);
    process.exit(1);
  }
  log("self-test passed: the bare floor makes the server run what a locksmith pair does, in both modes");
}

/**
 * The round-trip count must count exactly what a client sends: known traffic (plain,
 * pipelined, scripted, on a subscribed connection) beside a connection that was already
 * open; and it must refuse to report a count that would be zero or that MONITOR could
 * not see whole (an admin command, which MONITOR does not show).
 */
async function roundTripSelfTest() {
  const server = await startRedis();
  const admin = new Redis(server.url);
  const bystander = new Redis(server.url);
  const opened = [];
  const client = () => {
    const c = new Redis(server.url);
    opened.push(c);
    return c;
  };
  const failures = [];
  try {
    await bystander.ping();
    const traffic = knownTraffic(bystander, { sets: 10, scripts: 5 });
    const counted = await countRequests(
      admin,
      server.port,
      () => traffic.open(client),
      () => traffic.run(),
    );
    const { want } = traffic;
    const got = { requests: counted.requests, scripted: counted.scripted, connections: counted.connections, others: counted.others };
    log(`  round trips of known traffic: ${JSON.stringify(got)}`);
    if (JSON.stringify(got) !== JSON.stringify(want)) failures.push(`counted ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    const refuses = async (what, prepare, run, pattern) => {
      try {
        await countRequests(admin, server.port, prepare, run);
        failures.push(`a count ${what} was reported`);
      } catch (err) {
        if (!pattern.test(err.message)) failures.push(`a count ${what} failed with: ${err.message}`);
        else log(`  a count ${what} is refused: ${err.message}`);
      }
    };
    await refuses(
      "with no request from the measured client",
      async () => {},
      () => bystander.ping(),
      /saw no command/,
    );
    let quiet;
    await refuses(
      "with a command MONITOR does not show",
      async () => {
        quiet = client();
        await quiet.ping();
      },
      () => quiet.config("GET", "maxmemory"),
      /cannot be trusted/,
    );
  } finally {
    await Promise.all([admin, bystander, ...opened].map((c) => c.quit()));
    await server.stop();
  }
  if (failures.length) {
    console.error(`self-test failed: ${failures.join("; ")}`);
    process.exit(1);
  }
  log("self-test passed: the round-trip count counted known traffic exactly and refused counts it could not trust");
}

const runs = (workload) => selected.includes(workload);
// What was run, as typed: the settings that tune it, then the command.
const settings = ["BENCH_ROUNDS", "BENCH_QUICK"].filter((k) => process.env[k] !== undefined).map((k) => `${k}=${process.env[k]}`);
const invoked = process.env.npm_lifecycle_event === "bench" ? "npm run bench" : ["node bench/run.mjs", ...asked].join(" ");
const server = runs("redis") || runs("file") || runs("ceiling") ? await startRedis() : undefined;
const results = {
  date: new Date().toISOString(),
  command: [...settings, invoked].join(" "),
  workloads: selected,
  rounds: ROUNDS,
  rotated: true,
  warmedUp: true,
  quick: QUICK,
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, platform: `${process.platform}-${process.arch}` },
};
try {
  if (runs("memory")) results.memory = await memoryBench();
  if (runs("redis")) results.redis = await redisBench(server);
  if (runs("file")) results.file = await fileBench(server);
  if (runs("cluster")) results.cluster = await clusterBench();
  if (runs("ceiling")) results.ceiling = ceiling(server);
  if (runs("wasm")) results.wasm = await wasmBench();
  // A few repetitions (one in a quick run): each is a lease long, a second or two.
  if (runs("election")) results.election = await electionBench(nativeBuild, { reps: QUICK ? 1 : 3, log });
  // Fair and unfair handles side by side, 16 workers on one key (a few seconds per store).
  if (runs("fair")) results.fair = await fairBench(native, { rounds: QUICK ? 1 : Math.min(ROUNDS, 3), ms: QUICK ? 500 : 2_000, log });
} finally {
  await server?.stop();
  results.exclusion = exclusion;
}

// One file per run, named by its start time: 2026-11-29T23-10-30Z.json. A quick run's
// figures are not comparable with a full run's: it writes its file and its report to
// bench/results/tmp/ (not in git), never over BENCHMARKS.md or the committed results.
const dir = QUICK ? "bench/results/tmp" : "bench/results";
const file = `${dir}/${results.date.replace(/\.\d+Z$/, "Z").replaceAll(":", "-")}.json`;
mkdirSync(join(root, dir), { recursive: true });
writeFileSync(join(root, file), `${JSON.stringify(results, (k, v) => (k === "samples" ? v.map((x) => Math.round(x * 1000) / 1000) : v), 2)}\n`);
const { writeReport } = await import("./report.mjs");
const written = QUICK ? { markdown: `${dir}/BENCHMARKS.md`, chart: `${dir}/chart.svg` } : undefined;
const exclusionChecked = writeReport(results, file, written);
const markdown = written?.markdown ?? "BENCHMARKS.md";
if (isFull(results)) log(`wrote ${file}, ${markdown}, ${written?.chart ?? "bench/results/chart.svg"}`);
else {
  const sections = [results.election && "election", results.fair && "fair locks"].filter(Boolean);
  log(
    `wrote ${file}${sections.length ? ` and the ${sections.join(" and ")} section${sections.length > 1 ? "s" : ""} of ${markdown}` : ""}; the rest of ${markdown} is as it was`,
  );
}
// The exclusion check runs in the memory and Redis workloads; a run without them has nothing to say of it.
const verdicts = [runs("memory") || runs("redis") ? exclusionChecked : { ok: true }, electionVerdict(results.election), fairVerdict(results.fair)];
for (const verdict of verdicts.filter((v) => !v.ok)) {
  console.error(`\nFAILED: ${verdict.text.replaceAll("**", "")}`);
  process.exitCode = 1;
}
