// A Cloudflare Worker on UpstashLockStore: the edge half of the cross-runtime handoff in
// js-tests/upstash-workerd.test.mjs. Routes: /take?key= (acquire, answer the serialized
// lock and its token), /release (POST the serialized lock), /held?key=.
import { Redis } from "@upstash/redis";
import { Lock, restoreLock } from "locksmith-js";
import { UpstashLockStore } from "locksmith-js/upstash";

export default {
  async fetch(request, env) {
    const store = new UpstashLockStore(new Redis({ url: env.UPSTASH_URL, token: env.UPSTASH_TOKEN, enableTelemetry: false }));
    const url = new URL(request.url);
    const key = url.searchParams.get("key");
    try {
      if (url.pathname === "/take") {
        const lock = new Lock(key, 10_000, store);
        const taken = await lock.acquire();
        return Response.json({ taken, serialized: taken ? lock.serialize() : null, token: lock.fencingToken });
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
  },
};
