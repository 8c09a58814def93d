// Fair locks and semaphores on every store with fair queues in the build under test,
// across processes: the head of a queue is SIGKILLed while the key is held; the next
// waiter is granted once the dead waiter's place has run out (its TTL from its latest
// attempt), within that lease + 1 s, and not at the release, as an unfair store would.
// A lock's queue and a semaphore's (of one permit) are run side by side, on keys of their
// own. The scenario is support/fair-head.mjs's; the stores are support/takeover.mjs's
// rows marked `fair`.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { servers } from "./histories/run.mjs";
import { ENTRY } from "./support/child.mjs";
import { nextAfterHeadKilled } from "./support/fair-head.mjs";
import { takeoverStores } from "./support/takeover.mjs";
import { TARGET, ls, uniqueKey } from "./support/target.mjs";

const build = { ls, entry: ENTRY };
// What a loaded two-core machine adds to the bound.
const SLACK_MS = 750;

const s = servers();
after(() => s.stop());

for (const row of takeoverStores(s).filter((r) => r.fair)) {
  if (row.native && TARGET === "wasm") continue;
  describe(`fair locks and semaphores on ${row.name}`, () => {
    it("a SIGKILLed head of the queue keeps its place for its lease, then the next waiter is granted within the lease + 1 s", async () => {
      const spec = await row.spec();
      const kinds = ["lock", "semaphore"];
      const runs = await Promise.all(kinds.map((kind) => nextAfterHeadKilled(build, { key: uniqueKey(`fair-head-${kind}`), spec, ttlMs: row.ttlMs, kind })));
      for (const [i, { ms, waited, headGranted }] of runs.entries()) {
        const what = `${row.name}'s fair ${kinds[i]}`;
        console.log(`# ${what} (${TARGET}): next waiter granted ${Math.round(ms)} ms after the head of the queue was SIGKILLed (lease ${row.ttlMs} ms)`);
        assert.equal(waited, true, `${what}: the next waiter waits while the key is held`);
        assert.equal(headGranted, false, what);
        assert.ok(
          ms <= row.ttlMs + 1_000 + SLACK_MS,
          `${what}: granted ${Math.round(ms)} ms after the kill; the bound is the lease + 1 s (${row.ttlMs + 1_000} ms)`,
        );
        // The dead waiter asked at most a retry delay before its death: its place outlived the release.
        assert.ok(
          ms >= row.ttlMs / 2,
          `${what}: granted ${Math.round(ms)} ms after the kill, before the head's place (${row.ttlMs} ms from its last attempt) ran out`,
        );
      }
    });
  });
}
