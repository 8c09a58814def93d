// A wait that an AbortSignal, or the store's close(), can end: the native handle's
// abortable acquire, and what it answers when it was cut short.
import { toLockError } from "./errors.mjs";

/** What an aborted acquire's inner steps return, for the caller to reject with the signal's reason. */
export const ABORTED = Symbol("locksmith.aborted");
/** Aborted with an attempt on its way (released once it settles: a hold may remain). */
export const ABORTED_IN_FLIGHT = Symbol("locksmith.aborted-in-flight");

/**
 * The store's acquire on `native` (a handle on `key`), ended by `signal` or by `closing`
 * (the store's record: its close()): ABORTED then, or ABORTED_IN_FLIGHT when an attempt
 * was on its way. A wait joins the record's `waits`, which one listener of its signal
 * ends, rather than listening itself (eleven listeners on one signal make Node warn of a
 * leak). `afterRefusedTry`: the caller's own attempt was refused just before.
 */
export async function acquireAbortable(binding, native, key, { timeout, retryDelay, signal, closing, afterRefusedTry }) {
  const token = new binding.AbortToken();
  const onAbort = () => {
    token.abort();
    binding.afterAbort?.(native);
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  closing?.waits.add(onAbort);
  if (closing?.signal.aborted) onAbort();
  try {
    return await native.acquireAbortable(timeout, retryDelay, token, afterRefusedTry);
  } catch (err) {
    const error = toLockError(err, key);
    if (error.code === "ABORTED") {
      return error.holdMayRemain === true ? ABORTED_IN_FLIGHT : ABORTED;
    }
    throw err;
  } finally {
    try {
      signal?.removeEventListener("abort", onAbort);
      closing?.waits.delete(onAbort);
    } catch {
      // The acquire's answer stands; the token only outlives it.
    }
  }
}
