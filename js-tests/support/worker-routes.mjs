// The routes a worker of the tests serves over its store (bundled into redis-worker/ and
// upstash-worker/, whose Node halves are in runtimes/): /take?key= (acquire: the
// serialized lock, its token and how long it took), /wait?key=&timeout= (the same,
// waiting up to `timeout` ms with a 5 s retry delay), /release (POST the serialized lock)
// and /held?key=; any other path is a 404, and an error a 500 naming its code.
import { Lock, restoreLock } from "locksmith-js";

/** Answers `request` (at `url`) with `store`. */
export async function lockRoute(request, url, store) {
  const key = url.searchParams.get("key");
  try {
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
  }
}
