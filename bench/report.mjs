// BENCHMARKS.md and the chart, from a results object of run.mjs. Run directly
// (`node bench/report.mjs`), it rewrites both from the latest full run in bench/results/,
// with the election section from the latest run that measured elections. A run of some
// workloads only (`node bench/run.mjs election`) rewrites the election section alone.
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

import { WASM_GZIP_BUDGET_BYTES } from "../scripts/wasm-size.mjs";
import { exclusionVerdict } from "./exclusion.mjs";

/** The native RedisLockStore in its two modes: every number of theirs names its mode. */
export const FENCED = "locksmith (fenced)";
export const UNFENCED = "locksmith (fencing: false)";
/** The bare floor's row of round trips alone: as many PINGs as a locksmith pair has commands. */
export const pingsName = (n) => `PING ×${n} (round trips alone)`;

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const fmt = (n) => (n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(2));
const row = (cells) => `| ${cells.join(" | ")} |`;

/**
 * A workload's table: each contender's median, min and max, and locksmith's median over
 * each other contender's, once per locksmith mode the table has (fenced, fencing: false),
 * or over its first locksmith row.
 */
function table(title, unit, data, { higherIsBetter = true } = {}) {
  const modes = [FENCED, UNFENCED].filter((k) => k in data);
  const refs = modes.length ? modes : [Object.keys(data).find((k) => k.startsWith("locksmith"))];
  const head = (k) => (modes.length ? `${k.slice("locksmith (".length, -1)} ÷ each` : "locksmith ÷ each");
  const lines = [
    `### ${title}`,
    "",
    row(["", `median ${unit}`, "min", "max", ...refs.map(head)]),
    row(["---", "---:", "---:", "---:", ...refs.map(() => "---:")]),
  ];
  for (const [name, s] of Object.entries(data)) {
    const ratios = refs.map((ref) => {
      if (name.startsWith("locksmith")) return "";
      const ours = data[ref].median;
      return `${(higherIsBetter ? ours / s.median : s.median / ours).toFixed(2)}×`;
    });
    lines.push(row([name, fmt(s.median), fmt(s.min), fmt(s.max), ...ratios]));
  }
  return `${lines.join("\n")}\n`;
}

/** Old names of renamed contenders: runs before both fencing modes were measured ran the default, fenced. */
const RENAMED = {
  locksmith: FENCED,
  "RedisLockStore on loopback": "RedisLockStore on loopback (fenced)",
  "locksmith (cluster)": "locksmith (cluster, fenced)",
  "locksmith-js/ioredis on an ioredis Cluster": "locksmith-js/ioredis on an ioredis Cluster (fenced)",
};

/** `r` with the contenders of older runs under today's names (so older results files render). */
export function normalize(r) {
  const rename = (v) => {
    if (Array.isArray(v) || v === null || typeof v !== "object") return v;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [RENAMED[k] ?? k, rename(x)]));
  };
  const out = structuredClone(r);
  out.redis = rename(r.redis);
  if (r.file) out.file = rename(r.file);
  if (r.cluster) out.cluster = rename(r.cluster);
  return out;
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

/** `ours` against `theirs` as a ratio, "1.17× (68 µs vs 58 µs)"; a dash where either is missing. */
function versus(ours, theirs, unit) {
  if (ours === undefined || theirs === undefined) return "not measured in this run";
  return `${(ours / theirs).toFixed(2)}× (${fmt(ours)} vs ${fmt(theirs)} ${unit})`;
}

/**
 * The targets of the speed work (the fencing-free path, a cheaper fenced acquire, run()
 * ahead of plain JS, a smaller module), each met or not in this run. "The best peer" is
 * the best contender that is not locksmith's.
 */
function targetRows(r, check) {
  const mem = r.memory;
  const red = r.redis;
  const [best1Name, best1] = bestPeer(red.c1, false);
  const [best64Name, best64] = bestPeer(red.c64);
  const c1 = (mode) => red.c1[mode]?.median;
  const c64 = (mode) => red.c64[mode]?.median;
  const cpu = (mode) => red.serverCpuPerPair?.[mode]?.median;
  const within = (ours, theirs, most) => (ours === undefined || theirs === undefined ? "not measured" : check(ours / theirs <= most));
  const atLeast = (ours, theirs, least) => (ours === undefined || theirs === undefined ? "not measured" : check(ours / theirs >= least));
  const memRatio = mem.sequential["locksmith (native)"].median / mem.sequential["plain-JS baseline"].median;
  const runRatio = mem.concurrent["locksmith (native)"].median / mem.concurrent["plain-JS baseline"].median;
  const workerdRatio = r.wasm.workerd["locksmith (wasm)"].median / r.wasm.workerd["plain-JS baseline"].median;
  const gz = r.wasm.size.gzipBytes / 1024;
  const semaphore = "redis-semaphore";
  const piped = "redis-semaphore (auto-pipelining)";
  const handoff = (mode) => red.contended.handoff[mode]?.p50.median;
  return [
    [
      `Redis c=1 acquire+release p50, fencing: false ≤ 0.9× the best peer's (${best1Name})`,
      versus(c1(UNFENCED), best1.median, "µs"),
      within(c1(UNFENCED), best1.median, 0.9),
    ],
    [
      `Redis c=1 acquire+release p50, fenced ≤ 1.05× the best peer's (${best1Name})`,
      versus(c1(FENCED), best1.median, "µs"),
      within(c1(FENCED), best1.median, 1.05),
    ],
    [
      `Redis c=64 pairs/s, fencing: false ≥ 2.0× the best peer's (${best64Name})`,
      versus(c64(UNFENCED), best64.median, "pairs/s"),
      atLeast(c64(UNFENCED), best64.median, 2.0),
    ],
    [
      `Redis c=64 pairs/s, fenced ≥ 1.6× the best peer's (${best64Name})`,
      versus(c64(FENCED), best64.median, "pairs/s"),
      atLeast(c64(FENCED), best64.median, 1.6),
    ],
    [
      `Redis server CPU per pair at c=64 (INFO cpu), fenced ≤ 1.0× ${semaphore}'s`,
      versus(cpu(FENCED), cpu(semaphore), "µs"),
      within(cpu(FENCED), cpu(semaphore), 1.0),
    ],
    [
      `Redis server CPU per pair at c=64 (INFO cpu), fencing: false ≤ the auto-pipelined peer's (${piped})`,
      versus(cpu(UNFENCED), cpu(piped), "µs"),
      within(cpu(UNFENCED), cpu(piped), 1.0),
    ],
    ["Memory sequential pairs/s ≥ 1.5× the plain-JS baseline", `${memRatio.toFixed(2)}×`, check(memRatio >= 1.5)],
    [
      "Memory 64 concurrent run() loops ≥ 1.3× the plain-JS baseline (required: ≥ 1.0×; the aim stays 1.5×)",
      `${runRatio.toFixed(2)}×`,
      runRatio >= 1.3 ? "met" : runRatio >= 1.0 ? "not met (≥ 1.0× required: met)" : "not met",
    ],
    ["workerd memory pairs/s ≥ 1.0× plain JS in workerd", `${workerdRatio.toFixed(2)}×`, check(workerdRatio >= 1.0)],
    [
      "WebAssembly module a memory or JS-store user loads ≤ 40 KB gzipped",
      `${gz.toFixed(1)} KB (the budget \`npm test\` holds it to, scripts/wasm-size.mjs: ${(WASM_GZIP_BUDGET_BYTES / 1024).toFixed(0)} KB)`,
      check(gz <= 40),
    ],
    [
      "Contended handoff p50 under 1 ms, both modes",
      [FENCED, UNFENCED]
        .filter((m) => handoff(m) !== undefined)
        .map((m) => `${m.slice("locksmith (".length, -1)} ${(handoff(m) / 1000).toFixed(3)} ms`)
        .join(", "),
      check([FENCED, UNFENCED].every((m) => handoff(m) === undefined || handoff(m) < 1000)),
    ],
  ];
}

/** Checks kept from earlier releases' targets: the contended workload's traffic, the one-host store. */
function otherRows(r, check) {
  const red = r.redis;
  const cmds = red.contended.commandsPerCritical;
  const fairness = red.contended.fairness ?? {};
  const trips = red.contended.roundTrips ?? {};
  const pollers = Object.entries(cmds).filter(([k]) => !k.startsWith("locksmith"));
  const fewest = Math.min(...pollers.map(([, v]) => v.median));
  const ourTrips = trips[FENCED]?.perCritical;
  const ourFairness = fairness[FENCED]?.median;
  return [
    [
      "Contended, fenced: fairness ≥ 0.9 and ≤ 2.2 client requests per critical",
      ourTrips === undefined || ourFairness === undefined ? "not measured in this run" : `${ourTrips.toFixed(2)} requests, fairness ${ourFairness.toFixed(3)}`,
      ourTrips === undefined || ourFairness === undefined ? "not measured" : check(ourTrips <= 2.2 && ourFairness >= 0.9),
    ],
    [
      "Contended, fenced: fewer Redis commands per critical than any polling peer",
      `${cmds[FENCED].median.toFixed(2)} vs ${fewest.toFixed(2)}`,
      check(cmds[FENCED].median < fewest),
    ],
    ...fileRows(r.file, check),
  ];
}

/** The names of the command types a contender's pair sends itself (not its scripts'), lower case. */
function topLevel(red, name) {
  const cmds = red.floor?.commands?.[name]?.commands;
  return cmds ? new Set(cmds.map((c) => c.toLowerCase())) : undefined;
}

/** The server's CPU per unit outside the commands a client sent (reading, parsing, replying, the event loop). */
function outsideCommands(red, name, cost) {
  const top = topLevel(red, name);
  if (!top || !cost) return undefined;
  const inCommands = Object.entries(cost.commands).reduce((sum, [n, v]) => sum + (top.has(n) ? v.usec : 0), 0);
  return cost.cpuUs.median - inCommands;
}

/** "evalsha 2× 9.10 µs, set 2× 1.20 µs": a cost's command types, most time first. */
const byType = (cost) =>
  cost
    ? Object.entries(cost.commands)
        .filter(([, v]) => v.calls >= 0.005)
        .sort((a, b) => b[1].usec - a[1].usec)
        .map(([n, v]) => `${n} ${Number.isInteger(v.calls) ? v.calls : v.calls.toFixed(2)}× ${v.usec.toFixed(2)} µs`)
        .join(", ")
    : "—";

const us = (v) => (typeof v === "number" && Number.isFinite(v) ? v.toFixed(2) : "—");

/** "Where the Redis time goes": the tables, from a run that measured the server's cost per pair and the bare floor. */
function timeGoes(red) {
  const cost = red.serverCost;
  if (!cost) return "";
  const names = Object.keys(red.c1);
  const pairOf = (k) => {
    const c = red.floor?.commands?.[k];
    if (!c) return "—";
    return `${c.commands.join(", ")}${c.scripted.length ? ` (scripts: ${c.scripted.join(", ")})` : ""}`;
  };
  const floor = red.floor?.p50 ?? {};
  const pings = Object.keys(floor).find((k) => k.startsWith("PING"));
  const c1Rows = names.map((k) => {
    const f = floor[k]?.median;
    const own = f === undefined ? undefined : red.c1[k].median - f;
    return row([
      k,
      pairOf(k),
      fmt(red.c1[k].median),
      f === undefined ? "—" : fmt(f),
      us(own),
      us(cost.c1[k]?.cpuUs.median),
      us(cost.c1[k]?.scriptsUs),
      us(outsideCommands(red, k, cost.c1[k])),
    ]);
  });
  if (pings) c1Rows.push(row([pings, pings.replace(/ \(.*/, ""), "—", fmt(floor[pings].median), "—", us(cost.floor[pings]?.cpuUs.median), "—", "—"]));
  const node = red.nodeCpuPerPair?.c64 ?? {};
  const c64Rows = names.map((k) => {
    const server = cost.c64[k]?.cpuUs.median;
    const client = node[k]?.median;
    return row([
      k,
      fmt(red.c64[k].median),
      us(server),
      us(cost.c64[k]?.scriptsUs),
      us(outsideCommands(red, k, cost.c64[k])),
      us(client),
      server ? fmt(1e6 / server) : "—",
      client ? fmt(1e6 / client) : "—",
    ]);
  });
  const contendedRows = names.map((k) =>
    row([k, fmt(contendedRates(red.contended.criticals)[k].median), us(cost.contended[k]?.cpuUs.median), us(cost.contended[k]?.scriptsUs)]),
  );
  const typeRows = names.map((k) => row([k, byType(cost.c1[k]), byType(cost.c64[k])]));
  const notSame = Object.entries(red.floor?.sameCommands ?? {})
    .filter(([, same]) => !same)
    .map(([k]) => k);
  return `## Where the Redis time goes

Measured in the same run, on the same server, for every contender: the server's CPU time
(\`INFO cpu\`, user + system) and each command type's calls and time (\`INFO
commandstats\`) over each round, per pair (per critical section when contended), medians
over rounds. A script's time (\`EVALSHA\`, \`EVAL\`) includes the commands it runs, which
\`commandstats\` also counts under their own names. "Outside commands" is the server's CPU
less the time of the commands the client sent itself: reading and parsing requests,
writing replies, the event loop. The bare floor replays the exact commands one pair of the
contender sent (as \`MONITOR\` showed them: same keys, owner and scripts) from a minimal
RESP client on a plain socket, each command after the previous reply, as the client does;
the client's own time is its pair p50 less that floor. \`commandstats\` times each call by the
clock, so on a busy machine a call's time also counts any moment the server's thread
was not running; \`INFO cpu\` counts CPU time only.${notSame.length ? ` **The floor of ${notSame.join(", ")} did not make the server run the same commands per pair as the client did: read its row with care.**` : ""}

### Concurrency 1

${row(["", "a pair sends", "pair p50 µs", "bare floor p50 µs", "client's own µs", "server CPU µs per pair", "in scripts µs", "outside commands µs"])}
${row(["---", "---", "---:", "---:", "---:", "---:", "---:", "---:"])}
${c1Rows.join("\n")}

### Concurrency 64, distinct keys

Node's CPU is this process's (\`process.cpuUsage()\`) per pair; the two columns after it are
the rates at which the server's one thread, or Node's, would be busy all the time.

${row(["", "pairs/s", "server CPU µs per pair", "in scripts µs", "outside commands µs", "Node CPU µs per pair", "server-bound pairs/s", "Node-bound pairs/s"])}
${row(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"])}
${c64Rows.join("\n")}

### Contended: 16 workers on one key

${row(["", "criticals/s", "server CPU µs per critical", "in scripts µs"])}
${row(["---", "---:", "---:", "---:"])}
${contendedRows.join("\n")}

### Server time by command type, µs per pair (calls × per pair)

${row(["", "concurrency 1", "concurrency 64"])}
${row(["---", "---", "---"])}
${typeRows.join("\n")}

`;
}

/** "What bounds the Redis numbers", from this run's figures where it measured them. */
function bounds(r) {
  const red = r.redis;
  const cost = red.serverCost;
  const [best1Name] = bestPeer(red.c1, false);
  const [bestName, best] = bestPeer(red.c64);
  const ceilingP16 = r.ceiling.P16.pairsPerSec;
  const floor = red.floor?.p50 ?? {};
  const pings = Object.keys(floor).find((k) => k.startsWith("PING"));
  const modes = [FENCED, UNFENCED, best1Name].filter((k) => red.c1[k]);
  const c1 =
    cost && pings
      ? `- **Concurrency 1.** ${pings.replace(/ \(.*/, "")} on a bare socket (the round trips alone) take ${fmt(floor[pings].median)} µs here. ${modes
          .filter((k) => floor[k])
          .map(
            (k) =>
              `${k}'s pair (${red.floor.commands[k].commands.join(", ")}) takes ${fmt(floor[k].median)} µs from the bare client (the server's CPU per pair: ${us(cost.c1[k]?.cpuUs.median)} µs, ${us(cost.c1[k]?.scriptsUs)} µs of it timed in scripts), and ${fmt(red.c1[k].median)} µs from its own client, which adds ${us(red.c1[k].median - floor[k].median)} µs.`,
          )
          .join(" ")} \`node bench/c1-probe.mjs\` splits the client's part of a fenced pair further (marks around the socket's writes and \`data\` events).`
      : `- **Concurrency 1.** This run did not measure the bare floor.`;
  const c64Of = (k) => {
    const server = cost?.c64[k]?.cpuUs.median;
    const node = red.nodeCpuPerPair?.c64?.[k]?.median;
    if (server === undefined || node === undefined) return "";
    return `${k}: ${fmt(red.c64[k].median)} pairs/s, server ${us(server)} µs and Node ${us(node)} µs of CPU per pair (alone, each would allow ${fmt(1e6 / server)} and ${fmt(1e6 / node)} pairs/s).`;
  };
  const c64 = cost
    ? `- **Concurrency 64.** ${[FENCED, UNFENCED, bestName]
        .filter((k) => red.c64[k])
        .map(c64Of)
        .join(
          " ",
        )} Every loop's next command waits for the previous reply, so Node and the server take turns as much as they overlap: the side with more CPU per pair sets the bound, and the pair's rate falls between one side's rate and the rate of their sum. redis-benchmark's pipelined ceiling (16 commands per connection on 64 connections at once) is ${fmt(ceilingP16)} pairs/s; 2.0× ${bestName} would be ${fmt(2 * best.median)} pairs/s, under ${(1e6 / (2 * best.median)).toFixed(1)} µs of the server's one thread per pair.`
    : "- **Concurrency 64.** This run did not measure the server's cost per pair.";
  return `## What bounds the Redis numbers

From this run's figures above (the tables of "Where the Redis time goes").

${c1}
${c64}
- **Contended.** Waiters of one process queue in arrival order, and a release wakes the
  longest waiting one through the release notification: 2 round trips per critical and
  fairness 1. The polling peers are faster here because the worker that released comes
  straight back and takes the key again on its next round trip, while the others poll
  (their fairness is lower); locksmith's handoff goes release reply → notification on the
  subscriber connection → the woken waiter's attempt, one hop more.
`;
}

// ---------------------------------------------------------------------------------
// Leader election: takeover (bench/election.mjs)

export const ELECTION_HEADING = "## Leader election: takeover";
const wholeMs = (s) => (s ? String(Math.round(s.median)) : "—");

/** One store's election figures as printed: the run's log line and the section's table row say the same numbers. */
export function electionLine(name, r) {
  if (r.unavailable) return `${name}: not measured: its server is not available here (${r.unavailable})`;
  if (r.error) return `${name}: failed: ${r.error.split("\n")[0]}`;
  const close = r.close ? `${wholeMs(r.close)} ms after close()` : "no close() of its own";
  return `${name} (TTL ${r.ttlMs} ms, retry delay ${r.retryMs} ms): takeover ${wholeMs(r.kill)} ms after SIGKILL (killed ${wholeMs(r.intoLease)} ms into the lease, led ${wholeMs(r.afterLease)} ms after its end); handover ${wholeMs(r.resign)} ms after resign(), ${close}`;
}

function electionRow(name, r) {
  if (r.unavailable) return row([name, `not measured: its server is not available here (${r.unavailable})`, "", "", "", "", "", ""]);
  if (r.error) return row([name, `**failed**: ${r.error.split("\n")[0]}`, "", "", "", "", "", ""]);
  return row([
    name,
    r.ttlMs,
    r.retryMs,
    wholeMs(r.kill),
    wholeMs(r.intoLease),
    wholeMs(r.afterLease),
    wholeMs(r.resign),
    r.close ? wholeMs(r.close) : "— (no close() of its own)",
  ]);
}

/** The section, from a run's `results` with an `election`, `fileLink` its results file's path from BENCHMARKS.md. */
export function electionSection(results, fileLink, file = fileLink) {
  const e = results.election;
  const m = results.machine;
  const problems = Object.entries(e.stores).flatMap(([name, r]) => (r.problems ?? []).map((p) => `${name}: ${p}`));
  const renewed = Object.entries(e.stores).filter(([, r]) => r.renewedBeforeKill > 0);
  return `${ELECTION_HEADING}

Measured by \`${results.command ?? "npm run bench"}\` on ${results.date.slice(0, 10)}: ${m.cpus} cores (${m.cpu}), Node ${m.node}, the ${e.build}
build, ${e.repetitions} repetition${e.repetitions === 1 ? "" : "s"} of each scenario per store, medians in ms. Raw numbers (every sample): [\`${file}\`](${fileLink}).

A leader of an election (\`election(name, { ttl, retryDelay, store }).campaign()\`) runs in a
child process; a standby in the bench's process campaigns with the same TTL and retry
delay on a store of its own over the same server. About 200 ms after the standby began,
the leader is SIGKILLed, and the standby is timed from the kill until it leads. The leader
renews its lease every third of the TTL (\`autoExtend\`) and is killed before its first
renewal, so the takeover is the lease it had left (the TTL less how far into the lease it
was killed) plus the time from the lease's end until the standby leads: what the store and
the standby's retries add. The lease's start is taken as when the leader's word that it
begins its campaign reached the bench, a little before its acquire reached the store, so
"killed into the lease" and "lease end → standby leads" may read a ms or so high. For
\`resign()\` and \`close()\`, leader and standby both run in the bench's process with leases
of 10 TTLs, so no handover comes from an expiry; the time runs from the call until the
standby leads. These are the scenarios \`js-tests/election-stores.test.mjs\` holds every
store to bounds with (\`js-tests/support/takeover.mjs\`): the takeover within the TTL + the
retry delay + 250 ms, a handover within the retry delay + 250 ms (each with 750 ms of slack
for a loaded machine).

${row(["store", "TTL", "retry delay", "takeover after SIGKILL", "killed into the lease", "lease end → standby leads", "handover after resign()", "handover after close()"])}
${row(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"])}
${Object.entries(e.stores)
  .map(([name, r]) => electionRow(name, r))
  .join("\n")}

The servers are the history checker's, started on loopback by the bench
(\`js-tests/histories/run.mjs\` \`servers()\`): one \`redis-server\` for the three Redis stores and,
through the project's Upstash REST endpoint (\`js-tests/support/upstash-rest.mjs\`), for
\`UpstashLockStore\`; PostgreSQL; MariaDB; one etcd member (its leases are whole seconds, at
least its minimum: a 2 s TTL); workerd (Miniflare) for the Durable Object, reached over the
test worker's WebSocket, whose \`close()\` only closes that socket. \`FileLockStore\` locks a
file in the OS's temporary directory.${renewed.length ? ` In ${renewed.map(([name, r]) => `${name} (${r.renewedBeforeKill}×)`).join(", ")}, the kill came after the leader's first renewal; those takeovers are left out of the lease-end column.` : ""}${problems.length ? `\n\n**The measurements were not clean**: ${problems.join("; ")}.` : ""}
`;
}

// ---------------------------------------------------------------------------------
// Fair locks: what first come, first served costs (bench/fair.mjs)

export const FAIR_HEADING = "## Fair locks: what first come, first served costs";

function fairRows(name, r) {
  if (r.unavailable) return [row([name, `not measured: its server is not available here (${r.unavailable})`, "", "", "", ""])];
  if (r.error) return [row([name, `**failed**: ${r.error.split("\n")[0]}`, "", "", "", ""])];
  return ["unfair", "fair"].map((mode) => {
    const m = r[mode];
    return row([
      mode === "unfair" ? name : "",
      mode,
      Math.round(m.criticals.median).toLocaleString("en-US"),
      Math.round(m.handoffP50.median),
      `${(100 * m.overtakes.median).toFixed(1)}%`,
      m.jain.median.toFixed(3),
    ]);
  });
}

/** The section, from a run's `results` with a `fair`, `fileLink` its results file's path from BENCHMARKS.md. */
export function fairSection(results, fileLink, file = fileLink) {
  const f = results.fair;
  const m = results.machine;
  return `${FAIR_HEADING}

Measured by \`${results.command ?? "npm run bench"}\` on ${results.date.slice(0, 10)}: ${m.cpus} cores (${m.cpu}), Node ${m.node}, ${f.rounds} round${f.rounds === 1 ? "" : "s"} of ${f.ms} ms per store and mode, interleaved, medians. Raw numbers (every sample): [\`${file}\`](${fileLink}).

${f.workers} workers (async loops in one process) contend on one key, each taking the lock (\`acquire({ timeout, retryDelay: ${f.retryMs} })\`), yielding a turn of the event loop while it holds, and releasing, first with handles that are not fair and then with \`{ fair: true }\` ones (on a key of their own: fairness belongs to the key). "Overtakes" is the share of grants that went to a waiter while another that had arrived before it (by more than 1 ms) still waited: what fairness removes. Jain's index over the workers' counts is 1 when each got the same share. The stores with a server are the history checker's on loopback (workerd through Miniflare for the Durable Object, reached over the test worker's WebSocket), driven by the native build.

${row(["store", "handles", "criticals/s", "release → next grant p50 (µs)", "grants that overtook an earlier waiter", "Jain's index"])}
${row(["---", "---", "---:", "---:", "---:", "---:"])}
${Object.entries(f.stores)
  .flatMap(([name, r]) => fairRows(name, r))
  .join("\n")}
`;
}

/** `markdown` with `section` in place of its old copy (from its \`## \` heading to the next one), or appended. */
export function spliceSection(markdown, section) {
  const heading = section.slice(0, section.indexOf("\n"));
  const lines = markdown.split("\n");
  const start = lines.indexOf(heading);
  if (start === -1) return markdown.trim() ? `${markdown.trimEnd()}\n\n${section}` : section;
  const end = lines.findIndex((line, i) => i > start && line.startsWith("## "));
  const before = start === 0 ? "" : `${lines.slice(0, start).join("\n")}\n`;
  return `${before}${section}${end === -1 ? "" : `\n${lines.slice(end).join("\n")}`}`;
}

/** `links` are the chart's and the results file's paths relative to where the report goes; `links.election` the election section, if any. */
export function report(results, file, links = { chart: "bench/results/chart.svg", file }) {
  const r = normalize(results);
  const mem = r.memory;
  const red = r.redis;
  const ceilingP16 = r.ceiling.P16.pairsPerSec;
  const ours64 = red.c64[FENCED].median;
  const handoff = red.contended.handoff;
  const cmds = red.contended.commandsPerCritical;
  // Fairness and client round trips per critical: not in runs before they were measured.
  const fairness = red.contended.fairness ?? {};
  const trips = red.contended.roundTrips ?? {};
  const gz = r.wasm.size.gzipBytes / 1024;
  const contended = contendedRates(red.contended.criticals);
  const oneRound = Object.values(contended).some((v) => v.samples?.length === 1) && r.rounds > 1;
  const exclusion = exclusionVerdict(r.exclusion);
  const check = (ok) => (ok ? "met" : "not met");
  const targets = targetRows(r, check);
  const others = otherRows(r, check);
  return `# Benchmarks

Measured by \`npm run bench\` on ${r.date.slice(0, 10)}: ${r.machine.cpus} cores (${r.machine.cpu}), Node ${r.machine.node}, one
\`redis-server\` on loopback started by the bench. ${r.rounds} round${r.rounds === 1 ? "" : "s"}, interleaved: every round runs every
contender once${r.rotated ? ", in an order that turns by one each round," : ""} so drift hits all alike.${r.warmedUp ? " Before the rounds, each contender runs its workload once untimed (on Redis, three rounds' worth at concurrency 64 and a short contended pass), so every library is measured with its hot path compiled, as in a service that has been taking locks for a while." : ""} Raw numbers: [\`${file}\`](${links.file}). These are benchmarks, not
tests: nothing here is asserted by \`npm test\`.

${r.quick ? "**A quick run (`BENCH_QUICK=1`): smaller runs than `npm run bench` makes, not figures to compare with.**\n\n" : ""}![locksmith relative to the best alternative per workload](${links.chart})

## Targets

Those of the speed work; locksmith is the native build, in the mode each row names.

${row(["target", "now", ""])}
${row(["---", "---", "---"])}
${targets.map(row).join("\n")}

Checks kept from earlier releases:

${row(["check", "now", ""])}
${row(["---", "---", "---"])}
${others.map(row).join("\n")}

## Memory

${table("Sequential acquire + release on one key", "pairs/s", mem.sequential, { versus: "each" })}
${table("64 concurrent run() loops over 1 000 keys", "runs/s", mem.concurrent, { versus: "each" })}
The baseline (\`bench/baseline.mjs\`) is a Map-based lock with the same API and guarantees: a
\`crypto.randomUUID()\` owner per acquisition, expiry, owner-only release. async-mutex is an
in-process mutex without TTL or ownership tokens.${r.exclusion ? " Each run()'s critical section holds its lock across one event-loop turn, and the 64 loops' keys collide now and then, so that the exclusion check could see two holders of one key." : ""}

${r.file ? table("One host, no server: concurrency 1 acquire + release", "p50 µs", r.file.c1, { higherIsBetter: false, versus: "each" }) : ""}
## Redis

locksmith runs in both modes: fenced (the default: the acquire script mints a fencing
token) and \`fencing: false\` (an acquire is one plain \`SET key owner NX PX ttl\`, the hold
has no token), natively (${FENCED}, ${UNFENCED}) and over an ioredis client the application
made (locksmith-js/ioredis). All peers run on ioredis against the same server. Waiting peers
poll every 20 ms; locksmith wakes on a release notification.${red.c1["redis-semaphore (auto-pipelining)"] ? " redis-semaphore (auto-pipelining) is redis-semaphore on an ioredis client made with `enableAutoPipelining: true`, which sends the commands of one event-loop turn as one pipeline." : ""}

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
${timeGoes(red)}${bounds(r)}
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
${links.election ? `\n${links.election}` : ""}`;
}

export function chart(results) {
  const r = normalize(results);
  const red = r.redis;
  const contended = contendedRates(red.contended.criticals);
  const modes = [FENCED, UNFENCED].filter((m) => red.c64[m]);
  const mode = (m) => m.slice("locksmith (".length, -1);
  const bars = [
    ["memory pairs/s vs plain JS", r.memory.sequential["locksmith (native)"].median / r.memory.sequential["plain-JS baseline"].median],
    ["memory run() ×64 vs plain JS", r.memory.concurrent["locksmith (native)"].median / r.memory.concurrent["plain-JS baseline"].median],
    ...modes.map((m) => [`Redis c64 (${mode(m)}) vs best peer`, red.c64[m].median / bestPeer(red.c64)[1].median]),
    ...modes.map((m) => [`Redis c1 latency (inverse, ${mode(m)}) vs best peer`, bestPeer(red.c1, false)[1].median / red.c1[m].median]),
    ...modes.map((m) => [`contended criticals/s (${mode(m)}) vs best peer`, contended[m].median / bestPeer(contended)[1].median]),
    ["workerd pairs/s vs plain JS", r.wasm.workerd["locksmith (wasm)"].median / r.wasm.workerd["plain-JS baseline"].median],
  ];
  const width = 720;
  const barH = 26;
  const left = 330;
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
  const path = join(root, markdown);
  // A run without elections or fair locks (one from before the workload) shows the latest run's that measured them.
  const fairMeasured = results.fair ? { file, results } : latestRun((r) => r.fair && !r.quick);
  if (isFull(results)) {
    const measured = results.election ? { file, results } : latestRun((r) => r.election && !r.quick);
    const election = measured && electionSection(measured.results, link(measured.file), measured.file);
    writeFileSync(path, report(results, file, { chart: link(chartFile), file: link(file), election }));
    writeFileSync(join(root, chartFile), chart(results));
  } else if (results.election) {
    writeFileSync(path, spliceSection(existsSync(path) ? readFileSync(path, "utf8") : "", electionSection(results, link(file), file)));
  }
  if (fairMeasured && (isFull(results) || results.fair)) {
    const section = fairSection(fairMeasured.results, link(fairMeasured.file), fairMeasured.file);
    writeFileSync(path, spliceSection(existsSync(path) ? readFileSync(path, "utf8") : "", section));
  }
  return exclusionVerdict(results.exclusion);
}

/** Whether a run measured what the whole report needs (a run of some workloads only did not). */
export const isFull = (results) => ["memory", "redis", "ceiling", "wasm"].every((k) => results[k]);

/** The most recent run (by the date recorded in it) in bench/results/ that `wanted(results)` accepts, as `{ file, results }`; undefined if none. */
function latestRun(wanted) {
  const files = readdirSync(join(root, "bench/results")).filter((f) => /^\d{4}-\d{2}-\d{2}.*\.json$/.test(f));
  const runs = files
    .map((f) => ({ file: `bench/results/${f}`, results: JSON.parse(readFileSync(join(root, "bench/results", f), "utf8")) }))
    .filter((run) => wanted(run.results));
  runs.sort((a, b) => a.results.date.localeCompare(b.results.date));
  return runs.at(-1);
}

/** The results file of the most recent full run (by the date recorded in it). */
export function latestResults() {
  const run = latestRun((r) => !r.quick && isFull(r));
  if (!run) throw new Error("no full run in bench/results/: run `npm run bench` first");
  return run;
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
  const loopback = file.c1["RedisLockStore on loopback (fenced)"].median;
  const redis = loopback / ours;
  return [
    [
      "FileLockStore concurrency 1 ≥ 10× proper-lockfile's pairs/s",
      `${lockfile.toFixed(1)}× (${fmt(ours)} µs vs ${fmt(file.c1["proper-lockfile"].median)} µs per pair)`,
      check(lockfile >= 10),
    ],
    ["FileLockStore concurrency 1 ≥ 5× RedisLockStore's on loopback (fenced)", `${redis.toFixed(1)}× (${fmt(loopback)} µs per Redis pair)`, check(redis >= 5)],
  ];
}
