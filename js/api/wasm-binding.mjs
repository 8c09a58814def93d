// The API of the WebAssembly entries, over whichever module an entry initialised. The
// binding looks the wasm exports up at call time, so the API exists before the module
// is initialised, and a call made too early says so.
import { makeApi } from "./api.mjs";
import { LockError, UnsupportedError } from "./errors.mjs";

let ready;
let loadEngine;

/**
 * Called by an entry once its wasm module is initialised; `engine()` loads the second
 * module (the Redis engine's, which also holds the test kit's TestStore) where the
 * runtime has it.
 */
export function useWasm(exports, engine = undefined) {
  ready = exports;
  loadEngine = engine;
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
  // `clock`: the test kit's clock (its VirtualClock below), for a TestStore.
  bridge(dispatch, timeoutMs, capabilities, clock) {
    const bridge = new (wasm().WasmJsStoreBridge)(
      dispatch,
      timeoutMs,
      capabilities.isHeldBy,
      capabilities.permits,
      capabilities.onRelease,
      capabilities.hasWaiters,
      capabilities.ownerRemainingTime,
      capabilities.permitWeights,
      capabilities.acquireAll,
      capabilities.fair,
    );
    if (clock !== undefined) bridge.useClock(clock);
    return bridge;
  },
  // The test kit (locksmith-js/testing): the clock's side in this module, and a
  // TestStore's memory store, which lives in the second module (the Redis engine's) so
  // that this one stays small. Everything runs on the JS thread: no work to count.
  get VirtualClock() {
    return wasm().WasmVirtualClock;
  },
  async testMemory(_clock, nowMs, unixStartMs) {
    if (loadEngine === undefined) {
      throw new UnsupportedError(
        "locksmith: the test kit's TestStore needs the second WebAssembly module, which this entry does not load; run its tests in Node, Deno or workerd",
      );
    }
    const engine = await loadEngine();
    return new engine.WasmTestMemory(nowMs, unixStartMs);
  },
});
