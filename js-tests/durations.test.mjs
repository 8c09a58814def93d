// Durations: every TTL and time the API takes is milliseconds (a number) or a string with
// its unit ("250ms", "30s", "5m", "1.5h"), parsed once in js/api/api.mjs before it reaches the
// binding. A string that is neither is an InvalidArgumentError naming the option and the
// forms it takes, never a silent default.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "./support/target.mjs";

const { lock, Lock, semaphore, readWriteLock, LockError } = ls;

await failOnUnhandledRejections();

function invalidDuration(option, got) {
  return (err) => {
    assert.ok(err instanceof LockError, `a LockError, got ${err?.stack ?? err}`);
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.equal(err.name, "InvalidArgumentError");
    assert.match(err.message, /^locksmith: /);
    assert.ok(err.message.includes(`${option} must be`), `names ${option}: ${err.message}`);
    assert.match(err.message, /milliseconds/);
    assert.match(err.message, /"250ms", "30s", "5m" or "1h"/, "lists the accepted forms");
    if (got !== undefined) assert.ok(err.message.includes(JSON.stringify(got)), `says what it got: ${err.message}`);
    return true;
  };
}

describe("durations as strings", () => {
  it("a TTL may be a number of milliseconds or a string with a unit", () => {
    for (const [given, ms] of [
      [30_000, 30_000],
      ["30s", 30_000],
      ["250ms", 250],
      ["5m", 300_000],
      ["1h", 3_600_000],
      ["1.5s", 1_500],
      ["0.5m", 30_000],
      ["1.1s", 1_100],
    ]) {
      assert.equal(lock(uniqueKey("d"), given).ttlMs, ms, `lock(k, ${JSON.stringify(given)})`);
      assert.equal(new Lock(uniqueKey("d"), given).ttlMs, ms, `new Lock(k, ${JSON.stringify(given)})`);
      assert.equal(semaphore(uniqueKey("d"), 2, given).ttlMs, ms, `semaphore(k, 2, ${JSON.stringify(given)})`);
      const rw = readWriteLock(uniqueKey("d"), given);
      assert.equal(rw.ttlMs, ms, `readWriteLock(k, ${JSON.stringify(given)})`);
      assert.equal(rw.readLock().ttlMs, ms);
      assert.equal(rw.writeLock().ttlMs, ms);
    }
  });

  it("a lock taken with a string TTL holds for that long", async () => {
    const l = lock(uniqueKey("d"), "30s");
    assert.equal(await l.acquire(), true);
    const left = await l.getRemainingTime();
    assert.ok(left > 25_000 && left <= 30_000, `remaining ${left}`);
    await l.extend("2m");
    const extended = await l.getRemainingTime();
    assert.ok(extended > 100_000 && extended <= 120_000, `after extend("2m"): ${extended}`);
    await l.release();
  });

  it("timeout and retryDelay take strings: the wait lasts the timeout, not a 200-fold one", async () => {
    const key = uniqueKey("d");
    const holder = lock(key, "10s");
    assert.equal(await holder.acquire(), true);
    const start = performance.now();
    assert.equal(await lock(key, "10s").acquire({ timeout: "200ms", retryDelay: "20ms" }), false);
    const waited = performance.now() - start;
    assert.ok(waited >= 190 && waited < 2_000, `waited ${waited.toFixed(0)} ms for a "200ms" timeout`);
    // A "0.2s" timeout is the same 200 ms, and a free lock is taken at once.
    const [ran, value] = await lock(uniqueKey("d"), "10s").run(() => 7, { timeout: "0.2s", retryDelay: "0.05s" });
    assert.deepEqual([ran, value], [true, 7]);
    await holder.release();
  });

  it("autoExtend's intervalMs and maxHoldMs take strings", async () => {
    const l = lock(uniqueKey("d"), "300ms");
    const [ran, signal] = await l.run(
      async (held) => {
        await sleep(700);
        return held.signal;
      },
      { autoExtend: { intervalMs: "100ms", maxHoldMs: "1m" } },
    );
    assert.equal(ran, true);
    assert.equal(signal.reason?.name, "AbortError", "the hold lasted past its 300 ms TTL and ended by release");
    await assert.rejects(lock(uniqueKey("d"), "1s").acquire({ autoExtend: { intervalMs: "1 sec" } }), invalidDuration("autoExtend.intervalMs", "1 sec"));
    await assert.rejects(lock(uniqueKey("d"), "1s").acquire({ autoExtend: { maxHoldMs: "forever" } }), invalidDuration("autoExtend.maxHoldMs", "forever"));
  });

  for (const bad of ["30", "30sec", "30 s", "-5s", "", "s", "1.5.5s", "1e3ms", "5M", " 30s", "Infinitys", "1d"]) {
    it(`${JSON.stringify(bad)} is refused wherever a duration is taken, naming the option`, async () => {
      assert.throws(() => lock(uniqueKey("d"), bad), invalidDuration("ttlMs", bad));
      assert.throws(() => new Lock(uniqueKey("d"), bad), invalidDuration("ttlMs", bad));
      assert.throws(() => semaphore(uniqueKey("d"), 2, bad), invalidDuration("ttlMs", bad));
      assert.throws(() => readWriteLock(uniqueKey("d"), bad), invalidDuration("ttlMs", bad));
      const l = lock(uniqueKey("d"), "5s");
      await assert.rejects(l.acquire({ timeout: bad }), invalidDuration("timeout", bad));
      await assert.rejects(l.acquire({ retryDelay: bad }), invalidDuration("retryDelay", bad));
      await assert.rejects(
        l.run(() => {}, { timeout: bad }),
        invalidDuration("timeout", bad),
      );
      assert.equal(await l.isLocked(), false, "a refused acquire takes nothing");
      assert.equal(await l.acquire(), true);
      await assert.rejects(l.extend(bad), invalidDuration("ttlMs", bad));
      await l.release();
    });
  }

  it("a value of another type says what durations are", async () => {
    assert.throws(() => lock(uniqueKey("d"), true), invalidDuration("ttlMs"));
    assert.throws(() => lock(uniqueKey("d"), {}), invalidDuration("ttlMs"));
    await assert.rejects(lock(uniqueKey("d")).acquire({ timeout: null }), invalidDuration("timeout"));
  });

  it("a string that parses still meets the number's rules (the core's checks)", async () => {
    // 0 ms is no TTL; a fraction of a millisecond is not a whole number of them.
    assert.throws(
      () => lock(uniqueKey("d"), "0s"),
      (err) => err.code === "INVALID_ARGUMENT" && /ttlMs must be a whole number of milliseconds from 1/.test(err.message),
    );
    assert.throws(
      () => lock(uniqueKey("d"), "0.5ms"),
      (err) => err.code === "INVALID_ARGUMENT" && /got 0\.5/.test(err.message),
    );
    assert.throws(
      () => lock(uniqueKey("d"), "1000h"),
      (err) => err.code === "INVALID_ARGUMENT" && /ttlMs must be a whole number of milliseconds from 1 to 2147483647; got 3600000000/.test(err.message),
    );
    // A zero timeout is fine: one attempt.
    assert.equal(await lock(uniqueKey("d"), "1s").acquire({ timeout: "0ms" }), true);
  });
});
