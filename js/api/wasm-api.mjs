// The named exports of every WebAssembly entry.
import { api } from "./wasm-binding.mjs";

export const {
  lock,
  lockAll,
  MultiLock,
  semaphore,
  readWriteLock,
  election,
  Election,
  Leadership,
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
} = api;

export { RedisLockStore } from "../redis/wasm-store.mjs";
/** Which build serves the API: always the WebAssembly one here. */
export const backend = "wasm";
