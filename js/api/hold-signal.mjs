// The AbortSignal of a lock's current hold (`lock.signal`): one per hold, made when first
// asked for, aborted when the hold ends — released (an AbortError), lost
// (LockNotHeldError, or the store's error), or ended by the store's close()
// (StoreClosedError).
import { LockNotHeldError, toLockError } from "./errors.mjs";

/** The reason a hold's signal aborts with when the holder released it. */
function releasedReason(key) {
  const message = `locksmith: the lock on ${JSON.stringify(key)} was released`;
  return typeof DOMException === "function" ? new DOMException(message, "AbortError") : Object.assign(new Error(message), { name: "AbortError" });
}

/** A lock's hold signals: the last one handed out, and what it was for. */
export class HoldSignal {
  /** `{ native, generation, controller }`: the native handle and hold generation of the last signal. */
  #watch;

  /**
   * The signal of the hold `native` (the lock's native handle, or undefined) has now, on
   * `key`; `ended` is `{ reason }` when the store's close() ended the current hold.
   */
  of(native, key, ended) {
    const generation = native === undefined ? null : native.holdGeneration;
    const watch = this.#watch;
    // Ended by the store's close() (StoreClosedError), even while its release is on its way.
    if (ended !== undefined) {
      if (watch === undefined) return AbortSignal.abort(ended.reason);
      if (!watch.controller.signal.aborted) watch.controller.abort(ended.reason);
      return watch.controller.signal;
    }
    if (generation === null) {
      // Nothing certainly held: released, never taken, or (an owner still recorded)
      // past its deadline — lost, and the signal says so at once.
      const lost = native?.hasOwner === true;
      const reason = lost
        ? new LockNotHeldError(`locksmith: lock ${JSON.stringify(key)} is not held by this handle (its TTL passed without an extend)`, key)
        : undefined;
      if (watch !== undefined) {
        if (!watch.controller.signal.aborted) watch.controller.abort(reason ?? releasedReason(key));
        return watch.controller.signal;
      }
      return AbortSignal.abort(reason ?? new LockNotHeldError(`locksmith: lock ${JSON.stringify(key)} is not held by this handle (nothing is held)`, key));
    }
    // The same hold: the same native handle and generation, and not ended (a pooled
    // handle is reused, and reset, so its generation alone does not tell two holds
    // apart; a live hold's signal is never aborted).
    if (watch !== undefined && watch.native === native && watch.generation === generation && !watch.controller.signal.aborted) {
      return watch.controller.signal;
    }
    if (watch !== undefined && !watch.controller.signal.aborted) {
      watch.controller.abort(new LockNotHeldError(`locksmith: lock ${JSON.stringify(key)} is not held by this handle (it expired and was lost)`, key));
    }
    const controller = new AbortController();
    this.#watch = { native, generation, controller };
    native.watch().then(
      () => controller.abort(releasedReason(key)),
      (err) => controller.abort(toLockError(err, key)),
    );
    return controller.signal;
  }

  /** Ends the current hold's signal as released (the watcher may say so later too). */
  released(key) {
    const watch = this.#watch;
    if (watch !== undefined && !watch.controller.signal.aborted) watch.controller.abort(releasedReason(key));
  }

  /** Aborts the signal of `native`'s hold with `reason`, unless it has ended already. */
  end(native, reason) {
    const watch = this.#watch;
    if (watch !== undefined && watch.native === native && !watch.controller.signal.aborted) watch.controller.abort(reason);
  }

  /** What the signal of `native`'s hold aborted with, or undefined while it has not. */
  reason(native) {
    const watch = this.#watch;
    return watch?.native === native && watch.controller.signal.aborted ? watch.controller.signal.reason : undefined;
  }
}
