// locksmith-js/etcd: locks in etcd v3, through its JSON gateway over `fetch` (no client
// library), so the one store runs in Node, Deno and workerd. etcd is a Raft cluster: a
// write is acknowledged once a majority has it, so a hold survives the loss of a minority
// of members, the leader included.
//
// How a hold is kept (docs/stores.md has the reader's version):
// - A plain lock is the key `<prefix>lock/<key>`, put by a transaction that requires the
//   key's create revision to be 0 (absent), with a lease of its own. The hold's fencing
//   token is that create revision, which grows cluster-wide. Release is a transaction that
//   deletes the key only while its value names the owner, then revokes the lease; extend
//   re-puts the key under a new lease in one owner-checked transaction.
// - etcd leases count whole seconds and have a server minimum, while TTLs are
//   milliseconds. A lease is the TTL rounded up, granted after the call started, so it
//   outlives the holder's own deadline (the lease model: send time + TTL − drift): the
//   server never drops a hold early. It may keep one longer: a holder that crashed keeps
//   its key until the lease runs out.
// - To the millisecond, a hold is timed by the store that set it, on its own monotonic
//   clock: each write carries a write id, and the store remembers when it sent each of its
//   writes. A hold it set whose TTL has passed counts as free to it (isLocked, the due
//   check), and its own next acquire deletes it (compare the exact value, delete) and takes
//   the key. Clocks are never compared across machines; other processes see such a hold
//   until its lease ends.
// - The due check (`ownerRemainingTime`) answers from that memory: time left on a write
//   this store sent; 1 ms ("held, no time vouched for") for a write it did not, which a
//   process elsewhere may time; null when the owner does not hold the key.
// - What a plain lock's holder proclaims (elections: `proclaim`, read by `holder`) is the
//   key `<prefix>value/<key>`, put under the lock key's lease by a transaction that
//   requires the lock key unchanged since it was read (its holder, its lease) and the value
//   key too (so a proclaim applied late never replaces a newer one). Its JSON names the
//   hold (the lock key's create revision and owner): a value left from an earlier hold is
//   nobody's. Release and expiry take it with the lease; extend moves it to the new lease
//   in the transaction that re-puts the lock key.
// - Semaphores and read-write locks keep one key per contender under the key's prefix,
//   ordered by create revision (a queue): an entry is admitted by the entries ahead of it
//   alone (see js/stores/etcd-permits.mjs), so contenders never wait on one another's commits.
// - Fair locks and semaphores (`acquireFair`) queue their waiters as keys under
//   `<prefix>queue/<lock|semaphore>/<key>/`, each under the lease of its waiter's latest
//   attempt, and grant the first in line (see js/stores/etcd-fair.mjs). A fair hold is a
//   plain lock or a semaphore entry marked `"fair":true`; the plain acquire and
//   acquirePermit refuse a key that fair handles hold or queue for.
// - Wake-ups: one watch over the prefix (streamed, DELETE events only), opened while
//   anyone waits; polling at the waiters' retryDelay when it is down.
//
// The store is this file; its parts: js/stores/etcd-codec.mjs (keys, values, the writes
// it remembers, request bodies), etcd-gateway.mjs (options, requests to the members,
// leases), etcd-permits.mjs (semaphores and read-write locks, as functions over the
// store's state), etcd-fair.mjs (fair locks and semaphores, likewise), etcd-watch.mjs
// (release wake-ups) and etcd-admin.mjs (time left from leases, and the CLI's listing).
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, STORE_NAME } from "../api/symbols.mjs";
import { MAX_LIMIT, limitMessage } from "../api/defaults.mjs";
import { checkString, connectArguments, fairKey, invalid, noteSharedStore, typeName } from "../api/errors.mjs";
import { checkKind, checkMs, checkPermits, checkSeq } from "../api/checks.mjs";
import { releaseHolds } from "../api/shutdown.mjs";
import {
  contend,
  del,
  fairQueue,
  firstKv,
  get,
  anyUnder,
  holdOf,
  keptValue,
  kvsOf,
  leaseSeconds,
  lockValue,
  modIs,
  moveToLease,
  noneUnder,
  noop,
  now,
  ownerIs,
  parseValue,
  proclaimedValue,
  put,
  absent,
  segment,
  valueIs,
  b64,
  Writes,
} from "./etcd-codec.mjs";
import { EtcdGateway, GRPC, parseOptions, unavailable } from "./etcd-gateway.mjs";
import { acquireFairLock, acquireFairPermit } from "./etcd-fair.mjs";
import { acquireEntry, countEntries, entryRemainingTime, extendEntry, releaseEntry } from "./etcd-permits.mjs";
import { ReleaseWatch } from "./etcd-watch.mjs";
import { adminList, adminRelease, timeLeft } from "./etcd-admin.mjs";

/**
 * Internal, for js/cli/cli.mjs: `store[ETCD_ADMIN_LIST](match)` (the holds of the keys
 * `match` accepts, then the places in their fair queues, in order, marked `waiting`) and
 * `store[ETCD_ADMIN_RELEASE](key)`. Not part of the store contract.
 */
export const ETCD_ADMIN_LIST = Symbol("locksmith.etcdAdminList");
export const ETCD_ADMIN_RELEASE = Symbol("locksmith.etcdAdminRelease");

export class EtcdLockStore {
  get [STORE_NAME]() {
    return "etcd";
  }

  /** A semaphore hold may take several permits (acquirePermit's 6th argument, kept in its entry's value). */
  get permitWeights() {
    return true;
  }

  #options;
  #gateway;
  #watch;
  #writes = new Writes();
  // Keys whose last acquire here found them held: the next one reads before it writes.
  #contended = new Set();
  // Acquires on their way (and their clean-ups), by etcd key and owner: see #pending.
  #onTheirWay = new Map();
  // What the permit functions work on (js/stores/etcd-permits.mjs).
  #state;

  /**
   * Connects to etcd: `urlOrOptions` is an `http://` or `https://` URL of a member, a list
   * of them (either may be followed by the other options), or `{ endpoints, keyPrefix,
   * username, password, operationTimeoutMs, notifyReleases, fetch }`. Authenticates when given a login, and checks that a member
   * answers and runs etcd 3.4 or newer.
   */
  static async connect(...args) {
    const store = new EtcdLockStore(parseOptions(connectArguments(args, "endpoints", "EtcdLockStore.connect()", { lists: true })));
    try {
      await store.#gateway.checkServer();
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  /** @internal Use `EtcdLockStore.connect()`. */
  constructor(options) {
    if (options === null || typeof options !== "object" || !Array.isArray(options.endpoints) || typeof options.fetch !== "function") {
      throw invalid("use EtcdLockStore.connect(urlOrOptions) to make an EtcdLockStore");
    }
    this.#options = options;
    this.#gateway = new EtcdGateway(options);
    this.#watch = new ReleaseWatch(this.#gateway, options);
    // `places`: the place in a fair queue each waiting owner last saw; `spares`: leases
    // granted ahead for fair attempts; `turns`: fair attempts with no place yet, in the
    // order they were called, by queue (js/stores/etcd-fair.mjs).
    this.#state = {
      options,
      gateway: this.#gateway,
      writes: this.#writes,
      contended: this.#contended,
      watch: this.#watch,
      places: new Map(),
      spares: new Map(),
      turns: new Map(),
    };
    if (!options.notifyReleases) this.onRelease = undefined;
    noteSharedStore(this);
  }

  /** The key prefix every etcd key of this store starts with. */
  get keyPrefix() {
    return this.#options.keyPrefix;
  }

  /** Milliseconds after which a call fails with StoreUnavailableError. */
  get operationTimeoutMs() {
    return this.#options.operationTimeoutMs;
  }

  /** The etcd key of the plain lock on `key`. */
  lockKey(key) {
    checkString("key", key);
    return `${this.#options.keyPrefix}lock/${segment(key)}`;
  }

  /** The etcd key of the value proclaimed by the holder of the plain lock on `key`. */
  #valueKey(key) {
    return `${this.#options.keyPrefix}value/${segment(key)}`;
  }

  /** The prefix of the etcd keys of the semaphore (`kind` "semaphore") or read-write lock ("read", "write") on `key`. */
  permitPrefix(key, kind) {
    checkString("key", key);
    return `${this.#options.keyPrefix}${checkKind(kind)}/${segment(key)}/`;
  }

  /** The prefix of the places in the fair queue of the plain lock (`kind` "lock") or semaphore ("semaphore") on `key`. */
  fairQueuePrefix(key, kind) {
    checkString("key", key);
    if (kind !== "lock" && kind !== "semaphore") {
      throw invalid(`kind must be "lock" or "semaphore"; got ${typeof kind === "string" ? JSON.stringify(kind) : typeName(kind)}`);
    }
    return fairQueue(this.#options.keyPrefix, kind, key);
  }

  // -----------------------------------------------------------------------------------
  // The LockStore contract

  /** Takes `key` for `owner` for `ttlMs` if it is free: true, or false (locks get the fencing token through ACQUIRE_TOKEN). */
  async acquire(key, owner, ttlMs) {
    return (await this[ACQUIRE_TOKEN](key, owner, ttlMs)) !== false;
  }

  /** `acquire()` answering the hold's fencing token (the key's create revision), or false. */
  async [ACQUIRE_TOKEN](key, owner, ttlMs) {
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    const name = this.lockKey(key);
    return this.#pending(name, owner, (after) => this.#acquireLock(key, name, owner, ttlMs, after));
  }

  /**
   * One acquire of a plain lock, under a lease of its own. When it fails, its transaction
   * may still be applied (it went unanswered, or is stuck at a member): the lease is
   * revoked (`after.cleanup`), which deletes the key if the transaction was applied and
   * makes it fail if it comes later. Nothing else carries that lease.
   */
  async #acquireLock(key, name, owner, ttlMs, after) {
    const sentAt = now();
    const deadline = sentAt + this.#options.operationTimeoutMs;
    // The lock's fair queue: this handle (not fair) takes the key only while it is empty.
    const queue = fairQueue(this.#options.keyPrefix, "lock", key);
    if (this.#contended.has(name)) {
      // Held at the last look: one read, no lease, while it still is.
      const kv = await this.#gateway.get(name, deadline, "acquire");
      const held = kv && holdOf(this.#writes, kv, owner);
      if (held && held.state !== "expired") {
        if (held.fair) throw fairKey("lock", key);
        return false;
      }
    }
    const write = this.#writes.add(name, owner, ttlMs, sentAt, (w) => lockValue(owner, ttlMs, w));
    let lease;
    let outcome; // "taken" or "refused"; undefined when it failed (and may have been applied)
    try {
      lease = await this.#gateway.grant(ttlMs, deadline);
      for (let round = 0; round < 2 && outcome === undefined; round++) {
        const { reply } = await this.#gateway.txn(
          { compare: [absent(name), noneUnder(queue)], success: [put(name, write.value, lease)], failure: [get(name), anyUnder(queue)] },
          deadline,
          "acquire",
        );
        if (reply.succeeded) {
          outcome = "taken";
          return Number(reply.header.revision);
        }
        const kv = firstKv(reply.responses?.[0]);
        const held = kv && holdOf(this.#writes, kv, owner);
        if (held?.w === write.id) {
          // An earlier, unanswered attempt of this call was applied after all.
          outcome = "taken";
          return Number(kv.create_revision);
        }
        // Fair handles queue for it, or one holds it: refused.
        if (kvsOf(reply.responses?.[1]).length > 0 || (held?.fair && held.state !== "expired")) {
          outcome = "refused";
          throw fairKey("lock", key);
        }
        if (kv === undefined) continue; // freed in between
        if (held.state !== "expired" || round > 0) {
          outcome = "refused";
          break;
        }
        // A hold this store set, past its TTL: over by its holder's own reckoning. Delete
        // exactly that hold, then take the key.
        const { reply: gone } = await this.#gateway.txn({ compare: [valueIs(name, kv)], success: [del(name)] }, deadline, "acquire");
        if (gone.succeeded) {
          this.#gateway.revokeReplaced(gone);
          this.#writes.over(this.#writes.get(held.w));
        }
      }
      outcome ??= "refused";
      return false;
    } catch (err) {
      if (err?.cause?.grpc === GRPC.NOT_FOUND) {
        throw unavailable(`the lease of this acquire ran out before its transaction was applied (the call took over ${leaseSeconds(ttlMs)} s)`, err);
      }
      throw err;
    } finally {
      if (outcome === "taken") {
        this.#contended.delete(name);
      } else if (outcome === "refused") {
        // The write is void and its lease unused.
        this.#writes.over(write);
        this.#gateway.revoke(lease);
        contend(this.#contended, name);
      } else if (lease !== undefined) {
        // Failed: whatever it did or will do goes with its lease.
        after.cleanup = this.#gateway.revoke(lease).then(() => this.#writes.over(write));
      }
    }
  }

  /**
   * A fair handle's attempt (`{ fair: true }`; the store contract's `acquireFair`): `owner`
   * takes its place at the end of the fair queue of `key`'s plain lock (`kind` "lock") or
   * semaphore ("semaphore", with its `limit` and `permits`), or renews it for `ttlMs`, and
   * is granted the key when it is first in line and the key has room: the hold's fencing
   * token (its key's create revision), or false. One that does not `waits` keeps no place.
   * See js/stores/etcd-fair.mjs.
   */
  async acquireFair(key, owner, ttlMs, kind, limit, permits, waits) {
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    const queue = this.fairQueuePrefix(key, kind);
    if (kind === "lock") {
      const name = this.lockKey(key);
      return this.#pending(name, owner, (after) => acquireFairLock(this.#state, key, owner, ttlMs, waits === true, name, queue, after));
    }
    if (!(Number.isInteger(limit) && limit >= 1 && limit <= MAX_LIMIT)) throw invalid(limitMessage(typeof limit === "number" ? limit : typeName(limit)));
    const weight = checkPermits(kind, limit, permits);
    const base = this.permitPrefix(key, kind);
    const entryKey = `${base}${segment(owner)}`;
    return this.#pending(entryKey, owner, (after) =>
      acquireFairPermit(this.#state, key, owner, ttlMs, limit, weight, waits === true, base, entryKey, queue, after),
    );
  }

  /**
   * Frees `key` if `owner` holds it, and revokes its lease: whether it held a live hold. An
   * owner waiting in the lock's fair queue gives its place up.
   */
  async release(key, owner) {
    checkString("owner", owner);
    const name = this.lockKey(key);
    const place = `${fairQueue(this.#options.keyPrefix, "lock", key)}${segment(owner)}`;
    // An acquire of this owner still on its way (a release sent on an abort) finishes first.
    await this.#settle(name, owner, this.#gateway.deadline());
    const deadline = this.#gateway.deadline();
    const { reply, uncertain } = await this.#gateway.txn(
      { compare: ownerIs(name, owner), success: [del(name), del(place)], failure: [get(name), del(place)] },
      deadline,
      "release",
    );
    this.#state.places.delete(place);
    if (!reply.succeeded && reply.responses?.[1]?.response_delete_range?.prev_kvs?.[0]) {
      // A fair waiter's place given up: the waiters behind it may be first now.
      this.#gateway.revokeReplaced(reply);
      this.#watch.wake(`lock:${key}`);
    }
    if (reply.succeeded) {
      const prev = reply.responses?.[0]?.response_delete_range?.prev_kvs?.[0];
      this.#gateway.revokeReplaced(reply);
      this.#watch.wake(`lock:${key}`);
      const live = prev !== undefined && holdOf(this.#writes, prev, owner).state !== "expired";
      this.#writes.over(this.#writes.latest(name, owner));
      return live;
    }
    // An earlier attempt went unanswered: if it deleted the hold this store knows is live,
    // this one finds the key gone (or someone else's).
    const latest = this.#writes.latest(name, owner);
    if (uncertain && latest && this.#writes.status(latest.id, owner).state === "live") {
      const kv = firstKv(reply.responses?.[0]);
      if (kv === undefined || holdOf(this.#writes, kv, owner).owner !== owner) {
        this.#writes.over(latest);
        return true;
      }
    }
    return false;
  }

  /**
   * Moves `key`'s expiry to `ttlMs` from now if `owner` holds it: the key re-put under a new
   * lease, in one transaction. The put compares the key's exact value (the last write this
   * store sent for the owner, else what a read finds), so an extend applied late, after its
   * caller gave up, finds another value and cannot move the hold back to its older lease.
   * The value its holder proclaimed, if any, moves to the new lease in the same transaction.
   */
  async extend(key, owner, ttlMs) {
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    const name = this.lockKey(key);
    const valueName = this.#valueKey(key);
    const sentAt = now();
    const deadline = sentAt + this.#options.operationTimeoutMs;
    const previous = this.#writes.latest(name, owner);
    // A fair hold stays marked fair: as the last write this store sent says, else as the key read says (below).
    const write = this.#writes.add(name, owner, ttlMs, sentAt, (w) =>
      lockValue(owner, ttlMs, w, previous !== undefined && JSON.parse(previous.value).fair === true),
    );
    let lease;
    let extended; // true or false once known; undefined when it failed (and may have been applied)
    try {
      // A hold this store set and timed out is not extended (someone may be taking it over):
      // a read says whether the key holds that write still, or another of this owner's.
      let expected = previous && this.#writes.status(previous.id, owner).state !== "expired" ? b64(previous.value) : undefined;
      const [kv, granted] = await Promise.all([
        expected === undefined ? this.#gateway.get(name, deadline, "extend") : undefined,
        this.#gateway.grant(ttlMs, deadline),
      ]);
      lease = granted;
      let found = kv;
      // Three rounds at most: each that changes nothing found another value of this owner's.
      for (let round = 0; round < 3; round++) {
        if (expected === undefined) {
          const held = found && holdOf(this.#writes, found, owner);
          if (held?.owner !== owner || held.state === "expired") return (extended = false);
          if (held.w === write.id) return (extended = true); // an unanswered earlier try of this call, applied
          expected = found.value;
          write.value = lockValue(owner, ttlMs, write.id, held.fair);
        }
        const { reply } = await this.#gateway.txn(
          {
            compare: [{ key: b64(name), target: "VALUE", result: "EQUAL", value: expected }],
            success: [put(name, write.value, lease), moveToLease(valueName, lease)],
            failure: [get(name)],
          },
          deadline,
          "extend",
        );
        if (reply.succeeded) {
          this.#gateway.revokeReplaced(reply, lease);
          return (extended = true);
        }
        found = firstKv(reply.responses?.[0]);
        expected = undefined;
      }
      throw unavailable(`extend of ${JSON.stringify(key)}: the hold kept changing`);
    } catch (err) {
      // Unanswered, it may have been applied: the write stays remembered.
      if (err?.cause?.grpc === GRPC.NOT_FOUND) throw unavailable("the lease of this extend ran out before its transaction was applied", err);
      throw err;
    } finally {
      if (extended === false) {
        this.#writes.over(write);
        this.#gateway.revoke(lease);
      }
    }
  }

  /** Whether anyone holds `key` (a hold this store set and timed out counts as free). */
  async isLocked(key) {
    const kv = await this.#gateway.get(this.lockKey(key), this.#gateway.deadline(), "isLocked");
    return kv !== undefined && holdOf(this.#writes, kv).state !== "expired";
  }

  /** Whether `owner` holds `key`. */
  async isHeldBy(key, owner) {
    checkString("owner", owner);
    const kv = await this.#gateway.get(this.lockKey(key), this.#gateway.deadline(), "isHeldBy");
    if (kv === undefined) return false;
    const held = holdOf(this.#writes, kv, owner);
    return held.owner === owner && held.state !== "expired";
  }

  /**
   * Milliseconds left on `owner`'s own hold of `key`, or null when not its: the time this
   * store set it for; 1 for a hold set elsewhere (held, no time vouched for). One read.
   */
  async ownerRemainingTime(key, owner) {
    checkString("owner", owner);
    const kv = await this.#gateway.get(this.lockKey(key), this.#gateway.deadline(), "ownerRemainingTime");
    if (kv === undefined) return null;
    const held = holdOf(this.#writes, kv, owner);
    if (held.owner !== owner) return null;
    return held.state === "live" ? Math.max(1, Math.floor(held.left)) : held.state === "unknown" ? 1 : null;
  }

  /** Milliseconds until `key`'s hold expires, or null: to the millisecond for a hold this store set, else from its lease (to the second). */
  async remainingTime(key) {
    const deadline = this.#gateway.deadline();
    const kv = await this.#gateway.get(this.lockKey(key), deadline, "remainingTime");
    return kv === undefined ? null : timeLeft(this.#state, kv, deadline);
  }

  /**
   * Who holds the plain lock on `key`: `{ owner, fencingToken, remainingMs, value }`, or
   * null. The lock key and the value key are read in one transaction (one revision); the
   * time left is this store's own for a hold it set, else its lease's (to the second).
   */
  async holder(key) {
    const deadline = this.#gateway.deadline();
    const [kv, valueKv] = await this.#readHold(key, deadline, "holder");
    if (kv === undefined) return null;
    const remainingMs = await timeLeft(this.#state, kv, deadline);
    if (remainingMs === null) return null;
    return { owner: parseValue(kv).owner, fencingToken: Number(kv.create_revision), remainingMs, value: keptValue(valueKv, kv)?.value ?? null };
  }

  /**
   * Keeps `value` with `owner`'s live hold of `key`, unless the hold keeps one of a `seq`
   * as high already: whether `owner` holds `key`. One transaction writes it, under the
   * lock key's lease, only while the lock key and the value key are as read: a proclaim
   * applied late finds one of them changed and writes nothing.
   */
  async proclaim(key, owner, value, seq) {
    checkString("owner", owner);
    checkString("value", value);
    checkSeq(seq);
    const name = this.lockKey(key);
    const valueName = this.#valueKey(key);
    const deadline = this.#gateway.deadline();
    let [kv, valueKv] = await this.#readHold(key, deadline, "proclaim");
    // Each round that writes nothing found the hold or its value changed since the last.
    for (let round = 0; round < 3; round++) {
      if (kv === undefined) return false;
      const held = holdOf(this.#writes, kv, owner);
      if (held.owner !== owner || held.state === "expired") return false;
      const kept = keptValue(valueKv, kv);
      if (kept !== undefined && kept.seq >= seq) return true;
      try {
        const { reply } = await this.#gateway.txn(
          {
            compare: [modIs(name, kv.mod_revision), modIs(valueName, valueKv?.mod_revision)],
            success: [put(valueName, proclaimedValue(String(kv.create_revision), owner, seq, value), kv.lease)],
            failure: [get(name), get(valueName)],
          },
          deadline,
          "proclaim",
        );
        if (reply.succeeded) return true;
        kv = firstKv(reply.responses?.[0]);
        valueKv = firstKv(reply.responses?.[1]);
      } catch (err) {
        // The hold's lease ran out between the read and the write: it holds no more.
        if (err?.cause?.grpc === GRPC.NOT_FOUND) return false;
        throw err;
      }
    }
    throw unavailable(`proclaim on ${JSON.stringify(key)}: the hold kept changing`);
  }

  /** The plain lock's kv of `key` and its value key's kv (each undefined when absent), read in one transaction. */
  async #readHold(key, deadline, what) {
    const { reply } = await this.#gateway.txn({ compare: [], success: [get(this.lockKey(key)), get(this.#valueKey(key))] }, deadline, what);
    return [firstKv(reply.responses?.[0]), firstKv(reply.responses?.[1])];
  }

  /**
   * Runs `attempt(after)`, an acquire of `owner` on `etcdKey`, noted as on its way until it
   * settled and the clean-up it left (`after.cleanup`, a promise) is over: a release of the
   * same owner waits for it (#settle), so a release sent on an abort cannot overtake it.
   */
  #pending(etcdKey, owner, attempt) {
    const name = `${etcdKey}\u0000${owner}`;
    const after = { cleanup: undefined };
    const result = attempt(after);
    let set = this.#onTheirWay.get(name);
    if (set === undefined) this.#onTheirWay.set(name, (set = new Set()));
    const done = result
      .then(noop, noop)
      .then(() => after.cleanup)
      .catch(noop)
      .finally(() => {
        set.delete(done);
        if (set.size === 0 && this.#onTheirWay.get(name) === set) this.#onTheirWay.delete(name);
      });
    set.add(done);
    return result;
  }

  /** Waits (until `deadline` at most) for the acquires of `owner` on `etcdKey` on their way, and their clean-ups. */
  async #settle(etcdKey, owner, deadline) {
    const set = this.#onTheirWay.get(`${etcdKey}\u0000${owner}`);
    if (set === undefined) return;
    let timer;
    await Promise.race([Promise.all([...set]), new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - now()))))]);
    clearTimeout(timer);
  }

  // -----------------------------------------------------------------------------------
  // Permits: semaphores and read-write locks (js/stores/etcd-permits.mjs)

  /**
   * Admits `owner` to the semaphore or read-write lock `key`: true, or false (see the
   * README). A semaphore holder takes `permits` of the `limit` (default 1).
   */
  async acquirePermit(key, owner, ttlMs, kind, limit, permits) {
    return (await this[ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits)) !== false;
  }

  /**
   * `acquirePermit()` answering the hold's fencing token (its entry's create revision:
   * later grants have later entries), or false.
   */
  async [ACQUIRE_PERMIT_TOKEN](key, owner, ttlMs, kind, limit, permits) {
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    checkKind(kind);
    if (kind === "semaphore" && !(Number.isInteger(limit) && limit >= 1 && limit <= MAX_LIMIT)) {
      throw invalid(limitMessage(typeof limit === "number" ? limit : typeName(limit)));
    }
    const weight = checkPermits(kind, limit, permits);
    const base = this.permitPrefix(key, kind);
    const entryKey = `${base}${segment(owner)}`;
    return this.#pending(entryKey, owner, (after) => acquireEntry(this.#state, key, owner, ttlMs, kind, limit, weight, base, entryKey, after));
  }

  /** Drops `owner`'s entry on `key` (a hold, or a place in the queue; a semaphore's, its place in the fair queue too): whether it was a live hold. */
  async releasePermit(key, owner, kind) {
    checkString("owner", owner);
    checkKind(kind);
    const base = this.permitPrefix(key, kind);
    const entryKey = `${base}${segment(owner)}`;
    // An acquire of this owner still on its way (a release sent on an abort) finishes first.
    await this.#settle(entryKey, owner, this.#gateway.deadline());
    // A semaphore's waiter gives up its place in the fair queue, if it has one.
    const place = kind === "semaphore" ? `${fairQueue(this.#options.keyPrefix, "semaphore", key)}${segment(owner)}` : undefined;
    return releaseEntry(this.#state, key, owner, kind, base, entryKey, place);
  }

  /** Re-puts `owner`'s admitted, live entry under a new lease of `ttlMs`: its place (create revision) stays. */
  async extendPermit(key, owner, ttlMs, kind) {
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    checkKind(kind);
    const base = this.permitPrefix(key, kind);
    return extendEntry(this.#state, owner, ttlMs, kind, base, `${base}${segment(owner)}`);
  }

  /** How many permits of `key` are held (a semaphore's admitted entries' permits; readers, or one writer): its admitted entries. */
  async countPermits(key, kind) {
    return countEntries(this.#state, kind, this.permitPrefix(key, kind));
  }

  /** Milliseconds left of `owner`'s permit, or null (1 for a permit set elsewhere: held, no time vouched for). */
  async permitRemainingTime(key, owner, kind) {
    checkString("owner", owner);
    return entryRemainingTime(this.#state, owner, kind, this.permitPrefix(key, kind));
  }

  /** Calls `listener` when `key` may have been released; returns the function that stops it (js/stores/etcd-watch.mjs). */
  onRelease(key, listener, kind) {
    return this.#watch.on(key, listener, kind);
  }

  // -----------------------------------------------------------------------------------
  // For the `locksmith` command: what is held, and freeing it whoever holds it

  /** See etcd-admin.mjs's adminList. */
  [ETCD_ADMIN_LIST](match) {
    return adminList(this.#state, match, (key, kind) => this.permitPrefix(key, kind));
  }

  /** See etcd-admin.mjs's adminRelease. */
  [ETCD_ADMIN_RELEASE](key) {
    return adminRelease(this.#state, key, () => this[ETCD_ADMIN_LIST]((name) => name === key));
  }

  // -----------------------------------------------------------------------------------

  /**
   * Releases the holds this process took through the store (within `timeoutMs`, 2 s by
   * default; `keepHolds: true` leaves them to their leases), then stops the watch; later
   * calls fail with StoreClosedError.
   */
  async close(options) {
    const released = await releaseHolds(this, options, "EtcdLockStore");
    if (this.#gateway.closed) return;
    // Spare leases of fair attempts (js/stores/etcd-fair.mjs) carry nothing: revoked, not left to run out.
    for (const spares of this.#state.spares.values()) for (const { lease } of spares) if (lease !== undefined) this.#gateway.revoke(lease.id);
    this.#state.spares.clear();
    const closing = this.#gateway.close();
    this.#watch.close();
    await closing;
    released.check();
  }
}
