// Waiters on the native memory store: each release hands the key to the next waiter at
// once, however many are queued, instead of leaving the rest to sleep out their retry
// delay.
import assert from "node:assert/strict";
import { it } from "node:test";

import { ls, sleep, TARGET, uniqueKey } from "./support/target.mjs";

const { lock } = ls;

it("four waiters with a 5 s retry delay all get the key within moments of each release", {
  // The WebAssembly memory store polls at the retry delay: on workerd a waiter woken by
  // another request's release would run in that request's context.
  skip: TARGET !== "native" && "the wasm memory store polls",
}, async () => {
  const key = uniqueKey("waiters");
  const holder = lock(key);
  assert.equal(await holder.acquire(), true);
  const start = performance.now();
  const waiters = Array.from({ length: 4 }, async () => {
    const l = lock(key);
    assert.equal(await l.acquire({ timeout: 20_000, retryDelay: 5_000 }), true);
    const at = performance.now() - start;
    await sleep(20);
    assert.equal(await l.release(), true);
    return at;
  });
  await sleep(100);
  await holder.release();
  const times = (await Promise.all(waiters)).sort((a, b) => a - b);
  // Released at 100 ms, each holds 20 ms: about 100, 120, 140, 160. A waiter that
  // missed its wake-up would come in at 5 s or later.
  assert.ok(times[3] < 2_000, `acquired at ${times.map(Math.round).join(", ")} ms`);
  assert.ok(times[0] >= 90, `not before the release: ${Math.round(times[0])} ms`);
});
