// The build under test, chosen by LOCKSMITH_TARGET: `native` (default, the napi addon)
// or `wasm` (the WebAssembly build through its Node entry).
const target = process.env.LOCKSMITH_TARGET ?? "native";
const entries = { native: "../../js/node.mjs", wasm: "../../js/wasm.mjs" };
if (!entries[target]) throw new Error(`LOCKSMITH_TARGET must be one of ${Object.keys(entries).join(", ")}`);

export const TARGET = target;
export const ls = await import(entries[target]);
// The Node entry falls back to WebAssembly when the addon does not load; a native run
// that quietly tested the fallback would prove nothing about the addon.
if (ls.backend !== target) throw new Error(`LOCKSMITH_TARGET=${target} but the ${ls.backend} build loaded`);

let next = 0;
/** A key no other test uses. */
export const uniqueKey = (name) => `test:${name}:${process.pid}:${next++}`;
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What `promise` has come to so far, in `state.now`: "pending", its value, or its error
 * as `failed(err)` gives it (the error itself unless told).
 */
export function watch(promise, failed = (err) => err) {
  const state = { now: "pending" };
  promise.then(
    (value) => {
      state.now = value;
    },
    (err) => {
      state.now = failed(err);
    },
  );
  return state;
}

/** Fails the file if any promise rejection goes unhandled while its tests run. */
export async function failOnUnhandledRejections() {
  const { before, after } = await import("node:test");
  const assert = (await import("node:assert/strict")).default;
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);
  before(() => process.on("unhandledRejection", onUnhandled));
  after(() => {
    process.off("unhandledRejection", onUnhandled);
    assert.deepEqual(unhandled, [], "no unhandled rejection escaped");
  });
}
