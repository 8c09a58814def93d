// locksmith for Cloudflare Workers (workerd): the .wasm is imported as a compiled
// module and instantiated synchronously — workerd does not compile wasm from bytes.
import * as wasm from "./wasm/locksmith_wasm.js";
import module from "./wasm/locksmith_wasm_bg.wasm";
import { wasmApi } from "./wasm-binding.mjs";

wasm.initSync({ module });
const api = wasmApi(() => wasm, "this should not happen on workerd");

export const {
  lock, Lock, restoreLock, setLockStore, getLockStore, MemoryLockStore,
  LockError, LockNotHeldError, InvalidArgumentError, InvalidSerializedLockError,
  StoreUnavailableError, StoreContractViolationError, LockStoreError, StoreClosedError,
} = api;
