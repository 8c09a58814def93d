// The workerd half of the wasm benchmark: /locksmith?n=N and /baseline?n=N run N
// acquire/release pairs on one key inside one request.
import { Lock, MemoryLockStore } from "../js/workerd.mjs";
import { PlainLock } from "./baseline.mjs";

let store;

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? 0);
    store ??= new MemoryLockStore();
    const l = url.pathname === "/locksmith" ? new Lock("invoice:42", 30_000, store) : new PlainLock("invoice:42");
    for (let i = 0; i < n; i++) {
      await l.acquire();
      await l.release();
    }
    return new Response("ok");
  },
};
