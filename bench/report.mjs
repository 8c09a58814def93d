// BENCHMARKS.md and the chart, from a results object of run.mjs. Run directly
// (`node bench/report.mjs`), it rewrites both from the latest file in bench/results/.
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

import { exclusionVerdict } from "./exclusion.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const fmt = (n) => (n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(2));
const row = (cells) => `| ${cells.join(" | ")} |`;

function table(title, unit, data, { higherIsBetter = true, versus } = {}) {
  const lines = [
    `### ${title}`,
    "",
    row(["", `median ${unit}`, "min", "max", versus ? `locksmith ÷ ${versus}` : "vs locksmith"]),
    row(["---", "---:", "---:", "---:", "---:"]),
  ];
  const ours = Object.entries(data).find(([k]) => k.startsWith("locksmith"))?.[1].median;
  for (const [name, s] of Object.entries(data)) {
    const ratio = higherIsBetter ? ours / s.median : s.median / ours;
    lines.push(row([name, fmt(s.median), fmt(s.min), fmt(s.max), name.startsWith("locksmith") ? "" : `${ratio.toFixed(2)}×`]));
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Contended criticals/s per contender as { median, min, max }. Runs before every round was
 * kept recorded one number (the last round); those show as that one round.
 */
function contendedRates(criticals) {
  return Object.fromEntries(Object.entries(criticals).map(([k, v]) => [k, typeof v === "number" ? { median: v, min: v, max: v, samples: [v] } : v]));
}

function bestPeer(data, higherIsBetter = true) {
  const peers = Object.entries(data).filter(([k]) => !k.startsWith("locksmith"));
  peers.sort((a, b) => (higherIsBetter ? b[1].median - a[1].median : a[1].median - b[1].median));
  return peers[0];
}

/** What the contended table's columns are, and how the round trips were counted. */
function contendedNotes(trips) {
  const measured = Object.keys(trips).length > 0;
  const pass = Object.entries(trips)
    .map(([k, v]) => `${k} ${fmt(v.criticalsPerSec)}`)
    .join(", ");
  return `The gap is the time from one critical section's end to the next one's start. ${
    measured
      ? `Fairness is
Jain's index of the 16 workers' critical-section counts in a round, (Σx)² / (n·Σx²): 1 when
every worker got as many turns as every other, 1/16 when one got them all (median over
rounds). Client round trips per critical are the requests the contender's own connections
send (each answered by a reply, pipelined or not; SUBSCRIBE, UNSUBSCRIBE and PING on a
subscriber connection included), counted by a \`MONITOR\` connection, which leaves out the
commands a script runs. \`MONITOR\` slows the server, so they come from a pass of their
own: a fresh, warmed-up instance of each contender, 16 workers on one key for 1 s
(criticals/s in that pass: ${pass}); the other columns come from the timed rounds. A pass
in which \`MONITOR\` showed no request from the contender, or fewer commands than the
server counted, fails the run.`
      : "This run did not measure fairness or client round trips."
  } Redis commands per critical come from the server's \`INFO\` over the timed rounds and
also count the commands the scripts run.
`;
}

/** "0.91" or, where a run did not measure it, an em dash. */
const maybe = (v, digits = 2) => (typeof v === "number" ? v.toFixed(digits) : "—");

/** The server CPU per c=64 pair against the best peer's (runs before it was measured: a dash). */
function serverCpuRow(red) {
  const cpu = red.serverCpuPerPair;
  if (cpu === undefined) return ["Redis server CPU per acquire+release pair ≤ the best peer's (fencing included)", "not measured in this run", "—"];
  const peers = Object.entries(cpu).filter(([k]) => k !== "locksmith");
  const [name, best] = peers.reduce((a, b) => (b[1].median < a[1].median ? b : a));
  const ours = cpu.locksmith.median;
  return [
    `Redis server CPU per acquire+release pair ≤ the best peer's (${name}; fencing included)`,
    `${fmt(ours)} µs vs ${fmt(best.median)} µs`,
    ours <= best.median ? "met" : "not met",
  ];
}

/** `links` are the chart's and the results file's paths relative to where the report goes. */
export function report(r, file, links = { chart: "bench/results/chart.svg", file }) {
  const mem = r.memory;
  const red = r.redis;
  const ceilingP16 = r.ceiling.P16.pairsPerSec;
  const ours64 = red.c64.locksmith.median;
  const [bestName, best] = bestPeer(red.c64);
  const [best1Name, best1] = bestPeer(red.c1, false);
  const memRatio = mem.sequential["locksmith (native)"].median / mem.sequential["plain-JS baseline"].median;
  const runRatio = mem.concurrent["locksmith (native)"].median / mem.concurrent["plain-JS baseline"].median;
  const workerdRatio = r.wasm.workerd["locksmith (wasm)"].median / r.wasm.workerd["plain-JS baseline"].median;
  const handoff = red.contended.handoff;
  const cmds = red.contended.commandsPerCritical;
  // Fairness and client round trips per critical: not in runs before they were measured.
  const fairness = red.contended.fairness ?? {};
  const trips = red.contended.roundTrips ?? {};
  const c1Ratio = red.c1.locksmith.median / best1.median;
  const c64Ratio = ours64 / best.median;
  const ourTrips = trips.locksmith?.perCritical;
  const ourFairness = fairness.locksmith?.median;
  const ourHandoffMs = handoff.locksmith.p50.median / 1000;
  const pollers = Object.entries(cmds).filter(([k]) => k !== "locksmith");
  const fewest = Math.min(...pollers.map(([, v]) => v.median));
  const gz = r.wasm.size.gzipBytes / 1024;
  const contended = contendedRates(red.contended.criticals);
  const oneRound = Object.values(contended).some((v) => v.samples?.length === 1) && r.rounds > 1;
  const exclusion = exclusionVerdict(r.exclusion);
  const check = (ok) => (ok ? "met" : "not met");
  const targets = [
    ["Memory pairs/s ≥ 1.5× the plain-JS baseline", `${memRatio.toFixed(2)}×`, check(memRatio >= 1.5)],
    ["Memory run() ×64 ≥ 1.5× the plain-JS baseline", `${runRatio.toFixed(2)}×`, check(runRatio >= 1.5)],
    ["workerd memory pairs/s ≥ 1.0× plain JS in workerd", `${workerdRatio.toFixed(2)}×`, check(workerdRatio >= 1.0)],
    [
      `Redis concurrency 1 acquire+release p50 ≤ 1.0× the best peer's (${best1Name})`,
      `${c1Ratio.toFixed(2)}× (${fmt(red.c1.locksmith.median)} µs vs ${fmt(best1.median)} µs)`,
      check(c1Ratio <= 1.0),
    ],
    [
      `Redis concurrency 64 ≥ 2.0× the best peer (${bestName})`,
      `${c64Ratio.toFixed(2)}×; ${((ours64 / ceilingP16) * 100).toFixed(0)}% of the pipelined ceiling`,
      check(c64Ratio >= 2.0),
    ],
    serverCpuRow(red),
    ["Contended handoff p50 under 1 ms", `${ourHandoffMs.toFixed(3)} ms`, check(handoff.locksmith.p50.median < 1000)],
    [
      "Contended: fairness ≥ 0.9 and ≤ 2.2 client requests per critical",
      ourTrips === undefined || ourFairness === undefined
        ? `not measured in this run (handoff ${ourHandoffMs.toFixed(3)} ms)`
        : `${ourTrips.toFixed(2)} requests, fairness ${ourFairness.toFixed(3)} (handoff p50 ${ourHandoffMs.toFixed(3)} ms)`,
      check(ourTrips <= 2.2 && ourFairness >= 0.9),
    ],
    [
      "Fewer Redis commands per critical than any polling peer",
      `${cmds.locksmith.median.toFixed(2)} vs ${fewest.toFixed(2)}`,
      check(cmds.locksmith.median < fewest),
    ],
    ["wasm (the module a memory or JS-store user loads) ≤ 49 KB gzipped", `${gz.toFixed(1)} KB`, check(gz <= 49)],
    ...fileRows(r.file, check),
  ];
  return `# Benchmarks

Measured by \`npm run bench\` on ${r.date.slice(0, 10)}: ${r.machine.cpus} cores (${r.machine.cpu}), Node ${r.machine.node}, one
\`redis-server\` on loopback started by the bench. ${r.rounds} round${r.rounds === 1 ? "" : "s"}, interleaved: every round runs every
contender once${r.rotated ? ", in an order that turns by one each round," : ""} so drift hits all alike. Raw numbers: [\`${file}\`](${links.file}). These are benchmarks, not
tests: nothing here is asserted by \`npm test\`.

${r.quick ? "**A quick run (`BENCH_QUICK=1`): smaller runs than `npm run bench` makes, not figures to compare with.**\n\n" : ""}![locksmith relative to the best alternative per workload](${links.chart})

## Targets

${row(["target", "now", ""])}
${row(["---", "---", "---"])}
${targets.map(row).join("\n")}

## Memory

${table("Sequential acquire + release on one key", "pairs/s", mem.sequential, { versus: "each" })}
${table("64 concurrent run() loops over 1 000 keys", "runs/s", mem.concurrent, { versus: "each" })}
The baseline (\`bench/baseline.mjs\`) is a Map-based lock with the same API and guarantees: a
\`crypto.randomUUID()\` owner per acquisition, expiry, owner-only release. async-mutex is an
in-process mutex without TTL or ownership tokens.${r.exclusion ? " Each run()'s critical section holds its lock across one event-loop turn, and the 64 loops' keys collide now and then, so that the exclusion check could see two holders of one key." : ""}

${r.file ? table("One host, no server: concurrency 1 acquire + release", "p50 µs", r.file.c1, { higherIsBetter: false, versus: "each" }) : ""}
## Redis

All peers run on ioredis against the same server. Waiting peers poll every 20 ms; locksmith
wakes on a release notification.${red.c1["redis-semaphore (auto-pipelining)"] ? " redis-semaphore (auto-pipelining) is redis-semaphore on an ioredis client made with `enableAutoPipelining: true`, which sends the commands of one event-loop turn as one pipeline." : ""}

${table("Concurrency 1: pair latency (acquire + release), p50", "µs", red.c1, { higherIsBetter: false, versus: "each" })}
${table("Concurrency 1: p99", "µs", red.c1p99, { higherIsBetter: false, versus: "each" })}
${table("Concurrency 64, distinct keys", "pairs/s", red.c64, { versus: "each" })}
${table("Contended: 16 workers on one key", "criticals/s", contended, { versus: "each" })}${oneRound ? "\nThis run kept only the last round of the contended workload: its median, min and max are that one round.\n" : ""}
${row(["contended", "release→acquire gap p50 µs", "gap p99 µs", "fairness (Jain)", "client round trips per critical", "Redis commands per critical"])}
${row(["---", "---:", "---:", "---:", "---:", "---:"])}
${Object.entries(handoff)
  .map(([k, v]) => row([k, fmt(v.p50.median), fmt(v.p99.median), maybe(fairness[k]?.median, 3), maybe(trips[k]?.perCritical), cmds[k].median.toFixed(2)]))
  .join("\n")}

${contendedNotes(trips)}

${exclusion.text}

${
  r.cluster
    ? `${table(`Redis Cluster: concurrency 64, distinct keys over ${r.cluster.masters} masters (a replica each)`, "pairs/s", r.cluster.c64, { versus: "each" })}
The 64 loops' keys fall in slots all over the cluster; the native store keeps one connection
per master and sends each pair straight to its key's master. All the servers share this
machine's two cores with the client, so the figure says what routing costs, not what three
machines would do.

`
    : ""
}### Ceiling: redis-benchmark, 64 connections

${row(["pipeline", "SET NX PX /s", "release script /s", "pairs/s"])}
${row(["---", "---:", "---:", "---:"])}
${Object.entries(r.ceiling)
  .map(([k, v]) => row([k.replace("P", "-P "), fmt(v.setPerSec), fmt(v.releasePerSec), fmt(v.pairsPerSec)]))
  .join("\n")}

The pipelined figure is what this server can do on this machine; locksmith's concurrency-64 rate is
${((ours64 / ceilingP16) * 100).toFixed(0)}% of it.

## WebAssembly

- Size: ${(r.wasm.size.rawBytes / 1024).toFixed(1)} KB raw, ${gz.toFixed(1)} KB gzipped.${
    r.wasm.size.redis
      ? `\n- The Redis engine's module (loaded only by \`RedisLockStore.connect()\`): ${(r.wasm.size.redis.rawBytes / 1024).toFixed(1)} KB raw, ${(r.wasm.size.redis.gzipBytes / 1024).toFixed(1)} KB gzipped.`
      : ""
  }
- Compile + instantiate in Node: median ${r.wasm.instantiateMs.median.toFixed(2)} ms.

${table("Node (wasm build): sequential pairs on one key", "pairs/s", { "locksmith (wasm)": mem.sequential["locksmith (wasm)"], "plain-JS baseline": mem.sequential["plain-JS baseline"] }, { versus: "each" })}
${table("workerd (Miniflare): sequential pairs on one key, inside one request", "pairs/s", r.wasm.workerd, { versus: "each" })}
## What bounds the Redis numbers

Measured on 2026-11-30 with the probes named, on this machine, beside run
2026-11-30T17-35-13Z; the probes print their own figures, so rerun them rather than trust
these in a later run's report.

- **Concurrency 1.** \`node bench/c1-probe.mjs\` splits a pair by marks around the
  socket's writes and \`data\` events (medians of 18,000 pairs; two runs): the round trips
  are ~32–38 µs (acquire) and ~25–30 µs (release) from the end of the write to the reply,
  the two \`write\` syscalls ~6–8 µs each (on loopback the sender's syscall also delivers
  to, and wakes, redis-server), and locksmith's own work ~18–27 µs in all (from
  \`acquire()\` to the write, from the acquired promise to the release's write, feeding
  each reply, and from a fed reply to the caller's \`await\`). The acquire round trip is
  ~6–8 µs longer than the release's: the fencing counter (\`TIME\` and a \`SET … GET\` on
  a second key in the script) costs the server that much, which redis-semaphore's plain
  \`SET NX\` does not pay. The probe's last line, two \`PING\` round trips on a bare
  \`net\` socket, took 51–56 µs; the best peer in the run above took ${fmt(best1.median)} µs, for
  two round trips with scripts plus the client's work. \`perf record\` of the c=1 loop
  puts 36 % of the Node process's samples in the kernel, with task switching and wake-ups
  (\`finish_task_switch\`, \`_raw_spin_unlock_irqrestore\`) its top entries, and 5 % in
  the addon.
- **Concurrency 64.** \`node bench/c64-probe.mjs\` reports each side's CPU per pair: Node
  ~11–17 µs for locksmith against ~24–35 µs for redis-semaphore, redis-server ~12–16 µs for
  both. With one write per turn the two took turns (Redis idle while Node made 64
  commands, Node idle while Redis ran them: ~27–31 k pairs/s); writing every 16 calls
  overlaps them. 2.0× the best peer in the run above would be ${fmt(2.0 * best.median)} pairs/s, i.e.
  under ${(1e6 / (2.0 * best.median)).toFixed(1)} µs of the server's one thread per pair, while the server spends ~12–16 µs
  of CPU on a pair of scripts sent in batches of 16 (redis-benchmark's pipelined ceiling
  above sends 16 per connection on 64 connections at once: ${fmt(ceilingP16)} pairs/s).
- **Contended.** Waiters of one process queue in arrival order, and a release wakes the
  longest waiting one through the release notification: 2 round trips per critical and
  fairness 1. The polling peers are faster here because the worker that released comes
  straight back and takes the key again on its next round trip, while the others poll
  (their fairness is lower); locksmith's handoff goes release reply → notification on the
  subscriber connection → the woken waiter's attempt, one hop more.

## What bounds the in-process numbers

Measured on the same 2-core machine while writing these notes; the bench's own figures are
above.

- **Memory pairs (native).** Awaiting two already-settled promises costs ~0.27 µs per pair
  (3.7 M/s for a loop that does nothing else); the plain-JS baseline spends ~0.9 µs more
  (a \`crypto.randomUUID()\`, a Map set and delete, two clock reads). locksmith's pair is two
  addon calls (\`tryAcquire\`, \`releaseNow\`, each ~75 ns of class unwrapping plus the
  call itself) and, in Rust, a 128-bit owner token from the buffered CSPRNG, a SipHash-keyed
  map insert and remove (\`SipHash\` on purpose: keys come from user input), two monotonic
  clock reads, a fencing counter and the handle's hold record with its change event.
  \`perf\` shows no single hot spot: V8's promise and microtask builtins lead, and the
  largest Rust entries are \`clock_gettime\` (~4.5 % of samples), SipHash (~3 %),
  \`MemoryStore::release_now\` and \`Lock::try_acquire_now\` (~2–3 % each). 1.5× the
  baseline needs the whole pair under ~0.8 µs, about the cost of the two awaits plus the
  two addon calls plus the JS surface, before any lock work.
- **Memory run() ×64 (native).** A \`--cpu-prof\` of 64 \`run()\` loops over 1 000 keys
  (\`node --cpu-prof bench/run64-probe.mjs\`, 3 s) puts ~48 % of samples in the three addon crossings of a
  run, counted in their JS callers: \`tryAcquireNow\` in \`acquire\` (~21 %),
  \`reset(key, ttl)\` of a pooled handle in \`takeNative\` (~14 %, the key crossing as a
  string) and \`releaseNow\` in \`release\` (~14 %); \`run()\` and its promise settling
  ~13 %, the idle \`(program)\` share ~11 %, GC ~3 %. The plain-JS baseline's run is a Map
  lookup and set inside the same promise machinery, so 1.5× needs the three crossings to
  become one (key and TTL set, taken and released where JS can read the outcome without a
  call), which the semantics allow but this release does not do.
- **workerd (wasm).** workerd runs the plain-JS baseline 2–3× faster than Node
  does (compare the two baseline rows above), while locksmith's per-pair work — two wasm
  calls, the token, the map, the hold bookkeeping — does not shrink with it. Both
  contenders read \`performance.now()\` twice per pair; a loop of such reads measures
  ~0.3 µs per call in workerd here (\`Date.now()\` ~0.17 µs), and the wasm build reaches it
  through an import. The wasm entry's hot calls return plain values (no result array, no
  externref-table traffic), but the pair still does more work than twenty lines of Map
  code.
- **Size.** The module is now our own code more than dependencies: by twiggy, of the
  ~111 KB before gzip, the Lock (core and its exports) is ~15 %, wasm-bindgen's
  per-export glue ~16 % (a shim per export that returns a \`Result\`), the memory store
  and its maps ~13 %, std/core/alloc (formatting and panics included) ~9 %, messages and
  tables ~8 %, serialize/restore ~8 %, the JS-store bridge ~7 %, lock lifetime (signal,
  autoExtend) ~6 %, validation, tokens and errors ~5 %, future glue ~3 %. serde_json,
  dlmalloc, Debug formatting and slicing's panic path are gone; \`panic_immediate_abort\`
  and \`-Zlocation-detail=none\` would cut formatting further but need a nightly toolchain.
  \`npm test\` holds the module to its budget (\`scripts/wasm-size.mjs\`).
`;
}

export function chart(r) {
  const bars = [
    ["memory pairs/s vs plain JS", r.memory.sequential["locksmith (native)"].median / r.memory.sequential["plain-JS baseline"].median],
    ["memory run() ×64 vs plain JS", r.memory.concurrent["locksmith (native)"].median / r.memory.concurrent["plain-JS baseline"].median],
    ["Redis c64 vs best peer", r.redis.c64.locksmith.median / bestPeer(r.redis.c64)[1].median],
    ["Redis c1 latency (inverse) vs best peer", bestPeer(r.redis.c1, false)[1].median / r.redis.c1.locksmith.median],
    [
      "contended criticals/s vs best peer",
      contendedRates(r.redis.contended.criticals).locksmith.median / bestPeer(contendedRates(r.redis.contended.criticals))[1].median,
    ],
    ["workerd pairs/s vs plain JS", r.wasm.workerd["locksmith (wasm)"].median / r.wasm.workerd["plain-JS baseline"].median],
  ];
  const width = 720;
  const barH = 26;
  const left = 300;
  const max = Math.max(2, ...bars.map(([, v]) => v)) * 1.1;
  const x = (v) => left + (v / max) * (width - left - 60);
  const rows = bars
    .map(([label, v], i) => {
      const y = 40 + i * (barH + 12);
      const color = v >= 1 ? "#2f7d4f" : "#b5543a";
      return `<text x="${left - 10}" y="${y + 17}" text-anchor="end">${label}</text><rect x="${left}" y="${y}" width="${x(v) - left}" height="${barH}" fill="${color}"/><text x="${x(v) + 6}" y="${y + 17}">${v.toFixed(2)}×</text>`;
    })
    .join("\n  ");
  const height = 60 + bars.length * (barH + 12);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="13">
  <text x="10" y="22" font-weight="bold">locksmith ÷ alternative (higher is better; 1× line marked)</text>
  <line x1="${x(1)}" y1="32" x2="${x(1)}" y2="${height - 10}" stroke="#444" stroke-dasharray="4 3"/>
  ${rows}
</svg>
`;
}

/**
 * Writes BENCHMARKS.md and the chart for `results` (read from `file`), or to the paths
 * given (a quick run's); returns the exclusion verdict.
 */
export function writeReport(results, file, { markdown = "BENCHMARKS.md", chart: chartFile = "bench/results/chart.svg" } = {}) {
  const link = (path) => relative(dirname(markdown), path) || ".";
  writeFileSync(join(root, markdown), report(results, file, { chart: link(chartFile), file: link(file) }));
  writeFileSync(join(root, chartFile), chart(results));
  return exclusionVerdict(results.exclusion);
}

/** The results file of the most recent run (by the date recorded in it). */
export function latestResults() {
  const files = readdirSync(join(root, "bench/results")).filter((f) => /^\d{4}-\d{2}-\d{2}.*\.json$/.test(f));
  if (files.length === 0) throw new Error("no results in bench/results/: run `npm run bench` first");
  const runs = files
    .map((f) => ({ file: `bench/results/${f}`, results: JSON.parse(readFileSync(join(root, "bench/results", f), "utf8")) }))
    .filter((run) => !run.results.quick);
  if (runs.length === 0) throw new Error("only quick runs in bench/results/: run `npm run bench` first");
  runs.sort((a, b) => a.results.date.localeCompare(b.results.date));
  return runs.at(-1);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { file, results } = latestResults();
  const verdict = writeReport(results, file);
  console.log(`wrote BENCHMARKS.md and bench/results/chart.svg from ${file}`);
  if (results.exclusion && !verdict.ok) {
    console.error(`FAILED: ${verdict.text.replaceAll("**", "")}`);
    process.exitCode = 1;
  }
}

/** The one-host targets: FileLockStore's pair p50 against proper-lockfile's and RedisLockStore's on loopback. */
function fileRows(file, check) {
  if (!file) return [];
  const ours = file.c1["locksmith FileLockStore"].median;
  const lockfile = file.c1["proper-lockfile"].median / ours;
  const redis = file.c1["RedisLockStore on loopback"].median / ours;
  return [
    [
      "FileLockStore concurrency 1 ≥ 10× proper-lockfile's pairs/s",
      `${lockfile.toFixed(1)}× (${fmt(ours)} µs vs ${fmt(file.c1["proper-lockfile"].median)} µs per pair)`,
      check(lockfile >= 10),
    ],
    [
      "FileLockStore concurrency 1 ≥ 5× RedisLockStore's on loopback",
      `${redis.toFixed(1)}× (${fmt(file.c1["RedisLockStore on loopback"].median)} µs per Redis pair)`,
      check(redis >= 5),
    ],
  ];
}
