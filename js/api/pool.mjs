// The pool of native lock handles. A native handle costs far more to create than to
// reuse: one with nothing to remember (never acquired, or released) goes back to its
// backend's pool, and the next Lock on that backend resets it to its own key and TTL.
const POOL_LIMIT = 256;
const POOL = Symbol("locksmith.pool");
/** The Lock that last took a native handle. */
const USER = Symbol("locksmith.user");

/** A native handle on `backend` for `user` (a Lock), on `key` for `ttlMs`: from the pool and reset, or new. */
export function takeNative(backend, key, ttlMs, user) {
  let native = backend[POOL]?.pop();
  if (native === undefined) native = backend.lock(key, ttlMs);
  else native.reset(key, ttlMs);
  native[USER] = user;
  return native;
}

/** Marks `native`, a handle not taken from the pool (restored, or a semaphore's), as `user`'s. */
export function ownNative(native, user) {
  native[USER] = user;
}

/** Gives `native` back to `backend`'s pool (unless the pool is full). */
export function giveBack(backend, native) {
  const pool = (backend[POOL] ??= []);
  if (pool.length < POOL_LIMIT) pool.push(native);
}

/** `returned`, the handle `user` gave back last, out of the pool again if nobody took it since; else undefined. */
export function takeBack(backend, returned, user) {
  const pool = backend[POOL];
  if (returned[USER] !== user || pool[pool.length - 1] !== returned) return undefined;
  pool.pop();
  return returned;
}

/**
 * Set on a backend whose store never answers a plain lock at once (Redis, a JS store:
 * its handles' `releaseNow()` and `finishRunNow()` say null, as they always will; learnt
 * from those alone, since the WebAssembly build's `tryAcquire()` also says null when it
 * cannot draw an owner token): its plain locks go straight to the asynchronous call, one
 * addon crossing fewer per acquire and per release. A semaphore, read-write or several-key
 * handle is never answered at once, on any store, so only plain locks (kind "lock") set
 * and read it.
 */
const ANSWERS_LATER = Symbol("locksmith.answersLater");

/** Whether a `kind` handle on `backend` is known to be answered later, never at once. */
export function answersLater(backend, kind) {
  return kind === "lock" && backend[ANSWERS_LATER] === true;
}

/** A `kind` handle's synchronous call on `backend` said null: its store answers later. */
export function answeredLater(backend, kind) {
  if (kind === "lock") backend[ANSWERS_LATER] = true;
}
