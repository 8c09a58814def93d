// A lock handed between a Node server on RedisLockStore and a Cloudflare Worker (real
// workerd, through Miniflare) on UpstashLockStore, both ways: one key layout, one
// fencing counter, across runtimes.
import { describe, it } from "node:test";

import { nodeBesideWorker, takenInNodeReleasedInWorker, takenInWorkerReleasedInNode } from "../support/workerd-handoff.mjs";
import { TARGET } from "../support/target.mjs";
import { startUpstashRest } from "../support/upstash-rest.mjs";

describe("Node (RedisLockStore) and workerd (UpstashLockStore) share locks", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  const side = nodeBesideWorker("upstash-worker/worker.mjs", async (server) => {
    const rest = await startUpstashRest(server.url);
    return { bindings: { UPSTASH_URL: rest.url, UPSTASH_TOKEN: rest.token }, close: () => rest.close() };
  });

  it("taken in Node, seen and released in the worker", () => takenInNodeReleasedInWorker(side));

  it("taken in the worker, released in Node, with fencing tokens from one counter", () => takenInWorkerReleasedInNode(side));
});
