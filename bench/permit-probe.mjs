// Uncontended acquire+release pairs on RedisLockStore for each kind of handle: a lock, a
// semaphore permit, a read and a write lock. c=1 p50/p99 per pair from Node, and the
// server's own time per EVALSHA (INFO commandstats). A benchmark, not a test.
// `N=3000 ROUNDS=2 node bench/permit-probe.mjs`
import { createRequire } from "node:module";
import { Redis } from "ioredis";
import { startRedis } from "../js-tests/support/redis-server.mjs";

const require = createRequire(import.meta.url);
const { Lock, RedisLockStore, semaphore, readWriteLock } = require("../js/node.cjs");

const N = Number(process.env.N ?? 3000);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const server = await startRedis();
const store = await RedisLockStore.connect(server.url);
const admin = new Redis(server.url);
const kinds = {
  lock: () => new Lock("probe-lock", 30_000, store),
  semaphore: () => semaphore("probe-sem", 3, 30_000, store),
  read: () => readWriteLock("probe-rw", 30_000, store).readLock(),
  write: () => readWriteLock("probe-rw", 30_000, store).writeLock(),
};
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, make] of Object.entries(kinds)) {
      await admin.config("RESETSTAT");
      const times = [];
      for (let i = 0; i < N; i++) {
        const handle = make();
        const start = performance.now();
        if (!(await handle.acquire())) throw new Error(`${name}: not taken`);
        await handle.release();
        times.push(performance.now() - start);
      }
      times.sort((a, b) => a - b);
      const at = (q) => (times[Math.floor(N * q)] * 1000).toFixed(0);
      const evalsha = /cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(await admin.info("commandstats"));
      console.log(`${name.padEnd(9)} c=1 pair p50 ${at(0.5)} µs p99 ${at(0.99)} µs; server ${evalsha?.[1]} µs per EVALSHA`);
    }
  }
} finally {
  await admin.quit();
  await store.close();
  await server.stop();
}
