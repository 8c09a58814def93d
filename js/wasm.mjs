// locksmith over WebAssembly for other ES module runtimes (Deno, Bun, bundlers): the
// module initialises itself on import.
import * as wasm from "./wasm/locksmith_wasm.js";
import { wasmApi } from "./wasm-binding.mjs";

const url = new URL("./wasm/locksmith_wasm_bg.wasm", import.meta.url);
if (url.protocol === "file:" && typeof process === "object" && process.versions?.node) {
  const { readFile } = await import("node:fs/promises");
  wasm.initSync({ module: await readFile(url) });
} else {
  await wasm.default({ module_or_path: url });
}
const api = wasmApi(() => wasm, "this should not happen");

export const {
  lock, Lock, restoreLock, setLockStore, getLockStore, MemoryLockStore,
  LockError, LockNotHeldError, InvalidArgumentError, InvalidSerializedLockError,
  StoreUnavailableError, StoreContractViolationError, LockStoreError, StoreClosedError,
} = api;
