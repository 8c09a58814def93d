// Durations: every TTL and time of the API is milliseconds (a number) or a string with
// its unit, parsed here, once, before it reaches a binding (which takes numbers only and
// checks their range).
import { invalid, typeName } from "./errors.mjs";
import { warnShortTtl } from "./warnings.mjs";

/** A number of milliseconds that is not parsed from a string (a store's own, `operationTimeoutMs`). */
export function checkNumber(name, value) {
  if (typeof value !== "number") throw invalid(`${name} must be a number of milliseconds; got ${typeName(value)}`);
}

const DURATION = /^(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)$/;
const DURATION_UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const DURATION_FORMS = 'a number of milliseconds or a string with a unit: "250ms", "30s", "5m" or "1h" (ms, s, m, h; fractions like "1.5s" too)';

/**
 * `value` (option `name`) in milliseconds: a number as it is, a duration string
 * converted. Anything else is an InvalidArgumentError naming the option and the forms.
 */
export function durationMs(name, value) {
  if (typeof value === "number") return value;
  const match = typeof value === "string" ? DURATION.exec(value) : null;
  if (match === null) {
    const got = typeof value === "string" ? JSON.stringify(value) : typeName(value);
    throw invalid(`${name} must be ${DURATION_FORMS}; got ${got}`);
  }
  const ms = Number(match[1]) * DURATION_UNIT_MS[match[2]];
  // "1.1s" is 1100 ms, not 1100.0000000000002: decimal input, whole milliseconds out.
  const whole = Math.round(ms);
  return Math.abs(ms - whole) < 1e-6 ? whole : ms;
}

export function optionalDurationMs(name, value) {
  return value === undefined ? undefined : durationMs(name, value);
}

/**
 * A lock's TTL (`lock()`, `new Lock()`, `semaphore()`, `readWriteLock()`, `extend()`) in
 * milliseconds. A bare number under a second is most likely seconds meant as
 * milliseconds (`lock(key, 30)`): it lets a second holder in after 30 ms, so the process
 * is warned once. A string states its unit and is taken as meant.
 */
export function ttlDurationMs(value) {
  if (typeof value === "number") {
    // (A fraction is refused next: no advice about a TTL that is not taken.)
    if (value < 1_000 && value > 0 && Number.isInteger(value)) warnShortTtl(value);
    return value;
  }
  return durationMs("ttlMs", value);
}

/**
 * The host's timers and clock as this module found them: in Node, node:timers and
 * perf_hooks, which a test runner's fake timers leave alone; elsewhere the globals. For
 * the pauses the API makes itself (an election's between terms, the test kit's
 * withFaults()), which fake timers must not stop.
 */
const node = typeof process === "object" && typeof process.getBuiltinModule === "function" ? process : undefined;
const timers = node?.getBuiltinModule("node:timers");
const performanceNow = node?.getBuiltinModule("node:perf_hooks")?.performance ?? globalThis.performance;
export const hostTimers = {
  setTimeout: timers?.setTimeout ?? globalThis.setTimeout.bind(globalThis),
  clearTimeout: timers?.clearTimeout ?? globalThis.clearTimeout.bind(globalThis),
  setInterval: timers?.setInterval ?? globalThis.setInterval.bind(globalThis),
  clearInterval: timers?.clearInterval ?? globalThis.clearInterval.bind(globalThis),
  now: performanceNow.now.bind(performanceNow),
};
