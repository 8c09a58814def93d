// A store's close() frees what this process holds: every hold taken through the store
// (locks, semaphore permits, read and write holds, lockAll) is released on the real
// server within the bound (2 s by default), every hold's signal aborts with a
// StoreClosedError (STORE_CLOSED), a run() in progress sees its signal abort and rejects
// with it, a waiting acquire rejects with it, and `keepHolds: true` leaves the holds to
// their TTL. On every shipped store with a server: Redis (this build's RedisLockStore),
// PostgreSQL, MySQL, etcd, a user's ioredis client; and FileLockStore (native).
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";
import pg from "pg";

import { EtcdLockStore } from "../js/stores/etcd.mjs";
import { IoRedisLockStore } from "../js/stores/ioredis.mjs";
import { MySqlLockStore } from "../js/stores/mysql.mjs";
import { PostgresLockStore } from "../js/stores/postgres.mjs";
import { UpstashLockStore } from "../js/stores/upstash.mjs";
import { requireEtcd, startEtcd } from "./support/etcd-server.mjs";
import { requireMysql, startMysql } from "./support/mysql-server.mjs";
import { requirePostgres, startPostgres } from "./support/postgres-server.mjs";
import { startRedis } from "./support/redis-server.mjs";
import { startUpstashRest } from "./support/upstash-rest.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "./support/target.mjs";

const { lock, lockAll, semaphore, readWriteLock, restoreLock, RedisLockStore, FileLockStore, StoreClosedError } = ls;

await failOnUnhandledRejections();

/** A promise and the function that resolves it. */
function deferred() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Whether anything holds `key` as a lock, as seen through `observer` (another connection). */
const locked = (key, observer) => lock(key, 1_000, observer).isLocked();

function assertClosedSignal(signal, what) {
  assert.equal(signal.aborted, true, `${what}: signal aborted`);
  assert.equal(signal.reason?.code, "STORE_CLOSED", `${what}: reason ${signal.reason?.message}`);
  assert.ok(signal.reason instanceof StoreClosedError, `${what}: a StoreClosedError`);
}

/**
 * The scenario every store runs: holds of each kind, a run() in progress and a waiting
 * acquire, then close(); `open()` makes the store under test, `observer` is another
 * store on the same server.
 */
async function closesAndFrees(open, observer) {
  const store = await open();
  const name = (what) => uniqueKey(`shutdown-${what}`);
  const keys = { lock: name("lock"), sem: name("sem"), write: name("write"), read: name("read"), all: [name("all-a"), name("all-b")], run: name("run") };
  const held = lock(keys.lock, 60_000, store);
  const permit = semaphore(keys.sem, 3, 60_000, store);
  const writer = readWriteLock(keys.write, 60_000, store).writeLock();
  const reader = readWriteLock(keys.read, 60_000, store).readLock();
  const all = lockAll(keys.all, 60_000, store);
  const handles = { lock: held, semaphore: permit, writer, reader, lockAll: all };
  for (const [what, handle] of Object.entries(handles)) assert.equal(await handle.acquire(), true, what);
  const signals = Object.entries(handles).map(([what, handle]) => [what, handle.signal]);

  // A run() in progress: its function works until its signal aborts.
  const started = deferred();
  let runSignal;
  const running = lock(keys.run, 60_000, store)
    .run(async (l) => {
      runSignal = l.signal;
      started.resolve();
      await new Promise((resolve) => l.signal.addEventListener("abort", resolve, { once: true }));
      return "the work";
    })
    .catch((err) => err);
  await started.promise;

  // A waiting acquire on a key another process (the observer) holds.
  const busy = name("busy");
  const blocker = lock(busy, 60_000, observer);
  assert.equal(await blocker.acquire(), true);
  const waiting = lock(busy, 60_000, store)
    .acquire({ timeout: 30_000 })
    .catch((err) => err);
  await sleep(100);

  for (const [what] of signals) assert.equal(handles[what].signal.aborted, false, `${what} is held before close()`);
  const t0 = performance.now();
  await store.close();
  const took = performance.now() - t0;
  assert.ok(took < 2_000, `close() took ${Math.round(took)} ms`);

  for (const [what, signal] of signals) assertClosedSignal(signal, what);
  assertClosedSignal(runSignal, "run()'s signal");
  // Read after close(), a handle's signal says the same.
  assertClosedSignal(held.signal, "the lock's signal read after close()");

  // Gone from the server, so another process gets each at once.
  assert.equal(await locked(keys.lock, observer), false, "the lock's key");
  assert.equal(await semaphore(keys.sem, 3, 1_000, observer).count(), 0, "the semaphore's permits");
  assert.equal(await readWriteLock(keys.write, 1_000, observer).writeLock().count(), 0, "the write hold");
  assert.equal(await readWriteLock(keys.read, 1_000, observer).readLock().count(), 0, "the read hold");
  for (const key of keys.all) assert.equal(await locked(key, observer), false, `lockAll's ${key}`);
  assert.equal(await locked(keys.run, observer), false, "run()'s key");

  const ran = await running;
  assert.equal(ran?.code, "STORE_CLOSED", `run() rejects with StoreClosedError: ${ran?.message}`);
  assert.equal(ran.result, "the work", "with the function's result");
  assert.match(ran.message, /before run\(\)'s function settled/);

  const waited = await waiting;
  assert.equal(waited?.code, "STORE_CLOSED", `the waiting acquire: ${waited?.message ?? waited}`);
  // true when close() came while one of its attempts was on its way (a retry at that very
  // moment): then that attempt is cleaned up once it settles, before the store closes.
  assert.equal(typeof waited.holdMayRemain, "boolean");

  // Another process's hold is not this store's to free.
  assert.equal(await blocker.isLocked(), true, "the other process's hold stays");
  await blocker.release();

  // A closed store takes nothing more; release() of an ended hold is a harmless false.
  const refused = await lock(name("after"), 1_000, store)
    .acquire()
    .catch((err) => err);
  assert.equal(refused?.code, "STORE_CLOSED");
  assert.equal(await held.release(), false);
  // Closing again is harmless.
  await store.close();
}

/** close({ keepHolds: true }) leaves the holds to their TTL; unknown options are refused first. */
async function keepsHolds(open, observer) {
  const store = await open();
  const key = uniqueKey("shutdown-keep");
  const serializedKey = uniqueKey("shutdown-serialized");
  const held = lock(key, 60_000, store);
  assert.equal(await held.acquire(), true);
  await assert.rejects(store.close({ keepHold: true }), (err) => {
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.match(err.message, /^locksmith: unknown option `keepHold` for .*close\(\); did you mean `keepHolds`\?/);
    return true;
  });
  await assert.rejects(store.close({ timeoutMs: -1 }), { code: "INVALID_ARGUMENT" });
  await assert.rejects(store.close("now"), { code: "INVALID_ARGUMENT" });
  // Refused before anything closed: the store still works.
  assert.equal(held.signal.aborted, false);
  assert.equal(await held.extend(), undefined);
  // A hold handed to another process (serialize()) is left alone as well.
  const handed = lock(serializedKey, 60_000, store);
  assert.equal(await handed.acquire(), true);
  const serialized = handed.serialize();

  const waiting = lock(key, 60_000, observer)
    .acquire({ timeout: 300 })
    .catch((err) => err);
  await store.close({ keepHolds: true });
  assert.equal(await locked(key, observer), true, "kept: the key stays until its TTL");
  assert.equal(await locked(serializedKey, observer), true, "the serialized hold stays");
  assert.equal(await waiting, false, "another process still waits it out");
  const restored = restoreLock(serialized, observer);
  assert.equal(await restored.release(), true, "the process it was handed to releases it");
  // Clean up what the test kept, through the observer (the owner token travels with serialize()).
  const fields = JSON.parse(held.serialize());
  assert.equal(await observer.release(fields.key, fields.owner), true);
}

/** A hold restored in this process (restoreLock) is this process's: close() releases it. */
async function releasesRestored(open, observer) {
  const first = await open();
  const key = uniqueKey("shutdown-restored");
  const taken = lock(key, 60_000, first);
  assert.equal(await taken.acquire(), true);
  const serialized = taken.serialize();
  const second = await open();
  const restored = restoreLock(serialized, second);
  const signal = restored.signal;
  await second.close();
  assertClosedSignal(signal, "the restored hold");
  assert.equal(await locked(key, observer), false);
  await first.close();
}

describe(`RedisLockStore (${TARGET})`, () => {
  let server;
  let observer;
  before(async () => {
    server = await startRedis();
    observer = await RedisLockStore.connect(server.url);
  });
  after(async () => {
    await observer?.close();
    await server?.stop();
  });
  const open = () => RedisLockStore.connect(server.url);

  it("close() releases every hold on the server within the bound, aborts every signal, and ends waits and run()", () => closesAndFrees(open, observer));
  it("close({ keepHolds: true }) keeps them; unknown options are refused", () => keepsHolds(open, observer));
  it("a hold restored in this process is released; a serialized one is not", () => releasesRestored(open, observer));

  it("a hundred holds on one store, their signals watched: every one is released, promptly", async () => {
    const store = await open();
    const locks = Array.from({ length: 100 }, (_, i) => lock(uniqueKey(`shutdown-many-${i}`), 60_000, store));
    await Promise.all(locks.map((l) => l.acquire()));
    const signals = locks.map((l) => l.signal);
    const t0 = performance.now();
    await store.close();
    const took = performance.now() - t0;
    assert.ok(took < 1_000, `close() took ${Math.round(took)} ms`);
    for (const [i, signal] of signals.entries()) assertClosedSignal(signal, `hold ${i}`);
    const still = (await Promise.all(locks.map((l) => locked(l.key, observer)))).filter(Boolean).length;
    assert.equal(still, 0, "holds left on the server");
  });

  it("twenty waits on one store: no leak warning, and close() ends every one", async () => {
    const store = await open();
    const warnings = [];
    const onWarning = (w) => warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      const key = uniqueKey("shutdown-waits");
      const holder = lock(key, 60_000, store);
      await holder.acquire();
      const waits = Array.from({ length: 20 }, () =>
        lock(key, 60_000, store)
          .acquire({ timeout: 30_000 })
          .catch((e) => e),
      );
      await sleep(100);
      await store.close();
      const ended = await Promise.all(waits);
      assert.ok(
        ended.every((e) => e?.code === "STORE_CLOSED"),
        JSON.stringify(ended.map((e) => e?.code ?? e)),
      );
      await sleep(10); // a warning is emitted on the next tick
      assert.deepEqual(warnings, [], "no MaxListenersExceededWarning");
    } finally {
      process.off("warning", onWarning);
    }
  });

  it("two close() calls at once: the second waits for the first's releases", async () => {
    const store = await open();
    const locks = Array.from({ length: 5 }, (_, i) => lock(uniqueKey(`shutdown-twice-${i}`), 60_000, store));
    await Promise.all(locks.map((l) => l.acquire()));
    await Promise.all([store.close(), store.close()]);
    const still = (await Promise.all(locks.map((l) => locked(l.key, observer)))).filter(Boolean).length;
    assert.equal(still, 0, "holds left on the server");
  });

  it("the key is gone at once: no TTL left on the server (PTTL -2)", async () => {
    const store = await open();
    const key = uniqueKey("shutdown-pttl");
    const held = lock(key, 60_000, store);
    await held.acquire();
    const raw = new Redis(server.url);
    try {
      const lockKey = (await raw.keys(`*${key}*`)).find((k) => !k.includes("}:"));
      assert.ok(lockKey, "the lock's key is on the server");
      assert.ok((await raw.pttl(lockKey)) > 59_000);
      await store.close();
      assert.equal(await raw.pttl(lockKey), -2);
    } finally {
      raw.disconnect();
    }
  });

  it("an acquire on its way when close() begins: its grant is released, and it rejects with StoreClosedError", async () => {
    const store = await open();
    const key = uniqueKey("shutdown-inflight");
    process.kill(server.pid, "SIGSTOP");
    let acquiring;
    let closing;
    try {
      acquiring = lock(key, 60_000, store)
        .acquire()
        .catch((err) => err);
      await sleep(50);
      closing = store.close();
      await sleep(200);
    } finally {
      process.kill(server.pid, "SIGCONT");
    }
    await closing;
    const err = await acquiring;
    assert.equal(err?.code, "STORE_CLOSED", String(err?.message ?? err));
    assert.equal(err.holdMayRemain, false);
    assert.match(err.message, /was on its way; its grant was released/);
    assert.equal(await locked(key, observer), false);
  });

  it("a server that does not answer: close() gives up at timeoutMs and says which holds remain", async () => {
    const store = await open();
    const key = uniqueKey("shutdown-stalled");
    const held = lock(key, 5_000, store);
    await held.acquire();
    const signal = held.signal;
    process.kill(server.pid, "SIGSTOP");
    let err;
    let took;
    try {
      const t0 = performance.now();
      err = await store.close({ timeoutMs: 300 }).then(
        () => undefined,
        (e) => e,
      );
      took = performance.now() - t0;
    } finally {
      process.kill(server.pid, "SIGCONT");
    }
    assert.equal(err?.code, "STORE_UNAVAILABLE", String(err?.message ?? err));
    assert.equal(err.holdMayRemain, true);
    assert.deepEqual(err.keys, [key]);
    assert.match(err.message, /could not be released within 300 ms/);
    assert.ok(took >= 290 && took < 1_500, `gave up after ${Math.round(took)} ms`);
    assertClosedSignal(signal, "the hold close() could not release");
    // Closed all the same.
    assert.equal(
      (
        await lock(uniqueKey("x"), 1_000, store)
          .acquire()
          .catch((e) => e)
      )?.code,
      "STORE_CLOSED",
    );
    // (The release written before the connection closed may still be applied once the
    // server runs again: "may remain".)
  });
});

describe("FileLockStore", { skip: TARGET === "wasm" ? "the WebAssembly build has no FileLockStore" : false }, () => {
  let dir;
  let observer;
  let path;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "locksmith-shutdown-"));
    path = join(dir, "locks");
    observer = await FileLockStore.open(path);
  });
  after(async () => {
    await observer?.close();
    await rm(dir, { recursive: true, force: true });
  });
  const open = () => FileLockStore.open(path);
  it("close() releases every hold in the file, aborts every signal, and ends waits and run()", () => closesAndFrees(open, observer));
  it("close({ keepHolds: true }) keeps them", () => keepsHolds(open, observer));
});

describe("PostgresLockStore", await requirePostgres(), () => {
  let server;
  let observer;
  before(async () => {
    server = await startPostgres();
    observer = await PostgresLockStore.connect(server.url);
  });
  after(async () => {
    await observer?.close();
    await server?.dispose();
  });
  const open = () => PostgresLockStore.connect(server.url);
  it("close() releases every hold in the table, aborts every signal, and ends waits and run()", () => closesAndFrees(open, observer));
  it("close({ keepHolds: true }) keeps them", () => keepsHolds(open, observer));

  it("a wait whose attempt is held up on the server when close() begins: the attempt's clean-up reaches the server before close() ends", async () => {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    const store = await PostgresLockStore.connect(server.url, { listen: false });
    try {
      const key = uniqueKey("shutdown-late");
      // Another session holds the key's advisory lock (as the store names it): the attempt waits behind it.
      await admin.query("BEGIN");
      await admin.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", ["locksmith:locksmith_locks", `lock:${key}`]);
      const acquiring = lock(key, 60_000, store)
        .acquire({ timeout: 10_000 })
        .catch((err) => err);
      await sleep(150);
      const closing = store.close();
      const err = await acquiring;
      assert.equal(err?.code, "STORE_CLOSED", String(err?.message ?? err));
      assert.equal(err.holdMayRemain, true, "an attempt was on its way");
      await sleep(300);
      await admin.query("COMMIT"); // the attempt goes through now, during close()
      await closing;
      const { rows } = await admin.query("SELECT count(*)::int AS n FROM locksmith_locks WHERE key = $1 AND expires_at > clock_timestamp()", [key]);
      assert.equal(rows[0].n, 0, "a hold nobody owns was left on the server");
    } finally {
      await admin.end();
    }
  });
});

describe("MySqlLockStore", await requireMysql(), () => {
  let server;
  let observer;
  before(async () => {
    server = await startMysql();
    observer = await MySqlLockStore.connect(server.url);
  });
  after(async () => {
    await observer?.close();
    await server?.dispose();
  });
  const open = () => MySqlLockStore.connect(server.url);
  it("close() releases every hold in the tables, aborts every signal, and ends waits and run()", () => closesAndFrees(open, observer));
});

describe("EtcdLockStore", await requireEtcd(), () => {
  let cluster;
  let observer;
  before(async () => {
    cluster = await startEtcd({ size: 1 });
    observer = await EtcdLockStore.connect({ endpoints: cluster.endpoints });
  });
  after(async () => {
    await observer?.close();
    await cluster?.dispose();
  });
  const open = () => EtcdLockStore.connect({ endpoints: cluster.endpoints });
  it("close() releases every hold (its keys and leases), aborts every signal, and ends waits and run()", () => closesAndFrees(open, observer));
});

describe("IoRedisLockStore, over the application's client", () => {
  let server;
  let observer;
  const clients = [];
  before(async () => {
    server = await startRedis();
    observer = await open();
  });
  after(async () => {
    await observer?.close();
    for (const client of clients) await client.quit();
    await server?.stop();
  });
  async function open() {
    const client = new Redis(server.url);
    clients.push(client);
    return new IoRedisLockStore(client);
  }
  it("close() releases every hold before the client's quit(), aborts every signal, and ends waits and run()", () => closesAndFrees(open, observer));
});

describe("UpstashLockStore, over REST", () => {
  let server;
  let rest;
  let observer;
  before(async () => {
    server = await startRedis();
    rest = await startUpstashRest(server.url);
    observer = open();
  });
  after(async () => {
    await observer?.close();
    await rest?.close();
    await server?.stop();
  });
  function open() {
    return new UpstashLockStore(new Upstash({ url: rest.url, token: rest.token, enableTelemetry: false }));
  }
  it("close() releases every hold, aborts every signal, and ends waits and run()", () => closesAndFrees(open, observer));
});
