// The etcd reader: what `locksmith` sees of EtcdLockStore's keys, through the store itself
// (its requests, login and member failover) and its admin listing and release
// (`ETCD_ADMIN_LIST`, `ETCD_ADMIN_RELEASE` in js/stores/etcd.mjs), under the store's own
// key prefix unless --prefix names another.
import { CONNECT_TIMEOUT_MS, globRegExp, hold, redact, StoreError, storeCall, UsageError, waitersByKey, waitingOf } from "../common.mjs";

/** `etcd://[user:password@]host:port[,host:port…]` (etcds:// for TLS) as EtcdLockStore's options. */
function parseEtcdUrl(url) {
  const match = /^(etcds?):\/\/(?:([^@/]*)@)?([^/?#@]+)\/?$/.exec(url);
  if (!match) throw new UsageError(`an etcd URL is etcd://[user:password@]host:port[,host:port…] (etcds:// for TLS); got ${redact(url)}`);
  const [, scheme, login, hosts] = match;
  const endpoints = hosts.split(",").map((host) => `${scheme === "etcds" ? "https" : "http"}://${host}`);
  if (login === undefined) return { endpoints, hosts };
  const colon = login.indexOf(":");
  return {
    endpoints,
    hosts,
    username: decodeURIComponent(colon < 0 ? login : login.slice(0, colon)),
    password: colon < 0 ? "" : decodeURIComponent(login.slice(colon + 1)),
  };
}

const etcdPlain = (err) => String(err?.message ?? err).replace(/^locksmith: (etcd: )?/, "");
// A semaphore entry's permits, when the store's listing reports them (`permits`); else 1.
const etcdHold = (h) => hold(h.key, h.kind, h.remainingMs, h.fencingToken, h.owner, h.permits);
// A plain lock's holder with the value it proclaimed (an election's leader), or null.
const etcdHolder = (h) => (h.kind === "lock" ? { ...etcdHold(h), value: h.value ?? null } : etcdHold(h));

export class EtcdReader {
  #store;
  #where;
  #admin;

  static async open(url, { prefix }) {
    const { endpoints, hosts, username, password } = parseEtcdUrl(url);
    const { EtcdLockStore, ETCD_ADMIN_LIST, ETCD_ADMIN_RELEASE } = await import("../../stores/etcd.mjs");
    let store;
    try {
      store = await EtcdLockStore.connect({ endpoints, keyPrefix: prefix, username, password, operationTimeoutMs: CONNECT_TIMEOUT_MS, notifyReleases: false });
    } catch (err) {
      if (err?.code === "INVALID_ARGUMENT") throw new UsageError(etcdPlain(err));
      throw new StoreError(`etcd at ${hosts}: ${etcdPlain(err)}`);
    }
    return new EtcdReader(store, hosts, { list: ETCD_ADMIN_LIST, release: ETCD_ADMIN_RELEASE });
  }

  constructor(store, hosts, admin) {
    this.#store = store;
    this.#where = `etcd at ${hosts}`;
    this.#admin = admin;
  }

  #call(work) {
    return storeCall(this.#where, async () => {
      try {
        return await work();
      } catch (err) {
        if (err instanceof UsageError || err instanceof StoreError) throw err;
        throw new StoreError(`${this.#where}: ${etcdPlain(err)}`);
      }
    });
  }

  /** The holds and the places in fair queues of the keys `match` accepts. */
  #all(match) {
    return this.#call(() => this.#store[this.#admin.list](match));
  }

  async list(pattern) {
    const names = globRegExp(pattern);
    return (await this.#all((name) => names.test(name))).filter((h) => !h.waiting).map(etcdHold);
  }

  // A fair waiter's place is a key of the store's (in order); a waiting reader's or writer's
  // place is too, but the listing gives only the admitted entries, and a plain lock's or a
  // semaphore's waiters that are not fair leave no key: those are not known.
  async snapshot(pattern) {
    const names = globRegExp(pattern);
    const all = await this.#all((name) => names.test(name));
    return { holds: all.filter((h) => !h.waiting).map(etcdHold), waiters: waitersByKey(all), absentWaiters: null };
  }

  async inspect(key) {
    const all = await this.#all((name) => name === key);
    const waiting = waitingOf(all);
    return {
      holders: all.filter((h) => !h.waiting).map(etcdHolder),
      limit: null,
      waiting,
      // Counted where waiters leave a trace: a fair queue (on a fair key every waiter is fair).
      waiters: waiting.length > 0 || all.some((h) => h.fair) ? waiting.length : null,
    };
  }

  // One transaction deletes them all; the store's watches wake the waiters.
  release(key) {
    return this.#call(async () => (await this.#store[this.#admin.release](key)).map(etcdHold));
  }

  async close() {
    await this.#store.close();
  }
}
