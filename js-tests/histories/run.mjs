// Runs a history: N OS processes (client.mjs) × M async clients on one store, with a
// fault, then the checker over every process's records. Seeded: each run prints its seed,
// and `--seed` replays it (the same operations; timing still differs).
//
//   node js-tests/histories/run.mjs [--seconds 60] [--processes 4] [--clients 8]
//     [--stores memory,redis,redis-proxy,redis-stall,redis-cut] [--seed N]
//
// prints one table row per store × fault: holds checked, violations, late signals. Run
// it under LOCKSMITH_TARGET=wasm for the WebAssembly build. Exits 1 on any violation.
import { spawn } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { checkHistory } from "./checker.mjs";
import { now } from "./client.mjs";
import { startProxy } from "./proxy.mjs";
import { newSeed, seeded } from "./random.mjs";

const CLIENT = fileURLToPath(new URL("./client.mjs", import.meta.url));

/** Runs one client process with `config`; resolves to its records. */
function runProcess(config, { timeoutMs }) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENT, JSON.stringify(config)], { stdio: ["ignore", "pipe", "pipe"], env: process.env });
    const out = [];
    let err = "";
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) {
        reject(new Error(`history client ${config.process} exited with ${code ?? signal}: ${err.trim()}`));
        return;
      }
      const records = Buffer.concat(out).toString().split("\n").filter(Boolean).map((line) => JSON.parse(line));
      resolve(records);
    });
  });
}

/**
 * One run: `processes` × `clients` on `store` (a client.mjs store spec) for `seconds`,
 * with `fault` during it (`{ proxy, every, apply }`, optional). Resolves to
 * `{ seed, result: checkHistory(...), summaries, holds }`.
 */
export async function runHistory({ store, processes = 1, clients = 4, seconds = 2, seed = newSeed(), fault = null, check = {}, client = {} }) {
  const startAt = now() + 600; // every process connected and waiting by then
  const durationMs = seconds * 1_000;
  let faults = null;
  if (fault?.apply) {
    const random = seeded(seed).fork(1_000);
    faults = setInterval(() => fault.apply(random), fault.every);
  }
  let records;
  try {
    const configs = Array.from({ length: processes }, (_, i) => ({ ...client, store, clients, durationMs, seed, process: i, startAt }));
    records = (await Promise.all(configs.map((config) => runProcess(config, { timeoutMs: durationMs + 30_000 })))).flat();
  } finally {
    if (faults) clearInterval(faults);
  }
  const holds = records.filter((r) => r.t === "hold");
  const summaries = records.filter((r) => r.t === "summary");
  return { seed, result: checkHistory(holds, check), summaries, holds };
}

/** The store × fault setups: `{ name, fault, open(redisUrl) → { store, fault?, close } }`. */
export const SETUPS = {
  memory: { store: "memory", fault: "none", processes: 1, open: async () => ({ store: "memory" }) },
  redis: { store: "RedisLockStore", fault: "none", open: async (server) => ({ store: { redis: server.url } }) },
  "redis-proxy": {
    store: "RedisLockStore",
    fault: "proxy latency 0–20 ms",
    open: async (server, random) => {
      const proxy = await startProxy({ targetPort: server.port, latencyMs: 20, random });
      return { store: { redis: proxy.url() }, close: () => proxy.close() };
    },
  },
  "redis-stall": {
    store: "RedisLockStore",
    fault: "proxy 0–5 ms, a 150 ms stall every 700 ms",
    open: async (server, random) => {
      const proxy = await startProxy({ targetPort: server.port, latencyMs: 5, random });
      return { store: { redis: proxy.url(), commandTimeoutMs: 300 }, fault: { every: 700, apply: () => proxy.stall(150) }, close: () => proxy.close() };
    },
  },
  "redis-cut": {
    store: "RedisLockStore",
    fault: "proxy 0–5 ms, every connection cut every 900 ms",
    open: async (server, random) => {
      const proxy = await startProxy({ targetPort: server.port, latencyMs: 5, random });
      return { store: { redis: proxy.url(), commandTimeoutMs: 300 }, fault: { every: 900, apply: () => proxy.cut() }, close: () => proxy.close() };
    },
  },
};

/** A table row: store, fault, processes × clients, holds checked, violations, late signals. */
export function row(setup, processes, clients, { result }) {
  return `| ${setup.store} | ${setup.fault} | ${processes} × ${clients} | ${result.holds} | ${result.violations.length === 0 ? 0 : Object.values(result.byType).reduce((a, b) => a + b, 0)} | ${result.lateSignals} |`;
}

export const HEADER = "| store | fault | processes × clients | holds checked | violations | late signals |\n|---|---|---|---|---|---|";

async function main() {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "60" },
      processes: { type: "string", default: "4" },
      clients: { type: "string", default: "8" },
      stores: { type: "string", default: Object.keys(SETUPS).join(",") },
      seed: { type: "string" },
      bound: { type: "string", default: "250" },
      "reuse-handles": { type: "boolean", default: false },
    },
  });
  const seed = values.seed === undefined ? newSeed() : Number(values.seed) >>> 0;
  const seconds = Number(values.seconds);
  const clients = Number(values.clients);
  const { startRedis } = await import("../redis-server.mjs");
  console.log(`history run: seed ${seed} (replay with --seed ${seed}), ${process.env.LOCKSMITH_TARGET ?? "native"} build, ${seconds} s per row`);
  console.log(HEADER);
  let failed = false;
  let server = null;
  try {
    for (const name of values.stores.split(",")) {
      const setup = SETUPS[name];
      if (!setup) throw new Error(`unknown store setup ${name}; known: ${Object.keys(SETUPS).join(", ")}`);
      if (name !== "memory") server ??= await startRedis();
      const opened = await setup.open(server, seeded(seed).fork(7));
      const processes = setup.processes ?? Number(values.processes);
      try {
        const run = await runHistory({ store: opened.store, processes, clients, seconds, seed, fault: opened.fault, check: { signalBoundMs: Number(values.bound) }, client: { reuseHandles: values["reuse-handles"] } });
        console.log(row(setup, processes, clients, run));
        if (run.result.violations.length > 0) {
          failed = true;
          for (const v of run.result.violations.slice(0, 10)) console.error(JSON.stringify(v));
        }
      } finally {
        await opened.close?.();
      }
    }
  } finally {
    await server?.stop();
  }
  process.exitCode = failed ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
