// c=1 latency and c=64 throughput for locksmith's RedisLockStore against redis-semaphore,
// with the CPU each side spends per pair: Node's (process.cpuUsage) and the server's
// (INFO cpu). Tells whether a workload is bound by the client or by the server. The
// store runs fenced (the default) and with `fencing: false`.
// A benchmark, not a test: `node bench/c64-probe.mjs` (ROUNDS, PER, N1 to change sizes).
import { createRequire } from "node:module";
import Redis from "ioredis";
import { Mutex } from "redis-semaphore";
import { startRedis } from "../js-tests/support/redis-server.mjs";

const require = createRequire(import.meta.url);
const native = require("../js/node.cjs");
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const N1 = Number(process.env.N1 ?? 2000);
const PER = Number(process.env.PER ?? 400);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const server = await startRedis();
const store = await native.RedisLockStore.connect(server.url);
const unfenced = await native.RedisLockStore.connect({ url: server.url, fencing: false });
const client = new Redis(server.url);
const admin = new Redis(server.url);
const serverCpu = async () => {
  const info = await admin.info("cpu");
  const f = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1]);
  return (f("used_cpu_user") + f("used_cpu_sys")) * 1e6;
};
const contenders = {
  locksmith: async (key) => {
    const l = new native.Lock(key, 30_000, store);
    if (!(await l.acquire())) throw new Error("not acquired");
    await l.release();
  },
  // One plain SET NX PX per acquire, holds without fencing tokens.
  "locksmith (fencing: false)": async (key) => {
    const l = new native.Lock(key, 30_000, unfenced);
    if (!(await l.acquire())) throw new Error("not acquired");
    await l.release();
  },
  "redis-semaphore": async (key) => {
    const m = new Mutex(client, key, { lockTimeout: 30_000, acquireAttemptsLimit: 1 });
    await m.acquire();
    await m.release();
  },
};
if (process.env.PROBE_ONLY) for (const k of Object.keys(contenders)) if (!k.includes(process.env.PROBE_ONLY)) delete contenders[k];
const rows = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, once] of Object.entries(contenders)) {
    const r = (rows[name] ??= { c1: [], c64: [], node: [], redis: [] });
    const times = [];
    for (let i = 0; i < N1; i++) {
      const t = performance.now();
      await once(`p1:${name}:${i % 100}`);
      times.push((performance.now() - t) * 1000);
    }
    r.c1.push(median(times));
    const cpu = process.cpuUsage();
    const s = await serverCpu();
    const t = performance.now();
    await Promise.all(
      Array.from({ length: 64 }, async (_, j) => {
        for (let i = 0; i < PER; i++) await once(`p64:${name}:${j}`);
      }),
    );
    const wall = performance.now() - t;
    const used = process.cpuUsage(cpu);
    r.redis.push(((await serverCpu()) - s) / (64 * PER));
    r.c64.push((64 * PER) / (wall / 1000));
    r.node.push((used.user + used.system) / (64 * PER));
  }
}
for (const [name, r] of Object.entries(rows)) {
  console.log(
    `${name.padEnd(26)} c=1 p50 ${median(r.c1).toFixed(1)} µs | c=64 ${Math.round(median(r.c64))} pairs/s [${r.c64.map(Math.round).join(" ")}] | CPU µs/pair at c=64: node ${median(r.node).toFixed(1)}, redis ${median(r.redis).toFixed(1)}`,
  );
}
await store.close();
await unfenced.close();
client.disconnect();
admin.disconnect();
await server.stop();
