// The benchmark's mutual-exclusion check can say no: run against a lock that is not one,
// it counts overlaps and its verdict fails; against a real store it counts none.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { concurrentSections, contendOnOneKey, exclusionCheck, exclusionVerdict, yieldTurn } from "../bench/exclusion.mjs";
import { grantsAllStore } from "./support/js-stores.mjs";
import { ls, uniqueKey } from "./support/target.mjs";

const { Lock, MemoryLockStore } = ls;

/** The benchmark's waiting critical section, over locksmith's Lock on `store`. */
const over = (store) => async (key, fn) => {
  const l = new Lock(key, 30_000, store);
  if (!(await l.acquire({ timeout: 60_000, retryDelay: 1 }))) throw new Error("timed out");
  try {
    await fn();
  } finally {
    await l.release();
  }
};

describe("the benchmark's exclusion check", () => {
  it("counts sections that overlap across an await, and only those", async () => {
    const check = exclusionCheck();
    await Promise.all([check.section("a", yieldTurn), check.section("a", yieldTurn), check.section("b", yieldTurn)]);
    assert.deepEqual([check.sections, check.overlaps], [3, 1]);
    await check.section("a", yieldTurn);
    assert.equal(check.overlaps, 1, "a section after the others left is no overlap");
  });

  it("sees a store that grants every acquire, and fails the run", async () => {
    const grantsAll = grantsAllStore();
    const r = await contendOnOneKey(over(grantsAll), { key: uniqueKey("grants-all"), workers: 8, ms: 200 });
    assert.ok(r.overlaps > 0, `${r.sections} sections, no overlap seen`);
    const verdict = exclusionVerdict({ contended: { broken: r } });
    assert.equal(verdict.ok, false);
    assert.match(verdict.text, /violated/);
  });

  it("sees overlaps in the memory run() workload when the lock is not one, and none when it is", async () => {
    const grantsAll = grantsAllStore();
    const runOn = (store) => (key, fn) => new Lock(key, 30_000, store).runImmediately(fn);
    const broken = await concurrentSections(runOn(grantsAll), { loops: 64, perLoop: 20, check: exclusionCheck() });
    assert.ok(broken.overlaps > 0, `${broken.sections} sections of 64 loops, no overlap seen`);
    const real = await concurrentSections(runOn(new MemoryLockStore()), { loops: 64, perLoop: 20, check: exclusionCheck() });
    assert.equal(real.overlaps, 0);
    assert.ok(real.sections < 64 * 20, "some runs found their key taken and did not run");
  });

  it("sees no overlap on a MemoryLockStore", async () => {
    const r = await contendOnOneKey(over(new MemoryLockStore()), { key: uniqueKey("memory"), workers: 8, ms: 200 });
    assert.ok(r.sections > 8, `only ${r.sections} sections ran`);
    assert.equal(r.overlaps, 0);
    assert.equal(exclusionVerdict({ contended: { memory: r } }).ok, true);
  });

  it("does not claim exclusion held when nothing was checked", () => {
    assert.equal(exclusionVerdict(undefined).ok, false);
    assert.equal(exclusionVerdict({}).ok, false);
    assert.equal(exclusionVerdict({ contended: { idle: { sections: 0, overlaps: 0 } } }).ok, false);
  });
});
