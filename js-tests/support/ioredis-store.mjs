// The Redis store recipe of the documentation, written over ioredis: proof that a JS
// store with a real client passes the same conformance suite as the native stores.

// Compare-and-delete: only delete if the value still matches our owner token.
const RELEASE = `
  if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
  end
  return 0
`;

// Compare-and-extend, same idea.
const EXTEND = `
  if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
  end
  return 0
`;

/** @param {import("ioredis").Redis} client @returns {import("../../js/types/index.d.ts").LockStore} */
export const redisLockStore = (client) => ({
  async acquire(key, owner, ttlMs) {
    // NX = only if absent. This is the atomic bit.
    const res = await client.set(key, owner, "PX", ttlMs, "NX");
    return res === "OK";
  },
  async release(key, owner) {
    return (await client.eval(RELEASE, 1, key, owner)) === 1;
  },
  async extend(key, owner, ttlMs) {
    return (await client.eval(EXTEND, 1, key, owner, String(ttlMs))) === 1;
  },
  async isLocked(key) {
    return (await client.exists(key)) === 1;
  },
  async remainingTime(key) {
    const ms = await client.pttl(key);
    return ms < 0 ? null : ms; // -1 = no expiry, -2 = no key
  },
});
