// locksmith for Cloudflare Workers (workerd): the .wasm is imported as a compiled
// module and instantiated synchronously — workerd does not compile wasm from bytes.
import * as wasm from "./wasm/locksmith_wasm.js";
import module from "./wasm/locksmith_wasm_bg.wasm";
import { useWasm } from "./wasm-binding.mjs";

wasm.initSync({ module });
useWasm(wasm);

export * from "./wasm-api.mjs";
