// The bench's election workload (bench/election.mjs) and its section of BENCHMARKS.md
// (bench/report.mjs): the checks say no to a takeover that was not one, the section shows
// the numbers the run printed, and a run of the workload alone replaces only its section.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { electionVerdict, takeoverProblems } from "../bench/election.mjs";
import { ELECTION_HEADING, electionLine, electionSection, spliceSection } from "../bench/report.mjs";

const stat = (median) => ({ median, min: median, max: median, samples: [median] });
const measured = {
  ttlMs: 1000,
  retryMs: 50,
  kill: stat(818.4),
  intoLease: stat(201.2),
  afterLease: stat(19.6),
  renewedBeforeKill: 0,
  resign: stat(2.4),
  close: stat(12.6),
};
const results = {
  date: "2026-12-06T06:00:00.000Z",
  command: "node bench/run.mjs election",
  machine: { cpus: 2, cpu: "a CPU", node: "v20", platform: "linux-x64" },
  election: {
    build: "native",
    repetitions: 3,
    retryMs: 50,
    stores: {
      RedisLockStore: measured,
      DurableObjectLockStore: { ...measured, close: null },
      PostgresLockStore: { unavailable: "spawn postgres ENOENT" },
    },
  },
};

describe("the bench's election workload", () => {
  it("finds fault with a standby that led beside its leader, a term that did not grow, a failed resign", () => {
    assert.deepEqual(takeoverProblems({ waited: true, terms: [3, 4], resigned: true }), []);
    assert.equal(takeoverProblems({ waited: false, terms: [3, 4], resigned: true }).length, 1);
    assert.equal(takeoverProblems({ waited: true, terms: [4, 4], resigned: false }).length, 2);
  });

  it("fails a run with a failed or unclean store, not one whose server is missing", () => {
    assert.equal(electionVerdict(results.election).ok, true);
    assert.equal(electionVerdict({ stores: { A: { error: "the leader exited with 1: Error: x\nstack" } } }).ok, false);
    assert.equal(electionVerdict({ stores: { A: { ...measured, problems: ["the standby led while its leader lived"] } } }).ok, false);
  });

  it("shows in BENCHMARKS.md the numbers the run printed", () => {
    const line = electionLine("RedisLockStore", measured);
    assert.match(
      line,
      /TTL 1000 ms, retry delay 50 ms\): takeover 818 ms after SIGKILL \(killed 201 ms into the lease, led 20 ms after its end\); handover 2 ms after resign\(\), 13 ms after close\(\)/,
    );
    const section = electionSection(results, "bench/results/x.json");
    assert.ok(section.startsWith(`${ELECTION_HEADING}\n`));
    assert.match(section, /Measured by `node bench\/run\.mjs election` on 2026-12-06/);
    assert.ok(section.includes("| RedisLockStore | 1000 | 50 | 818 | 201 | 20 | 2 | 13 |"));
    assert.ok(section.includes("| DurableObjectLockStore | 1000 | 50 | 818 | 201 | 20 | 2 | — (no close() of its own) |"));
    assert.match(section, /\| PostgresLockStore \| not measured: its server is not available here \(spawn postgres ENOENT\) \|/);
    assert.match(electionLine("PostgresLockStore", { unavailable: "spawn postgres ENOENT" }), /not measured: its server is not available here/);
  });

  it("replaces its own section of BENCHMARKS.md and nothing else, or appends it", () => {
    const section = `${ELECTION_HEADING}\n\nnew\n`;
    const before = `# Benchmarks\n\n## Memory\n\nm\n\n${ELECTION_HEADING}\n\nold\n\n## After\n\na\n`;
    assert.equal(spliceSection(before, section), `# Benchmarks\n\n## Memory\n\nm\n\n${ELECTION_HEADING}\n\nnew\n\n## After\n\na\n`);
    assert.equal(spliceSection("# Benchmarks\n\n## Memory\n\nm\n", section), `# Benchmarks\n\n## Memory\n\nm\n\n${section}`);
    assert.equal(spliceSection("", section), section);
  });
});
