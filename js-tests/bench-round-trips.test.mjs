// The benchmark's contended figures: its client round-trip count counts exactly what a
// client sends and refuses a count it cannot trust; its fairness index and per-worker
// counts add up.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

import { contendOnOneKey } from "../bench/exclusion.mjs";
import { countRequests, knownTraffic } from "../bench/round-trips.mjs";
import { jainIndex } from "../bench/stats.mjs";
import { redisWithClients } from "./support/redis-clients.mjs";
import { ls, uniqueKey } from "./support/target.mjs";

describe("the benchmark's client round-trip count", () => {
  let server;
  let admin;
  let bystander;
  const client = redisWithClients((started, adminClient) => {
    [server, admin] = [started, adminClient];
  });
  before(async () => {
    bystander = client();
    await bystander.ping();
  });

  it("counts each request of the new connections, not their scripts' commands nor older connections' requests", async () => {
    const traffic = knownTraffic(bystander, { sets: 4, scripts: 3 });
    const counted = await countRequests(
      admin,
      server.port,
      () => traffic.open(client),
      async () => {
        await traffic.run();
        return "ran";
      },
    );
    assert.deepEqual(
      { result: counted.result, requests: counted.requests, scripted: counted.scripted, connections: counted.connections, others: counted.others },
      { result: "ran", requests: 12, scripted: 6, connections: 2, others: 1 },
    );
  });

  it("refuses a count of zero: nothing new sent anything", async () => {
    await assert.rejects(
      countRequests(
        admin,
        server.port,
        async () => {},
        () => bystander.ping(),
      ),
      /MONITOR saw no command/,
    );
  });

  it("refuses a count MONITOR did not see whole (an admin command)", async () => {
    let quiet;
    await assert.rejects(
      countRequests(
        admin,
        server.port,
        async () => {
          quiet = client();
          await quiet.ping();
        },
        async () => {
          await quiet.set("seen", "1");
          await quiet.config("GET", "maxmemory");
        },
      ),
      /processed 2 commands while MONITOR showed 1/,
    );
  });
});

describe("the benchmark's fairness", () => {
  it("is Jain's index: 1 for equal shares, 1/n when one takes all", () => {
    assert.equal(jainIndex([5, 5, 5, 5]), 1);
    assert.equal(jainIndex([8, 0, 0, 0]), 0.25);
    assert.equal(jainIndex([3, 1]), 0.8);
    assert.equal(jainIndex([0, 0]), 0);
  });

  it("counts each worker's critical sections, adding up to all of them", async () => {
    const store = new ls.MemoryLockStore();
    const wait = async (key, fn) => {
      const l = new ls.Lock(key, 30_000, store);
      if (!(await l.acquire({ timeout: 60_000, retryDelay: 1 }))) throw new Error("timed out");
      await fn();
      await l.release();
    };
    const r = await contendOnOneKey(wait, { key: uniqueKey("fairness"), workers: 4, ms: 100 });
    assert.equal(r.perWorker.length, 4);
    assert.equal(
      r.perWorker.reduce((a, x) => a + x, 0),
      r.sections,
    );
    assert.ok(r.sections > 0);
  });
});
