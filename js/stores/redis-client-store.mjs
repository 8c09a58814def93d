// The lock store over a Redis client the user already has (ioredis, node-redis,
// @upstash/redis): the same key layout, the same Lua scripts (generated from
// redis/src/lua, which the native engine compiles in) and the same fencing counter as
// RedisLockStore, so a lock taken through any of them can be released or extended through
// any other. Each client's module supplies a small driver; everything else lives here.
import { SCRIPTS } from "../gen/redis-scripts.mjs";
import { holderKeys, holderOf, proclaimArgs, valueKeys } from "../redis/holder.mjs";
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, HAS_WAITERS, NO_TOKENS } from "../api/symbols.mjs";
import {
  LockStoreError,
  StoreUnavailableError,
  checkOptionKeys,
  checkString,
  fairKey,
  limitMismatch,
  invalid,
  noteSharedStore,
  typeName,
  unfairHolder,
} from "../api/errors.mjs";
import { checkPermits } from "../api/checks.mjs";
import { releaseHolds } from "../api/shutdown.mjs";
import { DEFAULT_KEY_PREFIX, FENCE_GRACE_MS } from "../api/defaults.mjs";

/** How long a channel stays subscribed after its last waiter left, in case another comes. */
const LINGER_MS = 5_000;

/**
 * How long after a woken waiter stops listening its wake-up is passed on, unless an
 * acquire of the key came meanwhile. A waiter that uses its wake-up stops listening just
 * before its attempt (in the addon, on another thread), so this only has to outlast
 * that; a wake-up passed on needlessly costs one attempt, one never passed on a waiter
 * its retry delay.
 */
const PASS_ON_MS = 5;

const OPTIONS = ["keyPrefix", "operationTimeoutMs", "notifyReleases", "fencing"];

/** Checks the options every client store takes; returns them with defaults. */
export function storeOptions(options, where, extra = []) {
  if (options === undefined) options = {};
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw invalid(`${where} options must be an object; got ${typeName(options)}`);
  }
  checkOptionKeys(options, [...OPTIONS, ...extra], where);
  const { keyPrefix = DEFAULT_KEY_PREFIX, operationTimeoutMs = 10_000, notifyReleases = true, fencing = true } = options;
  if (typeof keyPrefix !== "string") throw invalid(`keyPrefix must be a string; got ${typeName(keyPrefix)}`);
  if (/[{}]/.test(keyPrefix)) throw invalid("keyPrefix must not contain { or }: the key's hash tag follows it");
  if (typeof operationTimeoutMs !== "number" || !(operationTimeoutMs > 0) || !Number.isFinite(operationTimeoutMs)) {
    throw invalid(
      `operationTimeoutMs must be a positive number of milliseconds; got ${typeName(operationTimeoutMs) === "number" ? operationTimeoutMs : typeName(operationTimeoutMs)}`,
    );
  }
  if (typeof notifyReleases !== "boolean") throw invalid(`notifyReleases must be a boolean; got ${typeName(notifyReleases)}`);
  if (typeof fencing !== "boolean") throw invalid(`fencing must be a boolean; got ${typeName(fencing)}`);
  return { ...options, keyPrefix, operationTimeoutMs, notifyReleases, fencing };
}

/** Whether a client error is Redis saying it does not have the script cached. */
const isNoScript = (err) => /NOSCRIPT/.test(String(err?.message ?? err));

/**
 * One store over a driver:
 * - `evalsha(sha, keys, args)` / `eval(source, keys, args)`: run a script, resolve to its reply;
 * - `exists(key)` → 0/1, `pttl(key)` → ms / -1 / -2, optional `get(key)` → string | null;
 * - `setNx(key, value, ttlMs)`: `SET key value NX PX ttlMs GET`, resolving to the value the
 *   key held (null when it was free and is now set): the acquire of a store with
 *   `fencing: false`;
 * - optional `lostConnections()` → a number that grows each time the client lost a
 *   connection, for a client that sends a command again when a lost connection left it
 *   unanswered (ioredis): a release sent twice answers "not held" the second time;
 * - optional `subscriber(onBack)` → `{ subscribe(channel, onMessage), unsubscribe(channel),
 *   close(), live() }` (the first three may return promises), for release wake-ups: `live()`
 *   says whether the connection is up (messages can arrive), and the driver calls
 *   `onBack()` when a lost connection is back with its channels subscribed again;
 * - `cluster`: true when the client is a Redis Cluster client.
 */
/** The keys of the fair queue of `base` (a lock key, or a semaphore's holders key): its queue, its places' ends and its fair mark. */
const fairCompanions = (base) => [`${base}:queue`, `${base}:places`, `${base}:fair`];
/** A fair lock's keys (fair_release.lua's KEYS): the lock key and its fair queue's. */
const fairKeysOf = (lockKey) => [lockKey, ...fairCompanions(lockKey)];

export class RedisClientStore {
  #driver;
  #prefix;
  // channel -> { listeners: Set of { listener, woken, at }, subscribed: boolean, linger,
  // all: whether a release wakes every listener (a semaphore's, a read-write lock's, and a
  // fair lock's once acquireFair has been called on it), attempts: acquires of the lock key sent }
  #channels = new Map();
  #subscriber;
  #notify;
  #cluster;
  #fencing;
  #closed = false;

  /** A semaphore hold may take several permits (the JS store contract's `permitWeights`). */
  get permitWeights() {
    return true;
  }

  /** Made with `fencing: false`: its holds carry no fencing token. */
  get [NO_TOKENS]() {
    return !this.#fencing;
  }

  constructor(driver, options) {
    noteSharedStore(this);
    this.#driver = driver;
    this.#prefix = options.keyPrefix;
    this.#cluster = driver.cluster === true;
    this.#fencing = options.fencing !== false;
    this.#notify = options.notifyReleases && typeof driver.subscriber === "function";
    this.operationTimeoutMs = options.operationTimeoutMs;
    if (!this.#notify) this.onRelease = undefined;
  }

  /** The prefix of every key this store writes. */
  get keyPrefix() {
    return this.#prefix;
  }

  /** The Redis key of the lock `key`: `<prefix>{<key>}`, its companions share the slot. */
  lockKey(key) {
    return `${this.#prefix}{${key}}`;
  }

  /**
   * Whether a Cluster cannot serve `key`: one that starts with `}` closes the hash tag at
   * once (`<prefix>{}…}`), so Redis hashes each whole name and the lock key and its
   * companions fall in different slots. On one server such a key keeps the layout every
   * release used (so all of them exclude each other on it).
   */
  #refused(key) {
    return this.#cluster && typeof key === "string" && key.startsWith("}");
  }

  /** `lockKey(key)`, or the refusal of a key the Cluster cannot serve (as RedisLockStore refuses it). */
  #key(key) {
    const lockKey = this.lockKey(key);
    if (this.#refused(key)) {
      throw invalid(
        `on a Redis Cluster, key ${JSON.stringify(key)} cannot be locked: its Redis key ${lockKey} has an empty hash tag ("{}"), so the lock's keys would fall in different hash slots; use a key that does not start with "}" (on a single server it works as it is)`,
      );
    }
    return lockKey;
  }

  async #script(script, keys, args) {
    try {
      return await this.#driver.evalsha(script.sha, keys, args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return this.#driver.eval(script.source, keys, args);
    }
  }

  /** Takes `key` for `owner` if it is free: `true`, or `false` when someone holds it. */
  async acquire(key, owner, ttlMs) {
    return (await this[ACQUIRE_TOKEN](key, owner, ttlMs)) !== false;
  }

  /**
   * `acquire()` answering the hold's fencing token (how locks get it), or `false`. With
   * `fencing: false`, one plain `SET NX PX` (the same key and value, no script, no
   * counter): `true` when taken, a hold without a token.
   */
  async [ACQUIRE_TOKEN](key, owner, ttlMs) {
    const lockKey = this.#key(key);
    // An attempt on a key whose release woke a waiter here: the wake-up was used, unless
    // the attempt fails (then the key may be free while the others sleep: pass it on).
    const entry = this.#channels.size > 0 ? this.#channels.get(`${lockKey}:released`) : undefined;
    if (entry !== undefined) entry.attempts++;
    try {
      if (!this.#fencing) {
        let held;
        try {
          held = await this.#driver.setNx(lockKey, owner, ttlMs);
        } catch (err) {
          // A key of another type reads as held, as RedisLockStore's plain SET NX sees it.
          if (/WRONGTYPE/.test(String(err?.message ?? err))) return false;
          throw err;
        }
        if (held === null || held === undefined) return true;
        // Held by this very owner: core never sends an acquire with a token that holds the
        // key, so that is this SET applied twice (a client that sent it again after a lost connection). Taken, with
        // its TTL counted again from now, as the fenced script does.
        if (String(held) === owner) return this.extend(key, owner, ttlMs);
        return false;
      }
      // With the fair mark (acquire.lua's KEYS[3]): refused while fair handles hold the key or wait for it.
      const keys = [lockKey, `${lockKey}:fence`, `${lockKey}:fair`];
      const token = Number(await this.#script(SCRIPTS.acquire, keys, [owner, String(ttlMs), String(ttlMs + FENCE_GRACE_MS)]));
      if (token === -1) throw fairKey("lock", key);
      return token > 0 ? token : false;
    } catch (err) {
      if (entry !== undefined && !entry.all && this.#channels.get(`${lockKey}:released`) === entry) RedisClientStore.#released(entry);
      throw err;
    }
  }

  /** Releases `owner`'s hold of `key`; an election's takes its value along (`valueKeys`). */
  async release(key, owner) {
    const lockKey = this.#key(key);
    return this.#releaseAnswer(SCRIPTS.release, [lockKey, ...valueKeys(key, lockKey)], [owner], key);
  }

  /**
   * A fair lock's release (the store contract's `releaseFair`): frees `owner`'s hold of
   * `key`, or gives up its place in the queue (fair_release.lua).
   */
  async releaseFair(key, owner) {
    return this.#releaseAnswer(SCRIPTS.fairRelease, fairKeysOf(this.#key(key)), [owner], key);
  }

  /** A fair lock's extend (the store contract's `extendFair`): its fair mark is kept at least as long. */
  async extendFair(key, owner, ttlMs) {
    const lockKey = this.#key(key);
    const keys = [lockKey, `${lockKey}:fence`, `${lockKey}:fair`];
    return Number(await this.#script(SCRIPTS.extend, keys, [owner, String(ttlMs), String(ttlMs + FENCE_GRACE_MS), "fair"])) === 1;
  }

  /**
   * A fair handle's attempt (`{ fair: true }`; the store contract's `acquireFair`): a lock
   * is taken when it is free and `owner` is first in its queue, a semaphore's `permits`
   * when `owner` is first in its queue and that many are free; otherwise, when the caller
   * `waits`, `owner` takes or renews its place (a lease of `ttlMs`) at the end of the
   * queue (fair_acquire.lua, fair_semaphore_acquire.lua). The fencing token (`true` for a
   * lock with `fencing: false`; a semaphore's grant carries its token either way), or
   * `false`.
   */
  async acquireFair(key, owner, ttlMs, kind, limit, permits = 1, waits = false) {
    if (kind === "semaphore") return this.#acquireFairPermits(key, owner, ttlMs, limit, permits, waits);
    if (kind !== "lock") throw invalid(`a fair acquire is of a "lock" or a "semaphore"; got ${typeName(kind)}`);
    const lockKey = this.#key(key);
    // A fair wait listens before each attempt: a release wakes every listener of the key
    // here (only the first in line may go), and this attempt uses the wake-up it answers.
    const entry = this.#channels.size > 0 ? this.#channels.get(`${lockKey}:released`) : undefined;
    if (entry !== undefined) {
      entry.all = true;
      entry.attempts++;
    }
    const [, queue, places, mark] = fairKeysOf(lockKey);
    const keys = [lockKey, `${lockKey}:fence`, queue, places, mark];
    const token = Number(await this.#script(SCRIPTS.fairAcquire, keys, [owner, String(ttlMs), String(ttlMs + FENCE_GRACE_MS), waits === true ? "1" : "0"]));
    if (token === -1) throw unfairHolder("lock", key);
    if (!(token > 0)) return false;
    return this.#fencing ? token : true;
  }

  /** A fair semaphore's attempt (acquireFair of a "semaphore"). */
  async #acquireFairPermits(key, owner, ttlMs, limit, permits, waits) {
    checkPermits("semaphore", limit, permits);
    const holders = this.#holders(key, "semaphore");
    const keys = [holders, `${holders}:limit`, `${holders}:fence`, `${holders}:weights`, ...fairCompanions(holders)];
    const args = [owner, String(ttlMs), String(limit), String(FENCE_GRACE_MS), String(permits), waits === true ? "1" : "0"];
    const answer = await this.#script(SCRIPTS.fairSemaphoreAcquire, keys, args);
    if (answer === null) throw unfairHolder("semaphore", key);
    const token = Number(answer);
    if (token < 0) throw limitMismatch(key, -token, limit);
    // With or without `fencing` (the plain locks' option), as a plain semaphore's.
    return token > 0 ? token : false;
  }

  /**
   * A release script's answer: `true` when it gave the hold back. A "not held" that came
   * after the client lost a connection while the release was on its way is not trusted:
   * a client that sends unanswered commands again (ioredis) may have had the first
   * sending release the hold and the second find it gone. That is said as an outage:
   * whether the hold was released is not known (a second release finds the key gone
   * either way, and answers `false`).
   */
  async #releaseAnswer(script, keys, args, key) {
    const before = this.#driver.lostConnections?.();
    const released = Number(await this.#script(script, keys, args)) === 1;
    if (!released && before !== undefined && this.#driver.lostConnections() !== before) {
      throw new StoreUnavailableError(
        `locksmith: store unavailable: the connection to Redis was lost while the release of ${JSON.stringify(key)} was on its way and the client sent it again; the answer "not held" may be the second sending's, after the first released the hold, so whether this release took effect is not known`,
      );
    }
    return released;
  }

  /** Extends `owner`'s hold of `key`, and its fencing counter; an election's value too (`valueKeys`). */
  async extend(key, owner, ttlMs) {
    const lockKey = this.#key(key);
    const keys = [lockKey, `${lockKey}:fence`, ...valueKeys(key, lockKey)];
    const reply = await this.#script(SCRIPTS.extend, keys, [owner, String(ttlMs), String(ttlMs + FENCE_GRACE_MS)]);
    return Number(reply) === 1;
  }

  async isLocked(key) {
    return Number(await this.#driver.exists(this.#key(key))) === 1;
  }

  async remainingTime(key) {
    const ms = Number(await this.#driver.pttl(this.#key(key)));
    if (ms === -2) return null;
    if (ms === -1) {
      throw new LockStoreError(`locksmith: store error: redis key ${this.#key(key)} exists without an expiry: something other than locksmith wrote it`);
    }
    return ms;
  }

  async isHeldBy(key, owner) {
    // A driver without `get` (a client that may parse the string GET returns, such as
    // Upstash's) compares on the server.
    if (this.#driver.get === undefined) return Number(await this.#script(SCRIPTS.heldBy, [this.#key(key)], [owner])) === 1;
    return (await this.#driver.get(this.#key(key))) === owner;
  }

  /** How long `owner`'s own lock has left, in one question (a hold's due check); `null` when not its. */
  async ownerRemainingTime(key, owner) {
    const ms = Number(await this.#script(SCRIPTS.ownerRemaining, [this.#key(key)], [owner]));
    return ms > 0 ? ms : null;
  }

  /**
   * The live holder of the plain lock `key` (an election's leader): `{ owner,
   * fencingToken, remainingMs, value }` (the token its acquire minted, null with
   * `fencing: false`; the value it proclaimed, or null), or null when nobody holds it.
   */
  async holder(key) {
    checkString("key", key);
    const lockKey = this.#key(key);
    return holderOf(await this.#script(SCRIPTS.holder, holderKeys(lockKey), []), this.#fencing, lockKey);
  }

  /**
   * Keeps `value` with `owner`'s live hold of `key` (in `<lock key>:value`), unless the hold
   * keeps one with a `seq` at least this one: `true` when `owner` holds `key`.
   */
  async proclaim(key, owner, value, seq) {
    checkString("key", key);
    const args = proclaimArgs(owner, value, seq, this.#fencing);
    const lockKey = this.#key(key);
    return Number(await this.#script(SCRIPTS.proclaim, holderKeys(lockKey), args)) === 1;
  }

  // Semaphores and read-write locks: the engine's permit scripts, on the same keys.

  /** The sorted set of a semaphore's or read-write lock's holders. */
  #holders(key, kind) {
    return `${this.#key(key)}:${kind === "semaphore" ? "semaphore" : "rw"}`;
  }

  /**
   * Takes a hold of `key` of `kind` (a semaphore's `permits` of its permits, default 1):
   * `true`, or `false` when the key admits no more.
   */
  async acquirePermit(key, owner, ttlMs, kind, limit, permits) {
    return (await this[ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits)) !== false;
  }

  /** `acquirePermit()` answering the hold's fencing token, or `false`. */
  async [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits = 1) {
    const holders = this.#holders(key, kind);
    const grace = String(FENCE_GRACE_MS);
    let token;
    checkPermits(kind, limit, permits);
    if (kind === "semaphore") {
      // With the fair mark (semaphore_acquire.lua's KEYS[5]): refused while fair handles hold it or wait for it.
      const answer = await this.#script(
        SCRIPTS.semaphoreAcquire,
        [holders, `${holders}:limit`, `${holders}:fence`, `${holders}:weights`, `${holders}:fair`],
        [owner, String(ttlMs), String(limit), grace, String(permits)],
      );
      if (answer === null) throw fairKey("semaphore", key);
      token = Number(answer);
      if (token < 0) throw limitMismatch(key, -token, limit);
    } else {
      token = Number(
        await this.#script(
          SCRIPTS.rwlockAcquire,
          [holders, `${holders}:writer`, `${holders}:claim`, `${holders}:fence`, `${holders}:readers`, `${holders}:turn`],
          [owner, String(ttlMs), kind, grace],
        ),
      );
    }
    return token > 0 ? token : false;
  }

  async releasePermit(key, owner, kind) {
    const holders = this.#holders(key, kind);
    return kind === "semaphore"
      ? // Fair or not, a release gives up the owner's place in the fair queue (semaphore_release.lua's KEYS[4..6]).
        this.#releaseAnswer(SCRIPTS.semaphoreRelease, [holders, `${holders}:limit`, `${holders}:weights`, ...fairCompanions(holders)], [owner], key)
      : this.#releaseAnswer(SCRIPTS.rwlockRelease, [holders, `${holders}:writer`, `${holders}:claim`, `${holders}:readers`, `${holders}:turn`], [owner], key);
  }

  async extendPermit(key, owner, ttlMs, kind) {
    const holders = this.#holders(key, kind);
    // A semaphore's fair mark last, kept at least as long where it stands (permit_extend.lua's 'fair').
    const [keys, args] =
      kind === "semaphore"
        ? [
            [holders, `${holders}:limit`, `${holders}:fence`, `${holders}:weights`, `${holders}:fair`],
            [owner, String(ttlMs), String(FENCE_GRACE_MS), "fair"],
          ]
        : [
            [holders, `${holders}:writer`, `${holders}:fence`],
            [owner, String(ttlMs), String(FENCE_GRACE_MS)],
          ];
    const reply = await this.#script(SCRIPTS.permitExtend, keys, args);
    return Number(reply) === 1;
  }

  async countPermits(key, kind) {
    const holders = this.#holders(key, kind);
    return Number(await this.#script(SCRIPTS.permitCount, kind === "semaphore" ? [holders, `${holders}:weights`] : [holders], []));
  }

  async permitRemainingTime(key, owner, kind) {
    const ms = Number(await this.#script(SCRIPTS.permitRemaining, [this.#holders(key, kind)], [owner]));
    return ms < 0 ? null : ms;
  }

  /**
   * Wake-ups from the `…:released` messages that the release scripts publish (per lock, or
   * per semaphore / read-write lock). As RedisLockStore's: a lock's release wakes one
   * listener of this process, the one listening longest (it tries, and gets in or waits
   * for the next release), so a release costs one attempt here rather than one per
   * waiter; a semaphore's or read-write lock's wakes every one (one release can admit
   * several, and each checks for itself). A woken listener that stops listening with no
   * acquire of the key after its wake-up (its wait was aborted or timed out as the
   * wake-up came, or it was a lock on several keys that found another key held) passes
   * the wake-up on to the next.
   */
  onRelease(key, listener, kind) {
    // A key the Cluster cannot serve is never held: nothing to listen for.
    if (this.#closed || this.#refused(key)) return () => {};
    const channel = `${kind === undefined ? this.lockKey(key) : this.#holders(key, kind)}:released`;
    let entry = this.#channels.get(channel);
    if (entry === undefined) {
      entry = { listeners: new Set(), subscribed: false, linger: undefined, all: kind !== undefined, attempts: 0 };
      this.#channels.set(channel, entry);
      this.#subscribe(channel, entry);
    }
    clearTimeout(entry.linger);
    entry.linger = undefined;
    const own = { listener, woken: false, at: 0 };
    entry.listeners.add(own);
    return () => {
      if (!entry.listeners.delete(own)) return;
      if (own.woken && !entry.all) this.#passOnLater(channel, entry, own);
      this.#idle(channel, entry);
    };
  }

  /**
   * Whether locks of this process wait for `key`'s release where a release would wake
   * them (its channel subscribed, the connection up): a new waiting acquire then queues
   * behind them (see HAS_WAITERS). Answered at once.
   */
  [HAS_WAITERS](key) {
    if (this.#channels.size === 0 || typeof key !== "string") return false;
    const entry = this.#channels.get(`${this.lockKey(key)}:released`);
    return entry?.subscribed === true && entry.listeners.size > 0 && this.#subscriber?.live?.() !== false;
  }

  /** Starts the linger of a channel nobody listens on any more. */
  #idle(channel, entry) {
    if (entry.listeners.size === 0 && entry.linger === undefined && this.#channels.get(channel) === entry) {
      entry.linger = setTimeout(() => this.#drop(channel, entry), LINGER_MS);
      entry.linger.unref?.();
    }
  }

  /** Calls a listener and notes when (in the key's attempts) its wake-up came. */
  static #wake(entry, own) {
    own.woken = true;
    own.at = entry.attempts;
    try {
      own.listener();
    } catch {
      // The listener's own affair: the others are still woken.
    }
  }

  /** A release: one listener not woken yet (the longest listening), or every one. */
  static #released(entry) {
    for (const own of entry.listeners) {
      if (entry.all) RedisClientStore.#wake(entry, own);
      else if (!own.woken) return RedisClientStore.#wake(entry, own);
    }
  }

  /** Wakes the next listener if no acquire of the key follows `own`'s wake-up soon. */
  #passOnLater(channel, entry, own) {
    if (entry.attempts !== own.at) return;
    const timer = setTimeout(() => {
      if (entry.attempts === own.at && this.#channels.get(channel) === entry) RedisClientStore.#released(entry);
    }, PASS_ON_MS);
    timer.unref?.();
  }

  #subscribe(channel, entry) {
    let subscriber;
    Promise.resolve()
      .then(() => {
        if (this.#closed) throw new Error("closed");
        subscriber = this.#subscriber ??= this.#driver.subscriber(() => this.#back(subscriber));
        return subscriber.subscribe(channel, () => RedisClientStore.#released(entry));
      })
      .then(
        () => {
          if (this.#channels.get(channel) !== entry || this.#subscriber !== subscriber) {
            // Dropped (or the store closed) while subscribing: undo it.
            if (this.#subscriber === subscriber) this.#unsubscribe(channel);
            return;
          }
          entry.subscribed = true;
          // A release between a waiter's attempt and the subscription taking effect
          // sent its message to nobody: one more attempt each covers it.
          for (const own of entry.listeners) RedisClientStore.#wake(entry, own);
        },
        () => {
          // No wake-ups for this channel: waiters fall back to their retry delay.
          if (this.#channels.get(channel) === entry) this.#channels.delete(channel);
          this.#closeIfIdle();
        },
      );
  }

  /**
   * The subscriber connection is back: a release while it was away reached nobody, so
   * every listener of a subscribed channel tries once more (as after subscribing).
   */
  #back(subscriber) {
    if (this.#subscriber !== subscriber) return;
    for (const entry of this.#channels.values()) {
      if (entry.subscribed) for (const own of entry.listeners) RedisClientStore.#wake(entry, own);
    }
  }

  #drop(channel, entry) {
    if (this.#channels.get(channel) !== entry || entry.listeners.size > 0) return;
    this.#channels.delete(channel);
    if (entry.subscribed) this.#unsubscribe(channel);
    else this.#closeIfIdle();
  }

  #unsubscribe(channel) {
    Promise.resolve(this.#subscriber?.unsubscribe(channel))
      .catch(() => {})
      .then(() => this.#closeIfIdle());
  }

  /** Closes the subscriber connection once no channel needs it; the next wait opens another. */
  #closeIfIdle() {
    if (this.#channels.size > 0 || this.#subscriber === undefined) return;
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    Promise.resolve(subscriber.close()).catch(() => {});
  }

  /**
   * Releases the holds this process took through the store (within `timeoutMs`, 2 s by
   * default; `keepHolds: true` leaves them to their TTL), then stops the wake-ups (closes
   * the subscriber connection this store opened). The user's client stays open: it is
   * theirs, and close() comes before its quit().
   */
  async close(options) {
    const released = await releaseHolds(this, options, this.constructor.name);
    await this.#closeSubscriber();
    released.check();
  }

  async #closeSubscriber() {
    this.#closed = true;
    for (const entry of this.#channels.values()) clearTimeout(entry.linger);
    this.#channels.clear();
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    if (subscriber) await subscriber.close();
  }
}
