// locksmith in real workerd, through Miniflare: the wasm build on the per-isolate
// memory store and on the shipped Durable Object store, observed through dispatchFetch.
// The worker imports "locksmith" and "locksmith/cloudflare" by name; esbuild resolves
// them through the package's own exports map (the workerd condition), as wrangler would
// from node_modules. js-tests/workerd-store.test.mjs tests the Durable Object store itself.
import assert from "node:assert/strict";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

import { TARGET } from "./target.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));

// One run of this file is enough: it tests the wasm build whatever LOCKSMITH_TARGET says.
describe("workerd (Miniflare)", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let mf;
  let out;
  const get = async (path) => {
    const res = await mf.dispatchFetch(`http://worker${path}`);
    return res.json();
  };

  before(async () => {
    out = await mkdtemp(join(tmpdir(), "locksmith-workerd-"));
    const result = await build({
      entryPoints: [`${root}js-tests/workerd/worker.mjs`],
      bundle: true,
      format: "esm",
      outfile: join(out, "worker.js"),
      conditions: ["workerd", "worker"],
      external: ["*.wasm", "cloudflare:*"],
      metafile: true,
      logLevel: "error",
    });
    assert.ok(Object.keys(result.metafile.inputs).includes("js/workerd.mjs"), "the workerd condition chose js/workerd.mjs");
    await mkdir(join(out, "wasm"));
    // Both modules ship, as wrangler ships them: the Redis engine's is imported only by RedisLockStore.connect().
    for (const file of ["locksmith_wasm_bg.wasm", "locksmith_wasm_redis_bg.wasm"]) {
      await copyFile(`${root}js/wasm/${file}`, join(out, "wasm", file));
    }
    mf = new Miniflare({
      modules: true,
      scriptPath: join(out, "worker.js"),
      modulesRoot: out,
      modulesRules: [
        { type: "ESModule", include: ["**/*.js"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      durableObjects: { LOCKS: { className: "LockDurableObject", useSQLite: true } },
      compatibilityDate: "2025-01-01",
    });
    await mf.ready;
  });
  after(async () => {
    await mf?.dispose();
    if (out) await rm(out, { recursive: true, force: true });
  });

  for (const [name, prefix] of [["the memory store", ""], ["a Durable Object store", "/do"]]) {
    describe(name, () => {
      it("lets one of three concurrent requests run", async () => {
        const key = `once-${prefix.length}`;
        const outcomes = await Promise.all([1, 2, 3].map(() => get(`${prefix}/run?key=${key}&ms=300`)));
        assert.equal(outcomes.filter((o) => o.ran).length, 1, JSON.stringify(outcomes));
        assert.deepEqual(outcomes.find((o) => o.ran), { ran: true, result: "done" });
      });

      it("lets a waiter in when the holder finishes", async () => {
        const key = `wait-${prefix.length}`;
        const holder = get(`${prefix}/run?key=${key}&ms=200`);
        await new Promise((resolve) => setTimeout(resolve, 50));
        const waiter = await get(`${prefix}/run?key=${key}&timeout=3000`);
        assert.deepEqual(waiter, { ran: true, result: "done" });
        assert.equal((await holder).ran, true);
      });

      it("hands a held lock to another request, which releases it", async () => {
        const key = `handoff-${prefix.length}`;
        const { taken, serialized, token } = await get(`${prefix}/hold?key=${key}&ttl=10000`);
        assert.equal(taken, true);
        assert.equal(typeof serialized, "string");
        assert.equal(typeof token, "number");
        assert.equal((await get(`${prefix}/hold?key=${key}`)).taken, false, "refused while held");
        const state = await get(`${prefix}/state?key=${key}`);
        assert.equal(state.locked, true);
        assert.ok(state.remaining > 0 && state.remaining <= 10_000);
        assert.deepEqual(await get(`${prefix}/release?lock=${encodeURIComponent(serialized)}`), { released: true });
        assert.deepEqual(await get(`${prefix}/state?key=${key}`), { locked: false, remaining: null });
      });

      it("gives typed errors", async () => {
        const err = await get(`${prefix}/bad?key=bad-${prefix.length}`);
        assert.equal(err.name, "LockNotHeldError");
        assert.equal(err.code, "LOCK_NOT_HELD");
        assert.match(err.message, /^locksmith: /);
      });
    });
  }
});
