// locksmith for Vercel Edge (edge-light): the .wasm is imported with `?module` as a
// compiled module and instantiated synchronously.
import * as wasm from "./wasm/locksmith_wasm.js";
import module from "./wasm/locksmith_wasm_bg.wasm?module";
import { wasmApi } from "./wasm-binding.mjs";

wasm.initSync({ module });
const api = wasmApi(() => wasm, "this should not happen on edge-light");

export const {
  lock, Lock, restoreLock, setLockStore, getLockStore, MemoryLockStore,
  LockError, LockNotHeldError, InvalidArgumentError, InvalidSerializedLockError,
  StoreUnavailableError, StoreContractViolationError, LockStoreError, StoreClosedError,
} = api;
