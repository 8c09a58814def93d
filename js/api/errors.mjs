// locksmith's errors, its once-per-process warnings and the small checks every module
// shares (the API, the Redis driver, the stores). Imports nothing: the modules below the
// API use it without importing the API.

// Each error class answers `instanceof` by a brand (see the loop below the classes)
// rather than by its prototype chain, as undici's errors do: the package has more than
// one copy of these classes (its ES modules, its CommonJS build, a bundle, a test
// runner's realm per file), and an error from any copy is an instance of the same class
// of every other. The hierarchy holds: a `StoreClosedError` is a `LockError` and not a
// `StoreUnavailableError`. A class of the user's that extends one of these answers by
// its prototype chain, as any class does.
const BRAND = Symbol.for("locksmith.brand");

/** Base class of every error locksmith throws. `code` is stable. */
export class LockError extends Error {
  constructor(message, code, options) {
    super(message, options);
    this.code = code;
  }
}

// Inherited by every subclass; `this` is the class asked. A class's own prototype carries
// its brand as an own property and is not an instance of it, as with a plain class.
Object.defineProperty(LockError, Symbol.hasInstance, {
  value: function hasBrand(value) {
    if (!Object.hasOwn(this, BRAND)) return Function.prototype[Symbol.hasInstance].call(this, value);
    if ((typeof value !== "object" && typeof value !== "function") || value === null) return false;
    const brand = this[BRAND];
    return value[brand] === true && !Object.hasOwn(value, brand);
  },
});

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
    /** From an acquire: its last attempt got no answer and may still be granted (see the guide). */
    this.holdMayRemain = false;
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
 * A lock was asked of the default store while `LOCKSMITH_REQUIRE_STORE=1` says every lock
 * names its store: `setLockStore(store)` was not called, and no store was passed.
 */
export class StoreNotSetError extends LockError {
  constructor(message) {
    super(message, "STORE_NOT_SET");
  }
}

/**
 * A waiting acquire ended by its `signal` (an `AbortSignal` in the options) that gave no
 * reason of its own. Named "AbortError", as the platform's aborts are.
 */
export class AbortError extends LockError {
  constructor(message, options) {
    super(message, "ABORTED", options);
    /** An attempt was on its way when the wait was aborted: it is released once it settles. */
    this.holdMayRemain = false;
  }
}

// Names written out, not read from `cls.name`: a bundler that meets two copies of this
// module renames the second copy's classes (`LockError2`), and a minifier renames both.
for (const [cls, name] of [
  [LockError, "LockError"],
  [AbortError, "AbortError"],
  [LockNotHeldError, "LockNotHeldError"],
  [InvalidArgumentError, "InvalidArgumentError"],
  [InvalidSerializedLockError, "InvalidSerializedLockError"],
  [StoreUnavailableError, "StoreUnavailableError"],
  [StoreContractViolationError, "StoreContractViolationError"],
  [LockStoreError, "LockStoreError"],
  [StoreClosedError, "StoreClosedError"],
  [StoreNotSetError, "StoreNotSetError"],
  [UnsupportedError, "UnsupportedError"],
]) {
  Object.defineProperty(cls.prototype, "name", { value: name, writable: true, configurable: true });
  // The brand: a registered symbol per class, set on its prototype, so an instance carries
  // the brands of its class and of every class above it.
  const brand = Symbol.for(`locksmith.${name}`);
  Object.defineProperty(cls, BRAND, { value: brand });
  Object.defineProperty(cls.prototype, brand, { value: true });
}

const BY_CODE = {
  INVALID_ARGUMENT: InvalidArgumentError,
  INVALID_SERIALIZED_LOCK: InvalidSerializedLockError,
  STORE_UNAVAILABLE: StoreUnavailableError,
  STORE_CONTRACT_VIOLATION: StoreContractViolationError,
  STORE_ERROR: LockStoreError,
  STORE_CLOSED: StoreClosedError,
  STORE_NOT_SET: StoreNotSetError,
  UNSUPPORTED: UnsupportedError,
  ABORTED: AbortError,
};

// Native errors arrive as `CODE locksmith: message`.
// A `+` after the code: an attempt was still unanswered, so a hold may remain until it
// settles and is released (`holdMayRemain`).
const NATIVE_ERROR = /^([A-Z][A-Z_]+)(\+?) (locksmith: [\s\S]*)$/;

/** Turns whatever a binding threw into the matching `LockError` subclass. */
function toLockError(err, key) {
  if (err instanceof LockError) return err;
  const match = NATIVE_ERROR.exec(err?.message ?? "");
  if (match) {
    const [, code, mayRemain, message] = match;
    if (code === "LOCK_NOT_HELD") return new LockNotHeldError(message, key);
    const Cls = BY_CODE[code];
    const error = Cls ? new Cls(message) : new LockError(message, code);
    if (mayRemain) error.holdMayRemain = true;
    return error;
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

/**
 * A handle that is not fair, on `key` of `kind` ("lock", "semaphore") that fair handles
 * hold or queue for (the JS stores with fair queues; core's not_fair_on_fair_key words it alike).
 */
const fairKey = (kind, key) =>
  invalid(`${kind} ${JSON.stringify(key)} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on \`fair\``);

/** A fair handle on `key` of `kind` that a handle that is not fair holds (core's fair_on_unfair_key words it alike). */
const unfairHolder = (kind, key) =>
  invalid(`${kind} ${JSON.stringify(key)} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on \`fair\``);

/** A semaphore handle whose limit is not the one its holders use (the JS stores with semaphores). */
const limitMismatch = (key, held, limit) =>
  invalid(`semaphore ${JSON.stringify(key)} is held with limit ${held}; this handle asks for ${limit}: every handle of a semaphore must use the same limit`);

function typeName(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : typeof value;
}

function checkString(name, value) {
  if (typeof value !== "string") throw invalid(`${name} must be a string; got ${typeName(value)}`);
  // The bindings would carry a lone surrogate as U+FFFD: two keys differing only there
  // would be one lock.
  if (!wellFormed(value)) throw invalid(`${name} has a lone surrogate (\\ud800-\\udfff without its pair): it cannot be carried as it is`);
}

// A lone surrogate is a code point of category Cs to a `u` regex (a pair is one astral
// code point): for the runtimes without String.prototype.isWellFormed.
const LONE_SURROGATE = /\p{Cs}/u;
/** Whether `text` has no lone surrogate (so the bindings carry it as it is). */
function wellFormed(text) {
  return typeof text.isWellFormed === "function" ? text.isWellFormed() : !LONE_SURROGATE.test(text);
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
 * must not silently mean its default. `unlisted` keys pass without being named among the
 * options (the caller refuses them in its own words).
 */
function checkOptionKeys(options, known, where, unlisted) {
  // An AbortSignal where the options go (`run(fn, signal)`) has no keys of its own: it
  // would pass as no options at all, and its abort would stop nothing.
  if (typeof options.aborted === "boolean" && typeof options.addEventListener === "function") {
    throw invalid(`${where} takes its options as an object, and got an AbortSignal: write { signal }`);
  }
  for (const name of Object.keys(options)) {
    if (known.includes(name) || unlisted?.includes(name)) continue;
    const near = closest(name, known);
    const hint = near ? `did you mean \`${near}\`? ` : "";
    throw invalid(`unknown option \`${name}\` for ${where}; ${hint}the options are ${known.join(", ")}`);
  }
}

/**
 * Refuses arguments past the `max` that `signature` (e.g. "lock(key, ttlMs?, store?)")
 * takes: an argument the API does not take (options in the wrong place, or an option of
 * another version) must not be dropped without a word.
 */
function checkArity(args, max, signature, hint) {
  if (args.length <= max) return;
  const extra = Array.prototype.slice.call(args, max);
  // Trailing undefineds are what a caller passing through optional arguments gives.
  if (extra.every((a) => a === undefined)) return;
  const shown = extra.map(showArgument).join(", ");
  throw invalid(
    `${signature} takes at most ${max} argument${max === 1 ? "" : "s"}; got ${args.length} (the extra ${extra.length === 1 ? "one" : "ones"}: ${shown})${hint ? `: ${hint}` : ""}`,
  );
}

/**
 * A store's `connect(target, options)` as one options object: a URL first (or, with
 * `lists`, a list of URLs) and its options second, or the options object alone. `key`
 * names the target inside the options (`url`, `endpoints`), `where` the method. A
 * second argument after an options object, or a target given twice, is refused: neither
 * may be silently dropped.
 */
function connectArguments(args, key, where, { lists = false } = {}) {
  checkArity(args, 2, where.replace("()", `(${key}, options?)`));
  const [target, options] = args;
  if (!(typeof target === "string" || (lists && Array.isArray(target)))) {
    if (options !== undefined) throw invalid(`${where} takes options as its second argument only after a URL; with an options object first, put them in it`);
    return target;
  }
  if (options === undefined) return { [key]: target };
  if (options === null || typeof options !== "object" || Array.isArray(options))
    throw invalid(`${where}'s options must be an object; got ${typeName(options)}`);
  if (options[key] !== undefined) throw invalid(`${where} was given ${key} twice: as its first argument and in its options`);
  return { ...options, [key]: target };
}

/** An argument as a message shows it: a short value itself, else its type. */
function showArgument(value) {
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value);
  if (typeof value === "string") return value.length <= 40 ? JSON.stringify(value) : "a string";
  if (typeof value === "object" && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype) {
    const keys = Object.keys(value);
    return keys.length === 0 ? "{}" : `{ ${keys.slice(0, 4).join(", ")}${keys.length > 4 ? ", …" : ""} }`;
  }
  return typeName(value);
}

// ---------------------------------------------------------------------------------
// Process warnings, once per process (across copies of this module: the ESM and CJS
// builds keep one flag on globalThis). Node's --disable-warning=<code> silences each;
// LOCKSMITH_WARNINGS=0 all of them. Where there is no `process` (workerd, browsers),
// nothing.

const WARNED = Symbol.for("locksmith.warned");

/** An environment variable, or undefined where it cannot be read (Deno without --allow-env). */
function envVar(name) {
  try {
    return globalThis.process?.env?.[name];
  } catch {
    return undefined;
  }
}

function warnOnce(code, message) {
  const proc = globalThis.process;
  if (typeof proc?.emitWarning !== "function") return;
  const warned = (globalThis[WARNED] ??= new Set());
  if (warned.has(code)) return;
  warned.add(code);
  if (envVar("LOCKSMITH_WARNINGS") === "0") return;
  proc.emitWarning(message, { code });
}

// ---------------------------------------------------------------------------------
// The default store next to a shared one. Once a store other processes share exists in
// this process (a Redis, PostgreSQL, MySQL, etcd, Upstash or file store, or a store of the
// user's own: anything but a MemoryLockStore), a lock taken on the default store — this
// process's own memory — is almost always a forgotten setLockStore(): warned once, in
// whichever order the two appear. One registry on globalThis serves every copy of the
// package in the process (its ES modules and its CommonJS bundle each have their own
// default store).

const STORES = Symbol.for("locksmith.stores");

const storeRegistry = () => (globalThis[STORES] ??= { shared: undefined, defaultUsed: false });

/** A store's name in the warning: its class, or "a store of your own" for a plain object. */
function storeLabel(store) {
  const name = store?.constructor?.name;
  return typeof name === "string" && name !== "" && name !== "Object" ? name : "a store of your own";
}

/** Every store that other processes share calls this when it is made (or first used, for a user's own). */
function noteSharedStore(store) {
  const registry = storeRegistry();
  if (registry.shared !== undefined) return;
  registry.shared = storeLabel(store);
  if (registry.defaultUsed) warnDefaultStore(registry.shared);
}

/** The API calls this when it makes its default store for a lock that named none. */
function noteDefaultStore() {
  const registry = storeRegistry();
  registry.defaultUsed = true;
  if (registry.shared !== undefined) warnDefaultStore(registry.shared);
}

function warnDefaultStore(shared) {
  warnOnce(
    "LOCKSMITH_DEFAULT_STORE",
    `locksmith: the default store (this process's own memory) was used, by a lock made without a store or by getLockStore(), while this process has a shared store (${shared}): ` +
      "other processes do not see these locks, so each can hold the same key at once. " +
      "Call setLockStore(store) with the shared store before the first lock, or pass it: lock(key, ttlMs, store). " +
      "For memory locks on purpose, setLockStore(new MemoryLockStore()) says so; LOCKSMITH_REQUIRE_STORE=1 makes a lock without a store an error.",
  );
}

/**
 * Whether `LOCKSMITH_REQUIRE_STORE` asks that every lock name its store (1, true, yes,
 * on; 0, false, no, off or unset do not). Any other value is taken as asking, with a
 * warning: a setting meant to protect production fails closed, not silently open.
 */
function storeRequired() {
  const value = envVar("LOCKSMITH_REQUIRE_STORE")?.trim().toLowerCase();
  if (value === undefined || ["", "0", "false", "no", "off"].includes(value)) return false;
  if (!["1", "true", "yes", "on"].includes(value)) {
    warnOnce(
      "LOCKSMITH_REQUIRE_STORE",
      `locksmith: LOCKSMITH_REQUIRE_STORE=${JSON.stringify(value)} is not 1 or 0; taken as 1 (every lock must name its store)`,
    );
  }
  return true;
}

export {
  toLockError,
  checkString,
  wellFormed,
  typeName,
  invalid,
  fairKey,
  unfairHolder,
  limitMismatch,
  checkOptionKeys,
  connectArguments,
  closest,
  checkArity,
  envVar,
  warnOnce,
  noteSharedStore,
  noteDefaultStore,
  storeRequired,
};
