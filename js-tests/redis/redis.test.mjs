// RedisLockStore beyond the conformance suite: options, faults, restarts, several
// processes, fencing tokens, clean exits.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";

import { assertNoOverlap, contender } from "../support/load.mjs";
import { startRedis } from "../support/redis-server.mjs";
import { TARGET, ls, sleep, uniqueKey } from "../support/target.mjs";

const { Lock, RedisLockStore, LockNotHeldError } = ls;
// Both builds: the addon's engine, or the same engine as the WebAssembly build's second
// module over node:net. Where they differ, the WebAssembly store reaches a Lock through
// the JS-store bridge (see docs/REDIS-ENGINE.md).
const wasm = TARGET === "wasm";
const entry = new URL(wasm ? "../../js/wasm.mjs" : "../../js/node.mjs", import.meta.url).href;

const fast = { connectTimeoutMs: 300, commandTimeoutMs: 300, reconnectRetries: 1, reconnectMaxDelayMs: 100 };

describe(`RedisLockStore (${TARGET})`, () => {
  let server;
  let client;
  before(async () => {
    server = await startRedis();
    client = new Redis(server.url);
  });
  after(async () => {
    await client?.quit();
    await server?.stop();
  });

  it("refuses bad options with INVALID_ARGUMENT", async () => {
    for (const bad of [
      undefined,
      42,
      {},
      { url: 5 },
      { url: server.url, keyPrefix: 1 },
      { url: server.url, commandTimeoutMs: "1s" },
      { url: server.url, connectTimeoutMs: 0 },
      { url: server.url, reconnectRetries: -1 },
      "http://localhost",
    ]) {
      await assert.rejects(RedisLockStore.connect(bad), { code: "INVALID_ARGUMENT" }, JSON.stringify(bad));
    }
    assert.throws(() => new RedisLockStore(), { code: "INVALID_ARGUMENT" });
    // host:port without a scheme: the message says what to write.
    await assert.rejects(RedisLockStore.connect("localhost:6400"), { code: "INVALID_ARGUMENT", message: /write redis:\/\/localhost:6400/ });
  });

  it("refuses unknown connect options, naming them and the likely one", async () => {
    const cases = [
      [{ prefix: "app:" }, /unknown option `prefix` for RedisLockStore\.connect\(\); did you mean `keyPrefix`\?/],
      [{ commandTimeout: 500 }, /unknown option `commandTimeout`.*did you mean `commandTimeoutMs`\?/],
      [{ tlsInsecre: true }, /unknown option `tlsInsecre`.*did you mean `tlsInsecure`\?/],
      [{ frobnicate: 1 }, /unknown option `frobnicate`.*the options are url, keyPrefix/],
    ];
    for (const [extra, message] of cases) {
      await assert.rejects(RedisLockStore.connect({ url: server.url, ...extra }), (err) => {
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.match(err.message, /^locksmith: /);
        assert.match(err.message, message);
        return true;
      });
    }
  });

  it("takes options after a URL, and refuses a second argument it would drop", async () => {
    // connect(url, options) is connect({ ...options, url }): fencing: false is applied.
    const unfenced = await RedisLockStore.connect(server.url, { fencing: false, keyPrefix: "two-args:" });
    try {
      assert.equal(unfenced.keyPrefix, "two-args:");
      const l = new Lock(uniqueKey("two-args"), 5_000, unfenced);
      assert.equal(await l.acquire(), true);
      assert.equal(l.fencingToken, null, "fencing: false reached the store");
      assert.equal(await l.release(), true);
    } finally {
      await unfenced.close();
    }
    const refused = [
      [[{ url: server.url }, { fencing: false }], /takes options as its second argument only after a URL/],
      [[server.url, { url: server.url }], /was given url twice/],
      [[server.url, "fencing"], /options must be an object; got string/],
      [[server.url, { fencnig: false }], /unknown option `fencnig`.*did you mean `fencing`\?/],
      [[server.url, {}, {}], /RedisLockStore\.connect\(url, options\?\) takes at most 2 arguments/],
    ];
    for (const [args, message] of refused) {
      await assert.rejects(RedisLockStore.connect(...args), (err) => {
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.match(err.message, /^locksmith: /);
        assert.match(err.message, message);
        return true;
      });
    }
  });

  it("names the timeout option at fault, not the TTL", async () => {
    for (const name of ["connectTimeoutMs", "commandTimeoutMs", "reconnectMaxDelayMs"]) {
      for (const value of [0, 1.5, -1, Infinity]) {
        await assert.rejects(RedisLockStore.connect({ url: server.url, [name]: value }), (err) => {
          assert.equal(err.code, "INVALID_ARGUMENT");
          assert.match(err.message, new RegExp(`^locksmith: ${name} must be a whole number of milliseconds`));
          assert.doesNotMatch(err.message, /ttlMs/);
          return true;
        });
      }
    }
  });

  it("puts keys under its prefix, with the key as a hash tag", async () => {
    const store = await RedisLockStore.connect({ url: server.url, keyPrefix: "app:locks:" });
    assert.equal(store.keyPrefix, "app:locks:");
    const key = uniqueKey("prefix");
    const l = new Lock(key, 5_000, store);
    await l.acquire();
    assert.equal(await client.get(`app:locks:{${key}}`), JSON.parse(l.serialize()).owner);
    assert.ok(Number(await client.get(`app:locks:{${key}}:fence`)) >= l.fencingToken);
    const pttl = await client.pttl(`app:locks:{${key}}`);
    assert.ok(pttl > 4_000 && pttl <= 5_000);
    await l.release();
    assert.equal(await client.exists(`app:locks:{${key}}`), 0);
    await store.close();
  });

  // On a Cluster such keys are refused (redis-cluster.test.mjs); on one server they keep
  // the layout every release used, so a version before the refusal and this one exclude
  // each other on it during a rolling deploy.
  it("locks a key that starts with } on one server, under the layout every release used", async () => {
    const store = await RedisLockStore.connect(server.url);
    const key = `}${uniqueKey("brace")}`;
    const l = new Lock(key, 5_000, store);
    assert.equal(await l.acquire(), true);
    assert.equal(await client.get(`locksmith:{${key}}`), JSON.parse(l.serialize()).owner);
    assert.ok(Number(await client.get(`locksmith:{${key}}:fence`)) >= l.fencingToken);
    assert.equal(await new Lock(key, 5_000, store).acquireImmediately(), false);
    const { IoRedisLockStore } = await import("../../js/stores/ioredis.mjs");
    const theirs = new IoRedisLockStore(client);
    assert.equal(await new Lock(key, 5_000, theirs).acquireImmediately(), false, "held for the client stores too");
    assert.equal(await l.release(), true);
    const there = new Lock(key, 5_000, theirs);
    assert.equal(await there.acquire(), true, "an ioredis client on one server takes it");
    assert.ok(there.fencingToken > l.fencingToken);
    assert.equal(await there.release(), true);
    await theirs.close();
    await store.close();
  });

  it("keeps millisecond precision", async () => {
    const store = await RedisLockStore.connect(server.url);
    const l = new Lock(uniqueKey("ms"), 10_000, store);
    await l.acquire();
    await l.extend(250);
    const left = await l.getRemainingTime();
    assert.ok(left > 150 && left <= 250, `remaining ${left}`);
    await sleep(350);
    assert.equal(await l.isExpired(), true);
    await store.close();
  });

  it("fails fast with STORE_UNAVAILABLE when the server is unreachable", async () => {
    const dead = await startRedis();
    await dead.stop();
    const start = performance.now();
    await assert.rejects(RedisLockStore.connect({ url: dead.url, ...fast }), { code: "STORE_UNAVAILABLE", name: "StoreUnavailableError" });
    assert.ok(performance.now() - start < 3_000);
  });

  it("says when the port does not speak Redis, in one sentence", async () => {
    const { createServer } = await import("node:http");
    const http = createServer((_req, res) => res.end("hello")).listen(0, "127.0.0.1");
    await new Promise((resolve) => http.once("listening", resolve));
    try {
      const err = await RedisLockStore.connect({ url: `redis://127.0.0.1:${http.address().port}`, ...fast }).then(
        () => assert.fail("connected to an HTTP server"),
        (e) => e,
      );
      assert.equal(err.code, "STORE_UNAVAILABLE");
      assert.match(err.message, /^locksmith: store unavailable: redis: a reply that is not the Redis protocol \(is it a Redis port\?\)/);
      assert.equal(err.message.match(/locksmith:/g).length, 1, err.message);
      assert.ok(!err.message.includes("STORE_UNAVAILABLE"), err.message);
    } finally {
      http.close();
    }
  });

  it("keeps working across a server restart", async () => {
    const own = await startRedis();
    const store = await RedisLockStore.connect({ url: own.url, ...fast });
    const l = new Lock("restart", 10_000, store);
    assert.equal(await l.acquire(), true);
    await own.stop();
    const start = performance.now();
    await assert.rejects(l.extend(), { code: "STORE_UNAVAILABLE" });
    assert.ok(performance.now() - start < 2_000, "bounded by the command timeout");
    await own.start();
    let expired;
    for (let i = 0; i < 50 && expired === undefined; i++) {
      expired = await l.isExpired().catch(() => sleep(100).then(() => undefined));
    }
    assert.equal(expired, true, "reconnected; the hold died with the server and reads as lost");
    await assert.rejects(l.extend(), LockNotHeldError);
    assert.equal(await new Lock("restart", 1_000, store).acquire(), true);
    await store.close();
    await own.stop();
  });

  it("reloads its scripts after SCRIPT FLUSH", async () => {
    const store = await RedisLockStore.connect(server.url);
    const l = new Lock(uniqueKey("flush"), 5_000, store);
    await l.acquire();
    await client.script("FLUSH");
    await l.extend();
    assert.equal(await l.release(), true);
    await store.close();
  });

  it("a closed store says so", async () => {
    const store = await RedisLockStore.connect(server.url);
    await store.close();
    await assert.rejects(store.isLocked("k"), { code: "STORE_CLOSED", name: "StoreClosedError" });
    // Through the bridge too, a closed store is STORE_CLOSED (a wait stops at once; see lease_model.rs).
    await assert.rejects(new Lock("k", 1_000, store).acquire(), { code: "STORE_CLOSED" });
  });

  it("fencing tokens let a resource refuse a stale holder", async () => {
    const store = await RedisLockStore.connect(server.url);
    const key = uniqueKey("fence");
    // The protected resource remembers the largest token it has accepted.
    let highest = 0;
    const write = (token, value) => {
      if (token <= highest) throw new Error(`stale token ${token}`);
      highest = token;
      return value;
    };
    const a = new Lock(key, 100, store);
    await a.acquire();
    const staleToken = a.fencingToken;
    await sleep(200); // a pauses past its TTL...
    const b = new Lock(key, 5_000, store);
    await b.acquire(); // ...and b takes over
    assert.ok(b.fencingToken > staleToken);
    write(b.fencingToken, "b's write");
    assert.throws(() => write(staleToken, "a's late write"), /stale token/);
    await b.release();
    await store.close();
  });

  it("two Node processes take turns on one key", async () => {
    const key = uniqueKey("procs");
    const runs = await Promise.all([1, 2].map(() => contender(server.url, key, 25)));
    assert.deepEqual(runs, [25, 25]);
    assert.equal(Number(await client.get(`${key}:counter`)), 50, "no lost update");
    assertNoOverlap(await client.lrange(`${key}:log`, 0, -1));
  });

  /** How many times the server ran `command` so far (INFO commandstats). */
  async function calls(command) {
    const info = await client.info("commandstats");
    return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  }

  it("wakes a waiter on release, not at its retry delay; an uncontended wait subscribes nothing", async () => {
    const store = await RedisLockStore.connect(server.url);
    const key = uniqueKey("notify");
    const subscribes = await calls("subscribe");
    const free = new Lock(uniqueKey("free"), 5_000, store);
    assert.equal(await free.acquire({ timeout: 1_000 }), true);
    await free.release();
    // The JS-store contract subscribes before a waiting acquire's first attempt.
    if (!wasm) assert.equal(await calls("subscribe"), subscribes, "an acquire that got the lock at once sent a SUBSCRIBE");
    const holder = new Lock(key, 10_000, store);
    await holder.acquire();
    const waiter = new Lock(key, 5_000, store);
    const started = performance.now();
    const waited = waiter.acquire({ timeout: 8_000, retryDelay: 5_000 });
    await sleep(200);
    await holder.release();
    assert.equal(await waited, true);
    const ms = performance.now() - started;
    assert.ok(ms < 1_500, `the waiter took ${Math.round(ms)} ms: it slept its retry delay instead of waking on the release`);
    await waiter.release();
    await store.close();
  });

  it("shares one subscription per key among its waiters and wakes one of them per release", async () => {
    const store = await RedisLockStore.connect(server.url);
    const key = uniqueKey("shared-sub");
    const holder = new Lock(key, 10_000, store);
    await holder.acquire();
    const waiters = Array.from({ length: 5 }, () => new Lock(key, 10_000, store));
    const waits = waiters.map((w) => w.acquire({ timeout: 8_000, retryDelay: 5_000 }));
    // Those still waiting at the end find the store closed.
    const ended = Promise.allSettled(waits);
    await sleep(300);
    const [, subscribers] = await client.pubsub("NUMSUB", `locksmith:{${key}}:released`);
    assert.equal(subscribers, 1, "one subscription for five waiters");
    const before = await calls("evalsha");
    await holder.release();
    // One waiter wins; the others stay asleep (their retry delay is long).
    const winner = await Promise.race(waits.map((p, i) => p.then((ok) => (ok ? i : new Promise(() => {})))));
    await sleep(200);
    const attempts = (await calls("evalsha")) - before - 1; // minus the release itself
    assert.ok(attempts <= 2, `${attempts} acquire attempts after one release: every waiter woke`);
    // The winner's release hands the lock to another waiter, again without polling.
    const started = performance.now();
    await waiters[winner].release();
    const rest = waits.filter((_, i) => i !== winner);
    assert.equal(await Promise.race(rest), true, "the next waiter got the lock after the winner released");
    assert.ok(performance.now() - started < 1_500, "the second handoff waited for a retry delay");
    const closing = performance.now();
    await store.close();
    const outcomes = await ended;
    assert.ok(performance.now() - closing < 1_000, "waiters kept waiting after close()");
    const closed = outcomes.filter((o) => o.status === "rejected");
    assert.equal(closed.length, 3);
    assert.ok(
      closed.every((o) => o.reason.code === "STORE_CLOSED"),
      String(closed[0]?.reason),
    );
  });

  it("settles thousands of calls answered in one go", async () => {
    // More calls than one engine turn reports at once (the rest come in the next).
    const store = await RedisLockStore.connect(server.url);
    const key = uniqueKey("many");
    const holder = new Lock(key, 10_000, store);
    await holder.acquire();
    const answers = await Promise.all(Array.from({ length: 5_000 }, () => new Lock(key, 10_000, store).isLocked()));
    assert.equal(answers.length, 5_000);
    assert.ok(answers.every((held) => held === true));
    await holder.release();
    await store.close();
  });

  it("serves its waiters in arrival order: a holder that comes back queues behind them", async () => {
    const store = await RedisLockStore.connect(server.url);
    const key = uniqueKey("fifo");
    const holder = new Lock(key, 10_000, store);
    assert.equal(await holder.acquire(), true);
    const order = [];
    const turn = async (name, lock) => {
      assert.equal(await lock.acquire({ timeout: 8_000, retryDelay: 5_000 }), true, `${name} timed out`);
      order.push(name);
      await sleep(20);
      await lock.release();
    };
    const waiting = [];
    for (const name of ["first", "second", "third"]) {
      waiting.push(turn(name, new Lock(key, 10_000, store)));
      await sleep(100); // each is asleep on the release channel before the next comes
    }
    const before = await calls("evalsha");
    await holder.release();
    // Straight back, as a loop of critical sections does: behind the three.
    waiting.push(turn("holder again", holder));
    await Promise.all(waiting);
    assert.deepEqual(order, ["first", "second", "third", "holder again"]);
    // Four holds, four releases, and no attempt that found the key taken.
    const scripts = (await calls("evalsha")) - before;
    assert.equal(scripts, 1 + 4 + 4, `${scripts - 9} acquire attempts more than the holds`);
    await store.close();
  });

  it("logs in with the URL's password or ACL user, uses its database, and waits on notifications there too", async () => {
    const own = await startRedis(["--requirepass", "s3cret"]);
    const admin = new Redis(`redis://:s3cret@127.0.0.1:${own.port}`);
    try {
      const wrong = await RedisLockStore.connect({ url: `redis://:wrong@127.0.0.1:${own.port}`, ...fast }).catch((e) => e);
      assert.equal(wrong.code, "STORE_ERROR", String(wrong));
      assert.doesNotMatch(wrong.message, /wrong@/, "the URL's password is not echoed");
      const none = await RedisLockStore.connect({ url: own.url, ...fast }).catch((e) => e);
      assert.equal(none.code, "STORE_ERROR", String(none));
      assert.match(none.message, /NOAUTH/);

      const store = await RedisLockStore.connect(`redis://:s3cret@127.0.0.1:${own.port}/3`);
      const key = uniqueKey("db3");
      const holder = new Lock(key, 5_000, store);
      assert.equal(await holder.acquire(), true);
      await admin.select(3);
      assert.equal(await admin.get(`locksmith:{${key}}`), JSON.parse(holder.serialize()).owner, "the lock is in database 3");
      // A waiter subscribes on the second connection, which logs in too.
      const started = performance.now();
      const waited = new Lock(key, 5_000, store).acquire({ timeout: 5_000, retryDelay: 3_000 });
      await sleep(200);
      await holder.release();
      assert.equal(await waited, true);
      assert.ok(performance.now() - started < 1_500, "the waiter was not woken by the release");
      await store.close();

      await admin.call("ACL", "SETUSER", "locker", "on", ">pw", "~locksmith:*", "&*", "+@all");
      const user = await RedisLockStore.connect(`redis://locker:pw@127.0.0.1:${own.port}`);
      assert.equal(await new Lock(uniqueKey("acl"), 1_000, user).acquire(), true);
      await user.close();
    } finally {
      admin.disconnect();
      await own.stop();
    }
  });

  it("lets Node exit when the server went away from an idle store that was never closed", { timeout: 20_000 }, async () => {
    const started = performance.now();
    const code = await new Promise((resolve) => {
      const script = `
        const { RedisLockStore, Lock } = await import(${JSON.stringify(entry)});
        const { startRedis } = await import(${JSON.stringify(new URL("../support/redis-server.mjs", import.meta.url).href)});
        const server = await startRedis();
        const store = await RedisLockStore.connect({ url: server.url, ...${JSON.stringify(fast)} });
        const l = new Lock("idle-exit", 60_000, store);
        await l.acquire();
        await l.release();
        await server.stop();`;
      spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: "inherit" }).once("exit", resolve);
    });
    assert.equal(code, 0);
    assert.ok(performance.now() - started < 5_000, "reconnect attempts kept the process alive");
  });

  it("lets Node exit promptly after close()", async () => {
    const started = performance.now();
    const code = await new Promise((resolve) => {
      const script = `
        const { RedisLockStore, Lock } = await import(${JSON.stringify(entry)});
        const store = await RedisLockStore.connect(${JSON.stringify(server.url)});
        const l = new Lock("exit", 60_000, store);
        await l.acquire({ timeout: 100 });
        await l.release();
        await store.close();`;
      spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: "inherit" }).once("exit", resolve);
    });
    assert.equal(code, 0);
    assert.ok(performance.now() - started < 5_000, "no handle kept the process alive");
  });
});
