// locksmith-js/ioredis: the lock store over an ioredis client the application already has
// (a `Redis`, a `Cluster`, or a `Redis` on Sentinels). Same keys and scripts as
// RedisLockStore: locks taken through either can be released through the other.
import { RedisClientStore, storeOptions } from "./redis-client-store.mjs";
import { invalid, typeName } from "../api/errors.mjs";
import { STORE_NAME } from "../api/symbols.mjs";

function looksLikeIoredis(client) {
  return client !== null && typeof client === "object" && typeof client.evalsha === "function" && typeof client.duplicate === "function";
}

// How many connections each client lost, counted once per client however many stores
// share it (ioredis warns past ten listeners of one event).
const lost = new WeakMap();

/**
 * A counter of `client`'s lost connections, when it sends a command again that a lost
 * connection left unanswered: a Redis unless `autoResendUnfulfilledCommands` is off, a
 * Cluster always (a command whose node's connection closed is retried on a node; a close
 * of any node counts). The store reads the counter around a release, whose second
 * sending answers "not held".
 */
function lostConnections(client) {
  if (typeof client.on !== "function") return undefined;
  if (client.isCluster !== true && client.options?.autoResendUnfulfilledCommands === false) return undefined;
  let counter = lost.get(client);
  if (counter === undefined) {
    counter = { n: 0 };
    lost.set(client, counter);
    const count = () => {
      counter.n++;
    };
    if (client.isCluster === true) {
      for (const node of client.nodes?.("all") ?? []) node.on("close", count);
      client.on("+node", (node) => node.on("close", count));
    } else {
      client.on("close", count);
    }
  }
  return () => counter.n;
}

export class IoRedisLockStore extends RedisClientStore {
  get [STORE_NAME]() {
    return "ioredis";
  }

  /**
   * @param client an ioredis `Redis` or `Cluster`; it stays the application's (close() does not quit it)
   * @param options `{ keyPrefix, operationTimeoutMs, notifyReleases, fencing }`
   */
  constructor(client, options) {
    const checked = storeOptions(options, "IoRedisLockStore");
    if (!looksLikeIoredis(client)) {
      throw invalid(`IoRedisLockStore needs an ioredis client (new Redis(...) or new Cluster(...)); got ${typeName(client)}`);
    }
    // ioredis would prefix the scripts' keys but not the channels their releases publish
    // on, and the locks would not be RedisLockStore's: the store's keyPrefix does it.
    const clientPrefix = client.options?.keyPrefix ?? client.options?.redisOptions?.keyPrefix;
    if (clientPrefix) {
      throw invalid(
        `IoRedisLockStore needs a client without ioredis's keyPrefix (this one has ${JSON.stringify(clientPrefix)}); give it to the store instead: new IoRedisLockStore(client, { keyPrefix: ${JSON.stringify(clientPrefix + "locksmith:")} })`,
      );
    }
    super(
      {
        evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
        eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
        exists: (key) => client.exists(key),
        pttl: (key) => client.pttl(key),
        get: (key) => client.get(key),
        setNx: (key, value, ttlMs) => client.set(key, value, "PX", ttlMs, "NX", "GET"),
        lostConnections: lostConnections(client),
        cluster: client.isCluster === true,
        subscriber: (onBack) => {
          // A connection of its own: a subscribed connection can run nothing else.
          const sub = client.duplicate();
          const handlers = new Map();
          sub.on("message", (channel) => handlers.get(channel)?.());
          // The store's own connection must not keep Node alive.
          sub.on("connect", () => sub.stream?.unref?.());
          sub.on("error", () => {}); // ioredis reconnects by itself; wake-ups pause meanwhile
          // Back after a lost connection: ioredis subscribes the channels again right after
          // this event, so a PING answered after that says they are in place.
          let readyBefore = false;
          sub.on("ready", () => {
            if (!readyBefore) readyBefore = true;
            else Promise.resolve().then(() => sub.ping().then(onBack, () => {}));
          });
          return {
            live: () => sub.status === "ready",
            subscribe: async (channel, onMessage) => {
              handlers.set(channel, onMessage);
              await sub.subscribe(channel);
            },
            unsubscribe: async (channel) => {
              handlers.delete(channel);
              await sub.unsubscribe(channel);
            },
            close: async () => {
              sub.disconnect();
            },
          };
        },
      },
      checked,
    );
  }
}
