// A Cloudflare Worker on RedisLockStore over TCP (connect() from cloudflare:sockets):
// the edge half of js-tests/runtimes/redis-workerd.test.mjs. A socket belongs to the
// request that opened it, so each request connects and closes. Routes: those of
// support/worker-routes.mjs, and /connect (POST options: the error connecting gives).
import { RedisLockStore } from "locksmith-js";

import { lockRoute } from "../support/worker-routes.mjs";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/connect") {
      const options = await request.json();
      const started = Date.now();
      try {
        const store = await RedisLockStore.connect(options);
        await store.close();
        return Response.json({ connected: true });
      } catch (err) {
        return Response.json({ name: err.name, code: err.code, message: err.message, ms: Date.now() - started });
      }
    }
    let store;
    try {
      store = await RedisLockStore.connect(env.REDIS_URL);
      return await lockRoute(request, url, store);
    } catch (err) {
      return Response.json({ error: err.code ?? String(err), message: err.message }, { status: 500 });
    } finally {
      await store?.close();
    }
  },
};
