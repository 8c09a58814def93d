// A worker of the tests in real workerd, through Miniflare: bundled with esbuild as
// wrangler bundles it (the package resolved through its exports map under the workerd
// condition; the runtime's `cloudflare:*` modules and the .wasm files left as imports),
// with both of the package's WebAssembly modules beside it. And a lock handed between
// Node and such a worker, both ways.
import assert from "node:assert/strict";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

import { startRedis } from "./redis-server.mjs";
import { ls, uniqueKey } from "./target.mjs";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * A Miniflare running the bundle `dir`/worker.js, its .js files as ES modules and its
 * .wasm files as compiled modules (as wrangler loads them), with `options` (bindings,
 * durableObjects, ...).
 */
export function miniflareFor(dir, options = {}) {
  return new Miniflare({
    modules: true,
    scriptPath: join(dir, "worker.js"),
    modulesRoot: dir,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: "2025-01-01",
    ...options,
  });
}

/**
 * Node and a worker side by side on one redis-server, for the enclosing describe():
 * before() starts the server, `beside(server)` (what else the worker reaches, e.g. an
 * Upstash REST endpoint: resolves `{ bindings, close() }`), a native RedisLockStore on the
 * server and the worker `entry` with those bindings; after() stops them. Returns
 * `{ server, native, call(path, init) }`, filled in once before() ran: `call` fetches
 * `path` from the worker and resolves its JSON.
 */
export function nodeBesideWorker(entry, beside) {
  let extra;
  let worker;
  const side = {
    server: undefined,
    native: undefined,
    call: async (path, init) => (await worker.mf.dispatchFetch(`http://worker${path}`, init)).json(),
  };
  before(async () => {
    side.server = await startRedis();
    extra = await beside(side.server);
    side.native = await ls.RedisLockStore.connect(side.server.url);
    worker = await startWorker(entry, { bindings: extra.bindings });
  });
  after(async () => {
    await worker?.dispose();
    await side.native?.close();
    await extra?.close?.();
    await side.server?.stop();
  });
  return side;
}

/** A lock taken in Node is held for the worker, which releases it (routes of worker-routes.mjs); resolves the lock. */
export async function takenInNodeReleasedInWorker({ native, call }) {
  const key = uniqueKey("node-to-worker");
  const lock = new ls.Lock(key, 10_000, native);
  assert.equal(await lock.acquire(), true);
  assert.deepEqual(await call(`/held?key=${encodeURIComponent(key)}`), { held: true });
  assert.equal((await call(`/take?key=${encodeURIComponent(key)}`)).taken, false);
  assert.deepEqual(await call("/release", { method: "POST", body: lock.serialize() }), { released: true });
  assert.equal(await lock.isExpired(), true);
  return lock;
}

/** A lock taken in the worker, after one in Node, has the later token and is released in Node; resolves `{ key, taken }` (the worker's answer). */
export async function takenInWorkerReleasedInNode({ native, call }) {
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
  return { key, taken };
}

/**
 * Starts `entry` (a path under js-tests/) with Miniflare `options` (bindings,
 * durableObjects, ...). Resolves to `{ mf, inputs, dispose() }`; `inputs` are the
 * bundle's source files, relative to the repository.
 */
export async function startWorker(entry, options = {}) {
  const out = await mkdtemp(join(tmpdir(), "locksmith-workerd-"));
  try {
    const result = await build({
      entryPoints: [join(root, "js-tests", entry)],
      bundle: true,
      format: "esm",
      outfile: join(out, "worker.js"),
      conditions: ["workerd", "worker"],
      // node:* as wrangler leaves them under nodejs_compat (a worker of the tests that imports one sets the flag).
      external: ["*.wasm", "cloudflare:*", "node:*"],
      metafile: true,
      logLevel: "error",
    });
    await mkdir(join(out, "wasm"));
    // Both modules ship, as wrangler ships them: the Redis engine's is imported only by
    // RedisLockStore.connect().
    for (const file of ["locksmith_wasm_bg.wasm", "locksmith_wasm_redis_bg.wasm"]) {
      await copyFile(join(root, "js/wasm", file), join(out, "wasm", file));
    }
    const mf = miniflareFor(out, options);
    await mf.ready;
    return {
      mf,
      inputs: Object.keys(result.metafile.inputs),
      async dispose() {
        await mf.dispose();
        await rm(out, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(out, { recursive: true, force: true });
    throw err;
  }
}
