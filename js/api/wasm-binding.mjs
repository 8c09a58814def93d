// The API of the WebAssembly entries, over whichever module an entry initialised. The
// binding looks the wasm exports up at call time, so the API exists before the module
// is initialised, and a call made too early says so.
import { makeApi } from "./api.mjs";
import { LockError } from "./errors.mjs";

let ready;

/** Called by an entry once its wasm module is initialised. */
export function useWasm(exports) {
  ready = exports;
}

function wasm() {
  if (ready === undefined) {
    throw new LockError("locksmith: the WebAssembly module is not initialised: call `await init()` first", "NOT_INITIALIZED");
  }
  return ready;
}

export const api = makeApi({
  get MemoryStore() {
    return wasm().WasmMemoryStore;
  },
  get AbortToken() {
    return wasm().AbortToken;
  },
  // `capabilities`: what the JS store offers beyond the required methods (bridge.mjs).
  bridge: (dispatch, timeoutMs, capabilities) =>
    new (wasm().WasmJsStoreBridge)(
      dispatch,
      timeoutMs,
      capabilities.isHeldBy,
      capabilities.permits,
      capabilities.onRelease,
      capabilities.hasWaiters,
      capabilities.ownerRemainingTime,
      capabilities.permitWeights,
      capabilities.acquireAll,
    ),
});
