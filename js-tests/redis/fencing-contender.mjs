// One contending process for fencing-off.test.mjs:
// `node fencing-contender.mjs URL KEY ROUNDS STORE FENCING`, STORE `engine` (RedisLockStore
// of the build LOCKSMITH_TARGET names) or `ioredis` (IoRedisLockStore), FENCING `true` or
// `false`. Inside each lock it logs its entry and exit to a Redis list (Redis orders the
// log, so an overlap shows as two entries in a row), does a deliberately non-atomic
// read-modify-write of a counter, and, holding a fencing token, appends it to `KEY:tokens`
// (in critical-section order, so they must grow). Prints how many sections ran.
import { Redis } from "ioredis";
import { setTimeout as sleep } from "node:timers/promises";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { ls } from "../support/target.mjs";

const [url, key, rounds, kind, fencing] = process.argv.slice(2);
const client = new Redis(url);
let store;
let storeClient;
if (kind === "ioredis") {
  storeClient = new Redis(url);
  store = new IoRedisLockStore(storeClient, { fencing: fencing === "true" });
} else {
  store = await ls.RedisLockStore.connect({ url, fencing: fencing === "true" });
}
const me = `${kind}-${fencing}-${process.pid}`;
let ran = 0;
for (let i = 0; i < Number(rounds); i++) {
  const l = new ls.Lock(key, 5_000, store);
  const [ok] = await l.run(
    async () => {
      await client.rpush(`${key}:log`, `in:${me}`);
      if (fencing === "true") {
        if (typeof l.fencingToken !== "number") throw new Error(`a fenced hold without a token: ${l.fencingToken}`);
        await client.rpush(`${key}:tokens`, String(l.fencingToken));
      } else if (l.fencingToken !== null) {
        throw new Error(`an unfenced hold with a token: ${l.fencingToken}`);
      }
      const seen = Number(await client.get(`${key}:counter`));
      await sleep(1);
      await client.set(`${key}:counter`, seen + 1);
      await client.rpush(`${key}:log`, `out:${me}`);
    },
    { timeout: 30_000, retryDelay: 20 },
  );
  if (ok) ran += 1;
}
await store.close();
await storeClient?.quit();
await client.quit();
process.stdout.write(String(ran));
