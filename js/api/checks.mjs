// The argument checks every store shares, once: permit kinds, a hold's permits, whole
// milliseconds up to MAX_MS. With errors.mjs's `typeName`, `invalid` and
// `checkOptionKeys` (its one "did you mean" rule) and defaults.mjs's limits, they are
// what a store checks its arguments with. ES modules import this file; the CommonJS
// stores take the same functions from js/gen/api.cjs (the API re-exports them). Imports
// only errors.mjs and defaults.mjs.
import { MAX_MS } from "./defaults.mjs";
import { invalid, typeName } from "./errors.mjs";

/** A value as a message shows what it got: a number itself, anything else its type. */
const shown = (value) => (typeof value === "number" ? value : typeName(value));

/** The family of a permit kind: "semaphore", or "rw" for "read" and "write". */
export function checkKind(kind) {
  if (kind !== "semaphore" && kind !== "read" && kind !== "write") {
    throw invalid(`kind must be "semaphore", "read" or "write"; got ${typeof kind === "string" ? JSON.stringify(kind) : typeName(kind)}`);
  }
  return kind === "semaphore" ? "semaphore" : "rw";
}

/**
 * A hold's permits: a semaphore's `permits` of its `limit` (undefined: 1); a read or
 * write hold is 1, and asking it for more is refused (the core's messages).
 */
export function checkPermits(kind, limit, permits) {
  if (permits === undefined) return 1;
  const most = kind === "semaphore" ? limit : 1;
  if (typeof permits !== "number" || !Number.isInteger(permits) || permits < 1 || !(permits <= most)) {
    throw invalid(
      kind === "semaphore"
        ? `permits must be a whole number from 1 to the semaphore's limit (${limit}); got ${shown(permits)}`
        : `permits is a semaphore's option; a ${kind} handle takes one hold`,
    );
  }
  return permits;
}

/** `value` (named `name`: "ttlMs", "operationTimeoutMs") if it is a whole number of milliseconds from 1 to MAX_MS; else refused. */
export function checkMs(name, value) {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_MS) {
    throw invalid(`${name} must be a whole number of milliseconds from 1 to ${MAX_MS}; got ${shown(value)}`);
  }
  return value;
}

/** A proclaim's sequence number (an election leader's value, `proclaim(key, owner, value, seq)`): a positive safe integer. */
export function checkSeq(seq) {
  if (!(Number.isSafeInteger(seq) && seq > 0)) throw invalid(`seq must be a positive safe integer; got ${shown(seq)}`);
}
