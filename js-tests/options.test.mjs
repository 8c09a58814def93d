// Options objects: a misspelt key is an error that names it, never a silent default.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { failOnUnhandledRejections, ls, uniqueKey } from "./support/target.mjs";
import { invalidArgument as isInvalidArgument } from "./support/errors.mjs";

const { lock, LockError } = ls;

await failOnUnhandledRejections();

/** An InvalidArgumentError of this build (a LockError) whose message matches `pattern`. */
const invalidArgument = (pattern) => isInvalidArgument(pattern, LockError);

describe("acquire() and run() options", () => {
  const misspelt = [
    [{ timeOut: 5_000 }, /unknown option `timeOut`.*did you mean `timeout`\?/],
    [{ wait: 5_000 }, /unknown option `wait` for acquire\(\) and run\(\); the options are timeout, retryDelay/],
    [{ retrydelay: 10 }, /unknown option `retrydelay`.*did you mean `retryDelay`\?/],
    [{ timeout: 100, retry: 10 }, /unknown option `retry`/],
  ];
  for (const [options, message] of misspelt) {
    it(`acquire(${JSON.stringify(options)}) is refused and takes nothing`, async () => {
      const l = lock(uniqueKey("options"));
      await assert.rejects(l.acquire(options), invalidArgument(message));
      assert.equal(await l.isLocked(), false, "a refused acquire leaves the key free");
    });
    it(`run(fn, ${JSON.stringify(options)}) is refused without running fn`, async () => {
      let ran = false;
      await assert.rejects(
        lock(uniqueKey("options")).run(() => (ran = true), options),
        invalidArgument(message),
      );
      assert.equal(ran, false);
    });
  }

  it("names the option whose value is wrong", async () => {
    const l = lock(uniqueKey("options"));
    await assert.rejects(l.acquire({ timeout: "5000" }), invalidArgument(/^locksmith: timeout must be a number/));
    await assert.rejects(l.acquire({ timeout: -1 }), invalidArgument(/^locksmith: timeout must be/));
    await assert.rejects(l.acquire({ retryDelay: 0 }), invalidArgument(/^locksmith: retryDelay must be/));
    await assert.rejects(l.acquire({ retryDelay: Number.NaN }), invalidArgument(/^locksmith: retryDelay must be/));
    await assert.rejects(l.acquire([]), invalidArgument(/acquire options must be an object/));
    await assert.rejects(l.extend(0), (err) => err.code === "INVALID_ARGUMENT" && /^locksmith: ttlMs must be/.test(err.message));
  });

  it("a number where the options go suggests { timeout }", async () => {
    const l = lock(uniqueKey("options"));
    const suggestion = /acquire options must be an object; got number \(5000\): to wait, write \{ timeout: 5000 \}/;
    await assert.rejects(
      l.run(() => {}, 5000),
      invalidArgument(suggestion),
    );
    await assert.rejects(l.acquire(5000), invalidArgument(suggestion));
    await assert.rejects(l.acquire("5s"), invalidArgument(/got string \("5s"\): to wait, write \{ timeout: "5s" \}/));
    assert.equal(await l.isLocked(), false);
  });

  it("a handle's unknown-option message lists only the options it takes", async () => {
    const plain = lock(uniqueKey("options"));
    const listed = (err) => /the options are (.*)$/.exec(err.message)?.[1];
    for (const l of [plain, ls.readWriteLock(uniqueKey("options")).writeLock(), ls.lockAll([uniqueKey("a"), uniqueKey("b")])]) {
      await assert.rejects(l.acquire({ fair: true }), (err) => {
        invalidArgument(/unknown option `fair`/)(err);
        assert.equal(listed(err), "timeout, retryDelay, autoExtend, signal");
        return true;
      });
      await assert.rejects(l.acquireImmediately({ fair: true }), (err) => {
        invalidArgument(/unknown option `fair` for acquireImmediately\(\)/)(err);
        assert.equal(listed(err), "signal");
        return true;
      });
      // permits itself keeps its own refusal.
      await assert.rejects(l.acquire({ permits: 2 }), invalidArgument(/permits is a semaphore's option/));
    }
    const sem = ls.semaphore(uniqueKey("options"), 3);
    await assert.rejects(sem.acquire({ fair: true }), (err) => listed(err) === "timeout, retryDelay, autoExtend, signal, permits");
    await assert.rejects(sem.acquireImmediately({ fair: true }), (err) => listed(err) === "signal, permits");
  });

  it("accepts the known options, and undefined values for them", async () => {
    const l = lock(uniqueKey("options"));
    assert.equal(await l.acquire({ timeout: 10, retryDelay: 5 }), true);
    assert.equal(await l.release(), true);
    assert.equal(await l.acquire({ timeout: undefined, retryDelay: undefined }), true);
    assert.equal(await l.release(), true);
  });
});
