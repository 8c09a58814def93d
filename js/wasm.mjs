// locksmith over WebAssembly for other ES module runtimes (Node's `locksmith/wasm`,
// Deno, Bun, bundlers): the module initialises itself on import.
import * as wasm from "./wasm/locksmith_wasm.js";
import { useWasm } from "./wasm-binding.mjs";

const url = new URL("./wasm/locksmith_wasm_bg.wasm", import.meta.url);
if (url.protocol === "file:" && typeof process === "object" && process.versions?.node) {
  const { readFile } = await import("node:fs/promises");
  wasm.initSync({ module: await readFile(url) });
} else {
  await wasm.default({ module_or_path: url });
}
useWasm(wasm);

export * from "./wasm-api.mjs";
