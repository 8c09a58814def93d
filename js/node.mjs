// locksmith for Node, as ES modules: the same instance as `require("locksmith-js")`,
// so a store set from either is the store of both. index.cjs picks the native addon or,
// where none loads, the WebAssembly build with the same exports (`backend` says which).
import api from "./index.cjs";

export const {
  lock,
  lockAll,
  MultiLock,
  semaphore,
  readWriteLock,
  Lock,
  restoreLock,
  setLockStore,
  getLockStore,
  MemoryLockStore,
  FileLockStore,
  LockError,
  LockNotHeldError,
  InvalidArgumentError,
  InvalidSerializedLockError,
  StoreUnavailableError,
  StoreContractViolationError,
  LockStoreError,
  StoreClosedError,
  StoreNotSetError,
  UnsupportedError,
  AbortError,
  RedisLockStore,
  backend,
} = api;
export default api;
