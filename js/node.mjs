// locksmith for Node, as ES modules: the same instance as `require("locksmith")`,
// so a store set from either is the store of both. When the native addon cannot load
// (an unsupported platform, a missing build), the WebAssembly build takes its place,
// without RedisLockStore.
let api;
try {
  api = (await import("./node.cjs")).default;
} catch (err) {
  if (!String(err?.message).startsWith("locksmith: the native addon")) throw err;
  api = await import("./wasm.mjs");
  process.emitWarning(`${err.message}. Using the WebAssembly build instead.`, { code: "LOCKSMITH_WASM_FALLBACK" });
}

export const {
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
  RedisLockStore,
} = api;
export default api;
