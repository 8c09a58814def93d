// locksmith on Cloudflare Workers: a Durable Object per lock name (this file), and the
// store that talks to it over Durable Object RPC (js/stores/cloudflare-store.mjs,
// exported here too). Import both from a worker (`locksmith-js/cloudflare`); re-export
// `LockDurableObject` from the worker's main module and bind it.
//
// Each object owns one key: its plain lock, its semaphore and its read-write lock. A
// Durable Object handles one event at a time and every method below works on state it
// keeps in memory, so each operation is atomic; its writes are in storage before the
// caller sees the answer (the object's output gate), so a restarted object reloads
// exactly what it answered. Expiry is by the object's clock (`Date.now()`), to the
// millisecond; an alarm at the next expiry clears expired holds and wakes waiters.
// What the plain lock's holder proclaims (elections) is kept beside the lock, named by
// the hold's fencing token, and dropped when the hold ends. Fair handles queue: the plain
// lock's and the semaphore's waiters in the order they first asked, each place a lease of
// the TTL from its latest attempt (dropped by the alarm when it runs out).
import { DurableObject } from "cloudflare:workers";

import { checkPermits, checkSeq } from "../api/checks.mjs";
import { checkString } from "../api/errors.mjs";

export { DurableObjectLockStore } from "./cloudflare-store.mjs";

// How long a waiter's call may stay pending in the object before it returns anyway
// (locksmith then tries again and waits anew). Bounds a call whose caller went away.
const WAIT_CAP_MS = 10_000;
// Storage keys.
const LOCK = "lock";
const SEMAPHORE = "semaphore";
const RW = "rw";
const FENCE = "fence";
const VALUE = "value";
// The fair queues: { lock: [[owner, until]], semaphore: [[owner, until, permits]] }.
const QUEUE = "queue";
// The longest value a holder may proclaim (UTF-16 code units): elections send at most
// 8 KiB; this keeps a stored value well under the storage's limit on one value.
const MAX_VALUE_LENGTH = 32_768;

/** The set of holders a permit kind belongs to. */
function groupOf(kind) {
  if (kind === "semaphore") return SEMAPHORE;
  if (kind === "read" || kind === "write") return RW;
  return LOCK;
}

/** The set of holders of a permit kind; anything else is refused. */
function permitGroup(kind) {
  if (kind === "semaphore" || kind === "read" || kind === "write") return groupOf(kind);
  throw new TypeError(`locksmith: a permit kind is "semaphore", "read" or "write"; got ${JSON.stringify(kind)}`);
}

/**
 * Refuses what would corrupt a hold: its methods are public over RPC, and a hold with a
 * TTL that is not a positive number would never expire.
 */
function checkHold(owner, ttlMs) {
  if (typeof owner !== "string") throw new TypeError("locksmith: owner must be a string");
  if (ttlMs !== undefined && !(typeof ttlMs === "number" && ttlMs > 0 && Number.isFinite(ttlMs))) {
    throw new TypeError("locksmith: ttlMs must be a positive number of milliseconds");
  }
}

/**
 * A hold's permits (`checkPermits` of js/api/checks.mjs), refused as TypeError, which
 * the store turns into INVALID_ARGUMENT: an error of a class of its own would not cross RPC.
 */
function permitsOf(kind, limit, permits) {
  try {
    return checkPermits(kind, limit, permits);
  } catch (err) {
    throw new TypeError(err.message);
  }
}

/**
 * A proclaim's value and seq, checked as every store checks them (`checkString` and
 * `checkSeq` of js/api/checks.mjs), refused as TypeError (see permitsOf): the value a string of at
 * most MAX_VALUE_LENGTH, the seq a positive safe integer.
 */
function checkProclaimed(value, seq) {
  try {
    checkString("value", value);
    checkSeq(seq);
  } catch (err) {
    throw new TypeError(err.message);
  }
  if (value.length > MAX_VALUE_LENGTH) throw new TypeError(`locksmith: a proclaimed value may be ${MAX_VALUE_LENGTH} characters long at most`);
}

/** The permits a semaphore's holders hold (each its `permits`; holds stored before weights, 1). */
function permitsHeld(set) {
  let held = 0;
  for (const hold of set.holders.values()) held += hold.permits ?? 1;
  return held;
}

/** Milliseconds left until `at`, or null once it has passed. */
const left = (at, now) => (at > now ? Math.ceil(at - now) : null);

/** A writer's hold of `set` ended: the readers waiting now take their turn. */
function readersTakeTheirTurn(set) {
  for (const [owner, until] of set.readers ?? []) set.turn.set(owner, until);
  set.readers?.clear();
}

/** A fair group: "lock" or "semaphore" (read-write locks are phase-fair already). */
function fairGroup(kind) {
  if (kind === "lock") return LOCK;
  if (kind === "semaphore") return SEMAPHORE;
  throw new TypeError(`locksmith: a fair acquire is of a "lock" or a "semaphore"; got ${JSON.stringify(kind)}`);
}

const KIND_NAME = { [LOCK]: "lock", [SEMAPHORE]: "semaphore" };

/** A fair handle on a key that other handles hold. */
const unfairHolder = (group) =>
  new TypeError(`locksmith: this ${KIND_NAME[group]} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on \`fair\``);

/** A handle that is not fair on a key that fair handles hold or queue for. */
const fairKey = (group) =>
  new TypeError(
    `locksmith: this ${KIND_NAME[group]} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on \`fair\``,
  );

/**
 * The Durable Object class that holds the locks of one key. Export it from your worker
 * and bind it (see the README); `DurableObjectLockStore` calls it.
 */
export class LockDurableObject extends DurableObject {
  /** The plain lock: `{ owner, expiresAt, token }`, or undefined. */
  #lock;
  /** The semaphore: `{ holders: Map<owner, { expiresAt, token, permits }>, limit }`, or undefined (`permits` absent: 1). */
  #semaphore;
  /** The read-write lock: `{ holders: Map<owner, { expiresAt, token, writer }>, claim }`, or undefined. */
  #rw;
  /**
   * The value the plain lock's holder proclaimed: `{ token, seq, value }`, the hold's
   * fencing token naming the hold it belongs to; or undefined.
   */
  #value;
  /** The last fencing token handed out. Only grows; outlives every hold. */
  #fence = 0;
  /** The fair queues, first come first: group → [[owner, until, permits]]. */
  #queue = { [LOCK]: [], [SEMAPHORE]: [] };
  /** When the alarm is set for, or null. */
  #alarmAt = null;
  /** Pending waits: id → { group, resolve, timer }. */
  #waiters = new Map();
  /**
   * Ids cancelled before their wait arrived (the two calls travel on different stubs, so
   * they may cross), with when: a late wait for one of them ends at once.
   */
  #cancelledEarly = new Map();
  /**
   * Waits named by an attempt that arrived before them: id → { group, freed, at }, with
   * how many wake-ups its group had had then. A late wait then acts as if it had been
   * pending since that attempt: woken by any release or expiry after it.
   */
  #namedEarly = new Map();
  /** Wake-ups (releases, expiries, claims dropped) per group, counted in this instance. */
  #freed = { [LOCK]: 0, [SEMAPHORE]: 0, [RW]: 0 };

  constructor(ctx, env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      const saved = await ctx.storage.get([LOCK, SEMAPHORE, RW, FENCE, VALUE, QUEUE]);
      this.#lock = saved.get(LOCK);
      this.#value = saved.get(VALUE);
      this.#semaphore = saved.get(SEMAPHORE);
      this.#rw = saved.get(RW);
      // Saved before read-write locks were phase-fair: no waiting readers then.
      if (this.#rw) {
        this.#rw.readers ??= new Map();
        this.#rw.turn ??= new Map();
      }
      this.#fence = saved.get(FENCE) ?? 0;
      const queue = saved.get(QUEUE);
      if (queue) this.#queue = { [LOCK]: queue[LOCK] ?? [], [SEMAPHORE]: queue[SEMAPHORE] ?? [] };
      this.#alarmAt = await ctx.storage.getAlarm();
    });
  }

  // -------------------------------------------------------------------------------
  // The plain lock

  /** Takes the lock if it is free: the new hold's fencing token, or false. */
  acquire(owner, ttlMs) {
    checkHold(owner, ttlMs);
    const now = this.#expire();
    if (this.#queue[LOCK].length > 0 || this.#lock?.fair) throw fairKey(LOCK);
    if (this.#lock) return false;
    const token = this.#nextToken();
    this.#lock = { owner, expiresAt: now + ttlMs, token };
    this.#save(LOCK);
    return token;
  }

  /** Frees the lock if `owner` holds it. */
  release(owner) {
    this.#expire();
    // An owner that holds nothing gives its place up (a fair wait that ended).
    if (this.#leaveQueue(LOCK, owner)) this.#wake(LOCK);
    if (this.#lock?.owner !== owner) return false;
    this.#lock = undefined;
    this.#save(LOCK);
    this.#wake(LOCK);
    return true;
  }

  /** Moves the expiry of `owner`'s hold to `ttlMs` from now. */
  extend(owner, ttlMs) {
    checkHold(owner, ttlMs);
    const now = this.#expire();
    if (this.#lock?.owner !== owner) return false;
    this.#lock.expiresAt = now + ttlMs;
    this.#save(LOCK);
    return true;
  }

  isLocked() {
    this.#expire();
    return this.#lock !== undefined;
  }

  isHeldBy(owner) {
    this.#expire();
    return this.#lock?.owner === owner;
  }

  /** Milliseconds left on `owner`'s own lock, null when not its: one RPC, one look. */
  ownerRemainingTime(owner) {
    const now = this.#expire();
    return this.#lock?.owner === owner ? left(this.#lock.expiresAt, now) : null;
  }

  remainingTime() {
    const now = this.#expire();
    return this.#lock ? left(this.#lock.expiresAt, now) : null;
  }

  /**
   * Who holds the plain lock: `{ owner, fencingToken, remainingMs, value }` (`value`: what
   * this hold proclaimed, or null), or null when it is free.
   */
  holder() {
    const now = this.#expire();
    const lock = this.#lock;
    if (!lock) return null;
    return { owner: lock.owner, fencingToken: lock.token, remainingMs: left(lock.expiresAt, now), value: this.#keptValue()?.value ?? null };
  }

  /**
   * Keeps `value` with `owner`'s hold of the plain lock, unless the hold keeps one of a
   * `seq` as high already (a proclaim that arrives late): whether `owner` holds the lock.
   */
  proclaim(owner, value, seq) {
    checkHold(owner);
    checkProclaimed(value, seq);
    this.#expire();
    const lock = this.#lock;
    if (lock?.owner !== owner) return false;
    const kept = this.#keptValue();
    if (kept && kept.seq >= seq) return true;
    this.#value = { token: lock.token, seq, value };
    this.ctx.storage.put(VALUE, this.#value);
    return true;
  }

  /** The value kept for the plain lock's hold, if any (one kept for an earlier hold is nobody's). */
  #keptValue() {
    return this.#lock && this.#value?.token === this.#lock.token ? this.#value : undefined;
  }

  // -------------------------------------------------------------------------------
  // Fair locks and semaphores

  /**
   * A fair handle's attempt (the JS store contract's `acquireFair`): `owner` takes its
   * place at the end of the queue of the plain lock or the semaphore (`kind`), or renews
   * it until `ttlMs` from now, and is granted when it is first in line and the key has
   * room (a semaphore: its `permits` fit in `limit`), leaving the queue. One that does
   * not `waits` keeps no place. The hold's fencing token, or false. `waitId` names waits
   * as `acquirePermit`'s does.
   */
  acquireFair(owner, ttlMs, kind, limit, permits, waits, waitId) {
    const group = fairGroup(kind);
    checkHold(owner, ttlMs);
    if (group === SEMAPHORE && !(Number.isSafeInteger(limit) && limit > 0)) {
      throw new TypeError("locksmith: a semaphore's limit must be a positive whole number");
    }
    const weight = group === SEMAPHORE ? permitsOf(kind, limit, permits) : 1;
    const now = this.#expire();
    // Its waits are named too: one that reaches the object after this attempt still hears
    // of a release after it (a wait does not answer "free" while a queue stands).
    this.#nameWaits(waitId, group);
    const set = group === SEMAPHORE ? this.#semaphore : undefined;
    const held = group === LOCK ? this.#lock : set?.holders.size > 0 ? set : undefined;
    if (held && !held.fair) throw unfairHolder(group);
    if (group === LOCK ? held?.owner === owner : set?.holders.has(owner)) return false;
    if (group === SEMAPHORE && set?.limit !== undefined && set.limit !== limit && set.holders.size > 0) {
      throw new RangeError(
        `locksmith: the semaphore is held with limit ${set.limit}; this handle asks for ${limit}: every handle of a semaphore must use the same limit`,
      );
    }
    const queue = this.#queue[group];
    let place = queue.findIndex(([o]) => o === owner);
    if (place >= 0) queue[place] = [owner, now + ttlMs, weight];
    else if (waits === true) place = queue.push([owner, now + ttlMs, weight]) - 1;
    const first = place === 0 || (place < 0 && queue.length === 0);
    const room = group === LOCK ? !held : !set || permitsHeld(set) + weight <= limit;
    if (!(first && room)) {
      if (waits !== true) this.#leaveQueue(group, owner);
      else this.#saveQueue();
      return false;
    }
    this.#leaveQueue(group, owner);
    const token = this.#nextToken();
    if (group === LOCK) {
      this.#lock = { owner, expiresAt: now + ttlMs, token, fair: true };
    } else {
      const admitted = this.#setOf(SEMAPHORE);
      admitted.limit = limit;
      admitted.fair = true;
      admitted.holders.set(owner, { expiresAt: now + ttlMs, token, writer: false, permits: weight });
      // The next in line may fit beside it.
      this.#wake(SEMAPHORE);
    }
    this.#save(group);
    return token;
  }

  /** Drops `owner`'s place in `group`'s queue (saved): whether it had one. */
  #leaveQueue(group, owner) {
    const queue = this.#queue[group];
    const at = queue.findIndex(([o]) => o === owner);
    if (at < 0) return false;
    queue.splice(at, 1);
    this.#saveQueue();
    return true;
  }

  #saveQueue() {
    const { storage } = this.ctx;
    if (this.#queue[LOCK].length === 0 && this.#queue[SEMAPHORE].length === 0) storage.delete(QUEUE);
    else storage.put(QUEUE, this.#queue);
    this.#schedule();
  }

  // -------------------------------------------------------------------------------
  // Semaphores and read-write locks

  /**
   * Admits `owner`: "semaphore" while the holders' permits and its `permits` (default 1)
   * fit in `limit`; "read" while no writer holds or waits; "write" while nobody holds and
   * no other writer waits. A refused writer leaves a claim that keeps new readers out
   * until it gets in, releases, or the claim expires `ttlMs` from now. The hold's fencing
   * token, or false. `waitId` (an id or a list of them), from the store, names the waits
   * (see `waitForRelease`) subscribed before this attempt and not named yet.
   */
  acquirePermit(owner, ttlMs, kind, limit, waitId, permits) {
    const group = permitGroup(kind);
    checkHold(owner, ttlMs);
    if (kind === "semaphore" && !(Number.isSafeInteger(limit) && limit > 0)) {
      throw new TypeError("locksmith: a semaphore's limit must be a positive whole number");
    }
    const weight = permitsOf(kind, limit, permits);
    const now = this.#expire();
    this.#nameWaits(waitId, group);
    const set = this.#setOf(group);
    if (set.holders.has(owner)) return false;
    let admitted;
    if (kind === "semaphore") {
      if (this.#queue[SEMAPHORE].length > 0 || (set.fair && set.holders.size > 0)) throw fairKey(SEMAPHORE);
      if (set.limit !== undefined && set.limit !== limit && set.holders.size > 0) {
        throw new RangeError(
          `locksmith: the semaphore is held with limit ${set.limit}; this handle asks for ${limit}: every handle of a semaphore must use the same limit`,
        );
      }
      admitted = permitsHeld(set) + weight <= limit;
    } else {
      // Phase-fair: a refused reader waits for the readers' turn, which starts when a
      // writer's hold ends; readers in it enter past a writer's claim, and no writer
      // enters before them.
      const claim = set.claim;
      if (kind === "read") {
        const inTurn = set.turn.has(owner);
        admitted = (!claim || inTurn) && ![...set.holders.values()].some((h) => h.writer);
        if (admitted) {
          set.readers.delete(owner);
          set.turn.delete(owner);
        } else if (!inTurn) {
          set.readers.set(owner, now + ttlMs);
          this.#save(group);
        }
      } else {
        admitted = set.holders.size === 0 && set.turn.size === 0 && (!claim || claim.owner === owner);
        if (!admitted && (!claim || claim.owner === owner)) {
          set.claim = { owner, until: now + ttlMs };
          this.#save(group);
        }
      }
    }
    if (!admitted) return false;
    if (kind === "write") set.claim = undefined;
    if (kind === "semaphore") {
      set.limit = limit;
      // Its holders came in unfairly (a fair era, if any, has ended: it had no holders left).
      set.fair = false;
    }
    const token = this.#nextToken();
    set.holders.set(
      owner,
      kind === "semaphore" ? { expiresAt: now + ttlMs, token, writer: false, permits: weight } : { expiresAt: now + ttlMs, token, writer: kind === "write" },
    );
    this.#save(group);
    return token;
  }

  /** Drops `owner`'s hold (and a writer's claim): whether it held. */
  releasePermit(owner, kind) {
    const group = permitGroup(kind);
    this.#expire();
    // An owner that holds nothing gives its place up (a fair wait that ended).
    if (group === SEMAPHORE && this.#leaveQueue(SEMAPHORE, owner)) this.#wake(SEMAPHORE);
    const set = this.#stored(group);
    if (!set) return false;
    let changed = false;
    if (set.claim?.owner === owner) {
      set.claim = undefined;
      changed = true;
    }
    if (set.readers?.delete(owner)) changed = true;
    if (set.turn?.delete(owner)) changed = true;
    if (set.holders.get(owner)?.writer) readersTakeTheirTurn(set);
    const held = set.holders.delete(owner);
    if (held || changed) {
      this.#save(group);
      this.#wake(group);
    }
    return held;
  }

  /** Moves the expiry of `owner`'s live hold to `ttlMs` from now. */
  extendPermit(owner, ttlMs, kind) {
    checkHold(owner, ttlMs);
    const group = permitGroup(kind);
    const now = this.#expire();
    const hold = this.#stored(group)?.holders.get(owner);
    if (!hold) return false;
    hold.expiresAt = now + ttlMs;
    this.#save(group);
    return true;
  }

  /** How many permits the semaphore's live holds hold, or how many live holds the read-write lock has. */
  countPermits(kind) {
    const group = permitGroup(kind);
    this.#expire();
    const set = this.#stored(group);
    if (!set) return 0;
    return group === SEMAPHORE ? permitsHeld(set) : set.holders.size;
  }

  permitRemainingTime(owner, kind) {
    const group = permitGroup(kind);
    const now = this.#expire();
    const hold = this.#stored(group)?.holders.get(owner);
    return hold ? left(hold.expiresAt, now) : null;
  }

  // -------------------------------------------------------------------------------
  // Waiting inside the object

  /**
   * Stays pending until the lock (or semaphore, or read-write lock) of this key may
   * have been freed: a release, an expiry, a writer's claim dropped. Returns "free" at
   * once when it looks free now, "released" on a release or expiry, "cancelled" after
   * `cancelWait(id)`, and "cap" after `capMs` (at most ten seconds) with nothing.
   *
   * A permit's wait is named by the attempt that follows it (`acquirePermit`'s
   * `waitId`), which may arrive before or after it. Named before it came, it answers
   * "released" when its group was woken since that attempt (what the attempt saw, it
   * saw), else it waits: it does not matter whose attempt named it, nor what that
   * waiter needs. Unnamed, it answers "free" only when any waiter would get in.
   */
  waitForRelease(id, kind, capMs = WAIT_CAP_MS) {
    this.#expire();
    this.#forgetOld();
    if (this.#cancelledEarly.delete(id)) return "cancelled";
    const group = groupOf(kind);
    const named = this.#namedEarly.get(id);
    this.#namedEarly.delete(id);
    if (named?.group === group) {
      if (this.#freed[group] > named.freed) return "released";
    } else if (this.#looksFree(kind)) {
      return "free";
    }
    this.#endWait(id, "cancelled");
    return new Promise((resolve) => {
      const ms = Math.min(Math.max(Number(capMs) || 0, 0), WAIT_CAP_MS);
      const timer = setTimeout(() => this.#endWait(id, "cap"), ms);
      this.#waiters.set(id, { group, resolve, timer });
    });
  }

  /** Ends the wait `id` with "cancelled" (or ends it at once if it arrives later). Whether it was pending. */
  cancelWait(id) {
    if (this.#endWait(id, "cancelled")) return true;
    this.#forgetOld();
    this.#namedEarly.delete(id);
    this.#cancelledEarly.set(id, Date.now());
    return false;
  }

  /** The alarm: clears expired holds (waking their waiters) and sets the next alarm. */
  async alarm() {
    this.#alarmAt = null;
    this.#expire();
    this.#schedule();
  }

  // -------------------------------------------------------------------------------
  // Internals

  #nextToken() {
    this.#fence += 1;
    this.ctx.storage.put(FENCE, this.#fence);
    return this.#fence;
  }

  #stored(group) {
    if (group === LOCK) return undefined;
    return group === SEMAPHORE ? this.#semaphore : this.#rw;
  }

  #setOf(group) {
    let set = this.#stored(group);
    if (!set) {
      set = { holders: new Map(), claim: undefined, limit: undefined, readers: new Map(), turn: new Map() };
      if (group === SEMAPHORE) this.#semaphore = set;
      else this.#rw = set;
    }
    return set;
  }

  /**
   * Whether any waiter of `kind` would get in now: a wait that came before its attempt
   * (which sees what is free then) waits for a release unless so. Answering "free" to a
   * waiter who would not get in (a semaphore's of several permits while fewer are free,
   * a writer behind a claim left by a writer that went away) would send it round at
   * once, again and again.
   */
  #looksFree(kind) {
    const group = groupOf(kind);
    // A fair queue: only its first may get in, and it is told by its own attempt.
    if (group !== RW && this.#queue[group].length > 0) return false;
    if (group === LOCK) return this.#lock === undefined;
    const set = this.#stored(group);
    if (!set) return true;
    if (kind === "semaphore") return set.limit === undefined || set.holders.size === 0;
    if (kind === "read") return !set.claim && ![...set.holders.values()].some((h) => h.writer);
    return set.holders.size === 0 && set.turn.size === 0 && !set.claim;
  }

  /** An attempt of `group` names the waits `ids` (an id, or a list of them) still on their way. */
  #nameWaits(ids, group) {
    const list = Array.isArray(ids) ? ids.slice(0, 64) : [ids];
    this.#forgetOld();
    for (const id of list) {
      // A wait already pending is woken by every release from now on.
      if (typeof id !== "string" || this.#waiters.has(id)) continue;
      this.#namedEarly.delete(id);
      this.#namedEarly.set(id, { group, freed: this.#freed[group], at: Date.now() });
    }
  }

  /** Drops every expired hold and claim, waking their waiters. Returns now. */
  #expire() {
    const now = Date.now();
    for (const group of [LOCK, SEMAPHORE]) {
      const queue = this.#queue[group];
      if (!queue.some(([, until]) => until <= now)) continue;
      // A waiter that stopped asking (crashed, paused) lost its place: the next may be first.
      this.#queue[group] = queue.filter(([, until]) => until > now);
      this.#saveQueue();
      this.#wake(group);
    }
    if (this.#lock && this.#lock.expiresAt <= now) {
      this.#lock = undefined;
      this.#save(LOCK);
      this.#wake(LOCK);
    }
    for (const group of [SEMAPHORE, RW]) {
      const set = this.#stored(group);
      if (!set) continue;
      let changed = false;
      for (const [owner, hold] of set.holders) {
        if (hold.expiresAt <= now) {
          if (hold.writer) readersTakeTheirTurn(set);
          set.holders.delete(owner);
          changed = true;
        }
      }
      for (const waits of [set.readers, set.turn]) {
        for (const [owner, until] of waits ?? []) {
          if (until <= now) {
            waits.delete(owner);
            changed = true;
          }
        }
      }
      if (set.claim && set.claim.until <= now) {
        set.claim = undefined;
        changed = true;
      }
      if (changed) {
        this.#save(group);
        this.#wake(group);
      }
    }
    return now;
  }

  /** Writes one group's state (deleting it when empty) and moves the alarm. */
  #save(group) {
    const { storage } = this.ctx;
    if (group === LOCK) {
      if (this.#lock) storage.put(LOCK, this.#lock);
      else storage.delete(LOCK);
      // A value goes with its hold.
      if (this.#value !== undefined && this.#keptValue() === undefined) {
        this.#value = undefined;
        storage.delete(VALUE);
      }
    } else {
      const set = this.#stored(group);
      if (set && (set.holders.size > 0 || set.claim || set.readers?.size > 0 || set.turn?.size > 0)) {
        storage.put(group, set);
      } else {
        if (group === SEMAPHORE) this.#semaphore = undefined;
        else this.#rw = undefined;
        storage.delete(group);
      }
    }
    this.#schedule();
  }

  /** Sets the alarm to the next expiry, or deletes it when nothing can expire. */
  #schedule() {
    let next = this.#lock?.expiresAt ?? Infinity;
    for (const queue of [this.#queue[LOCK], this.#queue[SEMAPHORE]]) for (const [, until] of queue) next = Math.min(next, until);
    for (const set of [this.#semaphore, this.#rw]) {
      if (!set) continue;
      for (const hold of set.holders.values()) next = Math.min(next, hold.expiresAt);
      if (set.claim) next = Math.min(next, set.claim.until);
      for (const until of [...(set.readers?.values() ?? []), ...(set.turn?.values() ?? [])]) next = Math.min(next, until);
    }
    const at = next === Infinity ? null : next;
    if (at === this.#alarmAt) return;
    this.#alarmAt = at;
    if (at === null) this.ctx.storage.deleteAlarm();
    else this.ctx.storage.setAlarm(at);
  }

  #wake(group) {
    this.#freed[group] += 1;
    for (const [id, waiter] of this.#waiters) {
      if (waiter.group === group) this.#endWait(id, "released");
    }
  }

  /**
   * A wait arrives within the cap of its cancel, or of the attempt that named it, or not
   * at all; older ids are dropped.
   */
  #forgetOld() {
    const old = Date.now() - WAIT_CAP_MS;
    for (const [id, at] of this.#cancelledEarly) {
      if (at > old) break;
      this.#cancelledEarly.delete(id);
    }
    for (const [id, { at }] of this.#namedEarly) {
      if (at > old) break;
      this.#namedEarly.delete(id);
    }
  }

  #endWait(id, outcome) {
    const waiter = this.#waiters.get(id);
    if (!waiter) return false;
    this.#waiters.delete(id);
    clearTimeout(waiter.timer);
    waiter.resolve(outcome);
    return true;
  }
}
