// One contending worker thread of the load test, on MemoryLockStore.shared. It logs
// entry and exit into a shared array in the order they happen (Atomics orders them).
import { parentPort, workerData } from "node:worker_threads";
import { setImmediate as tick } from "node:timers/promises";

import { Lock, MemoryLockStore } from "../../js/node.mjs";

const { id, rounds, seconds, shared } = workerData;
const store = MemoryLockStore.shared("load-test");
const deadline = seconds ? Date.now() + seconds * 1000 : Infinity;
const log = (event) => {
  const at = Atomics.add(shared, 1, 1);
  if (2 + at < shared.length) Atomics.store(shared, 2 + at, id * 2 + event);
};
let ran = 0;
for (let i = 0; seconds ? Date.now() < deadline : i < rounds; i++) {
  const [ok] = await new Lock("counter", 5_000, store).run(
    async () => {
      log(0);
      const seen = Atomics.load(shared, 0);
      await tick();
      Atomics.store(shared, 0, seen + 1);
      log(1);
    },
    { timeout: 30_000, retryDelay: 5 },
  );
  if (ok) ran += 1;
}
parentPort.postMessage(ran);
