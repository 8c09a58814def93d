// The types of the WebAssembly entries (workerd, edge-light, Deno and other runtimes):
// everything of index.d.ts but the native Redis store.
export {
  lock,
  semaphore,
  readWriteLock,
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
  UnsupportedError,
} from "./index.js";
export type { AcquireOptions, AutoExtendOptions, LockStore, LockErrorCode, ReadWriteLock } from "./index.js";
