import type { RedisClientStore, RedisClientStoreOptions } from "./redis-client-store.js";
export type { RedisClientStoreOptions } from "./redis-client-store.js";

/** The lock store over an ioredis `Redis` or `Cluster` (close() leaves the client open). */
export declare class IoRedisLockStore extends RedisClientStore {
  constructor(client: object, options?: RedisClientStoreOptions);
}
