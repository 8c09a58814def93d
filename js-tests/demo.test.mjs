// The README's demo (`npm run demo` runs examples/demo.mjs) and examples/leader.mjs run to the end and say
// what they show. In the native pass only: they import the package as Node does.
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

describe("examples/leader.mjs", { skip: TARGET !== "native" && "the example runs in the native pass (a FileLockStore)" }, () => {
  it("one of three instances runs the job; another takes over from the SIGKILLed leader, with a larger term", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [join(ROOT, "examples/leader.mjs")], { timeout: 60_000 });
    const leads = [...stdout.matchAll(/instance (\w) leads \(term (\d+)\)/g)].map(([, id, term]) => ({ id, term: BigInt(term) }));
    assert.equal(leads.length, 2, stdout);
    assert.notEqual(leads[0].id, leads[1].id);
    assert.ok(leads[1].term > leads[0].term, stdout);
    const killed = /SIGKILL to instance (\w)/.exec(stdout)?.[1];
    assert.equal(killed, leads[0].id);
    assert.match(stdout, new RegExp(`instance ${leads[1].id} took over from ${killed}`));
    // Only the leader of the moment runs the job.
    const before = stdout.slice(0, stdout.indexOf("SIGKILL"));
    assert.deepEqual(new Set([...before.matchAll(/instance (\w) runs the job/g)].map((m) => m[1])), new Set([leads[0].id]));
    assert.match(stdout, /every instance stopped/);
  });
});
