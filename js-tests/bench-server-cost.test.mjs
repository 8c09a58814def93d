// The benchmark's account of where the Redis time goes: the server's CPU and each
// command type's time per pair (INFO cpu, INFO commandstats), the commands a client's
// pair sends as MONITOR shows them, and the bare floor that replays those commands from a
// minimal RESP client. Each must report exactly what known traffic did.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { countRequests, monitorArgs } from "../bench/round-trips.mjs";
import { capturePair, replay, respClient, sampleServer, serverCost } from "../bench/server-cost.mjs";
import { redisWithClients } from "./support/redis-clients.mjs";

const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

describe("the benchmark's server cost per pair", () => {
  let server;
  let admin;
  const client = redisWithClients((started, adminClient) => {
    [server, admin] = [started, adminClient];
  });

  it("counts each command type's calls per unit, a script's inner commands under their own names, not its own INFO", async () => {
    const c = client();
    await c.ping();
    const start = await sampleServer(admin);
    for (let i = 0; i < 10; i++) await c.set(`cost:${i}`, "v");
    for (let i = 0; i < 5; i++) await c.eval("redis.call('get', KEYS[1]); return redis.call('get', KEYS[1])", 1, "cost:0");
    const cost = serverCost(start, await sampleServer(admin), 5);
    assert.deepEqual(Object.fromEntries(Object.entries(cost.commands).map(([k, v]) => [k, v.calls])), { set: 2, eval: 1, get: 2 });
    assert.ok(cost.cpuUs > 0, `server CPU per unit ${cost.cpuUs}`);
    assert.equal(cost.scriptsUs, cost.commands.eval.usec);
    assert.ok(cost.scriptsUs > 0);
  });

  it("reads a client's arguments back from MONITOR, quotes, backslashes and control bytes included", async () => {
    let c;
    const value = 'a "quoted" \\ back\nslash\t\u0001\u007f é';
    const counted = await countRequests(
      admin,
      server.port,
      async () => {
        c = client();
        await c.ping();
      },
      () => c.set("monitor:args", value),
      { keep: true },
    );
    assert.deepEqual(
      counted.lines.map((l) => l.args),
      [["set", "monitor:args", Buffer.from(value).toString("latin1")]],
    );
    assert.equal(monitorArgs(`+1.2 [0 lua] "GET" "k"`).source, "lua");
  });

  it("answers each RESP reply kind from the minimal client, and an error reply as a rejection", async () => {
    const raw = await respClient(server.port);
    try {
      assert.equal(await raw.send(["SET", "resp:k", "v", "PX", "30000", "NX"]), "OK");
      assert.equal(await raw.send(["SET", "resp:k", "v", "PX", "30000", "NX"]), null);
      assert.equal(await raw.send(["GET", "resp:k"]), "v");
      assert.equal(await raw.send(["DEL", "resp:k"]), 1);
      assert.deepEqual(await raw.send(["EVAL", "return {1, 'x', false}", "0"]), [1, "x", null]);
      await assert.rejects(raw.send(["NOSUCHCOMMAND"]), /ERR unknown command/);
      // Pipelined: replies come back in order.
      assert.deepEqual(await Promise.all([raw.send(["PING"]), raw.send(["ECHO", "two"])]), ["PONG", "two"]);
    } finally {
      raw.close();
    }
  });

  it("replays a client's pair so that the server does the same work per pair", async () => {
    let c;
    const pair = async () => {
      await c.set("pair:k", "owner-1", "PX", 30_000, "NX");
      await c.eval(RELEASE, 1, "pair:k", "owner-1");
    };
    // The pair's client opens inside the capture: connections opened before it are not its.
    const captured = await capturePair(
      admin,
      server.port,
      async () => {
        c = client();
        await pair();
      },
      pair,
    );
    assert.deepEqual(
      captured.commands.map((args) => args[0].toLowerCase()),
      ["set", "eval"],
    );
    assert.deepEqual(captured.scripted, ["get", "del"]);
    const calls = async (run) => {
      const start = await sampleServer(admin);
      for (let i = 0; i < 20; i++) await run();
      return Object.fromEntries(Object.entries(serverCost(start, await sampleServer(admin), 20).commands).map(([k, v]) => [k, v.calls]));
    };
    const raw = await respClient(server.port);
    try {
      const theirs = await calls(pair);
      const ours = await calls(() => replay(raw, captured.commands));
      assert.deepEqual(ours, theirs);
      assert.deepEqual(ours, { set: 1, eval: 1, get: 1, del: 1 });
    } finally {
      raw.close();
    }
  });
});
