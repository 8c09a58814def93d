// The diagnostics channels outside Node: in workerd with nodejs_compat (Miniflare), on
// the memory store and a Durable Object store, and in Deno, through node:diagnostics_channel.
// (Where the runtime has no channels, workerd without the flag and browsers, nothing is
// published and locks work as ever: js-tests/runtimes/workerd.test.mjs and the browser
// smoke test run without them.)
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

import { startWorker } from "../support/workerd-harness.mjs";
import { TARGET } from "../support/target.mjs";

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL("../..", import.meta.url));

describe("diagnostics channels in other runtimes", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  it("publish in workerd with nodejs_compat, on the memory store and a Durable Object store", { timeout: 60_000 }, async () => {
    const worker = await startWorker("workerd/diagnostics-worker.mjs", {
      compatibilityFlags: ["nodejs_compat"],
      durableObjects: { LOCKS: { className: "LockDurableObject", useSQLite: true } },
    });
    try {
      for (const [path, store] of [
        ["/", "memory"],
        ["/do", "durable-object"],
      ]) {
        const body = await (await worker.mf.dispatchFetch(`http://worker${path}`)).json();
        assert.deepEqual(
          body.events,
          [
            ["start", "dc-worker", store],
            ["asyncEnd", "dc-worker", store, "acquired", 1],
            ["start", "dc-worker", store],
            ["asyncEnd", "dc-worker", store, "released", null],
          ],
          JSON.stringify(body),
        );
      }
    } finally {
      await worker.dispose();
    }
  });

  it("publish in Deno", { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), "locksmith-deno-dc-"));
    try {
      await writeFile(
        join(dir, "dc.mjs"),
        `import dc from "node:diagnostics_channel";
import * as ls from ${JSON.stringify(pathToFileURL(join(root, "js/wasm.mjs")).href)};
const seen = [];
dc.tracingChannel("locksmith:acquire").subscribe({ asyncEnd: (c) => seen.push([c.kind, c.store, c.outcome, c.attempts]) });
dc.subscribe("locksmith:lost", (m) => seen.push(["lost", m.reason]));
const l = ls.lock("deno-dc", "50ms");
await l.acquire();
await new Promise((resolve) => setTimeout(resolve, 200));
console.log(JSON.stringify({ backend: ls.backend, seen }));
`,
      );
      const deno = require.resolve("deno/bin.cjs");
      const { stdout } = await run(process.execPath, [deno, "run", "--allow-read", "--no-prompt", "dc.mjs"], {
        cwd: dir,
        env: { ...process.env, LOCKSMITH_WARNINGS: "0" },
      });
      assert.deepEqual(JSON.parse(stdout), {
        backend: "wasm",
        seen: [
          ["lock", "memory", "acquired", 1],
          ["lost", "LOCK_NOT_HELD"],
        ],
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
