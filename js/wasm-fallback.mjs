// The WebAssembly build as Node's fallback, bundled to CommonJS (js/gen/wasm.cjs) so
// that `require("locksmith-js")` can load it synchronously; js/index.cjs calls `start`.
import * as wasm from "./wasm/locksmith_wasm.js";
import * as redisEngine from "./wasm/locksmith_wasm_redis.js";
import * as socket from "./redis/sockets/node.mjs";
import { useWasm } from "./api/wasm-binding.mjs";
import { loadEngine, useRedisRuntime } from "./redis/wasm-store.mjs";

export * from "./api/wasm-api.mjs";

/**
 * Instantiates the module from its bytes. `redisBytes()` reads the Redis engine's
 * module, which RedisLockStore instantiates at its first connect.
 */
export function start(bytes, redisBytes) {
  wasm.initSync({ module: bytes });
  useWasm(wasm, loadEngine);
  useRedisRuntime(async () => {
    redisEngine.initSync({ module: await redisBytes() });
    return { engine: redisEngine, socket };
  });
}
