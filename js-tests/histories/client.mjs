// One OS process of a history run: M async clients on one store, one shared key set,
// for a while. Each client loops over random holds — plain locks (random wait 0–120 ms,
// retryDelay 1–10 ms), semaphore permits, read and write locks, lockAll() over 2–3 of
// the keys (kind "multi": the checker counts it a plain holder of each), elections (kind
// "election": campaign, lead while `isLeader` says so, resign) — holds a few ms,
// sometimes extends (early, near its expiry, past it), sometimes auto-extends, sometimes
// lets the hold run out or releases as its due check asks the store, and releases. Every hold is recorded with the host clock's
// times on the run's clock (the parent's: see syncClock) and printed as a JSON line on stdout once the run is over:
//
//   { t: "hold", client, kind, key, keys, limit, ttl, drift, auto, owner (its fingerprint),
//     acquire: { send, reply, token, tokens, abortAt? }, extends: [{ send, reply, ok, code }],
//     release: { send, reply, ok, code }, signal: { at, reason, code } | null, endAt }
//
// (a fair handle's hold, config.fair, has `fair: true` and its acquire's `timeout` too, as
// have its refused, aborted and failed acquires' attempt lines below: the checker's
// fair-order check),
//
// then a line per read of an election's leader (kind "observe": `election(key).leader()`, on
// stores with `holder`): `{ t: "observation", client, key, send, reply, term, code }` (term
// null: no leader; code: the read's error),
// then a line per acquire that was aborted or failed (never a grant):
// `{ t: "attempt", client, id, kind, key, ttl, send, reply, outcome: "aborted" | "error" | "timed-out", abortAt, code }`
// ("timed-out": an election's campaign that gave up at its timeout). A streaming process
// (config.stream) also writes each acquire as it is sent (outcome "pending", reply null)
// and, once answered, its outcome (`{ t: "attempt", client, id, outcome: "granted" |
// "refused" }` for an acquire that gives no attempt line): a process killed while an acquire
// was in flight leaves it "pending", an acquire the store may have granted (run.mjs keeps each
// attempt's last line);
// a line per event-loop stall (config.stalls): `{ t: "stall", process, from, to }`, and one
// `{ t: "summary", ... }` line. Run as `node client.mjs '<config JSON>'` (see
// run.mjs), or in-process with `runClients(config)`.
import { createHash } from "node:crypto";
import { pathToFileURL } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

import { seeded } from "./random.mjs";
import { withFaults } from "../../js/testing.mjs";

// A test's deliberate error in this process's own clock (config.clockSkewMs).
let skewMs = 0;

/** This process's own clock, in ms since the epoch. */
const local = () => performance.timeOrigin + performance.now() + skewMs;

// When this process's clients stop taking holds (runClients): faults that make calls late end before.
let clientsStopAt = Infinity;

// What this process adds to its own clock to read the run's (see syncClock).
let offsetMs = 0;

/**
 * The run's clock every process of a run records on, in ms: the parent's. A child's
 * own `performance.timeOrigin` is the wall clock read once at its start, so two
 * processes started a few ms apart while the wall clock is being slewed (NTP on a VM
 * corrects at up to 8 %) disagree by ms for their whole life, and a hand-off between
 * them would look like an overlap. Each child measures its offset to the parent's clock
 * over IPC instead (syncClock).
 */
export const now = () => local() + offsetMs;

/**
 * One measurement of this process's clock against the parent's (over the IPC channel
 * that run.mjs opens; see serveClock): the best of `rounds` round trips. Returns
 * `{ offsetMs, errorMs }` (what to add to the local clock, and the bound on that: half
 * the round trip), or null without a parent channel.
 */
async function measureClock(rounds) {
  if (typeof process.send !== "function") return null;
  let best = null;
  for (let i = 0; i < rounds; i++) {
    const sample = await new Promise((resolve) => {
      const sent = local();
      process.once("message", (m) => resolve({ sent, back: local(), parent: m.clock }));
      process.send({ clock: sent });
    });
    const rtt = sample.back - sample.sent;
    if (best === null || rtt < best.rtt) best = { rtt, offsetMs: sample.parent - (sample.sent + sample.back) / 2 };
  }
  return { offsetMs: best.offsetMs, errorMs: best.rtt / 2 };
}

/**
 * Sets this process's offset to the run's clock (once, before the run), and at the end
 * (`check: true`) measures again without changing it: `{ offsetMs, errorMs, driftMs }`,
 * where `errorMs` bounds the times recorded (both measurements' errors and the drift
 * between them). Null without a parent channel (a run in one process).
 */
export async function syncClock({ check = false, rounds = 24 } = {}) {
  const measured = await measureClock(rounds);
  if (measured === null) return null;
  if (!check) {
    offsetMs = measured.offsetMs;
    syncClock.first = measured;
    return { offsetMs, errorMs: measured.errorMs, driftMs: 0 };
  }
  const driftMs = measured.offsetMs - offsetMs;
  return { offsetMs, errorMs: (syncClock.first?.errorMs ?? 0) + measured.errorMs + Math.abs(driftMs), driftMs };
}

/** The parent's side of syncClock: answers each of `child`'s clock requests with its own time. */
export function serveClock(child) {
  child.on("message", (m) => {
    if (m?.clock !== undefined && child.connected) child.send({ clock: now() });
  });
}

/** The lease model's drift allowance for a TTL (core's `default_drift_ms`). */
export const driftMs = (ttl) => Math.min(Math.floor(ttl / 100) + 2, ttl - 1);

/** The keys a run's clients share unless told otherwise. */
export const HISTORY_KEYS = ["h0", "h1", "h2"];

const DEFAULTS = {
  store: "memory",
  clients: 4,
  durationMs: 2_000,
  keys: HISTORY_KEYS,
  ttlMs: 120,
  limit: 2,
  kinds: { lock: 5, semaphore: 2, read: 1.5, write: 1.5, multi: 1.5, election: 1, observe: 0.5 },
  autoExtend: 0.15,
  seed: 1,
  process: 0,
  graceMs: 400,
  // Reuse one handle per client, kind and key across holds (else a fresh handle each hold).
  reuseHandles: false,
  // Locks and semaphores as fair handles (`{ fair: true }`; lockAll() stays unfair, so a
  // fair run leaves "multi" out).
  fair: false,
  // The share of waiting acquires given a `signal` that aborts somewhere within the wait.
  aborts: 0.1,
  // How long a waiting acquire waits (its `timeout`), at random between these, in ms
  // (15 % of acquires do not wait).
  waitMs: [0, 120],
  // The share of semaphore acquires that take more than one permit (2 up to the limit),
  // on stores that carry weights (`permitWeights`; the memory and Redis stores do).
  weighted: 0.3,
  // A hold left to run out is released 0–lingerMs ms after its TTL.
  lingerMs: 40,
  // Event-loop stalls: `{ everyMs: [lo, hi], ms: [lo, hi] }`, a synchronous busy-wait of
  // ms[0]–ms[1] ms every everyMs[0]–everyMs[1] ms while the clients run (a long GC or
  // synchronous work: calls the addon or wasm hands back to JS wait behind it). Null: none.
  stalls: null,
  // `{ share, ms }`: that share of holds takes a TTL of `ms` (released within a few ms, or
  // extended once early), so a hold nobody owns, left by an acquire that was aborted or
  // answered late, outlives the run and is found at its end (run.mjs, orphaned holds).
  // Null: every hold has `ttlMs`.
  longTtl: null,
};

/** The first 8 hex digits of an owner token's SHA-256, as the CLI's `list --json` names the owner. */
export function ownerFingerprint(owner) {
  return createHash("sha256").update(String(owner)).digest("hex").slice(0, 8);
}

/** The owner token a held handle carries (from its serialized form), or null if it has none. */
/**
 * An election (`election(key)`) as the loop's handles look: `acquire(options)` campaigns
 * until `options.timeout` (false then) or `options.signal` (an AbortError), the grant's
 * token is the term, `signal` the leadership's, `release()` resigns. It has no extend.
 */
function electionHandle(ls, key, ttl, store) {
  let leadership = null;
  return {
    get fencingToken() {
      return leadership?.term ?? null;
    },
    get signal() {
      return leadership.signal;
    },
    get isLeader() {
      return leadership.isLeader;
    },
    async acquire({ timeout, retryDelay, signal }) {
      const timedOut = AbortSignal.timeout(Math.max(1, timeout));
      try {
        leadership = await ls.election(key, { store, ttl, retryDelay }).campaign({ signal: signal ? AbortSignal.any([signal, timedOut]) : timedOut });
        return true;
      } catch (err) {
        // Aborted as an acquire is: the signal's reason, or an AbortError.
        if (signal?.aborted) throw err?.code === "ABORTED" ? err : Object.assign(new Error("the campaign was aborted", { cause: err }), { code: "ABORTED" });
        // The timeout ended it: a wait that gave up.
        if (timedOut.aborted) return false;
        throw err;
      }
    },
    release: () => leadership.resign(),
    extend: () => Promise.reject(new Error("an election has no extend")),
    serialize: () => "{}",
  };
}

function ownerOf(handle) {
  try {
    return JSON.parse(handle.serialize()).owner ?? null;
  } catch {
    return null;
  }
}

/**
 * Starts this process's event-loop stalls (config.stalls); each is passed to `record({
 * from, to })` on the run's clock. Returns a function that stops them.
 */
function startStalls(stalls, random, record) {
  if (!stalls) return () => {};
  let timer = null;
  let stopped = false;
  const next = () => {
    timer = setTimeout(
      () => {
        if (stopped) return;
        const ms = random.int(stalls.ms[0], stalls.ms[1]);
        const from = now();
        const t = performance.now();
        while (performance.now() - t < ms);
        record({ from, to: now() });
        next();
      },
      random.int(stalls.everyMs[0], stalls.everyMs[1]),
    );
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** A lock store object whose acquire always answers true: a broken guard, for the checker's own test. */
export function alwaysGrants(inner) {
  return {
    acquire: async (key, owner, ttl) => {
      await inner.acquire(key, owner, ttl);
      return true;
    },
    release: (key, owner) => inner.release(key, owner),
    extend: (key, owner, ttl) => inner.extend(key, owner, ttl),
    isLocked: (key) => inner.isLocked(key),
    remainingTime: (key) => inner.remainingTime(key),
  };
}

/**
 * `alwaysGrants` with a fencing token, growing, for every acquire: a broken guard that a
 * campaign of an election (which needs tokens) goes through, for the checker's own test.
 */
export function alwaysGrantsFenced(inner) {
  let token = 0;
  return {
    ...alwaysGrants(inner),
    acquire: async (key, owner, ttl) => {
      await inner.acquire(key, owner, ttl);
      return ++token;
    },
  };
}

/**
 * A JS store with tokens and holder() (js-tests/support/js-stores.mjs) whose holder()
 * answers, every other time, the first leader it ever saw of the key, as a stale cache
 * would: a broken guard, for the checker's own test of observers.
 */
export function staleLeader(inner) {
  const first = new Map();
  let stale = false;
  return {
    ...inner,
    async holder(key) {
      const now = await inner.holder(key);
      if (now !== null && !first.has(key)) first.set(key, now);
      stale = !stale;
      return stale && first.has(key) ? first.get(key) : now;
    },
  };
}

/**
 * A plain JS store with semaphores (js-tests/support/js-stores.mjs) that says it carries
 * weighted permits but takes one per holder whatever was asked: a broken guard, for the
 * checker's own test.
 */
export function ignoresWeights(inner) {
  return { ...inner, permitWeights: true };
}

/**
 * A plain JS store (js-tests/support/js-stores.mjs) that says it has fair locks but keeps
 * no queue: its `acquireFair` is a plain `acquire`, so whoever asks first after a release
 * gets in. A broken guard, for the checker's fair-order check.
 */
export function ignoresQueue(inner) {
  return { ...inner, acquireFair: (key, owner, ttlMs) => inner.acquire(key, owner, ttlMs) };
}

/**
 * A plain JS store whose `acquireAll` (several keys at once) checks only the first key
 * and then takes them all, held or not: a broken guard, for the checker's own test.
 */
export function checksFirstKeyOnly() {
  const holds = new Map();
  let token = 0;
  const live = (key) => {
    const hold = holds.get(key);
    return hold && hold.expiresAt > performance.now() ? hold : undefined;
  };
  const take = (key, owner, ttlMs) => {
    holds.set(key, { owner, expiresAt: performance.now() + ttlMs });
    return ++token;
  };
  return {
    async acquire(key, owner, ttlMs) {
      return live(key) ? false : take(key, owner, ttlMs);
    },
    async acquireAll(keys, owner, ttlMs) {
      if (live(keys[0])) return false;
      return keys.map((key) => take(key, owner, ttlMs));
    },
    async release(key, owner) {
      if (live(key)?.owner !== owner) return false;
      holds.delete(key);
      return true;
    },
    async extend(key, owner, ttlMs) {
      const hold = live(key);
      if (hold?.owner !== owner) return false;
      hold.expiresAt = performance.now() + ttlMs;
      return true;
    },
    async isLocked(key) {
      return live(key) !== undefined;
    },
    async isHeldBy(key, owner) {
      return live(key)?.owner === owner;
    },
    async remainingTime(key) {
      const hold = live(key);
      return hold ? Math.ceil(hold.expiresAt - performance.now()) : null;
    },
  };
}

/**
 * A user's own store across a network: each call reaches `inner` late and its answer
 * (or error) comes back late, each way 0–`lagMs` / 6 ms, one time in eight up to `lagMs`
 * (a slow packet), so the calls of one hold overtake each other (a lockAll() release's
 * keys and what a due check sends, say). The delays are the test kit's store-call faults
 * (locksmith-js/testing's withFaults()), the implementation users' tests get.
 */
export function laggy(inner, lagMs) {
  const lag = () => Math.random() * (Math.random() < 0.125 ? lagMs : lagMs / 6);
  const store = withFaults(inner);
  store.delay(lag, { answer: lag });
  return store;
}

/**
 * A `fetch` for the etcd store that holds `share` of its requests back `ms[0]`–`ms[1]` ms
 * (but no later than 200 ms before the clients stop) and then sends them whatever became of their caller (a request queued at a slow or
 * stopped member, which the member may still apply): the caller's own timeout (its
 * `signal`) answers it meanwhile, and the request is applied late. Watches pass through.
 */
export function lateFetch({ share, ms }) {
  return (url, init = {}) => {
    // Each request held back is sent 200 ms before the clients stop (see runClients).
    const held = Math.min(ms[0] + Math.random() * (ms[1] - ms[0]), clientsStopAt - 200 - now());
    if (String(url).endsWith("/v3/watch") || held < ms[0] / 2 || Math.random() >= share) return fetch(url, init);
    const { signal, ...rest } = init;
    const sent = sleep(held).then(() => fetch(url, rest));
    sent.catch(() => {});
    if (!signal) return sent;
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      sent.then(
        (response) => {
          signal.removeEventListener("abort", onAbort);
          resolve(response);
        },
        (err) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      );
    });
  };
}

// The methods a test-only wrapper passes through: locks and semaphores, plain and fair
// (the broken guards are shown on `kinds: { lock: 1 }` runs, and a fair queue's on
// `{ semaphore: 1 }` too). ACQUIRE_TOKEN and ACQUIRE_PERMIT_TOKEN keep fencing tokens.
const ACQUIRE_TOKEN = Symbol.for("locksmith.acquireToken");
const ACQUIRE_PERMIT_TOKEN = Symbol.for("locksmith.acquirePermitToken");
const LOCK_METHODS = [
  "acquire",
  "release",
  "extend",
  "isLocked",
  "remainingTime",
  "isHeldBy",
  "ownerRemainingTime",
  "acquireFair",
  "releaseFair",
  "extendFair",
  "acquirePermit",
  "releasePermit",
  "extendPermit",
  "countPermits",
  "permitRemainingTime",
  ACQUIRE_TOKEN,
  ACQUIRE_PERMIT_TOKEN,
];

/**
 * A test-only wrapper around a real store with one guard broken, to show that the
 * checker catches what a fault tests:
 * - `extend-says-yes`: extend() answers true even when the store refused (a holder paused
 *   past its TTL would extend a hold that is gone);
 * - `release-ignores-owner`: release() deletes the key whoever holds it (`del(key)`, the
 *   raw delete of the store's own key, is given by the caller);
 * - `owner-check-says-yes`: ownerRemainingTime() answers a full TTL for anyone (the due
 *   check that makes a signal report a hold lost never sees the loss);
 * - `skips-cleanup`: the release core sends to clean up after an acquire it abandoned (an
 *   abort, a timeout) does nothing: every release of an owner whose acquire failed, was
 *   unanswered when the release came, or answered after `timeoutMs`;
 * - `fair-keeps-no-place`: a fair attempt keeps no place in the queue (it is sent as a
 *   single try), yet answers "waiting" as if it had, so a later waiter can be let in first;
 * - `put-without-compare`: acquire() writes the key whether or not it is held (`put(key,
 *   owner, ttl)`, the raw write of the store's own hold, is given by the caller: etcd's, a
 *   put under a lease without the transaction's "create revision is 0" compare); release
 *   and extend still check the owner. Without fencing tokens (core then acquires through
 *   acquire()).
 * The release and extend guards break the plain lock's methods only: a fair lock's
 * (releaseFair, extendFair) pass through, so they are shown on plain locks.
 */
export function brokenStore(inner, how, { del, put, ttl, timeoutMs = Infinity } = {}) {
  const store = {};
  for (const name of LOCK_METHODS) if (typeof inner[name] === "function") store[name] = (...args) => inner[name](...args);
  // Weighted permits as the inner store has them (a fair semaphore's guard is shown with them).
  if (inner.permitWeights === true) store.permitWeights = true;
  // The bridge's timeout for the store's calls (core gives up on a call after it).
  if (typeof inner.operationTimeoutMs === "number") store.operationTimeoutMs = inner.operationTimeoutMs;
  if (how === "extend-says-yes") {
    store.extend = async (key, owner, ttlMs) => {
      await inner.extend(key, owner, ttlMs);
      return true;
    };
  } else if (how === "release-ignores-owner") {
    store.release = async (key) => {
      await del(key);
      return true;
    };
  } else if (how === "skips-cleanup") {
    // The clean-up after an acquire that was abandoned (aborted, or timed out: core
    // releases its owner while the acquire may still take effect) is dropped: a release
    // of an owner whose acquire has not answered yet, or answered with an error, does
    // nothing. A late or aborted acquire then leaves a hold nobody owns.
    // Owners whose acquire is unanswered, and those core gave up on: still unanswered
    // when their release came, or answered after `timeoutMs` (core's operation timeout).
    const pending = new Set();
    const abandoned = new Set();
    const watched =
      (name) =>
      async (key, owner, ...rest) => {
        pending.add(owner);
        const sent = performance.now();
        try {
          return await inner[name](key, owner, ...rest);
        } catch (err) {
          abandoned.add(owner);
          throw err;
        } finally {
          pending.delete(owner);
          if (performance.now() - sent > timeoutMs) abandoned.add(owner);
        }
      };
    // Both ways in: core takes fencing tokens through ACQUIRE_TOKEN where a store has it.
    for (const name of ["acquire", ACQUIRE_TOKEN]) if (typeof inner[name] === "function") store[name] = watched(name);
    store.release = async (key, owner) => {
      if (pending.has(owner)) abandoned.add(owner);
      return abandoned.has(owner) ? false : inner.release(key, owner);
    };
  } else if (how === "fair-keeps-no-place") {
    store.acquireFair = (key, owner, ttlMs, kind, limit, permits) => inner.acquireFair(key, owner, ttlMs, kind, limit, permits, false);
  } else if (how === "owner-check-says-yes") {
    store.ownerRemainingTime = async () => ttl;
    store.isHeldBy = async () => true;
  } else if (how === "put-without-compare") {
    delete store[ACQUIRE_TOKEN];
    store.acquire = async (key, owner, ttlMs) => {
      await put(key, owner, ttlMs);
      return true;
    };
  } else {
    throw new Error(`unknown broken guard ${how}`);
  }
  return store;
}

/**
 * The store a config names: `memory`, `broken-memory`, `{ redis: url, ... }` (RedisLockStore;
 * `redis` may also be connect options: `{ sentinels, masterName }`, `{ cluster }`),
 * `{ postgres: url, options?, ... }` (PostgresLockStore; `options` is the connection's
 * `-c` settings), `{ etcd: endpoints, late?, ... }` (EtcdLockStore; `late`: lateFetch's
 * options); the SQL and etcd specs take `module`, a path to load the store from instead
 * of the package (an older version of it), `{ mysql: url, ... }` (MySqlLockStore, its own pool), `{ ioredis: url, ... }` (IoRedisLockStore over an ioredis client),
 * `{ nodeRedis: url, ... }` (NodeRedisLockStore over a node-redis client),
 * `{ upstash: url, token, ... }` (UpstashLockStore over an @upstash/redis client, to a
 * REST endpoint), `{ durableObject: url }` (DurableObjectLockStore in the worker at
 * `url`: js-tests/workerd/store-worker.mjs, reached over its /store WebSocket), or
 * `queue-ignored-memory` (ignoresQueue: a fair store without a queue), `{ broken: how, store: spec }` (brokenStore over an ioredis, Upstash or etcd spec's store),
 * or `{ laggyJs: ms }` (a plain JS store with isHeldBy, ownerRemainingTime, permits,
 * fencing tokens and onRelease, each call late: laggy).
 */
export async function openStore(ls, spec) {
  if (spec === "memory") return { store: new ls.MemoryLockStore(), close: async () => {} };
  if (spec === "broken-memory") return { store: alwaysGrants(new ls.MemoryLockStore()), close: async () => {} };
  if (spec === "broken-fenced-memory") return { store: alwaysGrantsFenced(new ls.MemoryLockStore()), close: async () => {} };
  if (spec === "first-key-only-memory") return { store: checksFirstKeyOnly(), close: async () => {} };
  if (spec === "stale-leader-memory") {
    const { mapStore } = await import("../support/js-stores.mjs");
    return { store: staleLeader(mapStore({ withFencing: true, withHolder: true, withOnRelease: true })), close: async () => {} };
  }
  if (spec && typeof spec === "object" && typeof spec.laggyJs === "number") {
    const { mapStore } = await import("../support/js-stores.mjs");
    const inner = mapStore({ withIsHeldBy: true, withOwnerRemainingTime: true, withPermits: true, withFencing: true, withOnRelease: true, withHolder: true });
    return { store: laggy(inner, spec.laggyJs), close: async () => {} };
  }
  if (spec === "queue-ignored-memory") {
    const { mapStore } = await import("../support/js-stores.mjs");
    return { store: ignoresQueue(mapStore({ withFencing: true })), close: async () => {} };
  }
  if (spec === "weights-ignored-memory") {
    const { mapStore } = await import("../support/js-stores.mjs");
    return { store: ignoresWeights(mapStore({ withPermits: true, withFencing: true })), close: async () => {} };
  }
  if (spec && typeof spec === "object" && (typeof spec.redis === "string" || (spec.redis && typeof spec.redis === "object"))) {
    const { redis, ...options } = spec;
    const store = await ls.RedisLockStore.connect({ ...(typeof redis === "string" ? { url: redis } : redis), ...options });
    return { store, close: (options) => store.close(options) };
  }
  if (spec && typeof spec === "object" && typeof spec.upstash === "string") {
    const { upstash, token, ...options } = spec;
    const { Redis } = await import("@upstash/redis");
    const { UpstashLockStore } = await import("locksmith-js/upstash");
    const client = new Redis({ url: upstash, token, enableTelemetry: false });
    const store = new UpstashLockStore(client, options);
    return { store, raw: client, close: (options) => store.close(options) };
  }
  if (spec && typeof spec === "object" && typeof spec.durableObject === "string") {
    const { fetch } = await import("miniflare");
    const { remoteStore } = await import("../support/workerd-remote-store.mjs");
    const res = await fetch(new URL("/store", spec.durableObject), { headers: { Upgrade: "websocket" } });
    if (!res.webSocket) throw new Error(`the worker at ${spec.durableObject} refused the store's WebSocket (${res.status})`);
    res.webSocket.accept();
    const store = remoteStore(res.webSocket);
    return { store, close: async () => store.close() };
  }
  if (spec && typeof spec === "object" && typeof spec.file === "string") {
    const { file, freeAtOpen, ...options } = spec;
    const store = await ls.FileLockStore.open(file, options);
    // A broken guard: a process that "recovers" at open by freeing every hold it finds,
    // taking their holders for dead (as a store whose holds end with their process
    // would), frees the live holds of the others too.
    if (freeAtOpen) {
      const { createRequire } = await import("node:module");
      const addon = createRequire(import.meta.url)("../../js/native-loader.cjs").loadAddon();
      const raw = addon.NativeFileStore.openExisting(file);
      for (const key of HISTORY_KEYS) await raw.forceRelease(key);
      raw.close();
    }
    return { store, close: (options) => store.close(options) };
  }
  if (spec && typeof spec === "object" && typeof spec.postgres === "string") {
    const { postgres, options, module, ...storeOptions } = spec;
    const { PostgresLockStore } = await storeModule(module, "locksmith-js/postgres");
    const store = await PostgresLockStore.connect({ connectionString: postgres, ...(options ? { options } : {}) }, storeOptions);
    return { store, close: (options) => store.close(options) };
  }
  if (spec && typeof spec === "object" && typeof spec.mysql === "string") {
    const { mysql, module, ...storeOptions } = spec;
    const { MySqlLockStore } = await storeModule(module, "locksmith-js/mysql");
    const store = await MySqlLockStore.connect(mysql, storeOptions);
    return { store, close: (options) => store.close(options) };
  }
  if (spec && typeof spec === "object" && typeof spec.ioredis === "string") {
    const { ioredis, ...options } = spec;
    const { Redis } = await import("ioredis");
    const { IoRedisLockStore } = await import("locksmith-js/ioredis");
    const client = new Redis(ioredis);
    client.on("error", () => {}); // it reconnects by itself; calls meanwhile fail or wait
    const store = new IoRedisLockStore(client, options);
    return {
      store,
      raw: client,
      close: async (options) => {
        await store.close(options);
        client.disconnect();
      },
    };
  }
  if (spec && typeof spec === "object" && typeof spec.nodeRedis === "string") {
    const { nodeRedis, ...options } = spec;
    const { createClient } = await import("redis");
    const { NodeRedisLockStore } = await import("locksmith-js/node-redis");
    const client = createClient({ url: nodeRedis });
    client.on("error", () => {}); // it reconnects by itself
    await client.connect();
    const store = new NodeRedisLockStore(client, options);
    return {
      store,
      close: async (options) => {
        await store.close(options);
        await (typeof client.destroy === "function" ? client.destroy() : client.disconnect());
      },
    };
  }
  if (spec && typeof spec === "object" && Array.isArray(spec.etcd)) {
    const { etcd, late, module, ...options } = spec;
    const { EtcdLockStore } = await storeModule(module, "locksmith-js/etcd");
    const store = await EtcdLockStore.connect({ endpoints: etcd, ...options, ...(late && { fetch: lateFetch(late) }) });
    return { store, raw: etcdRaw(etcd), close: (options) => store.close(options) };
  }
  if (spec && typeof spec === "object" && typeof spec.broken === "string") {
    const inner = await openStore(ls, spec.store);
    const del = (key) => inner.raw.del(inner.store.lockKey(key));
    if (spec.broken === "put-without-compare" && typeof inner.raw?.put !== "function")
      throw new Error("put-without-compare breaks an etcd store's acquire only");
    const put = (key, owner, ttl) => inner.raw.put(inner.store.lockKey(key), owner, ttl);
    return { store: brokenStore(inner.store, spec.broken, { del, put, ttl: spec.ttl, timeoutMs: spec.timeoutMs }), close: inner.close };
  }
  throw new Error(`unknown store ${JSON.stringify(spec)}`);
}

/**
 * Raw writes to an etcd cluster at `endpoints` (its JSON gateway, the first member that
 * answers), for the broken guards: `del(name)` deletes a key; `put(name, owner, ttl)` puts
 * a lock's hold (the value in the store's form, so its release and extend check the owner)
 * under a new lease, held or not.
 */
function etcdRaw(endpoints) {
  const post = async (path, body) => {
    let last;
    for (const url of endpoints) {
      let answer;
      try {
        answer = await (await fetch(`${url}/v3/${path}`, { method: "POST", body: JSON.stringify(body) })).json();
      } catch (err) {
        last = err;
        continue;
      }
      if (answer.error !== undefined || answer.code !== undefined) throw new Error(`etcd refused ${path}: ${JSON.stringify(answer)}`);
      return answer;
    }
    throw last;
  };
  const b64 = (text) => Buffer.from(text).toString("base64");
  return {
    del: (name) => post("kv/deleterange", { key: b64(name) }),
    put: async (name, owner, ttl) => {
      const { ID } = await post("lease/grant", { TTL: Math.ceil(ttl / 1_000) });
      // Never a put without a lease: it would outlive the run.
      if (!ID) throw new Error("etcd granted no lease");
      await post("kv/put", { key: b64(name), value: b64(JSON.stringify({ owner, ttl, w: "unchecked" })), lease: ID });
    },
  };
}

/**
 * A store's module: the package's (`name`), or the file at `path` (a spec's `module`: an
 * older version of the store, to replay a row against it).
 */
async function storeModule(path, name) {
  if (!path) return import(name);
  const mod = await import(pathToFileURL(path).href);
  // A CommonJS file's exports are its default.
  return mod.default && typeof mod.default === "object" ? { ...mod.default, ...mod } : mod;
}

const FAIR = { fair: true };

/**
 * A fair handle's record fields: `fair`, and its acquire's `timeout` (the checker's
 * fair-order check); `placed` when the store's own answers on places were recorded
 * (recordPlaces), which the checker then holds to order instead.
 */
const fairness = (handle, options, placed) => (handle.fair ? { fair: true, timeout: options.timeout, ...(placed ? { placed: true } : {}) } : {});

/**
 * The places of a JS store's fair queues as this process saw them answered: the store's
 * `acquireFair`, `release`, `releasePermit` and `releaseFair` are wrapped (own properties over its
 * methods), and each owner that made a fair attempt gets a record `{ t: "place", process,
 * key, kind, owner, ttl, first, queued, answers, grant, end }`: when its first attempt was
 * sent (`first`), when an attempt that waits was first answered "not yet" (`queued`: its
 * place stood from then), every such answer (`[send, reply]`: each renews the place for
 * `ttl` from its send at least), its grant (`{ send, reply }`), and when it gave its place
 * up (`end`: an attempt that does not wait or that failed, a release of an owner that
 * holds nothing).
 * The checker's fair-order check over them is exact where send times are not (a place
 * may land well after its acquire was sent). Null for a store without `acquireFair` as a
 * JS method (the built-in stores queue inside core).
 */
function recordPlaces(store, process) {
  if (typeof store?.acquireFair !== "function") return null;
  const places = new Map();
  const acquireFair = store.acquireFair;
  store.acquireFair = async (key, owner, ttlMs, kind, limit, permits, waits) => {
    const send = now();
    let place = places.get(owner);
    if (place === undefined) {
      place = { t: "place", process, key, kind, owner, ttl: ttlMs, first: send, queued: null, answers: [], grant: null, end: null };
      places.set(owner, place);
    }
    // Whatever it answers, an attempt that does not wait leaves no place behind.
    if (waits !== true && place.queued !== null) place.end = Math.min(place.end ?? Infinity, send);
    let answer;
    try {
      answer = await acquireFair.call(store, key, owner, ttlMs, kind, limit, permits, waits);
    } catch (err) {
      // A failed attempt may have taken its place with it (its lease revoked): from its send on, none is known.
      place.end = Math.min(place.end ?? Infinity, send);
      throw err;
    }
    const reply = now();
    if (answer === false && waits === true) {
      place.answers.push([send, reply]);
      place.queued ??= reply;
    } else if (answer !== false && answer !== undefined && answer !== null) place.grant ??= { send, reply };
    return answer;
  };
  for (const name of ["release", "releasePermit", "releaseFair"]) {
    const release = store[name];
    if (typeof release !== "function") continue;
    store[name] = (key, owner, ...rest) => {
      const place = places.get(owner);
      // An owner that holds nothing gives its place up.
      if (place !== undefined && place.grant === null) place.end = Math.min(place.end ?? Infinity, now());
      return release.call(store, key, owner, ...rest);
    };
  }
  return places;
}

function pickKind(random, kinds) {
  const entries = Object.entries(kinds).filter(([, w]) => w > 0);
  let r = random() * entries.reduce((n, [, w]) => n + w, 0);
  for (const [kind, w] of entries) {
    r -= w;
    if (r < 0) return kind;
  }
  return entries[entries.length - 1][0];
}

function errorCode(err) {
  return err?.code ?? err?.name ?? String(err);
}

/** The reason a signal aborted with: `released` (an AbortError) or `lost`. */
function signalReason(signal) {
  const reason = signal.reason;
  return { reason: reason?.name === "AbortError" ? "released" : "lost", code: errorCode(reason) };
}

/**
 * Runs `config.clients` clients on one store until `config.durationMs` have passed;
 * resolves to `{ holds, summary }`. `config.onGrant(handle, hold)`, in-process only,
 * runs right after each grant (a check of the server's state, say).
 */
export async function runClients(ls, store, userConfig) {
  const config = { ...DEFAULTS, ...userConfig };
  const { ttlMs: baseTtl, limit } = config;
  const weights = store?.permitWeights === true;
  const root = seeded(config.seed).fork(config.process);
  const places = recordPlaces(store, config.process);
  const holds = [];
  // With `config.stream`, each hold is written out (a JSON line, synchronous: a pipe
  // on Linux) at its grant and at every change, so a process killed with SIGKILL
  // leaves the record of what it held; the parent keeps each hold's last line.
  const { writeSync } = config.stream ? await import("node:fs") : {};
  const emit = config.stream ? (hold) => writeSync(1, `${JSON.stringify(hold)}\n`) : () => {};
  const summary = { t: "summary", process: config.process, attempts: 0, grants: 0, refused: 0, aborted: 0, grantedAfterAbort: 0, errors: {}, extends: 0 };
  // Acquires that were aborted or failed (never a grant), and this process's stalls.
  const attempts = [];
  const stalls = [];
  const observations = [];
  // Observers read leaders through the store's optional holder(); without it, none.
  const kinds = typeof store.holder === "function" ? config.kinds : { ...config.kinds, observe: 0 };
  const countError = (where, err) => {
    const name = `${where}:${errorCode(err)}`;
    summary.errors[name] = (summary.errors[name] ?? 0) + 1;
  };
  const stopAt = now() + config.durationMs;
  clientsStopAt = stopAt;
  const stopStalls = startStalls(config.stalls, root.fork(1_000_003), (stall) => {
    const record = { t: "stall", process: config.process, ...stall };
    stalls.push(record);
    emit(record);
  });

  async function client(index) {
    const random = root.fork(index);
    const id = `${config.process}.${index}`;
    const handles = new Map();
    let attemptSeq = 0;
    const handleFor = (kind, key, ttl) => {
      const name = `${kind}:${key}:${ttl}`;
      let handle = config.reuseHandles ? handles.get(name) : undefined;
      if (handle === undefined) {
        if (kind === "lock") handle = config.fair ? new ls.Lock(key, ttl, store, FAIR) : new ls.Lock(key, ttl, store);
        else if (kind === "election") handle = electionHandle(ls, key, ttl, store);
        else if (kind === "multi") handle = ls.lockAll(key.split(","), ttl, store);
        else if (kind === "semaphore") handle = config.fair ? ls.semaphore(key, limit, ttl, store, FAIR) : ls.semaphore(key, limit, ttl, store);
        else if (kind === "read") handle = ls.readWriteLock(key, ttl, store).readLock();
        else handle = ls.readWriteLock(key, ttl, store).writeLock();
        handles.set(name, handle);
      }
      return handle;
    };
    while (now() < stopAt) {
      const kind = pickKind(random, kinds);
      let key = random.pick(config.keys);
      if (kind === "observe") {
        // An observer reads who leads, one to three times, a few ms apart.
        const elected = ls.election(key, { store, ttl: baseTtl });
        for (let n = random.int(1, 3); n > 0 && now() < stopAt; n--) {
          const seen = { t: "observation", client: id, key, send: now(), reply: null, term: null, code: null };
          try {
            seen.term = (await elected.leader())?.term ?? null;
          } catch (err) {
            seen.code = errorCode(err);
            countError("observe", err);
          }
          seen.reply = now();
          observations.push(seen);
          emit(seen);
          await sleep(random.int(0, 10));
        }
        continue;
      }
      if (kind === "multi") {
        // 2 or 3 distinct keys, in a random order (lockAll takes them in its own).
        const keys = new Set([key]);
        for (let n = random.int(2, 3); keys.size < Math.min(n, config.keys.length); ) keys.add(random.pick(config.keys));
        key = [...keys].join(",");
      }
      // A long-TTL hold (config.longTtl) is released within a few ms.
      const long = config.longTtl ? random.chance(config.longTtl.share) : false;
      const ttl = long ? config.longTtl.ms : baseTtl;
      const handle = handleFor(kind, key, ttl);
      // A leader always extends its lease itself.
      const auto = kind === "election" || random.chance(config.autoExtend);
      const options = { timeout: random.chance(0.15) ? 0 : random.int(config.waitMs[0], config.waitMs[1]), retryDelay: random.int(1, 10) };
      if (auto && kind !== "election") options.autoExtend = { intervalMs: Math.floor(ttl / 3) };
      const permits = kind === "semaphore" && limit > 1 && weights && random.chance(config.weighted) ? random.int(2, limit) : 1;
      if (permits > 1) options.permits = permits;
      let abort;
      let abortAt = null;
      if (options.timeout > 0 && random.chance(config.aborts)) {
        const controller = new AbortController();
        abort = setTimeout(
          () => {
            abortAt = now();
            controller.abort();
          },
          random.int(0, options.timeout),
        );
        options.signal = controller.signal;
      }
      summary.attempts += 1;
      const attemptId = (attemptSeq += 1);
      const attempted = (record) => {
        attempts.push(record);
        emit(record);
      };
      const send = now();
      emit({
        t: "attempt",
        client: id,
        id: attemptId,
        kind,
        key,
        ttl,
        send,
        reply: null,
        outcome: "pending",
        abortAt: null,
        code: null,
        ...fairness(handle, options, places !== null),
      });
      let granted;
      try {
        granted = await handle.acquire(options);
      } catch (err) {
        clearTimeout(abort);
        if (err?.code === "ABORTED" && options.signal?.aborted) {
          // An aborted acquire is never a grant. Nothing is held: the next grants of the
          // key, and the holds left at the end of the run (run.mjs), show whether that is so.
          summary.aborted += 1;
          attempted({
            t: "attempt",
            client: id,
            id: attemptId,
            kind,
            key,
            ttl,
            send,
            reply: now(),
            outcome: "aborted",
            abortAt,
            code: errorCode(err),
            ...fairness(handle, options, places !== null),
          });
          continue;
        }
        countError("acquire", err);
        attempted({
          t: "attempt",
          client: id,
          id: attemptId,
          kind,
          key,
          ttl,
          send,
          reply: now(),
          outcome: "error",
          abortAt,
          code: errorCode(err),
          ...fairness(handle, options, places !== null),
        });
        await sleep(random.int(1, 5));
        continue;
      }
      clearTimeout(abort);
      const reply = now();
      if (!granted) {
        summary.refused += 1;
        // A campaign that gave up at its timeout may have been granted meanwhile (then
        // given back): an observer may see that term.
        if (kind === "election") attempted({ t: "attempt", client: id, id: attemptId, kind, key, ttl, send, reply, outcome: "timed-out", abortAt, code: null });
        // A fair waiter that gave up: the checker's fair-order check needs when its wait ended.
        else if (handle.fair)
          attempted({
            t: "attempt",
            client: id,
            id: attemptId,
            kind,
            key,
            ttl,
            send,
            reply,
            outcome: "refused",
            fair: true,
            timeout: options.timeout,
            abortAt,
            code: null,
          });
        else emit({ t: "attempt", client: id, id: attemptId, outcome: "refused" });
        continue;
      }
      summary.grants += 1;
      // The signal fired before the grant's answer came back: the store may have granted
      // first, so it is a grant (counted, for the record).
      if (abortAt !== null) summary.grantedAfterAbort += 1;
      const owner = ownerOf(handle);
      const hold = {
        t: "hold",
        client: id,
        kind,
        key,
        keys: kind === "multi" ? [...handle.keys] : undefined,
        limit: kind === "semaphore" ? limit : undefined,
        permits,
        ...fairness(handle, options, places !== null),
        ttl,
        drift: driftMs(ttl),
        auto,
        acquire: { send, reply, token: handle.fencingToken, tokens: kind === "multi" ? handle.fencingTokens : undefined, abortAt: abortAt ?? undefined },
        // The owner as the CLI's listing names it (its fingerprint): holds left on the store
        // at the end of the run are matched to the grants by it.
        owner: owner === null ? null : ownerFingerprint(owner),
        extends: [],
        release: null,
        signal: null,
        endAt: null,
        seq: holds.length,
      };
      holds.push(hold);
      emit(hold);
      // After the hold's line: a process killed between the two leaves the attempt "pending"
      // beside its grant, never neither.
      emit({ t: "attempt", client: id, id: attemptId, outcome: "granted" });
      const signal = handle.signal;
      if (signal.aborted) hold.signal = { at: now(), ...signalReason(signal), already: true };
      else
        signal.addEventListener(
          "abort",
          () => {
            hold.signal = { at: now(), ...signalReason(signal) };
            emit(hold);
          },
          { once: true },
        );
      if (config.onGrant) await config.onGrant(handle, hold);
      let lastSet = send;
      const extend = async () => {
        summary.extends += 1;
        const entry = { send: now(), reply: null, ok: false, code: null };
        hold.extends.push(entry);
        emit(hold);
        try {
          await handle.extend();
          entry.ok = true;
          lastSet = entry.send;
        } catch (err) {
          entry.code = errorCode(err);
        }
        entry.reply = now();
        emit(hold);
      };
      const pattern = long ? 0 : random();
      if (kind === "election") {
        // A leader leads for a while, asking `isLeader` every few ms (the check the guide
        // gives before a step that must not run once leadership is lost): it believes it
        // leads until the last answer that said yes (beliefUntil). The time is read before
        // the question: the answer is about the clock as it was when asked, and a process
        // stopped (SIGSTOP) just after a yes would otherwise record the yes as given when
        // it ran again, past a lease that ran out meanwhile.
        const until = now() + random.int(0, Math.min(ttl * 3, 400));
        hold.beliefUntil = hold.acquire.reply;
        for (let asked = now(); asked < until && handle.isLeader; asked = now()) {
          hold.beliefUntil = asked;
          await sleep(random.int(1, 5));
        }
      } else if (pattern < 0.45) {
        await sleep(random.int(0, 8));
      } else if (pattern < 0.75) {
        // One or two extends: early, close to the expiry, or just past it.
        for (let n = random.int(1, 2); n > 0; n--) {
          const target = random.chance(0.4) ? lastSet + random.int(0, ttl / 2) : lastSet + ttl + random.int(-25, 10);
          await sleep(Math.max(0, target - now()));
          await extend();
          if (random.chance(0.5)) await sleep(random.int(0, 5));
        }
      } else if (pattern < 0.85) {
        // Let it run out (an auto-extended hold lives on).
        await sleep(ttl + random.int(0, config.lingerMs));
      } else if (pattern < 0.92) {
        // Release about when the handle asks the store whether the hold is still there
        // (its due check, a quarter of the TTL, at most 100 ms, before its deadline): the
        // check may find a key the release already freed.
        const dueCheck = lastSet + ttl - hold.drift - Math.min(100, Math.floor(ttl / 4));
        await sleep(Math.max(0, dueCheck + random.int(-15, 5) - now()));
      } else {
        await sleep(random.int(10, ttl / 2));
      }
      // Recorded (streamed) as sent before it is sent: a process killed while its release
      // is under way may have freed the hold, and the checker must not take it for live.
      // Until the reply, `ok` is null (unknown).
      const release = { send: now(), reply: null, ok: null, code: null };
      hold.release = release;
      emit(hold);
      try {
        release.ok = await handle.release();
      } catch (err) {
        release.ok = false;
        release.code = errorCode(err);
        countError("release", err);
      }
      release.reply = now();
      emit(hold);
    }
  }

  try {
    await Promise.all(Array.from({ length: config.clients }, (_, i) => client(i)));
  } finally {
    stopStalls();
  }
  // Signals that are late still get to say so.
  await sleep(config.graceMs);
  const endAt = now();
  for (const hold of holds) hold.endAt = endAt;
  return { holds, summary, attempts, stalls, observations, places: places === null ? [] : [...places.values()].filter((p) => config.keys.includes(p.key)) };
}

async function main() {
  const config = { ...DEFAULTS, ...JSON.parse(process.argv[2] ?? process.env.LOCKSMITH_HISTORY_CONFIG ?? "{}") };
  const { ls } = await import("../support/target.mjs");
  // A store that is out of reach at start (a fault under way) is tried again for a while.
  let opened;
  for (const deadline = now() + 15_000; ; ) {
    try {
      opened = await openStore(ls, config.store);
      break;
    } catch (err) {
      if (err?.code !== "STORE_UNAVAILABLE" || now() > deadline) throw err;
      await sleep(100);
    }
  }
  const { store, close } = opened;
  // A test of the clock measurement: this process's clock off by `clockSkewMs[process]`,
  // measured (and so corrected) unless `syncClock: false`.
  skewMs = config.clockSkewMs?.[config.process] ?? 0;
  if (config.syncClock !== false) {
    const clock = await syncClock();
    // A process killed later leaves no summary: its clock's bound goes out now.
    if (config.stream && clock) (await import("node:fs")).writeSync(1, `${JSON.stringify({ t: "clock", process: config.process, clock })}\n`);
  }
  // A fair run's first acquires are held to arrival order from their first moment: the
  // process's path to the store (its connection, the code of a fair wait) is warmed first,
  // on a key of its own, so a cold path does not send one process's first attempt late.
  // (A store that fails a warming call, as the rows with late requests make it, is no matter.)
  if (config.fair) {
    const warm = `warm-${config.process}`;
    const handles = [
      ...(config.kinds.lock > 0 ? [new ls.Lock(warm, 1_000, store, FAIR)] : []),
      ...(config.kinds.semaphore > 0 ? [ls.semaphore(warm, 2, 1_000, store, FAIR)] : []),
    ];
    for (const handle of handles) {
      try {
        if (await handle.acquire({ timeout: 1_000 })) await handle.release();
      } catch {}
    }
  }
  // Processes of one run start together: at `startAt` on the run's clock.
  if (config.startAt) await sleep(Math.max(0, config.startAt - now()));
  const { holds, summary, attempts, stalls, observations, places } = await runClients(ls, store, config);
  // With the orphaned-hold check (config.keepHolds), close() leaves what is still held to
  // its TTL, as a process that keeps running would: the check then sees it.
  await close(config.keepHolds ? { keepHolds: true } : undefined);
  if (config.syncClock !== false) summary.clock = await syncClock({ check: true });
  // A streaming process wrote its stalls as they came.
  const lines = [...holds, ...attempts, ...places, ...(config.stream ? [] : [...stalls, ...observations])].map((r) => JSON.stringify(r));
  lines.push(JSON.stringify(summary));
  process.stdout.write(`${lines.join("\n")}\n`, () => process.exit(0));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    process.stderr.write(`history client failed: ${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
