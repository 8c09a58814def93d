// holder() and proclaim(), the store contract's optional pair that elections read and
// write, on every store in the build under test (js-tests/support/holder-contract.mjs).
// The stores are opened as the history checker's processes open them, on the servers it
// starts.
import { after, before, describe, it } from "node:test";

import { openStore } from "./histories/client.mjs";
import { lockFile, servers } from "./histories/run.mjs";
import { holderContract } from "./support/holder-contract.mjs";
import { TARGET, ls } from "./support/target.mjs";

const s = servers();
after(() => s.stop());

const STORES = [
  { name: "MemoryLockStore", spec: async () => "memory" },
  { name: "RedisLockStore", spec: async () => ({ redis: (await s.get("redis")).url }) },
  { name: "IoRedisLockStore", spec: async () => ({ ioredis: (await s.get("redis")).url }) },
  { name: "NodeRedisLockStore", spec: async () => ({ nodeRedis: (await s.get("redis")).url }) },
  {
    name: "UpstashLockStore",
    spec: async () => {
      const rest = await s.get("upstash");
      return { upstash: rest.url, token: rest.token };
    },
  },
  { name: "PostgresLockStore", spec: async () => ({ postgres: (await s.get("postgres")).url }) },
  { name: "MySqlLockStore", spec: async () => ({ mysql: (await s.get("mysql")).url }) },
  { name: "EtcdLockStore", spec: async () => ({ etcd: (await s.get("etcd")).endpoints }), ttlMs: 2_000 },
  { name: "DurableObjectLockStore", spec: async () => ({ durableObject: (await s.get("workerd")).url }) },
  { name: "FileLockStore", spec: async () => ({ file: await lockFile() }), native: true },
];

for (const { name, spec, ttlMs, native } of STORES) {
  if (native && TARGET !== "native") continue;
  describe(`${name} (${TARGET})`, () => {
    let opened;
    before(async () => {
      opened = await openStore(ls, await spec());
    });
    after(() => opened?.close());
    holderContract(it, () => opened.store, { ttlMs });
  });
}
