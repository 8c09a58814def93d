// The Redis driver's state machine (js/redis/driver.mjs) without a server: the real
// engine of the build under test (LOCKSMITH_TARGET) behind a scripted socket port
// (js-tests/support/fake-redis.mjs), for the faults a real server cannot produce on
// cue. Each test is one defect the driver once had.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { defaultAnswer, fakeRedis, keySlot, resp, roleOf } from "../support/fake-redis.mjs";
import { SCRIPTS } from "../../js/gen/redis-scripts.mjs";
import { ls, sleep } from "../support/target.mjs";
import { eventually, until } from "../support/wait.mjs";

const { RedisLockStore, lock } = ls;
const TEST_SOCKETS = Symbol.for("locksmith.test.redisSockets");

/** Connects through `fake`'s port (the port applies to this connect only). */
async function connectThrough(fake, options) {
  RedisLockStore[TEST_SOCKETS] = fake.port;
  try {
    return await RedisLockStore.connect(options);
  } finally {
    delete RedisLockStore[TEST_SOCKETS];
  }
}

after(() => delete RedisLockStore[TEST_SOCKETS]);

const isSentinel = (socket) => socket.target.port === 26379;

describe("the Redis driver, over a scripted socket", () => {
  it("a socket's handshake survives a Sentinel lookup that outlasts the engine's reset: locks stay in their database", { timeout: 30_000 }, async () => {
    let slowLookup = false;
    let lookups = 0;
    const fake = fakeRedis({
      respond(socket, args) {
        if (isSentinel(socket)) {
          if (args[0] === "SENTINEL" && args[1] === "get-master-addr-by-name") {
            lookups += 1;
            const answer = resp(["127.0.0.1", "6379"]);
            if (!slowLookup) return answer;
            // Past the command timeout and the engine's 10 s reset.
            setTimeout(() => socket.send(answer), 10_600);
            return null;
          }
          if (args[0] === "SENTINEL") return ["config-epoch", "1"];
          return defaultAnswer(args);
        }
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, {
      sentinels: ["redis://127.0.0.1:26379"],
      masterName: "m",
      db: 3,
      commandTimeoutMs: 300,
      connectTimeoutMs: 20_000,
    });
    try {
      // The master goes; the next lookup is slow; a call waits on it meanwhile.
      slowLookup = true;
      const first = fake.sockets.find((s) => roleOf(s) === "data" && !isSentinel(s));
      first.close();
      await sleep(50);
      await assert.rejects(store.isLocked("k"), { code: "STORE_UNAVAILABLE" });
      await sleep(10_900);
      assert.ok(lookups >= 2, "the store asked the Sentinel again");
      slowLookup = false;
      const held = lock("in-db-3", 5_000, store);
      assert.equal(await held.acquire({ timeout: 3_000 }), true);
      await held.release();
      // Every data socket began with its handshake: SELECT 3 before any lock command.
      const data = fake.sockets.filter((s) => !isSentinel(s) && roleOf(s) !== "subscriber" && s.commands.length > 0);
      assert.ok(data.length >= 2, `a second data socket was made (${data.length})`);
      for (const socket of data) {
        const select = socket.commands.findIndex((args) => args[0] === "SELECT");
        const firstLock = socket.commands.findIndex((args) => args[0] === "EVALSHA" || args[0] === "EXISTS");
        if (firstLock < 0) continue;
        assert.ok(select >= 0 && select < firstLock, `SELECT 3 went before the locks: ${JSON.stringify(socket.commands.map((a) => a[0]))}`);
        assert.deepEqual(socket.commands[select], ["SELECT", "3"]);
      }
    } finally {
      await store.close();
    }
  });

  it("replies split across reads of one reused buffer (as Deno reads) are read whole: Sentinel, data and subscriber", async () => {
    const split = (value) => {
      const text = typeof value === "string" && /^[-+:$*]/.test(value) ? value : resp(value);
      const at = Math.max(1, Math.floor(text.length / 2));
      return { chunks: [text.slice(0, at), text.slice(at)] };
    };
    const fake = fakeRedis({
      reuseBuffer: true,
      respond(socket, args) {
        if (isSentinel(socket)) {
          if (args[1] === "get-master-addr-by-name") return split(["127.0.0.1", "6379"]);
          if (args[0] === "SENTINEL") return split(["config-epoch", "1"]);
        }
        return split(defaultAnswer(args));
      },
    });
    const store = await connectThrough(fake, { sentinels: ["redis://127.0.0.1:26379"], masterName: "m" });
    try {
      const held = lock("split", 5_000, store);
      assert.equal(await held.acquire(), true);
      assert.equal(held.fencingToken, 7, "the token of a reply read from two reads");
      assert.equal(await store.isLocked("split"), false, "EXISTS 0, read whole from two reads");
      await held.release();
    } finally {
      await store.close();
    }
  });

  it("a reshard that moves a waiter's channel does not turn its subscriber into a reconnect loop", { timeout: 20_000 }, async () => {
    // One node serves every slot until the waiter subscribes; then its channel's slot
    // is served by a second node.
    let moved = false;
    const A = 7001;
    const B = 7002;
    const slots = () => (moved ? [[0, 16383, ["127.0.0.1", B]]] : [[0, 16383, ["127.0.0.1", A]]]);
    const fake = fakeRedis({
      respond(socket, args) {
        const name = args[0].toUpperCase();
        if (name === "CLUSTER") return slots();
        if (name === "SSUBSCRIBE" && socket.target.port === A) {
          moved = true;
          return { error: `MOVED ${keySlot(args[1])} 127.0.0.1:${B}` };
        }
        if (name === "EVALSHA" && socket.target.port === A && moved) return { error: `MOVED ${keySlot(args[3])} 127.0.0.1:${B}` };
        // The key is held on both nodes: every attempt is refused.
        if (name === "EVALSHA") return 0;
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, { cluster: [`redis://127.0.0.1:${A}`] });
    try {
      const waiter = lock("busy", 5_000, store);
      const before = fake.sockets.length;
      assert.equal(await waiter.acquire({ timeout: 2_000, retryDelay: 1_000 }), false);
      const during = fake.sockets.slice(before);
      const subscribersOnA = fake.sockets.filter((s) => s.target.port === A && roleOf(s) === "subscriber");
      assert.ok(subscribersOnA.length <= 1, `one subscriber socket on the old node, not a redial loop (${subscribersOnA.length})`);
      assert.ok(during.length <= 8, `a few sockets during the wait (${during.map((s) => `${s.target.port}:${roleOf(s)}`).join(" ")})`);
      assert.ok(
        fake.sockets.some((s) => s.target.port === B && roleOf(s) === "subscriber"),
        "the waiter subscribed on the new node",
      );
    } finally {
      await store.close();
    }
  });

  it("an idle store whose server is down does not reconnect when another store writes", async () => {
    let downPort = null;
    const fake = fakeRedis({ accept: (target) => target.port !== downPort });
    const idle = await connectThrough(fake, "redis://127.0.0.1:6390");
    const busy = await connectThrough(fake, "redis://127.0.0.1:6391");
    try {
      downPort = 6390;
      fake.sockets.find((s) => s.target.port === 6390).close();
      await sleep(50);
      const dialsBefore = fake.sockets.filter((s) => s.target.port === 6390).length;
      for (let i = 0; i < 50; i++) {
        await busy.isLocked(`k${i}`);
        await sleep(10);
      }
      const dials = fake.sockets.filter((s) => s.target.port === 6390).length - dialsBefore;
      assert.equal(dials, 0, "no attempt to reach the idle store's server");
      // Its next call reconnects (and fails here: the server is down).
      await assert.rejects(idle.isLocked("k"), { code: "STORE_UNAVAILABLE" });
    } finally {
      await idle.close();
      await busy.close();
    }
  });

  it("close() ends the Sentinel exchanges in flight", async () => {
    let answer = true;
    const fake = fakeRedis({
      respond(socket, args) {
        if (isSentinel(socket) && args[0] === "SENTINEL") {
          if (!answer) return null; // never answers
          return args[1] === "get-master-addr-by-name" ? ["127.0.0.1", "6379"] : ["config-epoch", "1"];
        }
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, { sentinels: ["redis://127.0.0.1:26379"], masterName: "m", connectTimeoutMs: 20_000 });
    answer = false;
    fake.sockets.find((s) => !isSentinel(s) && roleOf(s) === "data").close();
    await sleep(20);
    // A call makes the store look for the master again; the Sentinel does not answer.
    const call = store.isLocked("k").catch((err) => err);
    await sleep(100);
    const lookup = fake.sockets.filter((s) => isSentinel(s) && !s.destroyed && s.commands.some((a) => a[1] === "get-master-addr-by-name"));
    assert.ok(lookup.length >= 1, "a lookup is in flight");
    await store.close();
    await sleep(20);
    assert.ok(
      lookup.every((s) => s.destroyed),
      "close() ended the lookup's socket",
    );
    const err = await call;
    assert.ok(err instanceof Error, "the waiting call failed");
  });

  it("a READONLY reply (a demoted master) settles every call of its chunk before the socket is dropped", { timeout: 10_000 }, async () => {
    let demoted = false;
    const fake = fakeRedis({
      respond(socket, args) {
        if (isSentinel(socket)) {
          if (args[1] === "get-master-addr-by-name") return ["127.0.0.1", "6379"];
          if (args[0] === "SENTINEL") return ["config-epoch", "1"];
        }
        if (demoted && args[0] === "EXISTS") {
          // The first call is refused as on a replica; the two behind it get no answer.
          return args[1].endsWith("{x}") ? { error: "READONLY You can't write against a read only replica." } : null;
        }
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, { sentinels: ["redis://127.0.0.1:26379"], masterName: "m", commandTimeoutMs: 5_000 });
    try {
      demoted = true;
      const started = performance.now();
      const outcomes = await Promise.all(
        ["x", "y", "z"].map((key) =>
          store.isLocked(key).then(
            (v) => `answered ${v}`,
            (err) => err.code,
          ),
        ),
      );
      assert.deepEqual(outcomes, ["STORE_UNAVAILABLE", "STORE_UNAVAILABLE", "STORE_UNAVAILABLE"], "every call settled, the refused one too");
      assert.ok(performance.now() - started < 2_000, "at once, not at the command timeout");
    } finally {
      await store.close();
    }
  });

  it("a reply after its socket was replaced is not taken for a live request's", async () => {
    let held = false;
    const fake = fakeRedis({
      respond(_socket, args) {
        // While `held`, EXISTS gets no answer: a request stays in flight.
        if (args[0] === "EXISTS" && held) return null;
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, "redis://127.0.0.1:6393");
    try {
      const first = fake.sockets[0];
      first.close();
      await sleep(20);
      held = true;
      const pending = store.isLocked("k");
      await sleep(50);
      const live = fake.sockets.at(-1);
      assert.notEqual(live, first, "a new socket carries the call");
      // The old socket speaks: ":1" would answer the pending EXISTS with true if taken.
      first.on.data(new TextEncoder().encode(":1\r\n"));
      first.on.close();
      const dials = fake.sockets.length;
      live.send(":0\r\n");
      assert.equal(await pending, false, "the live socket's answer, not the stale one");
      assert.equal(fake.sockets.length, dials, "no reconnect for the stale socket's close");
    } finally {
      await store.close();
    }
  });

  it("a plain lock's extend and release send what they did; an election's add its value key (to expire and delete it with the hold)", async () => {
    const fake = fakeRedis();
    const store = await connectThrough(fake, "redis://127.0.0.1:6397");
    try {
      const election = "\u0001election:e";
      for (const key of ["k", election]) {
        assert.equal(await store.extend(key, "o", 5_000), true);
        assert.equal(await store.release(key, "o"), true);
      }
      const scripts = fake.sockets
        .flatMap((s) => s.commands)
        .filter((a) => a[0] === "EVALSHA" && (a[1] === SCRIPTS.extend.sha || a[1] === SCRIPTS.release.sha))
        .map((a) => a.slice(2));
      const E = `locksmith:{${election}}`;
      assert.deepEqual(scripts, [
        ["2", "locksmith:{k}", "locksmith:{k}:fence", "o", "5000", "6000"],
        ["1", "locksmith:{k}", "o"],
        ["3", E, `${E}:fence`, `${E}:value`, "o", "5000", "6000"],
        ["2", E, `${E}:value`, "o"],
      ]);
    } finally {
      await store.close();
    }
  });

  it("events of a replaced socket are ignored", async () => {
    const fake = fakeRedis();
    const store = await connectThrough(fake, "redis://127.0.0.1:6392");
    try {
      const first = fake.sockets[0];
      first.close();
      await sleep(20);
      assert.equal(await store.isLocked("k"), false, "a new socket serves the call");
      // The old socket speaks again: a stray reply that no request waits for.
      first.on.data(new TextEncoder().encode(":1\r\n"));
      first.on.close();
      assert.equal(await store.isLocked("k"), false, "the store still answers from its live socket");
      assert.equal(fake.sockets.filter((s) => !s.closed).length >= 1, true);
    } finally {
      await store.close();
    }
  });
});

// The side link that holder() and proclaim() run on (an election's observer calls only
// these, its engine idle): it must find the master again by itself.
describe("the side link (holder(), proclaim()), over a scripted socket", () => {
  const HOLDER = SCRIPTS.holder.sha;
  const holderCalls = (fake, port) => fake.sockets.filter((s) => s.target.port === port).flatMap((s) => s.commands.filter((a) => a[1] === HOLDER));
  const sentinelMessage = (fake, from, to) => {
    const watcher = fake.sockets.find((s) => isSentinel(s) && !s.closed && s.commands.some((a) => a[0] === "SUBSCRIBE"));
    assert.ok(watcher !== undefined, "the store watches +switch-master");
    watcher.send(resp(["message", "+switch-master", `m 127.0.0.1 ${from} 127.0.0.1 ${to}`]));
  };
  const closeAll = (fake, port) => {
    for (const s of fake.sockets) if (s.target.port === port) s.close();
  };
  /** The master moves from `from` (down, its sockets closed) to `to`, and the Sentinels say so; then the engine's idle. */
  const failOver = async (fake, state, from, to) => {
    state.master = to;
    state.down.add(from);
    closeAll(fake, from);
    sentinelMessage(fake, from, to);
    await sleep(20);
  };
  /** A Sentinel (port 26379) over masters that answer ROLE by `state.master`; ports in `state.down` refuse connections. */
  const sentinelFake = (state) =>
    fakeRedis({
      accept: (target) => !state.down.has(target.port),
      respond(socket, args) {
        if (isSentinel(socket)) {
          if (args[1] === "get-master-addr-by-name") return ["127.0.0.1", String(state.master)];
          if (args[0] === "SENTINEL") return ["config-epoch", "1"];
          return defaultAnswer(args);
        }
        if (args[0] === "ROLE") return socket.target.port === state.master ? ["master", 0, []] : ["slave", "127.0.0.1", state.master, "connected", 0];
        return defaultAnswer(args);
      },
    });

  it("Cluster: a side link to a master that died reads the slot map again and goes to the new master", { timeout: 20_000 }, async () => {
    const [C, A, A2] = [7101, 7102, 7103];
    // A key of the upper half of the slots, which A serves and then A2.
    const key = Array.from({ length: 200 }, (_, i) => `observed-${i}`).find((k) => keySlot(k) >= 8192);
    let failedOver = false;
    let busyReplies = 0;
    const fake = fakeRedis({
      accept: (target) => !(failedOver && target.port === A),
      respond(_socket, args) {
        if (args[0] === "CLUSTER")
          return [
            [0, 8191, ["127.0.0.1", C]],
            [8192, 16383, ["127.0.0.1", failedOver ? A2 : A]],
          ];
        if (args[1] === HOLDER && busyReplies > 0) {
          busyReplies -= 1;
          return { error: "TRYAGAIN Multiple keys request during rehashing of slot" };
        }
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, { cluster: [`redis://127.0.0.1:${C}`] });
    try {
      assert.equal(await store.holder(key), null);
      assert.equal(holderCalls(fake, A).length, 1, "straight to the key's master");
      // A fails over to A2; the engine (idle, its socket on C) sees nothing of it.
      failedOver = true;
      closeAll(fake, A);
      await sleep(20);
      assert.equal(await eventually(() => store.holder(key), 3_000), null, "holder() works again, on the new master");
      assert.ok(holderCalls(fake, A2).length >= 1, "the new master answered");
      const dialsToA = fake.sockets.filter((s) => s.target.port === A).length;
      assert.ok(dialsToA <= 3, `the dead master was dialed ${dialsToA} times`);
      // A TRYAGAIN (or CLUSTERDOWN): the slot map is read again too.
      const reads = () => fake.sockets.flatMap((s) => s.commands).filter((a) => a[0] === "CLUSTER").length;
      // A slot-map read the failover started is over before the count.
      await sleep(250);
      const before = reads();
      busyReplies = 1;
      await assert.rejects(store.holder(key), { code: "STORE_UNAVAILABLE" });
      await until("a CLUSTER SLOTS after TRYAGAIN", () => reads() > before, 2_000);
    } finally {
      await store.close();
    }
  });

  it("Cluster: MOVED past the redirects it follows is STORE_UNAVAILABLE (a topology in motion), not STORE_ERROR", async () => {
    const [P, Q] = [7201, 7202];
    const fake = fakeRedis({
      respond(socket, args) {
        if (args[0] === "CLUSTER") return [[0, 16383, ["127.0.0.1", P]]];
        // Each node says the other serves the key.
        if (args[1] === HOLDER) return { error: `MOVED ${keySlot(args[3])} 127.0.0.1:${socket.target.port === P ? Q : P}` };
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, { cluster: [`redis://127.0.0.1:${P}`] });
    try {
      const err = await store.holder("k").catch((e) => e);
      assert.equal(err?.code, "STORE_UNAVAILABLE", String(err));
      assert.match(err.message, /MOVED/);
    } finally {
      await store.close();
    }
  });

  it("Sentinel: a +switch-master back to the engine's master moves the side link off the demoted one", async () => {
    const [M1, M2] = [6381, 6382];
    const state = { master: M1, down: new Set() };
    const fake = sentinelFake(state);
    const store = await connectThrough(fake, { sentinels: ["redis://127.0.0.1:26379"], masterName: "m" });
    try {
      assert.equal(await store.holder("k"), null);
      assert.equal(holderCalls(fake, M1).length, 1);
      // M1 fails; M2 takes over. The engine is idle: it does not reconnect.
      await failOver(fake, state, M1, M2);
      assert.equal(await eventually(() => store.holder("k"), 3_000), null);
      assert.ok(holderCalls(fake, M2).length >= 1, "the side link followed to M2");
      // M1 is back and promoted again; M2 is demoted but stays up (its clients stay connected).
      state.down.delete(M1);
      state.master = M1;
      sentinelMessage(fake, M2, M1);
      await sleep(20);
      const onM2 = holderCalls(fake, M2).length;
      assert.equal(await store.holder("k"), null);
      assert.equal(holderCalls(fake, M2).length, onM2, "nothing more read from the demoted M2");
      assert.equal(holderCalls(fake, M1).length, 2, "read from M1, the master again");
    } finally {
      await store.close();
    }
  });

  it("Sentinel: a side link that cannot reach the master it was told of asks the Sentinels again", async () => {
    const [M1, M2] = [6383, 6384];
    const state = { master: M1, down: new Set() };
    const fake = sentinelFake(state);
    const store = await connectThrough(fake, { sentinels: ["redis://127.0.0.1:26379"], masterName: "m" });
    try {
      assert.equal(await store.holder("k"), null);
      await failOver(fake, state, M1, M2);
      assert.equal(await eventually(() => store.holder("k"), 3_000), null);
      // M2 goes and M1 is master again, and no +switch-master reaches the store.
      state.down.delete(M1);
      state.master = M1;
      state.down.add(M2);
      closeAll(fake, M2);
      await sleep(20);
      assert.equal(await eventually(() => store.holder("k"), 3_000), null);
      assert.equal(holderCalls(fake, M1).length, 2, "read from M1 again");
    } finally {
      await store.close();
    }
  });

  it("a server that is down is not dialed again by every call: the side link backs off as the engine does", async () => {
    let down = false;
    const PORT = 6395;
    const fake = fakeRedis({ accept: () => !down });
    const store = await connectThrough(fake, `redis://127.0.0.1:${PORT}`);
    try {
      assert.equal(await store.holder("k"), null);
      down = true;
      closeAll(fake, PORT);
      await sleep(20);
      const before = fake.sockets.length;
      for (let i = 0; i < 20; i++) {
        const err = await store.holder("k").catch((e) => e);
        assert.equal(err?.code, "STORE_UNAVAILABLE", String(err));
        assert.match(err.message, /ECONNREFUSED/, "the failure says why");
      }
      const dials = fake.sockets.length - before;
      assert.ok(dials >= 1 && dials <= 3, `${dials} dials for 20 calls`);
      // Back: within the longest wait (reconnectMaxDelayMs, 1 s) it works again.
      down = false;
      assert.equal(await eventually(() => store.holder("k"), 3_000), null);
    } finally {
      await store.close();
    }
  });

  it("a server that refuses the side link (a greeting that turns clients away) is not dialed again by every call", async () => {
    let full = false;
    const PORT = 6397;
    const fake = fakeRedis({
      respond(socket, args) {
        if (full && args[0] === "EVALSHA") {
          socket.send(resp({ error: "ERR max number of clients reached" }));
          socket.close();
          return null;
        }
        return defaultAnswer(args);
      },
    });
    const store = await connectThrough(fake, `redis://127.0.0.1:${PORT}`);
    try {
      assert.equal(await store.holder("k"), null);
      full = true;
      closeAll(fake, PORT);
      await sleep(20);
      const before = fake.sockets.length;
      const started = performance.now();
      let calls = 0;
      while (performance.now() - started < 600) {
        const err = await store.holder("k").catch((e) => e);
        assert.equal(err?.code, "STORE_UNAVAILABLE", String(err?.message ?? err));
        calls += 1;
        await sleep(10);
      }
      const dials = fake.sockets.length - before;
      // Waits of 50, 100, 200, 400 ms: a handful of dials, not one per call.
      assert.ok(dials >= 1 && dials <= 6, `${dials} dials for ${calls} calls in 600 ms`);
    } finally {
      await store.close();
    }
  });

  it("a call that times out fails alone: a call behind it on the same link gets its own reply", { timeout: 10_000 }, async () => {
    const PORT = 6396;
    let stalled = false;
    const held = [];
    const fake = fakeRedis({
      respond(socket, args) {
        if (stalled && args[1] === HOLDER) {
          held.push(socket);
          return null;
        }
        return defaultAnswer(args);
      },
    });
    // operationTimeoutMs: 100 + 1000 + 1000 ms.
    const store = await connectThrough(fake, { url: `redis://127.0.0.1:${PORT}`, connectTimeoutMs: 100, commandTimeoutMs: 1_000 });
    try {
      assert.equal(await store.holder("k"), null);
      const dials = fake.sockets.length;
      stalled = true;
      const slow = store.holder("slow").catch((e) => e);
      await sleep(1_000);
      const behind = store.holder("behind").catch((e) => e);
      const err = await slow;
      assert.equal(err?.code, "STORE_UNAVAILABLE");
      assert.match(err.message, /did not answer within 2100 ms/);
      // The server answers both, in order: the first reply (a holder) is the timed-out call's,
      // the second (nobody holds "behind") the call behind it's.
      await sleep(200);
      stalled = false;
      assert.equal(held.length, 2);
      held[0].send(resp(["=someone", 5_000, "7", ""]) + resp(null));
      assert.equal(await behind, null, "the call behind got its own reply, not the timed-out one's");
      assert.equal(await store.holder("k"), null);
      assert.equal(fake.sockets.length, dials, "the same link all along");
    } finally {
      await store.close();
    }
  });
});
