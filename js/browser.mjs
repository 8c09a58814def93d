// locksmith for browsers: `await init()` once, then use the API. A call before init()
// throws a LockError with code NOT_INITIALIZED.
import * as wasm from "./wasm/locksmith_wasm.js";
import { useWasm } from "./api/wasm-binding.mjs";

let initialised;

/** Fetches and instantiates the WebAssembly module; resolves when locksmith is ready. */
export function init(input) {
  initialised ??= wasm.default(input === undefined ? undefined : { module_or_path: input }).then(() => useWasm(wasm));
  return initialised;
}

export default init;
export * from "./api/wasm-api.mjs";
