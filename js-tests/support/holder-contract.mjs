// The store contract's optional pair that elections read and write: `holder(key)` (who
// holds a plain lock, with its fencing token, its time left and the value it proclaimed)
// and `proclaim(key, owner, value, seq)` (a value kept with a live hold). One set of
// checks, run on every store that has them (holder-contract.test.mjs).
// ## The contract (optional store methods, new; elections use them)
//
// - `holder(key)` → `Promise<null | { owner: string, fencingToken: number | null, remainingMs: number, value: string | null }>`:
//   the live holder of the PLAIN (exclusive) lock `key` (the same hold `acquire(key, owner, ttlMs)` makes; not
//   semaphore / read-write holds), read in ONE atomic step (one script, one statement, one txn): its owner token,
//   its fencing token (the token its acquire minted, as `lock.fencingToken` shows; `null` only for a store/mode
//   without tokens, e.g. Redis `fencing: false`), the milliseconds it has left (an integer ≥ 1, rounded up), and
//   the last value proclaimed for THIS hold (or `null`). `null` when nobody holds `key` (free or expired).
// - `proclaim(key, owner, value, seq)` → `Promise<boolean>`: in ONE atomic step, if `owner` holds `key` (live), keeps
//   the string `value` (up to 8 192 bytes + a little; elections limit it) with that hold, UNLESS the hold already
//   keeps a value with a `seq` ≥ this `seq` (a late-applied proclaim never undoes a newer one); answers `true` when
//   `owner` holds `key` (whether or not the value was replaced), `false` otherwise (nothing kept).
//   The value goes with the hold: a later holder of the key (after a release, an expiry, a takeover) starts with no
//   value — a value left from an earlier holder must never be reported for a new one (tag it with the owner and
//   compare, or clear it, as suits the store). An extend keeps it. Any store call may be answered late or never while
//   the server still applies it: both methods must stay correct under that (they are guarded by owner and seq).
// - Keys: the key the store sees, exactly as `acquire` gets it (elections use "\u0001election:" + name; the store
//   prefixes / hash-tags it as it does for acquire).
import assert from "node:assert/strict";

import { ls, sleep, uniqueKey } from "./target.mjs";

/**
 * Runs the checks on `store` (opened by the caller) with `it` from node:test.
 * `ttlMs`: the lease to test expiry with (etcd rounds up to whole seconds).
 */
export function holderContract(it, getStore, { ttlMs = 400 } = {}) {
  for (const [label, prefix] of [
    ["a lock's key", ""],
    ["an election's key", "\u0001election:"],
  ]) {
    it(`holder() and proclaim() on ${label}`, async () => {
      const store = getStore();
      const name = uniqueKey("holder");
      const key = `${prefix}${name}`;
      assert.equal(await store.holder(key), null, "nobody holds a new key");

      const a = await store.acquire(key, "owner-a", 30_000);
      assert.ok(a === true || (Number.isSafeInteger(a) && a > 0), `acquire answers true or a token; got ${a}`);
      let h = await store.holder(key);
      assert.equal(h.owner, "owner-a");
      assert.ok(h.fencingToken === null || (Number.isSafeInteger(h.fencingToken) && h.fencingToken > 0), `token ${h.fencingToken}`);
      if (typeof a === "number") assert.equal(h.fencingToken, a, "the token its acquire answered");
      assert.ok(Number.isInteger(h.remainingMs) && h.remainingMs > 25_000 && h.remainingMs <= 30_000, `remainingMs ${h.remainingMs}`);
      assert.equal(h.value, null, "no value until one is proclaimed");

      assert.equal(await store.proclaim(key, "owner-a", '{"host":"a"}', 1), true);
      assert.equal((await store.holder(key)).value, '{"host":"a"}');
      // A proclaim that is not newer (a late one) never undoes a newer one; its holder still holds.
      assert.equal(await store.proclaim(key, "owner-a", '{"host":"stale"}', 1), true);
      assert.equal((await store.holder(key)).value, '{"host":"a"}');
      const big = JSON.stringify({ blob: "x".repeat(8_000) });
      assert.equal(await store.proclaim(key, "owner-a", big, 2), true);
      assert.equal((await store.holder(key)).value, big);
      // Someone who does not hold the key proclaims nothing.
      assert.equal(await store.proclaim(key, "owner-b", "b", 9), false);
      h = await store.holder(key);
      assert.equal(h.owner, "owner-a");
      assert.equal(h.value, big);
      // An extend keeps the value.
      assert.equal(await store.extend(key, "owner-a", 30_000), true);
      assert.equal((await store.holder(key)).value, big);

      // The value goes with the hold: the next holder starts without one.
      assert.equal(await store.release(key, "owner-a"), true);
      assert.equal(await store.holder(key), null);
      assert.equal(await store.proclaim(key, "owner-a", "late", 3), false, "a proclaim after the release keeps nothing");
      const b = await store.acquire(key, "owner-b", 30_000);
      assert.ok(b !== false);
      h = await store.holder(key);
      assert.equal(h.owner, "owner-b");
      assert.equal(h.value, null, "a new holder has no value of its own yet");
      if (typeof a === "number" && typeof b === "number") assert.ok(b > a, "tokens grow");
      await store.release(key, "owner-b");
    });
  }

  it("holder() is null once a hold has expired, and its value is gone with it", async () => {
    const store = getStore();
    const key = `\u0001election:${uniqueKey("holder-expiry")}`;
    assert.notEqual(await store.acquire(key, "owner-a", ttlMs), false);
    assert.equal(await store.proclaim(key, "owner-a", "v", 1), true);
    await sleep(ttlMs + 300);
    assert.equal(await store.holder(key), null);
    assert.equal(await store.proclaim(key, "owner-a", "v2", 2), false);
    assert.notEqual(await store.acquire(key, "owner-c", 30_000), false);
    assert.equal((await store.holder(key)).value, null);
    await store.release(key, "owner-c");
  });

  it("proclaim() refuses a seq that is not a positive safe integer and a value that is not a string, and keeps nothing", async () => {
    const store = getStore();
    const key = `\u0001election:${uniqueKey("holder-bad-seq")}`;
    assert.notEqual(await store.acquire(key, "owner-a", 30_000), false);
    assert.equal(await store.proclaim(key, "owner-a", "kept", 5), true);
    const refused = (pattern) => (err) => {
      assert.equal(err.code, "INVALID_ARGUMENT", `${err.code}: ${err.message}`);
      assert.equal(err.name, "InvalidArgumentError");
      assert.match(err.message, pattern);
      return true;
    };
    // (A store reached over JSON gets Infinity, NaN and undefined as null: refused all the same.)
    for (const seq of [0, -1, 1.5, -2.5, 2 ** 53, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, Number.NaN, "6", null, undefined, [6]]) {
      const words = /^locksmith: seq must be a positive safe integer; got /;
      await assert.rejects(store.proclaim(key, "owner-a", "bad", seq), refused(words), `seq ${String(seq)}`);
      if (Number.isFinite(seq)) {
        await assert.rejects(store.proclaim(key, "owner-a", "bad", seq), { message: `locksmith: seq must be a positive safe integer; got ${seq}` });
      }
    }
    for (const value of [42, null, undefined, { value: "v" }, ["v"]]) {
      await assert.rejects(store.proclaim(key, "owner-a", value, 9), refused(/^locksmith: value must be a string; got /), `value ${String(value)}`);
    }
    // Nothing was kept, and the hold's own value stands.
    const h = await store.holder(key);
    assert.equal(h.owner, "owner-a");
    assert.equal(h.value, "kept");
    assert.equal(await store.proclaim(key, "owner-a", "next", 6), true);
    assert.equal((await store.holder(key)).value, "next");
    await store.release(key, "owner-a");
  });

  it("holder() sees a plain lock only: a semaphore's holders are not a lock's holder", async () => {
    const store = getStore();
    if (typeof store.acquirePermit !== "function") return;
    const name = uniqueKey("holder-permits");
    const s = ls.semaphore(name, 2, "30s", store);
    await s.acquire();
    assert.equal(await store.holder(name), null);
    await s.release();
  });
}
