// One process of the "two processes" test: `node redis-contender.mjs URL KEY ROUNDS`.
// Inside the lock it does a deliberately non-atomic read-modify-write of a counter and
// marks its presence, so overlaps and lost updates would show.
import { Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";

import { Lock, RedisLockStore } from "../js/node.mjs";

const [url, key, rounds] = process.argv.slice(2);
const store = await RedisLockStore.connect(url);
const client = new Redis(url);
let ran = 0;
for (let i = 0; i < Number(rounds); i++) {
  const [ok] = await new Lock(key, 5_000, store).run(
    async () => {
      if ((await client.incr(`${key}:inside`)) > 1) await client.incr(`${key}:overlaps`);
      const seen = Number(await client.get(`${key}:counter`));
      await sleep(2);
      await client.set(`${key}:counter`, seen + 1);
      await client.decr(`${key}:inside`);
    },
    { timeout: 10_000, retryDelay: 20 },
  );
  if (ok) ran += 1;
}
await client.quit();
await store.close();
process.stdout.write(String(ran));
