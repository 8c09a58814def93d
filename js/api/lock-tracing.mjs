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
