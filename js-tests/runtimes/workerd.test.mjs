// locksmith in real workerd, through Miniflare: the wasm build on the per-isolate
// memory store and on the shipped Durable Object store, observed through dispatchFetch.
// The worker imports "locksmith" and "locksmith-js/cloudflare" by name; esbuild resolves
// them through the package's own exports map (the workerd condition), as wrangler would
// from node_modules. js-tests/stores/workerd-store.test.mjs tests the Durable Object store itself.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { startWorker } from "../support/workerd-harness.mjs";
import { TARGET } from "../support/target.mjs";

// One run of this file is enough: it tests the wasm build whatever LOCKSMITH_TARGET says.
describe("workerd (Miniflare)", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let mf;
  let worker;
  const get = async (path) => {
    const res = await mf.dispatchFetch(`http://worker${path}`);
    return res.json();
  };

  before(async () => {
    worker = await startWorker("workerd/worker.mjs", { durableObjects: { LOCKS: { className: "LockDurableObject", useSQLite: true } } });
    assert.ok(worker.inputs.includes("js/workerd.mjs"), "the workerd condition chose js/workerd.mjs");
    mf = worker.mf;
  });
  after(async () => {
    await worker?.dispose();
  });

  for (const [name, prefix] of [
    ["the memory store", ""],
    ["a Durable Object store", "/do"],
  ]) {
    describe(name, () => {
      it("lets one of three concurrent requests run", async () => {
        const key = `once-${prefix.length}`;
        const outcomes = await Promise.all([1, 2, 3].map(() => get(`${prefix}/run?key=${key}&ms=300`)));
        assert.equal(outcomes.filter((o) => o.ran).length, 1, JSON.stringify(outcomes));
        assert.deepEqual(
          outcomes.find((o) => o.ran),
          { ran: true, result: "done" },
        );
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
