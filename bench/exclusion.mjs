// The benchmark's mutual-exclusion check. A critical section marks its key as occupied,
// awaits (so other contenders run meanwhile, as they would during real work), then
// clears the mark; anyone who enters a key that is marked is an overlap. The state spans
// the await, so a lock that lets two holders in at once is seen.

/** A fresh counter of critical sections and of overlaps among them. */
export function exclusionCheck() {
  const occupants = new Map();
  const check = {
    sections: 0,
    overlaps: 0,
    /** Runs `work` as a critical section on `key`, counting an overlap if `key` is occupied. */
    async section(key, work) {
      const before = occupants.get(key) ?? 0;
      if (before > 0) check.overlaps += 1;
      occupants.set(key, before + 1);
      check.sections += 1;
      try {
        return await work();
      } finally {
        const left = occupants.get(key) - 1;
        if (left === 0) occupants.delete(key);
        else occupants.set(key, left);
      }
    },
  };
  return check;
}

/** One macrotask turn: long enough for pending I/O and every other contender to run. */
export const yieldTurn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * `workers` loops on one key for `ms`, each taking the lock with `wait(key, fn)` and
 * running a critical section that yields a turn. Resolves with the entry/exit times,
 * the check's counts and each worker's number of critical sections (`perWorker`).
 */
export async function contendOnOneKey(wait, { key, workers = 16, ms }) {
  const check = exclusionCheck();
  const events = [];
  const perWorker = new Array(workers).fill(0);
  const deadline = performance.now() + ms;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (performance.now() < deadline) {
        await wait(key, () =>
          check.section(key, async () => {
            perWorker[w] += 1;
            events.push(["in", performance.now()]);
            await yieldTurn();
            events.push(["out", performance.now()]);
          }),
        );
      }
    }),
  );
  return { events, sections: check.sections, overlaps: check.overlaps, perWorker };
}

/**
 * What a run's exclusion records (`{ workload: { contender: { sections, overlaps } } }`)
 * say: `ok` only when every check ran at least one section and saw no overlap.
 */
export function exclusionVerdict(records) {
  if (!records) return { ok: false, text: "Mutual exclusion was not checked in this run: its results predate the check." };
  const rows = Object.entries(records).flatMap(([workload, byName]) => Object.entries(byName).map(([name, r]) => ({ workload, name, ...r })));
  const broken = rows.filter((r) => r.overlaps > 0);
  if (broken.length) {
    const list = broken.map((r) => `${r.name} (${r.workload}): ${r.overlaps} overlaps in ${r.sections} sections`).join("; ");
    return { ok: false, text: `**Mutual exclusion was violated**: ${list}.` };
  }
  const empty = rows.filter((r) => r.sections === 0);
  if (empty.length || rows.length === 0) {
    return { ok: false, text: `Mutual exclusion was not shown: no critical section ran for ${empty.map((r) => r.name).join(", ") || "any contender"}.` };
  }
  const sections = rows.reduce((n, r) => n + r.sections, 0);
  return {
    ok: true,
    text: `Mutual exclusion held: ${sections.toLocaleString("en-US")} critical sections, each awaiting inside the lock, and no two on one key ever overlapped (checked for every contender of ${[...new Set(rows.map((r) => r.workload))].join(" and ")}).`,
  };
}

/**
 * The key of loop `j`'s `i`-th section in the memory workload: spread over 1 000 keys
 * by a multiplicative hash, so concurrent loops meet on a key now and then (a schedule
 * that gave every loop its own key at every step could never show an overlap).
 */
export function scheduleKey(i, j) {
  // lowbias32: a full-avalanche integer hash (a plain multiplicative one spreads
  // consecutive inputs evenly and would keep concurrent loops apart).
  let x = i * 64 + j + 1;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return `k${(x >>> 0) % 1000}`;
}

/**
 * `loops` concurrent loops of `runOn(key, fn)` over the schedule above, each section
 * holding its lock across one event-loop turn (so two holders of a key could meet);
 * `check` counts sections and overlaps.
 */
export async function concurrentSections(runOn, { loops, perLoop, check }) {
  await Promise.all(
    Array.from({ length: loops }, async (_, j) => {
      for (let i = 0; i < perLoop; i++) {
        const key = scheduleKey(i, j);
        await runOn(key, () => check.section(key, yieldTurn));
      }
    }),
  );
  return check;
}
