import type { RedisClientStore, RedisClientStoreOptions } from "./redis-client-store.js";
export type { RedisClientStoreOptions } from "./redis-client-store.js";

/** The lock store over a connected node-redis (v4, v5, v6) client or cluster (close() leaves it open). */
export declare class NodeRedisLockStore extends RedisClientStore {
  constructor(client: object, options?: RedisClientStoreOptions);
}
