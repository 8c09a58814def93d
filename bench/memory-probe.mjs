// Memory over many holds with a watched signal at a long TTL on RedisLockStore (the
// addon): each round acquires, reads `lock.signal` (a watch that sleeps to the TTL) and
// releases. A cancelled sleep must free its timer entry, so the JS heap stays flat and
// RSS does not grow with the number of rounds. A probe, not a test:
// `node --expose-gc bench/memory-probe.mjs [rounds]`.
import { createRequire } from "node:module";
import { startRedis } from "../js-tests/support/redis-server.mjs";

if (typeof globalThis.gc !== "function") throw new Error("run with node --expose-gc");
const require = createRequire(import.meta.url);
const ls = require("../js/node.cjs");
const server = await startRedis();
const store = await ls.RedisLockStore.connect(server.url);
const rounds = Number(process.argv[2] ?? 60_000);
const run = async (n) => {
  for (let i = 0; i < n; i++) {
    const held = ls.lock(`memory:${i % 50}`, 3_600_000, store);
    await held.acquire();
    void held.signal;
    await held.release();
  }
};
const usage = async () => {
  await new Promise((resolve) => setTimeout(resolve, 100));
  globalThis.gc();
  return process.memoryUsage();
};
await run(5_000);
const before = await usage();
await run(rounds);
const after = await usage();
const mib = (bytes) => (bytes / 2 ** 20).toFixed(1);
console.log(
  `${rounds} acquire/signal/release rounds at a 1 h TTL: RSS ${mib(after.rss - before.rss)} MiB, JS heap ${mib(after.heapUsed - before.heapUsed)} MiB, external ${mib(after.external - before.external)} MiB`,
);
await store.close();
await server.stop?.();
process.exit(0);
