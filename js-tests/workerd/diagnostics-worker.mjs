// A Worker with nodejs_compat that subscribes to locksmith's diagnostics channels and
// reports what a lock's acquire and release published, on the memory store and on a
// Durable Object store.
import dc from "node:diagnostics_channel";
import { Lock, lock } from "locksmith-js";
import { DurableObjectLockStore, LockDurableObject } from "locksmith-js/cloudflare";

export { LockDurableObject };

export default {
  async fetch(request, env) {
    const events = [];
    const handlers = {
      start: (c) => events.push(["start", c.key, c.store]),
      asyncEnd: (c) => events.push(["asyncEnd", c.key, c.store, c.outcome, c.attempts ?? null]),
    };
    const acquire = dc.tracingChannel("locksmith:acquire");
    const release = dc.tracingChannel("locksmith:release");
    acquire.subscribe(handlers);
    release.subscribe(handlers);
    try {
      const onObject = new URL(request.url).pathname === "/do";
      const l = onObject ? new Lock("dc-worker", 5_000, new DurableObjectLockStore(env.LOCKS)) : lock("dc-worker", 5_000);
      await l.acquire();
      await l.release();
    } finally {
      acquire.unsubscribe(handlers);
      release.unsubscribe(handlers);
    }
    return Response.json({ events, getBuiltinModule: typeof globalThis.process?.getBuiltinModule });
  },
};
