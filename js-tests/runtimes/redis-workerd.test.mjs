// RedisLockStore in a Cloudflare Worker (real workerd, through Miniflare) over TCP —
// the WebAssembly build's Redis engine on connect() from cloudflare:sockets — and the
// native RedisLockStore in this Node process: one key layout, one set of scripts, one
// fencing counter, so a lock taken by either is the other's to release, both ways.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { freePort } from "../support/redis-server.mjs";
import { nodeBesideWorker, takenInNodeReleasedInWorker, takenInWorkerReleasedInNode } from "../support/workerd-handoff.mjs";
import { ls, TARGET, uniqueKey } from "../support/target.mjs";

describe("Node (native RedisLockStore) and workerd (RedisLockStore over connect()) share locks", {
  skip: TARGET !== "native" && "runs once, with the native pass",
}, () => {
  const side = nodeBesideWorker("redis-worker/worker.mjs", (server) => ({ bindings: { REDIS_URL: server.url } }));

  it("taken in Node, seen and released in the worker", async () => {
    const lock = await takenInNodeReleasedInWorker(side);
    assert.equal(await lock.isLocked(), false);
  });

  it("taken in the worker, released in Node, with fencing tokens from one counter", async () => {
    const { native } = side;
    const { key, taken } = await takenInWorkerReleasedInNode(side);
    const again = new ls.Lock(key, 10_000, native);
    assert.equal(await again.acquire(), true);
    assert.ok(again.fencingToken > taken.token, `${again.fencingToken} > ${taken.token}`);
    await again.release();
  });

  it("a worker waiting on a lock held in Node wakes on its release, long before its retry delay", async () => {
    const { native, call } = side;
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
    const { server, call } = side;
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
