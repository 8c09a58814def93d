// The bench's fair workload (bench/fair.mjs) and its section of BENCHMARKS.md
// (bench/report.mjs): the overtake count says yes to a grant that went past an earlier
// waiter and no otherwise, the section shows the numbers the run printed, and a run of the
// workload alone replaces only its section.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { fairLine, fairVerdict, overtakeShare } from "../bench/fair.mjs";
import { FAIR_HEADING, fairSection, spliceSection } from "../bench/report.mjs";

const stat = (median) => ({ median, min: median, max: median, samples: [median] });
const mode = (criticals, handoff, overtakes, jain) => ({ criticals: stat(criticals), handoffP50: stat(handoff), overtakes: stat(overtakes), jain: stat(jain) });
const results = {
  date: "2026-12-06T06:00:00.000Z",
  command: "node bench/run.mjs fair",
  machine: { cpus: 2, cpu: "a CPU", node: "v20", platform: "linux-x64" },
  fair: {
    workers: 16,
    rounds: 3,
    ms: 2000,
    retryMs: 10,
    stores: {
      "MemoryLockStore (native)": { unfair: mode(204068.2, 1.2, 0.944, 0.989), fair: mode(20008.4, 48.4, 0, 1) },
      PostgresLockStore: { unavailable: "spawn postgres ENOENT" },
      EtcdLockStore: { error: "the waiter timed out\nat ..." },
    },
  },
};

describe("the bench's fair workload", () => {
  it("counts a grant as an overtake only when an earlier waiter (by more than 1 ms) still waited", () => {
    // a arrives at 0, b at 5; b granted at 10 while a waits until 20: b overtook a.
    assert.equal(
      overtakeShare([
        { arrived: 0, granted: 20 },
        { arrived: 5, granted: 10 },
      ]),
      0.5,
    );
    assert.equal(
      overtakeShare([
        { arrived: 0, granted: 10 },
        { arrived: 5, granted: 20 },
      ]),
      0,
      "in order",
    );
    assert.equal(
      overtakeShare([
        { arrived: 0, granted: 20 },
        { arrived: 0.5, granted: 10 },
      ]),
      0,
      "within the slack: no order between them",
    );
    assert.equal(overtakeShare([]), 0);
    assert.equal(
      overtakeShare([
        { arrived: 0, granted: 30 },
        { arrived: 2, granted: 40 },
        { arrived: 4, granted: 10 },
        { arrived: 6, granted: 50 },
      ]),
      0.25,
      "one of four went past two",
    );
  });

  it("prints and writes the same numbers; a failed store fails the run, an unavailable one does not", () => {
    const line = fairLine("MemoryLockStore (native)", results.fair.stores["MemoryLockStore (native)"]);
    assert.equal(
      line,
      "MemoryLockStore (native): unfair 204,068 criticals/s, handoff p50 1 µs, 94.4% of grants overtook an earlier waiter, Jain 0.989; fair 20,008 criticals/s, handoff p50 48 µs, 0.0% of grants overtook an earlier waiter, Jain 1.000",
    );
    const section = fairSection(results, "bench/results/x.json");
    assert.ok(section.startsWith(`${FAIR_HEADING}\n`));
    assert.match(section, /\| MemoryLockStore \(native\) \| unfair \| 204,068 \| 1 \| 94\.4% \| 0\.989 \|/);
    assert.match(section, /\| {2}\| fair \| 20,008 \| 48 \| 0\.0% \| 1\.000 \|/);
    assert.match(section, /\| PostgresLockStore \| not measured: its server is not available here \(spawn postgres ENOENT\)/);
    assert.match(section, /\| EtcdLockStore \| \*\*failed\*\*: the waiter timed out \|/);
    assert.equal(fairVerdict(results.fair).ok, false);
    assert.equal(fairVerdict({ stores: { a: results.fair.stores.PostgresLockStore } }).ok, true);
    // Spliced: the section replaces its old copy and leaves the rest.
    const before = `# Benchmarks\n\nintro\n\n${FAIR_HEADING}\n\nold\n\n## Later\n\nkept\n`;
    const after = spliceSection(before, section);
    assert.ok(after.includes("intro") && after.includes("## Later\n\nkept") && !after.includes("\nold\n"));
  });
});
