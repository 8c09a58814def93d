// The lock file reader: what `locksmith` sees of a FileLockStore's file (core/src/file.rs),
// opened through the native addon's `NativeFileStore.openExisting`, which reads a file
// that is there and never makes one.
import { stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

import { globRegExp, hold, StoreError, storeCall, UsageError, waitersByKey, waitingOf } from "../common.mjs";

const fileHold = (h) => hold(h.key, h.kind, h.remainingMs, h.fencingToken, h.owner, h.permits);
// A plain lock's holder with the value it proclaimed (an election's leader), or null.
const fileHolder = (h) => (h.kind === "lock" ? { ...fileHold(h), value: h.value ?? null } : fileHold(h));

export class FileReader {
  #store;
  #where;

  static async open(url) {
    let path;
    try {
      path = fileURLToPath(url);
    } catch (err) {
      throw new UsageError(`not a file URL: ${url} (${err.message}); write file:///absolute/path`);
    }
    // The store makes a missing file; the command only reads what is there.
    try {
      if (!(await stat(path)).isFile()) throw new StoreError(`${path} is not a lock file (not a regular file)`);
    } catch (err) {
      if (err instanceof StoreError) throw err;
      throw new StoreError(`no lock file at ${path}: ${err.message}`);
    }
    let addon;
    try {
      addon = createRequire(import.meta.url)("../../native-loader.cjs").loadAddon();
    } catch (err) {
      throw new StoreError(`lock files need the native addon, which did not load here: ${err.message}`);
    }
    try {
      return new FileReader(addon.NativeFileStore.openExisting(path), path);
    } catch (err) {
      throw new StoreError(`the lock file ${path}: ${err.message}`);
    }
  }

  constructor(store, path) {
    this.#store = store;
    this.#where = `the lock file ${path}`;
  }

  async #all() {
    return storeCall(this.#where, () => this.#store.holds());
  }

  async list(pattern) {
    const names = globRegExp(pattern);
    return (await this.#all()).filter((h) => !h.waiting && names.test(h.key)).map(fileHold);
  }

  async snapshot(pattern) {
    const names = globRegExp(pattern);
    const all = (await this.#all()).filter((h) => names.test(h.key));
    // A plain lock's or a semaphore's waiters leave nothing in the file; a read-write lock's
    // and a fair handle's (its place in the queue) do.
    return { holds: all.filter((h) => !h.waiting).map(fileHold), waiters: waitersByKey(all), absentWaiters: null };
  }

  async inspect(key) {
    const all = (await this.#all()).filter((h) => h.key === key);
    const holders = all.filter((h) => !h.waiting);
    const waiting = waitingOf(all);
    const semaphore = holders.find((h) => h.kind === "semaphore");
    return {
      holders: holders.map(fileHolder),
      limit: semaphore?.limit ?? null,
      waiting,
      // Counted where waiters leave a trace: a read-write lock, and a fair queue (on a fair
      // key every waiter is fair).
      waiters: all.some((h) => h.waiting || h.kind === "read" || h.kind === "write") ? waiting.length : null,
    };
  }

  // The waiters of other processes wake on their watch of the file.
  release(key) {
    return storeCall(this.#where, async () => (await this.#store.forceRelease(key)).map(fileHold));
  }

  async close() {
    this.#store.close();
  }
}
