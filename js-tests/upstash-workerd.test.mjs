// A lock handed between a Node server on RedisLockStore and a Cloudflare Worker (real
// workerd, through Miniflare) on UpstashLockStore, both ways: one key layout, one
// fencing counter, across runtimes.
import assert from "node:assert/strict";
import { mkdtemp, rm, copyFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

import { startRedis } from "./redis-server.mjs";
import { ls, TARGET, uniqueKey } from "./target.mjs";
import { startUpstashRest } from "./upstash-rest.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));

describe("Node (RedisLockStore) and workerd (UpstashLockStore) share locks", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let server;
  let rest;
  let native;
  let mf;
  let out;
  const call = async (path, init) => (await mf.dispatchFetch(`http://worker${path}`, init)).json();

  before(async () => {
    server = await startRedis();
    rest = await startUpstashRest(server.url);
    native = await ls.RedisLockStore.connect(server.url);
    out = await mkdtemp(join(tmpdir(), "locksmith-upstash-workerd-"));
    await build({
      entryPoints: [`${root}js-tests/upstash-worker/worker.mjs`],
      bundle: true,
      format: "esm",
      outfile: join(out, "worker.js"),
      conditions: ["workerd", "worker"],
      external: ["*.wasm"],
      logLevel: "error",
    });
    await mkdir(join(out, "wasm"));
    await copyFile(`${root}js/wasm/locksmith_wasm_bg.wasm`, join(out, "wasm/locksmith_wasm_bg.wasm"));
    mf = new Miniflare({
      modules: true,
      scriptPath: join(out, "worker.js"),
      modulesRoot: out,
      modulesRules: [
        { type: "ESModule", include: ["**/*.js"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      bindings: { UPSTASH_URL: rest.url, UPSTASH_TOKEN: rest.token },
      compatibilityDate: "2025-01-01",
    });
    await mf.ready;
  });
  after(async () => {
    await mf?.dispose();
    await native?.close();
    await rest?.close();
    await server?.stop();
    if (out) await rm(out, { recursive: true, force: true });
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
