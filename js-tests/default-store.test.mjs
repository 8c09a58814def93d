// A forgotten setLockStore(): once a store other processes share exists in a process
// (RedisLockStore, a store of js/stores/*, FileLockStore, a store of the user's own), a
// lock taken on the default store — that process's own memory — is warned about once
// per process, in either order, across the package's ES modules and its CommonJS copy.
// LOCKSMITH_REQUIRE_STORE=1 makes a lock without a store an error (STORE_NOT_SET). Each
// case runs in child processes over a real redis-server; their stderr is read.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { ENTRY, countLines as count, runModule } from "./support/child.mjs";
import { startEtcd } from "./support/etcd-server.mjs";
import { startRedis } from "./support/redis-server.mjs";

// The other copy of the package in one process: the CommonJS bundle of the build not
// loaded as ES modules (the native entry's ES modules are its CommonJS instance itself).
const OTHER_COPY = new URL("../js/wasm.cjs", import.meta.url).pathname;
/** A file of the repository, as a URL a child's import() takes. */
const file = (path) => new URL(`../${path}`, import.meta.url).href;

let redis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});

/** Runs `code` (an ES module importing the build under test as `ls`, with `url` the server's); resolves to { code, stdout, stderr }. */
function child(code, { env = {} } = {}) {
  const source = `import * as ls from ${JSON.stringify(ENTRY)};\nconst url = ${JSON.stringify(redis.url)};\n${code}`;
  const unset = ["LOCKSMITH_WARNINGS", "LOCKSMITH_REQUIRE_STORE", "NODE_APP_INSTANCE", "pm_id", "NODE_OPTIONS"];
  return runModule(source, { env, unset, prefix: "locksmith-default-store-" });
}

const WARNING = /\[LOCKSMITH_DEFAULT_STORE\] Warning: locksmith: /;

// The user's mistake: a shared store connected, and never set or passed. Each process
// holds "invoice:500" for 600 ms; with one shared store only one of two would run.
const FORGOTTEN = `
  const store = await ls.RedisLockStore.connect(url);
  const [ran] = await ls.lock("invoice:500", "10s").run(() => new Promise((resolve) => setTimeout(resolve, 600)));
  console.log(JSON.stringify({ ran, store: ls.getLockStore().constructor.name }));
  await store.close();
`;

describe("the default store beside a shared one", () => {
  it("two processes that connect to Redis and lock without setLockStore() are each warned, once, with the fix", async () => {
    const [a, b] = await Promise.all([child(FORGOTTEN), child(FORGOTTEN)]);
    for (const { code, stdout, stderr } of [a, b]) {
      assert.equal(code, 0, stderr);
      // Both ran at once: each had its own memory lock (the bug the warning is about).
      assert.deepEqual(JSON.parse(stdout), { ran: true, store: "MemoryLockStore" });
      assert.equal(count(stderr, WARNING), 1, stderr);
      assert.match(
        stderr,
        /the default store \(this process's own memory\) was used, by a lock made without a store or by getLockStore\(\), while this process has a shared store \(RedisLockStore\)/,
      );
      assert.match(stderr, /setLockStore\(store\)/);
      assert.match(stderr, /lock\(key, ttlMs, store\)/);
      assert.match(stderr, /LOCKSMITH_REQUIRE_STORE=1/);
    }
  });

  it("warns in the other order too: the default store used first, the shared store connected later", async () => {
    const { code, stderr } = await child(`
      await ls.lock("early").run(() => {});
      await ls.lock("early-2").run(() => {});
      const store = await ls.RedisLockStore.connect(url);
      await ls.lock("late").run(() => {});
      await store.close();
    `);
    assert.equal(code, 0, stderr);
    assert.equal(count(stderr, WARNING), 1, stderr);
  });

  it("one warning per process across the package's ES modules and its CommonJS copy", async () => {
    const { code, stdout, stderr } = await child(`
      import { createRequire } from "node:module";
      const cjs = createRequire(import.meta.url)(${JSON.stringify(OTHER_COPY)});
      // The shared store in one copy, the default store of each copy used.
      const store = await ls.RedisLockStore.connect(url);
      console.log(String(cjs.setLockStore !== ls.setLockStore));
      await cjs.lock("cjs").run(() => {});
      await ls.lock("esm").run(() => {});
      await store.close();
    `);
    assert.equal(code, 0, stderr);
    assert.equal(stdout.trim(), "true", "two copies of the API");
    assert.equal(count(stderr, WARNING), 1, stderr);
  });

  it("the CommonJS copy's default store is warned about when the shared store is the ES modules'", async () => {
    const { code, stderr } = await child(`
      import { createRequire } from "node:module";
      const cjs = createRequire(import.meta.url)(${JSON.stringify(OTHER_COPY)});
      const store = ls.setLockStore(await ls.RedisLockStore.connect(url));
      await ls.lock("esm").run(() => {});
      await cjs.lock("cjs").run(() => {});
      await store.close();
    `);
    assert.equal(code, 0, stderr);
    assert.equal(count(stderr, WARNING), 1, stderr);
  });

  it("the PostgreSQL, MySQL, etcd and users' Redis client stores count as shared too", async () => {
    const etcd = await startEtcd({ size: 1 });
    try {
      const cases = {
        PostgresLockStore: `
          const { PostgresLockStore } = await import(${JSON.stringify(file("js/stores/postgres.mjs"))});
          const pg = need("pg");
          new PostgresLockStore(new pg.Pool({ connectionString: "postgres://127.0.0.1:1/none" }));`,
        MySqlLockStore: `
          const { MySqlLockStore } = await import(${JSON.stringify(file("js/stores/mysql.mjs"))});
          const mysql = need("mysql2/promise");
          new MySqlLockStore(mysql.createPool({ uri: "mysql://root@127.0.0.1:1/none" }));`,
        EtcdLockStore: `
          const { EtcdLockStore } = await import(${JSON.stringify(file("js/stores/etcd.mjs"))});
          globalThis.closeLater = await EtcdLockStore.connect(${JSON.stringify(etcd.members[0].url)});`,
        IoRedisLockStore: `
          const { IoRedisLockStore } = await import(${JSON.stringify(file("js/stores/ioredis.mjs"))});
          const Redis = need("ioredis");
          const client = new Redis(url, { lazyConnect: true });
          new IoRedisLockStore(client);`,
      };
      for (const [name, make] of Object.entries(cases)) {
        const { code, stderr } = await child(`
          const need = (await import("node:module")).createRequire(${JSON.stringify(file("package.json"))});
          ${make}
          await ls.lock("default").run(() => {});
          await globalThis.closeLater?.close();
        `);
        assert.equal(code, 0, `${name}: ${stderr}`);
        assert.equal(count(stderr, WARNING), 1, `${name}: ${stderr}`);
        assert.match(stderr, new RegExp(`a shared store \\(${name}\\)`));
      }
    } finally {
      await etcd.dispose();
    }
  });

  it("a store of the user's own, passed to one lock, counts as shared", async () => {
    const { code, stderr } = await child(`
      const memory = new ls.MemoryLockStore();
      const own = {
        acquire: (k, o, t) => memory.acquire(k, o, t),
        release: (k, o) => memory.release(k, o),
        extend: (k, o, t) => memory.extend(k, o, t),
        isLocked: (k) => memory.isLocked(k),
        remainingTime: (k) => memory.remainingTime(k),
      };
      await ls.lock("mine", "10s", own).run(() => {});
      await ls.lock("default").run(() => {});
    `);
    assert.equal(code, 0, stderr);
    assert.equal(count(stderr, WARNING), 1, stderr);
    assert.match(stderr, /a shared store \(a store of your own\)/);
  });

  it("no warning with the store set, a memory store chosen on purpose, or LOCKSMITH_WARNINGS=0", async () => {
    const set = await child(`
      const store = ls.setLockStore(await ls.RedisLockStore.connect(url));
      await ls.lock("set").run(() => {});
      await ls.lock("passed", "10s", store).run(() => {});
      await store.close();
    `);
    assert.equal(set.code, 0, set.stderr);
    assert.equal(set.stderr, "");
    const chosen = await child(`
      ls.setLockStore(new ls.MemoryLockStore());
      const store = await ls.RedisLockStore.connect(url);
      await ls.lock("memory").run(() => {});
      await store.close();
    `);
    assert.equal(chosen.code, 0, chosen.stderr);
    assert.equal(chosen.stderr, "");
    const off = await child(FORGOTTEN, { env: { LOCKSMITH_WARNINGS: "0" } });
    assert.equal(off.code, 0, off.stderr);
    assert.equal(off.stderr, "");
  });
});

describe("LOCKSMITH_REQUIRE_STORE=1", () => {
  it("two processes without setLockStore() both refuse, with a typed error that says what to do", async () => {
    const refused = `
      const store = await ls.RedisLockStore.connect(url);
      try {
        await ls.lock("invoice:500", "10s").run(() => console.log("ran"));
      } catch (err) {
        console.log(JSON.stringify({ name: err.name, code: err.code, message: err.message, lockError: err instanceof ls.LockError }));
      }
      await store.close();
    `;
    const runs = await Promise.all([child(refused, { env: { LOCKSMITH_REQUIRE_STORE: "1" } }), child(refused, { env: { LOCKSMITH_REQUIRE_STORE: "1" } })]);
    for (const { code, stdout, stderr } of runs) {
      assert.equal(code, 0, stderr);
      const err = JSON.parse(stdout);
      assert.equal(err.name, "StoreNotSetError");
      assert.equal(err.code, "STORE_NOT_SET");
      assert.equal(err.lockError, true);
      assert.match(err.message, /^locksmith: no lock store was set/);
      assert.match(err.message, /setLockStore\(store\)/);
      assert.doesNotMatch(stderr, WARNING);
    }
  });

  it("refuses every maker that would use the default store, and not one given a store", async () => {
    const { code, stdout, stderr } = await child(
      `
      const codes = [];
      for (const make of [() => ls.lock("a"), () => ls.lockAll(["a", "b"]), () => ls.semaphore("s", 2), () => ls.readWriteLock("rw"), () => ls.getLockStore(), () => new ls.Lock("a")]) {
        try { make(); codes.push("made"); } catch (err) { codes.push(err.code); }
      }
      const store = ls.setLockStore(await ls.RedisLockStore.connect(url));
      const [ran] = await ls.lock("set").run(() => {});
      codes.push(String(ran));
      await store.close();
      console.log(codes.join(" "));
    `,
      { env: { LOCKSMITH_REQUIRE_STORE: "1" } },
    );
    assert.equal(code, 0, stderr);
    assert.equal(stdout.trim(), `${"STORE_NOT_SET ".repeat(6)}true`);
  });
});

describe("LOCKSMITH_REQUIRE_STORE's values", () => {
  it("takes TRUE, yes and on as 1, and an unknown value as 1 with a warning (it fails closed)", async () => {
    const code = `try { ls.lock("k"); console.log("allowed"); } catch (err) { console.log(err.code); }`;
    for (const value of ["TRUE", "yes", "on", " 1 "]) {
      const { stdout, stderr } = await child(code, { env: { LOCKSMITH_REQUIRE_STORE: value } });
      assert.equal(stdout.trim(), "STORE_NOT_SET", `${JSON.stringify(value)}: ${stderr}`);
    }
    for (const value of ["0", "false", "off", ""]) {
      const { stdout } = await child(code, { env: { LOCKSMITH_REQUIRE_STORE: value } });
      assert.equal(stdout.trim(), "allowed", JSON.stringify(value));
    }
    const { stdout, stderr } = await child(code, { env: { LOCKSMITH_REQUIRE_STORE: "maybe" } });
    assert.equal(stdout.trim(), "STORE_NOT_SET");
    assert.match(stderr, /\[LOCKSMITH_REQUIRE_STORE\] Warning: locksmith: LOCKSMITH_REQUIRE_STORE="maybe" is not 1 or 0/);
  });
});
