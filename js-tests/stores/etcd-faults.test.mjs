// EtcdLockStore (locksmith-js/etcd) when things go wrong, and where it runs, against a real
// three-member etcd cluster on loopback: the leader killed and a member stopped with
// SIGSTOP mid-use, eight processes contending under the history checker through a leader
// kill (with plain and with fair handles; and a broken guard it catches), Deno, workerd,
// the CommonJS build, TLS and etcd's authentication, and the documentation's samples.
// The store's behaviour, piece by piece: js-tests/etcd.test.mjs.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { EtcdLockStore } from "locksmith-js/etcd";

import { lateFetch } from "../support/etcd-late-fetch.mjs";
import { enableAuth, etcdCall, etcdStores, requireEtcd, startEtcd } from "../support/etcd-server.mjs";
import { testCertificates } from "../support/tls.mjs";
import { FAIR_CLIENT, checkRecords, runProcess } from "../histories/run.mjs";
import { now } from "../histories/client.mjs";
import { newSeed } from "../histories/random.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";

const { Lock, semaphore, readWriteLock, restoreLock } = ls;
const run = promisify(execFile);
const require = createRequire(import.meta.url);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

await failOnUnhandledRejections();

const b64 = (text) => Buffer.from(text).toString("base64");
/** The raw kv of an etcd key, read straight from the gateway. */
const rawGet = async (url, key) => (await etcdCall(url, "kv/range", { key: b64(key) })).kvs?.[0];

/** Resolves when `promise` settles or rejects after `ms`, with what it settled to. */
const within = (promise, ms, what) => Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`${what} did not settle within ${ms} ms`)))]);

/**
 * One etcd member over https:// (the test CA's certificate, support/tls.mjs) with
 * authentication on: `{ secure, dir, ca }`, `ca` the CA's file (for NODE_EXTRA_CA_CERTS),
 * `dir` its folder in js-tests/ (scripts there import the package by its name).
 */
async function startSecure() {
  const certs = await testCertificates(".etcd-tls-", { within: join(ROOT, "js-tests") });
  try {
    const tls = { cert: certs.files.cert, key: certs.files.key };
    // A simple token the server forgets after 1 s of disuse, so a test sees the store log
    // in again; etcd's default timings, so its lease minimum is etcd's default one (2 s).
    const secure = await startEtcd({ size: 1, tls, fastElections: false, args: ["--auth-token", "simple", "--auth-token-ttl", "1"] });
    await enableAuth(secure.members[0].adminUrl, { password: "root-secret", user: "app", userPassword: "app-secret", prefix: "locksmith/" });
    return { secure, dir: certs.dir, ca: certs.files.ca };
  } catch (err) {
    await certs.dispose();
    throw err;
  }
}

describe(`EtcdLockStore, faults and runtimes (${TARGET})`, await requireEtcd(), () => {
  // The TLS member (native pass only) starts beside the cluster, not after it.
  let secureReady;
  before(() => {
    if (TARGET === "native") {
      secureReady = startSecure();
      secureReady.catch(() => {});
    }
  });
  let cluster;
  const connect = etcdStores((started) => {
    cluster = started;
  });
  after(async () => {
    const started = await secureReady?.catch(() => undefined);
    await started?.secure.dispose();
    if (started) await rm(started.dir, { recursive: true, force: true });
  });

  describe("faults", () => {
    it("the leader killed: a new leader is elected, holds survive, a waiter in another process still gets in", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("leader-kill");
      const holder = new Lock(key, 10_000, a);
      assert.equal(await holder.acquire(), true);
      const permit = semaphore(`${key}:sem`, 1, 10_000, a);
      assert.equal(await permit.acquire(), true);
      const waiter = new Lock(key, 5_000, b);
      const waiting = waiter.acquire({ timeout: 15_000, retryDelay: 300 });
      const { lease } = await rawGet(cluster.endpoints[0], a.lockKey(key));
      await sleep(1_500);
      const leaseTtl = async () => {
        for (const m of cluster.members) {
          try {
            return Number((await etcdCall(m.url, "lease/timetolive", { ID: lease }, { timeoutMs: 1_000 })).TTL ?? 0);
          } catch {}
        }
      };
      const ttlBefore = await leaseTtl();
      const old = await cluster.leader();
      assert.ok(old, "a leader");
      await old.kill();
      const next = await cluster.waitForLeader({ not: old });
      assert.notEqual(next.id, old.id, "another member leads");
      const ttlAfter = await leaseTtl();
      assert.ok(ttlBefore <= 8 && ttlAfter >= 9, `the new leader gave the hold's lease its full 10 s again: ${ttlBefore} s left before, ${ttlAfter} s after`);
      await holder.extend();
      assert.equal(holder.signal.aborted, false, "the hold survived");
      assert.equal(await b.isLocked(key), true);
      assert.equal(await semaphore(`${key}:sem`, 1, 5_000, b).acquire(), false, "the permit survived");
      assert.equal(await permit.release(), true);
      const released = performance.now();
      const holderToken = holder.fencingToken;
      assert.equal(await holder.release(), true);
      assert.equal(await within(waiting, 5_000, "the waiter"), true);
      assert.ok(performance.now() - released < 3_000);
      assert.ok(waiter.fencingToken > holderToken, `the token after the election (${waiter.fencingToken}) is larger than before (${holderToken})`);
      await waiter.release();
      await old.start();
      await cluster.waitForLeader();
    });

    it("a member stopped with SIGSTOP (the leader): calls move on to the others, holds survive, a waiter gets in, and it rejoins when continued", async () => {
      // A member is given a third of a call's time, at least 1 s, before the call moves on.
      const [a, b] = [await connect({ operationTimeoutMs: 3_000 }), await connect({ operationTimeoutMs: 3_000 })];
      const key = uniqueKey("sigstop");
      const holder = new Lock(key, 10_000, a);
      assert.equal(await holder.acquire(), true);
      const waiting = new Lock(key, 5_000, b).acquire({ timeout: 15_000, retryDelay: 300 });
      const stopped = await cluster.leader();
      stopped.pause();
      try {
        const started = performance.now();
        const other = new Lock(uniqueKey("sigstop-other"), 5_000, a);
        assert.equal(await other.acquire({ timeout: 8_000 }), true);
        assert.equal(await other.release(), true);
        await holder.extend();
        assert.equal(holder.signal.aborted, false, "the hold survived");
        assert.ok(performance.now() - started < 8_000, `${Math.round(performance.now() - started)} ms`);
        assert.equal(await holder.release(), true);
        assert.equal(await within(waiting, 6_000, "the waiter"), true);
        const leader = await cluster.waitForLeader({ not: stopped });
        assert.notEqual(leader, stopped);
      } finally {
        stopped.resume();
      }
      await cluster.waitForLeader();
      const s = await EtcdLockStore.connect(stopped.url);
      try {
        assert.equal(await new Lock(uniqueKey("rejoined"), 1_000, s).run(() => "ok").then(([, r]) => r), "ok", "the continued member serves again");
      } finally {
        await s.close();
      }
    });
  });

  // Requests etcd applies after their caller gave up on them (stuck at a slow or stopped
  // member; js-tests/support/etcd-late-fetch.mjs holds one back), and aborts that come
  // while an attempt is on its way: no second holder, and nothing left held that nobody owns.
  describe("uncertain outcomes", () => {
    // The store called directly runs the same JS in both builds: once is enough.
    const STORE_ALONE = { skip: TARGET === "wasm" ? "the store's own code, the same in both builds (run natively)" : false };
    /** A handle on `key` with a 20 s TTL: a "lock", a "semaphore" of one permit, a "write lock", or a "fair lock" or "fair semaphore" (`{ fair: true }`). */
    const handle = (kind, key, store) => {
      if (kind === "lock") return new Lock(key, 20_000, store);
      if (kind === "semaphore") return semaphore(key, 1, 20_000, store);
      if (kind === "fair lock") return new Lock(key, 20_000, store, { fair: true });
      if (kind === "fair semaphore") return semaphore(key, 1, 20_000, store, { fair: true });
      return readWriteLock(key, 20_000, store).writeLock();
    };

    /** Tries `take()` every 100 ms until it answers true or `ms` passed: the milliseconds it took, or undefined. */
    async function takenWithin(take, ms) {
      const started = performance.now();
      for (;;) {
        if (await take()) return performance.now() - started;
        if (performance.now() - started > ms) return undefined;
        await sleep(100);
      }
    }

    it("a semaphore attempt applied late leaves the next attempt's admitted entry alone: no second holder while the first hold is live", async () => {
      const late = lateFetch();
      // One attempt per call: its one request gets the whole operation timeout.
      const a = await connect({ operationTimeoutMs: 1_000, fetch: late.fetch });
      const c = await connect();
      const key = uniqueKey("late-permit");
      const held = late.hold("/v3/kv/txn", { afterAbortMs: 2_400 });
      const started = performance.now();
      const holder = semaphore(key, 1, 5_000, a);
      // The first attempt's transaction is held back; the second, 1 s later, is admitted.
      assert.equal(await holder.acquire({ timeout: 5_000, retryDelay: 1_000 }), true);
      const admittedAt = performance.now() - started;
      const { reply, at } = await held.delivered;
      assert.ok(at - started > admittedAt, "the first attempt was applied after the second was admitted");
      // The holder's deadline counts from its successful attempt's send, at least 1 s in:
      // until shortly before it, nobody else gets the permit.
      const until = started + 1_000 + 5_000 - 300;
      let intruder;
      while (performance.now() < until && !holder.signal.aborted) {
        const other = semaphore(key, 1, 5_000, c);
        if (await other.acquireImmediately()) {
          intruder = Math.round(performance.now() - started);
          await other.release();
          break;
        }
        await sleep(100);
      }
      assert.equal(
        intruder,
        undefined,
        `another store got the permit at ${intruder} ms while the holder (admitted at ${Math.round(admittedAt)} ms) still held it; the late transaction's answer: ${JSON.stringify(reply)}`,
      );
      assert.equal(holder.signal.aborted, false, "the holder's signal stayed quiet before its deadline");
      assert.equal(await holder.release(), true);
    });

    it("the store on its own: a late attempt of the same owner moves no entry to its lease", STORE_ALONE, async () => {
      const late = lateFetch();
      const a = await connect({ operationTimeoutMs: 1_000, fetch: late.fetch });
      const key = uniqueKey("late-permit-store");
      const entryKey = `${a.permitPrefix(key, "semaphore")}owner-1`;
      for (const kind of ["semaphore", "write"]) {
        const entry = kind === "semaphore" ? entryKey : `${a.permitPrefix(key, kind)}owner-1`;
        const held = late.hold("/v3/kv/txn", { afterAbortMs: 300 });
        await assert.rejects(a.acquirePermit(key, "owner-1", 10_000, kind, 1), (err) => err.code === "STORE_UNAVAILABLE");
        assert.equal(await a.acquirePermit(key, "owner-1", 10_000, kind, 1), true, `${kind}: the next attempt is admitted`);
        const before = await rawGet(cluster.endpoints[0], entry);
        const { reply } = await held.delivered;
        await sleep(200);
        const after = await rawGet(cluster.endpoints[0], entry);
        assert.ok(after, `${kind}: the admitted entry is still there (the late answer: ${JSON.stringify(reply)})`);
        assert.equal(after.lease, before.lease, `${kind}: the admitted entry stays under its own lease`);
        assert.equal(after.mod_revision, before.mod_revision, `${kind}: and is not written again`);
        assert.equal(await a.releasePermit(key, "owner-1", kind), true);
      }
    });

    it("the store on its own: a fair waiter's attempt applied late moves no place to its lease and grants nothing", STORE_ALONE, async () => {
      const late = lateFetch();
      const a = await connect({ operationTimeoutMs: 1_000, fetch: late.fetch });
      const b = await connect();
      for (const kind of ["lock", "semaphore"]) {
        const key = uniqueKey(`late-fair-${kind}`);
        const attempt = (store, owner) => store.acquireFair(key, owner, 10_000, kind, kind === "lock" ? undefined : 1, 1, true);
        const free = (store, owner) => (kind === "lock" ? store.release(key, owner) : store.releasePermit(key, owner, "semaphore"));
        const placeKey = `${a.fairQueuePrefix(key, kind)}owner-1`;
        assert.equal(typeof (await attempt(b, "holder")), "number");
        assert.equal(await attempt(a, "owner-1"), false, `${kind}: owner-1 takes the first place`);
        assert.equal(await attempt(b, "owner-2"), false, `${kind}: owner-2 the second`);
        // The next attempt's transaction is held back past its caller's timeout, then sent.
        const held = late.hold("/v3/kv/txn", { afterAbortMs: 300 });
        await assert.rejects(attempt(a, "owner-1"), (err) => err.code === "STORE_UNAVAILABLE");
        assert.equal(await attempt(a, "owner-1"), false, `${kind}: the attempt after it`);
        const before = await rawGet(cluster.endpoints[0], placeKey);
        assert.equal(await free(b, "holder"), true);
        const { reply } = await held.delivered;
        await sleep(200);
        const after = await rawGet(cluster.endpoints[0], placeKey);
        const moved = `the late answer: ${JSON.stringify(reply)}`;
        if (after !== undefined) {
          assert.equal(after.lease, before?.lease, `${kind}: a place stays under its own lease (${moved})`);
          assert.equal(after.mod_revision, before?.mod_revision, `${kind}: and is not written again (${moved})`);
        }
        const holds = kind === "lock" ? Number(await b.isLocked(key)) : await b.countPermits(key, "semaphore");
        assert.equal(holds, 0, `${kind}: the late attempt granted nothing (${moved})`);
        // Its place was the one the failed attempt used, gone with that attempt's lease, or
        // is kept: either way owner-1 gives it up (as the lock's clean-up does) and owner-2 is next.
        await free(a, "owner-1");
        assert.equal(typeof (await attempt(b, "owner-2")), "number", `${kind}: owner-2 is first in line`);
        assert.equal(await free(b, "owner-2"), true);
      }
    });

    // A waiting owner's attempt keeps its place's lease, and its granting transaction then
    // compares only the place. Held back past a third of operationTimeoutMs, the try is sent
    // again to the next member, which answers "waiting"; the first one is applied later,
    // once the key is free. The call must not answer "waiting" and leave its place to that
    // try: it fails, and its lease (the place's) is revoked, so the try takes nothing.
    it("the store on its own: a fair waiter's granting try sent again to the next member, the first applied late, takes nothing", STORE_ALONE, async () => {
      const late = lateFetch();
      const a = await connect({ operationTimeoutMs: 3_000, fetch: late.fetch });
      const b = await connect();
      for (const kind of ["lock", "semaphore"]) {
        const key = uniqueKey(`late-grant-${kind}`);
        const attempt = (store, owner) => store.acquireFair(key, owner, 10_000, kind, kind === "lock" ? undefined : 1, 1, true);
        const free = (store, owner) => (kind === "lock" ? store.release(key, owner) : store.releasePermit(key, owner, "semaphore"));
        assert.equal(typeof (await attempt(b, "holder")), "number");
        assert.equal(await attempt(a, "owner-1"), false, `${kind}: owner-1 takes the first place`);
        const held = late.hold("/v3/kv/txn", { afterAbortMs: 300 });
        const answer = await attempt(a, "owner-1").then(
          (value) => value,
          (err) => err.code,
        );
        assert.equal(await free(b, "holder"), true);
        const { reply } = await held.delivered;
        await sleep(300);
        const holds = kind === "lock" ? Number(await b.isLocked(key)) : await b.countPermits(key, "semaphore");
        // A semaphore's waiting attempt reads first (its granting transaction comes only
        // with room): the try held back is that read, and the call answers as it would.
        assert.deepEqual(
          [answer, holds],
          [kind === "lock" ? "STORE_UNAVAILABLE" : false, 0],
          `${kind}: the call's answer, and what its late try took for a call that was over (that try's answer: ${JSON.stringify(reply)})`,
        );
        await free(a, "owner-1");
      }
    });

    it("the store on its own: an extend applied late leaves the hold under the lease of the extend after it", STORE_ALONE, async () => {
      const late = lateFetch();
      const a = await connect({ operationTimeoutMs: 1_000, fetch: late.fetch });
      const key = uniqueKey("late-extend");
      assert.equal(await a.acquire(key, "owner-1", 10_000), true);
      const held = late.hold("/v3/kv/txn", { afterAbortMs: 300 });
      await assert.rejects(a.extend(key, "owner-1", 10_000), (err) => err.code === "STORE_UNAVAILABLE");
      assert.equal(await a.extend(key, "owner-1", 10_000), true, "the next extend");
      const before = await rawGet(cluster.endpoints[0], a.lockKey(key));
      const { reply } = await held.delivered;
      await sleep(200);
      const after = await rawGet(cluster.endpoints[0], a.lockKey(key));
      assert.equal(after?.lease, before.lease, `the hold stays under the next extend's lease (the late answer: ${JSON.stringify(reply)})`);
      assert.equal(await a.release(key, "owner-1"), true);
    });

    it(
      "the store on its own: a release sent while an acquire of the same owner is on its way (slow) waits for it, so nothing stays held",
      STORE_ALONE,
      async () => {
        const b = await connect();
        for (const path of ["/v3/lease/grant", "/v3/kv/txn"]) {
          for (const kind of ["lock", "semaphore", "write", "fair lock", "fair semaphore"]) {
            const slow = lateFetch();
            const a = await connect({ fetch: slow.fetch });
            const key = uniqueKey(`release-waits-${kind.replace(" ", "-")}`);
            const lockFamily = kind === "lock" || kind === "fair lock";
            slow.hold(path, { delayMs: 800 });
            const acquiring =
              kind === "lock"
                ? a.acquire(key, "owner-1", 20_000)
                : kind === "fair lock"
                  ? a.acquireFair(key, "owner-1", 20_000, "lock", undefined, 1, true)
                  : kind === "fair semaphore"
                    ? a.acquireFair(key, "owner-1", 20_000, "semaphore", 1, 1, true)
                    : a.acquirePermit(key, "owner-1", 20_000, kind, 1);
            // As a release sent on an abort: while the acquire is on its way.
            await sleep(200);
            const releasing = lockFamily ? a.release(key, "owner-1") : a.releasePermit(key, "owner-1", kind === "fair semaphore" ? "semaphore" : kind);
            assert.ok(await acquiring, `${kind}, slow ${path}: the acquire took it`);
            assert.equal(await releasing, true, `${kind}, slow ${path}: the release freed what the acquire took`);
            const held = lockFamily ? await b.isLocked(key) : (await b.countPermits(key, kind === "fair semaphore" ? "semaphore" : kind)) > 0;
            assert.equal(held, false, `${kind}, slow ${path}: nothing stays held`);
          }
        }
      },
    );

    it("the store on its own: a hold whose extend is on its way past its first TTL is not passed by another owner", STORE_ALONE, async () => {
      for (const kind of ["lock", "write"]) {
        const slow = lateFetch();
        const a = await connect({ fetch: slow.fetch });
        const key = uniqueKey(`extend-on-its-way-${kind}`);
        const take = (owner, ttlMs) => (kind === "lock" ? a.acquire(key, owner, ttlMs) : a.acquirePermit(key, owner, ttlMs, kind, 1));
        const free = (owner) => (kind === "lock" ? a.release(key, owner) : a.releasePermit(key, owner, kind));
        assert.equal(await take("owner-1", 300), true);
        slow.hold("/v3/kv/txn", { delayMs: 700 });
        const extending = kind === "lock" ? a.extend(key, "owner-1", 5_000) : a.extendPermit(key, "owner-1", 5_000, kind);
        await sleep(450); // past the first write's TTL; the extend is still on its way
        assert.equal(await take("owner-2", 5_000), false, `${kind}: the hold being extended is not passed`);
        assert.equal(await extending, true, `${kind}: the extend landed`);
        if (kind === "write") await free("owner-2"); // its place in the queue
        assert.equal(await free("owner-1"), true);
      }
    });

    // The store takes out an entry of its own that it counts as over (its TTL passed) in
    // the background; once that is done it forgets the entry's write, and an entry whose
    // write it does not know counts as live. A read from before the deletion, answered
    // after it, then showed that entry alive again, ahead of the hold that went past it.
    it(
      "the store on its own: a release or extend whose read is answered after the cleanup of an entry its hold went past still finds the hold",
      STORE_ALONE,
      async () => {
        for (const call of ["release", "extend"]) {
          for (const kind of ["write", "semaphore"]) {
            const slow = lateFetch();
            const a = await connect({ fetch: slow.fetch });
            const key = uniqueKey(`${call}-after-cleanup-${kind}`);
            assert.equal(await a.acquirePermit(key, "owner-1", 300, kind, 1), true);
            await sleep(450); // owner-1's TTL passed: over to this store, still in etcd (its lease lasts a second at least)
            slow.hold("/v3/kv/txn", {}); // owner-2's acquire, which goes past owner-1's entry
            slow.hold("/v3/kv/txn", { delayMs: 300 }); // the cleanup of owner-1's entry it starts
            // owner-2's release (its transaction reads the queue) or extend (it reads the
            // queue first): applied before the cleanup, answered after it.
            slow.hold(call === "release" ? "/v3/kv/txn" : "/v3/kv/range", { answerDelayMs: 600 });
            assert.equal(await a.acquirePermit(key, "owner-2", 5_000, kind, 1), true, `${kind}: owner-2 went past the lapsed entry`);
            if (call === "extend") assert.equal(await a.extendPermit(key, "owner-2", 5_000, kind), true, `${kind}: the extend kept a hold that was live`);
            assert.equal(await a.releasePermit(key, "owner-2", kind), true, `${kind}, ${call}: the release freed a hold that was live`);
            assert.equal(await a.countPermits(key, kind), 0, `${kind}, ${call}: nothing is left`);
            await a.close();
          }
        }
      },
    );

    for (const kind of ["lock", "semaphore", "write lock", "fair lock", "fair semaphore"]) {
      it(`a ${kind} acquire applied after it failed leaves nothing held: another store gets in well before the TTL`, async () => {
        const late = lateFetch();
        const a = await connect({ operationTimeoutMs: 1_000, fetch: late.fetch });
        const b = await connect();
        const key = uniqueKey(`late-${kind.replace(" ", "-")}`);
        const make = (store) => handle(kind, key, store);
        // A fair semaphore's first transaction reads (and would take a place); its second is the grant.
        if (kind === "fair semaphore") late.hold("/v3/kv/txn", {});
        const held = late.hold("/v3/kv/txn", { afterAbortMs: 1_000 });
        await assert.rejects(make(a).acquire(), (err) => err.code === "STORE_UNAVAILABLE");
        const { reply } = await held.delivered;
        const other = make(b);
        const took = await takenWithin(() => other.acquireImmediately(), 2_000);
        assert.ok(took !== undefined, `the ${kind} was still held 2 s after the late request was applied (its answer: ${JSON.stringify(reply)})`);
        await other.release();
      });
    }

    for (const [what, path] of [
      ["lease grant", "/v3/lease/grant"],
      ["transaction", "/v3/kv/txn"],
    ]) {
      for (const kind of ["lock", "semaphore", "write lock", "fair lock", "fair semaphore"]) {
        it(`an abort while a ${kind}'s ${what} is slow leaves nothing held once the attempt settled`, async () => {
          const slow = lateFetch();
          const a = await connect({ fetch: slow.fetch });
          const b = await connect();
          const key = uniqueKey(`abort-slow-${kind.replace(" ", "-")}`);
          const make = (store) => handle(kind, key, store);
          const held = slow.hold(path, { delayMs: 800 });
          const controller = new AbortController();
          setTimeout(() => controller.abort(), 200);
          await assert.rejects(make(a).acquire({ timeout: 5_000, signal: controller.signal }), (err) => err.code === "ABORTED");
          await held.delivered;
          const other = make(b);
          const took = await takenWithin(() => other.acquireImmediately(), 2_000);
          assert.ok(took !== undefined, `the ${kind} was still held 2 s after its slow ${what} was answered`);
          await other.release();
        });
      }
    }
  });

  describe("processes and the history checker", () => {
    /**
     * `processes` OS processes (the checker's client processes, histories/client.mjs, on an
     * EtcdLockStore; `broken`: one of its brokenStore guards that takes no options, such
     * as put-without-compare) for `seconds`, `during()` run once they have started; resolves to the
     * checker's result over every process's holds.
     */
    async function etcdHistory({ processes, clients, seconds, client = {}, broken, during }) {
      const seed = newSeed();
      const startAt = now() + 2_000; // every process loaded and connected by then
      const configs = Array.from({ length: processes }, (_, i) => ({
        store: broken ? { broken, store: { etcd: cluster.endpoints } } : { etcd: cluster.endpoints },
        clients,
        durationMs: seconds * 1_000,
        seed,
        process: i,
        startAt,
        ...client,
      }));
      const outputs = configs.map((config) => runProcess(config, { timeoutMs: seconds * 1_000 + 30_000 }));
      const fault = during ? sleep(startAt - now()).then(during) : undefined;
      const records = (await Promise.all(outputs)).flat();
      await fault;
      return { seed, ...checkRecords(records) };
    }

    /**
     * Eight processes × 2 clients for 6 s (long enough that eight processes starting on a
     * loaded two-core machine still hold plenty) with `client`'s config, the leader killed
     * 1.5 s in and started again a second after a new one was elected: `{ run, killed,
     * errors }` (the processes' errors summed by name).
     */
    async function throughLeaderKill(client) {
      let killed;
      const run = await etcdHistory({
        processes: 8,
        clients: 2,
        seconds: 6,
        client: { ttlMs: 1_000, graceMs: 500, keys: ["h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"], ...client },
        during: async () => {
          await sleep(1_500);
          killed = await cluster.leader();
          await killed.kill();
          await cluster.waitForLeader({ not: killed });
          await sleep(1_000);
          await killed.start();
        },
      });
      await cluster.waitForLeader();
      const errors = {};
      for (const s of run.summaries) for (const [name, n] of Object.entries(s.errors)) errors[name] = (errors[name] ?? 0) + n;
      return { run, killed, errors };
    }

    it("eight processes contend on every primitive through a leader kill: no violations", async (t) => {
      const { run, killed, errors } = await throughLeaderKill({});
      const grants = run.summaries.reduce((n, s) => n + s.grants, 0);
      t.diagnostic(
        `seed ${run.seed}: ${run.result.holds} holds, ${grants} grants, ${run.result.violations.length} violations, errors ${JSON.stringify(errors)}; leader ${killed?.name} killed`,
      );
      assert.ok(killed, "the leader was killed");
      assert.ok(run.result.holds > 20, `enough holds to mean something: ${run.result.holds}`);
      for (const kind of ["lock", "semaphore", "read", "write"])
        assert.ok(
          run.holds.some((h) => h.kind === kind),
          `some ${kind} holds`,
        );
      assert.equal(new Set(run.holds.map((h) => h.client.split(".")[0])).size, 8, "every process held something");
      assert.deepEqual(run.result.violations.slice(0, 5), [], `no violations (${JSON.stringify(run.result.byType)}); seed ${run.seed}`);
    });

    it("eight processes contend with fair locks and semaphores through a leader kill: no violations, fair order kept", async (t) => {
      const { run, killed, errors } = await throughLeaderKill(FAIR_CLIENT);
      t.diagnostic(
        `seed ${run.seed}: ${run.result.holds} holds, ${run.holds.filter((h) => h.fair).length} fair, ${run.result.violations.length} violations, errors ${JSON.stringify(errors)}; leader ${killed?.name} killed`,
      );
      assert.ok(killed, "the leader was killed");
      for (const kind of ["lock", "semaphore"])
        assert.ok(
          run.holds.some((h) => h.kind === kind && h.fair),
          `some fair ${kind} holds`,
        );
      // Held to the exact rule: the places the store answered were recorded (client.mjs recordPlaces).
      assert.ok(
        run.holds.filter((h) => h.fair).every((h) => h.placed === true),
        "every fair hold is checked against the places its store answered",
      );
      assert.deepEqual(run.result.violations.slice(0, 5), [], `no violations (${JSON.stringify(run.result.byType)}); seed ${run.seed}`);
    });

    it("catches a broken guard: an acquire that puts the key without the create-revision compare", {
      skip: TARGET !== "native" && "the checker's own guard: once, with the native pass",
    }, async (t) => {
      const run = await etcdHistory({
        processes: 2,
        clients: 4,
        seconds: 1.5,
        broken: "put-without-compare",
        client: { kinds: { lock: 1 }, keys: ["h0"], ttlMs: 1_000 },
      });
      t.diagnostic(`seed ${run.seed}: ${run.result.holds} holds, ${JSON.stringify(run.result.byType)}`);
      assert.ok(run.result.byType.overlap > 0, `the checker reports two holders: ${JSON.stringify(run.result.byType)} (seed ${run.seed})`);
    });
  });

  describe("runtimes and builds", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
    it("runs on Deno: the store over Deno's fetch, with the WebAssembly build", async () => {
      const dir = await mkdtemp(join(ROOT, "js-tests", ".etcd-deno-"));
      try {
        const key = uniqueKey("deno");
        await writeFile(
          join(dir, "deno.mjs"),
          `import { EtcdLockStore } from "locksmith-js/etcd";
           import * as ls from "locksmith-js";
           const store = await EtcdLockStore.connect(${JSON.stringify(cluster.endpoints)});
           const l = new ls.Lock(${JSON.stringify(key)}, 5_000, store);
           const taken = await l.acquire();
           const r = ls.readWriteLock(${JSON.stringify(key)}, 5_000, store).readLock();
           const read = await r.acquire();
           console.log(JSON.stringify({ backend: ls.backend, taken, token: l.fencingToken, serialized: l.serialize(), read, released: await r.release() }));
           await store.close();`,
        );
        const deno = require.resolve("deno/bin.cjs");
        const { stdout } = await run(process.execPath, [deno, "run", "--allow-read", "--allow-net=127.0.0.1", "--no-prompt", join(dir, "deno.mjs")], {
          cwd: ROOT,
          env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
        });
        const out = JSON.parse(stdout.trim().split("\n").pop());
        assert.equal(out.backend, "wasm");
        assert.deepEqual([out.taken, out.read, out.released], [true, true, true]);
        // The hold taken on Deno is released here, in Node.
        const store = await connect();
        const copy = restoreLock(out.serialized, store);
        assert.equal(copy.fencingToken, out.token);
        assert.equal(await copy.release(), true);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it("runs in workerd (a Cloudflare Worker, through Miniflare): locks shared with Node both ways, a release wakes the worker's waiter through the watch", async () => {
      const { startWorker } = await import("../support/workerd-harness.mjs");
      const worker = await startWorker("etcd-worker/worker.mjs", { bindings: { ETCD_URLS: cluster.endpoints.join(",") } });
      const call = async (path, init) => (await worker.mf.dispatchFetch(`http://worker${path}`, init)).json();
      try {
        const store = await connect();
        const key = uniqueKey("workerd");
        const held = new Lock(key, 10_000, store);
        assert.equal(await held.acquire(), true);
        const heldToken = held.fencingToken;
        assert.deepEqual((await call(`/take?key=${encodeURIComponent(key)}`)).taken, false, "held in Node: refused in the worker");
        const waiting = call(`/wait?key=${encodeURIComponent(key)}`);
        await sleep(500);
        assert.equal(await held.release(), true);
        const got = await waiting;
        assert.equal(got.taken, true, JSON.stringify(got));
        assert.ok(got.waited < 3_000, `woken after ${got.waited} ms, not at its 5 s retryDelay`);
        assert.ok(got.token > heldToken, `token ${got.token} after ${heldToken}`);
        const copy = restoreLock(got.serialized, store);
        assert.equal(await copy.isLocked(), true, "taken in the worker: held in Node");
        assert.equal(await copy.release(), true);
        const again = await call(`/take?key=${encodeURIComponent(key)}`);
        assert.equal(again.taken, true);
        assert.deepEqual(await call("/release", { method: "POST", body: again.serialized }), { released: true });
      } finally {
        await worker.dispose();
      }
    });

    it("requires from CommonJS, with the package's error classes", async () => {
      const script = `
        const ls = require("locksmith-js");
        const { EtcdLockStore } = require("locksmith-js/etcd");
        (async () => {
          const bad = await EtcdLockStore.connect({ endpoints: "http://x", bogus: 1 }).catch((e) => e instanceof ls.InvalidArgumentError);
          const store = await EtcdLockStore.connect(${JSON.stringify(cluster.endpoints)});
          const [ran, token] = await ls.lock(${JSON.stringify(uniqueKey("cjs"))}, 2_000, store).run((l) => l.fencingToken);
          await store.close();
          console.log(JSON.stringify({ bad, ran, token: typeof token }));
        })();`;
      const { stdout } = await run(process.execPath, ["-e", script], { cwd: ROOT });
      assert.deepEqual(JSON.parse(stdout), { bad: true, ran: true, token: "number" });
    });
  });

  describe("the locksmith command", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
    const escapeRegex = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const cli = (...args) =>
      run(process.execPath, [join(ROOT, "js/cli/cli.mjs"), ...args], { cwd: ROOT }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (err) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
      );

    it("lists the held locks, semaphore permits and read-write holds of etcd:// URLs, and release --force frees them and wakes their waiters", async () => {
      const store = await connect();
      const other = await connect();
      const name = uniqueKey("cli");
      const url = `etcd://${cluster.endpoints.map((e) => new URL(e).host).join(",")}`;
      const held = new Lock(name, 30_000, store);
      assert.equal(await held.acquire(), true);
      const permit = semaphore(`${name}:exports`, 2, 30_000, store);
      assert.equal(await permit.acquire(), true);
      const waitingWriter = ls.readWriteLock(`${name}:doc`, 10_000, store).writeLock();
      const reader = ls.readWriteLock(`${name}:doc`, 30_000, store).readLock();
      assert.equal(await reader.acquire(), true);
      const writerWait = waitingWriter.acquire({ timeout: 1_500, retryDelay: 100 });

      const listed = await cli("list", url, `${name}*`, "--json");
      assert.equal(listed.code, 0, listed.stderr);
      const holds = listed.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      assert.deepEqual(
        holds.map((h) => [h.key, h.kind]),
        [
          [name, "lock"],
          [`${name}:doc`, "read"],
          [`${name}:exports`, "semaphore"],
        ],
        "the waiting writer holds nothing",
      );
      assert.equal(holds[0].fencingToken, held.fencingToken);
      assert.ok(
        holds[0].remainingMs > 25_000 && holds[0].remainingMs <= 30_000 && holds[0].remainingMs % 1_000 === 0,
        `from the lease: ${holds[0].remainingMs}`,
      );
      assert.match(holds[0].owner, /^[0-9a-f]{8}$/);
      assert.ok(!listed.stdout.includes(JSON.parse(held.serialize()).owner), "never the owner token itself");
      assert.equal(await writerWait, false);

      // Another process waits on the lock, retrying only every 5 s: the release's deletion wakes it.
      const waiter = new Lock(name, 5_000, other);
      const waiting = waiter.acquire({ timeout: 8_000, retryDelay: 5_000 });
      await sleep(200);
      const started = performance.now();
      const released = await cli("release", url, name, "--force");
      assert.equal(released.code, 0, released.stderr);
      assert.match(
        released.stdout,
        new RegExp(
          `^released "${escapeRegex(name)}": it was held by [0-9a-f]{8} with 2[0-9]\\.0 s left \\(fencing token ${held.fencingToken}\\); its waiters were woken`,
        ),
      );
      assert.equal(await waiting, true);
      assert.ok(performance.now() - started < 4_000, "woken, not at its retryDelay");
      assert.equal(await held.isExpired(), true);
      assert.equal((await cli("release", url, `${name}:exports`, "--force")).code, 0);
      assert.equal(await permit.isExpired(), true);
      assert.equal(await semaphore(`${name}:exports`, 2, 1_000, store).count(), 0);
      await waiter.release();
      await reader.release();
    });

    it("says what is wrong (exit 2): a bad etcd URL, a wrong login; over etcds:// with the right one it lists", async () => {
      const bad = await cli("list", "etcd://");
      assert.deepEqual(
        [bad.code, bad.stderr.split("\n")[0]],
        [2, "locksmith: an etcd URL is etcd://[user:password@]host:port[,host:port…] (etcds:// for TLS); got etcd://"],
      );
      const { secure } = await secureReady;
      const wrong = await run(process.execPath, [join(ROOT, "js/cli/cli.mjs"), "list", `etcds://app:nope@${new URL(secure.endpoints[0]).host}`], {
        cwd: ROOT,
        env: { ...process.env, NODE_EXTRA_CA_CERTS: (await secureReady).ca },
      }).catch((e) => e);
      assert.equal(wrong.code, 2);
      // (After the CLI's warning that the URL argument holds a password.)
      assert.match(wrong.stderr, /^locksmith: warning: the store URL argument holds a password/);
      assert.match(wrong.stderr, /\nlocksmith: etcd at 127\.0\.0\.1:\d+: etcd refused the login of user "app"/);
      const right = await run(
        process.execPath,
        [join(ROOT, "js/cli/cli.mjs"), "list", `etcds://app:app-secret@${new URL(secure.endpoints[0]).host}`, "--json"],
        { cwd: ROOT, env: { ...process.env, NODE_EXTRA_CA_CERTS: (await secureReady).ca } },
      ).catch((e) => e);
      assert.ok(right.code === undefined || right.code === 1, `over TLS with a login: listed or nothing held (${right.code}: ${right.stderr})`);
    });
  });

  describe("TLS and authentication", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
    let secure;
    let dir;
    let ca;
    before(async () => {
      ({ secure, dir, ca } = await secureReady);
    });

    /** Runs an ES module body in a Node process that trusts the test's certificate. */
    async function runNode(body) {
      const file = join(dir, `script-${Math.random().toString(36).slice(2)}.mjs`);
      await writeFile(file, body);
      const { stdout } = await run(process.execPath, [file], { cwd: ROOT, env: { ...process.env, NODE_EXTRA_CA_CERTS: ca } });
      return stdout.trim() ? JSON.parse(stdout.trim().split("\n").pop()) : undefined;
    }

    it("connects over https:// with a user and password (in the options or the URL), and logs in again when the token expires", async () => {
      const url = secure.endpoints[0];
      const out = await runNode(`
        import { EtcdLockStore } from "locksmith-js/etcd";
        import { Lock, semaphore } from "locksmith-js";
        let logins = 0;
        const counting = (url, init) => (url.endsWith("/v3/auth/authenticate") && logins++, fetch(url, init));
        const store = await EtcdLockStore.connect({ endpoints: ${JSON.stringify(url)}, username: "app", password: "app-secret", fetch: counting });
        const l = new Lock("tls-auth", 5_000, store);
        const taken = await l.acquire();
        const token = typeof l.fencingToken;
        const permit = await semaphore("tls-auth", 2, 5_000, store).acquire();
        // The server forgets a simple token 1 s after its last use (--auth-token-ttl 1), checked on
        // a 1 s tick, so within 2 s; past that the next call logs in again.
        await new Promise((r) => setTimeout(r, 3_000));
        const released = await l.release();
        await store.close();
        const inUrl = await EtcdLockStore.connect(${JSON.stringify(url.replace("https://", "https://app:app-secret@"))});
        const again = await new Lock("tls-auth", 5_000, inUrl).acquire();
        const short = await new Lock("tls-short", "300ms", inUrl).acquire();
        // Kept, for its lease to be read below.
        await inUrl.close({ keepHolds: true });
        console.log(JSON.stringify({ taken, permit, released, again, short, token, logins }));
      `);
      assert.deepEqual(out, { taken: true, permit: true, released: true, again: true, short: true, token: "number", logins: 2 });
      // With etcd's default 1 s election timeout, the shortest lease is 2 s: a 300 ms lock's is that.
      const { token } = await etcdCall(secure.members[0].adminUrl, "auth/authenticate", { name: "root", password: "root-secret" });
      const headers = { authorization: token };
      const kv = (await etcdCall(secure.members[0].adminUrl, "kv/range", { key: b64("locksmith/lock/tls-short") }, { headers })).kvs[0];
      assert.equal((await etcdCall(secure.members[0].adminUrl, "lease/timetolive", { ID: kv.lease }, { headers })).grantedTTL, "2");
    });

    it("refuses a wrong password, a missing login and a prefix the user may not touch with LockStoreError; an untrusted certificate is STORE_UNAVAILABLE", async () => {
      const url = secure.endpoints[0];
      const out = await runNode(`
        import { EtcdLockStore } from "locksmith-js/etcd";
        const outcome = (p) => p.then(async (s) => (await s.close(), "connected"), (e) => [e.code, e.message]);
        console.log(JSON.stringify({
          wrong: await outcome(EtcdLockStore.connect({ endpoints: ${JSON.stringify(url)}, username: "app", password: "nope", operationTimeoutMs: 2_000 })),
          none: await outcome(EtcdLockStore.connect({ endpoints: ${JSON.stringify(url)}, operationTimeoutMs: 2_000 })),
          prefix: await outcome(EtcdLockStore.connect({ endpoints: ${JSON.stringify(url)}, username: "app", password: "app-secret", keyPrefix: "other/", operationTimeoutMs: 2_000 })),
        }));
      `);
      assert.equal(out.wrong[0], "STORE_ERROR");
      assert.match(out.wrong[1], /^locksmith: etcd refused the login of user "app": .*authentication failed/);
      assert.equal(out.none[0], "STORE_ERROR");
      assert.match(out.none[1], /^locksmith: etcd has authentication enabled: connect with a username and password/);
      assert.equal(out.prefix[0], "STORE_ERROR");
      assert.match(out.prefix[1], /^locksmith: etcd: .*permission denied/);
      // This process does not trust the certificate.
      const untrusted = await EtcdLockStore.connect({ endpoints: url, username: "app", password: "app-secret", operationTimeoutMs: 1_500 }).catch((e) => e);
      assert.equal(untrusted.code, "STORE_UNAVAILABLE", String(untrusted));
    });
  });

  describe("documentation", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
    // The etcd samples of docs/stores.md are marked no-run for js-tests/docs.test.mjs (it
    // has no etcd); they run here, against this cluster, as a reader would run them.
    it("docs/stores.md's etcd samples run", async (t) => {
      const text = await readFile(join(ROOT, "docs/stores.md"), "utf8");
      const section = text.slice(text.indexOf("### `EtcdLockStore`"));
      const blocks = [...section.slice(0, section.indexOf("\n### ", 5)).matchAll(/```js no-run\n([\s\S]*?)```/g)].map((m) => m[1]);
      assert.ok(blocks.length >= 1, "the section has samples");
      const dir = await mkdtemp(join(ROOT, "js-tests", ".etcd-docs-"));
      try {
        for (const [i, code] of blocks.entries()) {
          const file = join(dir, `sample-${i}.mjs`);
          await writeFile(file, `globalThis.invoice = { id: 42 };\nglobalThis.charge = async () => "charged";\n${code}`);
          const { stdout } = await run(process.execPath, [file], {
            cwd: ROOT,
            env: { ...process.env, ETCD_URL: cluster.endpoints[0], ETCD_URLS: cluster.endpoints.join(",") },
            timeout: 20_000,
          });
          t.diagnostic(stdout.trim());
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
});
