// locksmith for Node, as ES modules: the same instance as `require("locksmith")`,
// so a store set from either is the store of both.
import api from "./node.cjs";

export const {
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
  RedisLockStore,
} = api;
export default api;
