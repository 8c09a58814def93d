// locksmith for browsers: `await init()` once, then use the API. A call before init()
// throws a LockError with code NOT_INITIALIZED.
import * as wasm from "./wasm/locksmith_wasm.js";
import { wasmApi } from "./wasm-binding.mjs";

let ready;
const api = wasmApi(() => ready, "call `await init()` first");

/** Fetches and instantiates the WebAssembly module; resolves when locksmith is ready. */
export async function init(input) {
  if (!ready) {
    await wasm.default(input === undefined ? undefined : { module_or_path: input });
    ready = wasm;
  }
}

export default init;
export const {
  lock, Lock, restoreLock, setLockStore, getLockStore, MemoryLockStore,
  LockError, LockNotHeldError, InvalidArgumentError, InvalidSerializedLockError,
  StoreUnavailableError, StoreContractViolationError, LockStoreError, StoreClosedError,
} = api;
