// The README's demo (`npm run demo` runs examples/demo.mjs) runs to the end and says
// what it shows. In the native pass only: the demo imports the package as Node does.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { TARGET } from "./support/target.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

describe("examples/demo.mjs", { skip: TARGET !== "native" && "the demo runs in the native pass" }, () => {
  it("runs every scene to its expected outcome", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [join(ROOT, "examples/demo.mjs")], { timeout: 60_000 });
    assert.match(stdout, /the invoice was charged exactly once/);
    assert.match(stdout, /the waiter got the lock/);
    assert.match(stdout, /run\(\) rejected with LockNotHeldError/);
    assert.match(stdout, /20 of 20 transfers ran.*total 300/);
  });
});
