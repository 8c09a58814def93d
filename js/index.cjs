"use strict";
// The CommonJS entry for Node (and what the ESM entry re-exports, so both are one
// instance): the native addon where one loads, else the WebAssembly build with the same
// exports. `backend` says which is running. LOCKSMITH_FORCE_WASM=1 skips the addon.

function wasmApi() {
  const { readFileSync } = require("node:fs");
  const { join } = require("node:path");
  const { start, ...api } = require("./gen/wasm.cjs");
  start(readFileSync(join(__dirname, "wasm/locksmith_wasm_bg.wasm")), () =>
    require("node:fs/promises").readFile(join(__dirname, "wasm/locksmith_wasm_redis_bg.wasm")),
  );
  return api;
}

function load() {
  if (process.env.LOCKSMITH_FORCE_WASM === "1") return wasmApi();
  try {
    return { ...require("./node.cjs"), backend: "native" };
  } catch (err) {
    if (err?.code !== "LOCKSMITH_NATIVE_UNAVAILABLE") throw err;
    process.emitWarning(`${err.message} Using the WebAssembly build instead (RedisLockStore runs on its WebAssembly engine).`, {
      code: "LOCKSMITH_WASM_FALLBACK",
    });
    return wasmApi();
  }
}

module.exports = load();
