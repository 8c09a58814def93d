// The conformance suite against Redis: RedisLockStore (native or wasm), and the documented
// ioredis recipe as a plain JS store.
import { Redis } from "ioredis";
import { after, before } from "node:test";

import { conformance } from "./conformance.mjs";
import { redisLockStore } from "../support/ioredis-store.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { TARGET, ls } from "../support/target.mjs";

let server;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

// Native: the addon's engine over Node's sockets. Wasm: the same engine as the
// WebAssembly build's second module, over node:net, through the JS-store bridge.
conformance(`RedisLockStore (${TARGET})`, {
  makeStore: () => ls.RedisLockStore.connect(server.url),
  closeStore: (store) => store.close(),
  fencing: true,
  exactOwnership: true,
});

let client;
conformance("the documented ioredis store", {
  makeStore: () => {
    client = new Redis(server.url);
    return redisLockStore(client);
  },
  closeStore: () => client.quit(),
  fencing: false,
  exactOwnership: false,
});
