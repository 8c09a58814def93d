// A local implementation of the Upstash REST protocol in front of a real redis-server:
// POST / with the command as a JSON array answers { result } or { error } (status 400),
// POST /pipeline answers one of those per command, strings base64-encoded when the client
// asks with `Upstash-Encoding: base64` (as @upstash/redis does). Enough for the
// UpstashLockStore tests; commands run on one ioredis connection.
import { createServer } from "node:http";

import { Redis } from "ioredis";

const encode = (value, base64) => {
  if (!base64) return value;
  if (typeof value === "string") return value === "OK" ? value : Buffer.from(value).toString("base64");
  if (Array.isArray(value)) return value.map((v) => encode(v, base64));
  return value;
};

/**
 * Starts the REST endpoint for `redisUrl`; resolves to `{ url, token, holdBack(ms), loseAnswers(n), answersToLose(), close() }`.
 * `holdBack(ms)`: requests that arrive in the next `ms` are run when it ends, in the order
 * they came, whether or not their caller still waits (a request applied late).
 * `loseAnswers(n)`: the next `n` requests are run and their connections then dropped
 * unanswered (a client that retries a failed request has it applied twice).
 */
export async function startUpstashRest(redisUrl, { token = "test-token" } = {}) {
  const redis = new Redis(redisUrl, { lazyConnect: false });
  let heldUntil = 0;
  let held = Promise.resolve();
  let toLose = 0;
  const run = async (command, base64) => {
    try {
      const [name, ...args] = command.map(String);
      return { result: encode(await redis.call(name, ...args), base64) };
    } catch (err) {
      return { error: err.message };
    }
  };
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const reply = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${token}`) return reply(401, { error: "Unauthorized" });
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString());
    } catch {
      return reply(400, { error: "ERR the body must be JSON" });
    }
    const base64 = String(req.headers["upstash-encoding"]).toLowerCase() === "base64";
    if (performance.now() < heldUntil) {
      // Queued behind the requests held before it: run in arrival order.
      const wait = held.then(() => new Promise((resolve) => setTimeout(resolve, Math.max(0, heldUntil - performance.now()))));
      held = wait;
      await wait;
    }
    if (toLose > 0) {
      toLose -= 1;
      for (const command of req.url === "/pipeline" ? body : [body]) await run(command, base64);
      return res.socket.destroy();
    }
    if (req.url === "/pipeline") {
      const results = [];
      for (const command of body) results.push(await run(command, base64));
      return reply(200, results);
    }
    const result = await run(body, base64);
    return reply(result.error === undefined ? 200 : 400, result);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    token,
    holdBack(ms) {
      heldUntil = Math.max(heldUntil, performance.now() + ms);
    },
    loseAnswers(n) {
      toLose += n;
    },
    /** How many of the answers `loseAnswers` asked for are still to be lost. */
    answersToLose: () => toLose,
    async close() {
      await new Promise((resolve) => server.close(resolve));
      server.closeAllConnections?.();
      await redis.quit();
    },
  };
}
