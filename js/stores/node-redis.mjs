// locksmith-js/node-redis: the lock store over a node-redis client (`redis` v4, v5 or v6,
// `createClient()` or `createCluster()`) the application already has and has connected.
// Same keys and scripts as RedisLockStore: locks taken through either can be released
// through the other.
import { RedisClientStore, storeOptions } from "./redis-client-store.mjs";
import { invalid, typeName } from "../api/errors.mjs";
import { STORE_NAME } from "../api/symbols.mjs";

function looksLikeNodeRedis(client) {
  return client !== null && typeof client === "object" && typeof client.evalSha === "function" && typeof client.duplicate === "function";
}

export class NodeRedisLockStore extends RedisClientStore {
  get [STORE_NAME]() {
    return "node-redis";
  }

  /**
   * @param client a connected node-redis client or cluster; it stays the application's
   * @param options `{ keyPrefix, operationTimeoutMs, notifyReleases, fencing }`
   */
  constructor(client, options) {
    const checked = storeOptions(options, "NodeRedisLockStore");
    if (!looksLikeNodeRedis(client)) {
      throw invalid(`NodeRedisLockStore needs a node-redis client (createClient() or createCluster() from "redis"); got ${typeName(client)}`);
    }
    super(
      {
        evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
        eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
        exists: (key) => client.exists(key),
        pttl: (key) => client.pTTL(key),
        get: (key) => client.get(key),
        // v4 to v6 all read these flags (v5 and v6 also take `condition`/`expiration`).
        setNx: (key, value, ttlMs) => client.set(key, value, { PX: ttlMs, NX: true, GET: true }),
        // A cluster (createCluster(), v4 to v6) lists its masters.
        cluster: typeof client.getMasters === "function",
        subscriber: (onBack) => {
          // A connection of its own: a subscribed connection can run nothing else.
          const sub = client.duplicate();
          sub.on("error", () => {}); // node-redis reconnects by itself; wake-ups pause meanwhile
          // Back after a lost connection (node-redis subscribes the channels again first).
          let readyBefore = false;
          sub.on("ready", () => {
            if (!readyBefore) readyBefore = true;
            else onBack();
          });
          // The store's own connection must not keep Node alive.
          const connected = sub.connect().then(() => {
            try {
              sub.unref?.();
            } catch {
              // A client without unref() keeps its socket as it is.
            }
          });
          return {
            // A client without isReady counts as up.
            live: () => sub.isReady !== false,
            subscribe: async (channel, onMessage) => {
              await connected;
              await sub.subscribe(channel, () => onMessage());
            },
            unsubscribe: async (channel) => {
              await connected;
              await sub.unsubscribe(channel);
            },
            close: async () => {
              await connected.catch(() => {});
              // v5 names it destroy(); v4 disconnect().
              await (typeof sub.destroy === "function" ? sub.destroy() : sub.disconnect());
            },
          };
        },
      },
      checked,
    );
  }
}
