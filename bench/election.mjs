// The election workload: per store, how long a standby takes to lead after its leader is
// SIGKILLed, resigns, or closes its store, with the scenarios js-tests/election-stores.test.mjs
// asserts bounds with (js-tests/support/takeover.mjs), a few repetitions each, medians.
// The stores' servers are the history checker's (js-tests/histories/run.mjs servers()): a
// store whose server cannot be started here is reported as not available, not failed.
import { servers } from "../js-tests/histories/run.mjs";
import { handoverAfterClose, handoverAfterResign, RETRY_MS, takeoverAfterKill, takeoverStores } from "../js-tests/support/takeover.mjs";
import { electionLine } from "./report.mjs";
import { summarize } from "./stats.mjs";

let next = 0;
const electionName = (what) => `bench:election:${what}:${process.pid}:${next++}`;

/** What is wrong with a takeover measurement, if anything: a list of sentences. */
export function takeoverProblems(kill) {
  const problems = [];
  if (!kill.waited) problems.push("the standby led while its leader lived");
  if (!(kill.terms[1] > kill.terms[0])) problems.push(`the term did not grow (${kill.terms[0]} then ${kill.terms[1]})`);
  if (kill.resigned !== true) problems.push("the new leader's resign() answered false");
  return problems;
}

/** What is wrong with a handover measurement, if anything. */
function handoverProblems(r, what) {
  const problems = [];
  if (!(r.terms[1] > r.terms[0])) problems.push(`after ${what}, the term did not grow (${r.terms[0]} then ${r.terms[1]})`);
  if (r.resigned === false) problems.push("the leader's resign() answered false");
  if (r.endedWithStore === false) problems.push("the leadership outlived its store's close()");
  return problems;
}

/** One store's figures over `reps` repetitions of each scenario. */
async function measureStore(build, row, spec, reps) {
  const base = { spec, ttlMs: row.ttlMs, retryMs: RETRY_MS };
  const samples = { kill: [], intoLease: [], afterLease: [], resign: [], close: [] };
  const problems = [];
  let renewed = 0;
  for (let i = 0; i < reps; i++) {
    const kill = await takeoverAfterKill(build, { ...base, name: electionName("kill") });
    problems.push(...takeoverProblems(kill));
    samples.kill.push(kill.ms);
    samples.intoLease.push(kill.intoLeaseMs);
    // Past the leader's first renewal, its lease's end is not known here.
    if (kill.renewedBeforeKill) renewed += 1;
    else samples.afterLease.push(kill.afterLeaseMs);
    const resign = await handoverAfterResign(build, { ...base, name: electionName("resign") });
    problems.push(...handoverProblems(resign, "resign()"));
    samples.resign.push(resign.ms);
    if (!row.noClose) {
      const close = await handoverAfterClose(build, { ...base, name: electionName("close") });
      problems.push(...handoverProblems(close, "close()"));
      samples.close.push(close.ms);
    }
  }
  const stat = (xs) => (xs.length ? summarize(xs) : null);
  return {
    ttlMs: row.ttlMs,
    retryMs: RETRY_MS,
    kill: stat(samples.kill),
    intoLease: stat(samples.intoLease),
    afterLease: stat(samples.afterLease),
    renewedBeforeKill: renewed,
    resign: stat(samples.resign),
    close: stat(samples.close),
    ...(problems.length ? { problems: [...new Set(problems)] } : {}),
  };
}

/**
 * Measures every store of `build` (`{ ls, entry }`), `reps` times each scenario. Resolves
 * to `{ build, repetitions, retryMs, stores: { [name]: figures | { unavailable } | { error } } }`.
 */
export async function electionBench(build, { reps = 3, log = console.log } = {}) {
  log(`election (${build.ls.backend} build, ${reps} repetition${reps === 1 ? "" : "s"} per store)`);
  const s = servers();
  const out = { build: build.ls.backend, repetitions: reps, retryMs: RETRY_MS, stores: {} };
  try {
    for (const row of takeoverStores(s)) {
      if (row.native && build.ls.backend !== "native") continue;
      let spec;
      try {
        spec = await row.spec();
      } catch (err) {
        out.stores[row.name] = { unavailable: String(err?.message ?? err).split("\n")[0] };
      }
      if (spec !== undefined) {
        try {
          out.stores[row.name] = await measureStore(build, row, spec, reps);
        } catch (err) {
          out.stores[row.name] = { error: String(err?.message ?? err) };
          console.error(`  !! election | ${row.name}: ${err?.stack ?? err}`);
        }
      }
      log(`  ${electionLine(row.name, out.stores[row.name])}`);
      for (const p of out.stores[row.name].problems ?? []) console.error(`  !! election | ${row.name}: ${p}`);
    }
  } finally {
    await s.stop();
  }
  return out;
}

/** `{ ok, text }`: whether every store measured was measured cleanly (none unavailable counts against it). */
export function electionVerdict(election) {
  const bad = Object.entries(election?.stores ?? {}).filter(([, r]) => r.error || r.problems);
  if (bad.length === 0) return { ok: true, text: "" };
  return { ok: false, text: `election: ${bad.map(([name, r]) => `${name}: ${r.error?.split("\n")[0] ?? r.problems.join("; ")}`).join(" | ")}` };
}

/**
 * The measurement must be able to say no, and must time from the right moment: a standby
 * on another lock file than its leader's (no shared lock) leads while the leader lives,
 * and takeoverProblems() says so; on one shared FileLockStore the standby waits, and leads
 * no earlier than the leader's lease could end. Returns a list of failures.
 */
export async function electionSelfTest(build, log = console.log) {
  const { lockFile } = await import("../js-tests/histories/run.mjs");
  const failures = [];
  const ttlMs = 1_000;
  const apart = await takeoverAfterKill(build, {
    name: electionName("self-test"),
    spec: { file: await lockFile() },
    standbySpec: { file: await lockFile() },
    ttlMs,
    waitMs: 100,
  });
  const caught = takeoverProblems(apart);
  log(`  a standby on a lock file of its own: ${caught.length ? caught.join("; ") : "no problem seen"}`);
  if (!caught.includes("the standby led while its leader lived")) failures.push("a standby that led while its leader lived went unseen");
  const shared = await takeoverAfterKill(build, { name: electionName("self-test"), spec: { file: await lockFile() }, ttlMs, waitMs: 100 });
  const problems = takeoverProblems(shared);
  log(
    `  a standby on its leader's lock file: takeover ${Math.round(shared.ms)} ms after SIGKILL, ${Math.round(shared.intoLeaseMs)} ms into the lease, ${Math.round(shared.afterLeaseMs)} ms after its end${problems.length ? `; ${problems.join("; ")}` : ""}`,
  );
  if (problems.length) failures.push(`on one lock file: ${problems.join("; ")}`);
  if (shared.renewedBeforeKill) failures.push(`the leader was killed ${Math.round(shared.intoLeaseMs)} ms into its lease, after its first renewal`);
  // The lease began after the leader's word that it campaigns was sent: its end is no earlier
  // than that word's arrival + the TTL, less the word's way here (50 ms allowed for a busy machine).
  else if (shared.afterLeaseMs < -50) failures.push(`the standby led ${Math.round(-shared.afterLeaseMs)} ms before its leader's lease could end`);
  return failures;
}
