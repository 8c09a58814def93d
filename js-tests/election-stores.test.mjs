// Leader election on every store with a server (or a file) in the build under test: a
// leader in a child process is SIGKILLed and a standby here takes over within the
// store's effective TTL + its retry delay + 250 ms; a resign, or the leader's store closed
// on shutdown, hands over within the retry delay + 250 ms; terms grow. The stores are opened as the history checker's processes
// open them (histories/client.mjs openStore) on the servers it starts (run.mjs servers()).
// Each takeover time is printed; the bench records them too.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, describe, it } from "node:test";

import { openStore } from "./histories/client.mjs";
import { lockFile, servers } from "./histories/run.mjs";
import { ENTRY } from "./support/child.mjs";
import { TARGET, ls, uniqueKey } from "./support/target.mjs";

const { election } = ls;
const CLIENT = new URL("./histories/client.mjs", import.meta.url).href;
const RETRY_MS = 50;
// What a loaded two-core machine adds to each bound, beyond the 250 ms.
const SLACK_MS = 750;

const s = servers();
after(() => s.stop());

/** The stores: `{ name, spec: async () => spec, ttlMs, native?, noClose? }`, `ttlMs` being the store's effective lease. */
const STORES = [
  { name: "RedisLockStore", spec: async () => ({ redis: (await s.get("redis")).url }), ttlMs: 1_000 },
  { name: "IoRedisLockStore", spec: async () => ({ ioredis: (await s.get("redis")).url }), ttlMs: 1_000 },
  { name: "NodeRedisLockStore", spec: async () => ({ nodeRedis: (await s.get("redis")).url }), ttlMs: 1_000 },
  {
    name: "UpstashLockStore",
    spec: async () => {
      const rest = await s.get("upstash");
      return { upstash: rest.url, token: rest.token };
    },
    ttlMs: 1_000,
  },
  { name: "PostgresLockStore", spec: async () => ({ postgres: (await s.get("postgres")).url }), ttlMs: 1_000 },
  { name: "MySqlLockStore", spec: async () => ({ mysql: (await s.get("mysql")).url }), ttlMs: 1_000 },
  // etcd's leases are whole seconds, at least its minimum (2 s here).
  { name: "EtcdLockStore", spec: async () => ({ etcd: (await s.get("etcd")).endpoints }), ttlMs: 2_000 },
  // Reached from Node over the test worker's WebSocket (a plain JS store here, whose close()
  // only closes that socket): no close() case.
  { name: "DurableObjectLockStore", spec: async () => ({ durableObject: (await s.get("workerd")).url }), ttlMs: 1_000, noClose: true },
  { name: "FileLockStore", spec: async () => ({ file: await lockFile() }), ttlMs: 1_000, native: true },
];

// The leader: campaigns, prints its term, and leads until it is killed.
const LEADER = `
const ls = await import(process.argv[1]);
const { openStore } = await import(process.argv[2]);
const [name, ttl, spec] = [process.argv[3], Number(process.argv[4]), JSON.parse(process.argv[5])];
const { store } = await openStore(ls, spec);
const leadership = await ls.election(name, { store, ttl, retryDelay: ${RETRY_MS} }).campaign();
console.log(JSON.stringify({ term: leadership.term }));
setInterval(() => {}, 1_000);
`;

/** Starts the leader process; resolves to `{ child, term }` once it leads. */
function startLeader(name, ttlMs, spec) {
  const child = spawn(process.execPath, ["--input-type=module", "-e", LEADER, ENTRY, CLIENT, name, String(ttlMs), JSON.stringify(spec)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the leader did not lead within 20 s:\n${err}`));
    }, 20_000);
    child.stdout.on("data", (d) => {
      out += d;
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (line !== undefined) {
        clearTimeout(timer);
        resolve({ child, term: JSON.parse(line).term });
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the leader exited with ${code}:\n${err}`));
    });
  });
}

for (const row of STORES) {
  if (row.native && TARGET === "wasm") continue;
  describe(`election() on ${row.name}`, () => {
    let spec;
    let opened = [];
    const open = async () => {
      spec ??= await row.spec();
      const store = await openStore(ls, spec);
      opened.push(store);
      return store.store;
    };
    after(async () => {
      for (const o of opened) await o.close().catch(() => {});
      opened = [];
    });

    it("a standby takes over from a SIGKILLed leader within the TTL + retry delay + 250 ms", async () => {
      const name = uniqueKey("killed");
      spec ??= await row.spec();
      const { child, term } = await startLeader(name, row.ttlMs, spec);
      const store = await open();
      const standby = election(name, { store, ttl: row.ttlMs, retryDelay: RETRY_MS }).campaign();
      let early = false;
      standby.then(
        () => (early = true),
        () => {},
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(early, false, "the standby waits while the leader lives");
      const killedAt = performance.now();
      child.kill("SIGKILL");
      const leadership = await standby;
      const ms = performance.now() - killedAt;
      const bound = row.ttlMs + RETRY_MS + 250;
      console.log(`# ${row.name} (${TARGET}): takeover ${Math.round(ms)} ms after SIGKILL (bound ${bound} ms)`);
      assert.ok(ms <= bound + SLACK_MS, `took over ${Math.round(ms)} ms after the kill; the bound is ${bound} ms`);
      assert.ok(leadership.term > term, `terms grow: ${term} then ${leadership.term}`);
      assert.equal(await leadership.resign(), true);
    });

    it("a resign hands over within the retry delay + 250 ms", async () => {
      const name = uniqueKey("resign");
      const [a, b] = [await open(), await open()];
      const leader = await election(name, { store: a, ttl: row.ttlMs * 10, retryDelay: RETRY_MS }).campaign();
      const standby = election(name, { store: b, ttl: row.ttlMs * 10, retryDelay: RETRY_MS }).campaign();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const resignedAt = performance.now();
      assert.equal(await leader.resign(), true);
      const next = await standby;
      const ms = performance.now() - resignedAt;
      console.log(`# ${row.name} (${TARGET}): handover ${Math.round(ms)} ms after resign()`);
      assert.ok(ms <= RETRY_MS + 250 + SLACK_MS, `handed over ${Math.round(ms)} ms after the resign`);
      assert.ok(next.term > leader.term);
      await next.resign();
    });

    it("a leader's clean shutdown (its store's close()) hands over within the retry delay + 250 ms", {
      skip: row.noClose && "no close() of its own",
    }, async () => {
      const name = uniqueKey("close");
      const a = await openStore(ls, spec ?? (spec = await row.spec()));
      const b = await open();
      const leader = await election(name, { store: a.store, ttl: row.ttlMs * 10, retryDelay: RETRY_MS }).campaign();
      const standby = election(name, { store: b, ttl: row.ttlMs * 10, retryDelay: RETRY_MS }).campaign();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const closedAt = performance.now();
      await a.close();
      assert.equal(leader.signal.aborted, true, "the leadership ended with the store");
      const next = await standby;
      const ms = performance.now() - closedAt;
      console.log(`# ${row.name} (${TARGET}): handover ${Math.round(ms)} ms after close()`);
      assert.ok(ms <= RETRY_MS + 250 + SLACK_MS, `handed over ${Math.round(ms)} ms after the close`);
      await next.resign();
    });
  });
}
