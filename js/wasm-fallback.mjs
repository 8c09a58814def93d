// The WebAssembly build as Node's fallback, bundled to CommonJS (js/gen/wasm.cjs) so
// that `require("locksmith")` can load it synchronously; js/index.cjs calls `start`.
import * as wasm from "./wasm/locksmith_wasm.js";
import { useWasm } from "./wasm-binding.mjs";

export * from "./wasm-api.mjs";

/** Instantiates the module from its bytes. */
export function start(bytes) {
  wasm.initSync({ module: bytes });
  useWasm(wasm);
}
