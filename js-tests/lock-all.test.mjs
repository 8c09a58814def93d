// lockAll() beyond the per-store scenarios (conformance/primitives.test.mjs): a user's
// store that takes several keys in one step (`acquireAll`) and what its answers may be,
// AbortSignal, autoExtend and the hold's signal, and the diagnostics channels, in the
// build under test.
import assert from "node:assert/strict";
import dc from "node:diagnostics_channel";
import { describe, it } from "node:test";

import { TestStore } from "../js/testing.mjs";
import { mapStore } from "./support/js-stores.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "./support/target.mjs";

const { lockAll, lock, MultiLock, MemoryLockStore, LockError, AbortError } = ls;

await failOnUnhandledRejections();

/** A map store with `acquireAll`: records each call, answers `answer(keys)` or takes every key. */
function withAcquireAll(answer) {
  const store = mapStore({ withIsHeldBy: true, withFencing: true, withOnRelease: true });
  store.calls = [];
  store.acquireAll = async (keys, owner, ttlMs) => {
    store.calls.push([...keys]);
    if (answer) return answer(keys);
    for (const [i, key] of keys.entries()) if (await store.isLocked(key)) return i;
    const tokens = [];
    for (const key of keys) tokens.push(await store.acquire(key, owner, ttlMs));
    return tokens;
  };
  return store;
}

describe(`lockAll() (${process.env.LOCKSMITH_TARGET ?? "native"})`, () => {
  it("uses a store's own acquireAll, with the keys in canonical order, and its tokens", async () => {
    const store = withAcquireAll();
    const [a, b] = [uniqueKey("own-a"), uniqueKey("own-b")];
    const all = lockAll([b, a], 5_000, store);
    assert.equal(await all.acquire(), true);
    assert.deepEqual(store.calls, [[a, b]]);
    assert.deepEqual(all.fencingTokens, { [a]: 1, [b]: 1 });
    assert.equal(await all.release(), true);
    assert.equal(await lock(a, 5_000, store).isLocked(), false);
  });

  it("waits on the key a store's acquireAll names as held, and wakes at its release", async () => {
    const store = withAcquireAll();
    const [a, b] = [uniqueKey("wake-a"), uniqueKey("wake-b")];
    const holder = lock(b, 10_000, store);
    assert.equal(await holder.acquire(), true);
    const all = lockAll([a, b], 5_000, store);
    const started = performance.now();
    const waiting = all.acquire({ timeout: 20_000, retryDelay: 10_000 });
    await sleep(100);
    await holder.release();
    assert.equal(await waiting, true);
    // Woken by b's release (onRelease), not by a retry 10 s on.
    assert.ok(performance.now() - started < 8_000, `${Math.round(performance.now() - started)} ms`);
    await all.release();
  });

  it("refuses an acquireAll answer outside the contract as a contract violation", async () => {
    for (const answer of [[1], [1, 2, 3], ["1", "2"], [0, 1], [1.5, 2], "yes", "1 2", "tokens 1 2", "- -", { taken: true }, 7, -1, []]) {
      const store = withAcquireAll(() => answer);
      await assert.rejects(
        lockAll([uniqueKey("bad-a"), uniqueKey("bad-b")], 5_000, store).acquire(),
        (err) => err instanceof LockError && err.code === "STORE_CONTRACT_VIOLATION" && /store\.acquireAll\(\) resolved to/.test(err.message),
        JSON.stringify(answer),
      );
    }
    // `true` and an array with nulls are every key taken, without tokens.
    for (const answer of [true, [null, null]]) {
      const all = lockAll(
        [uniqueKey("ok-a"), uniqueKey("ok-b")],
        5_000,
        withAcquireAll(() => answer),
      );
      assert.equal(await all.acquire(), true, JSON.stringify(answer));
      assert.deepEqual(Object.values(all.fencingTokens), [null, null]);
    }
  });

  it("takes the keys one at a time when a store's acquireAll answers null (not these keys in one step)", async () => {
    const store = withAcquireAll(() => null);
    const [a, b] = [uniqueKey("null-a"), uniqueKey("null-b")];
    const all = lockAll([a, b], 5_000, store);
    assert.equal(await all.acquire(), true);
    assert.equal(store.calls.length, 1);
    assert.equal(await lock(b, 5_000, store).isLocked(), true, "taken by the one-key calls");
    assert.deepEqual(Object.values(all.fencingTokens), [1, 1]);
    assert.equal(await all.release(), true);
  });

  it("names what a store's acquireAll answered when it breaks the contract", async () => {
    const cases = [
      [[0, 1], /resolved to an array \[0, 1\]; it must/],
      [[1], /resolved to an array \[1\]; it must .* an array of 2 fencing tokens/],
      [["1", null], /resolved to an array \[\?, null\]/],
      [[], /resolved to an array \[\]/],
      ["1 2", /resolved to string "1 2"/],
    ];
    for (const [answer, message] of cases) {
      await assert.rejects(
        lockAll(
          [uniqueKey("msg-a"), uniqueKey("msg-b")],
          5_000,
          withAcquireAll(() => answer),
        ).acquire(),
        (err) => err.code === "STORE_CONTRACT_VIOLATION" && message.test(err.message),
        JSON.stringify(answer),
      );
    }
  });

  it("gives its other keys back once it finds one gone", async () => {
    const store = new TestStore();
    const [a, b] = [uniqueKey("gone-a"), uniqueKey("gone-b")];
    const all = lockAll([a, b], 10_000, store);
    assert.equal(await all.acquire(), true);
    // b is freed with the handle's token elsewhere, and taken by someone else.
    assert.equal(await store.release(b, JSON.parse(all.serialize()).owner), true);
    assert.equal(await lock(b, 10_000, store).acquire(), true);
    await assert.rejects(all.extend(), (err) => err.code === "LOCK_NOT_HELD");
    // The give-back runs on its own: let it settle, with no time passing (a's TTL is far off).
    await store.clock.advance(0);
    assert.equal(await lock(a, 10_000, store).isLocked(), false, "a was given back");
    assert.equal(all.signal.aborted, true);
    assert.equal(await all.release(), false, "lost: release says so");
  });

  it("ends a wait at an abort, holding nothing", async () => {
    const store = new TestStore();
    const [a, b] = [uniqueKey("abort-a"), uniqueKey("abort-b")];
    const holder = lock(b, 10_000, store);
    await holder.acquire();
    const controller = new AbortController();
    const waiting = lockAll([a, b], 5_000, store).acquire({ timeout: 10_000, signal: controller.signal });
    let settled = false;
    waiting.then(
      () => (settled = true),
      () => (settled = true),
    );
    await store.clock.advance(30);
    assert.equal(settled, false, "still waiting before the abort");
    controller.abort();
    await assert.rejects(waiting, (err) => err instanceof AbortError && err.code === "ABORTED");
    assert.equal(await lock(a, 5_000, store).isLocked(), false);
    await assert.rejects(lockAll([a], 5_000, store).acquire({ signal: AbortSignal.abort() }), (err) => err.name === "AbortError");
    assert.equal(await lock(a, 5_000, store).isLocked(), false, "an aborted signal takes nothing");
  });

  it("keeps every key past its TTL with autoExtend, and its signal aborts at the release", async () => {
    const store = new TestStore();
    const keys = [uniqueKey("auto-a"), uniqueKey("auto-b")];
    const all = lockAll(keys, 300, store);
    const running = all.run(
      async (held) => {
        const signal = held.signal;
        await store.clock.sleep(700);
        assert.equal(signal.aborted, false, "held throughout");
        for (const key of keys) assert.equal(await lock(key, 300, store).isLocked(), true);
      },
      { autoExtend: true },
    );
    await store.clock.advance(700);
    const [ran] = await running;
    assert.equal(ran, true);
    assert.equal(all.signal.aborted, true);
    for (const key of keys) assert.equal(await lock(key, 300, store).isLocked(), false);
    await store.assertNothingHeld();
  });

  it("is kind multi on the diagnostics channels, named by its keys", async () => {
    const seen = [];
    const channel = dc.tracingChannel("locksmith:acquire");
    const handlers = { asyncEnd: (context) => seen.push({ ...context }) };
    channel.subscribe(handlers);
    try {
      const all = lockAll(["diag-b", "diag-a"], 5_000, new MemoryLockStore());
      assert.equal(await all.acquire(), true);
      await all.release();
    } finally {
      channel.unsubscribe(handlers);
    }
    assert.equal(seen.length, 1);
    assert.equal(seen[0].kind, "multi");
    assert.equal(seen[0].key, "diag-a, diag-b");
    assert.equal(seen[0].outcome, "acquired");
  });

  it("is a Lock: every method, new MultiLock(), and no single fencing token", async () => {
    const store = new MemoryLockStore();
    const all = new MultiLock(["n-1", "n-2"], "2s", store);
    assert.ok(all instanceof ls.Lock);
    assert.equal(all.ttlMs, 2_000);
    assert.equal(Object.prototype.toString.call(all), "[object MultiLock]");
    assert.equal(await all.acquireImmediately(), true);
    assert.equal(all.fencingToken, null);
    assert.equal(await all.count(), 2);
    assert.equal(Object.isFrozen(all.keys), true);
    await assert.rejects(all.acquire({ permits: 2 }), (err) => err.code === "INVALID_ARGUMENT" && /lockAll\(\) handle/.test(err.message));
    await assert.rejects(all.acquire({ timeot: 5 }), (err) => err.code === "INVALID_ARGUMENT" && /did you mean `timeout`/.test(err.message));
    await all[Symbol.asyncDispose]();
    assert.equal(await all.isLocked(), false);
    assert.throws(
      () => lockAll(["a\nb"], 1_000, store),
      (err) => err.code === "INVALID_ARGUMENT" && /control characters/.test(err.message),
    );
    assert.throws(
      () =>
        lockAll(
          Array.from({ length: 65 }, (_, i) => `k${i}`),
          1_000,
          store,
        ),
      (err) => err.code === "INVALID_ARGUMENT" && /1 to 64 keys; got 65/.test(err.message),
    );
  });
});
