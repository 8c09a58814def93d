// Every entry of the package exports the same names. The ES module entries must write
// their names out (an ES module's exports are static), beside the object `makeApi`
// returns (what the CommonJS entries export); this keeps the lists one list in effect.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { it } from "node:test";

const require = createRequire(import.meta.url);
const names = (module) =>
  Object.keys(module)
    .filter((k) => k !== "default")
    .sort();

it("the ES module and CommonJS entries of both builds export the same names", async () => {
  const nativeCjs = require("../js/index.cjs");
  const nativeEsm = await import("../js/node.mjs");
  const wasmCjs = require("../js/wasm.cjs");
  const wasmEsm = await import("../js/wasm.mjs");
  const expected = names(nativeCjs);
  assert.ok(expected.includes("lock") && expected.includes("backend") && expected.includes("RedisLockStore"), expected.join(", "));
  assert.deepEqual(names(nativeEsm), expected, "js/node.mjs against require('locksmith-js')");
  assert.deepEqual(names(wasmCjs), expected, "require('locksmith-js/wasm') against require('locksmith-js')");
  assert.deepEqual(names(wasmEsm), expected, "js/wasm.mjs against require('locksmith-js')");
  assert.equal(nativeEsm.default, nativeCjs, "js/node.mjs's default export is the CommonJS instance");
});
