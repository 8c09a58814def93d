import type { RedisClientStore, RedisClientStoreOptions } from "./redis-client-store.js";

/** The lock store over an @upstash/redis client (HTTPS; no wake-ups, waiters retry). */
export declare class UpstashLockStore extends RedisClientStore {
  constructor(client: object, options?: Omit<RedisClientStoreOptions, "notifyReleases">);
}
