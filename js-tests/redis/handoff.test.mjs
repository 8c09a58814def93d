// A lock serialized by one build is restored and released by the other, against the
// same redis-server: the native build through RedisLockStore, the wasm build through
// a JS store over ioredis that runs locksmith's own Lua scripts on the same key layout.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";

import * as native from "../../js/node.mjs";
import * as wasm from "../../js/wasm.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { TARGET, uniqueKey } from "../support/target.mjs";

const script = (name) => readFileSync(new URL(`../../redis/src/lua/${name}.lua`, import.meta.url), "utf8");

/** RedisLockStore's layout and scripts, from JS: what an edge worker with a Redis client would run. */
function compatibleStore(client, prefix = "locksmith:") {
  const k = (key) => `${prefix}{${key}}`;
  const [acquire, release, extend] = ["acquire", "release", "extend"].map(script);
  return {
    // The fencing counter lives as long as the lock plus a second (FENCE_GRACE_MS).
    acquire: async (key, owner, ttlMs) => (await client.eval(acquire, 2, k(key), `${k(key)}:fence`, owner, ttlMs, ttlMs + 1_000)) > 0,
    release: async (key, owner) => (await client.eval(release, 1, k(key), owner)) === 1,
    extend: async (key, owner, ttlMs) => (await client.eval(extend, 2, k(key), `${k(key)}:fence`, owner, ttlMs, ttlMs + 1_000)) === 1,
    isLocked: async (key) => (await client.exists(k(key))) === 1,
    isHeldBy: async (key, owner) => (await client.get(k(key))) === owner,
    remainingTime: async (key) => {
      const ms = await client.pttl(k(key));
      return ms < 0 ? null : ms;
    },
  };
}

describe("cross-runtime handoff over Redis", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let server;
  let client;
  let nativeStore;
  let edgeStore;
  before(async () => {
    server = await startRedis();
    client = new Redis(server.url);
    nativeStore = await native.RedisLockStore.connect(server.url);
    edgeStore = compatibleStore(client);
  });
  after(async () => {
    await nativeStore?.close();
    await client?.quit();
    await server?.stop();
  });

  it("wasm acquires and serializes; native restores, extends and releases", async () => {
    const key = uniqueKey("to-native");
    const edgeLock = new wasm.Lock(key, 30_000, edgeStore);
    assert.equal(await edgeLock.acquire(), true);
    const text = edgeLock.serialize();
    const nativeLock = native.restoreLock(text, nativeStore);
    assert.equal(await new native.Lock(key, 1_000, nativeStore).acquire(), false, "held, as seen from native");
    await nativeLock.extend(60_000);
    assert.ok((await nativeLock.getRemainingTime()) > 30_000);
    assert.equal(await nativeLock.release(), true);
    assert.equal(await edgeLock.isExpired(), true, "the wasm handle sees its hold gone");
  });

  it("native acquires and serializes; wasm restores and releases", async () => {
    const key = uniqueKey("to-wasm");
    const nativeLock = new native.Lock(key, 30_000, nativeStore);
    assert.equal(await nativeLock.acquire(), true);
    const edgeLock = wasm.restoreLock(nativeLock.serialize(), edgeStore);
    assert.equal(edgeLock.fencingToken, nativeLock.fencingToken);
    assert.equal(await new wasm.Lock(key, 1_000, edgeStore).acquire(), false, "held, as seen from wasm");
    assert.equal(await edgeLock.release(), true);
    assert.equal(await nativeLock.isLocked(), false);
    assert.equal(await nativeLock.release(), false);
  });

  it("the serialized form is the same string in both builds", async () => {
    const key = uniqueKey("same-form");
    const a = new native.Lock(key, 12_345, nativeStore);
    await a.acquire();
    const text = a.serialize();
    const again = wasm.restoreLock(text, edgeStore).serialize();
    // expiresAt passes through each build's clock (wall time to a monotonic deadline and
    // back), so it may come out a millisecond apart; everything else is the same text.
    const before = JSON.parse(text).expiresAt;
    const after = JSON.parse(again).expiresAt;
    assert.ok(Math.abs(after - before) <= 1, `expiresAt ${before} → ${after}`);
    assert.equal(again, text.replace(`"expiresAt":${before}`, `"expiresAt":${after}`));
    await a.release();
  });

  it("the wasm build's own RedisLockStore and the native one share locks both ways, and a release in one wakes a waiter in the other", async () => {
    const wasmStore = await wasm.RedisLockStore.connect(server.url);
    try {
      const key = uniqueKey("wasm-redis");
      const nativeLock = new native.Lock(key, 30_000, nativeStore);
      assert.equal(await nativeLock.acquire(), true);
      const waiter = new wasm.Lock(key, 30_000, wasmStore);
      const started = performance.now();
      const waited = waiter.acquire({ timeout: 8_000, retryDelay: 5_000 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(await nativeLock.release(), true);
      assert.equal(await waited, true);
      assert.ok(performance.now() - started < 3_000, "the wasm waiter slept its retry delay instead of waking on the native release");
      assert.ok(waiter.fencingToken > nativeLock.fencingToken, "one fencing counter");
      const back = native.restoreLock(waiter.serialize(), nativeStore);
      assert.equal(await new native.Lock(key, 1_000, nativeStore).acquire(), false, "held, as seen from native");
      await back.extend(60_000);
      assert.ok((await waiter.getRemainingTime()) > 30_000, "the native extend, as seen from wasm");
      assert.equal(await back.release(), true);
      assert.equal(await waiter.isExpired(), true);
    } finally {
      await wasmStore.close();
    }
  });
});
