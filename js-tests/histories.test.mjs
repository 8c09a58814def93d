// The history checker (js-tests/histories/): a bounded pass per store — many async
// clients (and processes) on one key set, every primitive, random waits, extends near
// expiry, auto-extend — checked for two holders, a semaphore over its limit, a writer
// beside anyone, fencing tokens out of grant order, early or late signals and success
// after "lost". The checker's own test feeds it broken histories, and a broken store.
// A longer run: `node js-tests/histories/run.mjs --seconds 60` (see docs/RELIABILITY.md).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";

import { checkHistory } from "./histories/checker.mjs";
import { driftMs, now } from "./histories/client.mjs";
import { startProxy } from "./histories/proxy.mjs";
import { seeded, newSeed } from "./histories/random.mjs";
import { runHistory } from "./histories/run.mjs";
import { startRedis } from "./redis-server.mjs";
import { TARGET, ls, sleep } from "./target.mjs";

const SECONDS = Number(process.env.LOCKSMITH_HISTORY_SECONDS ?? 3);

/** Runs a history and asserts it is clean, printing the seed to replay it. */
async function assertClean(t, options) {
  const run = await runHistory({ seconds: SECONDS, ...options });
  t.diagnostic(`seed ${run.seed}: ${run.result.holds} holds, ${run.result.violations.length} violations, ${run.result.lateSignals} late signals`);
  assert.ok(run.result.holds > 50, `enough holds to mean something (${run.result.holds}); seed ${run.seed}`);
  for (const kind of ["lock", "semaphore", "read", "write"]) {
    assert.ok(run.holds.some((h) => h.kind === kind), `some ${kind} holds; seed ${run.seed}`);
  }
  assert.deepEqual(run.result.violations.slice(0, 5), [], `no violations (${JSON.stringify(run.result.byType)}); replay with seed ${run.seed}`);
  return run;
}

describe(`history checker (${TARGET})`, () => {
  describe("the checker itself", () => {
    const hold = (over) => ({
      client: "0.0",
      kind: "lock",
      key: "k",
      ttl: 100,
      auto: false,
      acquire: { send: 0, reply: 1, token: 1 },
      extends: [],
      release: { send: 20, reply: 21, ok: true, code: null },
      signal: { at: 21, reason: "released", code: 20 },
      endAt: 1_000,
      ...over,
    });
    const types = (holds) => Object.keys(checkHistory(holds).byType).sort();

    it("passes a clean history", () => {
      const clean = [
        hold({}),
        hold({ client: "0.1", acquire: { send: 15, reply: 25, token: 2 }, release: { send: 40, reply: 41, ok: true, code: null }, signal: { at: 41, reason: "released" } }),
        hold({ kind: "read", client: "0.2" }),
        hold({ kind: "read", client: "0.3", acquire: { send: 2, reply: 3, token: 2 } }),
        hold({ kind: "semaphore", limit: 2 }),
        hold({ kind: "semaphore", limit: 2, client: "0.4", acquire: { send: 2, reply: 3, token: 2 } }),
      ];
      assert.deepEqual(checkHistory(clean).violations, []);
    });

    it("reports two overlapping plain holders", () => {
      const result = checkHistory([hold({}), hold({ client: "0.1", acquire: { send: 2, reply: 5, token: 2 } })]);
      assert.deepEqual(Object.keys(result.byType), ["overlap"]);
      assert.match(result.violations[0].message, /two holders of lock "k"/);
      assert.equal(result.violations[0].holds.length, 2, "both holds, for debugging");
    });

    it("reports a semaphore over its limit", () => {
      const sem = (client, token) => hold({ kind: "semaphore", limit: 2, client, acquire: { send: token, reply: token + 1, token } });
      assert.deepEqual(types([sem("a", 1), sem("b", 2), sem("c", 3)]), ["over-limit"]);
      assert.deepEqual(types([sem("a", 1), sem("b", 2)]), [], "two of two is fine");
    });

    it("reports a writer with a reader, and with a writer", () => {
      const read = hold({ kind: "read" });
      assert.deepEqual(types([read, hold({ kind: "write", client: "0.1", acquire: { send: 2, reply: 3, token: 2 } })]), ["writer-with-others"]);
      assert.deepEqual(types([hold({ kind: "write" }), hold({ kind: "write", client: "0.1", acquire: { send: 2, reply: 3, token: 2 } })]), ["writer-with-others"]);
    });

    it("reports fencing tokens out of grant order", () => {
      const first = hold({ acquire: { send: 0, reply: 1, token: 50 } });
      const second = hold({ client: "0.1", acquire: { send: 30, reply: 31, token: 7 }, release: { send: 40, reply: 41, ok: true, code: null }, signal: { at: 41, reason: "released" } });
      assert.deepEqual(types([first, second]), ["token-order"]);
      // Grants whose requests overlap in time may come in either order.
      const concurrent = hold({ client: "0.1", acquire: { send: 0.5, reply: 31, token: 7 }, release: { send: 40, reply: 41, ok: true, code: null }, signal: { at: 41, reason: "released" } });
      assert.deepEqual(types([first, concurrent]), []);
    });

    it("reports a late signal, and one that never came", () => {
      const late = hold({ release: { send: 20, reply: 21, ok: true, code: null }, signal: { at: 21 + 300, reason: "released" } });
      assert.deepEqual(types([late]), ["late-signal"]);
      assert.equal(checkHistory([late]).lateSignals, 1);
      // Never released, never extended: gone at its acquire's reply + TTL.
      const never = hold({ release: { send: 500, reply: 501, ok: false, code: "STORE_UNAVAILABLE" }, signal: null });
      assert.deepEqual(types([never]), ["late-signal"]);
      assert.deepEqual(types([hold({ signal: { at: 150, reason: "lost" }, release: null })]), [], "lost by TTL, promptly");
    });

    it("reports an early signal", () => {
      assert.deepEqual(types([hold({ release: null, signal: { at: 50, reason: "lost", code: "LOCK_NOT_HELD" } })]), ["early-signal"]);
      assert.deepEqual(types([hold({ release: null, signal: { at: 97, reason: "lost", code: "LOCK_NOT_HELD" } })]), [], "within the drift allowance");
      assert.deepEqual(types([hold({ signal: { at: 10, reason: "released" } })]), ["early-signal"], "released before release()");
    });

    it("reports an extend that succeeds after lost, and a store that refuses a live holder", () => {
      const afterLost = hold({ release: null, signal: { at: 99, reason: "lost" }, extends: [{ send: 120, reply: 121, ok: true, code: null }] });
      assert.ok(types([afterLost]).includes("after-lost"));
      const refused = hold({ release: { send: 20, reply: 21, ok: false, code: null }, signal: { at: 21, reason: "released" } });
      assert.deepEqual(types([refused]), ["held-but-refused"]);
    });
  });

  // A proxy that let chunks overtake each other would reorder a pipelined connection's
  // commands and make any in-order client pair replies wrongly: this one must not.
  it("the proxy keeps each direction's order under latency", async () => {
    const { createServer, connect } = await import("node:net");
    const echo = createServer((socket) => socket.pipe(socket));
    await new Promise((resolve) => echo.listen(0, "127.0.0.1", resolve));
    const proxy = await startProxy({ targetPort: echo.address().port, latencyMs: 20 });
    try {
      const socket = connect(proxy.port, "127.0.0.1");
      socket.setNoDelay(true);
      await new Promise((resolve) => socket.once("connect", resolve));
      let got = "";
      const sent = [];
      for (let i = 0; i < 200; i++) {
        sent.push(`${i},`);
        socket.write(`${i},`);
        if (i % 10 === 0) await sleep(1);
      }
      const want = sent.join("");
      socket.on("data", (d) => (got += d));
      const deadline = Date.now() + 5_000;
      while (got.length < want.length && Date.now() < deadline) await sleep(10);
      socket.destroy();
      assert.equal(got, want);
    } finally {
      await proxy.close();
      await new Promise((resolve) => echo.close(resolve));
    }
  });

  it("catches a broken guard: a store whose acquire always answers true", async (t) => {
    const run = await runHistory({ store: "broken-memory", processes: 1, clients: 6, seconds: 1.5, client: { kinds: { lock: 1 } } });
    t.diagnostic(`seed ${run.seed}: ${JSON.stringify(run.result.byType)}`);
    assert.ok(run.result.byType.overlap > 0, `the checker saw two holders (seed ${run.seed}): ${JSON.stringify(run.result.byType)}`);
  });

  it("MemoryLockStore: one process, 8 clients", async (t) => {
    await assertClean(t, { store: "memory", processes: 1, clients: 8 });
  });

  // A Lock reused across holds takes pooled native handles: its signal must be the
  // current hold's, never a released one's that had the same generation number.
  it("MemoryLockStore: handles reused across holds", async (t) => {
    await assertClean(t, { store: "memory", processes: 1, clients: 8, client: { reuseHandles: true } });
  });

  describe("RedisLockStore", () => {
    let server;
    let proxy;
    before(async () => {
      server = await startRedis();
      proxy = await startProxy({ targetPort: server.port, latencyMs: 20 });
    });
    after(async () => {
      await proxy?.close();
      await server?.stop();
    });

    it("direct: 2 processes × 6 clients", async (t) => {
      await assertClean(t, { store: { redis: server.url }, processes: 2, clients: 6 });
    });

    it("through a proxy adding 0–20 ms per chunk: 2 processes × 6 clients", async (t) => {
      await assertClean(t, { store: { redis: proxy.url() }, processes: 2, clients: 6 });
    });

    // Over a slow link the store once granted locks it did not hold: replies were
    // matched to the wrong requests, so an acquire took a release's `1` as its
    // fencing token. 12 clients share one connection on 3 keys.
    it("over a slow link, every grant is the server's: a server token, the owner's value in the key, its release true", async () => {
      const seed = newSeed();
      const random = seeded(seed);
      const store = await ls.RedisLockStore.connect(proxy.url());
      const raw = new Redis(server.url);
      const ttl = 120;
      const problems = [];
      let grants = 0;
      const stopAt = now() + 3_000;
      try {
        await Promise.all(
          Array.from({ length: 12 }, async (_, i) => {
            const r = random.fork(i);
            while (now() < stopAt) {
              const key = `slow:${r.int(0, 2)}`;
              const l = new ls.Lock(key, ttl, store);
              const send = now();
              if (!(await l.acquire({ timeout: r.int(0, 120), retryDelay: r.int(1, 10) }))) continue;
              grants += 1;
              const token = l.fencingToken;
              // The acquire script answers the server's clock in microseconds (or one more
              // than the key's last token).
              if (!(Number.isSafeInteger(token) && Math.abs(token / 1_000 - Date.now()) < 3_600_000)) problems.push(`client ${i}: ${key} granted with token ${token}`);
              const { owner } = JSON.parse(l.serialize());
              const value = await raw.get(`locksmith:{${key}}`);
              if (value !== owner && now() < send + ttl - driftMs(ttl)) problems.push(`client ${i}: ${key} granted, but the server holds ${value === null ? "nothing" : "another owner"}`);
              await sleep(r.int(0, 5));
              let lastSet = send;
              if (r.chance(0.3)) {
                const at = now();
                try {
                  await l.extend();
                  lastSet = at;
                } catch (err) {
                  if (at < lastSet + ttl - driftMs(ttl)) problems.push(`client ${i}: ${key}: extend of a live hold failed with ${err.code}`);
                }
              }
              const releasedAt = now();
              const released = await l.release();
              if (!released && releasedAt < lastSet + ttl - driftMs(ttl)) problems.push(`client ${i}: ${key}: its own release answered false`);
            }
          }),
        );
      } finally {
        await store.close();
        raw.disconnect();
      }
      assert.ok(grants > 50, `enough grants (${grants})`);
      assert.deepEqual(problems.slice(0, 10), [], `${problems.length} of ${grants} grants wrong (seed ${seed})`);
    });
  });
});
