"use strict";
// `require("locksmith-js/wasm")`: the WebAssembly build as CommonJS (js/wasm.mjs waits for
// the module at the top level, which require() cannot load). The same module instance as
// the WebAssembly fallback of `require("locksmith-js")`; instantiating it again is a no-op.
const { readFileSync } = require("node:fs");
const { join } = require("node:path");
const { start, ...api } = require("./gen/wasm.cjs");

start(readFileSync(join(__dirname, "wasm/locksmith_wasm_bg.wasm")), () =>
  require("node:fs/promises").readFile(join(__dirname, "wasm/locksmith_wasm_redis_bg.wasm")),
);
module.exports = api;
