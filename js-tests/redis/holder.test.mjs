// holder() and proclaim() on RedisLockStore (both builds): the engine has no op for
// them, so the driver runs holder.lua and proclaim.lua on a side link of its own
// (js/redis/driver.mjs). Beyond the shared contract (holder-contract.test.mjs): the
// token is the one the hold's acquire minted, the value lives in `<lock key>:value` and
// is the hold's only, the stores over users' clients read and write the same keys, and
// the side link reconnects, times out within operationTimeoutMs, is closed by close()
// and does not keep the process alive. Sentinel and Cluster: their own test files.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";

import { ELECTION_KEY_PREFIX } from "../../js/api/defaults.mjs";
import { SCRIPTS } from "../../js/gen/redis-scripts.mjs";
import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { RedisClientStore, storeOptions } from "../../js/stores/redis-client-store.mjs";
import { UpstashLockStore } from "../../js/stores/upstash.mjs";
import { ENTRY, runModule } from "../support/child.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "../support/target.mjs";
import { startUpstashRest } from "../support/upstash-rest.mjs";
import { eventually } from "../support/wait.mjs";

const { Lock, RedisLockStore, election } = ls;

failOnUnhandledRejections();

let server;
let admin;
before(async () => {
  server = await startRedis();
  admin = new Redis(server.url);
});
after(async () => {
  await admin?.quit();
  await server?.stop();
});

describe(`RedisLockStore holder() and proclaim() (${TARGET})`, () => {
  it("holder() gives the fencing token the hold's acquire minted; the value lives in <lock key>:value, the hold's only", async () => {
    const store = await RedisLockStore.connect(server.url);
    try {
      const key = uniqueKey("token");
      const redisKey = `locksmith:{${key}}`;
      const l = new Lock(key, 10_000, store);
      assert.equal(await l.acquire(), true);
      let h = await store.holder(key);
      assert.equal(h.fencingToken, l.fencingToken, "the token of the hold's acquire");
      assert.equal(String(h.fencingToken), await admin.get(`${redisKey}:fence`));
      assert.equal(h.owner, await admin.get(redisKey));
      assert.equal(await store.proclaim(key, h.owner, '{"v":1}', 1), true);
      assert.deepEqual(await admin.hgetall(`${redisKey}:value`), { owner: h.owner, token: String(l.fencingToken), seq: "1", value: '{"v":1}' });
      const valueTtl = await admin.pttl(`${redisKey}:value`);
      assert.ok(valueTtl > 10_000 && valueTtl <= 11_000, `it expires a second after the hold's TTL (${valueTtl} ms)`);
      await l.extend(20_000);
      assert.equal((await store.holder(key)).value, '{"v":1}');
      // A value left by a hold that is over is nobody's, and the next read tidies it.
      const owner = h.owner;
      assert.equal(await l.release(), true);
      assert.equal(await admin.exists(`${redisKey}:value`), 1, "a plain lock's release does not touch the value");
      assert.equal(await store.holder(key), null);
      assert.equal(await admin.exists(`${redisKey}:value`), 0, "holder() deleted the value of a hold that is over");
      // The same owner holding again (the token is new): no value from the earlier hold.
      assert.notEqual(await store.acquire(key, owner, 10_000), false);
      assert.equal(await store.proclaim(key, owner, "first", 5), true);
      await admin.set(`${redisKey}:fence`, "1", "KEEPTTL"); // as if a later acquire of this owner had minted another token
      h = await store.holder(key);
      assert.equal(h.value, null, "a value kept for another token of the owner is not this hold's");
      assert.equal(await store.proclaim(key, owner, "second", 1), true, "a lower seq of the new hold replaces the other hold's");
      assert.equal((await store.holder(key)).value, "second");
      assert.equal(await store.release(key, owner), true);
    } finally {
      await store.close();
    }
  });

  it("an election's value goes with its hold on every Redis store: proclaim() expires it with the hold, extend moves it, release deletes it", async () => {
    const store = await RedisLockStore.connect(server.url);
    const client = new Redis(server.url);
    const rest = await startUpstashRest(server.url);
    const stores = {
      RedisLockStore: store,
      IoRedisLockStore: new IoRedisLockStore(client),
      UpstashLockStore: new UpstashLockStore(new Upstash({ url: rest.url, token: rest.token, enableTelemetry: false })),
    };
    try {
      const runOut = [];
      for (const [name, s] of Object.entries(stores)) {
        const key = `${ELECTION_KEY_PREFIX}${uniqueKey("value-ttl")}`;
        const valueKey = `locksmith:{${key}}:value`;
        assert.notEqual(await s.acquire(key, "o", 5_000), false);
        assert.equal(await s.proclaim(key, "o", "v", 1), true);
        let ttl = await admin.pttl(valueKey);
        assert.ok(ttl > 5_000 && ttl <= 6_000, `${name}: the hold's time left and a second (${ttl} ms)`);
        assert.equal(await s.extend(key, "o", 20_000), true);
        ttl = await admin.pttl(valueKey);
        assert.ok(ttl > 20_000 && ttl <= 21_000, `${name}: an extend of the election's hold moves it (${ttl} ms)`);
        assert.equal(await s.release(key, "o"), true);
        assert.equal(await admin.exists(valueKey), 0, `${name}: a release deletes it`);
        // A hold left to run out takes its value with it.
        assert.notEqual(await s.acquire(key, "o", 200), false);
        assert.equal(await s.proclaim(key, "o", "v", 1), true);
        runOut.push(key);
      }
      await sleep(1_400);
      for (const key of runOut) {
        const redisKey = `locksmith:{${key}}`;
        assert.equal(await admin.exists(redisKey, `${redisKey}:fence`, `${redisKey}:value`), 0, "the lock, its counter and its value are gone");
      }
    } finally {
      await stores.IoRedisLockStore.close();
      await client.quit();
      await stores.UpstashLockStore.close();
      await rest.close();
      await store.close();
    }
  });

  it("an election hold extended or released by the previous release's scripts leaves at worst a value that expires (a rolling deploy)", async () => {
    // extend.lua and release.lua as the release before the value's expiry sent them.
    const OLD_EXTEND = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;
    const OLD_RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', KEYS[1] .. ':released', '')
  return 1
end
return 0`;
    const store = await RedisLockStore.connect(server.url);
    try {
      const key = `${ELECTION_KEY_PREFIX}${uniqueKey("rolling")}`;
      const redisKey = `locksmith:{${key}}`;
      const valueKey = `${redisKey}:value`;
      assert.notEqual(await store.acquire(key, "o", 300), false);
      assert.equal(await store.proclaim(key, "o", "v", 1), true);
      // An old process extends the hold: the value keeps the expiry it had.
      assert.equal(await admin.eval(OLD_EXTEND, 2, redisKey, `${redisKey}:fence`, "o", "5000", "6000"), 1);
      const ttl = await admin.pttl(valueKey);
      assert.ok(ttl > 0 && ttl <= 1_300, `the value expires as it would have (${ttl} ms)`);
      // The new scripts extend it again with the hold.
      assert.equal(await store.extend(key, "o", 5_000), true);
      assert.ok((await admin.pttl(valueKey)) > 5_000);
      // An old process releases it: the value stays until its expiry, and is nobody's meanwhile.
      assert.equal(await admin.eval(OLD_RELEASE, 1, redisKey, "o"), 1);
      assert.ok((await admin.pttl(valueKey)) > 0, "the value left behind expires");
      assert.equal(await store.holder(key), null);
      // A leftover value without an expiry (proclaimed by the earlier release) goes with the
      // next release of an election hold, or the next holder()'s tidying.
      assert.notEqual(await store.acquire(key, "o", 5_000), false);
      await admin.hset(valueKey, "owner", "o", "token", "", "seq", "1", "value", "old");
      assert.equal(await admin.pttl(valueKey), -1);
      assert.equal(await store.release(key, "o"), true);
      assert.equal(await admin.exists(valueKey), 0);
    } finally {
      await store.close();
    }
  });

  it("a plain lock's extend and release send what they did (no value key); an election's add its value key", async () => {
    const calls = [];
    const name = (sha) => Object.keys(SCRIPTS).find((n) => SCRIPTS[n].sha === sha);
    const driver = {
      evalsha: async (sha, keys, args) => {
        calls.push([name(sha), keys, args]);
        return 1;
      },
      eval: async () => 1,
      exists: async () => 0,
      pttl: async () => -2,
      setNx: async () => null,
    };
    const s = new RedisClientStore(driver, storeOptions(undefined, "test"));
    const e = `${ELECTION_KEY_PREFIX}k`;
    await s.extend("k", "o", 5_000);
    await s.release("k", "o");
    await s.extend(e, "o", 5_000);
    await s.release(e, "o");
    const E = `locksmith:{${e}}`;
    assert.deepEqual(calls, [
      ["extend", ["locksmith:{k}", "locksmith:{k}:fence"], ["o", "5000", "6000"]],
      ["release", ["locksmith:{k}"], ["o"]],
      ["extend", [E, `${E}:fence`, `${E}:value`], ["o", "5000", "6000"]],
      ["release", [E, `${E}:value`], ["o"]],
    ]);
  });

  it("uses the store's keyPrefix, and checks its arguments", async () => {
    const store = await RedisLockStore.connect({ url: server.url, keyPrefix: "other:" });
    try {
      const key = uniqueKey("prefix");
      assert.notEqual(await store.acquire(key, "o", 5_000), false);
      assert.equal(await store.proclaim(key, "o", "v", 1), true);
      assert.equal(await admin.hget(`other:{${key}}:value`, "value"), "v");
      assert.equal((await store.holder(key)).value, "v");
      for (const [call, message] of [
        [() => store.holder(1), /^locksmith: key must be a string/],
        [() => store.proclaim(key, "o", 1, 2), /^locksmith: value must be a string/],
        [() => store.proclaim(key, "o", "v", 0), /^locksmith: seq must be a positive safe integer; got 0/],
        [() => store.proclaim(key, "o", "v", 1.5), /^locksmith: seq must be a positive safe integer/],
        [() => store.proclaim(key, null, "v", 2), /^locksmith: owner must be a string/],
      ]) {
        await assert.rejects(call(), (err) => err.code === "INVALID_ARGUMENT" && message.test(err.message));
      }
      assert.equal(await store.release(key, "o"), true);
    } finally {
      await store.close();
    }
  });

  it("a value proclaimed through one Redis store is read through the others (ioredis, Upstash)", async () => {
    const store = await RedisLockStore.connect(server.url);
    const client = new Redis(server.url);
    const rest = await startUpstashRest(server.url);
    const viaClient = new IoRedisLockStore(client);
    const viaRest = new UpstashLockStore(new Upstash({ url: rest.url, token: rest.token, enableTelemetry: false }));
    try {
      const key = uniqueKey("shared");
      const l = new Lock(key, 10_000, viaClient);
      assert.equal(await l.acquire(), true);
      const { owner } = await viaClient.holder(key);
      // JSON text and digits come back as the text they are (Upstash's client parses replies).
      assert.equal(await store.proclaim(key, owner, '{"host":"a"}', 1), true);
      for (const s of [store, viaClient, viaRest]) {
        const { remainingMs, ...rest } = await s.holder(key);
        assert.deepEqual(rest, { owner, fencingToken: l.fencingToken, value: '{"host":"a"}' });
        assert.ok(remainingMs > 9_000 && remainingMs <= 10_000, `${remainingMs}`);
      }
      assert.equal(await viaRest.proclaim(key, owner, "12345", 2), true);
      assert.equal((await store.holder(key)).value, "12345");
      assert.equal((await viaRest.holder(key)).value, "12345");
      assert.equal(await l.release(), true);
      assert.equal(await viaRest.holder(key), null);
    } finally {
      await viaClient.close();
      await client.quit();
      await viaRest.close();
      await rest.close();
      await store.close();
    }
  });

  it("an election on the store: leader() and the proclaimed value, read by another store", async () => {
    const store = await RedisLockStore.connect(server.url);
    const other = await RedisLockStore.connect(server.url);
    try {
      const name = uniqueKey("election");
      const leadership = await election(name, { store }).campaign({ value: { port: 8080 } });
      const seen = await election(name, { store: other }).leader();
      assert.equal(seen.term, leadership.term);
      assert.deepEqual(seen.value, { port: 8080 });
      await leadership.proclaim({ port: 9090 });
      assert.deepEqual((await election(name, { store: other }).leader()).value, { port: 9090 });
      await leadership.resign();
      assert.equal(await election(name, { store: other }).leader(), null);
    } finally {
      await Promise.all([store.close(), other.close()]);
    }
  });

  it("the side link comes back after its connection is killed", async () => {
    const store = await RedisLockStore.connect(server.url);
    try {
      const key = uniqueKey("killed");
      assert.notEqual(await store.acquire(key, "o", 10_000), false);
      assert.equal(await store.proclaim(key, "o", "v", 1), true);
      await admin.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      assert.equal((await eventually(() => store.holder(key))).value, "v");
      assert.equal(await store.proclaim(key, "o", "w", 2), true);
      assert.equal((await store.holder(key)).value, "w");
      await eventually(() => store.release(key, "o"));
    } finally {
      await store.close();
    }
  });

  it("a server that does not answer: STORE_UNAVAILABLE within operationTimeoutMs, then it works again", async () => {
    const store = await RedisLockStore.connect({ url: server.url, connectTimeoutMs: 100, commandTimeoutMs: 200 });
    try {
      const key = uniqueKey("paused");
      assert.equal(await store.holder(key), null, "the side link is open");
      await admin.client("PAUSE", "2500", "ALL");
      const start = performance.now();
      const err = await store.holder(key).catch((e) => e);
      const took = performance.now() - start;
      assert.equal(err?.code, "STORE_UNAVAILABLE", String(err));
      assert.match(err.message, /^locksmith: store unavailable: redis did not answer within 1300 ms/);
      assert.ok(took >= 1_200 && took < 2_200, `failed after ${took} ms (operationTimeoutMs: 100 + 200 + 1000)`);
      await admin.client("UNPAUSE");
      assert.equal(await eventually(() => store.holder(key)), null);
    } finally {
      await admin.client("UNPAUSE");
      await store.close();
    }
  });

  it("close() closes the side link: a call on its way and every later one fail with STORE_CLOSED", async () => {
    const store = await RedisLockStore.connect(server.url);
    const key = uniqueKey("closed");
    assert.equal(await store.holder(key), null);
    await admin.client("PAUSE", "1000", "ALL");
    const onItsWay = store.holder(key).catch((e) => e);
    await sleep(50);
    await store.close();
    await admin.client("UNPAUSE");
    assert.equal((await onItsWay)?.code, "STORE_CLOSED");
    for (const call of [() => store.holder(key), () => store.proclaim(key, "o", "v", 1)]) {
      await assert.rejects(call(), (err) => err.code === "STORE_CLOSED");
    }
  });

  it("an idle side link does not keep the process alive", async () => {
    const { code, stdout, stderr } = await runModule(
      `const { RedisLockStore } = await import(${JSON.stringify(ENTRY)});
const store = await RedisLockStore.connect(${JSON.stringify(server.url)});
console.log(JSON.stringify(await store.holder("idle-side-link")));`,
      { timeoutMs: 10_000 },
    );
    assert.equal(code, 0, stderr);
    assert.equal(stdout.trim(), "null");
  });
});
