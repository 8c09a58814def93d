// The assertions and helpers of the history checker's bounded passes
// (js-tests/histories/histories.test.mjs and histories-servers.test.mjs, and the Sentinel and
// Cluster files, which run theirs on the topologies they start).
import assert from "node:assert/strict";
import { after, before } from "node:test";

import { now } from "./client.mjs";
import { newSeed } from "./random.mjs";
import { FAILOVER_TTL_MS, pauses, runHistory, servers } from "./run.mjs";
import { TARGET, ls, sleep } from "../support/target.mjs";

/** Seconds a bounded run takes (LOCKSMITH_HISTORY_SECONDS, 3 unless set). */
export const SECONDS = Number(process.env.LOCKSMITH_HISTORY_SECONDS ?? 3);

/**
 * Runs a history and asserts it is clean, printing the seed to replay it: more than
 * `minHolds` holds, of every kind, no violation, and (with `orphans`, run.mjs's
 * cliLister) no hold left on the store that nobody owns.
 */
export async function assertClean(t, { minHolds = 50, ...options }) {
  const run = await runHistory({ seconds: SECONDS, ...options });
  t.diagnostic(
    `seed ${run.seed}: ${run.result.holds} holds, ${run.result.violations.length} violations, ${run.result.lateSignals} late signals; clocks within ${run.clockErrorMs.toFixed(3)} ms of the run's`,
  );
  assert.ok(run.result.holds > minHolds, `enough holds to mean something (${run.result.holds}); seed ${run.seed}`);
  // Every kind the run draws (a run of its own kinds names them).
  const drawn = options.client?.kinds;
  for (const kind of ["lock", "semaphore", "read", "write"].filter((k) => drawn === undefined || drawn[k] > 0)) {
    assert.ok(
      run.holds.some((h) => h.kind === kind),
      `some ${kind} holds; seed ${run.seed}`,
    );
  }
  assert.deepEqual(run.result.violations.slice(0, 5), [], `no violations (${JSON.stringify(run.result.byType)}); replay with seed ${run.seed}`);
  if (run.orphans !== null) {
    t.diagnostic(
      `holds left nobody owns: ${run.orphans.length}; acquires aborted ${run.attempts.filter((a) => a.outcome === "aborted").length}, failed ${run.attempts.filter((a) => a.outcome === "error").length}; ${run.stalls.length} stalls`,
    );
    assert.deepEqual(run.orphans.slice(0, 5), [], `no orphaned holds (${run.orphans.length}); replay with seed ${run.seed}`);
  }
  return run;
}

/**
 * A broken guard shows only when a fault lines up with the calls it breaks, which a short
 * random run does not always bring about: runs `once()` up to `tries` times, until
 * `caught(run)` (each run that was not is said). Resolves to its last run.
 */
export async function caughtWithin(t, tries, caught, once) {
  for (let i = 1; ; i++) {
    const run = await once();
    if (caught(run) || i === tries) return run;
    t.diagnostic(`run ${i} (seed ${run.seed}) was not caught; running again`);
  }
}

/**
 * Runs a history with a broken guard and asserts the checker reports one of `types`: in
 * its run, or in one of up to `tries` runs (caughtWithin) for a guard that shows only
 * when a fault lines up with the calls it breaks.
 */
export async function assertCaught(t, types, { tries = 1, ...options }) {
  const seen = (run) => types.filter((type) => run.result.byType[type] > 0);
  const run = await caughtWithin(
    t,
    tries,
    (run) => seen(run).length > 0,
    async () => {
      const run = await runHistory({ seconds: SECONDS, ...options });
      t.diagnostic(`seed ${run.seed}: ${run.result.holds} holds, ${run.faults} faults, ${JSON.stringify(run.result.byType)}`);
      assert.ok(run.faults > 0 || !options.fault, `the fault happened (seed ${run.seed})`);
      return run;
    },
  );
  assert.ok(seen(run).length > 0, `the checker reports ${types.join(" or ")} (seed ${run.seed}): ${JSON.stringify(run.result.byType)}`);
  return run;
}

/** The errors the client processes counted, summed. */
export const errorCounts = (run) => {
  const out = {};
  for (const s of run.summaries) for (const [name, n] of Object.entries(s.errors)) out[name] = (out[name] ?? 0) + n;
  return out;
};

/**
 * A failover under a history run: the holds granted after `at` (the new master
 * answering), diagnosed, and asserted to be more than `min` — the checks saw both sides.
 */
export function assertHoldsAfter(t, run, at, min = 20) {
  const after = run.holds.filter((h) => h.acquire.send > at).length;
  t.diagnostic(`${run.faults} failover(s); ${after} holds granted after the switch; errors ${JSON.stringify(errorCounts(run))}`);
  assert.equal(run.faults, 1, `the failover happened (seed ${run.seed})`);
  assert.ok(after > min, `holds after the failover (${after}); seed ${run.seed}`);
}

/**
 * A clean history (assertClean) of 2 processes × 6 clients over `store` for 4 s, every
 * primitive with a TTL of FAILOVER_TTL_MS, with one failover 0.8 s in from
 * `failovers(options)` (run.mjs's clusterFailovers or sentinelFailovers, bound to their
 * topology); then holds granted after the switch (assertHoldsAfter). `options` adds to the
 * run's (minHolds).
 */
export async function assertCleanAcrossFailover(t, store, failovers, options = {}) {
  let switched = Infinity;
  const run = await assertClean(t, {
    store,
    processes: 2,
    clients: 6,
    seconds: 4,
    ...options,
    client: { ttlMs: FAILOVER_TTL_MS },
    fault: failovers({ every: 800, times: 1, afterSwitch: () => (switched = now()) }),
  });
  assertHoldsAfter(t, run, switched);
}

// The broken guards that do not depend on the build run once, in the native pass.
export const ONLY_NATIVE = { skip: TARGET !== "native" && "run by the native pass" };

// A client process stopped (SIGSTOP) for 150–300 ms, past its 120 ms TTL, every 600 ms.
export const PAUSES = () => pauses({ every: 600, ms: [150, 300] });

/** A process stopped past its TTL: its holds ran out meanwhile, and the checker saw them reported lost. */
export function assertPausesBit(t, run) {
  t.diagnostic(`${run.pauses.length} pauses; ${run.result.expiredWhileStopped} holds expired while stopped; ${run.result.lateExtends} late extends`);
  assert.ok(run.pauses.length >= 2, `processes were stopped (seed ${run.seed})`);
  assert.ok(run.result.expiredWhileStopped > 0, `some holds expired while their process was stopped (seed ${run.seed})`);
}

/**
 * A waiting acquire rides out a restart: a holder takes `key` (TTL 400 ms), a waiter
 * waits up to 10 s, the server stops and starts again; the waiter gets it, fenced later.
 */
export async function assertWaitRidesOut(store, server, { downMs }) {
  const key = `ride-out:${newSeed()}`;
  const holder = new ls.Lock(key, "400ms", store);
  assert.equal(await holder.acquire(), true);
  const waiter = new ls.Lock(key, "2s", store);
  const waiting = waiter.acquire({ timeout: 10_000, retryDelay: 20 }).then(
    (value) => ({ value }),
    (error) => ({ error }),
  );
  await sleep(50);
  await server.stop();
  await sleep(downMs);
  await server.start();
  const got = await waiting;
  assert.equal(got.error, undefined, `the wait rode out the restart: ${got.error}`);
  assert.equal(got.value, true);
  assert.ok(waiter.fencingToken > holder.fencingToken, `tokens ${holder.fencingToken} then ${waiter.fencingToken}`);
  assert.equal(await waiter.release(), true);
}

/** For the enclosing describe(): before() starts the servers `names` (run.mjs's servers()) and hands them to `got`, in that order; after() stops them. */
export function serversDuring(names, got) {
  let running;
  before(async () => {
    running = servers();
    got(...(await Promise.all(names.map((name) => running.get(name)))));
  });
  after(async () => {
    await running?.stop();
  });
}
