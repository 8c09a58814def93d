// Async calls into the native addon are matched to their promises by a u32 call id. The
// id must wrap at 2^32 (and pass 2^31 without turning negative): a call whose id is lost
// never settles, and the process waits forever.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { TARGET } from "./support/target.mjs";

const entry = fileURLToPath(new URL("../js/node.mjs", import.meta.url));

// 20 async calls, each awaited, then a natural exit: nothing may keep the process up.
const script = `
  const { lock, MemoryLockStore, Lock } = await import(${JSON.stringify(entry)});
  const l = lock("call-ids");
  await l.acquire();
  let settled = 0;
  for (let i = 0; i < 20; i++) {
    if (await l.isLocked() !== true) throw new Error("isLocked answered wrong");
    settled++;
  }
  await l.release();
  console.log("settled " + settled);
`;

for (const [where, first] of [
  ["2^31 (where a signed 32-bit id turns negative)", 2 ** 31 - 5],
  ["2^32 (where the u32 id wraps to 0)", 2 ** 32 - 5],
]) {
  it(`async calls keep settling across ${where}`, { skip: TARGET !== "native" && "call ids are the native addon's" }, async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      env: { ...process.env, LOCKSMITH_TEST_FIRST_CALL_ID: String(first) },
      timeout: 20_000,
    });
    assert.equal(stdout.trim(), "settled 20");
  });
}
