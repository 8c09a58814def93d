// RedisLockStore where the build has no Redis engine yet (the WebAssembly build): the
// name exists, so code that imports it loads everywhere, and connecting says why not.
import { UnsupportedError } from "./api.mjs";

const unsupported = () =>
  new UnsupportedError(
    "locksmith: RedisLockStore needs the native addon, and this is the WebAssembly build " +
      "(no native binary for this platform, or a runtime without Node addons); use another store here for now",
  );

export class RedisLockStore {
  /** Rejects with an UnsupportedError (code UNSUPPORTED). */
  static async connect() {
    throw unsupported();
  }

  constructor() {
    throw unsupported();
  }
}
