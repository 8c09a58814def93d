// One OS process of an etcd history run: the history checker's clients (histories/client.mjs
// runClients) on an EtcdLockStore. The checker's own client process (histories/client.mjs)
// opens the stores it knows by name, etcd not among them; this is that process for etcd,
// with the same config and the same output (one JSON line per hold, then a summary).
//
//   node etcd-history-client.mjs '{"endpoints": [...], "broken"?: how, ...runClients config}'
//
// `broken`: "put-without-compare" (below), or one of histories/client.mjs brokenStore's.
import { setTimeout as sleep } from "node:timers/promises";

import { EtcdLockStore } from "locksmith-js/etcd";

import { brokenStore, now, runClients, syncClock } from "../histories/client.mjs";
import { ls } from "./target.mjs";

const config = JSON.parse(process.argv[2]);
const { endpoints, operationTimeoutMs, broken, ...clientConfig } = config;

let opened;
for (const deadline = now() + 15_000; ; ) {
  try {
    opened = await EtcdLockStore.connect({ endpoints, ...(operationTimeoutMs ? { operationTimeoutMs } : {}) });
    break;
  } catch (err) {
    if (err?.code !== "STORE_UNAVAILABLE" || now() > deadline) throw err;
    await sleep(100);
  }
}
/** POSTs to the first member that answers. */
async function etcd(path, body) {
  let last;
  for (const url of endpoints) {
    try {
      return await (await fetch(`${url}/v3/${path}`, { method: "POST", body: JSON.stringify(body) })).json();
    } catch (err) {
      last = err;
    }
  }
  throw last;
}
const b64 = (text) => Buffer.from(text).toString("base64");

let store = opened;
if (broken === "put-without-compare") {
  // A broken guard of etcd's own: acquire puts the key under a lease without the
  // transaction's "create revision is 0" compare, so it takes a held key too. The rest is
  // the real store (the value has its form, so release and extend still check the owner).
  store = {};
  for (const name of ["release", "extend", "isLocked", "remainingTime", "isHeldBy", "ownerRemainingTime"]) store[name] = (...args) => opened[name](...args);
  store.acquire = async (key, owner, ttlMs) => {
    const { ID } = await etcd("lease/grant", { TTL: Math.ceil(ttlMs / 1_000) });
    await etcd("kv/put", { key: b64(opened.lockKey(key)), value: b64(JSON.stringify({ owner, ttl: ttlMs, w: "unchecked" })), lease: ID });
    return true;
  };
} else if (broken) {
  // The raw delete a broken release makes: the lock's key, whoever holds it.
  store = brokenStore(opened, broken, { del: (key) => etcd("kv/deleterange", { key: b64(opened.lockKey(key)) }) });
}
await syncClock();
if (clientConfig.startAt) await sleep(Math.max(0, clientConfig.startAt - now()));
const { holds, summary } = await runClients(ls, store, clientConfig);
await opened.close();
summary.clock = await syncClock({ check: true });
const lines = holds.map((hold) => JSON.stringify(hold));
lines.push(JSON.stringify(summary));
process.stdout.write(`${lines.join("\n")}\n`, () => process.exit(0));
