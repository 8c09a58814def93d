// The JS surface of locksmith, the same in every runtime. A binding (the native addon
// in Node, the wasm build elsewhere) supplies the native pieces; all lock logic lives
// in the Rust core behind them. makeApi wires the parts over a binding: the stores
// (stores.mjs), the JS-store bridge (bridge.mjs), the lock handle (lock.mjs) and its
// makers (handles.mjs).
import { defineElection } from "./election.mjs";
import {
  AbortError,
  InvalidArgumentError,
  InvalidSerializedLockError,
  LockError,
  LockNotHeldError,
  LockStoreError,
  StoreClosedError,
  StoreContractViolationError,
  StoreNotSetError,
  StoreUnavailableError,
  UnsupportedError,
  checkArity,
  noteDefaultStore,
  storeRequired,
} from "./errors.mjs";
import { NATIVE, nativeStores } from "./stores.mjs";
import { jsStoreBridges } from "./bridge.mjs";
import { defineLock } from "./lock.mjs";
import { defineHandles } from "./handles.mjs";
import { warnIfProcessLocal } from "./warnings.mjs";

// The error classes and the shared checks are the API's exports too.
export * from "./errors.mjs";
// The stores' argument checks, for the CommonJS stores through js/gen/api.cjs.
export { checkKind, checkMs, checkPermits, checkSeq } from "./checks.mjs";
export { DATABASE_OPERATION_TIMEOUT_MS, DEFAULT_SQL_TABLE } from "./defaults.mjs";
// Every shipped store's close() starts with releaseHolds() (see shutdown.mjs).
export { DEFAULT_CLOSE_TIMEOUT_MS, closeOptions, releaseHolds } from "./shutdown.mjs";
export { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, HAS_WAITERS, NO_TOKENS, STORE_NAME } from "./symbols.mjs";
import { TEST_BINDINGS } from "./symbols.mjs";
// A store written in Rust keeps its native half under NATIVE (runtime entries set it).
export { NATIVE, NativeStore } from "./stores.mjs";

/** Builds the public API over a binding. */
export function makeApi(binding) {
  // The test kit (locksmith-js/testing) finds the loaded builds here, across copies.
  if (typeof binding.testMemory === "function") (globalThis[TEST_BINDINGS] ??= []).push(binding);
  const { MemoryLockStore, FileLockStore } = nativeStores(binding);
  const bridgeFor = jsStoreBridges(binding);

  /** The native side of `store`: its own for a native store, a bridge for any other. */
  function backendOf(store) {
    return store?.[NATIVE] ?? bridgeFor(store);
  }

  let currentStore;

  /** Sets the store that `lock()` and `restoreLock()` use; returns it. */
  function setLockStore(store) {
    checkArity(arguments, 1, "setLockStore(store)");
    backendOf(store);
    currentStore = store;
    return store;
  }

  /** The store that `lock()` and `restoreLock()` use. */
  function getLockStore() {
    checkArity(arguments, 0, "getLockStore()");
    if (currentStore === undefined) {
      if (storeRequired()) {
        throw new StoreNotSetError(
          "locksmith: no lock store was set, and LOCKSMITH_REQUIRE_STORE=1 asks every lock to name its store rather than use the default (this process's own memory): " +
            "call setLockStore(store) before the first lock, or pass the store: lock(key, ttlMs, store)",
        );
      }
      currentStore = new MemoryLockStore();
      noteDefaultStore();
      warnIfProcessLocal();
    }
    return currentStore;
  }

  const Lock = defineLock(binding, { backendOf, getLockStore });
  const { MultiLock, lock, lockAll, semaphore, readWriteLock, restoreLock } = defineHandles(Lock, { backendOf, getLockStore });
  const { election, Election, Leadership } = defineElection(Lock, { getLockStore });

  return {
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
  };
}
