// The wasm half of a runtime entry: the binding the shared JS surface runs on. The
// binding looks the wasm exports up at call time, so an entry can be imported before
// the module is initialised, and a call made too early says so.
import { LockError, makeApi } from "./api.mjs";

/**
 * @param {() => object | undefined} exports the wasm-bindgen exports once initialised
 * @param {string} hint what to do when they are not
 */
export function wasmApi(exports, hint) {
  const ready = () => {
    const wasm = exports();
    if (wasm === undefined) throw new LockError(`locksmith: the WebAssembly module is not initialised: ${hint}`, "NOT_INITIALIZED");
    return wasm;
  };
  return makeApi({
    get MemoryStore() {
      return ready().WasmMemoryStore;
    },
    bridge: (dispatch, timeoutMs, hasIsHeldBy) => new (ready().WasmJsStoreBridge)(dispatch, timeoutMs, hasIsHeldBy),
  });
}
