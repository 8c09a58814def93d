// The types of the WebAssembly entries (workerd, edge-light, Deno and other runtimes):
// everything of index.d.ts but the native Redis store.
export {
  lock,
  Lock,
  restoreLock,
  setLockStore,
  getLockStore,
  MemoryLockStore,
  LockError,
  LockNotHeldError,
  InvalidArgumentError,
  InvalidSerializedLockError,
  StoreUnavailableError,
  StoreContractViolationError,
  LockStoreError,
  StoreClosedError,
} from "./index.js";
export type { AcquireOptions, AutoExtendOptions, LockStore, LockErrorCode } from "./index.js";
