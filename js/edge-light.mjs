// locksmith for Vercel Edge (edge-light): the .wasm is imported with `?module` as a
// compiled module and instantiated synchronously.
import * as wasm from "./wasm/locksmith_wasm.js";
import module from "./wasm/locksmith_wasm_bg.wasm?module";
import { useWasm } from "./api/wasm-binding.mjs";

wasm.initSync({ module });
useWasm(wasm);

export * from "./api/wasm-api.mjs";
