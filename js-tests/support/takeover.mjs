// Leader election's takeover, measured: how long a standby in this process takes to lead
// after its leader ends, by SIGKILL (the leader in a child process), by resign() or by
// its store's close() (the leader here). js-tests/election-stores.test.mjs holds every
// store to its bounds with these; the bench (bench/election.mjs) records the times. The
// stores are opened as the history checker's processes open them (histories/client.mjs
// openStore), on the servers it starts (histories/run.mjs servers()).
//
// `build` is `{ ls, entry }`: the locksmith module under test and its entry's URL, which
// the leader's process imports.
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

import { openStore } from "../histories/client.mjs";
import { lockFile } from "../histories/run.mjs";

/** The standbys' (and leaders') retry delay. */
export const RETRY_MS = 50;
/** How long a standby may take past its bound before a measurement gives up on it (a hang, not a slow takeover). */
const GIVE_UP_MS = 20_000;

/**
 * The stores with a server (or a file), over `s` (histories/run.mjs servers(), which
 * starts each server on first use): `{ name, spec: async () => spec, ttlMs, native?, noClose?, fair? }`,
 * `ttlMs` being the store's effective lease, `native` a store of the native build only,
 * `noClose` one whose close() is not its own, `fair` one with fair queues
 * (js-tests/fair-stores.test.mjs).
 */
export function takeoverStores(s) {
  return [
    { name: "RedisLockStore", spec: async () => ({ redis: (await s.get("redis")).url }), ttlMs: 1_000, fair: true },
    { name: "IoRedisLockStore", spec: async () => ({ ioredis: (await s.get("redis")).url }), ttlMs: 1_000, fair: true },
    { name: "NodeRedisLockStore", spec: async () => ({ nodeRedis: (await s.get("redis")).url }), ttlMs: 1_000, fair: true },
    {
      name: "UpstashLockStore",
      spec: async () => {
        const rest = await s.get("upstash");
        return { upstash: rest.url, token: rest.token };
      },
      ttlMs: 1_000,
      fair: true,
    },
    { name: "PostgresLockStore", spec: async () => ({ postgres: (await s.get("postgres")).url }), ttlMs: 1_000, fair: true },
    { name: "MySqlLockStore", spec: async () => ({ mysql: (await s.get("mysql")).url }), ttlMs: 1_000, fair: true },
    // etcd's leases are whole seconds, at least its minimum (2 s here).
    { name: "EtcdLockStore", spec: async () => ({ etcd: (await s.get("etcd")).endpoints }), ttlMs: 2_000, fair: true },
    // Reached from Node over the test worker's WebSocket (a plain JS store here, whose close()
    // only closes that socket): no close() case.
    { name: "DurableObjectLockStore", spec: async () => ({ durableObject: (await s.get("workerd")).url }), ttlMs: 1_000, noClose: true, fair: true },
    { name: "FileLockStore", spec: async () => ({ file: await lockFile() }), ttlMs: 1_000, native: true, fair: true },
  ];
}

const CLIENT = new URL("../histories/client.mjs", import.meta.url).href;

// The leader: says it campaigns, campaigns, prints its term, and leads until it is killed.
const LEADER = `
const ls = await import(process.argv[1]);
const { openStore } = await import(process.argv[2]);
const [name, ttl, retryDelay, spec] = [process.argv[3], Number(process.argv[4]), Number(process.argv[5]), JSON.parse(process.argv[6])];
const { store } = await openStore(ls, spec);
const election = ls.election(name, { store, ttl, retryDelay });
console.log(JSON.stringify({ campaigning: true }));
const leadership = await election.campaign();
console.log(JSON.stringify({ term: leadership.term }));
setInterval(() => {}, 1_000);
`;

/**
 * Starts a leader of `name` in a child process; resolves to `{ child, term, startedAt, ledAt }`
 * once it leads: when its word that it campaigns, then that it leads, reached this process
 * (`performance.now()`). Its lease began between the two (its campaign's acquire).
 */
export function startLeader(build, { name, ttlMs, retryMs = RETRY_MS, spec }) {
  const args = ["--input-type=module", "-e", LEADER, build.entry, CLIENT, name, String(ttlMs), String(retryMs), JSON.stringify(spec)];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  let startedAt;
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the leader did not lead within 20 s:\n${err}`));
    }, 20_000);
    child.stdout.on("data", (d) => {
      const at = performance.now();
      out += d;
      const said = out
        .split("\n")
        .filter((l) => l.startsWith("{") && l.endsWith("}"))
        .map((l) => JSON.parse(l));
      if (said.some((m) => m.campaigning)) startedAt ??= at;
      const led = said.find((m) => m.term !== undefined);
      if (led !== undefined) {
        clearTimeout(timer);
        resolve({ child, term: led.term, startedAt, ledAt: at });
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      // Its error's own line first: a report that keeps one line keeps the one that says why.
      const why = err.split("\n").find((l) => /^\w*Error\b/.test(l));
      reject(new Error(`the leader exited with ${code}${why ? `: ${why}` : ""}\n${err}`));
    });
  });
}

/**
 * An observer of `election` from now on (its `observe()`, reading every `intervalMs`):
 * `changedAfter(at, term)` is how long after `at` it first yielded something other than
 * the leader of `term` (a new leader, or none), or null if it has not; `stop()` ends it.
 */
function observer(election, intervalMs) {
  const controller = new AbortController();
  const seen = [];
  const reading = (async () => {
    for await (const leader of election.observe({ signal: controller.signal, interval: intervalMs }))
      seen.push({ at: performance.now(), term: leader?.term ?? null });
  })().catch(() => {});
  return {
    changedAfter(at, term) {
      const change = seen.find((s) => s.at >= at && s.term !== term);
      return change === undefined ? null : change.at - at;
    },
    async stop() {
      controller.abort();
      await reading;
    },
  };
}

/** A campaign of `election` that gives up (rejects, saying `what`) after `ms`: a standby that never leads fails rather than hangs. */
function campaignWithin(election, ms, what) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  return election.campaign({ signal: controller.signal }).then(
    (leadership) => {
      clearTimeout(timer);
      return leadership;
    },
    (err) => {
      clearTimeout(timer);
      throw controller.signal.aborted ? new Error(`the standby did not lead within ${ms} ms ${what}`) : err;
    },
  );
}

/**
 * A leader in a child process, a standby here; `waitMs` after the standby's campaign
 * began the leader is SIGKILLed. Resolves to:
 * - `ms`: from the kill until the standby leads;
 * - `waited`: whether the standby was still waiting at the kill (it must: the leader lived);
 * - `terms`: the leader's term, then the standby's;
 * - `resigned`: what the standby's resign() answered afterwards;
 * - `intoLeaseMs`: how far into its lease the leader was killed, at most (from its campaign's
 *   start, as its word of it arrived here), and `renewedBeforeKill`: whether that may have
 *   been late enough for the leader's first renewal (autoExtend renews every third of the TTL);
 * - `afterLeaseMs`: from the lease's end (the campaign's start + the TTL) until the standby
 *   leads: the store's detection overhead, when the lease was not renewed before the kill
 *   (high by the time the leader's acquire took to reach its store);
 * - `observedMs`: from the kill until an observer (observe() on the standby's store, every
 *   retry delay) saw the leader change, or null if it did not.
 * The standby's store is `standbySpec` (the leader's unless told).
 */
export async function takeoverAfterKill(build, { name, spec, standbySpec = spec, ttlMs, retryMs = RETRY_MS, waitMs = 200 }) {
  const { ls } = build;
  const standbyStore = await openStore(ls, standbySpec);
  let leader;
  let watching;
  try {
    leader = await startLeader(build, { name, ttlMs, retryMs, spec });
    const standby = ls.election(name, { store: standbyStore.store, ttl: ttlMs, retryDelay: retryMs });
    watching = observer(standby, retryMs);
    const standing = campaignWithin(standby, waitMs + ttlMs + retryMs + GIVE_UP_MS, "of its campaign's start (its leader SIGKILLed)");
    let early = false;
    standing.then(
      () => (early = true),
      () => {},
    );
    await sleep(waitMs);
    const waited = !early;
    const killedAt = performance.now();
    leader.child.kill("SIGKILL");
    const next = await standing;
    const ledAt = performance.now();
    const intoLeaseMs = killedAt - leader.startedAt;
    // The observer's next read sees it.
    await sleep(2 * retryMs + 50);
    return {
      ms: ledAt - killedAt,
      waited,
      terms: [leader.term, next.term],
      resigned: await next.resign(),
      intoLeaseMs,
      renewedBeforeKill: intoLeaseMs >= ttlMs / 3,
      afterLeaseMs: ledAt - (leader.startedAt + ttlMs),
      observedMs: watching.changedAfter(killedAt, leader.term),
    };
  } finally {
    await watching?.stop();
    leader?.child.kill("SIGKILL");
    await standbyStore.close().catch(() => {});
  }
}

/**
 * A leader and a standby here, each on a store of its own; `settleMs` after the standby's
 * campaign began, the leader ends by `end(leadership, opened)`. Leases are 10 TTLs, so
 * no handover comes from an expiry. Resolves to `{ ms, terms, ended, signalAborted,
 * observedMs }`: from the end's start until the standby leads, the two terms, what `end`
 * resolved to, whether the leadership's signal had aborted once `end` was done, and from
 * the end's start until an observer on the standby's store saw the leader change.
 */
async function handover(build, { name, spec, ttlMs, retryMs = RETRY_MS, settleMs = 100 }, end, what) {
  const { ls } = build;
  const a = await openStore(ls, spec);
  let aOpen = true;
  const b = await openStore(ls, spec).catch(async (err) => {
    await a.close().catch(() => {});
    throw err;
  });
  const options = (store) => ({ store, ttl: ttlMs * 10, retryDelay: retryMs });
  let watching;
  try {
    const leader = await ls.election(name, options(a.store)).campaign();
    watching = observer(ls.election(name, options(b.store)), retryMs);
    const standing = campaignWithin(ls.election(name, options(b.store)), settleMs + retryMs + GIVE_UP_MS, `of its campaign's start (${what})`);
    standing.catch(() => {});
    await sleep(settleMs);
    const endedAt = performance.now();
    const ended = await end(leader, {
      close: async () => {
        aOpen = false;
        await a.close();
      },
    });
    const signalAborted = leader.signal.aborted;
    const next = await standing;
    const ms = performance.now() - endedAt;
    await sleep(2 * retryMs + 50);
    await next.resign();
    return { ms, terms: [leader.term, next.term], ended, signalAborted, observedMs: watching.changedAfter(endedAt, leader.term) };
  } finally {
    await watching?.stop();
    if (aOpen) await a.close().catch(() => {});
    await b.close().catch(() => {});
  }
}

/** The leader resigns: `{ ms, terms, resigned, observedMs }` (`resigned`: what its resign() answered). */
export async function handoverAfterResign(build, options) {
  const r = await handover(build, options, (leader) => leader.resign(), "its leader resigned");
  return { ms: r.ms, terms: r.terms, resigned: r.ended, observedMs: r.observedMs };
}

/** The leader's store is closed (a clean shutdown): `{ ms, terms, endedWithStore, observedMs }` (whether the leadership's signal had aborted). */
export async function handoverAfterClose(build, options) {
  const r = await handover(build, options, (_, store) => store.close(), "its leader's store closed");
  return { ms: r.ms, terms: r.terms, endedWithStore: r.signalAborted, observedMs: r.observedMs };
}
