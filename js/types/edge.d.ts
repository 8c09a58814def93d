// The types of the WebAssembly entries: the same API as Node's (index.d.ts). There,
// `backend` is "wasm" and RedisLockStore.connect() rejects with code UNSUPPORTED.
export * from "./index.js";
