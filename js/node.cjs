"use strict";
// locksmith for Node: the native addon under the shared JS surface.

const { makeApi } = require("./gen/api.cjs");

function platformTriple() {
  const { platform, arch } = process;
  if (platform !== "linux") return `${platform}-${arch}`;
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
  return `linux-${arch}-${glibc ? "gnu" : "musl"}`;
}

function loadAddon() {
  const file = `locksmith.${platformTriple()}.node`;
  try {
    return require(`./native/${file}`);
  } catch (err) {
    const hint = "build it with `npm run build`, or use the WebAssembly build: import \"locksmith/wasm\"";
    throw new Error(`locksmith: the native addon ${file} could not be loaded (${err.message}); ${hint}`, {
      cause: err,
    });
  }
}

const addon = loadAddon();

const api = makeApi({
  MemoryStore: addon.NativeMemoryStore,
  // The addon calls JS stores error-first (Node's threadsafe-function convention).
  bridge: (dispatch, timeoutMs, hasIsHeldBy) =>
    new addon.JsStoreBridge((_err, call) => dispatch(call), timeoutMs, hasIsHeldBy),
});

delete api.toLockError;
module.exports = api;
