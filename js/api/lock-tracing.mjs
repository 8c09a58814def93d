// What a lock publishes on the diagnostics channels (diagnostics.mjs): the context of a
// call, and its outcome.
import { STORE_NAME } from "./symbols.mjs";
import { optionalDurationMs } from "./durations.mjs";

/** A store's name in diagnostics: a shipped store's own, else "custom". */
export const storeName = (store) => {
  const name = store?.[STORE_NAME];
  return typeof name === "string" ? name : "custom";
};

/** Whether acquire `options` wait (a timeout above 0): a refusal is then a timeout, not busy. */
export const waits = (options) => {
  try {
    return optionalDurationMs("timeout", options?.timeout) > 0;
  } catch {
    return false;
  }
};

export const releaseOutcome = (released) => (released ? "released" : "not-held");
export const extendOutcome = () => "extended";

/**
 * `call()` published on the tracing channel `channel` with `context`; the outcome is
 * `outcome(value)`, or "not-held" / "error" for a rejection.
 */
export function traceCall(channel, context, outcome, call) {
  return channel.tracePromise(() => {
    let promise;
    try {
      promise = call();
    } catch (err) {
      promise = Promise.reject(err);
    }
    return promise.then(
      (value) => {
        context.outcome = outcome(value);
        return value;
      },
      (err) => {
        context.outcome = err?.code === "LOCK_NOT_HELD" ? "not-held" : "error";
        throw err;
      },
    );
  }, context);
}

/**
 * A lock's acquire as the acquire channel's context tells it: `acquire()` waits; the
 * outcome, the attempts (the native handle's count since `native.attempts` now), the time
 * waited since `started` and the fencing token go to `context`; `hold()` numbers a grant;
 * `done()` runs last, whatever the outcome.
 */
export async function observeAcquire(context, native, options, started, { acquire, hold, done }) {
  const before = native.attempts;
  try {
    const taken = await acquire();
    context.outcome = taken ? "acquired" : waits(options) ? "timeout" : "busy";
    if (taken) context.hold = hold();
    return taken;
  } catch (err) {
    const signal = options?.signal;
    context.outcome = signal?.aborted === true && (err === signal.reason || err?.code === "ABORTED") ? "aborted" : "error";
    throw err;
  } finally {
    context.attempts = (native.attempts - before) >>> 0;
    context.waitedMs = performance.now() - started;
    context.fencingToken = native.fencingToken ?? null;
    done();
  }
}
