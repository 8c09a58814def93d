// A CPU-profile target for the run() ×64 workload of the bench (the "What bounds" notes
// in BENCHMARKS.md): `node --cpu-prof bench/run64-probe.mjs`, then read the .cpuprofile.
import { Lock, MemoryLockStore } from "../js/node.mjs";
const store = new MemoryLockStore();
let runs = 0;
const until = performance.now() + 3000;
await Promise.all(
  Array.from({ length: 64 }, async (_, i) => {
    let k = i;
    while (performance.now() < until) {
      k = (k + 64) % 1000;
      await new Lock(`k${k}`, 30_000, store).run(
        async () => {
          await null;
          runs++;
        },
        { timeout: 1000 },
      );
    }
  }),
);
console.log("runs/s", Math.round(runs / 3));
