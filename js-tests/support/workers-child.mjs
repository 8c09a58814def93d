// One contender of workers.test.mjs.
import { parentPort, workerData } from "node:worker_threads";
import { setImmediate as tick } from "node:timers/promises";

import { Lock, MemoryLockStore } from "../../js/node.mjs";

const { rounds, shared } = workerData;
const store = MemoryLockStore.shared("workers-test");
let ran = 0;
for (let i = 0; i < rounds; i++) {
  const [ok] = await new Lock("counter", 5_000, store).run(
    async () => {
      const inside = Atomics.add(shared, 1, 1) + 1;
      if (inside > Atomics.load(shared, 2)) Atomics.store(shared, 2, inside);
      const seen = Atomics.load(shared, 0);
      await tick(); // let the other threads run while we hold the lock
      Atomics.store(shared, 0, seen + 1);
      Atomics.add(shared, 3, 1);
      Atomics.sub(shared, 1, 1);
    },
    { timeout: 30_000, retryDelay: 5 },
  );
  if (ok) ran += 1;
}
parentPort.postMessage(ran);
