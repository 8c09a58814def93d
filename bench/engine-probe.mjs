// A focused comparison of the two Redis clients, at the store level and the lock level:
// redis-rs on a tokio thread (LOCKSMITH_REDIS_CLIENT=redis-rs) against the sans-I/O
// engine on Node's socket. c=1 pair latency p50 and c=64 pairs/s, interleaved rounds.
// A benchmark, not a test. PROBE_ONLY=<substring> keeps matching contenders.
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import { startRedis } from "../js-tests/redis-server.mjs";

const require = createRequire(import.meta.url);
const native = require("../js/node.cjs");

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const N1 = Number(process.env.N1 ?? 2000);
const PER = Number(process.env.PER ?? 400);
const now = () => performance.now();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const server = await startRedis();
process.env.LOCKSMITH_REDIS_CLIENT = "redis-rs";
const old = await native.RedisLockStore.connect(server.url);
delete process.env.LOCKSMITH_REDIS_CLIENT;
const engine = await native.RedisLockStore.connect(server.url);

const storeLevel = (store) => async (key) => {
  const owner = randomUUID();
  if (!(await store.acquire(key, owner, 30_000))) throw new Error("not acquired");
  await store.release(key, owner);
};
const lockLevel = (store) => async (key) => {
  const l = new native.Lock(key, 30_000, store);
  if (!(await l.acquire())) throw new Error("not acquired");
  await l.release();
};
const contenders = {
  "redis-rs store.acquire+release": storeLevel(old),
  "engine store.acquire+release": storeLevel(engine),
  "redis-rs Lock": lockLevel(old),
  "engine Lock": lockLevel(engine),
};
if (process.env.PROBE_ONLY) {
  for (const name of Object.keys(contenders)) if (!name.includes(process.env.PROBE_ONLY)) delete contenders[name];
}

const c1 = {};
const c64 = {};
const cpu64 = {}; // Node's CPU µs per pair at c=64: less sensitive to a busy machine than wall time
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, once] of Object.entries(contenders)) {
    const times = [];
    for (let i = 0; i < N1; i++) {
      const t = now();
      await once(`probe1:${name}:${i % 100}`);
      times.push((now() - t) * 1000);
    }
    (c1[name] ??= []).push(median(times));
    const t = now();
    const cpu = process.cpuUsage();
    await Promise.all(Array.from({ length: 64 }, async (_, j) => {
      for (let i = 0; i < PER; i++) await once(`probe64:${name}:${j}`);
    }));
    (c64[name] ??= []).push((64 * PER) / ((now() - t) / 1000));
    const used = process.cpuUsage(cpu);
    (cpu64[name] ??= []).push((used.user + used.system) / (64 * PER));
  }
}
for (const name of Object.keys(contenders)) {
  const r = (xs) => xs.map((x) => Math.round(x)).join(" ");
  console.log(`${name.padEnd(32)} c=1 p50 µs: median ${Math.round(median(c1[name]))} [${r(c1[name])}]   c=64 pairs/s: median ${Math.round(median(c64[name]))} [${r(c64[name])}]   node CPU µs/pair at c=64: ${median(cpu64[name]).toFixed(1)}`);
}
await old.close();
await engine.close();
await server.stop();
