import * as native from "../js/node.mjs";
import { startRedis } from "../js-tests/redis-server.mjs";
const server = await startRedis();
const store = await native.RedisLockStore.connect(server.url);
const once = async (key) => { const l = new native.Lock(key, 30_000, store); await l.acquire(); await l.release(); };
for (let r = 0; r < 4; r++) {
  const t = performance.now();
  await Promise.all(Array.from({ length: 64 }, async (_, j) => { for (let i = 0; i < 1000; i++) await once(`c64:${j}`); }));
  console.log(Math.round(64000 / ((performance.now() - t) / 1000)), "pairs/s");
}
await store.close(); await server.stop();
