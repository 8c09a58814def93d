// The fair workload: what first come, first served costs. Per store with fair queues (the
// memory store in both builds, and js-tests/support/takeover.mjs's rows marked `fair`, on the
// history checker's servers), 16 workers contend on one key, each critical section yielding
// a turn while held, with handles that are not fair and then with fair ones (on keys of
// their own: fairness belongs to the key), rounds interleaved. Printed per store and mode:
// critical sections per second, the release → next grant gap, how often a grant went to a
// waiter that arrived after another that still waited (an overtake), and Jain's fairness
// index over the workers' counts.
import * as wasm from "../js/wasm.mjs";
import { openStore } from "../js-tests/histories/client.mjs";
import { servers } from "../js-tests/histories/run.mjs";
import { takeoverStores } from "../js-tests/support/takeover.mjs";
import { yieldTurn } from "./exclusion.mjs";
import { jainIndex, percentile, summarize } from "./stats.mjs";

/** Workers on the one key. */
export const WORKERS = 16;
/** Every waiter's retry delay (a store that wakes its waiters barely uses it). */
const RETRY_MS = 10;
/** Arrivals closer than this are not ordered (two workers' clocks are one here, but a call takes time to reach the store). */
const ORDER_SLACK_MS = 1;

let next = 0;

/**
 * The grants of a run (`{ arrived, granted }` each) that went to a waiter while another
 * that had arrived more than ORDER_SLACK_MS before it was still waiting: their share.
 */
export function overtakeShare(grants) {
  const byArrival = [...grants].sort((a, b) => a.arrived - b.arrived);
  // The latest grant among the waiters that arrived before each, swept in arrival order.
  let overtakes = 0;
  let latest = Number.NEGATIVE_INFINITY;
  let j = 0;
  for (const g of byArrival) {
    while (j < byArrival.length && byArrival[j].arrived < g.arrived - ORDER_SLACK_MS) {
      latest = Math.max(latest, byArrival[j].granted);
      j += 1;
    }
    if (latest > g.granted) overtakes += 1;
  }
  return grants.length === 0 ? 0 : overtakes / grants.length;
}

/** `WORKERS` loops on one key of `store` for `ms` with `{ fair }` handles: the run's figures. */
async function contend(ls, store, fair, ms) {
  const key = `bench:fair:${fair ? "fair" : "unfair"}:${process.pid}:${next++}`;
  const grants = [];
  const gaps = [];
  const perWorker = new Array(WORKERS).fill(0);
  let lastRelease = null;
  const deadline = performance.now() + ms;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const lock = ls.lock(key, 10_000, store, { fair });
      while (performance.now() < deadline) {
        const arrived = performance.now();
        if (!(await lock.acquire({ timeout: 10_000, retryDelay: RETRY_MS })))
          throw new Error(`locksmith bench: a ${fair ? "fair" : "unfair"} waiter timed out`);
        const granted = performance.now();
        if (lastRelease !== null) gaps.push((granted - lastRelease) * 1000);
        grants.push({ arrived, granted });
        perWorker[w] += 1;
        await yieldTurn();
        lastRelease = performance.now();
        await lock.release();
      }
    }),
  );
  return { criticals: grants.length / (ms / 1000), handoffP50: percentile(gaps, 50), overtakes: overtakeShare(grants), jain: jainIndex(perWorker) };
}

/** One store's figures per mode over `rounds` interleaved rounds. */
async function measureStore(ls, store, { rounds, ms }) {
  const samples = { unfair: [], fair: [] };
  for (let r = 0; r < rounds; r++) {
    for (const mode of ["unfair", "fair"]) samples[mode].push(await contend(ls, store, mode === "fair", ms));
  }
  const stat = (list, k) => summarize(list.map((s) => s[k]));
  return Object.fromEntries(
    Object.entries(samples).map(([mode, list]) => [
      mode,
      { criticals: stat(list, "criticals"), handoffP50: stat(list, "handoffP50"), overtakes: stat(list, "overtakes"), jain: stat(list, "jain") },
    ]),
  );
}

/** One store's figures as printed: the log line and the section's rows say the same numbers. */
export function fairLine(name, r) {
  if (r.unavailable) return `${name}: not measured: its server is not available here (${r.unavailable})`;
  if (r.error) return `${name}: failed: ${r.error.split("\n")[0]}`;
  const one = (mode) => {
    const m = r[mode];
    return `${mode} ${Math.round(m.criticals.median).toLocaleString("en-US")} criticals/s, handoff p50 ${Math.round(m.handoffP50.median)} µs, ${(100 * m.overtakes.median).toFixed(1)}% of grants overtook an earlier waiter, Jain ${m.jain.median.toFixed(3)}`;
  };
  return `${name}: ${one("unfair")}; ${one("fair")}`;
}

/**
 * The workload: the memory stores of both builds, then each store row marked `fair` (the
 * native build), on the history checker's servers.
 */
export async function fairBench(native, { rounds = 3, ms = 2_000, log = console.log } = {}) {
  log(`fair (${WORKERS} workers on one key, ${rounds} rounds of ${ms} ms per mode)`);
  const out = { workers: WORKERS, rounds, ms, retryMs: RETRY_MS, stores: {} };
  const measure = async (name, ls, open) => {
    let opened;
    try {
      opened = await open();
    } catch (err) {
      out.stores[name] = { unavailable: String(err?.message ?? err).split("\n")[0] };
    }
    if (opened !== undefined) {
      try {
        out.stores[name] = await measureStore(ls, opened.store, { rounds, ms });
      } catch (err) {
        out.stores[name] = { error: String(err?.message ?? err) };
        console.error(`  !! fair | ${name}: ${err?.stack ?? err}`);
      } finally {
        await opened.close?.().catch(() => {});
      }
    }
    log(`  ${fairLine(name, out.stores[name])}`);
  };
  await measure("MemoryLockStore (native)", native, async () => ({ store: new native.MemoryLockStore() }));
  await measure("MemoryLockStore (WebAssembly)", wasm, async () => ({ store: new wasm.MemoryLockStore() }));
  const s = servers();
  try {
    for (const row of takeoverStores(s).filter((r) => r.fair)) {
      await measure(row.name, native, async () => openStore(native, await row.spec()));
    }
  } finally {
    await s.stop();
  }
  return out;
}

/** `{ ok, text }`: whether every store measured ran cleanly. */
export function fairVerdict(fair) {
  const bad = Object.entries(fair?.stores ?? {}).filter(([, r]) => r.error);
  if (bad.length === 0) return { ok: true, text: "" };
  return { ok: false, text: `fair: ${bad.map(([name, r]) => `${name}: ${r.error.split("\n")[0]}`).join(" | ")}` };
}
