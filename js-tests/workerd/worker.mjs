// A Cloudflare Worker using locksmith: the per-isolate memory store, and the shipped
// Durable Object store — one object per lock name, which is how locks are done at the edge.
import { Lock, lock, restoreLock } from "locksmith-js";
import { DurableObjectLockStore, LockDurableObject } from "locksmith-js/cloudflare";

// The class the LOCKS binding names.
export { LockDurableObject };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (name, fallback) => url.searchParams.get(name) ?? fallback;
    const key = q("key", "job");
    const store = url.pathname.startsWith("/do/") ? new DurableObjectLockStore(env.LOCKS) : undefined;
    const make = () => (store ? new Lock(key, Number(q("ttl", 5_000)), store) : lock(key, Number(q("ttl", 5_000))));
    try {
      switch (url.pathname.replace(/^\/do/, "")) {
        case "/run": {
          const [ran, result] = await make().run(
            async () => {
              await sleep(Number(q("ms", 0)));
              return "done";
            },
            { timeout: Number(q("timeout", 0)), retryDelay: 20 },
          );
          return Response.json({ ran, result });
        }
        case "/hold": {
          const l = make();
          const taken = await l.acquire();
          return Response.json({ taken, token: l.fencingToken, serialized: taken ? l.serialize() : null });
        }
        case "/release": {
          const l = store ? restoreLock(q("lock"), store) : restoreLock(q("lock"));
          return Response.json({ released: await l.release() });
        }
        case "/state": {
          const l = make();
          return Response.json({ locked: await l.isLocked(), remaining: await l.getRemainingTime() });
        }
        case "/bad": {
          return Response.json(
            await make()
              .extend()
              .then(
                () => "extended",
                (err) => ({ name: err.name, code: err.code, message: err.message }),
              ),
          );
        }
        default:
          return new Response("not found", { status: 404 });
      }
    } catch (err) {
      return Response.json({ error: err.message, code: err.code }, { status: 500 });
    }
  },
};
