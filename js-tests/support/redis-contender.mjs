// One contending process: `node redis-contender.mjs URL KEY ROUNDS [SECONDS [MODE]]`. It
// runs ROUNDS critical sections (or as many as fit in SECONDS; 0 means no time limit)
// and prints how many ran. MODE is `lock` (the default), `semaphore:LIMIT` or `rw`, or
// several joined by commas, run one after the other on `KEY:MODE` each (then it prints
// one count per mode, comma-separated).
//
// `lock`: inside the lock it does a deliberately non-atomic read-modify-write of a
// counter, and logs its entry and exit to a Redis list; Redis orders the log, so any
// overlap shows as two entries in a row.
// `semaphore:LIMIT`: holds one of LIMIT permits for a few milliseconds, logging
// `in:ID`/`out:ID`; the log shows how many were inside at once.
// `rw`: every third section (staggered per process) writes, the others read; each logs
// `in:r:ID`/`out:r:ID` or `in:w:ID`/`out:w:ID`.
import { Cluster, Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";

import { Lock, RedisLockStore, readWriteLock, semaphore } from "../../js/node.mjs";

const [url, key, rounds, seconds, mode = "lock"] = process.argv.slice(2);
const deadline = Number(seconds) ? Date.now() + Number(seconds) * 1000 : Infinity;
// `cluster:URL,URL,...`: a Redis Cluster. Then each lock's fencing token is logged too
// (to `KEY:tokens`), and a section that fails with STORE_UNAVAILABLE (a failover) is
// tried again.
const seeds = url.startsWith("cluster:") ? url.slice("cluster:".length).split(",") : null;
const store = await RedisLockStore.connect(seeds ? { cluster: seeds } : url);
const client = seeds ? new Cluster(seeds.map((seed) => ({ host: "127.0.0.1", port: Number(new URL(seed).port) }))) : new Redis(url);
const me = `${process.pid}`;
const wait = { timeout: 30_000, retryDelay: 20 };
// Set when a lock section's body finished (it counts even if the release then failed).
let sectionRan = false;
/** One critical section of `mode` on `key`, number `i`; whether it ran. */
async function section(mode, key, i) {
  const log = `${key}:log`;
  if (mode === "lock") {
    const l = new Lock(key, 5_000, store);
    const [ok] = await l.run(async () => {
      await client.rpush(log, `in:${me}`);
      if (seeds) await client.rpush(`${key}:tokens`, String(l.fencingToken));
      const seen = Number(await client.get(`${key}:counter`));
      await sleep(1);
      await client.set(`${key}:counter`, seen + 1);
      await client.rpush(log, `out:${me}`);
      sectionRan = true;
    }, wait);
    return ok;
  }
  if (mode.startsWith("semaphore:")) {
    const limit = Number(mode.slice("semaphore:".length));
    const [ok] = await semaphore(key, limit, 5_000, store).run(async () => {
      await client.rpush(log, `in:${me}:${i}`);
      await sleep(5);
      await client.rpush(log, `out:${me}:${i}`);
    }, wait);
    return ok;
  }
  if (mode === "rw") {
    const rw = readWriteLock(key, 5_000, store);
    const kind = (i + process.pid) % 3 === 0 ? "w" : "r";
    const [ok] = await (kind === "w" ? rw.writeLock() : rw.readLock()).run(async () => {
      await client.rpush(log, `in:${kind}:${me}:${i}`);
      await sleep(5);
      await client.rpush(log, `out:${kind}:${me}:${i}`);
    }, wait);
    return ok;
  }
  throw new Error(`unknown mode ${mode}`);
}

// Several modes (`semaphore:3,rw`) run one after the other, each on `KEY:MODE`.
const modes = mode.split(",");
const runs = [];
for (const m of modes) {
  const on = modes.length > 1 ? `${key}:${m}` : key;
  let ran = 0;
  for (let i = 0; deadline !== Infinity ? Date.now() < deadline : i < Number(rounds); i++) {
    sectionRan = false;
    try {
      if (await section(m, on, i)) ran += 1;
    } catch (err) {
      if (!seeds || err.code !== "STORE_UNAVAILABLE") throw err;
      if (sectionRan) ran += 1;
      await sleep(50);
    }
  }
  runs.push(ran);
}
await client.quit();
await store.close();
process.stdout.write(runs.join(","));
