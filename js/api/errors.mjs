// locksmith's errors and the small checks every module shares (the API, the Redis
// driver, the stores). Imports nothing: the modules below the API use it without
// importing the API.

/** Base class of every error locksmith throws. `code` is stable. */
export class LockError extends Error {
  constructor(message, code, options) {
    super(message, options);
    this.code = code;
  }
}

/** `extend()` (or `serialize()`) on a lock that is not held: lost, released or never taken. */
export class LockNotHeldError extends LockError {
  constructor(message, key) {
    super(message, "LOCK_NOT_HELD");
    this.key = key;
  }
}

/** An argument failed validation. */
export class InvalidArgumentError extends LockError {
  constructor(message) {
    super(message, "INVALID_ARGUMENT");
  }
}

/** `restoreLock()` was given something other than `serialize()`'s output. */
export class InvalidSerializedLockError extends LockError {
  constructor(message) {
    super(message, "INVALID_SERIALIZED_LOCK");
  }
}

/** The store could not be reached, failed, or did not answer in time. */
export class StoreUnavailableError extends LockError {
  constructor(message) {
    super(message, "STORE_UNAVAILABLE");
  }
}

/** The store answered something the `LockStore` contract does not allow. */
export class StoreContractViolationError extends LockError {
  constructor(message) {
    super(message, "STORE_CONTRACT_VIOLATION");
  }
}

/** The store was reached and refused the operation. */
export class LockStoreError extends LockError {
  constructor(message) {
    super(message, "STORE_ERROR");
  }
}

/** The store was closed. */
export class StoreClosedError extends LockError {
  constructor(message) {
    super(message, "STORE_CLOSED");
  }
}

/** The store cannot do this (a semaphore or read-write lock on a store without them). */
export class UnsupportedError extends LockError {
  constructor(message) {
    super(message, "UNSUPPORTED");
  }
}

/**
 * A waiting acquire ended by its `signal` (an `AbortSignal` in the options) that gave no
 * reason of its own. Named "AbortError", as the platform's aborts are.
 */
export class AbortError extends LockError {
  constructor(message, options) {
    super(message, "ABORTED", options);
  }
}

for (const cls of [
  LockError,
  AbortError,
  LockNotHeldError,
  InvalidArgumentError,
  InvalidSerializedLockError,
  StoreUnavailableError,
  StoreContractViolationError,
  LockStoreError,
  StoreClosedError,
  UnsupportedError,
]) {
  Object.defineProperty(cls.prototype, "name", { value: cls.name, writable: true, configurable: true });
}

const BY_CODE = {
  INVALID_ARGUMENT: InvalidArgumentError,
  INVALID_SERIALIZED_LOCK: InvalidSerializedLockError,
  STORE_UNAVAILABLE: StoreUnavailableError,
  STORE_CONTRACT_VIOLATION: StoreContractViolationError,
  STORE_ERROR: LockStoreError,
  STORE_CLOSED: StoreClosedError,
  UNSUPPORTED: UnsupportedError,
  ABORTED: AbortError,
};

// Native errors arrive as `CODE locksmith: message`.
const NATIVE_ERROR = /^([A-Z][A-Z_]+) (locksmith: [\s\S]*)$/;

/** Turns whatever a binding threw into the matching `LockError` subclass. */
function toLockError(err, key) {
  if (err instanceof LockError) return err;
  const match = NATIVE_ERROR.exec(err?.message ?? "");
  if (match) {
    const [, code, message] = match;
    if (code === "LOCK_NOT_HELD") return new LockNotHeldError(message, key);
    const Cls = BY_CODE[code];
    return Cls ? new Cls(message) : new LockError(message, code);
  }
  // Node-API's own conversion errors: a value of the wrong type reached the addon.
  if (typeof err?.code === "string" && /Expected$|^InvalidArg$/.test(err.code)) {
    return new InvalidArgumentError(`locksmith: invalid argument: ${err.message}`);
  }
  return new LockError(`locksmith: unexpected failure: ${err?.message ?? String(err)}`, "INTERNAL_ERROR", {
    cause: err,
  });
}

const invalid = (message) => new InvalidArgumentError(`locksmith: ${message}`);

function typeName(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : typeof value;
}

function checkString(name, value) {
  if (typeof value !== "string") throw invalid(`${name} must be a string; got ${typeName(value)}`);
}

/** Edit distance between two short strings, for "did you mean" hints. */
function distance(a, b) {
  let row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

/** The known option `name` was probably meant to be, if any is close. */
function closest(name, known) {
  const lower = name.toLowerCase();
  let best;
  let bestScore = Infinity;
  for (const candidate of known) {
    const k = candidate.toLowerCase();
    // A known name that contains the unknown one (prefix -> keyPrefix) counts as close.
    const score = k.includes(lower) && lower.length >= 3 ? 1 : distance(lower, k);
    if (score < bestScore) {
      best = candidate;
      bestScore = score;
    }
  }
  return bestScore <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined;
}

/**
 * Refuses keys of an options object that `where` does not know: a misspelt option
 * must not silently mean its default.
 */
function checkOptionKeys(options, known, where) {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const near = closest(name, known);
    const hint = near ? `did you mean \`${near}\`? ` : "";
    throw invalid(`unknown option \`${name}\` for ${where}; ${hint}the options are ${known.join(", ")}`);
  }
}

export { toLockError, checkString, typeName, invalid, checkOptionKeys };
