// `fencing: false` on the Redis stores (RedisLockStore in both builds, and the stores over
// users' ioredis, node-redis and @upstash/redis clients): a lock's acquire is one plain
// `SET key owner NX PX ttl` (no script), its hold has no fencing token, everything else is
// as with fencing; fenced and unfenced processes on one key exclude each other, and the
// fenced ones' tokens still grow.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";

import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";
import { createClient } from "redis";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { NodeRedisLockStore } from "../../js/stores/node-redis.mjs";
import { UpstashLockStore } from "../../js/stores/upstash.mjs";
import { conformance } from "../conformance/conformance.mjs";
import { assertNoOverlap } from "../support/load.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { failOnUnhandledRejections, ls, TARGET, uniqueKey } from "../support/target.mjs";
import { startUpstashRest } from "../support/upstash-rest.mjs";

const { Lock, RedisLockStore, election } = ls;

failOnUnhandledRejections();

let server;
let rest;
let admin;
before(async () => {
  server = await startRedis();
  rest = await startUpstashRest(server.url);
  admin = new Redis(server.url);
});
after(async () => {
  await admin.quit();
  await rest.close();
  await server.stop();
});

/** `make()`, or, when it throws, the client closed (so a refused option does not keep the file running). */
function made(make, closeClient) {
  try {
    return make();
  } catch (err) {
    closeClient();
    throw err;
  }
}

// Each Redis store with fencing off (or on, `fencing: true`); `close` ends store and client.
const STORES = {
  RedisLockStore: async (fencing = false) => {
    const store = await RedisLockStore.connect({ url: server.url, fencing });
    return { store, close: () => store.close() };
  },
  IoRedisLockStore: async (fencing = false) => {
    const client = new Redis(server.url);
    const store = made(
      () => new IoRedisLockStore(client, { fencing }),
      () => client.quit(),
    );
    return { store, close: async () => (await store.close(), await client.quit()) };
  },
  NodeRedisLockStore: async (fencing = false) => {
    const client = await createClient({ url: server.url }).connect();
    const store = made(
      () => new NodeRedisLockStore(client, { fencing }),
      () => client.quit(),
    );
    return { store, close: async () => (await store.close(), await client.quit()) };
  },
  UpstashLockStore: async (fencing = false) => {
    const client = new Upstash({ url: rest.url, token: rest.token, enableTelemetry: false });
    const store = new UpstashLockStore(client, { fencing });
    return { store, close: () => store.close() };
  },
};
// The client stores are the same JS in both builds: the WebAssembly run repeats the
// engine's store and the edge client's only.
const NAMES = TARGET === "native" ? Object.keys(STORES) : ["RedisLockStore", "UpstashLockStore"];

/** How many times the server ran each command so far (INFO commandstats). */
async function commandCalls() {
  const info = await admin.info("commandstats");
  return Object.fromEntries([...info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map(([, name, n]) => [name, Number(n)]));
}

describe(`fencing: false (${TARGET})`, () => {
  it("is refused unless it is a boolean, with INVALID_ARGUMENT, by every Redis store", async () => {
    for (const bad of ["false", 0, 1, null, {}]) {
      await assert.rejects(RedisLockStore.connect({ url: server.url, fencing: bad }), (err) => {
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.match(err.message, /^locksmith: fencing must be a boolean; got /);
        return true;
      });
    }
    const client = new Redis(server.url);
    try {
      for (const [Store, fake] of [
        [IoRedisLockStore, client],
        [NodeRedisLockStore, { evalSha() {}, duplicate() {} }],
        [UpstashLockStore, { evalsha() {}, pttl() {} }],
      ]) {
        for (const bad of ["no", 0, null]) {
          assert.throws(
            () => new Store(fake, { fencing: bad }),
            (err) => {
              assert.equal(err.code, "INVALID_ARGUMENT");
              assert.match(err.message, /^locksmith: fencing must be a boolean; got /);
              return true;
            },
          );
        }
      }
    } finally {
      await client.quit();
    }
  });

  for (const name of NAMES) {
    it(`${name}: acquire is one plain SET (no script), the hold has no token, release and extend keep their scripts`, async () => {
      const { store, close } = await STORES[name]();
      try {
        const key = uniqueKey("plain-set");
        const redisKey = `locksmith:{${key}}`;
        const l = new Lock(key, 5_000, store);
        const before = await commandCalls();
        assert.equal(await l.acquire(), true);
        const taken = await commandCalls();
        assert.equal((taken.set ?? 0) - (before.set ?? 0), 1, "one SET");
        for (const script of ["evalsha", "eval", "time"]) {
          assert.equal(taken[script] ?? 0, before[script] ?? 0, `no ${script.toUpperCase()} for the acquire`);
        }
        assert.equal(l.fencingToken, null);
        assert.match(await admin.get(redisKey), /^\S+$/, "the owner token, as a fenced hold's");
        const ttl = await admin.pttl(redisKey);
        assert.ok(ttl > 4_000 && ttl <= 5_000, `the lock's TTL: ${ttl}`);
        assert.equal(await admin.exists(`${redisKey}:fence`), 0, "no fencing counter");
        // A second holder is refused with the same plain SET.
        assert.equal(await new Lock(key, 5_000, store).acquire({ timeout: 0 }), false);
        await l.extend(8_000);
        assert.ok((await admin.pttl(redisKey)) > 5_000, "extended");
        assert.equal(await l.release(), true);
        const done = await commandCalls();
        assert.ok((done.evalsha ?? 0) + (done.eval ?? 0) - (taken.evalsha ?? 0) - (taken.eval ?? 0) >= 2, "extend and release ran their scripts");
        assert.equal(await admin.exists(redisKey), 0);
      } finally {
        await close();
      }
    });
  }

  for (const name of NAMES) {
    it(`${name}: holder() gives no fencing token; proclaim() keeps a value with the owner's hold`, async () => {
      const { store, close } = await STORES[name]();
      try {
        const key = uniqueKey("holder-unfenced");
        const l = new Lock(key, 5_000, store);
        assert.equal(await l.acquire(), true);
        const h = await store.holder(key);
        assert.equal(h.fencingToken, null);
        assert.ok(h.remainingMs > 4_000 && h.remainingMs <= 5_000, `${h.remainingMs}`);
        assert.equal(h.value, null);
        assert.equal(await store.proclaim(key, h.owner, "v", 1), true);
        assert.equal(await store.proclaim(key, h.owner, "stale", 1), true);
        assert.equal((await store.holder(key)).value, "v");
        await l.extend(8_000);
        assert.equal((await store.holder(key)).value, "v");
        assert.equal(await l.release(), true);
        assert.equal(await store.holder(key), null);
        assert.equal(await store.proclaim(key, h.owner, "late", 2), false);
        const next = new Lock(key, 5_000, store);
        assert.equal(await next.acquire(), true);
        assert.equal((await store.holder(key)).value, null, "the next holder starts without a value");
        assert.equal(await next.release(), true);
      } finally {
        await close();
      }
    });
  }

  for (const name of NAMES) {
    it(`${name}: election() refuses the store before it sends anything, while a fenced process leads`, async () => {
      const fenced = await STORES[name](true);
      const { store, close } = await STORES[name]();
      try {
        const topic = uniqueKey("election-unfenced");
        const leadership = await election(topic, { store: fenced.store, ttl: "30s" }).campaign();
        const e = election(topic, { store });
        const before = await commandCalls();
        // A campaign that took the key to learn that it has no term would wait for the
        // leader here, and meanwhile the store's holder() answer gave the last fenced term.
        const refused = (err) => err.code === "UNSUPPORTED" && /fencing tokens/.test(err.message);
        await assert.rejects(
          Promise.race([e.campaign(), new Promise((_, reject) => setTimeout(() => reject(new Error("campaign() waited")), 2_000).unref())]),
          refused,
        );
        await assert.rejects(e.leader(), refused);
        assert.throws(() => e.observe(), refused);
        const after = await commandCalls();
        for (const command of ["set", "evalsha", "eval"]) assert.equal(after[command] ?? 0, before[command] ?? 0, `no ${command.toUpperCase()} sent`);
        assert.equal((await election(topic, { store: fenced.store }).leader()).term, leadership.term);
        await leadership.resign();
        // With nobody leading, the same: refused, not "no leader".
        await assert.rejects(e.leader(), refused);
      } finally {
        await close();
        await fenced.close();
      }
    });
  }

  it("fenced and unfenced processes on one key exclude each other; the fenced tokens grow", { timeout: 120_000 }, async () => {
    const key = uniqueKey("mixed");
    const rounds = 25;
    const kinds = [
      ["engine", "true"],
      ["engine", "false"],
      ["ioredis", "false"],
      ["ioredis", "true"],
    ];
    const runs = await Promise.all(kinds.map(([kind, fencing]) => contender(key, rounds, kind, fencing)));
    assert.deepEqual(
      runs,
      kinds.map(() => rounds),
    );
    assert.equal(Number(await admin.get(`${key}:counter`)), rounds * kinds.length, "no lost update");
    assertNoOverlap(await admin.lrange(`${key}:log`, 0, -1));
    const tokens = (await admin.lrange(`${key}:tokens`, 0, -1)).map(Number);
    assert.equal(tokens.length, 2 * rounds, "every fenced hold had a token");
    for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `token ${tokens[i]} after ${tokens[i - 1]}`);
  });
});

/** One fencing-contender.mjs process (of this build); resolves with how many sections ran. */
function contender(key, rounds, kind, fencing) {
  return new Promise((resolve, reject) => {
    const script = new URL("./fencing-contender.mjs", import.meta.url).pathname;
    const p = spawn(process.execPath, [script, server.url, key, String(rounds), kind, fencing], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.once("exit", (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`${kind} fencing=${fencing} contender exited ${code}`))));
  });
}

for (const name of NAMES) {
  let made;
  conformance(`${name} (${TARGET}), fencing: false`, {
    makeStore: async () => (made = await STORES[name]()).store,
    closeStore: () => made.close(),
    fencing: false,
    exactOwnership: true,
  });
}
