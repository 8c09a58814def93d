// Worker threads lock against each other through MemoryLockStore.shared: a shared
// counter, updated non-atomically inside the critical section, comes out exact, and
// no two threads are ever inside at once.
import assert from "node:assert/strict";
import { it } from "node:test";
import { Worker } from "node:worker_threads";

import { TARGET } from "../support/target.mjs";

const THREADS = 4;
const ROUNDS = 150;

it("4 worker threads take turns on one key of MemoryLockStore.shared", { skip: TARGET !== "native" && "shared memory stores are native-only" }, async () => {
  // [counter, inside, maxInside, runs]
  const shared = new Int32Array(new SharedArrayBuffer(16));
  const worker = (id) =>
    new Promise((resolve, reject) => {
      const w = new Worker(new URL("../support/workers-child.mjs", import.meta.url), {
        workerData: { id, rounds: ROUNDS, shared },
      });
      w.once("message", resolve);
      w.once("error", reject);
      w.once("exit", (code) => code !== 0 && reject(new Error(`worker ${id} exited with ${code}`)));
    });
  const ran = await Promise.all(Array.from({ length: THREADS }, (_, i) => worker(i)));
  assert.deepEqual(ran, Array(THREADS).fill(ROUNDS), "every run() got its turn");
  assert.equal(shared[2], 1, "never two threads inside at once");
  assert.equal(shared[0], THREADS * ROUNDS, "no update was lost");
  assert.equal(shared[3], THREADS * ROUNDS);
});
