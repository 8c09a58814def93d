// RedisLockStore in a Cloudflare Worker (real workerd, through Miniflare) over TCP —
// the WebAssembly build's Redis engine on connect() from cloudflare:sockets — and the
// native RedisLockStore in this Node process: one key layout, one set of scripts, one
// fencing counter, so a lock taken by either is the other's to release, both ways.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { freePort, startRedis } from "../support/redis-server.mjs";
import { startWorker } from "../support/workerd-harness.mjs";
import { ls, TARGET, uniqueKey } from "../support/target.mjs";

describe("Node (native RedisLockStore) and workerd (RedisLockStore over connect()) share locks", {
  skip: TARGET !== "native" && "runs once, with the native pass",
}, () => {
  let server;
  let native;
  let mf;
  let worker;
  const call = async (path, init) => (await mf.dispatchFetch(`http://worker${path}`, init)).json();

  before(async () => {
    server = await startRedis();
    native = await ls.RedisLockStore.connect(server.url);
    worker = await startWorker("redis-worker/worker.mjs", { bindings: { REDIS_URL: server.url } });
    mf = worker.mf;
  });
  after(async () => {
    await worker?.dispose();
    await native?.close();
    await server?.stop();
  });

  it("taken in Node, seen and released in the worker", async () => {
    const key = uniqueKey("node-to-worker");
    const lock = new ls.Lock(key, 10_000, native);
    assert.equal(await lock.acquire(), true);
    assert.deepEqual(await call(`/held?key=${encodeURIComponent(key)}`), { held: true });
    assert.equal((await call(`/take?key=${encodeURIComponent(key)}`)).taken, false);
    assert.deepEqual(await call("/release", { method: "POST", body: lock.serialize() }), { released: true });
    assert.equal(await lock.isExpired(), true);
    assert.equal(await lock.isLocked(), false);
  });

  it("taken in the worker, released in Node, with fencing tokens from one counter", async () => {
    const key = uniqueKey("worker-to-node");
    const first = new ls.Lock(key, 10_000, native);
    await first.acquire();
    await first.release();
    const taken = await call(`/take?key=${encodeURIComponent(key)}`);
    assert.equal(taken.taken, true, JSON.stringify(taken));
    assert.ok(taken.token > first.fencingToken, `${taken.token} > ${first.fencingToken}`);
    assert.equal(await new ls.Lock(key, 10_000, native).acquireImmediately(), false);
    assert.equal(await ls.restoreLock(taken.serialized, native).release(), true);
    assert.deepEqual(await call(`/held?key=${encodeURIComponent(key)}`), { held: false });
    const again = new ls.Lock(key, 10_000, native);
    assert.equal(await again.acquire(), true);
    assert.ok(again.fencingToken > taken.token, `${again.fencingToken} > ${taken.token}`);
    await again.release();
  });

  it("a worker waiting on a lock held in Node wakes on its release, long before its retry delay", async () => {
    const key = uniqueKey("wake");
    const lock = new ls.Lock(key, 10_000, native);
    await lock.acquire();
    const waiting = call(`/wait?key=${encodeURIComponent(key)}&timeout=4000`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await lock.release();
    const waited = await waiting;
    assert.equal(waited.taken, true, JSON.stringify(waited));
    // The worker's retry delay is 5 s: only the release notification brings it in time.
    assert.ok(waited.ms < 3_000, `took ${waited.ms} ms`);
    assert.equal(await ls.restoreLock(waited.serialized, native).release(), true);
  });

  it("refuses bad options and an unreachable server with typed errors, without hanging", async () => {
    const bad = await call("/connect", { method: "POST", body: JSON.stringify({ url: server.url, comandTimeoutMs: 5 }) });
    assert.equal(bad.code, "INVALID_ARGUMENT");
    assert.match(bad.message, /^locksmith: unknown option `comandTimeoutMs`/);
    const scheme = await call("/connect", { method: "POST", body: JSON.stringify({ url: "http://127.0.0.1:6379" }) });
    assert.equal(scheme.code, "INVALID_ARGUMENT");
    const tls = await call("/connect", { method: "POST", body: JSON.stringify({ url: "rediss://127.0.0.1:6380", tlsCaCert: "-----BEGIN CERTIFICATE-----" }) });
    assert.equal(tls.code, "UNSUPPORTED");
    assert.match(tls.message, /^locksmith: tlsCaCert and tlsInsecure are not available on Cloudflare Workers/);
    const port = await freePort();
    const down = await call("/connect", {
      method: "POST",
      body: JSON.stringify({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 500, reconnectRetries: 1 }),
    });
    assert.equal(down.code, "STORE_UNAVAILABLE", JSON.stringify(down));
    assert.equal(down.name, "StoreUnavailableError");
    assert.match(down.message, /^locksmith: /);
    assert.ok(down.ms < 5_000, `took ${down.ms} ms`);
  });
});
