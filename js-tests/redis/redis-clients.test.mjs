// The stores over users' own Redis clients (ioredis, node-redis v4, v5 and v6, @upstash/redis
// over a local REST endpoint) against a real redis-server: the conformance suite, and
// one key layout with RedisLockStore — a lock taken through any store is released,
// extended and fenced through any other.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { createClient as createClientV4 } from "redis4";
import { createClient as createClientV6 } from "redis6";

import { IoRedisLockStore } from "../../js/stores/ioredis.mjs";
import { NodeRedisLockStore } from "../../js/stores/node-redis.mjs";
import { UpstashLockStore } from "../../js/stores/upstash.mjs";
import { SCRIPTS } from "../../js/gen/redis-scripts.mjs";
import { conformance } from "../conformance/conformance.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "../support/target.mjs";
import { startUpstashRest } from "../support/upstash-rest.mjs";

const { Lock, restoreLock } = ls;
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

failOnUnhandledRejections();

let server;
let rest;
before(async () => {
  server = await startRedis();
  rest = await startUpstashRest(server.url);
});
after(async () => {
  await rest.close();
  await server.stop();
});

// Each kind of client, as an application would make it; `close` ends store and client.
/** `holder` holds its key while `waiter` waits on it with a 5 s retry delay: the release wakes it at once. */
async function wokenByRelease(holder, waiter) {
  await holder.acquire();
  const start = performance.now();
  const got = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 }).then((ok) => [ok, performance.now() - start]);
  await sleep(300);
  await holder.release();
  const [ok, at] = await got;
  assert.equal(ok, true);
  assert.ok(at < 2_500, `acquired after ${Math.round(at)} ms; the retry delay is 5 s`);
  await waiter.release();
}

const CLIENTS = {
  ioredis: async () => {
    const client = new Redis(server.url);
    const store = new IoRedisLockStore(client);
    return { store, client, close: async () => (await store.close(), await client.quit()) };
  },
  "node-redis v5": async () => {
    const client = await createClient({ url: server.url }).connect();
    const store = new NodeRedisLockStore(client);
    return { store, client, close: async () => (await store.close(), await client.quit()) };
  },
  "node-redis v6": async () => {
    const client = await createClientV6({ url: server.url }).connect();
    const store = new NodeRedisLockStore(client);
    return { store, client, close: async () => (await store.close(), await client.quit()) };
  },
  "node-redis v4": async () => {
    const client = createClientV4({ url: server.url });
    await client.connect();
    const store = new NodeRedisLockStore(client);
    return { store, client, close: async () => (await store.close(), await client.quit()) };
  },
  upstash: async () => {
    const client = new Upstash({ url: rest.url, token: rest.token, enableTelemetry: false });
    const store = new UpstashLockStore(client);
    return { store, client, close: () => store.close() };
  },
};

// The wasm run repeats the client-independent part for the edge client only.
const NAMES = TARGET === "native" ? Object.keys(CLIENTS) : ["upstash"];

for (const name of NAMES) {
  let made;
  conformance(`${name} store`, {
    makeStore: async () => (made = await CLIENTS[name]()).store,
    closeStore: () => made.close(),
    fencing: true,
    exactOwnership: true,
  });
}

describe("one key layout with RedisLockStore", () => {
  let native;
  const made = {};
  before(async () => {
    native = await ls.RedisLockStore.connect(server.url);
    for (const name of NAMES) made[name] = await CLIENTS[name]();
  });
  after(async () => {
    await native.close();
    for (const m of Object.values(made)) await m.close();
  });

  it("RedisLockStore runs the very scripts the client stores send", async () => {
    const probe = new Redis(server.url);
    try {
      await probe.script("FLUSH");
      const l = new Lock(uniqueKey("scripts"), 5_000, native);
      await l.acquire();
      await l.extend();
      await l.release();
      const cached = await probe.script("EXISTS", SCRIPTS.acquire.sha, SCRIPTS.extend.sha, SCRIPTS.release.sha);
      assert.deepEqual(cached, [1, 1, 1], "the engine cached scripts with the generated SHAs");
    } finally {
      probe.disconnect();
    }
  });

  for (const name of NAMES) {
    it(`${name}: taken by one, extended and released by the other, tokens from one counter`, async () => {
      const { store } = made[name];
      const key = uniqueKey(`cross-${name}`);
      const first = new Lock(key, 5_000, native);
      assert.equal(await first.acquire(), true);
      const there = restoreLock(first.serialize(), store);
      assert.equal(await new Lock(key, 5_000, store).acquireImmediately(), false, "held across stores");
      assert.equal(await there.isExpired(), false);
      await there.extend(9_000);
      assert.ok((await first.getRemainingTime()) > 5_000);
      assert.equal(await there.release(), true);
      assert.equal(await first.isExpired(), true);

      const second = new Lock(key, 5_000, store);
      assert.equal(await second.acquire(), true);
      assert.ok(second.fencingToken > first.fencingToken, `${second.fencingToken} > ${first.fencingToken}`);
      const back = restoreLock(second.serialize(), native);
      assert.equal(await back.release(), true);
      const third = new Lock(key, 5_000, native);
      assert.equal(await third.acquire(), true);
      assert.ok(third.fencingToken > second.fencingToken);
      await third.release();
    });
  }

  for (const name of NAMES) {
    it(`${name}: one semaphore and one read-write lock with RedisLockStore`, async () => {
      const { store } = made[name];
      const key = uniqueKey(`permits-${name}`);
      const a = ls.semaphore(key, 2, 5_000, native);
      const b = ls.semaphore(key, 2, 5_000, store);
      assert.equal(await a.acquire(), true);
      assert.equal(await b.acquire(), true);
      assert.ok(b.fencingToken > a.fencingToken, "one fencing counter");
      assert.equal(await ls.semaphore(key, 2, 5_000, native).acquireImmediately(), false, "the limit counts both stores' permits");
      assert.equal(await ls.semaphore(key, 2, 5_000, store).count(), 2);
      await assert.rejects(ls.semaphore(key, 3, 5_000, native).acquire(), (err) => err.code === "INVALID_ARGUMENT");
      await assert.rejects(
        ls.semaphore(key, 3, 5_000, store).acquire(),
        (err) => err.code === "INVALID_ARGUMENT" && /held with limit 2; this handle asks for 3/.test(err.message),
      );
      assert.equal(await restoreLock(a.serialize(), store).release(), true);
      assert.equal(await ls.semaphore(key, 2, 5_000, native).count(), 1);
      await b.release();

      const reader = ls.readWriteLock(key, 5_000, store).readLock();
      assert.equal(await reader.acquire(), true);
      assert.equal(await ls.readWriteLock(key, 5_000, native).readLock().acquireImmediately(), true, "readers share");
      const writer = ls.readWriteLock(key, 5_000, native).writeLock();
      assert.equal(await writer.acquireImmediately(), false);
      await writer.release(); // gives up its claim
    });
  }

  for (const name of NAMES.filter((n) => n !== "upstash")) {
    it(`${name}: a semaphore permit given back through RedisLockStore wakes a waiter on the client store`, async () => {
      const { store } = made[name];
      const key = uniqueKey(`sem-wake-${name}`);
      await wokenByRelease(ls.semaphore(key, 1, 10_000, native), ls.semaphore(key, 1, 10_000, store));
    });

    it(`${name}: a release through RedisLockStore wakes a waiter on the client store at once`, async () => {
      const { store } = made[name];
      const key = uniqueKey(`wake-${name}`);
      await wokenByRelease(new Lock(key, 10_000, native), new Lock(key, 10_000, store));
    });
  }
});

describe("the client stores' own connections", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  // A child process that waits (so the store opens its subscriber), then ends its client
  // as an application would at shutdown, without store.close(): it must exit by itself.
  // It prints "quit" once its client is closed; from then on it must be gone well before
  // the 5 s an idle channel lingers.
  const exits = (code) =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, ["--input-type=module", "-e", `${code}\nconsole.log("quit");`], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "inherit"],
      });
      let quitAt;
      child.stdout.on("data", (data) => {
        if (String(data).includes("quit")) quitAt = performance.now();
      });
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      child.once("exit", (status, signal) => {
        clearTimeout(timer);
        const lingered = quitAt === undefined ? Infinity : performance.now() - quitAt;
        exitsAfter.push(lingered);
        resolve(signal ?? status);
      });
    });
  const exitsAfter = [];
  const promptly = () => {
    const lingered = exitsAfter.at(-1);
    assert.ok(lingered < 2_500, `the child lived ${Math.round(lingered)} ms after closing its client`);
  };
  const script = (setup, quit) => `
    import { Lock } from "locksmith-js";
    ${setup}
    const a = new Lock("exit:" + process.pid, 5_000, store);
    await a.acquire();
    await new Lock("exit:" + process.pid, 5_000, store).acquire({ timeout: 300, retryDelay: 50 });
    await a.release();
    ${quit}
  `;

  it("an ioredis store's subscriber does not keep Node alive after the application quits its client", async () => {
    const code = script(
      `import { Redis } from "ioredis"; import { IoRedisLockStore } from "locksmith-js/ioredis";
       const client = new Redis(${JSON.stringify(server.url)}); const store = new IoRedisLockStore(client);`,
      "await client.quit();",
    );
    assert.equal(await exits(code), 0);
    promptly();
  });

  it("a node-redis store's subscriber does not keep Node alive after the application quits its client", async () => {
    const code = script(
      `import { createClient } from "redis"; import { NodeRedisLockStore } from "locksmith-js/node-redis";
       const client = await createClient({ url: ${JSON.stringify(server.url)} }).connect(); const store = new NodeRedisLockStore(client);`,
      "await client.quit();",
    );
    assert.equal(await exits(code), 0);
    promptly();
  });

  it("a wait that starts as the store closes opens nothing that outlives it", async () => {
    const code = `
      import { Redis } from "ioredis"; import { IoRedisLockStore } from "locksmith-js/ioredis";
      const client = new Redis(${JSON.stringify(server.url)}); const store = new IoRedisLockStore(client);
      const off = store.onRelease("k", () => {});
      off();
      await store.close();
      await client.quit();
    `;
    assert.equal(await exits(code), 0);
    promptly();
  });

  it("the subscriber goes once no wait needs it", async () => {
    const client = new Redis(server.url);
    const store = new IoRedisLockStore(client);
    const probe = new Redis(server.url);
    try {
      const subscribers = async () => Number((await probe.pubsub("NUMSUB", "locksmith:{idle}:released"))[1]);
      const off = store.onRelease("idle", () => {});
      await sleep(100);
      assert.equal(await subscribers(), 1);
      off();
      await sleep(5_500); // the channel lingers 5 s for the next waiter
      assert.equal(await subscribers(), 0);
      const clients = await probe.client("LIST");
      assert.equal(clients.split("\n").filter((line) => / sub=[1-9]/.test(line)).length, 0, "no subscribed connection left");
    } finally {
      await store.close();
      await client.quit();
      await probe.quit();
    }
  });
});

describe("the client stores check what they are given", () => {
  it("refuses something that is not the right client, and unknown options", () => {
    for (const [Store, client] of [
      [IoRedisLockStore, {}],
      [NodeRedisLockStore, new Redis({ lazyConnect: true })],
      [UpstashLockStore, null],
    ]) {
      assert.throws(
        () => new Store(client),
        (err) => err.code === "INVALID_ARGUMENT" && /^locksmith: \w+LockStore needs/.test(err.message),
      );
    }
    const client = new Redis({ lazyConnect: true });
    assert.throws(
      () => new IoRedisLockStore(client, { prefix: "x:" }),
      (err) => err.code === "INVALID_ARGUMENT" && /unknown option `prefix`.*did you mean `keyPrefix`/.test(err.message),
    );
    assert.throws(
      () => new IoRedisLockStore(client, { keyPrefix: "a{b}" }),
      (err) => err.code === "INVALID_ARGUMENT",
    );
    assert.throws(
      () => new IoRedisLockStore(client, { operationTimeoutMs: -1 }),
      (err) => err.code === "INVALID_ARGUMENT",
    );
    assert.throws(
      () => new UpstashLockStore({ evalsha() {}, pttl() {} }, { notifyReleases: true }),
      (err) => err.code === "INVALID_ARGUMENT",
    );
    const prefixed = new Redis({ lazyConnect: true, keyPrefix: "app:" });
    assert.throws(
      () => new IoRedisLockStore(prefixed),
      (err) => err.code === "INVALID_ARGUMENT" && /keyPrefix: "app:locksmith:"/.test(err.message),
    );
    prefixed.disconnect();
    client.disconnect();
  });

  it("a store whose server is gone fails with STORE_UNAVAILABLE, not a hang", async () => {
    const client = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on("error", () => {});
    const store = new IoRedisLockStore(client, { operationTimeoutMs: 500 });
    await assert.rejects(new Lock(uniqueKey("gone"), 1_000, store).acquire(), (err) => err.code === "STORE_UNAVAILABLE");
    await store.close();
    client.disconnect();
  });
});
