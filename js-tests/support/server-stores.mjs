// A store on a server of the suite's own: started in the enclosing describe()'s before(),
// closed with its server in its after(). Each function registers those hooks and returns
// a function that answers the store once before() ran.
import { after, before } from "node:test";

import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { startPostgres } from "./postgres-server.mjs";
import { startRedis } from "./redis-server.mjs";
import { startCluster } from "./redis-topology.mjs";
import { ls } from "./target.mjs";

/**
 * The store `connect(server)` makes on the server `start()` starts (handed to `opened(store,
 * server)` too); the server stopped with `server.dispose()` (or `stop()`).
 */
export function storeOnServer(start, connect, opened = () => {}) {
  let server;
  let store;
  before(async () => {
    server = await start();
    store = await connect(server);
    opened(store, server);
  });
  after(async () => {
    await store?.close();
    await (server?.dispose ?? server?.stop)?.call(server);
  });
  return () => store;
}

/** A RedisLockStore on a redis-server of its own. */
export const redisStore = () => storeOnServer(startRedis, (redis) => ls.RedisLockStore.connect(redis.url));

/** A RedisLockStore on a Redis Cluster of its own (three masters, a replica each). */
export const clusterStore = () => storeOnServer(startCluster, (cluster) => ls.RedisLockStore.connect({ cluster: cluster.urls }));

/** A PostgresLockStore on a PostgreSQL server of its own. */
export const postgresStore = () => storeOnServer(startPostgres, (pg) => PostgresLockStore.connect(pg.url));
