// Shutting a store down. Every shipped store's close() first calls releaseHolds(): the
// waits on the store end, the signal of every hold this process took through it aborts
// with a StoreClosedError, and the holds are released (within a bound, 2 s by default),
// so other processes need not wait out the TTLs after a deploy. One registry on
// globalThis, keyed by store, serves every copy of the package in the process (its ES
// modules, its CommonJS API and the CommonJS builds of its stores): the API adds a handle
// to it when the handle starts an acquire, and removes it when it releases or hands the
// hold to another process (serialize()).
import { InvalidArgumentError, StoreClosedError, StoreUnavailableError, checkOptionKeys, typeName } from "./errors.mjs";

const REGISTRY = Symbol.for("locksmith.holds");
/** How long close() tries to release the holds before it gives up. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 2_000;
const CLOSE_OPTIONS = ["keepHolds", "timeoutMs"];
/**
 * After the holds ended, how long close() watches for a clean-up still on its way to the
 * store: longer once a call settled meanwhile (an acquire whose release follows it).
 */
const QUIET_MS = 10;
const QUIET_AFTER_CALL_MS = 50;

const stores = () => (globalThis[REGISTRY] ??= new WeakMap());

/**
 * The record of `store`, made on first use:
 * - `holds`: an entry per handle that holds (or is taking) something through the store,
 *   `{ key, live(), end(reason) }` — `live()` whether it may still hold, `end(reason)`
 *   aborts its signal, waits for its acquire in flight and releases (a promise of
 *   whether nothing remains; rejected when the release failed);
 * - `calls`: the store calls on their way (a JS store's, through the API's bridge);
 * - `waits`: a function per wait on the store, each ending its wait at close();
 * - `closed`: the StoreClosedError once close() began; `signal` aborts with it then;
 * - `errors`: the error classes of the API copy that made the record (its handles'
 *   classes), for the errors close() makes.
 */
export function holdsOf(store, errors) {
  const registry = stores();
  let record = registry.get(store);
  if (record === undefined) {
    const controller = new AbortController();
    record = {
      holds: new Set(),
      calls: new Set(),
      waits: new Set(),
      closed: undefined,
      controller,
      signal: controller.signal,
      sweepAt: 64,
      errors: errors ?? { InvalidArgumentError, StoreClosedError, StoreUnavailableError },
    };
    // One listener ends every wait on the store (see `waits`).
    const waits = record.waits;
    controller.signal.addEventListener("abort", () => {
      for (const end of [...waits]) end();
    });
    registry.set(store, record);
  }
  return record;
}

/**
 * Adds `entry` to the record's holds. Entries leave when their hold is released; a hold
 * that just ran out (its TTL passed) leaves at the next sweep, run when the set has
 * doubled since the last one, so the set stays within twice the holds that are live.
 */
export function noteHold(record, entry) {
  const holds = record.holds;
  if (holds.has(entry)) return;
  // Swept before `entry` joins: its acquire has not started, so it would not look live.
  if (holds.size + 1 >= record.sweepAt) {
    for (const e of holds) if (!e.live()) holds.delete(e);
    record.sweepAt = Math.max(64, 2 * (holds.size + 1));
  }
  holds.add(entry);
}

/** Notes a store call on its way (a JS store's): close() waits for it before the connection closes. */
export function noteCall(record, pending) {
  const calls = record.calls;
  const settled = Promise.resolve(pending).then(
    () => calls.delete(settled),
    () => calls.delete(settled),
  );
  calls.add(settled);
  return pending;
}

/** close()'s options, checked: `{ keepHolds, timeoutMs }`. */
export function closeOptions(options, where, errors = { InvalidArgumentError }) {
  const refuse = (message) => new errors.InvalidArgumentError(`locksmith: ${message}`);
  if (options === undefined || options === null) return { keepHolds: false, timeoutMs: DEFAULT_CLOSE_TIMEOUT_MS };
  if (typeof options !== "object" || Array.isArray(options)) throw refuse(`${where} options must be an object; got ${typeName(options)}`);
  try {
    checkOptionKeys(options, CLOSE_OPTIONS, where);
  } catch (err) {
    throw refuse(err.message.replace(/^locksmith: /, ""));
  }
  const { keepHolds = false, timeoutMs = DEFAULT_CLOSE_TIMEOUT_MS } = options;
  if (typeof keepHolds !== "boolean") throw refuse(`keepHolds must be true or false; got ${typeName(keepHolds)}`);
  if (typeof timeoutMs !== "number" || !(timeoutMs >= 0) || timeoutMs === Infinity) {
    throw refuse(`timeoutMs must be a finite number of milliseconds, 0 or more; got ${typeof timeoutMs === "number" ? timeoutMs : typeName(timeoutMs)}`);
  }
  return { keepHolds, timeoutMs };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** What releaseHolds() answers when there is nothing to report. */
const DONE = Object.freeze({ remaining: Object.freeze([]), check() {} });

/**
 * The first step of a store's close(): checks `options`, then (once per store) ends the
 * waits on `store` at once (they reject with StoreClosedError), aborts every hold's
 * signal with a StoreClosedError, and releases the holds — unless `keepHolds` — waiting
 * at most `timeoutMs` in all, the store calls on their way included (an acquire's
 * clean-up release; `busy()`, if given, says whether the store still has calls of its
 * own on their way). The store then closes its connections and calls `check()` on the
 * answer, which throws a StoreUnavailableError (`holdMayRemain`, `keys`) when a hold
 * could not be released in time: it stays until its TTL passes.
 */
export function releaseHolds(store, options, name, busy) {
  const known = stores().get(store);
  let checked;
  try {
    checked = closeOptions(options, `${name}.close()`, known?.errors);
  } catch (err) {
    return Promise.reject(err);
  }
  const record = known ?? holdsOf(store);
  // A close() while an earlier one still releases waits for it (what it could not
  // release is the earlier call's to report).
  if (record.closed !== undefined) return (record.releasing ?? Promise.resolve()).then(() => DONE);
  const closed = new record.errors.StoreClosedError(`locksmith: the ${name} was closed`);
  record.closed = closed;
  record.controller.abort(closed);
  if (checked.keepHolds) return Promise.resolve(DONE);
  record.releasing = release(record, closed, checked.timeoutMs, name, busy);
  return record.releasing;
}

/** releaseHolds()'s releases, within `timeoutMs`. */
async function release(record, closed, timeoutMs, name, busy) {
  const errors = record.errors;
  const started = performance.now();
  const entries = [...record.holds];
  record.holds.clear();
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(resolve, timeoutMs, false);
  });
  // Whether each entry's hold is certainly gone (true), or its release failed (false).
  const outcomes = new Map();
  let failure;
  const ended = entries.map((entry) =>
    Promise.resolve()
      .then(() => entry.end(closed))
      .then(
        () => outcomes.set(entry, true),
        (err) => {
          failure ??= err;
          outcomes.set(entry, false);
        },
      ),
  );
  const inTime = ended.length === 0 || (await Promise.race([Promise.all(ended).then(() => true), timedOut]));
  let settled = inTime;
  let quietMs = QUIET_MS;
  // The store's own calls on their way count only where this process held or took
  // something through it (a lookup that waits on an unreachable server is no clean-up).
  const storeBusy = entries.length > 0 ? busy : undefined;
  // Clean-ups on their way (an acquire's release, sent once the acquire settles) reach
  // the store before its connection closes; a few quiet milliseconds tell that none is
  // left to start.
  while (settled) {
    const left = timeoutMs - (performance.now() - started);
    if (left <= 0) {
      settled = false;
    } else if (record.calls.size > 0) {
      await Promise.race([Promise.all([...record.calls]), timedOut]);
      quietMs = QUIET_AFTER_CALL_MS;
    } else {
      await Promise.race([sleep(Math.min(quietMs, left)), timedOut]);
      if (record.calls.size === 0 && !storeBusy?.()) break;
    }
  }
  clearTimeout(timer);
  // A key held through several handles is listed once.
  const keys = [...new Set(entries.filter((entry) => outcomes.get(entry) !== true).map((entry) => entry.key))];
  if (keys.length === 0 && settled) return DONE;
  const listed = `(${keys
    .slice(0, 5)
    .map((k) => JSON.stringify(k))
    .join(", ")}${keys.length > 5 ? ", …" : ""})`;
  const holds = keys.length === 1 ? "a hold" : `${keys.length} holds`;
  const what =
    keys.length === 0
      ? `a store call (an acquire's clean-up) was still on its way after ${timeoutMs} ms: a hold it took stays until its TTL passes`
      : inTime && failure !== undefined
        ? `${holds} ${listed} could not be released (${String(failure?.message ?? failure).replace(/^locksmith: /, "")}): ${keys.length > 1 ? "each stays" : "it stays"} until its TTL passes`
        : `${holds} ${listed} could not be released within ${timeoutMs} ms (close({ timeoutMs }) sets how long to try): ${keys.length > 1 ? "each stays" : "it stays"} until its TTL passes`;
  const err = new errors.StoreUnavailableError(`locksmith: the ${name} was closed, but ${what}`);
  err.holdMayRemain = true;
  err.keys = keys;
  if (failure !== undefined) err.cause = failure;
  return {
    remaining: keys,
    check() {
      throw err;
    },
  };
}
