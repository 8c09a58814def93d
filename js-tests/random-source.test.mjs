// The WebAssembly build when `crypto.getRandomValues` fails (a fault no real runtime gives
// on demand, so the child process breaks it before the first owner token is drawn): an
// acquire rejects with NO_RANDOM_SOURCE, holds nothing, and the module keeps working
// once the random source is back, including the handle that saw the failure when another
// lock reuses it.
// The native addon draws from the OS directly, so this runs against the wasm build
// whichever LOCKSMITH_TARGET is set.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const wasmEntry = fileURLToPath(new URL("../js/wasm.mjs", import.meta.url));

const child = `
const real = crypto.getRandomValues.bind(crypto);
let broken = true;
crypto.getRandomValues = (bytes) => {
  if (broken) throw new Error("no entropy here");
  return real(bytes);
};
const ls = await import(${JSON.stringify(wasmEntry)});
const out = {};
const l = new ls.Lock("random-source", 1000);
for (const [name, call] of [["fast", () => l.acquire()], ["waiting", () => l.acquire({ timeout: 20 })]]) {
  try {
    out[name] = await call();
  } catch (err) {
    out[name] = { code: err.code, message: err.message, isError: err instanceof Error };
  }
}
out.lockedAfterFailure = await l.isLocked();
broken = false;
out.acquired = await l.acquire();
out.locked = await l.isLocked();
out.released = await l.release();
// The released handle goes back to the pool, and a lock on another key takes it over.
const other = new ls.Lock("random-source-other", 1000);
out.other = [await other.acquire(), await other.release()];
console.log(JSON.stringify(out));
`;

test("wasm: no random source → NO_RANDOM_SOURCE, nothing held, and the module recovers", () => {
  const out = JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", child], { encoding: "utf8" }));
  for (const name of ["fast", "waiting"]) {
    assert.equal(out[name].code, "NO_RANDOM_SOURCE", `${name}: ${JSON.stringify(out[name])}`);
    assert.equal(out[name].isError, true);
    assert.match(out[name].message, /^locksmith: no secure random source/);
  }
  assert.equal(out.lockedAfterFailure, false);
  assert.equal(out.acquired, true);
  assert.equal(out.locked, true);
  assert.equal(out.released, true);
  assert.deepEqual(out.other, [true, true], "a handle that saw the failure is reused");
});
