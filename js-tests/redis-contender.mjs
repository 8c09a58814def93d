// One contending process: `node redis-contender.mjs URL KEY ROUNDS [SECONDS]`. It runs
// ROUNDS critical sections (or as many as fit in SECONDS). Inside the lock it does a
// deliberately non-atomic read-modify-write of a counter, and logs its entry and exit
// to a Redis list; Redis orders the log, so any overlap shows as two entries in a row.
import { Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";

import { Lock, RedisLockStore } from "../js/node.mjs";

const [url, key, rounds, seconds] = process.argv.slice(2);
const deadline = seconds ? Date.now() + Number(seconds) * 1000 : Infinity;
const store = await RedisLockStore.connect(url);
const client = new Redis(url);
const me = `${process.pid}`;
let ran = 0;
for (let i = 0; seconds ? Date.now() < deadline : i < Number(rounds); i++) {
  const [ok] = await new Lock(key, 5_000, store).run(
    async () => {
      await client.rpush(`${key}:log`, `in:${me}`);
      const seen = Number(await client.get(`${key}:counter`));
      await sleep(1);
      await client.set(`${key}:counter`, seen + 1);
      await client.rpush(`${key}:log`, `out:${me}`);
    },
    { timeout: 30_000, retryDelay: 20 },
  );
  if (ok) ran += 1;
}
await client.quit();
await store.close();
process.stdout.write(String(ran));
