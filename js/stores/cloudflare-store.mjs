// DurableObjectLockStore (`locksmith-js/cloudflare`): the locksmith store over a namespace
// of LockDurableObjects (js/stores/cloudflare.mjs), one object per key, reached over
// Durable Object RPC. The objects keep the holds and wake waiters from inside; this side
// names each object, passes the calls on, and keeps the waits it started.
import { LockError, StoreUnavailableError, checkOptionKeys, checkString, invalid, noteSharedStore } from "../api/errors.mjs";
import { releaseHolds } from "../api/shutdown.mjs";
import { checkSeq } from "../api/checks.mjs";
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, STORE_NAME } from "../api/symbols.mjs";

const OPTIONS = ["operationTimeoutMs", "locationHint", "notifyReleases"];

// How long holder() and proclaim() wait for their object without operationTimeoutMs:
// the bridge's bound on a store's calls when the store gives none (js/api/bridge.mjs).
// Elections call the two themselves, outside the bridge, so the store bounds them.
const DEFAULT_OPERATION_TIMEOUT_MS = 10_000;

/**
 * The object refused a request itself (it crossed RPC as a plain error): the
 * InvalidArgumentError it is, not the store failing, naming `key` as the other stores do
 * (the object does not know its key: it says `this lock`, `the semaphore`). Anything
 * else as it came.
 */
function refusal(err, key) {
  const message = String(err?.message ?? "");
  if ((err?.name === "RangeError" || err?.name === "TypeError") && message.startsWith("locksmith: ")) {
    const text = message.slice("locksmith: ".length);
    const kind = /^(?:this|the) (lock|semaphore) /.exec(text)?.[1];
    return invalid(kind === undefined ? text : text.replace(/^(?:this|the) (?:lock|semaphore) /, `${kind} ${JSON.stringify(key)} `));
  }
  return err;
}

/**
 * `call()`, a call of `key`'s object that the bridge does not make (`op`: holder, proclaim),
 * bounded and typed as the bridge bounds and types the store's other calls: no answer
 * within `ms` and a failure on the way (the object out of reach, reset, overloaded) are
 * STORE_UNAVAILABLE, a request the object refused is INVALID_ARGUMENT.
 */
async function bounded(op, key, ms, call) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`locksmith: store unavailable: store.${op}() did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([Promise.resolve().then(call), timeout]);
  } catch (err) {
    if (err instanceof LockError) throw err;
    const refused = refusal(err, key);
    if (refused !== err) throw refused;
    const error = new StoreUnavailableError(`locksmith: store unavailable: store.${op}() failed: ${err?.message ?? String(err)}`);
    error.cause = err;
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A locksmith `LockStore` over a namespace of `LockDurableObject`s: one object per
 * key (`idFromName(key)`), reached over Durable Object RPC. Fencing tokens, semaphores,
 * read-write locks and fair locks and semaphores, and waiters woken from inside the
 * object on release or expiry.
 */
export class DurableObjectLockStore {
  get [STORE_NAME]() {
    return "durable-object";
  }

  /** A semaphore hold may take several permits (acquirePermit's 6th argument, passed on to the object). */
  get permitWeights() {
    return true;
  }

  #namespace;
  #locationHint;
  /** Waits whose listener left in this turn, kept for a waiter that asks again at once. */
  #spare = new Map();
  /**
   * Waits not yet named by the attempt that follows each (see `acquirePermit` and
   * `acquireFair`; a plain lock's unfair attempt names none), by name, oldest first.
   */
  #unnamed = new Map();

  constructor(namespace, options = {}) {
    if (namespace === null || typeof namespace !== "object" || typeof namespace.idFromName !== "function" || typeof namespace.get !== "function") {
      throw invalid("DurableObjectLockStore needs a Durable Object namespace binding (env.LOCKS, with idFromName and get)");
    }
    if (options === null || typeof options !== "object" || Array.isArray(options)) {
      throw invalid("DurableObjectLockStore options must be an object");
    }
    checkOptionKeys(options, OPTIONS, "DurableObjectLockStore");
    const { operationTimeoutMs, locationHint, notifyReleases = true } = options;
    if (operationTimeoutMs !== undefined) {
      if (typeof operationTimeoutMs !== "number" || !(operationTimeoutMs > 0)) {
        throw invalid(`operationTimeoutMs must be a positive number of milliseconds; got ${String(operationTimeoutMs)}`);
      }
      this.operationTimeoutMs = operationTimeoutMs;
    }
    if (locationHint !== undefined && typeof locationHint !== "string") {
      throw invalid('locationHint must be a string such as "weur"');
    }
    if (typeof notifyReleases !== "boolean") throw invalid("notifyReleases must be true or false");
    this.#namespace = namespace;
    this.#locationHint = locationHint;
    // Without wake-ups waiters only retry at their retryDelay.
    if (!notifyReleases) this.onRelease = undefined;
    noteSharedStore(this);
  }

  /**
   * Releases the holds this isolate took through the store (within `timeoutMs`, 2 s by
   * default; `keepHolds: true` leaves them to their TTL); later acquires through it are
   * refused with StoreClosedError. The store has no connection of its own to close.
   */
  async close(options) {
    (await releaseHolds(this, options, "DurableObjectLockStore")).check();
  }

  /** The stub of the object that owns `key`. A stub serves one request, so one per call. */
  #object(key) {
    const ns = this.#namespace;
    const id = ns.idFromName(key);
    return this.#locationHint === undefined ? ns.get(id) : ns.get(id, { locationHint: this.#locationHint });
  }

  /** Takes `key` for `owner` if it is free: `true`, or `false` when someone holds it. */
  async acquire(key, owner, ttlMs) {
    return (await this[ACQUIRE_TOKEN](key, owner, ttlMs)) !== false;
  }

  /** `acquire()` answering the hold's fencing token (how locks get it), or `false`. */
  async [ACQUIRE_TOKEN](key, owner, ttlMs) {
    try {
      return await this.#object(key).acquire(owner, ttlMs);
    } catch (err) {
      throw refusal(err, key);
    }
  }

  /**
   * A fair handle's attempt (`{ fair: true }`; the JS store contract's `acquireFair`):
   * `owner` takes or renews its place in the key's queue and is granted when first in
   * line with room. The hold's fencing token, or `false`. It names its waits as
   * `acquirePermit`'s does.
   */
  async acquireFair(key, owner, ttlMs, kind, limit, permits, waits) {
    const waitId = this.#takeUnnamed(`${kind}\u0000${key}`);
    try {
      return await this.#object(key).acquireFair(owner, ttlMs, kind, limit, permits, waits, waitId);
    } catch (err) {
      throw refusal(err, key);
    }
  }

  async release(key, owner) {
    return await this.#object(key).release(owner);
  }

  async extend(key, owner, ttlMs) {
    return await this.#object(key).extend(owner, ttlMs);
  }

  async isLocked(key) {
    return await this.#object(key).isLocked();
  }

  async isHeldBy(key, owner) {
    return await this.#object(key).isHeldBy(owner);
  }

  async ownerRemainingTime(key, owner) {
    return await this.#object(key).ownerRemainingTime(owner);
  }

  async remainingTime(key) {
    return await this.#object(key).remainingTime();
  }

  /**
   * Who holds the plain lock on `key`: `{ owner, fencingToken, remainingMs, value }`, or
   * null. One call of its object, within operationTimeoutMs (see `bounded`).
   */
  async holder(key) {
    return bounded("holder", key, this.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS, () => this.#object(key).holder());
  }

  /**
   * Keeps `value` with `owner`'s hold of `key` (unless it keeps one of a `seq` as high
   * already): whether `owner` holds `key`. One call of its object, within
   * operationTimeoutMs (see `bounded`).
   */
  async proclaim(key, owner, value, seq) {
    checkString("value", value);
    checkSeq(seq);
    return bounded("proclaim", key, this.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS, () => this.#object(key).proclaim(owner, value, seq));
  }

  /**
   * Takes a hold of `key` of `kind` (a semaphore's `permits` of its permits, default 1):
   * `true`, or `false` when the key admits no more.
   */
  async acquirePermit(key, owner, ttlMs, kind, limit, permits) {
    return (await this[ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits)) !== false;
  }

  /**
   * `acquirePermit()` answering the hold's fencing token, or `false`. An attempt names
   * every wait of its key and kind subscribed before it and not named yet (locksmith
   * subscribes, then tries; two waiters' calls may cross), so that a wait that reaches
   * the object after the attempt still hears of a release after it.
   */
  async [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits) {
    const waitId = this.#takeUnnamed(`${kind}\u0000${key}`);
    try {
      return await this.#object(key).acquirePermit(owner, ttlMs, kind, limit, waitId, permits);
    } catch (err) {
      throw refusal(err, key);
    }
  }

  async releasePermit(key, owner, kind) {
    return await this.#object(key).releasePermit(owner, kind);
  }

  async extendPermit(key, owner, ttlMs, kind) {
    return await this.#object(key).extendPermit(owner, ttlMs, kind);
  }

  async countPermits(key, kind) {
    return await this.#object(key).countPermits(kind);
  }

  async permitRemainingTime(key, owner, kind) {
    return await this.#object(key).permitRemainingTime(owner, kind);
  }

  /**
   * Calls `listener` when `key` may have been freed, from a call that waits inside the
   * object. The returned function unsubscribes; a waiter that unsubscribes and
   * subscribes again in the same turn (a retry) keeps the call already waiting.
   */
  onRelease(key, listener, kind) {
    const name = `${kind ?? "lock"}\u0000${key}`;
    let wait = this.#spare.get(name);
    this.#spare.delete(name);
    if (!wait || wait.done) {
      try {
        wait = this.#startWait(key, kind);
      } catch {
        return () => {};
      }
    }
    const subscription = { listener };
    wait.subscription = subscription;
    // Named by the attempt after it: a permit's (acquirePermit) and a fair one's (acquireFair).
    const unnamed = this.#unnamed.get(name) ?? [];
    if (!unnamed.includes(wait)) unnamed.push(wait);
    this.#unnamed.set(name, unnamed);
    return () => {
      if (wait.subscription !== subscription) return;
      wait.subscription = undefined;
      if (wait.done || this.#spare.has(name)) return this.#cancel(key, wait);
      this.#spare.set(name, wait);
      queueMicrotask(() => {
        if (this.#spare.get(name) !== wait) return;
        this.#spare.delete(name);
        this.#cancel(key, wait);
      });
    };
  }

  /**
   * The ids of the waits of `name` still to be named (one id alone, as objects before
   * lists of them took it), if any: all of them, since which is the caller's is not
   * known, and each is named by the first attempt after it, at or before its own waiter's.
   */
  #takeUnnamed(name) {
    const ids = (this.#unnamed.get(name) ?? []).filter((wait) => !wait.done).map((wait) => wait.id);
    this.#unnamed.delete(name);
    return ids.length > 1 ? ids : ids[0];
  }

  /** A wait is over: it needs no name. */
  #settled(wait) {
    wait.done = true;
    const unnamed = this.#unnamed.get(wait.name);
    const at = unnamed?.indexOf(wait) ?? -1;
    if (at < 0) return;
    unnamed.splice(at, 1);
    if (unnamed.length === 0) this.#unnamed.delete(wait.name);
  }

  #startWait(key, kind) {
    const wait = { id: crypto.randomUUID(), name: `${kind ?? "lock"}\u0000${key}`, subscription: undefined, done: false };
    Promise.resolve(this.#object(key).waitForRelease(wait.id, kind ?? "lock")).then(
      (outcome) => {
        this.#settled(wait);
        if (outcome === "cancelled") return;
        try {
          wait.subscription?.listener();
        } catch {
          // A listener must not throw; one that does only loses this wake-up.
        }
      },
      () => {
        // The object could not be reached: the waiter's retries will say so.
        this.#settled(wait);
      },
    );
    return wait;
  }

  #cancel(key, wait) {
    if (wait.done) return;
    this.#settled(wait);
    try {
      Promise.resolve(this.#object(key).cancelWait(wait.id)).catch(() => {});
    } catch {
      // A cancel that cannot be sent ends at the object's cap.
    }
  }
}
