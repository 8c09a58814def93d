// A fetch for EtcdLockStore's `fetch` option that holds chosen requests back, standing in
// for a request stuck at a slow or stopped member: etcd may still apply such a request
// after its caller gave up on it.
//
//   const late = lateFetch();
//   const store = await EtcdLockStore.connect({ endpoints, fetch: late.fetch });
//   const held = late.hold("/v3/kv/txn", { afterAbortMs: 2_400 });
//   … // the next transaction waits until its caller aborts it, then is sent 2.4 s later
//   const reply = await held.delivered; // etcd's answer to it, which nobody else reads
//
// `{ delayMs }` instead sends the request after `delayMs` and hands its answer to the
// caller (a slow member that answers); the caller's abort still rejects at once.
// `{ delayMs, answerDelayMs }` sends it after `delayMs` and hands the answer over
// `answerDelayMs` after it came (a slow way back: etcd applied it long before its caller
// reads the answer). `hold(path, {})` lets a request through as it is, keeping its turn.

/**
 * Resolves with the server's JSON answer to a request sent now, whatever the caller does
 * (or `{ failed }` when it could not be sent).
 */
async function deliver(url, init) {
  try {
    const response = await fetch(url, { method: init.method, headers: init.headers, body: init.body });
    return { status: response.status, body: await response.text() };
  } catch (err) {
    return { failed: String(err?.cause?.message ?? err?.message ?? err) };
  }
}

const aborted = (signal) => signal?.reason ?? new DOMException("This operation was aborted", "AbortError");

export function lateFetch() {
  const plans = [];

  /** Holds the next request whose path ends with `path`; `{ delivered }` resolves with etcd's parsed answer once it was sent. */
  function hold(path, { afterAbortMs, delayMs = 0, answerDelayMs = 0 }) {
    let resolve;
    const delivered = new Promise((r) => {
      resolve = r;
    });
    plans.push({ path, afterAbortMs, delayMs, answerDelayMs, resolve, sentAt: undefined });
    return { delivered };
  }

  function fetchFn(url, init = {}) {
    const path = new URL(url).pathname;
    const i = plans.findIndex((p) => path.endsWith(p.path));
    if (i < 0) return fetch(url, init);
    const [plan] = plans.splice(i, 1);
    const { signal } = init;
    const send = () =>
      deliver(url, init).then((answer) => {
        let reply = answer;
        try {
          if (answer.body !== undefined) reply = JSON.parse(answer.body);
        } catch {}
        plan.resolve({ reply, at: performance.now() });
        return answer;
      });
    return new Promise((resolve, reject) => {
      if (plan.afterAbortMs !== undefined) {
        // Never answered: the caller gives up (its signal), and the request goes on later.
        const onAbort = () => {
          reject(aborted(signal));
          setTimeout(send, plan.afterAbortMs);
        };
        if (signal?.aborted) onAbort();
        else signal?.addEventListener("abort", onAbort, { once: true });
        return;
      }
      let settled = false;
      signal?.addEventListener(
        "abort",
        () => {
          if (settled) return;
          settled = true;
          reject(aborted(signal));
        },
        { once: true },
      );
      setTimeout(() => {
        send().then(async (answer) => {
          if (plan.answerDelayMs > 0) await new Promise((r) => setTimeout(r, plan.answerDelayMs));
          if (settled) return;
          settled = true;
          if (answer.failed !== undefined) reject(new TypeError("fetch failed", { cause: new Error(answer.failed) }));
          else resolve(new Response(answer.body, { status: answer.status, headers: { "content-type": "application/json" } }));
        });
      }, plan.delayMs);
    });
  }

  return { fetch: fetchFn, hold };
}
