// The store contract's election pair on Redis, shared by every Redis store (the engine's
// RedisLockStore in both builds through js/redis/driver.mjs, and the stores over users'
// clients, js/stores/redis-client-store.mjs): `holder(key)` and `proclaim(key, owner,
// value, seq)` run holder.lua and proclaim.lua (redis/src/lua) on the lock key, its
// fencing counter and `<lock key>:value`, which share the lock key's hash tag (one
// Cluster slot), and expires with the hold: proclaim.lua sets its expiry, and an election
// hold's extend and release (extend.lua, release.lua) take it along. This module says what
// goes in and what comes out.
import { LockStoreError, checkString } from "../api/errors.mjs";
import { ELECTION_KEY_PREFIX, FENCE_GRACE_MS } from "../api/defaults.mjs";
import { checkSeq } from "../api/checks.mjs";

/** The KEYS of holder.lua and proclaim.lua for the lock key `lockKey`. */
export const holderKeys = (lockKey) => [lockKey, `${lockKey}:fence`, `${lockKey}:value`];

/**
 * The value key to send with an election hold's extend and release (extend.lua's KEYS[3],
 * release.lua's KEYS[2]), which then expire and delete it with the hold; none for a plain
 * lock, whose extend and release send what they always did. `key` is the store key.
 */
export const valueKeys = (key, lockKey) => (typeof key === "string" && key.startsWith(ELECTION_KEY_PREFIX) ? [`${lockKey}:value`] : []);

/** proclaim()'s arguments checked (the key and owner are checked as every call's are): proclaim.lua's ARGV. */
export function proclaimArgs(owner, value, seq, fencing) {
  checkString("owner", owner);
  checkString("value", value);
  checkSeq(seq);
  // The value lives as long as the hold and the fencing counter's grace.
  return [owner, value, String(seq), fencing ? "1" : "0", String(FENCE_GRACE_MS)];
}

/** The text of a string holder.lua marked with its leading '='. */
const unmarked = (text) => (typeof text === "string" && text.startsWith("=") ? text.slice(1) : null);

/**
 * holder.lua's reply as the contract's `{ owner, fencingToken, remainingMs, value }`, or
 * null when nobody holds the lock. `fencing: false` (a store whose holds carry no token):
 * `fencingToken` is null whatever the counter says.
 */
export function holderOf(reply, fencing, lockKey) {
  if (reply === null || reply === undefined || reply === false) return null;
  const [owner, remaining, fence, value] = Array.isArray(reply) ? reply : [];
  const ownerText = unmarked(owner);
  const remainingMs = Number(remaining);
  if (ownerText === null || !Number.isInteger(remainingMs)) {
    throw new LockStoreError(`locksmith: store error: redis: holder.lua answered ${JSON.stringify(reply)}`);
  }
  if (remainingMs < 0) {
    throw new LockStoreError(`locksmith: store error: redis key ${lockKey} exists without an expiry: something other than locksmith wrote it`);
  }
  // An empty counter: the hold was taken without a token (by a store with fencing: false).
  const token = fence === "" || fence === null || fence === undefined ? null : Number(fence);
  return {
    owner: ownerText,
    fencingToken: fencing && Number.isSafeInteger(token) && token > 0 ? token : null,
    // Live at the server's reading with under a millisecond left: 1, as the contract counts.
    remainingMs: Math.max(1, remainingMs),
    value: unmarked(value),
  };
}
