// The test kit's stores: TestStore (the memory store's semantics on a TestClock, with
// controls that end holds, hand keys to others and inject faults) and withFaults() (the
// same faults over a real store, on real time).
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, NATIVE_CLOCK, STORE_NAME, TEST_CLOCK } from "../api/symbols.mjs";
import { LockError, UnsupportedError, checkArity, checkOptionKeys, checkString, invalid, toLockError, typeName } from "../api/errors.mjs";
import { releaseHolds } from "../api/shutdown.mjs";
import { NATIVE, checkStore, holderOf } from "../api/stores.mjs";
import { hostTimers, ttlDurationMs } from "../api/durations.mjs";
import { checkKind, checkMs, checkPermits, checkSeq } from "../api/checks.mjs";
import { ELECTION_KEY_PREFIX, MAX_LIMIT, limitMessage } from "../api/defaults.mjs";
import { FOLLOW, KEEP_BUSY, TestClock, firstBinding } from "./clock.mjs";
import { Faults, callName } from "./faults.mjs";

/** The calls that take a TTL. */
const TTL_CALLS = new Set(["acquire", "extend", "acquirePermit", "extendPermit", "acquireFair", "acquireFairOnce"]);

/**
 * The keys a store granted through the kit, with their hold kinds: what `held()` asks the
 * store about at the end of a test.
 */
class Granted {
  #seen = new Map();

  /** Notes `answer` to acquire call `op` (a grant is anything but `false`). */
  note(op, args, answer) {
    if (answer === false || answer === null || answer === undefined) return;
    if (op === "acquire") this.#add(args[0], "lock");
    else if (op === "acquireAll") for (const key of args[0]) this.#add(key, "lock");
    else if (op === "acquirePermit") this.#add(args[0], args[3], args[4]);
    // A fair lock is a plain lock's hold; a fair semaphore's, a semaphore's.
    else if (op.startsWith("acquireFair")) this.#add(args[0], args[3] === "lock" ? "lock" : "semaphore", args[4]);
  }

  #add(key, kind, limit) {
    this.#seen.set(`${kind}\u0000${key}`, { key, kind, limit });
  }

  /** The noted keys still held, as `{ key, kind }`, by `isHeld(key, kind, limit)`. */
  async held(isHeld) {
    const held = [];
    for (const { key, kind, limit } of this.#seen.values()) {
      if (await isHeld(key, kind, limit)) held.push({ key, kind });
    }
    return held;
  }
}

/** `assertNothingHeld()`: throws when `held` is not empty. */
function assertNone(held, where) {
  if (held.length === 0) return;
  // An election's hold by the election's name.
  const shown = held
    .map(({ key, kind }) =>
      key.startsWith(ELECTION_KEY_PREFIX) ? `election ${JSON.stringify(key.slice(ELECTION_KEY_PREFIX.length))}` : `${JSON.stringify(key)} (${kind})`,
    )
    .join(", ");
  const error = new LockError(`locksmith: ${held.length} hold${held.length === 1 ? " is" : "s are"} still held on ${where}: ${shown}`, "HOLDS_REMAIN");
  error.held = held;
  throw error;
}

/** A key as lock() takes one: a string that is not empty. */
function checkKey(key) {
  checkString("key", key);
  if (key === "") throw invalid("key must not be empty");
}

function optionsObject(options, where) {
  if (options === undefined) return {};
  if (options === null || typeof options !== "object") throw invalid(`${where} takes an options object; got ${typeName(options)}`);
  return options;
}

/**
 * A lock store for tests: the memory store's semantics (locks, semaphores, read-write
 * locks, lockAll(), fencing tokens) on a TestClock, which also times every lock made over
 * the store. Controls end holds, give keys to other owners and inject the faults of a
 * store across a network.
 */
export class TestStore {
  #clock;
  #faults;
  #memory;
  #granted = new Granted();
  /** onRelease listeners by key: `{ kind, listener }`. */
  #listeners = new Map();
  /** A semaphore hold may take several permits (the JS store contract's `permitWeights`). */
  permitWeights = true;
  /** How long a lock waits for one of this store's calls (a lost answer) before giving up, on the clock. */
  operationTimeoutMs;

  constructor(options = undefined) {
    checkArity(arguments, 1, "new TestStore(options?)");
    const given = optionsObject(options, "new TestStore()");
    checkOptionKeys(given, ["clock", "operationTimeoutMs"], "new TestStore()");
    const { clock = new TestClock(), operationTimeoutMs = 10_000 } = given;
    // By its native side, not its class: the ES module's and the CommonJS copy's clocks mix.
    if (typeof clock?.[NATIVE_CLOCK] !== "function") throw invalid(`new TestStore()'s clock must be a TestClock; got ${typeName(clock)}`);
    if (typeof operationTimeoutMs !== "number" || !(operationTimeoutMs > 0) || !Number.isFinite(operationTimeoutMs)) {
      throw invalid(
        `operationTimeoutMs must be a number of milliseconds above 0; got ${typeof operationTimeoutMs === "number" ? operationTimeoutMs : typeName(operationTimeoutMs)}`,
      );
    }
    this.#clock = clock;
    this.operationTimeoutMs = operationTimeoutMs;
    this.#faults = new Faults({ now: () => clock.now(), sleep: (ms) => clock.sleep(ms), lostAfterMs: () => this.operationTimeoutMs });
    // Made now, so that the clock waits for it (the WebAssembly build loads a module).
    const binding = firstBinding();
    this.#memory = clock[KEEP_BUSY](
      Promise.resolve(binding.testMemory(clock[NATIVE_CLOCK](binding), clock.now(), clock.unixTimeMs() - clock.now())).then((memory) => {
        if (typeof memory.set === "function") clock[FOLLOW](memory);
        return memory;
      }),
    );
    this.#memory.catch(() => {});
  }

  /** The clock of this store and of every lock over it. */
  get clock() {
    return this.#clock;
  }

  get [STORE_NAME]() {
    return "test";
  }

  get [TEST_CLOCK]() {
    return this.#clock;
  }

  /** One call on the memory store, through the armed faults. */
  #call(op, args, key, owner, ttlMs, kind, limit, permits) {
    checkString("key", key);
    if (owner !== undefined) checkString("owner", owner);
    // The arguments the shipped stores check, checked alike (checks.mjs).
    if (TTL_CALLS.has(op)) checkMs("ttlMs", ttlMs);
    if (op.startsWith("acquireFair")) {
      if (kind !== "lock" && kind !== "semaphore") {
        throw invalid(`kind must be "lock" or "semaphore"; got ${typeof kind === "string" ? JSON.stringify(kind) : typeName(kind)}`);
      }
      if (kind === "semaphore" && (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)) {
        throw invalid(limitMessage(typeof limit === "number" ? limit : typeName(limit)));
      }
      if (kind === "semaphore") checkPermits(kind, limit, permits);
    } else if (kind !== undefined || op.endsWith("Permit") || op.startsWith("countPermits") || op === "permitRemainingTime") {
      checkKind(kind);
      if (op === "acquirePermit") {
        if (kind === "semaphore" && (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)) {
          throw invalid(limitMessage(typeof limit === "number" ? limit : typeName(limit)));
        }
        checkPermits(kind, limit, permits);
      }
    }
    this.#clock.touch();
    // A fair attempt that does not wait is an `acquireFair` call to the faults.
    return this.#faults.run(op === "acquireFairOnce" ? "acquireFair" : op, async () => {
      const memory = await this.#memory;
      this.#clock.touch();
      let answer;
      try {
        answer = memory.answer(op, key, owner ?? "", ttlMs ?? Number.NaN, kind ?? "", limit ?? 1, permits ?? 0);
      } catch (err) {
        throw toLockError(err);
      }
      this.#granted.note(op, args, answer);
      // A release wakes the key's waiters, and so does a release that only gave up a fair
      // waiter's place, or a fair semaphore's grant that may leave room for the next.
      if (op === "release" || op === "releasePermit") this.#released(key, kind);
      else if (op.startsWith("acquireFair") && kind === "semaphore" && answer !== false) this.#released(key, kind);
      return answer;
    });
  }

  /** Wakes the onRelease listeners of `key` (of `kind`; of every kind when undefined). */
  #released(key, kind) {
    // A read-write lock's release may let either kind in (a writer after the last reader,
    // readers after a writer), as in the memory store.
    const rw = (k) => k === "read" || k === "write";
    for (const entry of [...(this.#listeners.get(key) ?? [])]) {
      if (kind === undefined || entry.kind === kind || entry.kind === undefined || (rw(kind) && rw(entry.kind))) entry.listener();
    }
  }

  // The JS store contract (docs/api.md).

  async acquire(key, owner, ttlMs) {
    return (await this[ACQUIRE_TOKEN](key, owner, ttlMs)) !== false;
  }

  [ACQUIRE_TOKEN](key, owner, ttlMs) {
    return this.#call("acquire", [key], key, owner, ttlMs);
  }

  release(key, owner) {
    return this.#call("release", [key], key, owner);
  }

  extend(key, owner, ttlMs) {
    return this.#call("extend", [key], key, owner, ttlMs);
  }

  isLocked(key) {
    return this.#call("isLocked", [key], key);
  }

  remainingTime(key) {
    return this.#call("remainingTime", [key], key);
  }

  isHeldBy(key, owner) {
    return this.#call("isHeldBy", [key], key, owner);
  }

  ownerRemainingTime(key, owner) {
    return this.#call("ownerRemainingTime", [key], key, owner);
  }

  async acquirePermit(key, owner, ttlMs, kind, limit, permits) {
    return (await this[ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits)) !== false;
  }

  [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits) {
    return this.#call("acquirePermit", [key, owner, ttlMs, kind, limit], key, owner, ttlMs, kind, limit, permits);
  }

  /**
   * A fair handle's attempt (the JS store contract's optional `acquireFair`): `owner`
   * takes or renews its place in the key's queue and is granted the key when first in
   * line and the key has room; one that does not `wait` keeps no place.
   */
  acquireFair(key, owner, ttlMs, kind, limit, permits, waits) {
    const op = waits === true ? "acquireFair" : "acquireFairOnce";
    return this.#call(op, [key, owner, ttlMs, kind, limit], key, owner, ttlMs, kind, limit, kind === "lock" ? 1 : permits);
  }

  releasePermit(key, owner, kind) {
    return this.#call("releasePermit", [key], key, owner, undefined, kind);
  }

  extendPermit(key, owner, ttlMs, kind) {
    return this.#call("extendPermit", [key], key, owner, ttlMs, kind);
  }

  countPermits(key, kind) {
    return this.#call("countPermits", [key], key, undefined, undefined, kind);
  }

  permitRemainingTime(key, owner, kind) {
    return this.#call("permitRemainingTime", [key], key, owner, undefined, kind);
  }

  acquireAll(keys, owner, ttlMs) {
    if (!Array.isArray(keys)) throw invalid(`keys must be an array of strings; got ${typeName(keys)}`);
    for (const key of keys) checkString("key", key);
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    this.#clock.touch();
    return this.#faults.run("acquireAll", async () => {
      const memory = await this.#memory;
      this.#clock.touch();
      let tokens;
      try {
        tokens = memory.answerAll(keys, owner, ttlMs);
      } catch (err) {
        throw toLockError(err);
      }
      const answer = tokens == null ? false : Array.from(tokens);
      this.#granted.note("acquireAll", [keys], answer);
      return answer;
    });
  }

  /** The live holder of the plain lock `key` (an election's leader), with its value; or null. */
  holder(key) {
    checkString("key", key);
    return this.#direct("holder", (memory) => holderOf(memory.holder(key)));
  }

  /** Keeps `value` with `owner`'s live hold of `key` unless it keeps a newer one: true when `owner` holds it. */
  proclaim(key, owner, value, seq) {
    checkString("key", key);
    checkString("owner", owner);
    checkString("value", value);
    checkSeq(seq);
    return this.#direct("proclaim", (memory) => memory.proclaim(key, owner, value, seq));
  }

  /** A call answered by `answer(memory)`, through the armed faults. */
  #direct(op, answer) {
    this.#clock.touch();
    // A fair attempt that does not wait is an `acquireFair` call to the faults.
    return this.#faults.run(op === "acquireFairOnce" ? "acquireFair" : op, async () => {
      const memory = await this.#memory;
      this.#clock.touch();
      try {
        return answer(memory);
      } catch (err) {
        throw toLockError(err);
      }
    });
  }

  /** Calls `listener` after each release of `key` through this store (and each endHold()); returns the unsubscribe function. */
  onRelease(key, listener, kind = undefined) {
    const entry = { kind, listener };
    let entries = this.#listeners.get(key);
    if (entries === undefined) this.#listeners.set(key, (entries = new Set()));
    entries.add(entry);
    return () => {
      entries.delete(entry);
      if (entries.size === 0 && this.#listeners.get(key) === entries) this.#listeners.delete(key);
    };
  }

  // Controls.

  /**
   * Ends every hold of `key` now, of every kind, as a failover that lost them would: its
   * holders find out at their next extend or check. Resolves to whether there was one.
   */
  async endHold(key) {
    checkArity(arguments, 1, "endHold(key)");
    checkKey(key);
    const ended = (await this.#memory).endHolds(key);
    this.#clock.touch();
    this.#released(key, undefined);
    return ended;
  }

  /**
   * Ends the leadership of the election `name` now, as a failover that lost the leader's
   * hold would: the leader finds out at its next extend or check (its leadership signal
   * aborts), and a standby takes over. Resolves to whether it had a leader.
   */
  async endLeadership(name) {
    checkArity(arguments, 1, "endLeadership(name)");
    checkString("name", name);
    return this.endHold(`${ELECTION_KEY_PREFIX}${name}`);
  }

  /**
   * Ends every hold of `key` and gives the key to another owner (`owner`, for `ttl`), as
   * another worker taking over would. Resolves to that hold's fencing token.
   */
  async takeKey(key, options = undefined) {
    checkArity(arguments, 2, "takeKey(key, { owner, ttl }?)");
    checkKey(key);
    const given = optionsObject(options, "takeKey()");
    checkOptionKeys(given, ["owner", "ttl"], "takeKey()");
    const { owner = "another-owner", ttl = 30_000 } = given;
    checkString("owner", owner);
    const ttlMs = ttlDurationMs(ttl);
    await this.endHold(key);
    const memory = await this.#memory;
    let token;
    try {
      token = memory.answer("acquire", key, owner, ttlMs, "", 1, 0);
    } catch (err) {
      throw toLockError(err);
    }
    this.#granted.note("acquire", [key], token);
    return token;
  }

  /** The next `count` calls (of `calls`, if given) fail with StoreUnavailableError. */
  failNext(...args) {
    this.#faults.failNext(...args);
  }

  /** Every call (of `calls`, if given) fails for `duration` of the clock from now: an outage. */
  failFor(...args) {
    this.#faults.failFor(...args);
  }

  /** Calls (the next `count`, of `calls`) reach the store `duration` late, and answers come `answer` late. */
  delay(...args) {
    this.#faults.delay(...args);
  }

  /** The next `count` calls (of `calls`) are applied and their answers lost: callers give up at operationTimeoutMs. */
  loseAnswers(...args) {
    this.#faults.loseAnswers(...args);
  }

  /** Disarms every fault. */
  clearFaults() {
    checkArity(arguments, 0, "clearFaults()");
    this.#faults.clear();
  }

  /** The keys granted through this store that are still held, as `{ key, kind }`. */
  async held() {
    checkArity(arguments, 0, "held()");
    const memory = await this.#memory;
    return this.#granted.held(async (key, kind, limit) =>
      kind === "lock" ? memory.answer("isLocked", key, "", Number.NaN, "", 1, 0) : memory.answer("countPermits", key, "", Number.NaN, kind, limit ?? 1, 0) > 0,
    );
  }

  /** Rejects with a LockError (`HOLDS_REMAIN`, `held`) if any key granted through this store is still held. */
  async assertNothingHeld() {
    checkArity(arguments, 0, "assertNothingHeld()");
    assertNone(await this.held(), "the TestStore");
  }
}

// Real time for withFaults(): the host's timers and clock, which fake timers leave alone.
const realTimers = hostTimers;
const realNow = hostTimers.now;

function hasNativeHalf(store) {
  if (store[NATIVE] !== undefined) return true;
  for (let o = store; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    if (Object.getOwnPropertySymbols(o).some((s) => s.description === NATIVE.description)) return true;
  }
  return false;
}

/**
 * `store` with the test kit's faults on its calls (`failNext`, `failFor`, `delay`,
 * `loseAnswers`, on real time), for tests against a real server; `held()` and
 * `assertNothingHeld()` ask the store about the keys granted through the wrapper.
 */
export function withFaults(store) {
  checkArity(arguments, 1, "withFaults(store)");
  // A store written in Rust keeps its native half under a symbol of its copy of the API.
  if (store !== null && typeof store === "object" && hasNativeHalf(store)) {
    throw new UnsupportedError(
      "locksmith: withFaults() wraps a store whose calls are made in JS; this store's calls never leave locksmith's own code (MemoryLockStore, FileLockStore, and the native build's RedisLockStore): use a TestStore, the WebAssembly build's RedisLockStore, or a store over your own Redis client (locksmith-js/ioredis, locksmith-js/node-redis)",
    );
  }
  checkStore(store);
  const faults = new Faults({
    now: realNow,
    sleep: (ms) => new Promise((resolve) => realTimers.setTimeout(resolve, ms)),
    // The bridge's timeout is the wrapper's (copied from the store, or set on it).
    lostAfterMs: () => wrapper.operationTimeoutMs ?? 10_000,
  });
  const granted = new Granted();
  const wrapper = {};
  for (let o = store; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Reflect.ownKeys(o)) {
      if (name === "constructor" || Object.hasOwn(wrapper, name)) continue;
      const value = store[name];
      const op = callName(name);
      if (typeof value !== "function") wrapper[name] = value;
      else if (op === undefined) wrapper[name] = (...args) => value.apply(store, args);
      else
        wrapper[name] = (...args) =>
          faults.run(op, async () => {
            const answer = await value.apply(store, args);
            granted.note(op, args, answer);
            return answer;
          });
    }
  }
  // Holds taken through the wrapper are its own: its close() releases them first.
  if (typeof store.close === "function") {
    wrapper.close = async (options) => {
      const released = await releaseHolds(wrapper, options, "withFaults(store)");
      await store.close(options);
      released.check();
    };
  }
  wrapper.failNext = (...args) => faults.failNext(...args);
  wrapper.failFor = (...args) => faults.failFor(...args);
  wrapper.delay = (...args) => faults.delay(...args);
  wrapper.loseAnswers = (...args) => faults.loseAnswers(...args);
  wrapper.clearFaults = () => faults.clear();
  wrapper.held = () => granted.held(async (key, kind) => (kind === "lock" ? store.isLocked(key) : (await store.countPermits(key, kind)) > 0));
  wrapper.assertNothingHeld = async () => assertNone(await wrapper.held(), "the store");
  return wrapper;
}
