// A store object in Node whose every method is a call of the real Durable Object store
// in a worker (js-tests/workerd/store-worker.mjs, its /store WebSocket), so Node-side
// locks — the conformance suite, the history checker's client processes — run against
// `DurableObjectLockStore` and its objects in workerd.

/** The store methods the worker serves (the acquires answer fencing tokens; "plain…" the booleans). */
export const REMOTE_METHODS = [
  "acquire",
  "release",
  "extend",
  "isLocked",
  "isHeldBy",
  "remainingTime",
  "acquirePermit",
  "releasePermit",
  "extendPermit",
  "countPermits",
  "permitRemainingTime",
  "ownerRemainingTime",
  "holder",
  "proclaim",
  "acquireFair",
  "plainAcquire",
  "plainAcquirePermit",
];

/**
 * A store over `socket`, an accepted WebSocket to the worker's /store (Miniflare's
 * `dispatchFetch` or `fetch` with `Upgrade: websocket`). `close()` ends it; calls
 * pending then, and calls made after, reject.
 */
export function remoteStore(socket) {
  let next = 0;
  const pending = new Map();
  let open = true;
  const closed = () => Object.assign(new Error("locksmith test: the worker's store socket is closed"), { code: "STORE_UNAVAILABLE" });
  socket.addEventListener("message", (event) => {
    const { id, value, error, woken } = JSON.parse(event.data);
    const answer = pending.get(id);
    if (woken) return answer?.();
    pending.delete(id);
    if (error) answer?.reject(Object.assign(new Error(error.message), error));
    else answer?.resolve(value);
  });
  socket.addEventListener("close", () => {
    open = false;
    for (const [id, answer] of pending) {
      if (typeof answer === "object") answer.reject(closed());
      pending.delete(id);
    }
  });
  const send = (message) => socket.send(JSON.stringify(message));
  const store = {
    close() {
      if (open) socket.close();
      open = false;
    },
  };
  for (const method of REMOTE_METHODS) {
    store[method] = (...args) =>
      new Promise((resolve, reject) => {
        if (!open) return reject(closed());
        const id = next++;
        pending.set(id, { resolve, reject });
        send({ id, method, args });
      });
  }
  store.onRelease = (key, listener, kind) => {
    if (!open) return () => {};
    const id = next++;
    pending.set(id, listener);
    send({ id, method: "onRelease", args: [key, kind ?? null] });
    return () => {
      pending.delete(id);
      if (open) send({ id, method: "offRelease" });
    };
  };
  return store;
}
