// What `minReplicas: 1` costs: acquire + release pairs on a master with one replica on
// loopback, with and without WAIT after each acquire. Rounds interleaved.
// `ROUNDS=3 N1=2000 PER=200 node bench/min-replicas-probe.mjs`
import { Lock, RedisLockStore } from "../js/node.mjs";
import { startRedis } from "../js-tests/support/redis-server.mjs";
import { command, until } from "../js-tests/support/redis-topology.mjs";

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const N1 = Number(process.env.N1 ?? 2000);
const PER = Number(process.env.PER ?? 200);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const master = await startRedis();
const replica = await startRedis(["--replicaof", "127.0.0.1", String(master.port), "--dir", "/tmp", "--dbfilename", `probe-${process.pid}.rdb`]);
await until("the replica to sync", async () => /master_link_status:up/.test(await command(replica.port, "INFO", "replication")));
const stores = {
  "minReplicas 0": await RedisLockStore.connect(master.url),
  "minReplicas 1": await RedisLockStore.connect({ url: master.url, minReplicas: 1 }),
};
const results = Object.fromEntries(Object.keys(stores).map((k) => [k, { c1: [], c64: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, store] of Object.entries(stores)) {
    const times = [];
    for (let i = 0; i < N1; i++) {
      const t = performance.now();
      const l = new Lock(`probe:c1:${i % 100}`, 30_000, store);
      await l.acquire();
      await l.release();
      times.push((performance.now() - t) * 1000);
    }
    results[name].c1.push(median(times));
    const t = performance.now();
    await Promise.all(
      Array.from({ length: 64 }, async (_, j) => {
        for (let i = 0; i < PER; i++) {
          const l = new Lock(`probe:c64:${j}`, 30_000, store);
          await l.acquire();
          await l.release();
        }
      }),
    );
    results[name].c64.push((64 * PER) / ((performance.now() - t) / 1000));
  }
}
for (const [name, r] of Object.entries(results)) {
  console.log(
    `${name}: c=1 pair p50 µs median ${median(r.c1).toFixed(0)} [${r.c1.map((x) => x.toFixed(0)).join(" ")}]   c=64 pairs/s median ${median(r.c64).toFixed(0)} [${r.c64.map((x) => x.toFixed(0)).join(" ")}]`,
  );
}
for (const store of Object.values(stores)) await store.close();
await replica.stop();
await master.stop();
