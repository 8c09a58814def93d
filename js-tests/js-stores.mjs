// Stores written in plain JS, as users write them: the conformance suite runs against
// them to prove that any object with the five async methods is a store.

/** A Map with expiry times: the smallest correct store; optionally with `isHeldBy`. */
export function mapStore({ withIsHeldBy = false } = {}) {
  const holds = new Map();
  const live = (key) => {
    const hold = holds.get(key);
    if (hold && hold.expiresAt > performance.now()) return hold;
    holds.delete(key);
    return undefined;
  };
  const store = {
    async acquire(key, owner, ttlMs) {
      if (live(key)) return false;
      holds.set(key, { owner, expiresAt: performance.now() + ttlMs });
      return true;
    },
    async release(key, owner) {
      if (live(key)?.owner !== owner) return false;
      holds.delete(key);
      return true;
    },
    async extend(key, owner, ttlMs) {
      const hold = live(key);
      if (hold?.owner !== owner) return false;
      hold.expiresAt = performance.now() + ttlMs;
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
  return store;
}
