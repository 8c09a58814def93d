// EtcdLockStore (locksmith-js/etcd) against a real three-member etcd cluster on loopback
// (js-tests/support/etcd-server.mjs starts it): the conformance suite, what etcd adds (one key and
// one lease per hold, leases rounded up to seconds, the create revision as fencing token,
// queues of keys for semaphores and read-write locks, watch wake-ups) and the options.
// The shared semaphore and read-write scenarios: js-tests/primitives.test.mjs. Failures,
// processes, runtimes, TLS and authentication: js-tests/etcd-faults.test.mjs.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { describe, it } from "node:test";

import * as pkg from "locksmith-js";
import { EtcdLockStore } from "locksmith-js/etcd";

import { conformance } from "../conformance/conformance.mjs";
import { etcdCall, etcdStores, requireEtcd } from "../support/etcd-server.mjs";
import { freePort } from "../support/redis-server.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";

const { Lock, semaphore, readWriteLock, InvalidArgumentError } = ls;
// What the store itself throws, checked against the package's classes: the store has its
// own copy of them, and `instanceof` holds across copies (js-tests/error-brands.test.mjs).
const { LockError, StoreUnavailableError, StoreClosedError } = pkg;

await failOnUnhandledRejections();

const b64 = (text) => Buffer.from(text).toString("base64");
const unb64 = (text) => Buffer.from(text ?? "", "base64").toString();
/** The raw kv of an etcd key, read straight from the gateway. */
const rawGet = async (url, key) => (await etcdCall(url, "kv/range", { key: b64(key) })).kvs?.[0];
/** The owner token inside a lock's serialized form. */
const ownerOf = (l) => JSON.parse(l.serialize()).owner;

describe(`EtcdLockStore (${TARGET})`, await requireEtcd(), () => {
  let cluster;
  const connect = etcdStores((started) => {
    cluster = started;
  });

  conformance("EtcdLockStore, three members, watch wake-ups", {
    makeStore: () => connect(),
    fencing: true,
    exactOwnership: true,
  });

  // The shared semaphore and read-write scenarios run on this store in
  // js-tests/conformance/primitives.test.mjs; these are what etcd's queues of keys add.
  describe("semaphores and read-write locks: what etcd adds", () => {
    it("a waiter admitted on its kept entry holds for its whole TTL on the server: no writer gets in while its signal is live", {
      timeout: 20_000,
    }, async () => {
      // The reader waits behind another process's writer, so its entry was put 1.5 s
      // before it is admitted; the server must keep it the TTL from the admission on.
      const mine = await connect();
      const other = await connect();
      const key = uniqueKey("rw-kept-entry");
      const first = readWriteLock(key, 10_000, other).writeLock();
      assert.equal(await first.acquire(), true);
      const reader = readWriteLock(key, 4_000, mine).readLock();
      const waiting = reader.acquire({ timeout: 8_000 });
      await sleep(1_500);
      await first.release();
      assert.equal(await waiting, true);
      // Past the lease of the entry's first put (4 s from its start), inside the reader's own deadline.
      await sleep(3_300);
      const second = readWriteLock(key, 10_000, other).writeLock();
      const got = await second.acquireImmediately();
      assert.ok(!(got && !reader.signal.aborted), "a writer got in beside a reader whose signal says it still holds");
      assert.equal(got, false, "the reader's hold is still the server's");
      await reader.release();
      if (got) await second.release();
    });

    it("a permit whose holder never releases: free after its TTL in the store that set it, before its lease ends; another limit is refused", async () => {
      const store = await connect();
      const key = uniqueKey("sem-ttl");
      const crashed = semaphore(key, 1, "600ms", store);
      assert.equal(await crashed.acquire(), true);
      const acquiredAt = performance.now();
      await assert.rejects(
        semaphore(key, 2, 5_000, store).acquire(),
        (err) => err instanceof InvalidArgumentError && /held with limit 1; this handle asks for 2/.test(err.message),
      );
      const next = semaphore(key, 1, 5_000, store);
      assert.equal(await next.acquire(), false);
      assert.equal(await next.acquire({ timeout: 2_000, retryDelay: 20 }), true);
      const waited = performance.now() - acquiredAt;
      assert.ok(waited >= 590 && waited < 1_000, `in after the TTL (600 ms) in the store that set it, before the lease (1 s) ended: ${Math.round(waited)} ms`);
      assert.equal(await crashed.isExpired(), true);
      assert.ok(next.fencingToken > crashed.fencingToken);
      await next.release();
    });

    it("keeps one key per contender, ordered by create revision: a refused semaphore contender leaves none, a waiting writer keeps its place until it gives up", async () => {
      const store = await connect();
      const key = uniqueKey("queue");
      const keysOf = async (kind) => {
        const prefix = store.permitPrefix(key, kind);
        const end = Buffer.from(prefix);
        end[end.length - 1] += 1;
        const { kvs = [] } = await etcdCall(cluster.endpoints[0], "kv/range", { key: b64(prefix), range_end: end.toString("base64") });
        // In create-revision order (a range answers in key order, and owners are random).
        return kvs
          .map((kv) => ({
            owner: decodeURIComponent(unb64(kv.key).slice(prefix.length)),
            revision: Number(kv.create_revision),
            ...JSON.parse(unb64(kv.value)),
          }))
          .sort((a, b) => a.revision - b.revision);
      };
      const s1 = semaphore(key, 1, 5_000, store);
      assert.equal(await s1.acquire(), true);
      assert.equal(await semaphore(key, 1, 5_000, store).acquire(), false);
      const held = await keysOf("semaphore");
      assert.deepEqual(
        held.map((k) => [k.owner, k.role, k.limit]),
        [[ownerOf(s1), "semaphore", 1]],
        "the refused one took its key out",
      );
      assert.equal(s1.fencingToken, held[0].revision, "a permit's fencing token is its key's create revision");
      const rw = readWriteLock(key, 5_000, store);
      const reader = rw.readLock();
      assert.equal(await reader.acquire(), true);
      const writer = rw.writeLock();
      const waiting = writer.acquire({ timeout: 400, retryDelay: 50 });
      await sleep(150);
      const queued = await keysOf("write");
      assert.deepEqual(
        queued.map((k) => k.role),
        ["read", "write"],
        "the waiting writer's key is behind the reader's",
      );
      assert.ok(queued[0].revision < queued[1].revision);
      assert.equal(await rw.readLock().acquire(), false, "a new reader queues behind the waiting writer");
      assert.equal(await waiting, false);
      assert.deepEqual(
        (await keysOf("write")).map((k) => k.owner),
        [ownerOf(reader)],
        "the writer that gave up took its key out",
      );
      assert.equal(await rw.readLock().acquire(), true, "and readers get in again");
    });

    it("weighted semaphore entries: permits in the value (none for one), 1 for an entry without them, every entry ahead counts toward admission", async () => {
      const store = await connect();
      assert.equal(store.permitWeights, true);
      const key = uniqueKey("weights");
      const prefix = store.permitPrefix(key, "semaphore");
      const values = async () => {
        const end = Buffer.from(prefix);
        end[end.length - 1] += 1;
        const { kvs = [] } = await etcdCall(cluster.endpoints[0], "kv/range", { key: b64(prefix), range_end: end.toString("base64") });
        return Object.fromEntries(kvs.map((kv) => [unb64(kv.key).slice(prefix.length), JSON.parse(unb64(kv.value))]));
      };
      /** An entry put by hand, as another process (or an earlier version, without `permits`) puts it. */
      const putEntry = async (owner, value) => {
        const { ID } = await etcdCall(cluster.endpoints[0], "lease/grant", { TTL: 60 });
        await etcdCall(cluster.endpoints[0], "kv/put", { key: b64(`${prefix}${owner}`), value: b64(JSON.stringify(value)), lease: ID });
      };
      const a = semaphore(key, 5, 5_000, store);
      assert.equal(await a.acquire({ permits: 3 }), true);
      const one = semaphore(key, 5, 5_000, store);
      assert.equal(await one.acquire(), true);
      const stored = await values();
      assert.equal(stored[ownerOf(a)].permits, 3);
      assert.equal("permits" in stored[ownerOf(one)], false, "one permit is written as before weights");
      await putEntry("from-before", { role: "semaphore", ttl: 60_000, limit: 5, w: "elsewhere.0" });
      assert.equal(await store.countPermits(key, "semaphore"), 5, "3 + 1 + 1 for the entry without permits");
      assert.equal(await semaphore(key, 5, 5_000, store).acquire(), false, "full");
      await one.release();
      await store.releasePermit(key, "from-before", "semaphore");
      assert.equal(await store.countPermits(key, "semaphore"), 3);
      // A refused entry of 4 still in the queue (its contender has yet to take it out)
      // counts for the entries behind it: a 1 behind it waits, though 3 + 1 would fit.
      await putEntry("refused", { role: "semaphore", ttl: 60_000, limit: 5, permits: 4, w: "elsewhere.1" });
      assert.equal(await store.countPermits(key, "semaphore"), 3, "the refused entry holds nothing");
      // (Through another store: this one, refused before, would read first and not put.)
      const behind = semaphore(key, 5, 5_000, await connect());
      assert.equal(await behind.acquire(), false, "3 + 4 ahead, + 1 > 5");
      await store.releasePermit(key, "refused", "semaphore");
      assert.equal(await behind.acquire({ permits: 2 }), true, "3 + 2 once it left");
      assert.equal(await store.countPermits(key, "semaphore"), 5);
      await a.extend(8_000);
      assert.equal((await values())[ownerOf(a)].permits, 3, "an extend re-puts the entry with its permits");
      assert.equal(await store.countPermits(key, "semaphore"), 5);
      await a.release();
      await behind.release();
      assert.deepEqual(await values(), {});
      // Called directly: the 6th argument is checked.
      for (const [kind, limit, permits] of [
        ["semaphore", 5, 6],
        ["semaphore", 5, 0],
        ["semaphore", 5, 1.5],
        ["write", undefined, 2],
      ]) {
        await assert.rejects(
          store.acquirePermit(key, "x", 1_000, kind, limit, permits),
          (err) => err.code === "INVALID_ARGUMENT" && /permits/.test(err.message),
          `${kind} ${permits}`,
        );
      }
    });

    it("is phase-fair when the writer's hold runs out instead of being released (its lease ends; no release marks the turn)", async () => {
      const holderStore = await connect();
      const store = await connect();
      const key = uniqueKey("rw-fair-expiry");
      // A writer in another store, gone without a release: its hold ends with its lease.
      const w1 = readWriteLock(key, "200ms", holderStore).writeLock();
      assert.equal(await w1.acquire(), true);
      await holderStore.close();
      const rw = readWriteLock(key, 10_000, store);
      const order = [];
      const take = async (name, l, holdMs) => {
        assert.equal(await l.acquire({ timeout: 8_000, retryDelay: 25 }), true, `${name} got in`);
        order.push(`${name} in`);
        await sleep(holdMs);
        order.push(`${name} out`);
        await l.release();
      };
      const reader = take("r1", rw.readLock(), 150);
      await sleep(100);
      const writer = take("w2", rw.writeLock(), 20);
      await Promise.all([reader, writer]);
      assert.deepEqual(order, ["r1 in", "r1 out", "w2 in", "w2 out"], "the reader waiting behind the gone writer went first");
    });
  });

  // The store contract's acquireFair (`{ fair: true }` handles): a queue of keys per lock
  // and semaphore, first in line granted. Each test below leans on the first-in-line check.
  describe("fair locks and semaphores", () => {
    const refused = (pattern) => (err) => err.code === "INVALID_ARGUMENT" && err instanceof InvalidArgumentError && pattern.test(err.message);
    /** A pattern that `text` alone matches. */
    const exactly = (text) => ({ test: (message) => message === text });
    /** A store's attempt of `owner` on the fair lock `key`: its fencing token, or false. */
    const fairLock =
      (store, key) =>
      (owner, waits = true, ttl = 10_000) =>
        store.acquireFair(key, owner, ttl, "lock", undefined, 1, waits);
    /** The places in the fair queue of `key`'s lock or semaphore, first to last: `{ owner, revision, lease, ttl, permits }`. */
    const placesOf = async (store, key, kind = "lock") => {
      const prefix = store.fairQueuePrefix(key, kind);
      const end = Buffer.from(prefix);
      end[end.length - 1] += 1;
      const { kvs = [] } = await etcdCall(cluster.endpoints[0], "kv/range", { key: b64(prefix), range_end: end.toString("base64") });
      return kvs
        .map((kv) => ({ owner: unb64(kv.key).slice(prefix.length), revision: Number(kv.create_revision), lease: kv.lease, ...JSON.parse(unb64(kv.value)) }))
        .sort((a, b) => a.revision - b.revision);
    };

    it("queues across stores: a later waiter that asks first after the release is not granted before the earlier one; places are keys under leases", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("fair-order-stores");
      const [onA, onB] = [fairLock(a, key), fairLock(b, key)];
      const token = await onA("holder");
      assert.equal(typeof token, "number");
      const hold = await rawGet(cluster.endpoints[0], a.lockKey(key));
      assert.equal(JSON.parse(unb64(hold.value)).fair, true, "a fair hold is marked in its value");
      assert.equal(Number(hold.create_revision), token, "its fencing token is its create revision");
      assert.equal(await onA("first"), false, "first takes the first place");
      assert.equal(await onB("second"), false, "second, in another store, the second");
      const places = await placesOf(a, key);
      assert.deepEqual(
        places.map((p) => [p.owner, p.ttl, p.permits]),
        [
          ["first", 10_000, 1],
          ["second", 10_000, 1],
        ],
      );
      const { TTL } = await etcdCall(cluster.endpoints[0], "lease/timetolive", { ID: places[0].lease });
      assert.ok(Number(TTL) > 8 && Number(TTL) <= 10, `a place's lease is its TTL in seconds: ${TTL}`);
      assert.equal(await a.release(key, "holder"), true);
      assert.equal(await onB("second"), false, "second asks first after the release, but first is first in line");
      assert.equal(await onB("second"), false, "and again");
      assert.equal(await a.isLocked(key), false, "the key is free meanwhile");
      const renewed = (await placesOf(a, key)).find((p) => p.owner === "first");
      assert.equal(renewed.revision, places[0].revision, "a place renewed keeps its create revision");
      const granted = await onA("first");
      assert.ok(granted > token, "then first is granted, with a larger token");
      assert.deepEqual(
        (await placesOf(a, key)).map((p) => p.owner),
        ["second"],
        "its place went with the grant",
      );
      assert.equal(await a.release(key, "first"), true);
      assert.equal(typeof (await onB("second")), "number");
      assert.equal(await b.release(key, "second"), true);
      assert.deepEqual(await placesOf(a, key), []);
    });

    it("a fair semaphore grants the first in line only: a later request for 1 does not overtake an earlier one for 3", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("fair-sem");
      const sem = (store, owner, permits, waits = true) => store.acquireFair(key, owner, 10_000, "semaphore", 3, permits, waits);
      assert.equal(typeof (await sem(a, "s1", 2)), "number");
      assert.equal(await sem(a, "big", 3), false, "3 do not fit beside 2");
      assert.equal(await sem(b, "small", 1), false, "1 fits beside 2, but big is first in line");
      assert.equal(await sem(b, "now", 1, false), false, "and so does an attempt that does not wait");
      assert.equal(await a.countPermits(key, "semaphore"), 2);
      assert.deepEqual(
        (await placesOf(a, key, "semaphore")).map((p) => [p.owner, p.permits]),
        [
          ["big", 3],
          ["small", 1],
        ],
      );
      assert.equal(await a.releasePermit(key, "s1", "semaphore"), true);
      assert.equal(await sem(b, "small", 1), false, "small asks first after the release; big is still first");
      const bigToken = await sem(a, "big", 3);
      assert.equal(typeof bigToken, "number");
      assert.equal(await b.countPermits(key, "semaphore"), 3, "big's entry is counted by every store");
      assert.equal(await b.permitRemainingTime(key, "big", "semaphore"), 1, "held (set elsewhere)");
      assert.equal(await a.extendPermit(key, "big", 10_000, "semaphore"), true);
      assert.equal(await sem(b, "small", 1), false, "full");
      assert.equal(await a.releasePermit(key, "big", "semaphore"), true);
      const smallToken = await sem(b, "small", 1);
      assert.ok(smallToken > bigToken);
      // From the package: a fair handle's request for 3 waits for small's permit; a later one for 1 waits behind it.
      const four = semaphore(key, 3, 10_000, a, { fair: true });
      assert.equal(four.fair, true);
      const waiting = four.acquire({ permits: 3, timeout: 5_000 });
      await sleep(300);
      const one = semaphore(key, 3, 10_000, b, { fair: true });
      const oneWaiting = one.acquire({ timeout: 5_000, retryDelay: 20 });
      await sleep(300);
      assert.equal(await b.releasePermit(key, "small", "semaphore"), true);
      assert.equal(await waiting, true, "the 3-permit request first");
      await sleep(200);
      assert.equal(await b.countPermits(key, "semaphore"), 3, "the 1-permit request still waits");
      await four.release();
      assert.equal(await oneWaiting, true);
      await one.release();
      assert.equal(await a.countPermits(key, "semaphore"), 0);
    });

    it("a release of an owner that holds nothing gives its place up: the next in line is first at once", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("fair-give-up");
      const [onA, onB] = [fairLock(a, key), fairLock(b, key)];
      assert.equal(typeof (await onA("holder")), "number");
      assert.equal(await onA("quits"), false);
      assert.equal(await onB("next"), false);
      assert.equal(await a.release(key, "holder"), true);
      assert.equal(await onB("next"), false, "quits is first in line");
      assert.equal(await a.release(key, "quits"), false, "it held nothing; its place is given up");
      assert.deepEqual(
        (await placesOf(a, key)).map((p) => p.owner),
        ["next"],
      );
      assert.equal(typeof (await onB("next")), "number", "next is first now");
      assert.equal(await b.release(key, "next"), true);
      // The same for a semaphore's place, given up by releasePermit.
      const sem = (store, owner) => store.acquireFair(key, owner, 10_000, "semaphore", 1, 1, true);
      assert.equal(typeof (await sem(a, "s-holder")), "number");
      assert.equal(await sem(a, "s-quits"), false);
      assert.equal(await sem(b, "s-next"), false);
      assert.equal(await a.releasePermit(key, "s-holder", "semaphore"), true);
      assert.equal(await sem(b, "s-next"), false, "s-quits is first in line");
      assert.equal(await a.releasePermit(key, "s-quits", "semaphore"), false);
      assert.equal(typeof (await sem(b, "s-next")), "number");
      assert.equal(await b.releasePermit(key, "s-next", "semaphore"), true);
    });

    it("a place lapses when its lease runs out (a waiter that stopped asking): the next waiter, woken by etcd's deletion, gets in", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("fair-lapse");
      const holder = ls.lock(key, 10_000, a, { fair: true });
      assert.equal(await holder.acquire(), true);
      // A waiter of 300 ms that asks once (a crashed one): its place's lease is 1 s, etcd's minimum here.
      assert.equal(await a.acquireFair(key, "gone", 300, "lock", undefined, 1, true), false);
      const placedAt = performance.now();
      const next = ls.lock(key, 10_000, b, { fair: true });
      // Its retry delay is longer than the test: only a wake-up lets it in.
      const waiting = next.acquire({ timeout: 8_000, retryDelay: 5_000 });
      await sleep(100);
      await holder.release();
      await sleep(200);
      assert.equal(await b.isLocked(key), false, "free, and next waits behind gone's place");
      assert.equal(await waiting, true);
      const waited = performance.now() - placedAt;
      assert.ok(waited >= 700 && waited < 2_500, `next got in when gone's place lapsed (its lease 1 s), ${Math.round(waited)} ms after it was put`);
      assert.deepEqual(await placesOf(a, key), []);
      await next.release();
    });

    it("an attempt that does not wait keeps no place, and is refused while anyone is in line", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("fair-no-wait");
      const [onA, onB] = [fairLock(a, key), fairLock(b, key)];
      assert.equal(typeof (await onA("holder")), "number");
      assert.equal(await onB("once", false), false);
      assert.deepEqual(await placesOf(a, key), [], "a held key: no place for it");
      assert.equal(await onA("waiter"), false);
      assert.equal(await a.release(key, "holder"), true);
      assert.equal(await onB("once", false), false, "free, but waiter is in line");
      assert.equal(await ls.lock(key, 10_000, b, { fair: true }).acquireImmediately(), false, "acquireImmediately() is such an attempt");
      assert.deepEqual(
        (await placesOf(a, key)).map((p) => p.owner),
        ["waiter"],
      );
      assert.equal(typeof (await onA("waiter")), "number");
      assert.equal(await a.release(key, "waiter"), true);
      assert.equal(typeof (await onB("late", true)), "number", "nobody kept a place ahead of a later waiter");
      assert.equal(await b.release(key, "late"), true);
    });

    it("handles that disagree on fairness are refused both ways with INVALID_ARGUMENT, while fair handles hold or queue", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("fair-mismatch");
      const onA = fairLock(a, key);
      assert.equal(typeof (await onA("holder")), "number");
      const notFair = exactly(
        `locksmith: lock ${JSON.stringify(key)} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on \`fair\``,
      );
      await assert.rejects(b.acquire(key, "plain", 10_000), refused(notFair), "held by a fair handle");
      await assert.rejects(new Lock(key, 10_000, b).acquire({ timeout: 1_000 }), refused(notFair), "a lock passes it on");
      assert.equal(await onA("waiter"), false);
      assert.equal(await a.release(key, "holder"), true);
      assert.equal(await onA("newcomer", false), false, "free, but waiter is first in line");
      await assert.rejects(b.acquire(key, "plain", 10_000), refused(notFair), "free, but fair waiters queue for it");
      assert.equal(typeof (await onA("waiter")), "number");
      assert.equal(await a.release(key, "waiter"), true);
      assert.equal(await b.acquire(key, "plain", 10_000), true, "nobody fair holds or waits: a handle that is not fair may take it");
      assert.equal(await b.isHeldBy(key, "plain"), true);
      await assert.rejects(
        onA("fair"),
        refused(
          exactly(
            `locksmith: lock ${JSON.stringify(key)} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on \`fair\``,
          ),
        ),
      );
      await assert.rejects(ls.lock(key, 10_000, a, { fair: true }).acquire({ timeout: 1_000 }), refused(/held by a handle that is not fair/));
      assert.deepEqual(await placesOf(a, key), [], "the refused fair attempts left no place");
      assert.equal(await b.release(key, "plain"), true);
      // Semaphores: the same both ways, and a fair handle's limit must be the holders'.
      const sem = (store, owner, waits = true, limit = 2) => store.acquireFair(key, owner, 10_000, "semaphore", limit, 1, waits);
      assert.equal(typeof (await sem(a, "s1")), "number");
      const semNotFair = exactly(
        `locksmith: semaphore ${JSON.stringify(key)} is fair (fair handles hold it or wait for it); this handle is not: every handle of a key must agree on \`fair\``,
      );
      await assert.rejects(b.acquirePermit(key, "plain", 10_000, "semaphore", 2), refused(semNotFair), "held by a fair handle");
      assert.equal(await b.countPermits(key, "semaphore"), 1, "the refused entry was taken out");
      await assert.rejects(sem(b, "other-limit", true, 3), refused(/held with limit 2; this handle asks for 3/));
      assert.equal(typeof (await sem(a, "s2")), "number");
      assert.equal(await sem(b, "s3"), false, "full: s3 waits");
      assert.equal(await a.releasePermit(key, "s1", "semaphore"), true);
      assert.equal(await sem(b, "s4", false), false, "one permit is free, but s3 is first in line");
      await assert.rejects(b.acquirePermit(key, "plain", 10_000, "semaphore", 2), refused(semNotFair), "fair waiters queue for it");
      assert.equal(typeof (await sem(b, "s3")), "number");
      await a.releasePermit(key, "s2", "semaphore");
      await b.releasePermit(key, "s3", "semaphore");
      assert.equal(await b.acquirePermit(key, "plain", 10_000, "semaphore", 2), true);
      await assert.rejects(
        sem(a, "fair"),
        refused(
          exactly(
            `locksmith: semaphore ${JSON.stringify(key)} is held by a handle that is not fair; this handle is fair: every handle of a key must agree on \`fair\``,
          ),
        ),
      );
      assert.deepEqual(await placesOf(a, key, "semaphore"), []);
      assert.equal(await b.releasePermit(key, "plain", "semaphore"), true);
    });

    it("locks made with lock(key, ttl, store, { fair: true }) are granted in arrival order, each woken by the release before it, though the first is slow and the last retries first", async () => {
      const a = await connect();
      // The first waiter's store is on a slow link: every request it sends is 80 ms late.
      const slow = await connect({ fetch: (url, init) => sleep(80).then(() => fetch(url, init)) });
      const b = await connect();
      const key = uniqueKey("fair-package");
      const holder = ls.lock(key, 10_000, a, { fair: true });
      assert.equal(holder.fair, true);
      assert.equal(await holder.acquire(), true);
      const order = [];
      const waits = [
        ["first", slow, 3_000],
        ["second", b, 1_500],
        ["third", a, 200],
      ].map(async ([name, store, retryDelay], i) => {
        await sleep(400 * i);
        const l = ls.lock(key, 10_000, store, { fair: true });
        assert.equal(await l.acquire({ timeout: 8_000, retryDelay }), true, `${name} timed out`);
        order.push(name);
        await sleep(50);
        await l.release();
      });
      await sleep(1_200);
      assert.deepEqual((await placesOf(a, key)).length, 3, "three places");
      const released = performance.now();
      await holder.release();
      await Promise.all(waits);
      assert.deepEqual(order, ["first", "second", "third"]);
      const took = performance.now() - released;
      assert.ok(took < 2_500, `each woken by the release before it, not at its retry delay: ${Math.round(took)} ms`);
    });
  });

  describe("keys, leases and fencing tokens", () => {
    it("keeps a plain lock as one key under a lease of its TTL rounded up to seconds; release deletes it and revokes the lease", async () => {
      const store = await connect();
      const key = uniqueKey("layout");
      const l = new Lock(key, "1500ms", store);
      assert.equal(await l.acquire(), true);
      assert.equal(store.lockKey(key), `locksmith/lock/${key}`);
      const kv = await rawGet(cluster.endpoints[0], store.lockKey(key));
      const value = JSON.parse(unb64(kv.value));
      assert.equal(value.owner, ownerOf(l));
      assert.equal(value.ttl, 1_500);
      assert.equal(l.fencingToken, Number(kv.create_revision), "the fencing token is the key's create revision");
      const lease = await etcdCall(cluster.endpoints[0], "lease/timetolive", { ID: kv.lease });
      assert.equal(lease.grantedTTL, "2", "1500 ms rounds up to a 2 s lease");
      assert.equal(await l.release(), true);
      assert.equal(await rawGet(cluster.endpoints[0], store.lockKey(key)), undefined);
      for (let i = 0; ; i++) {
        const gone = await etcdCall(cluster.endpoints[0], "lease/timetolive", { ID: kv.lease }).then(
          (r) => r.TTL === "-1",
          (e) => e.grpc === 5,
        );
        if (gone) break;
        assert.ok(i < 40, "the lease was revoked");
        await sleep(25);
      }
    });

    it("extend with another TTL re-puts the key under a new lease in one transaction: the same create revision, the old lease revoked", async () => {
      const store = await connect();
      const key = uniqueKey("reput");
      const l = new Lock(key, "1s", store);
      assert.equal(await l.acquire(), true);
      const before = await rawGet(cluster.endpoints[0], store.lockKey(key));
      await l.extend("5s");
      const after = await rawGet(cluster.endpoints[0], store.lockKey(key));
      assert.notEqual(after.lease, before.lease);
      assert.equal(after.create_revision, before.create_revision, "the hold, and its fencing token, are the same");
      assert.equal(Number(after.mod_revision), Number(before.mod_revision) + 1, "one write");
      assert.equal((await etcdCall(cluster.endpoints[0], "lease/timetolive", { ID: after.lease })).grantedTTL, "5");
      assert.ok((await l.getRemainingTime()) > 4_000);
      await sleep(100);
      await assert.rejects(
        etcdCall(cluster.endpoints[0], "lease/timetolive", { ID: before.lease }).then((r) => (r.TTL === "-1" ? Promise.reject(new Error("gone")) : r)),
      );
      await l.release();
    });

    it("fencing tokens are create revisions: they grow across keys, stores and members", async () => {
      const [a, b] = [await connect(), await EtcdLockStore.connect(cluster.endpoints[2])];
      try {
        let last = 0;
        for (let i = 0; i < 6; i++) {
          const l = new Lock(uniqueKey(`fence-${i % 2}`), 5_000, i % 2 ? b : a);
          await l.acquire();
          assert.ok(l.fencingToken > last, `${l.fencingToken} > ${last}`);
          last = l.fencingToken;
          await l.release();
        }
      } finally {
        await b.close();
      }
    });

    it("a holder that never releases keeps the key from other processes until its lease ends (never before its TTL), to the second", async () => {
      const holder = await connect();
      const other = await connect();
      const key = uniqueKey("crashed");
      const l = new Lock(key, "400ms", holder);
      assert.equal(await l.acquire(), true);
      const acquiredAt = performance.now();
      await holder.close({ keepHolds: true }); // the process is gone: nobody releases, nobody times it here
      assert.equal(await other.acquire(key, "o2", 5_000), false);
      assert.equal(await other.isLocked(key), true);
      const left = await other.remainingTime(key);
      assert.ok(left >= 1 && left <= 1_000 && left % 1_000 <= 1, `from the lease, in whole seconds: ${left}`);
      await sleep(500);
      assert.equal(await other.acquire(key, "o2", 5_000), false, "past its TTL, the lease still holds it");
      const waiter = new Lock(key, 5_000, other);
      assert.equal(await waiter.acquire({ timeout: 5_000, retryDelay: 1_000 }), true);
      const waited = performance.now() - acquiredAt;
      assert.ok(waited > 900 && waited < 3_000, `in once the lease (1 s, the cluster's minimum here) ran out: ${Math.round(waited)} ms`);
      assert.ok(waiter.fencingToken > l.fencingToken);
      await waiter.release();
    });

    it("ownerRemainingTime: to the millisecond for a hold this store set; 1 ms (held, no time vouched for) for one set elsewhere; null for another owner", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("owner-time");
      assert.equal(await a.acquire(key, "o1", 5_000), true);
      const mine = await a.ownerRemainingTime(key, "o1");
      assert.ok(mine > 4_500 && mine <= 5_000, `${mine}`);
      assert.equal(await b.ownerRemainingTime(key, "o1"), 1);
      assert.equal(await b.isHeldBy(key, "o1"), true);
      assert.equal(await b.ownerRemainingTime(key, "o2"), null);
      assert.equal(await b.isHeldBy(key, "o2"), false);
      const fromLease = await b.remainingTime(key);
      assert.ok(fromLease >= 4_000 && fromLease <= 5_000 && fromLease % 1_000 === 0, `the lease's whole seconds: ${fromLease}`);
      const exact = await a.remainingTime(key);
      assert.ok(exact > 4_500 && exact <= 5_000, `${exact}`);
      // Extended by a copy in the other store: the first store no longer times the hold.
      assert.equal(await b.extend(key, "o1", 8_000), true);
      assert.equal(await a.ownerRemainingTime(key, "o1"), 1);
      assert.ok((await b.ownerRemainingTime(key, "o1")) > 7_500);
      assert.equal(await a.release(key, "o1"), true);
      assert.equal(await b.ownerRemainingTime(key, "o1"), null);
    });

    it("a hold this store set and timed out is neither extended nor released as live, and its next acquire takes it over at once", async () => {
      const store = await connect();
      const key = uniqueKey("timed-out");
      assert.equal(await store.acquire(key, "o1", 100), true);
      await sleep(150);
      assert.equal(await store.isLocked(key), false);
      assert.equal(await store.extend(key, "o1", 5_000), false);
      assert.equal(await store.release(key, "o1"), false, "not a live hold");
      assert.equal(await store.acquire(key, "o3", 100), true);
      await sleep(150);
      assert.equal(await store.acquire(key, "o2", 5_000), true, "taken over, a lease early");
      assert.equal(await store.release(key, "o3"), false);
      assert.equal(await store.isHeldBy(key, "o2"), true);
      assert.equal(await store.release(key, "o2"), true);
    });

    it("a proclaimed value is a key of its own under the hold's lease: an extend moves it, a release takes it, a hold taken over starts without one", async () => {
      const store = await connect();
      const other = await connect();
      const url = cluster.endpoints[0];
      const key = uniqueKey("proclaim");
      const valueKey = `locksmith/value/${key}`;
      assert.equal(await store.acquire(key, "o1", 5_000), true);
      assert.equal(await store.proclaim(key, "o1", "v1", 1), true);
      let lock = await rawGet(url, store.lockKey(key));
      let value = await rawGet(url, valueKey);
      assert.equal(value.lease, lock.lease, "under the hold's lease");
      assert.deepEqual(JSON.parse(unb64(value.value)), { hold: lock.create_revision, owner: "o1", seq: 1, value: "v1" });
      assert.equal(await store.extend(key, "o1", 5_000), true);
      await sleep(200); // the old lease's revoke has landed
      [lock, value] = [await rawGet(url, store.lockKey(key)), await rawGet(url, valueKey)];
      assert.equal(value?.lease, lock.lease, "moved to the extend's lease");
      const seen = await other.holder(key);
      assert.deepEqual([seen.owner, seen.fencingToken, seen.value], ["o1", Number(lock.create_revision), "v1"], "another process reads it");
      assert.ok(seen.remainingMs >= 1_000 && seen.remainingMs <= 5_000, `from the lease, to the second: ${seen.remainingMs}`);
      assert.equal(await store.release(key, "o1"), true);
      await sleep(200);
      assert.equal(await rawGet(url, valueKey), undefined, "gone with the hold's lease");

      // A hold this store timed out and took over: its holder's value is not the next one's.
      assert.equal(await store.acquire(key, "o2", 100), true);
      assert.equal(await store.proclaim(key, "o2", "old", 5), true);
      await sleep(150);
      assert.equal(await store.holder(key), null);
      assert.equal(await store.proclaim(key, "o2", "late", 6), false);
      assert.equal(await store.acquire(key, "o3", 5_000), true, "taken over, a lease early");
      assert.equal((await store.holder(key)).value, null);
      assert.equal((await other.holder(key)).value, null);
      assert.equal(await store.release(key, "o3"), true);
    });

    it("a proclaim applied late changes nothing: its transaction requires the hold and the value as it read them", async () => {
      const txns = [];
      const store = await connect({ fetch: (url, init) => (new URL(url).pathname === "/v3/kv/txn" && txns.push(JSON.parse(init.body)), fetch(url, init)) });
      const url = cluster.endpoints[0];
      const key = uniqueKey("proclaim-late");
      assert.equal(await store.acquire(key, "o1", 5_000), true);
      txns.length = 0;
      assert.equal(await store.proclaim(key, "o1", "v1", 1), true);
      const write = txns.find((t) => t.success?.[0]?.request_put);
      assert.ok(write, "a proclaim writes with a transaction");
      assert.equal(await store.proclaim(key, "o1", "v2", 2), true);
      // The first one's transaction arrives again, late: the value changed since its read.
      assert.ok(!(await etcdCall(url, "kv/txn", write)).succeeded);
      assert.equal((await store.holder(key)).value, "v2");
      // And after the hold ended and another began: the lock key changed too.
      await store.release(key, "o1");
      assert.equal(await store.acquire(key, "o2", 5_000), true);
      assert.ok(!(await etcdCall(url, "kv/txn", write)).succeeded);
      assert.equal((await store.holder(key)).value, null);
      await store.release(key, "o2");
    });

    it("keys with / and % in them do not collide, in plain locks, semaphores or read-write locks", async () => {
      const store = await connect();
      const base = uniqueKey("slash");
      for (const [a, b] of [
        [`${base}/x`, `${base}%2Fx`],
        [base, `${base}/h`],
      ]) {
        assert.equal(await store.acquire(a, "o", 5_000), true);
        assert.equal(await store.acquire(b, "o", 5_000), true, `${b} is not ${a}`);
        assert.equal(await semaphore(a, 1, 5_000, store).acquire(), true);
        assert.equal(await semaphore(b, 1, 5_000, store).acquire(), true, `semaphore ${b} is not ${a}`);
        assert.equal(await readWriteLock(a, 5_000, store).writeLock().acquire(), true);
        assert.equal(await readWriteLock(b, 5_000, store).writeLock().acquire(), true, `rw ${b} is not ${a}`);
      }
      assert.equal(store.permitPrefix(`${base}/x`, "read"), `locksmith/rw/${base}%2Fx/`);
    });
  });

  describe("wake-ups", () => {
    it("a release wakes a waiter in another store (another process) through the watch, not at its retryDelay", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("wake");
      const holder = new Lock(key, 10_000, a);
      assert.equal(await holder.acquire(), true);
      const waiting = new Lock(key, 5_000, b).acquire({ timeout: 8_000, retryDelay: 5_000 });
      await sleep(300);
      const released = performance.now();
      await holder.release();
      assert.equal(await waiting, true);
      assert.ok(performance.now() - released < 1_000, `woken after ${Math.round(performance.now() - released)} ms`);
    });

    it("a release wakes a waiting writer and a waiting semaphore contender in another store, not at their retryDelay", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("wake-permits");
      const reader = readWriteLock(key, 10_000, a).readLock();
      const permit = semaphore(key, 1, 10_000, a);
      assert.equal(await reader.acquire(), true);
      assert.equal(await permit.acquire(), true);
      const writer = readWriteLock(key, 5_000, b).writeLock().acquire({ timeout: 8_000, retryDelay: 5_000 });
      const second = semaphore(key, 1, 5_000, b).acquire({ timeout: 8_000, retryDelay: 5_000 });
      await sleep(300);
      const released = performance.now();
      await Promise.all([reader.release(), permit.release()]);
      assert.deepEqual(await Promise.all([writer, second]), [true, true]);
      assert.ok(performance.now() - released < 1_500, `woken after ${Math.round(performance.now() - released)} ms`);
    });

    it("a lease that runs out wakes waiters too (etcd deletes the key)", async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniqueKey("wake-expiry");
      assert.equal(await a.acquire(key, "gone", 300), true);
      await a.close();
      const started = performance.now();
      const got = await new Lock(key, 5_000, b).acquire({ timeout: 6_000, retryDelay: 5_000 });
      assert.equal(got, true);
      assert.ok(performance.now() - started < 3_000, `woken by the lease's end after ${Math.round(performance.now() - started)} ms, not at the 5 s retryDelay`);
    });

    it("with notifyReleases: false there is no watch: waiters try again at their retryDelay", async () => {
      const a = await connect();
      const b = await connect({ notifyReleases: false });
      assert.equal(b.onRelease, undefined);
      const key = uniqueKey("poll");
      const holder = new Lock(key, 10_000, a);
      await holder.acquire();
      const started = performance.now();
      const waiting = new Lock(key, 5_000, b).acquire({ timeout: 5_000, retryDelay: 700 });
      await sleep(100);
      await holder.release();
      assert.equal(await waiting, true);
      assert.ok(performance.now() - started >= 650, `at the retry, ${Math.round(performance.now() - started)} ms`);
    });

    it("a waiter whose watch was on a member that died still gets in (the watch moves to another member)", async () => {
      const holderStore = await EtcdLockStore.connect(cluster.endpoints);
      // Which member the waiter's watch streams from: seen through its fetch.
      const watches = [];
      const waiterStore = await EtcdLockStore.connect({
        endpoints: cluster.endpoints,
        fetch: (url, init) => (url.endsWith("/v3/watch") && watches.push(url), fetch(url, init)),
      });
      try {
        const key = uniqueKey("watch-moves");
        const holder = new Lock(key, 10_000, holderStore);
        assert.equal(await holder.acquire(), true);
        const waiting = new Lock(key, 5_000, waiterStore).acquire({ timeout: 10_000, retryDelay: 4_000 });
        await sleep(200);
        assert.equal(watches.length, 1, "one watch");
        const served = cluster.members.find((m) => watches[0].startsWith(m.url));
        await served.kill();
        await sleep(500);
        const released = performance.now();
        await holder.release();
        assert.equal(await waiting, true);
        assert.ok(performance.now() - released < 2_000, `in ${Math.round(performance.now() - released)} ms, not at the 4 s retryDelay`);
        assert.ok(watches.length >= 2 && !watches.at(-1).startsWith(served.url), `the watch moved: ${watches.join(" ")}`);
        await served.start();
        await cluster.waitForLeader();
      } finally {
        await holderStore.close();
        await waiterStore.close();
      }
    });
  });

  describe("options and failures", () => {
    it("refuses unknown and bad options with INVALID_ARGUMENT and a locksmith: message, before any request", async () => {
      const cases = [
        [{ endpoints: "http://127.0.0.1:1", prefix: "x/" }, /unknown option `prefix` for EtcdLockStore\.connect\(\); did you mean `keyPrefix`\?/],
        [{ endpoints: "http://127.0.0.1:1", user: "u" }, /unknown option `user`.*did you mean `username`\?/],
        [{ endpoints: "http://127.0.0.1:1", timeout: 5 }, /unknown option `timeout`.*did you mean `operationTimeoutMs`\?/],
        [{ url: "http://127.0.0.1:1" }, /unknown option `url`/],
        [{}, /endpoints must be an etcd URL or a non-empty list/],
        [[], /endpoints must be an etcd URL or a non-empty list/],
        [42, /takes an etcd URL, a list of them, or an options object; got number/],
        ["127.0.0.1:2379", /must be an http:\/\/ or https:\/\/ URL/],
        ["etcd://127.0.0.1:2379", /must be an http:\/\/ or https:\/\/ URL \(https for TLS\); got "etcd:"/],
        ["http://127.0.0.1:2379/#x", /takes no query or #fragment/],
        [["http://127.0.0.1:1", 7], /must be an http:\/\/ or https:\/\/ URL; got number/],
        [{ endpoints: "http://u:p@127.0.0.1:1", username: "v" }, /give the etcd login once/],
        [["http://u:p@127.0.0.1:1", "http://w:p@127.0.0.1:2"], /name different logins/],
        [{ endpoints: "http://127.0.0.1:1", password: "p" }, /a password needs a username/],
        [{ endpoints: "http://127.0.0.1:1", keyPrefix: "" }, /keyPrefix must be a non-empty string/],
        [{ endpoints: "http://127.0.0.1:1", keyPrefix: 3 }, /keyPrefix must be a non-empty string/],
        [{ endpoints: "http://127.0.0.1:1", operationTimeoutMs: 0 }, /operationTimeoutMs must be a whole number of milliseconds/],
        [
          { endpoints: "http://127.0.0.1:1", operationTimeoutMs: "5s" },
          /operationTimeoutMs must be a whole number of milliseconds from 1 to 2147483647; got string/,
        ],
        [{ endpoints: "http://127.0.0.1:1", notifyReleases: "yes" }, /notifyReleases must be a boolean/],
        [{ endpoints: "http://127.0.0.1:1", fetch: 3 }, /fetch must be a function/],
        // A URL (or list) may be followed by the other options; nothing given is dropped.
        [{ args: ["http://127.0.0.1:1", { prefix: "x/" }] }, /unknown option `prefix`.*did you mean `keyPrefix`\?/],
        [{ args: ["http://127.0.0.1:1", { endpoints: "http://127.0.0.1:2" }] }, /was given endpoints twice/],
        [{ args: [{ endpoints: "http://127.0.0.1:1" }, { keyPrefix: "x/" }] }, /second argument only after a URL/],
        [{ args: ["http://127.0.0.1:1", 5] }, /options must be an object; got number/],
      ];
      for (const [options, message] of cases) {
        const err = await (options?.args ? EtcdLockStore.connect(...options.args) : EtcdLockStore.connect(options)).then(
          () => assert.fail(`accepted ${JSON.stringify(options)}`),
          (e) => e,
        );
        assert.ok(err instanceof pkg.InvalidArgumentError && err instanceof LockError, `${JSON.stringify(options)}: ${err}`);
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.match(err.message, /^locksmith: /);
        assert.match(err.message, message);
      }
      assert.throws(
        () => new EtcdLockStore(),
        (err) => err.code === "INVALID_ARGUMENT" && /EtcdLockStore\.connect/.test(err.message),
      );
      // connect(endpoints, options) is connect({ ...options, endpoints }).
      const prefixed = await EtcdLockStore.connect(cluster.endpoints, { keyPrefix: "two-args/" });
      try {
        assert.equal(prefixed.keyPrefix, "two-args/");
      } finally {
        await prefixed.close();
      }
      const store = await connect();
      await assert.rejects(store.acquire("k", "o", 0), (err) => err.code === "INVALID_ARGUMENT" && /ttlMs must be/.test(err.message));
      await assert.rejects(store.acquire("k", 5, 1_000), (err) => err.code === "INVALID_ARGUMENT" && /owner must be a string/.test(err.message));
      await assert.rejects(store.acquirePermit("k", "o", 1_000, "mutex"), (err) => err.code === "INVALID_ARGUMENT" && /kind must be/.test(err.message));
      await assert.rejects(store.acquirePermit("k", "o", 1_000, "semaphore", 0), (err) => err.code === "INVALID_ARGUMENT" && /limit must be/.test(err.message));
    });

    it("called directly, refuses a key or owner with a lone surrogate, as the API does (it would reach etcd as U+FFFD: two keys one lock)", async () => {
      const store = await connect();
      const refused = (what) => (err) =>
        err instanceof pkg.InvalidArgumentError && err.code === "INVALID_ARGUMENT" && new RegExp(`^locksmith: ${what} has a lone surrogate`).test(err.message);
      await assert.rejects(store.acquire("a\ud800", "o", 1_000), refused("key"));
      await assert.rejects(store.release("a\udc00", "o"), refused("key"));
      await assert.rejects(store.acquire("k", "o\ud800", 1_000), refused("owner"));
      await assert.rejects(store.acquirePermit("a\ud800", "o", 1_000, "semaphore", 2), refused("key"));
      // A pair is one astral code point: taken.
      const key = `${uniqueKey("surrogate")}\ud83d\udd12`;
      assert.equal(await store.acquire(key, "o", 1_000), true);
      assert.equal(await store.release(key, "o"), true);
    });

    it("no member reachable: connect() fails with StoreUnavailableError within operationTimeoutMs", async () => {
      const started = performance.now();
      const err = await EtcdLockStore.connect({
        endpoints: [`http://127.0.0.1:${await freePort()}`, `http://127.0.0.1:${await freePort()}`],
        operationTimeoutMs: 600,
      }).catch((e) => e);
      assert.ok(err instanceof StoreUnavailableError, String(err));
      assert.match(err.message, /^locksmith: etcd: no member answered a status request within 600 ms/);
      assert.ok(performance.now() - started < 1_500);
    });

    it("a member that accepts connections and never answers is left for the others", async () => {
      const silent = createServer(() => {});
      await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
      try {
        const store = await connect({ endpoints: [`http://127.0.0.1:${silent.address().port}`, cluster.endpoints[0]], operationTimeoutMs: 4_000 });
        const started = performance.now();
        const key = uniqueKey("silent");
        for (let i = 0; i < 3; i++) {
          assert.equal(await store.acquire(key, `o${i}`, 5_000), true);
          assert.equal(await store.release(key, `o${i}`), true);
        }
        assert.ok(performance.now() - started < 2_500, `${Math.round(performance.now() - started)} ms: at most one attempt waited on the silent member`);
      } finally {
        silent.close();
      }
    });

    it("a write applied but unanswered is recognized when the call tries again: an acquire by its write id, a release by the hold it knew", async () => {
      // A fetch that delivers the first transaction of each call, then drops its answer, as a cut connection would.
      let drop = false;
      const store = await connect({
        fetch: async (url, init) => {
          const response = await fetch(url, init);
          if (drop && url.endsWith("/v3/kv/txn")) {
            drop = false;
            await response.text();
            throw new TypeError("fetch failed", { cause: new Error("other side closed") });
          }
          return response;
        },
      });
      const key = uniqueKey("unanswered");
      drop = true;
      const l = new Lock(key, 5_000, store);
      assert.equal(await l.acquire(), true, "the retried acquire finds its own write");
      assert.equal(l.fencingToken, Number((await rawGet(cluster.endpoints[0], store.lockKey(key))).create_revision));
      drop = true;
      assert.equal(await l.release(), true, "the retried release finds the hold it knew gone");
      assert.equal(await rawGet(cluster.endpoints[0], store.lockKey(key)), undefined);
    });

    it("uses the fetch it is given", async () => {
      const seen = [];
      const store = await connect({ fetch: (url, init) => (seen.push(new URL(url).pathname), fetch(url, init)) });
      const key = uniqueKey("fetch");
      await new Lock(key, 1_000, store).run(() => {});
      assert.ok(seen.includes("/v3/kv/txn") && seen.includes("/v3/lease/grant"), seen.join());
    });

    it("close(): later calls fail with StoreClosedError", async () => {
      const store = await EtcdLockStore.connect(cluster.endpoints);
      await store.close();
      await store.close();
      await assert.rejects(store.acquire("k", "o", 1_000), (err) => err instanceof StoreClosedError && err.code === "STORE_CLOSED");
      await assert.rejects(new Lock("k", 1_000, store).acquire({ timeout: 1_000 }), (err) => err.code === "STORE_CLOSED");
    });
  });
});
