// ioredis clients on a redis-server of the suite's own, for tests that watch what clients
// send (the benchmark's counters).
import { after, before } from "node:test";
import { Redis } from "ioredis";

import { startRedis } from "./redis-server.mjs";

/**
 * For the enclosing describe(): before() starts a redis-server and an ioredis client on
 * it, handed to `started(server, admin)`; the returned `client()` opens one more. after()
 * quits every client and stops the server.
 */
export function redisWithClients(started) {
  let server;
  const opened = [];
  const client = () => {
    const c = new Redis(server.url);
    opened.push(c);
    return c;
  };
  before(async () => {
    server = await startRedis();
    started(server, client());
  });
  after(async () => {
    await Promise.all(opened.map((c) => c.quit()));
    await server.stop();
  });
  return client;
}
