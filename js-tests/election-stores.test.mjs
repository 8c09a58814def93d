// Leader election on every store with a server (or a file) in the build under test: a
// leader in a child process is SIGKILLed and a standby here takes over within the
// store's effective TTL + its retry delay + 250 ms; a resign, or the leader's store closed
// on shutdown, hands over within the retry delay + 250 ms; terms grow. The scenarios and
// the stores are support/takeover.mjs's, which the bench measures with too (bench/election.mjs).
// Each takeover time is printed.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { servers } from "./histories/run.mjs";
import { ENTRY } from "./support/child.mjs";
import { handoverAfterClose, handoverAfterResign, RETRY_MS, takeoverAfterKill, takeoverStores } from "./support/takeover.mjs";
import { TARGET, ls, uniqueKey } from "./support/target.mjs";

const build = { ls, entry: ENTRY };
// What a loaded two-core machine adds to each bound, beyond the 250 ms.
const SLACK_MS = 750;

const s = servers();
after(() => s.stop());

for (const row of takeoverStores(s)) {
  if (row.native && TARGET === "wasm") continue;
  describe(`election() on ${row.name}`, () => {
    let spec;
    const scenario = async (name) => ({ name: uniqueKey(name), spec: (spec ??= await row.spec()), ttlMs: row.ttlMs, retryMs: RETRY_MS });

    it("a standby takes over from a SIGKILLed leader within the TTL + retry delay + 250 ms; an observer sees it as soon", async () => {
      const { ms, waited, terms, resigned, observedMs } = await takeoverAfterKill(build, await scenario("killed"));
      assert.equal(waited, true, "the standby waits while the leader lives");
      const bound = row.ttlMs + RETRY_MS + 250;
      console.log(`# ${row.name} (${TARGET}): takeover ${Math.round(ms)} ms after SIGKILL (bound ${bound} ms), observed after ${Math.round(observedMs)} ms`);
      assert.ok(ms <= bound + SLACK_MS, `took over ${Math.round(ms)} ms after the kill; the bound is ${bound} ms`);
      assert.ok(observedMs !== null && observedMs <= bound + SLACK_MS, `an observer saw the change ${observedMs} ms after the kill; the bound is ${bound} ms`);
      assert.ok(terms[1] > terms[0], `terms grow: ${terms[0]} then ${terms[1]}`);
      assert.equal(resigned, true);
    });

    it("a resign hands over within the retry delay + 250 ms; an observer sees it as soon", async () => {
      const { ms, terms, resigned, observedMs } = await handoverAfterResign(build, await scenario("resign"));
      assert.equal(resigned, true);
      console.log(`# ${row.name} (${TARGET}): handover ${Math.round(ms)} ms after resign(), observed after ${Math.round(observedMs)} ms`);
      assert.ok(ms <= RETRY_MS + 250 + SLACK_MS, `handed over ${Math.round(ms)} ms after the resign`);
      assert.ok(observedMs !== null && observedMs <= RETRY_MS + 250 + SLACK_MS, `an observer saw the change ${observedMs} ms after the resign`);
      assert.ok(terms[1] > terms[0]);
    });

    it("a leader's clean shutdown (its store's close()) hands over within the retry delay + 250 ms", {
      skip: row.noClose && "no close() of its own",
    }, async () => {
      const { ms, endedWithStore, observedMs } = await handoverAfterClose(build, await scenario("close"));
      assert.equal(endedWithStore, true, "the leadership ended with the store");
      console.log(`# ${row.name} (${TARGET}): handover ${Math.round(ms)} ms after close(), observed after ${Math.round(observedMs)} ms`);
      assert.ok(ms <= RETRY_MS + 250 + SLACK_MS, `handed over ${Math.round(ms)} ms after the close`);
      assert.ok(observedMs !== null && observedMs <= RETRY_MS + 250 + SLACK_MS, `an observer saw the change ${observedMs} ms after the close`);
    });
  });
}
