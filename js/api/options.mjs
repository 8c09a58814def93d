// The options of a lock's calls (acquire(), run(), the immediate variants, lockAll()'s
// keys), checked before they reach the native handle.
import { checkArity, checkOptionKeys, checkString, invalid, typeName } from "./errors.mjs";
import { optionalDurationMs } from "./durations.mjs";

const ACQUIRE_OPTIONS = ["timeout", "retryDelay", "autoExtend", "signal", "permits"];
/** A handle other than a semaphore's: `permits` is refused in words of its own, not listed. */
const LOCK_ACQUIRE_OPTIONS = ACQUIRE_OPTIONS.filter((o) => o !== "permits");
const PERMITS = ["permits"];
/** Where acquire options go, for a handle maker given more arguments than it takes. */
export const OPTIONS_GO = "acquire options ({ timeout, signal, … }) go to acquire() or run(): lock(key, ttlMs, store).run(fn, { timeout })";
const IMMEDIATE_OPTIONS = ["signal", "permits"];

const HANDLE_OPTIONS = ["fair"];

/**
 * A handle maker's options (`lock(key, ttlMs, store, { fair })`, and `semaphore()`'s and
 * `new Lock()`'s last argument), checked: whether the handle is fair. An acquire option
 * there is refused with where it goes.
 */
export function handleOptions(options, where) {
  if (options === undefined) return false;
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw invalid(`${where} takes its handle options as an object ({ fair }); got ${typeName(options)}`);
  }
  const misplaced = Object.keys(options).find((name) => ACQUIRE_OPTIONS.includes(name));
  if (misplaced !== undefined) throw invalid(`\`${misplaced}\` is not a handle option of ${where}: ${OPTIONS_GO}`);
  checkOptionKeys(options, HANDLE_OPTIONS, where);
  if (options.fair !== undefined && typeof options.fair !== "boolean") throw invalid(`fair must be true or false; got ${typeName(options.fair)}`);
  return options.fair === true;
}

/** `checkArity` for a method that answers with a promise: its refusal as a rejected promise, or undefined. */
export function arityRejection(args, max, signature) {
  try {
    checkArity(args, max, signature);
  } catch (err) {
    return Promise.reject(err);
  }
  return undefined;
}

/** `signal`: an AbortSignal, or undefined (for undefined or null). */
export function parseSignal(value) {
  if (value === undefined || value === null) return undefined;
  if (
    typeof value !== "object" ||
    typeof value.aborted !== "boolean" ||
    typeof value.addEventListener !== "function" ||
    typeof value.removeEventListener !== "function"
  ) {
    throw invalid(`signal must be an AbortSignal (from an AbortController, or AbortSignal.timeout()); got ${typeName(value)}`);
  }
  return value;
}

/** Immediate variants' options: `{ signal, permits }` (`permits` listed for a semaphore only), checked. */
export function immediateOptions(options, where, semaphore) {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== "object" || Array.isArray(options)) throw invalid(`${where} options must be an object; got ${typeName(options)}`);
  if (semaphore) checkOptionKeys(options, IMMEDIATE_OPTIONS, where);
  else checkOptionKeys(options, ["signal"], where, PERMITS);
  if (options.signal === undefined && options.permits === undefined) return undefined;
  return { timeout: 0, signal: options.signal, permits: options.permits };
}

/** lockAll()'s keys, checked, one per line for the native handle (core checks the rest). */
export function multiKeys(keys) {
  if (!Array.isArray(keys)) throw invalid(`lockAll() needs an array of keys; got ${typeName(keys)}`);
  if (keys.length === 0) throw invalid("lockAll() takes 1 to 64 keys; got 0");
  for (const key of keys) {
    checkString("key", key);
    // The separator below: core refuses control characters in a key all the same.
    if (key.includes("\n")) throw invalid("key must not contain control characters; found U+000A");
  }
  return keys.join("\n");
}

/** `permits`: a whole number of at least 1 (the handle checks its kind and limit), or undefined for 1. */
function parsePermits(value) {
  if (value === undefined) return 1;
  if (typeof value !== "number") throw invalid(`permits must be a whole number of permits; got ${typeName(value)}`);
  if (!Number.isInteger(value) || value < 1) throw invalid(`permits must be a whole number from 1 to the semaphore's limit; got ${value}`);
  return value;
}
const AUTO_EXTEND_OPTIONS = ["intervalMs", "maxHoldMs"];

/** `autoExtend`: `true`, or `{ intervalMs, maxHoldMs }`; `undefined` when off. */
function parseAutoExtend(value) {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalid(`autoExtend must be true, false or { intervalMs, maxHoldMs }; got ${typeName(value)}`);
  }
  checkOptionKeys(value, AUTO_EXTEND_OPTIONS, "autoExtend");
  return {
    intervalMs: optionalDurationMs("autoExtend.intervalMs", value.intervalMs),
    maxHoldMs: optionalDurationMs("autoExtend.maxHoldMs", value.maxHoldMs),
  };
}

/** What an acquire without options takes: one permit, no wait. */
const NO_OPTIONS = Object.freeze({ timeout: undefined, retryDelay: undefined, autoExtend: undefined, signal: undefined, permits: 1 });

/**
 * acquire()'s and run()'s options for a handle of `kind` (`lock`, `semaphore`, `read`,
 * `write`, `multi`), checked: `{ timeout, retryDelay, autoExtend, signal, permits }`.
 */
export function acquireOptions(options, kind) {
  if (options === undefined || options === null) return NO_OPTIONS;
  if (typeof options !== "object" || Array.isArray(options)) {
    // A bare duration where the options go (`run(fn, 5000)`) was meant as a timeout.
    const meant = typeof options === "number" || typeof options === "string" ? JSON.stringify(options) : undefined;
    throw invalid(
      `acquire options must be an object; got ${typeName(options)}${meant === undefined ? "" : ` (${meant}): to wait, write { timeout: ${meant} }`}`,
    );
  }
  if (kind === "semaphore") checkOptionKeys(options, ACQUIRE_OPTIONS, "acquire() and run()");
  else checkOptionKeys(options, LOCK_ACQUIRE_OPTIONS, "acquire() and run()", PERMITS);
  const timeout = optionalDurationMs("timeout", options.timeout);
  const retryDelay = optionalDurationMs("retryDelay", options.retryDelay);
  const autoExtend = parseAutoExtend(options.autoExtend);
  const signal = parseSignal(options.signal);
  if (options.permits !== undefined && kind !== "semaphore") {
    // Any value, 1 too: the types give `permits` to semaphores only.
    // Core's words for the same refusal (validate::permits, Lock::set_permits).
    const takes = kind === "multi" ? "a lockAll() handle takes each of its keys once" : `a ${kind} handle takes one hold`;
    throw invalid(`permits is a semaphore's option; ${takes}`);
  }
  return { timeout, retryDelay, autoExtend, signal, permits: parsePermits(options.permits) };
}
