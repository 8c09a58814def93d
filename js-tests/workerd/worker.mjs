// A Cloudflare Worker using locksmith: the per-isolate memory store, and a store over
// a Durable Object — one object per lock name, which is how locks are done at the edge.
import { Lock, lock, restoreLock } from "locksmith";

/** The Durable Object that holds one lock. Its storage survives restarts. */
export class LockObject {
  constructor(state) {
    this.storage = state.storage;
  }

  async fetch(request) {
    const { op, owner, ttlMs } = await request.json();
    const now = Date.now();
    let hold = await this.storage.get("hold");
    if (hold && hold.expiresAt <= now) {
      await this.storage.delete("hold");
      hold = undefined;
    }
    const answer = (value) => Response.json(value);
    switch (op) {
      case "acquire":
        if (hold) return answer(false);
        await this.storage.put("hold", { owner, expiresAt: now + ttlMs });
        return answer(true);
      case "release":
        if (hold?.owner !== owner) return answer(false);
        await this.storage.delete("hold");
        return answer(true);
      case "extend":
        if (hold?.owner !== owner) return answer(false);
        await this.storage.put("hold", { owner, expiresAt: now + ttlMs });
        return answer(true);
      case "isLocked":
        return answer(hold !== undefined);
      case "isHeldBy":
        return answer(hold?.owner === owner);
      default:
        return answer(hold ? hold.expiresAt - now : null);
    }
  }
}

/** A locksmith store over the LockObject namespace. */
function durableObjectStore(namespace) {
  const call = async (key, body) => {
    const stub = namespace.get(namespace.idFromName(key));
    const response = await stub.fetch("https://lock/", { method: "POST", body: JSON.stringify(body) });
    return response.json();
  };
  return {
    acquire: (key, owner, ttlMs) => call(key, { op: "acquire", owner, ttlMs }),
    release: (key, owner) => call(key, { op: "release", owner }),
    extend: (key, owner, ttlMs) => call(key, { op: "extend", owner, ttlMs }),
    isLocked: (key) => call(key, { op: "isLocked" }),
    isHeldBy: (key, owner) => call(key, { op: "isHeldBy", owner }),
    remainingTime: (key) => call(key, { op: "remainingTime" }),
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (name, fallback) => url.searchParams.get(name) ?? fallback;
    const key = q("key", "job");
    const store = url.pathname.startsWith("/do/") ? durableObjectStore(env.LOCKS) : undefined;
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
          return Response.json(await make().extend().then(() => "extended", (err) => ({ name: err.name, code: err.code, message: err.message })));
        }
        default:
          return new Response("not found", { status: 404 });
      }
    } catch (err) {
      return Response.json({ error: err.message, code: err.code }, { status: 500 });
    }
  },
};
