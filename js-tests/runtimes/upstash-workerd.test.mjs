// A lock handed between a Node server on RedisLockStore and a Cloudflare Worker (real
// workerd, through Miniflare) on UpstashLockStore, both ways: one key layout, one
// fencing counter, across runtimes.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { startRedis } from "../support/redis-server.mjs";
import { startWorker } from "../support/workerd-harness.mjs";
import { ls, TARGET, uniqueKey } from "../support/target.mjs";
import { startUpstashRest } from "../support/upstash-rest.mjs";

describe("Node (RedisLockStore) and workerd (UpstashLockStore) share locks", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let server;
  let rest;
  let native;
  let mf;
  let worker;
  const call = async (path, init) => (await mf.dispatchFetch(`http://worker${path}`, init)).json();

  before(async () => {
    server = await startRedis();
    rest = await startUpstashRest(server.url);
    native = await ls.RedisLockStore.connect(server.url);
    worker = await startWorker("upstash-worker/worker.mjs", { bindings: { UPSTASH_URL: rest.url, UPSTASH_TOKEN: rest.token } });
    mf = worker.mf;
  });
  after(async () => {
    await worker?.dispose();
    await native?.close();
    await rest?.close();
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
  });
});
