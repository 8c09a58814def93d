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
// - Semaphores and read-write locks keep one key per contender under the key's prefix,
//   ordered by create revision (a queue): an entry is admitted by the entries ahead of it
//   alone (see the permits section), so contenders never wait on one another's commits.
// - Wake-ups: one watch over the prefix (streamed, DELETE events only), opened while
//   anyone waits; polling at the waiters' retryDelay when it is down.
import { LockStoreError, StoreClosedError, StoreUnavailableError } from "locksmith-js";

import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, STORE_NAME } from "../api/symbols.mjs";
import { MAX_LIMIT, MAX_MS, limitMessage } from "../api/defaults.mjs";
import { checkOptionKeys, invalid, noteSharedStore, typeName } from "../api/errors.mjs";
import { checkKind, checkMs, checkPermits } from "../api/checks.mjs";
import { releaseHolds } from "../api/shutdown.mjs";

/** Internal, for js/cli/cli.mjs: `store[ETCD_ADMIN_LIST](match)` and `store[ETCD_ADMIN_RELEASE](key)`. Not part of the store contract. */
export const ETCD_ADMIN_LIST = Symbol("locksmith.etcdAdminList");
export const ETCD_ADMIN_RELEASE = Symbol("locksmith.etcdAdminRelease");

const OPTIONS = ["endpoints", "keyPrefix", "username", "password", "operationTimeoutMs", "notifyReleases", "fetch"];
const DEFAULT_PREFIX = "locksmith/";
const DEFAULT_OPERATION_TIMEOUT_MS = 5_000;
// One HTTP attempt on one member gets at most this share of a call's time, so a member
// that accepts and never answers (stopped, partitioned) leaves time for another.
const ATTEMPT_SHARE = 3;
const ATTEMPT_MIN_MS = 1_000;
// After every member failed once in a call, pause this long before the next round.
const ROUND_PAUSE_MS = 50;
// The watch: reconnect backoff, how often its member is probed, how long it stays open
// after the last waiter left.
const WATCH_RETRY_MIN_MS = 100;
const WATCH_RETRY_MAX_MS = 2_000;
const WATCH_PROBE_MS = 2_000;
const WATCH_PROBE_TIMEOUT_MS = 1_000;
const WATCH_LINGER_MS = 1_000;
// A lease revoke that goes unanswered is tried again, after pauses growing to the
// longest, for this long at most (by then the cluster was unreachable throughout).
const REVOKE_PAUSE_MIN_MS = 50;
const REVOKE_PAUSE_MAX_MS = 500;
const REVOKE_RETRY_MS = 60_000;
// The writes this store remembers (see Writes): swept past this many.
const WRITES_SWEEP_AT = 10_000;
const WRITES_MAX = 100_000;
// gRPC status codes the gateway reports (`code` in its error body).
const GRPC = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
};

const noop = () => {};
const now = () => performance.now();
const unref = (timer) => {
  if (typeof timer === "object") timer?.unref?.();
  return timer;
};

// -------------------------------------------------------------------------------------
// Bytes: etcd's JSON gateway carries keys and values as base64.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function bytesToBase64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

function base64ToBytes(b64) {
  const text = atob(b64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

const b64 = (text) => bytesToBase64(encoder.encode(text));
const unb64 = (value) => (value ? decoder.decode(base64ToBytes(value)) : "");

/** The first key after every key that starts with `prefix` (etcd's prefix range end), base64. */
function prefixEnd(prefix) {
  const bytes = encoder.encode(prefix);
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i] < 0xff) {
      const end = bytes.slice(0, i + 1);
      end[i] += 1;
      return bytesToBase64(end);
    }
  }
  return bytesToBase64(new Uint8Array([0]));
}

/** A key or owner as one path segment: `%` and `/` escaped, so prefixes cannot collide. */
const segment = (text) => text.replaceAll("%", "%25").replaceAll("/", "%2F");
const unsegment = (text) => text.replaceAll("%2F", "/").replaceAll("%25", "%");

// -------------------------------------------------------------------------------------
// Values. A plain lock's value is JSON whose first member is the owner, so a transaction
// can check the owner with two comparisons (value > `{"owner":<owner>,` and value < that
// with its last byte raised): exactly the values that begin with it. `w` is the write id.

const ownerPrefix = (owner) => `{"owner":${JSON.stringify(owner)},`;
const lockValue = (owner, ttl, w) => `${ownerPrefix(owner)}"ttl":${ttl},"w":${JSON.stringify(w)}}`;

function parseValue(kv) {
  try {
    const value = JSON.parse(unb64(kv.value));
    return value !== null && typeof value === "object" ? value : {};
  } catch {
    return {};
  }
}

let writeCounter = 0;
let writePrefix;
/**
 * A write id no other write has: random per module instance, counted within it. Drawn at
 * the first write, not at load: workerd allows no random values in a module's global scope.
 */
function newWriteId() {
  if (writePrefix === undefined) {
    const bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    writePrefix = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }
  return `${writePrefix}.${(writeCounter++).toString(36)}`;
}

/**
 * The writes this store sent (acquires, extends, waiting entries), by write id: when
 * each was sent and for how long. A write whose reply never came stays too, as it may
 * have been applied. Bounded: swept of expired entries, and past WRITES_MAX the oldest go
 * (a forgotten write is then timed by its lease, as another process's is).
 */
class Writes {
  #byId = new Map();
  // The latest write per (etcd key, owner), for release and extend.
  #latest = new Map();

  add(etcdKey, owner, ttlMs, sentAt, value) {
    const id = newWriteId();
    const name = `${etcdKey}\u0000${owner}`;
    const entry = { id, etcdKey, owner, until: sentAt + ttlMs, value: value?.(id), before: this.#latest.get(name) };
    this.#byId.set(id, entry);
    this.#latest.set(name, entry);
    if (this.#byId.size > WRITES_SWEEP_AT) this.#sweep();
    return entry;
  }

  /** Drops a write (void, or its hold gone); the one before it is the latest again. */
  forget(entry) {
    if (!entry) return;
    this.#byId.delete(entry.id);
    const name = `${entry.etcdKey}\u0000${entry.owner}`;
    if (this.#latest.get(name) !== entry) return;
    let before = entry.before;
    while (before && !this.#byId.has(before.id)) before = before.before;
    if (before) this.#latest.set(name, before);
    else this.#latest.delete(name);
  }

  get(id) {
    return typeof id === "string" ? this.#byId.get(id) : undefined;
  }

  latest(etcdKey, owner) {
    return this.#latest.get(`${etcdKey}\u0000${owner}`);
  }

  /** `{ state: "live", left }`, `{ state: "expired" }` (ours, TTL passed) or `{ state: "unknown" }` (not ours, or forgotten). */
  status(id) {
    const entry = this.get(id);
    if (!entry) return { state: "unknown" };
    const left = entry.until - now();
    return left > 0 ? { state: "live", left } : { state: "expired" };
  }

  #sweep() {
    const t = now();
    for (const entry of this.#byId.values()) {
      if (entry.until <= t) this.forget(entry);
      entry.before = undefined; // no chains through what the sweep keeps
    }
    for (const entry of this.#byId.values()) {
      if (this.#byId.size <= WRITES_MAX) break;
      this.forget(entry);
    }
  }
}

// -------------------------------------------------------------------------------------
// Endpoints and options

function parseEndpoint(text) {
  if (typeof text !== "string") throw invalid(`an etcd endpoint must be an http:// or https:// URL; got ${typeName(text)}`);
  let url;
  try {
    url = new URL(text);
  } catch {
    throw invalid(`an etcd endpoint must be an http:// or https:// URL; got ${JSON.stringify(text.replace(/\/\/[^@/]*@/, "//…@"))}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid(`an etcd endpoint must be an http:// or https:// URL (https for TLS); got ${JSON.stringify(url.protocol)}`);
  }
  if (url.search || url.hash) throw invalid(`an etcd endpoint takes no query or #fragment: ${JSON.stringify(`${url.origin}${url.pathname}`)}`);
  const login = url.username || url.password ? { username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) } : undefined;
  return { base: `${url.origin}${url.pathname.replace(/\/+$/, "")}`, login };
}

function parseOptions(urlOrOptions) {
  let options;
  if (typeof urlOrOptions === "string" || Array.isArray(urlOrOptions)) options = { endpoints: urlOrOptions };
  else if (urlOrOptions !== null && typeof urlOrOptions === "object") options = urlOrOptions;
  else throw invalid(`EtcdLockStore.connect() takes an etcd URL, a list of them, or an options object; got ${typeName(urlOrOptions)}`);
  checkOptionKeys(options, OPTIONS, "EtcdLockStore.connect()");
  const list = typeof options.endpoints === "string" ? [options.endpoints] : options.endpoints;
  if (!Array.isArray(list) || list.length === 0) {
    throw invalid(`endpoints must be an etcd URL or a non-empty list of them (http://host:2379, https:// for TLS); got ${typeName(options.endpoints)}`);
  }
  const parsed = list.map(parseEndpoint);
  const logins = parsed.map((p) => p.login).filter(Boolean);
  let { username, password } = options;
  if (logins.length > 0) {
    if (username !== undefined || password !== undefined) throw invalid("give the etcd login once: in the URLs or as username and password, not both");
    if (logins.some((l) => l.username !== logins[0].username || l.password !== logins[0].password)) throw invalid("the etcd URLs name different logins");
    ({ username, password } = logins[0]);
  }
  if (username !== undefined && (typeof username !== "string" || username === ""))
    throw invalid(`username must be a non-empty string; got ${typeName(username)}`);
  if (password !== undefined && typeof password !== "string") throw invalid(`password must be a string; got ${typeName(password)}`);
  if (password !== undefined && username === undefined) throw invalid("a password needs a username");
  const keyPrefix = options.keyPrefix ?? DEFAULT_PREFIX;
  if (typeof keyPrefix !== "string" || keyPrefix === "" || /[\u0000-\u001f\u007f]/.test(keyPrefix)) {
    throw invalid(
      `keyPrefix must be a non-empty string without control characters; got ${typeof keyPrefix === "string" ? JSON.stringify(keyPrefix) : typeName(keyPrefix)}`,
    );
  }
  const operationTimeoutMs = checkMs("operationTimeoutMs", options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS);
  const notifyReleases = options.notifyReleases ?? true;
  if (typeof notifyReleases !== "boolean") throw invalid(`notifyReleases must be a boolean; got ${typeName(notifyReleases)}`);
  const fetchFn = options.fetch ?? globalThis.fetch;
  if (typeof fetchFn !== "function") throw invalid(`fetch must be a function (the runtime's fetch, or one of yours); got ${typeName(options.fetch)}`);
  return {
    endpoints: parsed.map((p) => p.base),
    username,
    password: password ?? "",
    keyPrefix,
    operationTimeoutMs,
    notifyReleases,
    // Called as a plain function: a runtime's fetch may refuse another `this`.
    fetch: (...args) => fetchFn(...args),
  };
}

function checkString(name, value) {
  if (typeof value !== "string") throw invalid(`${name} must be a string; got ${typeName(value)}`);
}

/** A lease's TTL in whole seconds for a hold of `ttlMs`: rounded up (the server may raise it to its minimum). */
const leaseSeconds = (ttlMs) => Math.max(1, Math.ceil(ttlMs / 1_000));

/** An etcd error reply as a typed error: `grpc` is its gRPC status code. */
class EtcdError extends Error {
  constructor(message, grpc) {
    super(message);
    this.grpc = grpc;
  }
}

const unavailable = (message, cause) => Object.assign(new StoreUnavailableError(`locksmith: etcd: ${message}`), cause ? { cause } : {});

// Request-building helpers (the gateway's JSON for etcdserverpb messages).
const put = (key, value, lease) => ({ request_put: { key: b64(key), value: b64(value), lease, prev_kv: true } });
const del = (key) => ({ request_delete_range: { key: b64(key), prev_kv: true } });
const get = (key) => ({ request_range: { key: b64(key) } });
const ownerIs = (key, owner) => {
  const start = ownerPrefix(owner);
  const bytes = encoder.encode(start);
  bytes[bytes.length - 1] += 1; // ',' → '-'
  return [
    { key: b64(key), target: "VALUE", result: "GREATER", value: b64(start) },
    { key: b64(key), target: "VALUE", result: "LESS", value: bytesToBase64(bytes) },
  ];
};
const valueIs = (key, kv) => ({ key: b64(key), target: "VALUE", result: "EQUAL", value: kv.value });
const absent = (key) => ({ key: b64(key), target: "CREATE", result: "EQUAL", create_revision: "0" });

const firstKv = (response) => response?.response_range?.kvs?.[0];

export class EtcdLockStore {
  get [STORE_NAME]() {
    return "etcd";
  }

  /** A semaphore hold may take several permits (acquirePermit's 6th argument, kept in its entry's value). */
  get permitWeights() {
    return true;
  }

  #options;
  #endpoints;
  #current = 0;
  #token;
  #authenticating;
  #closed = false;
  #writes = new Writes();
  // Keys whose last acquire here found them held: the next one reads before it writes.
  #contended = new Set();
  // Leases to revoke, revoked in the background.
  #revoking = new Set();
  // Acquires on their way (and their clean-ups), by etcd key and owner: see #pending.
  #onTheirWay = new Map();
  // Wake-ups: listeners by `lock:key`, `semaphore:key`, `rw:key`; the watch, if open.
  #listeners = new Map();
  #watch;
  #watchRetryMs = WATCH_RETRY_MIN_MS;
  #watchTimer;
  #lingerTimer;

  /**
   * Connects to etcd: `urlOrOptions` is an `http://` or `https://` URL of a member, a list
   * of them, or `{ endpoints, keyPrefix, username, password, operationTimeoutMs,
   * notifyReleases, fetch }`. Authenticates when given a login, and checks that a member
   * answers and runs etcd 3.4 or newer.
   */
  static async connect(urlOrOptions) {
    const store = new EtcdLockStore(parseOptions(urlOrOptions));
    try {
      await store.#checkServer();
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
    this.#endpoints = options.endpoints;
    this.#current = Math.floor(Math.random() * this.#endpoints.length);
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

  /** The prefix of the etcd keys of the semaphore (`kind` "semaphore") or read-write lock ("read", "write") on `key`. */
  permitPrefix(key, kind) {
    checkString("key", key);
    return `${this.#options.keyPrefix}${checkKind(kind)}/${segment(key)}/`;
  }

  // -----------------------------------------------------------------------------------
  // Requests

  /**
   * POSTs `body` to `/v3/<path>` on a member, trying the others when one does not answer
   * or has no leader, until `deadline`. Resolves to `{ reply, uncertain }`: `uncertain` is
   * true when an earlier attempt may have been applied (it was sent and went unanswered).
   * An etcd error reply that is not about reaching the cluster rejects with an EtcdError.
   */
  async #call(path, body, deadline, { what = path, login = true } = {}) {
    if (this.#closed) throw new StoreClosedError("locksmith: the etcd store is closed");
    let uncertain = false;
    let lastError;
    let reauthenticated = false;
    const n = this.#endpoints.length;
    for (let attempt = 0; ; attempt++) {
      const left = deadline - now();
      if (left <= 0) break;
      if (attempt > 0 && attempt % n === 0) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(ROUND_PAUSE_MS, left)));
        if (deadline - now() <= 0) break;
      }
      if (this.#closed) throw new StoreClosedError("locksmith: the etcd store is closed");
      if (login && this.#options.username !== undefined && this.#token === undefined) await this.#authenticate(deadline);
      const index = this.#current;
      const endpoint = this.#endpoints[index];
      const controller = new AbortController();
      const budget = Math.min(deadline - now(), Math.max(ATTEMPT_MIN_MS, this.#options.operationTimeoutMs / ATTEMPT_SHARE));
      const timer = setTimeout(() => controller.abort(), Math.max(1, budget));
      let sent = false;
      // A fetch of the user's that ignores its signal still gives up at the attempt's end.
      const stop = new Promise((_, reject) => controller.signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
      stop.catch(noop);
      const bounded = (promise) => {
        promise.catch(noop);
        return Promise.race([promise, stop]);
      };
      try {
        const headers = { "content-type": "application/json" };
        if (login && this.#token !== undefined) headers.authorization = this.#token;
        sent = true;
        const response = await bounded(
          this.#options.fetch(`${endpoint}/v3/${path}`, {
            method: "POST",
            headers,
            body: JSON.stringify(body),
            signal: controller.signal,
          }),
        );
        const text = await bounded(response.text());
        let reply;
        try {
          reply = JSON.parse(text);
        } catch {
          if (response.status === 404)
            throw new LockStoreError(`locksmith: etcd at ${endpoint} has no /v3/${path}: EtcdLockStore needs etcd 3.4 or newer (its JSON gateway)`);
          // Not etcd's answer (a proxy's error page, a cut body): as good as none.
          uncertain ||= response.status >= 500 || response.ok;
          lastError = new Error(`HTTP ${response.status} from ${endpoint}: ${text.slice(0, 200)}`);
          this.#rotate(index);
          continue;
        }
        if (reply && typeof reply === "object" && reply.error !== undefined && reply.code !== undefined) {
          const message = String(reply.message ?? reply.error);
          const code = Number(reply.code);
          if (code === GRPC.UNAUTHENTICATED && login && this.#options.username !== undefined && !reauthenticated) {
            // The token expired (or the member restarted): log in again, once per call.
            reauthenticated = true;
            this.#token = undefined;
            attempt--;
            continue;
          }
          if (
            code === GRPC.UNAVAILABLE ||
            code === GRPC.DEADLINE_EXCEEDED ||
            code === GRPC.ABORTED ||
            /too many requests|leader changed|no leader|timed out/.test(message)
          ) {
            // Not applied yet, or maybe applied (a timeout): either way, try again.
            uncertain ||= code !== GRPC.UNAVAILABLE || /timed out|leader changed/.test(message);
            lastError = new EtcdError(message, code);
            this.#rotate(index);
            continue;
          }
          throw new EtcdError(message, code);
        }
        if (!response.ok || reply === null || typeof reply !== "object") {
          uncertain ||= response.status >= 500 || response.ok;
          lastError = new Error(`HTTP ${response.status} from ${endpoint}: ${text.slice(0, 200)}`);
          this.#rotate(index);
          continue;
        }
        return { reply, uncertain };
      } catch (err) {
        if (err instanceof EtcdError || err instanceof LockStoreError) throw err;
        // No answer: refused (never applied), or cut or timed out after sending (maybe applied).
        uncertain ||= sent && !/ECONNREFUSED|ENOTFOUND|EAI_AGAIN|connection refused/i.test(`${err?.cause?.code} ${err?.cause?.message} ${err?.message}`);
        lastError = controller.signal.aborted ? new Error(`${endpoint} did not answer within ${Math.round(budget)} ms`) : err;
        this.#rotate(index);
      } finally {
        clearTimeout(timer);
      }
    }
    throw unavailable(
      `no member answered ${what} within ${this.#options.operationTimeoutMs} ms${lastError ? ` (last: ${lastError.cause?.message ?? lastError.message})` : ""}`,
      lastError,
    );
  }

  /** Moves on from the member at `index`, unless another call did already. */
  #rotate(index) {
    if (this.#current === index) this.#current = (index + 1) % this.#endpoints.length;
  }

  /** Logs in (`/v3/auth/authenticate`); later requests carry the token. One login at a time. */
  #authenticate(deadline) {
    this.#authenticating ??= (async () => {
      const { username, password } = this.#options;
      try {
        // A login is itself a request, made without a token.
        const { reply } = await this.#call("auth/authenticate", { name: username, password }, deadline, { what: "the login", login: false });
        this.#token = reply.token;
      } catch (err) {
        if (err instanceof EtcdError) {
          throw Object.assign(new LockStoreError(`locksmith: etcd refused the login of user ${JSON.stringify(username)}: ${err.message}`), { cause: err });
        }
        throw err;
      } finally {
        this.#authenticating = undefined;
      }
    })();
    return this.#authenticating;
  }

  /** `#call`, with etcd's refusals as LockStoreError (STORE_ERROR). */
  async #request(path, body, deadline, what) {
    try {
      return await this.#call(path, body, deadline, { what });
    } catch (err) {
      throw this.#typed(err);
    }
  }

  #typed(err) {
    if (!(err instanceof EtcdError)) return err;
    let message = `locksmith: etcd: ${err.message}`;
    if (/user name is empty/.test(err.message)) message = "locksmith: etcd has authentication enabled: connect with a username and password";
    return Object.assign(new LockStoreError(message), { cause: err });
  }

  #deadline() {
    return now() + this.#options.operationTimeoutMs;
  }

  async #txn(txn, deadline, what) {
    return this.#request("kv/txn", txn, deadline, what);
  }

  /** The key's current kv, or undefined. */
  async #get(key, deadline, what) {
    const { reply } = await this.#request("kv/range", { key: b64(key) }, deadline, what);
    return reply.kvs?.[0];
  }

  /** Every kv under `prefix`, and the revision they were read at. */
  async #list(prefix, deadline, what) {
    const { reply } = await this.#request("kv/range", { key: b64(prefix), range_end: prefixEnd(prefix) }, deadline, what);
    return { kvs: reply.kvs ?? [], revision: reply.header.revision };
  }

  /** A lease for a hold of `ttlMs`: its ID (a decimal string: lease IDs exceed 2^53). */
  async #grant(ttlMs, deadline) {
    const { reply } = await this.#request("lease/grant", { TTL: leaseSeconds(ttlMs) }, deadline, "a lease grant");
    return reply.ID;
  }

  /**
   * Revokes a lease in the background (a lease no key uses any more, or an attempt's whose
   * outcome is unknown: revoking it deletes what the attempt put, and an attempt applied
   * after it fails, its lease gone). Tried again until etcd answers (done, or the lease was
   * gone already), for REVOKE_RETRY_MS at most. Resolves when it is over.
   */
  #revoke(lease) {
    if (!lease || lease === "0" || this.#closed) return Promise.resolve();
    const giveUpAt = now() + REVOKE_RETRY_MS;
    const revoking = (async () => {
      for (let pause = REVOKE_PAUSE_MIN_MS; ; pause = Math.min(REVOKE_PAUSE_MAX_MS, pause * 2)) {
        try {
          await this.#call("lease/revoke", { ID: lease }, this.#deadline(), { what: "a lease revoke" });
          return;
        } catch (err) {
          // An answer (NOT_FOUND: revoked already, or run out) ends it, as does close().
          if (err instanceof EtcdError || err instanceof LockStoreError || this.#closed || now() + pause >= giveUpAt) return;
        }
        await new Promise((resolve) => unref(setTimeout(resolve, pause)));
      }
    })();
    this.#background(revoking);
    return revoking;
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

  /** Revokes the leases of the previous kvs a transaction's puts and deletes replaced, except `keep`. */
  #revokeReplaced(reply, keep) {
    for (const r of reply.responses ?? []) {
      const prevs = r.response_put?.prev_kv ? [r.response_put.prev_kv] : (r.response_delete_range?.prev_kvs ?? []);
      for (const prev of prevs) if (prev.lease && prev.lease !== keep) this.#revoke(prev.lease);
    }
  }

  async #checkServer() {
    const { reply } = await this.#request("maintenance/status", {}, this.#deadline(), "a status request");
    const [major, minor] = String(reply.version ?? "")
      .split(".")
      .map(Number);
    if (!(major > 3 || (major === 3 && minor >= 4))) {
      throw new LockStoreError(
        `locksmith: EtcdLockStore needs etcd 3.4 or newer; ${this.#endpoints[this.#current]} runs ${reply.version ?? "an unknown version"}`,
      );
    }
    if (this.#options.username !== undefined && this.#token === undefined) await this.#authenticate(this.#deadline());
    // With authentication enabled and no login, a read says so now rather than at the first lock.
    await this.#get(`${this.#options.keyPrefix}lock/`, this.#deadline(), "a read");
  }

  /** How this store sees a lock kv: `{ owner, w, state, left }`; state "live" / "expired" / "unknown". */
  #holdOf(kv) {
    const value = parseValue(kv);
    return {
      owner: value.owner,
      role: value.role,
      limit: value.limit,
      // A semaphore entry's permits; entries written before holds had weights have none: 1.
      permits: Number.isSafeInteger(value.permits) && value.permits > 0 ? value.permits : 1,
      behind: value.behind,
      w: value.w,
      ...this.#writes.status(value.w),
    };
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
    return this.#pending(name, owner, (after) => this.#acquireLock(name, owner, ttlMs, after));
  }

  /**
   * One acquire of a plain lock, under a lease of its own. When it fails, its transaction
   * may still be applied (it went unanswered, or is stuck at a member): the lease is
   * revoked (`after.cleanup`), which deletes the key if the transaction was applied and
   * makes it fail if it comes later. Nothing else carries that lease.
   */
  async #acquireLock(name, owner, ttlMs, after) {
    const sentAt = now();
    const deadline = sentAt + this.#options.operationTimeoutMs;
    if (this.#contended.has(name)) {
      // Held at the last look: one read, no lease, while it still is.
      const kv = await this.#get(name, deadline, "acquire");
      if (kv && this.#holdOf(kv).state !== "expired") return false;
    }
    const write = this.#writes.add(name, owner, ttlMs, sentAt, (w) => lockValue(owner, ttlMs, w));
    let lease;
    let outcome; // "taken" or "refused"; undefined when it failed (and may have been applied)
    try {
      lease = await this.#grant(ttlMs, deadline);
      for (let round = 0; round < 2 && outcome === undefined; round++) {
        const { reply } = await this.#txn({ compare: [absent(name)], success: [put(name, write.value, lease)], failure: [get(name)] }, deadline, "acquire");
        if (reply.succeeded) {
          outcome = "taken";
          return Number(reply.header.revision);
        }
        const kv = firstKv(reply.responses?.[0]);
        if (kv === undefined) continue; // freed in between
        const held = this.#holdOf(kv);
        if (held.w === write.id) {
          // An earlier, unanswered attempt of this call was applied after all.
          outcome = "taken";
          return Number(kv.create_revision);
        }
        if (held.state !== "expired" || round > 0) {
          outcome = "refused";
          break;
        }
        // A hold this store set, past its TTL: over by its holder's own reckoning. Delete
        // exactly that hold, then take the key.
        const { reply: gone } = await this.#txn({ compare: [valueIs(name, kv)], success: [del(name)] }, deadline, "acquire");
        if (gone.succeeded) {
          this.#revokeReplaced(gone);
          this.#writes.forget(this.#writes.get(held.w));
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
        this.#writes.forget(write);
        this.#revoke(lease);
        this.#contend(name);
      } else if (lease !== undefined) {
        // Failed: whatever it did or will do goes with its lease.
        after.cleanup = this.#revoke(lease).then(() => this.#writes.forget(write));
      }
    }
  }

  /** Notes that `name` (a lock's key, a semaphore's prefix) was found taken: its next acquire reads first. */
  #contend(name) {
    if (this.#contended.size >= WRITES_SWEEP_AT) this.#contended.clear();
    this.#contended.add(name);
  }

  /** Frees `key` if `owner` holds it, and revokes its lease: whether it held a live hold. */
  async release(key, owner) {
    checkString("owner", owner);
    const name = this.lockKey(key);
    // An acquire of this owner still on its way (a release sent on an abort) finishes first.
    await this.#settle(name, owner, this.#deadline());
    const deadline = this.#deadline();
    const { reply, uncertain } = await this.#txn({ compare: ownerIs(name, owner), success: [del(name)], failure: [get(name)] }, deadline, "release");
    if (reply.succeeded) {
      const prev = reply.responses?.[0]?.response_delete_range?.prev_kvs?.[0];
      this.#revokeReplaced(reply);
      this.#wake(`lock:${key}`);
      const live = prev !== undefined && this.#holdOf(prev).state !== "expired";
      this.#writes.forget(this.#writes.latest(name, owner));
      return live;
    }
    // An earlier attempt went unanswered: if it deleted the hold this store knows is live,
    // this one finds the key gone (or someone else's).
    const latest = this.#writes.latest(name, owner);
    if (uncertain && latest && this.#writes.status(latest.id).state === "live") {
      const kv = firstKv(reply.responses?.[0]);
      if (kv === undefined || this.#holdOf(kv).owner !== owner) {
        this.#writes.forget(latest);
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
   */
  async extend(key, owner, ttlMs) {
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    const name = this.lockKey(key);
    const sentAt = now();
    const deadline = sentAt + this.#options.operationTimeoutMs;
    const previous = this.#writes.latest(name, owner);
    const write = this.#writes.add(name, owner, ttlMs, sentAt, (w) => lockValue(owner, ttlMs, w));
    let lease;
    let extended; // true or false once known; undefined when it failed (and may have been applied)
    try {
      // A hold this store set and timed out is not extended (someone may be taking it over):
      // a read says whether the key holds that write still, or another of this owner's.
      let expected = previous && this.#writes.status(previous.id).state !== "expired" ? b64(previous.value) : undefined;
      const [kv, granted] = await Promise.all([expected === undefined ? this.#get(name, deadline, "extend") : undefined, this.#grant(ttlMs, deadline)]);
      lease = granted;
      let found = kv;
      // Three rounds at most: each that changes nothing found another value of this owner's.
      for (let round = 0; round < 3; round++) {
        if (expected === undefined) {
          const held = found && this.#holdOf(found);
          if (held?.owner !== owner || held.state === "expired") return (extended = false);
          if (held.w === write.id) return (extended = true); // an unanswered earlier try of this call, applied
          expected = found.value;
        }
        const { reply } = await this.#txn(
          { compare: [{ key: b64(name), target: "VALUE", result: "EQUAL", value: expected }], success: [put(name, write.value, lease)], failure: [get(name)] },
          deadline,
          "extend",
        );
        if (reply.succeeded) {
          this.#revokeReplaced(reply, lease);
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
        this.#writes.forget(write);
        this.#revoke(lease);
      }
    }
  }

  /** Whether anyone holds `key` (a hold this store set and timed out counts as free). */
  async isLocked(key) {
    const kv = await this.#get(this.lockKey(key), this.#deadline(), "isLocked");
    return kv !== undefined && this.#holdOf(kv).state !== "expired";
  }

  /** Whether `owner` holds `key`. */
  async isHeldBy(key, owner) {
    checkString("owner", owner);
    const kv = await this.#get(this.lockKey(key), this.#deadline(), "isHeldBy");
    if (kv === undefined) return false;
    const held = this.#holdOf(kv);
    return held.owner === owner && held.state !== "expired";
  }

  /**
   * Milliseconds left on `owner`'s own hold of `key`, or null when not its: the time this
   * store set it for; 1 for a hold set elsewhere (held, no time vouched for). One read.
   */
  async ownerRemainingTime(key, owner) {
    checkString("owner", owner);
    const kv = await this.#get(this.lockKey(key), this.#deadline(), "ownerRemainingTime");
    if (kv === undefined) return null;
    const held = this.#holdOf(kv);
    if (held.owner !== owner) return null;
    return held.state === "live" ? Math.max(1, Math.floor(held.left)) : held.state === "unknown" ? 1 : null;
  }

  /** Milliseconds until `key`'s hold expires, or null: to the millisecond for a hold this store set, else from its lease (to the second). */
  async remainingTime(key) {
    const deadline = this.#deadline();
    const kv = await this.#get(this.lockKey(key), deadline, "remainingTime");
    return kv === undefined ? null : this.#timeLeft(kv, deadline);
  }

  async #timeLeft(kv, deadline) {
    const held = this.#holdOf(kv);
    if (held.state === "live") return Math.max(1, Math.ceil(held.left));
    if (held.state === "expired") return null;
    if (!kv.lease || kv.lease === "0") return MAX_MS;
    try {
      const { reply } = await this.#request("lease/timetolive", { ID: kv.lease }, deadline, "remainingTime");
      // A field at its default (0) is left out of the gateway's JSON.
      const seconds = Number(reply.TTL ?? 0);
      return seconds < 0 ? null : Math.max(1, seconds * 1_000);
    } catch (err) {
      if (err?.cause?.grpc === GRPC.NOT_FOUND) return null;
      throw err;
    }
  }

  // -----------------------------------------------------------------------------------
  // Permits: semaphores and read-write locks
  //
  // One key per contender, `<prefix><semaphore|rw>/<key>/<owner>`, ordered by its create
  // revision: a queue. Whether an entry is admitted depends only on the entries ahead of
  // it (semaphore: their permits and its own fit in `limit`; reader: no writer; writer:
  // none at all), and those only ever leave, so once admitted an entry stays admitted,
  // and every observer that sees the entries ahead agrees. A contender puts its entry and
  // reads the queue in one transaction; no admission waits for another. A refused
  // semaphore contender takes its entry out again (so it keeps no place: a larger request
  // can be overtaken by smaller ones that fit, as on every store); a refused reader or
  // writer keeps its place (and so keeps later readers behind a waiting writer) until it
  // gives up, when locksmith releases it.
  //
  // A semaphore entry counts its `permits` (in its value; 1 when absent) whether admitted
  // or not: a refused entry still in the queue, for the moment before its contender takes
  // it out, can refuse an entry behind it that would fit. Counting only the admitted ones
  // ahead would not keep admissions stable (an entry could lose its admission when one
  // ahead of it left and let a refused one in).

  /** The key's queue, read in a transaction's range response: entries in revision order, with whether each is admitted. */
  #queue(kvs, base, kind, limit) {
    const entries = [];
    const stale = [];
    for (const kv of kvs) {
      const entry = { ...this.#holdOf(kv), owner: unsegment(unb64(kv.key).slice(base.length)), kv, revision: BigInt(kv.create_revision) };
      (entry.state === "expired" ? stale : entries).push(entry);
    }
    entries.sort((a, b) => (a.revision < b.revision ? -1 : a.revision > b.revision ? 1 : 0));
    let writerAhead = false;
    let permitsAhead = 0;
    entries.forEach((entry, i) => {
      entry.admitted =
        kind === "semaphore"
          ? permitsAhead + entry.permits <= (typeof entry.limit === "number" ? entry.limit : (limit ?? Infinity))
          : entry.role === "write"
            ? i === 0
            : !writerAhead;
      writerAhead ||= entry.role === "write";
      permitsAhead += entry.permits;
    });
    // Holds this store set and timed out: over by their holders' own reckoning. Taken out
    // (exactly those writes), so other processes need not wait for their leases.
    for (const entry of stale) {
      const name = unb64(entry.kv.key);
      this.#background(
        this.#txn({ compare: [valueIs(name, entry.kv)], success: [del(name)] }, this.#deadline(), "a cleanup").then(({ reply }) => {
          if (reply.succeeded) {
            this.#revokeReplaced(reply);
            this.#writes.forget(this.#writes.get(entry.w));
          }
        }),
      );
    }
    return entries;
  }

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
    return this.#pending(entryKey, owner, (after) => this.#acquireEntry(key, owner, ttlMs, kind, limit, weight, base, entryKey, after));
  }

  /**
   * One acquirePermit, under a lease of its own. Its transaction puts the entry only where
   * it finds what this call expects there (nothing, or the exact entry an earlier attempt
   * of this owner left waiting), so a transaction applied late, after its caller gave up,
   * finds something else and changes nothing: it cannot move another attempt's entry to
   * its own, older lease (whose end would delete that entry before its holder's deadline).
   * When the call fails, its lease is revoked (`after.cleanup`): that deletes an entry it
   * put, and a transaction of it applied later fails, its lease gone.
   */
  async #acquireEntry(key, owner, ttlMs, kind, limit, weight, base, entryKey, after) {
    const sentAt = now();
    const deadline = sentAt + this.#options.operationTimeoutMs;
    // A semaphore entry of one permit is written as before weights, so earlier versions read it alike.
    const value = (w) =>
      JSON.stringify(kind === "semaphore" ? { role: kind, ttl: ttlMs, limit, ...(weight > 1 && { permits: weight }), w } : { role: kind, ttl: ttlMs, w });
    // A waiting entry this store put for this owner (an earlier attempt of the same wait)
    // keeps its place (a put keeps a key's create revision), and every attempt puts it
    // again under a lease granted in this call: an attempt that admits it answers for a
    // hold the server keeps at least the TTL from now, which is what the holder's own
    // deadline counts from. (Keeping the earlier lease let a hold admitted on it expire
    // up to half a TTL before that deadline.) The put compares the entry's exact value
    // (its write id): first the last one this store wrote for it, then the one it finds.
    if (kind === "semaphore" && this.#contended.has(base)) {
      // Full at the last look: one read, and no entry (which others would count) while it still is.
      const { kvs } = await this.#list(base, deadline, "acquirePermit");
      const queue = this.#queue(kvs, base, kind, limit);
      // An entry put now would be last: admitted if every entry's permits and its own fit.
      if (queue.reduce((sum, e) => sum + e.permits, 0) + weight > limit && !queue.some((e) => e.owner === owner)) return false;
    }
    // A semaphore's entries are taken out when refused: expect none. A reader's or writer's waits in the queue.
    const previous = kind === "semaphore" ? undefined : this.#writes.latest(entryKey, owner);
    const write = this.#writes.add(entryKey, owner, ttlMs, sentAt, value);
    let lease;
    let outcome; // "taken", "refused" (entry out again) or "waiting" (entry kept); undefined: failed
    try {
      lease = await this.#grant(ttlMs, deadline);
      const readQueue = { request_range: { key: b64(base), range_end: prefixEnd(base) } };
      let expected = previous === undefined ? undefined : b64(previous.value);
      // Four rounds at most: each that changes nothing found something else, and says what.
      for (let round = 0; round < 4; round++) {
        const compare = expected === undefined ? absent(entryKey) : { key: b64(entryKey), target: "VALUE", result: "EQUAL", value: expected };
        const { reply } = await this.#txn(
          { compare: [compare], success: [put(entryKey, write.value, lease), readQueue], failure: [readQueue] },
          deadline,
          "acquirePermit",
        );
        const kvs = reply.responses?.at(-1)?.response_range?.kvs ?? [];
        if (reply.succeeded) {
          this.#revokeReplaced(reply, lease);
        } else {
          // Not what this call expected: nothing written. Unless it is this call's own
          // entry (an unanswered earlier try of it, applied), expect what is there now.
          const found = kvs.find((kv) => unb64(kv.key) === entryKey);
          if (found === undefined || parseValue(found).w !== write.id) {
            expected = found?.value;
            continue;
          }
        }
        const queue = this.#queue(kvs, base, kind, limit);
        const mine = queue.find((e) => e.owner === owner);
        if (mine === undefined) continue; // gone meanwhile: put it again
        if (kind === "semaphore") {
          const other = queue.find((e) => e !== mine && typeof e.limit === "number" && e.limit !== limit && e.revision < mine.revision);
          if (other) {
            outcome = "refused";
            await this.#drop(entryKey, mine.kv, deadline);
            throw invalid(
              `semaphore ${JSON.stringify(key)} is held with limit ${other.limit}; this handle asks for ${limit}: every handle of a semaphore must use the same limit`,
            );
          }
        }
        if (mine.admitted) {
          outcome = "taken";
          return Number(mine.kv.create_revision);
        }
        if (kind === "semaphore") {
          outcome = "refused";
          await this.#drop(entryKey, mine.kv, deadline);
        } else {
          outcome = "waiting";
        }
        return false;
      }
      throw unavailable(`acquirePermit on ${JSON.stringify(key)}: its entry kept changing before the queue could be read`);
    } catch (err) {
      if (err?.cause?.grpc === GRPC.NOT_FOUND) throw unavailable("the lease of this acquirePermit ran out before its transaction was applied", err);
      throw err;
    } finally {
      if (kind === "semaphore" && outcome === "taken") this.#contended.delete(base);
      if (kind === "semaphore" && outcome === "refused") this.#contend(base);
      if (outcome === "refused") {
        this.#writes.forget(write);
        if (lease !== undefined) after.cleanup = this.#revoke(lease);
      } else if (outcome === undefined && lease !== undefined) {
        // Failed: whatever it did or will do goes with its lease.
        after.cleanup = this.#revoke(lease).then(() => this.#writes.forget(write));
      }
    }
  }

  /** Deletes the entry `entryKey` (this owner's) if it is still exactly `kv`, and revokes its lease. */
  async #drop(entryKey, kv, deadline) {
    const { reply } = await this.#txn({ compare: [valueIs(entryKey, kv)], success: [del(entryKey)] }, deadline, "acquirePermit");
    this.#revokeReplaced(reply);
  }

  /** Drops `owner`'s entry on `key` (a hold, or a place in the queue): whether it was a live hold. */
  async releasePermit(key, owner, kind) {
    checkString("owner", owner);
    const family = checkKind(kind);
    const base = this.permitPrefix(key, kind);
    const entryKey = `${base}${segment(owner)}`;
    // An acquire of this owner still on its way (a release sent on an abort) finishes first.
    await this.#settle(entryKey, owner, this.#deadline());
    const { reply, uncertain } = await this.#txn(
      { success: [{ request_range: { key: b64(base), range_end: prefixEnd(base) } }, del(entryKey)] },
      this.#deadline(),
      "releasePermit",
    );
    const kvs = reply.responses?.[0]?.response_range?.kvs ?? [];
    const deleted = reply.responses?.[1]?.response_delete_range?.prev_kvs?.[0];
    this.#revokeReplaced(reply);
    const latest = this.#writes.latest(entryKey, owner);
    if (deleted) {
      this.#wakeFamily(family, key);
      this.#writes.forget(latest);
      return this.#queue(kvs, base, kind).find((e) => e.owner === owner)?.admitted === true;
    }
    // An earlier, unanswered attempt may have deleted the hold this store knows is live.
    if (uncertain && latest && this.#writes.status(latest.id).state === "live") {
      this.#writes.forget(latest);
      return true;
    }
    return false;
  }

  /** Re-puts `owner`'s admitted, live entry under a new lease of `ttlMs`: its place (create revision) stays. */
  async extendPermit(key, owner, ttlMs, kind) {
    checkString("owner", owner);
    checkMs("ttlMs", ttlMs);
    checkKind(kind);
    const base = this.permitPrefix(key, kind);
    const entryKey = `${base}${segment(owner)}`;
    const sentAt = now();
    const deadline = sentAt + this.#options.operationTimeoutMs;
    const [first, lease] = await Promise.all([this.#list(base, deadline, "extendPermit"), this.#grant(ttlMs, deadline)]);
    let kvs = first.kvs;
    // Twice at most: a concurrent extend of the same hold changes it between read and write.
    for (let round = 0; round < 2; round++) {
      const mine = this.#queue(kvs, base, kind).find((e) => e.owner === owner);
      if (!mine?.admitted) break;
      const value = parseValue(mine.kv);
      const write = this.#writes.add(entryKey, owner, ttlMs, sentAt, (w) => JSON.stringify({ ...value, ttl: ttlMs, w }));
      const { reply } = await this.#txn({ compare: [valueIs(entryKey, mine.kv)], success: [put(entryKey, write.value, lease)] }, deadline, "extendPermit");
      if (reply.succeeded) {
        this.#revokeReplaced(reply, lease);
        return true;
      }
      this.#writes.forget(write);
      ({ kvs } = await this.#list(base, deadline, "extendPermit"));
    }
    this.#revoke(lease);
    return false;
  }

  /** How many permits of `key` are held (a semaphore's admitted entries' permits; readers, or one writer): its admitted entries. */
  async countPermits(key, kind) {
    const base = this.permitPrefix(key, kind);
    const { kvs } = await this.#list(base, this.#deadline(), "countPermits");
    return this.#queue(kvs, base, kind).reduce((sum, e) => (e.admitted ? sum + e.permits : sum), 0);
  }

  /** Milliseconds left of `owner`'s permit, or null (1 for a permit set elsewhere: held, no time vouched for). */
  async permitRemainingTime(key, owner, kind) {
    checkString("owner", owner);
    const base = this.permitPrefix(key, kind);
    const { kvs } = await this.#list(base, this.#deadline(), "permitRemainingTime");
    const mine = this.#queue(kvs, base, kind).find((e) => e.owner === owner);
    if (!mine?.admitted) return null;
    return mine.state === "live" ? Math.max(1, Math.floor(mine.left)) : 1;
  }

  /** Runs `promise` in the background; close() waits for it. */
  #background(promise) {
    const done = promise.catch(noop).finally(() => this.#revoking.delete(done));
    this.#revoking.add(done);
  }

  // -----------------------------------------------------------------------------------
  // Release wake-ups: one watch over the prefix

  /** Calls `listener` when `key` may have been released; returns the function that stops it. */
  onRelease(key, listener, kind) {
    try {
      if (this.#closed || typeof listener !== "function" || typeof key !== "string") return noop;
      const name = kind === undefined ? `lock:${key}` : `${checkKind(kind)}:${key}`;
      let listeners = this.#listeners.get(name);
      if (listeners === undefined) this.#listeners.set(name, (listeners = new Set()));
      const entry = { listener };
      listeners.add(entry);
      clearTimeout(this.#lingerTimer);
      this.#lingerTimer = undefined;
      this.#startWatch();
      return () => {
        listeners.delete(entry);
        if (listeners.size === 0 && this.#listeners.get(name) === listeners) this.#listeners.delete(name);
        if (this.#listeners.size === 0 && this.#lingerTimer === undefined) {
          this.#lingerTimer = unref(
            setTimeout(() => {
              this.#lingerTimer = undefined;
              if (this.#listeners.size === 0) this.#stopWatch();
            }, WATCH_LINGER_MS),
          );
        }
      };
    } catch {
      return noop;
    }
  }

  #wake(name) {
    for (const { listener } of [...(this.#listeners.get(name) ?? [])]) {
      try {
        listener();
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  #wakeFamily(family, key) {
    this.#wake(`${family}:${key}`);
  }

  #wakeAll() {
    for (const name of [...this.#listeners.keys()]) this.#wake(name);
  }

  /** The listener name an etcd key's deletion wakes, if any. */
  #nameOf(etcdKey) {
    const { keyPrefix } = this.#options;
    if (!etcdKey.startsWith(keyPrefix)) return undefined;
    const rest = etcdKey.slice(keyPrefix.length);
    if (rest.startsWith("lock/")) return `lock:${unsegment(rest.slice(5))}`;
    for (const family of ["semaphore", "rw"]) {
      if (rest.startsWith(`${family}/`)) {
        const inner = rest.slice(family.length + 1);
        const slash = inner.indexOf("/");
        if (slash > 0) return `${family}:${unsegment(inner.slice(0, slash))}`;
      }
    }
    return undefined;
  }

  #startWatch() {
    if (this.#watch !== undefined || this.#watchTimer !== undefined || this.#closed || !this.#options.notifyReleases) return;
    const index = this.#current;
    const endpoint = this.#endpoints[index];
    const controller = new AbortController();
    const watch = { controller, probe: undefined };
    this.#watch = watch;
    const ended = () => {
      clearInterval(watch.probe);
      if (this.#watch !== watch) return;
      this.#watch = undefined;
      if (this.#closed || this.#listeners.size === 0) return;
      // Down: waiters poll at their retryDelay until it is back; try another member.
      this.#rotate(index);
      const delay = this.#watchRetryMs;
      this.#watchRetryMs = Math.min(WATCH_RETRY_MAX_MS, delay * 2);
      this.#watchTimer = unref(
        setTimeout(() => {
          this.#watchTimer = undefined;
          this.#startWatch();
        }, delay),
      );
    };
    // A member that stops answering (stopped, cut off) sends nothing on the stream either:
    // probe it, and move on when it does not answer.
    watch.probe = unref(
      setInterval(() => {
        const probe = new AbortController();
        const timer = setTimeout(() => probe.abort(), WATCH_PROBE_TIMEOUT_MS);
        this.#options
          .fetch(`${endpoint}/v3/maintenance/status`, { method: "POST", headers: this.#headers(), body: "{}", signal: probe.signal })
          .then((r) => r.text())
          .catch(() => controller.abort())
          .finally(() => clearTimeout(timer));
      }, WATCH_PROBE_MS),
    );
    (async () => {
      const prefix = this.#options.keyPrefix;
      const body = JSON.stringify({ create_request: { key: b64(prefix), range_end: prefixEnd(prefix), filters: ["NOPUT"] } });
      if (this.#options.username !== undefined && this.#token === undefined) await this.#authenticate(this.#deadline());
      const headers = { ...this.#headers(), "grpc-metadata-hasleader": "true" };
      const response = await this.#options.fetch(`${endpoint}/v3/watch`, { method: "POST", headers, body, signal: controller.signal });
      if (!response.ok || !response.body) throw new Error(`watch: HTTP ${response.status}`);
      const reader = response.body.getReader();
      const text = new TextDecoder();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffered += text.decode(value, { stream: true });
        let newline;
        while ((newline = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (line) this.#onWatchMessage(JSON.parse(line), watch);
        }
      }
    })()
      .catch(() => {})
      .finally(ended);
  }

  #onWatchMessage(message, watch) {
    if (message.error) {
      if (message.error.http_code === 401 || /auth token/.test(String(message.error.message))) this.#token = undefined;
      watch.controller.abort();
      return;
    }
    const result = message.result ?? {};
    if (result.canceled) {
      watch.controller.abort();
      return;
    }
    if (result.created) {
      // Releases while no watch was open were missed: every waiter tries again.
      this.#watchRetryMs = WATCH_RETRY_MIN_MS;
      this.#wakeAll();
    }
    for (const event of result.events ?? []) {
      if (event.type !== "DELETE") continue;
      const name = this.#nameOf(unb64(event.kv?.key));
      if (name !== undefined) this.#wake(name);
    }
  }

  #headers() {
    return this.#token !== undefined ? { "content-type": "application/json", authorization: this.#token } : { "content-type": "application/json" };
  }

  #stopWatch() {
    clearTimeout(this.#watchTimer);
    this.#watchTimer = undefined;
    const watch = this.#watch;
    this.#watch = undefined;
    if (watch) {
      clearInterval(watch.probe);
      watch.controller.abort();
    }
  }

  // -----------------------------------------------------------------------------------
  // For the `locksmith` command: what is held, and freeing it whoever holds it

  /**
   * The holds under the prefix whose names `match(name)` accepts: `[{ key, kind, owner,
   * remainingMs, fencingToken, etcdKey, kv }]` (plain locks, and the admitted entries of
   * semaphores and read-write locks; waiting entries hold nothing). Time left comes from
   * the leases, in whole seconds.
   */
  async [ETCD_ADMIN_LIST](match) {
    const deadline = this.#deadline();
    const { keyPrefix } = this.#options;
    const { kvs } = await this.#list(keyPrefix, deadline, "list");
    const sets = new Map();
    const holds = [];
    for (const kv of kvs) {
      const rest = unb64(kv.key).slice(keyPrefix.length);
      if (rest.startsWith("lock/")) {
        const key = unsegment(rest.slice(5));
        if (match(key)) holds.push({ key, kind: "lock", owner: parseValue(kv).owner, fencingToken: Number(kv.create_revision), etcdKey: unb64(kv.key), kv });
        continue;
      }
      const family = ["semaphore", "rw"].find((f) => rest.startsWith(`${f}/`));
      const slash = family ? rest.indexOf("/", family.length + 1) : -1;
      if (slash < 0) continue;
      const key = unsegment(rest.slice(family.length + 1, slash));
      if (!match(key)) continue;
      const name = `${family}/${key}`;
      if (!sets.has(name)) sets.set(name, { family, key, kvs: [] });
      sets.get(name).kvs.push(kv);
    }
    for (const { family, key, kvs: entries } of sets.values()) {
      const kind = family === "semaphore" ? "semaphore" : "read";
      const base = this.permitPrefix(key, kind);
      for (const e of this.#queue(entries, base, kind)) {
        if (e.admitted)
          holds.push({
            key,
            kind: family === "semaphore" ? "semaphore" : e.role,
            owner: e.owner,
            ...(family === "semaphore" && { permits: e.permits }),
            fencingToken: Number(e.kv.create_revision),
            etcdKey: unb64(e.kv.key),
            kv: e.kv,
          });
      }
    }
    await Promise.all(
      holds.map(async (h) => {
        h.remainingMs = await this.#timeLeft(h.kv, deadline);
      }),
    );
    return holds.filter((h) => h.remainingMs !== null);
  }

  /** Deletes every hold of `key` (its lock, its admitted permits) whoever holds it, in one transaction; answers what it deleted. */
  async [ETCD_ADMIN_RELEASE](key) {
    for (let round = 0; round < 3; round++) {
      const holds = await this[ETCD_ADMIN_LIST]((name) => name === key);
      if (holds.length === 0) return [];
      // Exactly these: none changed since they were listed.
      const { reply } = await this.#txn(
        { compare: holds.map((h) => valueIs(h.etcdKey, h.kv)), success: holds.map((h) => del(h.etcdKey)) },
        this.#deadline(),
        "release",
      );
      if (reply.succeeded) {
        this.#revokeReplaced(reply);
        return holds;
      }
    }
    throw unavailable(`the holds of ${JSON.stringify(key)} kept changing while they were being released`);
  }

  // -----------------------------------------------------------------------------------

  /**
   * Releases the holds this process took through the store (within `timeoutMs`, 2 s by
   * default; `keepHolds: true` leaves them to their leases), then stops the watch; later
   * calls fail with StoreClosedError.
   */
  async close(options) {
    const released = await releaseHolds(this, options, "EtcdLockStore");
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#lingerTimer);
    this.#stopWatch();
    this.#listeners.clear();
    await Promise.all([...this.#revoking]);
    released.check();
  }
}
