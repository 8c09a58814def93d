// locksmith-js/upstash: the lock store over an @upstash/redis client (Redis over HTTPS), for
// runtimes without TCP such as Vercel Edge. Same keys and scripts as RedisLockStore:
// locks taken through either can be released through the other. REST has no pub/sub, so
// waiters retry at their retryDelay.
import { RedisClientStore, storeOptions } from "./redis-client-store.mjs";
import { invalid, typeName } from "../api/errors.mjs";
import { STORE_NAME } from "../api/symbols.mjs";

function looksLikeUpstash(client) {
  return client !== null && typeof client === "object" && typeof client.evalsha === "function" && typeof client.pttl === "function";
}

export class UpstashLockStore extends RedisClientStore {
  get [STORE_NAME]() {
    return "upstash";
  }

  /**
   * @param client an `@upstash/redis` `Redis`
   * @param options `{ keyPrefix, operationTimeoutMs, fencing }`
   */
  constructor(client, options) {
    if (options?.notifyReleases !== undefined) {
      throw invalid("UpstashLockStore has no notifyReleases option: REST has no pub/sub, so waiters retry at their retryDelay");
    }
    const checked = storeOptions(options, "UpstashLockStore");
    if (!looksLikeUpstash(client)) {
      throw invalid(`UpstashLockStore needs an @upstash/redis client (new Redis({ url, token })); got ${typeName(client)}`);
    }
    const driver = {
      evalsha: (sha, keys, args) => client.evalsha(sha, keys, args),
      eval: (source, keys, args) => client.eval(source, keys, args),
      exists: (key) => client.exists(key),
      pttl: (key) => client.pttl(key),
      setNx: (key, value, ttlMs) => client.set(key, value, { nx: true, px: ttlMs, get: true }),
    };
    // No `get`: the client may parse a GET reply as JSON (an owner token of digits would
    // come back a number), so ownership is compared on the server.
    super(driver, { ...checked, notifyReleases: false });
  }
}
