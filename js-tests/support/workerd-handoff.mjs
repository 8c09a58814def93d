// A lock handed between Node and a worker of the tests in real workerd (workerd-harness.mjs),
// both ways: the worker serves worker-routes.mjs's routes over its store, and Node holds
// a native RedisLockStore on the same redis-server.
import assert from "node:assert/strict";
import { after, before } from "node:test";

import { startRedis } from "./redis-server.mjs";
import { ls, uniqueKey } from "./target.mjs";
import { startWorker } from "./workerd-harness.mjs";

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
