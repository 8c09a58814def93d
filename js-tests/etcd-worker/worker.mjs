// A Cloudflare Worker on EtcdLockStore (js-tests/stores/etcd.test.mjs runs it in workerd through
// Miniflare): a store per request over the runtime's fetch, its locks shared with Node.
//   GET /take?key=K       → { taken, token, serialized }
//   GET /wait?key=K       → waits up to 8 s (retryDelay 5 s: a release wakes it through the watch)
//   POST /release (body: a serialized lock) → { released }
import { Lock, restoreLock } from "locksmith-js";
import { EtcdLockStore } from "locksmith-js/etcd";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get("key");
    const store = await EtcdLockStore.connect(env.ETCD_URLS.split(","));
    try {
      if (url.pathname === "/take" || url.pathname === "/wait") {
        const lock = new Lock(key, 10_000, store);
        const started = Date.now();
        const taken = url.pathname === "/take" ? await lock.acquire() : await lock.acquire({ timeout: 8_000, retryDelay: 5_000 });
        return Response.json({ taken, waited: Date.now() - started, token: lock.fencingToken, serialized: taken ? lock.serialize() : null });
      }
      if (url.pathname === "/release") {
        return Response.json({ released: await restoreLock(await request.text(), store).release() });
      }
      return new Response("not found", { status: 404 });
    } catch (err) {
      return Response.json({ error: `${err?.name}: ${err?.message}`, code: err?.code }, { status: 500 });
    } finally {
      await store.close();
    }
  },
};
