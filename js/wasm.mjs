// locksmith over WebAssembly for other ES module runtimes (Node's `locksmith-js/wasm`,
// Deno, Bun, bundlers): the module initialises itself on import.
import * as wasm from "./wasm/locksmith_wasm.js";
import { useWasm } from "./api/wasm-binding.mjs";
import { loadEngine, useRedisRuntime } from "./redis/wasm-store.mjs";

const isNode = typeof process === "object" && process.versions?.node;

/** A .wasm next to this file: read from disk in Node, fetched elsewhere. */
async function instantiate(glue, url) {
  if (url.protocol === "file:" && isNode) {
    const { readFile } = await import("node:fs/promises");
    glue.initSync({ module: await readFile(url) });
  } else {
    await glue.default({ module_or_path: url });
  }
}

await instantiate(wasm, new URL("./wasm/locksmith_wasm_bg.wasm", import.meta.url));
useWasm(wasm, loadEngine);

// RedisLockStore: the Redis engine's own module, loaded at the first connect, over
// Deno.connect on Deno and node:net elsewhere (Node, Bun).
useRedisRuntime(async () => {
  const [engine, socket] = await Promise.all([
    import("./wasm/locksmith_wasm_redis.js"),
    typeof Deno === "object" && typeof Deno.connect === "function" ? import("./redis/sockets/deno.mjs") : import("./redis/sockets/node.mjs"),
  ]);
  await instantiate(engine, new URL("./wasm/locksmith_wasm_redis_bg.wasm", import.meta.url));
  return { engine, socket };
});

export * from "./api/wasm-api.mjs";
