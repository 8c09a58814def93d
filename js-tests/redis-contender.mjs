// One contending process: `node redis-contender.mjs URL KEY ROUNDS [SECONDS [MODE]]`. It
// runs ROUNDS critical sections (or as many as fit in SECONDS; 0 means no time limit).
// MODE is `lock` (the default), `semaphore:LIMIT` or `rw`.
//
// `lock`: inside the lock it does a deliberately non-atomic read-modify-write of a
// counter, and logs its entry and exit to a Redis list; Redis orders the log, so any
// overlap shows as two entries in a row.
// `semaphore:LIMIT`: holds one of LIMIT permits for a few milliseconds, logging
// `in:ID`/`out:ID`; the log shows how many were inside at once.
// `rw`: every third section (staggered per process) writes, the others read; each logs
// `in:r:ID`/`out:r:ID` or `in:w:ID`/`out:w:ID`.
import { Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";

import { Lock, RedisLockStore, readWriteLock, semaphore } from "../js/node.mjs";

const [url, key, rounds, seconds, mode = "lock"] = process.argv.slice(2);
const deadline = Number(seconds) ? Date.now() + Number(seconds) * 1000 : Infinity;
const store = await RedisLockStore.connect(url);
const client = new Redis(url);
const me = `${process.pid}`;
const wait = { timeout: 30_000, retryDelay: 20 };
const log = `${key}:log`;
let ran = 0;
for (let i = 0; deadline !== Infinity ? Date.now() < deadline : i < Number(rounds); i++) {
  let ok;
  if (mode === "lock") {
    [ok] = await new Lock(key, 5_000, store).run(async () => {
      await client.rpush(log, `in:${me}`);
      const seen = Number(await client.get(`${key}:counter`));
      await sleep(1);
      await client.set(`${key}:counter`, seen + 1);
      await client.rpush(log, `out:${me}`);
    }, wait);
  } else if (mode.startsWith("semaphore:")) {
    const limit = Number(mode.slice("semaphore:".length));
    [ok] = await semaphore(key, limit, 5_000, store).run(async () => {
      await client.rpush(log, `in:${me}:${i}`);
      await sleep(5);
      await client.rpush(log, `out:${me}:${i}`);
    }, wait);
  } else if (mode === "rw") {
    const rw = readWriteLock(key, 5_000, store);
    const kind = (i + process.pid) % 3 === 0 ? "w" : "r";
    [ok] = await (kind === "w" ? rw.writeLock() : rw.readLock()).run(async () => {
      await client.rpush(log, `in:${kind}:${me}:${i}`);
      await sleep(5);
      await client.rpush(log, `out:${kind}:${me}:${i}`);
    }, wait);
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  if (ok) ran += 1;
}
await client.quit();
await store.close();
process.stdout.write(String(ran));
