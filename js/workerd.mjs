// locksmith for Cloudflare Workers (workerd): the .wasm is imported as a compiled
// module and instantiated synchronously — workerd does not compile wasm from bytes.
import * as wasm from "./wasm/locksmith_wasm.js";
import module from "./wasm/locksmith_wasm_bg.wasm";
import { useWasm } from "./api/wasm-binding.mjs";
import { loadEngine, useRedisRuntime } from "./redis/wasm-store.mjs";

wasm.initSync({ module });
useWasm(wasm, loadEngine);

// RedisLockStore: the Redis engine's own module, imported at the first connect, over
// connect() from cloudflare:sockets.
useRedisRuntime(async () => {
  const [engine, socket, { default: compiled }] = await Promise.all([
    import("./wasm/locksmith_wasm_redis.js"),
    import("./redis/sockets/workerd.mjs"),
    import("./wasm/locksmith_wasm_redis_bg.wasm"),
  ]);
  engine.initSync({ module: compiled });
  return { engine, socket };
});

export * from "./api/wasm-api.mjs";
