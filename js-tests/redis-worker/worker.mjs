// A Cloudflare Worker on RedisLockStore over TCP (connect() from cloudflare:sockets):
// the edge half of js-tests/redis-workerd.test.mjs. A socket belongs to the request
// that opened it, so each request connects and closes. Routes: /take?key= (acquire,
// answer the serialized lock and its token), /wait?key=&timeout= (acquire, waiting),
// /release (POST the serialized lock), /held?key=, /connect (POST options: the error
// connecting gives).
import { Lock, RedisLockStore, restoreLock } from "locksmith-js";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get("key");
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
      if (url.pathname === "/take" || url.pathname === "/wait") {
        const lock = new Lock(key, 10_000, store);
        const started = Date.now();
        const taken =
          url.pathname === "/take" ? await lock.acquire() : await lock.acquire({ timeout: Number(url.searchParams.get("timeout")), retryDelay: 5_000 });
        return Response.json({ taken, serialized: taken ? lock.serialize() : null, token: lock.fencingToken, ms: Date.now() - started });
      }
      if (url.pathname === "/release") {
        const lock = restoreLock(await request.text(), store);
        return Response.json({ released: await lock.release() });
      }
      if (url.pathname === "/held") return Response.json({ held: await new Lock(key, 10_000, store).isLocked() });
      return new Response("not found", { status: 404 });
    } catch (err) {
      return Response.json({ error: err.code ?? String(err), message: err.message }, { status: 500 });
    } finally {
      await store?.close();
    }
  },
};
