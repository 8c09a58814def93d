// A command the server applied but whose answer a lost connection dropped, sent again by
// the client: ioredis resends what a lost connection left unanswered (on by default),
// @upstash/redis retries a request whose connection failed. The second answer must not
// turn a grant into a refusal (a hold left to nobody until its TTL) nor a release into a
// "not held" the caller would take for a lost hold. A real redis-server, behind a proxy
// that drops its answers and then the connection (or a REST endpoint that does so).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { UpstashLockStore } from "../../js/stores/upstash.mjs";
import { SCRIPTS } from "../../js/gen/redis-scripts.mjs";
import { startProxy } from "../histories/proxy.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";
import { startUpstashRest } from "../support/upstash-rest.mjs";

const { Lock, semaphore, readWriteLock } = ls;

failOnUnhandledRejections();

let server;
let proxy;
let rest;
let direct;
before(async () => {
  server = await startRedis();
  proxy = await startProxy({ targetPort: server.port });
  rest = await startUpstashRest(server.url);
  direct = new Redis(server.url);
  // Cached, so each first sending runs (an uncached EVALSHA answers NOSCRIPT, and then
  // its second sending would not find the first one's work).
  for (const script of Object.values(SCRIPTS)) await direct.script("LOAD", script.source);
});
after(async () => {
  await direct.quit();
  await rest.close();
  await proxy.close();
  await server.stop();
});

/**
 * Runs `call` with the server's answers dropped, then cuts the connection: ioredis
 * reconnects and sends it again. `client` must be connected (a command waiting for the
 * connection would be sent once).
 */
async function replayed(client, call) {
  assert.equal(client.status, "ready");
  const before = proxy.stats.lostAnswers;
  proxy.loseAnswers();
  const pending = call();
  pending.catch(() => {});
  // Applied by the server once its answer was dropped; then a little longer, as a late
  // answer would have been.
  const deadline = performance.now() + 5_000;
  while (proxy.stats.lostAnswers === before) {
    assert.ok(performance.now() < deadline, "the server answered within 5 s");
    await sleep(5);
  }
  await sleep(20);
  proxy.cut();
  return pending;
}

for (const fencing of [true, false]) {
  describe(`IoRedisLockStore (fencing ${fencing ? "on" : "off"}): a command sent twice`, () => {
    let client;
    let store;
    before(async () => {
      client = new Redis(proxy.url());
      store = new IoRedisLockStore(client, { fencing });
      await client.ping();
    });
    after(async () => {
      await store.close();
      client.disconnect();
    });

    it("an acquire applied twice is taken, and its hold is the caller's", async () => {
      const key = uniqueKey("replayed-acquire");
      const l = new Lock(key, 10_000, store);
      assert.equal(await replayed(client, () => l.acquire()), true, "the second answer says taken");
      if (fencing) assert.ok(l.fencingToken > 0);
      assert.equal(await new Lock(key, 10_000, store).acquireImmediately(), false, "held");
      assert.equal(await l.release(), true, "released by its owner: nothing left to nobody");
      assert.equal(await direct.exists(store.lockKey(key)), 0);
    });

    it("an acquire applied twice counts its TTL again", async () => {
      const key = uniqueKey("replayed-ttl");
      const l = new Lock(key, 10_000, store);
      assert.equal(await l.acquire(), true);
      // The same owner asks again (what a second sending does), with a longer TTL.
      const owner = await direct.get(store.lockKey(key));
      assert.equal(await store.acquire(key, owner, 60_000), true);
      assert.ok((await direct.pttl(store.lockKey(key))) > 30_000, "the TTL counted again");
      assert.equal(await store.acquire(key, "another-owner", 60_000), false);
      await l.release();
    });

    if (!fencing) {
      it("a key of another type reads as held", async () => {
        const key = uniqueKey("replayed-wrongtype");
        await direct.hset(store.lockKey(key), "field", "value");
        assert.equal(await new Lock(key, 10_000, store).acquireImmediately(), false);
        await direct.del(store.lockKey(key));
      });
    }

    it("a release applied twice says the outcome is not known, not that the hold was lost", async () => {
      const key = uniqueKey("replayed-release");
      const l = new Lock(key, 10_000, store);
      assert.equal(await l.acquire(), true);
      await assert.rejects(
        replayed(client, () => l.release()),
        (err) => err.code === "STORE_UNAVAILABLE" && /sent it again/.test(err.message),
      );
      assert.equal(await direct.exists(store.lockKey(key)), 0, "the first sending released it");
      assert.equal(await new Lock(key, 10_000, store).acquireImmediately(), true);
    });
  });
}

describe("IoRedisLockStore: semaphores and read-write locks, commands sent twice", () => {
  let client;
  let store;
  before(async () => {
    client = new Redis(proxy.url());
    store = new IoRedisLockStore(client);
    await client.ping();
  });
  after(async () => {
    await store.close();
    client.disconnect();
  });

  for (const permits of [1, 2]) {
    it(`a semaphore acquire of ${permits} permit(s) applied twice is taken once`, async () => {
      const key = uniqueKey("replayed-semaphore");
      const s = semaphore(key, 3, 10_000, store);
      assert.equal(await replayed(client, () => s.acquire({ permits })), true);
      assert.equal(await s.count(), permits, "counted once");
      assert.ok(s.fencingToken > 0);
      await assert.rejects(
        replayed(client, () => s.release()),
        { code: "STORE_UNAVAILABLE" },
      );
      assert.equal(await s.count(), 0, "given back by the first sending");
    });
  }

  for (const kind of ["read", "write"]) {
    it(`a ${kind} lock's acquire applied twice is taken`, async () => {
      const rw = readWriteLock(uniqueKey(`replayed-${kind}`), 10_000, store);
      const l = kind === "read" ? rw.readLock() : rw.writeLock();
      assert.equal(await replayed(client, () => l.acquire()), true);
      assert.equal(await rw.writeLock().acquireImmediately(), false, "held");
      assert.equal(await l.release(), true);
      assert.equal(await rw.writeLock().acquireImmediately(), true, "free again");
    });
  }
});

describe("the scripts, applied twice by the same owner", () => {
  const run = (script, keys, args) =>
    direct.evalsha(script.sha, keys.length, ...keys, ...args).catch(() => direct.eval(script.source, keys.length, ...keys, ...args));

  it("acquire_all takes its own keys again, with fresh tokens and TTLs, and refuses another owner's", async () => {
    const [a, b] = [uniqueKey("all-a"), uniqueKey("all-b")];
    const keys = [a, `${a}:fence`, `${a}:fair`, b, `${b}:fence`, `${b}:fair`];
    const first = String(await run(SCRIPTS.acquireAll, keys, ["owner-1", "1000", "2000"]));
    const second = String(await run(SCRIPTS.acquireAll, keys, ["owner-1", "5000", "6000"]));
    const [t1, t2] = [first.split(" ").map(Number), second.split(" ").map(Number)];
    assert.equal(t2.length, 2);
    assert.ok(t2[0] > t1[0] && t2[1] > t1[1], `${second} after ${first}`);
    assert.ok((await direct.pttl(a)) > 4_000 && (await direct.pttl(b)) > 4_000, "the TTLs counted again");
    assert.equal(Number(await run(SCRIPTS.acquireAll, keys, ["owner-2", "5000", "6000"])), -1);
  });

  it("a semaphore holder asking for other permits or another limit is refused", async () => {
    const h = uniqueKey("sem-raw");
    const keys = [h, `${h}:limit`, `${h}:fence`, `${h}:weights`];
    const take = (owner, limit, permits) => run(SCRIPTS.semaphoreAcquire, keys, [owner, "5000", String(limit), "1000", String(permits)]).then(Number);
    assert.ok((await take("a", 3, 1)) > 0);
    assert.ok((await take("b", 3, 1)) > 0);
    assert.ok((await take("a", 3, 1)) > 0, "the same permits again: taken");
    assert.equal(await take("a", 3, 2), 0, "more permits than it holds");
    assert.equal(await take("a", 5, 1), 0, "another limit");
    assert.ok((await take("c", 3, 1)) > 0, "the third permit");
    assert.equal(await take("d", 3, 1), 0, "full: the repeats took nothing more");
    assert.equal(await direct.get(`${h}:limit`), "3");
    const w = uniqueKey("sem-raw-weights");
    const wkeys = [w, `${w}:limit`, `${w}:fence`, `${w}:weights`];
    const takeW = (owner, permits) => run(SCRIPTS.semaphoreAcquire, wkeys, [owner, "5000", "4", "1000", String(permits)]).then(Number);
    assert.ok((await takeW("a", 2)) > 0);
    assert.ok((await takeW("a", 2)) > 0, "the same two permits again");
    assert.equal(await takeW("a", 1), 0, "fewer permits than it holds");
    assert.ok((await takeW("b", 2)) > 0);
    assert.equal(await takeW("c", 1), 0, "4 of 4 taken");
  });

  it("a read-write holder asking for the other kind is refused", async () => {
    const h = uniqueKey("rw-raw");
    const keys = [h, `${h}:writer`, `${h}:claim`, `${h}:fence`, `${h}:readers`, `${h}:turn`];
    const take = (owner, kind) => run(SCRIPTS.rwlockAcquire, keys, [owner, "5000", kind, "1000"]).then(Number);
    assert.ok((await take("r1", "read")) > 0);
    assert.ok((await take("r2", "read")) > 0);
    assert.ok((await take("r1", "read")) > 0, "the same read hold again");
    assert.equal(await take("r1", "write"), 0, "a reader beside another reader does not write");
    assert.equal(await direct.get(`${h}:writer`), null);
    const w = uniqueKey("rw-raw-writer");
    const wkeys = [w, `${w}:writer`, `${w}:claim`, `${w}:fence`, `${w}:readers`, `${w}:turn`];
    const takeW = (owner, kind) => run(SCRIPTS.rwlockAcquire, wkeys, [owner, "5000", kind, "1000"]).then(Number);
    assert.ok((await takeW("w", "write")) > 0);
    assert.ok((await takeW("w", "write")) > 0, "the same write hold again");
    assert.equal(await takeW("w", "read"), 0, "the writer does not read beside itself");
  });
});

describe("UpstashLockStore: a request retried after its answer was lost", () => {
  let store;
  before(() => {
    const client = new Upstash({ url: rest.url, token: rest.token, enableTelemetry: false, retry: { retries: 3, backoff: () => 20 } });
    store = new UpstashLockStore(client);
  });
  after(() => store.close());

  it("an acquire applied twice is taken, and its hold is the caller's", async () => {
    const key = uniqueKey("upstash-replayed");
    const l = new Lock(key, 10_000, store);
    rest.loseAnswers(1);
    assert.equal(await l.acquire(), true, "answered by the retry");
    assert.equal(rest.answersToLose(), 0, "the first sending's answer was lost");
    assert.ok(l.fencingToken > 0);
    assert.equal(await l.release(), true);
    assert.equal(await direct.exists(store.lockKey(key)), 0);
  });

  it("a semaphore acquire applied twice is taken once", async () => {
    const s = semaphore(uniqueKey("upstash-replayed-sem"), 2, 10_000, store);
    rest.loseAnswers(1);
    assert.equal(await s.acquire(), true, "answered by the retry");
    assert.equal(rest.answersToLose(), 0, "the first sending's answer was lost");
    assert.equal(await s.count(), 1);
    assert.equal(await s.release(), true);
  });
});
