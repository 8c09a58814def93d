// Checks that PostgresLockStore's and MySqlLockStore's own suites (stores/postgres.test.mjs,
// stores/mysql.test.mjs) both make, each in its test of the same name.
import assert from "node:assert/strict";
import { after, before } from "node:test";

import { invalidArgument } from "./errors.mjs";
import { ls, uniqueKey } from "./target.mjs";

/** For the enclosing describe(): `connect()` in before(), the store handed to `opened`; closed in after(). */
export function storeDuring(connect, opened) {
  let store;
  before(async () => {
    store = await connect();
    opened(store);
  });
  after(async () => {
    await store?.close();
  });
}

/** `connect(options)` refuses a bad table name and a bad operationTimeoutMs with INVALID_ARGUMENT. */
export async function refusesBadTableAndTimeout(connect) {
  for (const table of ["drop table x;", "a.b.c", "x".repeat(41), "1locks", "", 5]) {
    await assert.rejects(connect({ table }), invalidArgument(/^locksmith: table must be/), String(table));
  }
  for (const operationTimeoutMs of [0, -1, 1.5, "1000", Number.NaN, 2 ** 31]) {
    await assert.rejects(connect({ operationTimeoutMs }), invalidArgument(/operationTimeoutMs/));
  }
}

/**
 * `store`, over the caller's pool, answers an acquire called directly with a boolean; after
 * close() (twice) the pool still answers (`selectOne()` resolves its rows of SELECT 1 AS
 * one) and the store's calls fail with STORE_CLOSED.
 */
export async function closeLeavesPoolOpen(store, selectOne) {
  assert.equal(await store.acquire(uniqueKey("close"), "o", 1_000), true, "acquire() called directly answers a boolean");
  await store.close();
  await store.close();
  assert.deepEqual(await selectOne(), [{ one: 1 }]);
  await assert.rejects(store.isLocked("k"), { code: "STORE_CLOSED" });
}

/** A wait on the closed `store` fails with STORE_CLOSED at once: closed is final. */
export async function closedWaitFailsAtOnce(store) {
  const started = performance.now();
  await assert.rejects(new ls.Lock("k", 1_000, store).acquire({ timeout: 5_000 }), { code: "STORE_CLOSED" });
  assert.ok(performance.now() - started < 1_000, "a wait on a closed store fails at once");
}

/**
 * Six stores from `connect()` at once (each making the tables if missing) and a lock taken
 * through the first: its token, and its owner's time left in one statement. Resolves
 * `{ stores, key, owner, token }`.
 */
export async function sixStoresOneHold(connect) {
  const stores = await Promise.all(Array.from({ length: 6 }, connect));
  const key = uniqueKey("schema");
  const l = new ls.Lock(key, 60_000, stores[0]);
  assert.equal(await l.acquire(), true);
  const token = l.fencingToken;
  assert.ok(Number.isSafeInteger(token) && token > 0);
  const owner = JSON.parse(l.serialize()).owner;
  assert.ok((await stores[0].ownerRemainingTime(key, owner)) > 59_000, "the owner's own time left, in one statement");
  assert.equal(await stores[0].ownerRemainingTime(key, "someone-else"), null);
  return { stores, key, owner, token };
}
