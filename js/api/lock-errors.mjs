// The errors a lock's calls end with when a wait is aborted, the store is closed, or a
// hold is lost while run()'s function works: each says what is held and what may remain.
import { AbortError, LockNotHeldError, StoreClosedError, toLockError } from "./errors.mjs";

/**
 * What an acquire ended by `signal` rejects with: the signal's reason when the caller
 * gave one, else an AbortError (the platform's default reason becomes its `cause`).
 * `mayRemain`: an attempt was on its way, released once it settles: then always an
 * AbortError with `holdMayRemain` (the signal's reason as its `reason`), which says so.
 */
export function abortedBy(signal, key, unreleased, mayRemain = false) {
  const reason = signal.reason;
  const defaultReason = reason === undefined || (typeof DOMException === "function" && reason instanceof DOMException && reason.name === "AbortError");
  // A grant that raced the abort and could not be given back stays until its TTL, and an
  // attempt on its way may still be granted: said so (the release's error, or the
  // signal's reason, as the cause) rather than "nothing is held".
  if (unreleased !== undefined || mayRemain) {
    const err = new AbortError(
      unreleased !== undefined
        ? `locksmith: the acquire of ${JSON.stringify(key)} was aborted, but the grant that raced the abort could not be released (${unreleased.message.replace(/^locksmith: /, "")}): it is held until its TTL passes`
        : `locksmith: the acquire of ${JSON.stringify(key)} was aborted with an attempt on its way: a hold it takes is released once it settles, or stays until its TTL passes`,
      unreleased !== undefined ? { cause: unreleased } : reason === undefined ? undefined : { cause: reason },
    );
    err.key = key;
    err.reason = reason;
    err.holdMayRemain = true;
    return err;
  }
  if (!defaultReason) return reason;
  const err = new AbortError(
    `locksmith: the acquire of ${JSON.stringify(key)} was aborted; nothing is held`,
    reason === undefined ? undefined : { cause: reason },
  );
  err.key = key;
  return err;
}

/** A StoreClosedError for the acquire of `key`: the words of `closed` (the store's close() error), then `tail`. */
export function storeClosed(closed, tail, key, mayRemain = false) {
  const err = new StoreClosedError(`${closed.message}${tail}`);
  err.key = key;
  err.holdMayRemain = mayRemain;
  return err;
}

/** A wait on `key` ended by the store's close(); `mayRemain`: with an attempt on its way. */
export function closedWhileWaiting(closed, key, mayRemain) {
  return storeClosed(
    closed,
    ` while the acquire of ${JSON.stringify(key)} waited${
      mayRemain ? ", with an attempt on its way: a hold it takes is released once it settles, or stays until its TTL passes" : "; nothing is held"
    }`,
    key,
    mayRemain,
  );
}

/**
 * An acquire granted after its store's close() began: `release()`s the grant, then
 * rejects with a StoreClosedError that says whether the grant could be released.
 */
export async function releaseGrantAfterClose(release, closed, key) {
  let unreleased;
  try {
    await release();
  } catch (err) {
    unreleased = toLockError(err, key);
  }
  throw grantAfterClose(closed, key, unreleased);
}

/** A grant of `key` that arrived after the store's close() began: released, or `unreleased` (the release's error). */
function grantAfterClose(closed, key, unreleased) {
  const err = new StoreClosedError(
    `${closed.message} while the acquire of ${JSON.stringify(key)} was on its way; ${
      unreleased === undefined
        ? "its grant was released"
        : `its grant could not be released (${unreleased.message.replace(/^locksmith: /, "")}): it is held until its TTL passes`
    }`,
    unreleased === undefined ? undefined : { cause: unreleased },
  );
  err.key = key;
  err.holdMayRemain = unreleased !== undefined;
  return err;
}

/** The reason the signal of a hold on `key` aborts with when the store's close() ends the hold. */
export function endedByClose(closed, key) {
  const reason = new StoreClosedError(`${closed.message}, which ended the hold on ${JSON.stringify(key)}`);
  reason.key = key;
  return reason;
}

/** run()'s rejection when the store's close() ended the hold on `key` before the function settled. */
export function closedDuringRun(closed, key) {
  const err = new StoreClosedError(
    `${closed.message} before run()'s function settled, and its close() ended the hold on ${JSON.stringify(key)}: the work was not protected throughout`,
  );
  err.key = key;
  return err;
}

/** run()'s rejection when the hold on `key` was lost before the function settled; `reason`: what its signal aborted with. */
export function lostDuringRun(key, reason) {
  const why = typeof reason?.message === "string" ? reason.message.replace(/^locksmith: /, "") : undefined;
  return new LockNotHeldError(
    `locksmith: lock ${JSON.stringify(key)} was lost before run()'s function settled, so the work was not protected throughout${why ? ` (${why})` : " (its TTL passed without an extend)"}`,
    key,
  );
}
