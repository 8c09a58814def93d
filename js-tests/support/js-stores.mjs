// Stores written in plain JS, as users write them: the conformance suite runs against
// them to prove that any object with the five async methods is a store.

/** A broken store of the user's own: it grants every acquire, whoever holds the key. */
export function grantsAllStore() {
  return {
    acquire: async () => true,
    release: async () => true,
    extend: async () => true,
    isLocked: async () => true,
    remainingTime: async () => null,
  };
}

/** A store of the user's own whose acquire always rejects ("disk on fire"); its other calls find nothing held. */
export function failingStore() {
  return {
    acquire: async () => {
      throw new Error("disk on fire");
    },
    release: async () => false,
    extend: async () => false,
    isLocked: async () => false,
    remainingTime: async () => null,
  };
}

/**
 * A Map with expiry times: the smallest correct store; optionally with `isHeldBy`, with
 * the permit methods that give it semaphores and read-write locks, with fencing tokens
 * (acquire resolves to a number that grows per key) and with `onRelease` wake-ups.
 */
export function mapStore({
  withIsHeldBy = false,
  withPermits = false,
  withFencing = false,
  withOnRelease = false,
  withOwnerRemainingTime = false,
  // holder() and proclaim(), the pair elections' leader()/observe()/value use.
  withHolder = false,
  // The store's clock runs slow: it keeps each hold this many times its TTL.
  ttlFactor = 1,
} = {}) {
  const holds = new Map();
  const counters = new Map();
  const taken = (key) => {
    if (!withFencing) return true;
    const token = (counters.get(key) ?? 0) + 1;
    counters.set(key, token);
    return token;
  };
  // onRelease listeners by key (and kind, for the permit holds).
  const listeners = new Map();
  const released = (key, kind) => {
    for (const listener of listeners.get(`${kind}:${key}`) ?? []) listener();
  };
  const live = (key) => {
    const hold = holds.get(key);
    if (hold && hold.expiresAt > performance.now()) return hold;
    holds.delete(key);
    return undefined;
  };
  const store = {
    async acquire(key, owner, ttlMs) {
      if (live(key)) return false;
      const hold = { owner, expiresAt: performance.now() + ttlMs * ttlFactor, token: null, value: null, seq: 0 };
      holds.set(key, hold);
      const answer = taken(key);
      if (typeof answer === "number") hold.token = answer;
      return answer;
    },
    async release(key, owner) {
      if (live(key)?.owner !== owner) return false;
      holds.delete(key);
      released(key, undefined);
      return true;
    },
    async extend(key, owner, ttlMs) {
      const hold = live(key);
      if (hold?.owner !== owner) return false;
      hold.expiresAt = performance.now() + ttlMs * ttlFactor;
      return true;
    },
    async isLocked(key) {
      return live(key) !== undefined;
    },
    async remainingTime(key) {
      const hold = live(key);
      return hold ? Math.ceil(hold.expiresAt - performance.now()) : null;
    },
  };
  if (withIsHeldBy) store.isHeldBy = async (key, owner) => live(key)?.owner === owner;
  if (withOwnerRemainingTime) {
    store.ownerRemainingTime = async (key, owner) => {
      const hold = live(key);
      return hold?.owner === owner ? Math.max(0, Math.floor(hold.expiresAt - performance.now())) : null;
    };
  }
  if (withHolder) {
    // The value lives on the hold itself, so it goes with it.
    store.holder = async (key) => {
      const hold = live(key);
      return hold ? { owner: hold.owner, fencingToken: hold.token, remainingMs: Math.ceil(hold.expiresAt - performance.now()), value: hold.value } : null;
    };
    store.proclaim = async (key, owner, value, seq) => {
      const hold = live(key);
      if (hold?.owner !== owner) return false;
      if (seq > hold.seq) Object.assign(hold, { value, seq });
      return true;
    };
  }
  if (withPermits) Object.assign(store, permitMethods({ taken, released }));
  if (withOnRelease) {
    store.onRelease = (key, listener, kind) => {
      const name = `${kind}:${key}`;
      const set = listeners.get(name) ?? new Set();
      listeners.set(name, set);
      // One entry per subscription, even for the same function.
      const entry = () => listener();
      set.add(entry);
      return () => {
        set.delete(entry);
        if (set.size === 0) listeners.delete(name);
      };
    };
    /** Live onRelease subscriptions, for tests. */
    store.subscriptions = () => [...listeners.values()].reduce((n, set) => n + set.size, 0);
  }
  return store;
}

/**
 * The optional permit methods, as a user would write them: per key a set of holders
 * with their own expiry, and a waiting writer's claim that keeps new readers out.
 */
function permitMethods({ taken, released }) {
  const sets = new Map();
  const setOf = (key, kind) => {
    const name = `${kind === "semaphore" ? "s" : "rw"}:${key}`;
    let set = sets.get(name);
    // Phase-fair read-write locks: `readers` wait for the next readers' `turn`, which
    // starts when a writer's hold ends; readers in it enter past a writer's claim, and
    // no writer enters before them.
    if (!set) sets.set(name, (set = { holders: new Map(), writerWaiting: undefined, readers: new Map(), turn: new Map() }));
    const now = performance.now();
    let writerEnded = false;
    for (const [owner, hold] of set.holders) {
      if (hold.expiresAt <= now) {
        writerEnded ||= hold.writer;
        set.holders.delete(owner);
      }
    }
    if (set.writerWaiting && set.writerWaiting.until <= now) set.writerWaiting = undefined;
    for (const map of [set.readers, set.turn]) for (const [owner, until] of map) if (until <= now) map.delete(owner);
    if (writerEnded) takeTurn(set);
    return set;
  };
  const takeTurn = (set) => {
    for (const [owner, until] of set.readers) set.turn.set(owner, until);
    set.readers.clear();
  };
  return {
    async acquirePermit(key, owner, ttlMs, kind, limit) {
      const set = setOf(key, kind);
      if (set.holders.has(owner)) return false;
      const writers = [...set.holders.values()].some((h) => h.writer);
      const claim = set.writerWaiting;
      const admitted =
        kind === "semaphore"
          ? set.holders.size < limit
          : kind === "read"
            ? !writers && (!claim || set.turn.has(owner))
            : set.holders.size === 0 && set.turn.size === 0 && (!claim || claim.owner === owner);
      const expiresAt = performance.now() + ttlMs;
      if (kind === "read") {
        if (admitted) {
          set.readers.delete(owner);
          set.turn.delete(owner);
        } else if (!set.turn.has(owner)) {
          set.readers.set(owner, expiresAt);
        }
      }
      if (admitted) {
        if (kind === "write") set.writerWaiting = undefined;
        set.holders.set(owner, { expiresAt, writer: kind === "write" });
        return taken(`${kind === "semaphore" ? "s" : "rw"}:${key}`);
      }
      if (kind === "write" && (!claim || claim.owner === owner)) {
        set.writerWaiting = { owner, until: expiresAt };
      }
      return false;
    },
    async releasePermit(key, owner, kind) {
      const set = setOf(key, kind);
      const claimed = set.writerWaiting?.owner === owner;
      if (claimed) set.writerWaiting = undefined;
      set.readers.delete(owner);
      const inTurn = set.turn.delete(owner);
      const wasWriter = set.holders.get(owner)?.writer === true;
      const held = set.holders.delete(owner);
      if (wasWriter) takeTurn(set);
      if (held || claimed || inTurn) {
        // Readers and writers of one key wait on each other.
        if (kind === "semaphore") released(key, kind);
        else for (const k of ["read", "write"]) released(key, k);
      }
      return held;
    },
    async extendPermit(key, owner, ttlMs, kind) {
      const hold = setOf(key, kind).holders.get(owner);
      if (!hold) return false;
      hold.expiresAt = performance.now() + ttlMs;
      return true;
    },
    async countPermits(key, kind) {
      return setOf(key, kind).holders.size;
    },
    async permitRemainingTime(key, owner, kind) {
      const hold = setOf(key, kind).holders.get(owner);
      return hold ? Math.ceil(hold.expiresAt - performance.now()) : null;
    },
  };
}
