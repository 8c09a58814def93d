// The API's process warnings, each once per process (warnOnce in errors.mjs keeps the
// flags on globalThis, for every copy of this module): a TTL that reads as seconds
// meant as milliseconds, and the default store in a process that is one of several.
import { envVar, warnOnce } from "./errors.mjs";

const WARNED = Symbol.for("locksmith.warned");

export function warnShortTtl(ttlMs) {
  if (globalThis[WARNED]?.has("LOCKSMITH_SHORT_TTL")) return;
  warnOnce(
    "LOCKSMITH_SHORT_TTL",
    `locksmith: a lock's TTL of ${ttlMs} ms is under a second. TTLs are in milliseconds: for seconds, ` +
      `write a string like "30s" (or 30_000); a hold whose TTL passes before the work is done lets a second holder in. ` +
      `For a TTL this short on purpose, write it as a string ("${ttlMs}ms"), or start Node with --disable-warning=LOCKSMITH_SHORT_TTL ` +
      `(LOCKSMITH_WARNINGS=0 silences every locksmith warning, the one about a forgotten setLockStore() too).`,
  );
}

/** A Node built-in module, or undefined outside Node (no static node: imports here: this file runs on workerd and in browsers too). */
function nodeBuiltin(name) {
  try {
    return globalThis.process?.getBuiltinModule?.(name);
  } catch {
    return undefined;
  }
}

/**
 * Warns when the default memory store starts being used in a process that is one of
 * several, where each would have its own locks: a cluster worker, a PM2 instance, a
 * worker thread.
 */
export function warnIfProcessLocal() {
  const proc = globalThis.process;
  if (typeof proc?.emitWarning !== "function" || globalThis[WARNED]?.has("LOCKSMITH_PROCESS_LOCAL_STORE")) return;
  let where;
  if (nodeBuiltin("node:cluster")?.isWorker === true) where = "a cluster worker";
  else if (envVar("NODE_APP_INSTANCE") !== undefined || envVar("pm_id") !== undefined) where = "a PM2 instance";
  else if (nodeBuiltin("node:worker_threads")?.isMainThread === false) where = "a worker thread";
  if (where === undefined) return;
  warnOnce(
    "LOCKSMITH_PROCESS_LOCAL_STORE",
    `locksmith: locks are being taken on the default store, this ${where === "a worker thread" ? "thread" : "process"}'s own memory, and this is ${where}: ` +
      `the other ${where === "a worker thread" ? "threads" : "processes"} do not see these locks, so each can hold the same key at once. ` +
      `For locks they share, call setLockStore() with a shared store (RedisLockStore, PostgresLockStore` +
      `${where === "a worker thread" ? ", or MemoryLockStore.shared(name) between worker threads" : ""}); ` +
      `to keep per-${where === "a worker thread" ? "thread" : "process"} locks, setLockStore(new MemoryLockStore()) says so.`,
  );
}
