// locksmith in one process: worker threads race to charge an invoice, a waiter gets a
// lock the moment it frees, long work keeps its lock alive, and a lock taken in one
// thread is released in another, and transfers over shared accounts take both accounts
// at once without deadlock. Run with `npm run demo`.
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { setTimeout as sleep } from "node:timers/promises";

import { lock, lockAll, Lock, MemoryLockStore, restoreLock } from "../js/node.mjs";

// Threads share locks through a named, process-wide store.
const shared = MemoryLockStore.shared("demo");

if (!isMainThread) {
  const { role, name } = workerData;
  if (role === "charge") {
    // Start together: wait until all four threads are up.
    const gate = new Int32Array(workerData.gate);
    Atomics.add(gate, 0, 1);
    Atomics.notify(gate, 0);
    while (Atomics.load(gate, 0) < 4) Atomics.wait(gate, 0, Atomics.load(gate, 0), 50);
    const [ran] = await new Lock("invoice:42", 5_000, shared).run(async () => {
      await sleep(300); // charge the card
    });
    parentPort.postMessage(ran ? `${name} charged invoice 42` : `${name} found invoice 42 already being charged, and skipped it`);
  } else if (role === "take") {
    const l = new Lock("import:99", 60_000, shared);
    await l.acquire();
    parentPort.postMessage(l.serialize());
  } else if (role === "finish") {
    const l = restoreLock(workerData.serialized, shared);
    await l.extend(60_000);
    parentPort.postMessage(`${name} restored the lock on import:99, extended it, and released it: ${await l.release()}`);
  }
} else {
  const run = (data) =>
    new Promise((resolve, reject) => {
      const w = new Worker(new URL(import.meta.url), { workerData: data });
      w.once("message", resolve);
      w.once("error", reject);
    });
  const say = (s) => console.log(`  ${s}`);

  console.log("1. Four worker threads try to charge the same invoice at once:");
  const gate = new SharedArrayBuffer(4);
  const threads = ["thread A", "thread B", "thread C", "thread D"];
  const outcomes = await Promise.all(threads.map((name) => run({ role: "charge", name, gate })));
  outcomes.forEach(say);
  const charged = outcomes.filter((o) => o.includes(" charged ")).length;
  say(`=> the invoice was charged ${charged === 1 ? "exactly once" : `${charged} times`}.`);
  if (charged !== 1) process.exitCode = 1;

  console.log("\n2. A waiter with a timeout gets the lock when it frees:");
  const holder = lock("report", 10_000);
  await holder.acquire();
  say("the holder takes 'report' and works for 200 ms");
  const started = performance.now();
  setTimeout(() => holder.release(), 200);
  const [ran] = await lock("report").run(() => {}, { timeout: 2_000, retryDelay: 500 });
  say(`the waiter ${ran ? "got" : "did not get"} the lock after ${Math.round(performance.now() - started)} ms (woken by the release, not by its 500 ms retry)`);

  console.log("\n3. Long work extends its lock:");
  const job = lock("nightly-import", 300);
  await job.run(async () => {
    for (let batch = 1; batch <= 3; batch++) {
      await sleep(200);
      await job.extend();
      say(`batch ${batch} done after ${batch * 200} ms; lock extended, ${await job.getRemainingTime()} ms left of its 300 ms TTL`);
    }
  });
  say(`released when done; still locked? ${await job.isLocked()}`);

  console.log("\n4. A lock taken in one thread is released in another:");
  const serialized = await run({ role: "take" });
  say(`thread E took import:99 and handed over ${serialized.length} characters (key, TTL and the secret owner token)`);
  say(await run({ role: "finish", name: "thread F", serialized }));
  say(`import:99 is locked now? ${await new Lock("import:99", 1_000, shared).isLocked()}`);

  console.log("\n5. Long work auto-extends, and stops cleanly when its lock is taken away:");
  const sync = lock("catalog-sync", 300);
  let batches = 0;
  const thief = setTimeout(async () => {
    // Someone with the serialized lock frees it behind the worker's back, and another
    // worker takes the key.
    await restoreLock(sync.serialize()).release();
    await lock("catalog-sync", 10_000).acquire();
  }, 1_000);
  let lost;
  try {
    await sync.run(
      async (l) => {
        while (!l.signal.aborted) {
          await sleep(100); // one batch; the TTL is 300 ms, auto-extend keeps it
          batches++;
        }
        return l.signal.reason;
      },
      { autoExtend: true },
    );
  } catch (err) {
    // run() says the work was not protected throughout: the hold was lost under it.
    if (err.code !== "LOCK_NOT_HELD") throw err;
    lost = err;
  }
  clearTimeout(thief);
  say(
    `ran ${batches} batches over ~${batches * 100} ms on a 300 ms TTL (auto-extended), then stopped: ${lost ? lost.result.message : "the lock was never lost"}`,
  );
  say(`run() rejected with ${lost?.name ?? "nothing"}: ${lost ? "the work was not protected throughout, and says so" : "?"}`);
  if (!lost) process.exitCode = 1;

  console.log("\n6. Transfers take both accounts at once, all or nothing, and never deadlock:");
  const balances = { alice: 100, bob: 100, carol: 100 };
  const moves = [
    ["alice", "bob"],
    ["bob", "alice"],
    ["bob", "carol"],
    ["carol", "alice"],
  ];
  let done = 0;
  await Promise.all(
    moves.flatMap(([from, to]) =>
      Array.from({ length: 5 }, async () => {
        // Written in opposite orders by different transfers: lockAll takes keys in one order.
        const [moved] = await lockAll([`account:${from}`, `account:${to}`], 5_000).run(
          async () => {
            const before = balances[from];
            await sleep(5); // read, then write: a lost update without the locks
            balances[from] = before - 10;
            balances[to] += 10;
          },
          { timeout: 10_000 },
        );
        if (moved) done++;
      }),
    ),
  );
  const total = balances.alice + balances.bob + balances.carol;
  say(`${done} of 20 transfers ran, some in opposite directions at once; balances ${JSON.stringify(balances)}, total ${total}`);
  if (done !== 20 || total !== 300) process.exitCode = 1;
}
