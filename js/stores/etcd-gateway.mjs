// EtcdLockStore's way to etcd: its options (members' URLs, a login, timeouts, the fetch
// to use), and the gateway that POSTs requests to `/v3/…` on a member, moving to another
// when one does not answer or has no leader, logs in, types etcd's refusals, and revokes
// leases in the background. What the requests carry is built in js/stores/etcd-codec.mjs.
import { checkMs } from "../api/checks.mjs";
import { DATABASE_OPERATION_TIMEOUT_MS } from "../api/defaults.mjs";
import { LockStoreError, StoreClosedError, StoreUnavailableError, checkOptionKeys, invalid, typeName } from "../api/errors.mjs";
import { b64, leaseSeconds, noop, now, prefixEnd, unref } from "./etcd-codec.mjs";

const OPTIONS = ["endpoints", "keyPrefix", "username", "password", "operationTimeoutMs", "notifyReleases", "fetch"];
const DEFAULT_PREFIX = "locksmith/";
// One HTTP attempt on one member gets at most this share of a call's time, so a member
// that accepts and never answers (stopped, partitioned) leaves time for another.
const ATTEMPT_SHARE = 3;
const ATTEMPT_MIN_MS = 1_000;
// After every member failed once in a call, pause this long before the next round.
const ROUND_PAUSE_MS = 50;
// A lease revoke that goes unanswered is tried again, after pauses growing to the
// longest, for this long at most (by then the cluster was unreachable throughout).
const REVOKE_PAUSE_MIN_MS = 50;
const REVOKE_PAUSE_MAX_MS = 500;
const REVOKE_RETRY_MS = 60_000;
// gRPC status codes the gateway reports (`code` in its error body).
export const GRPC = {
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

export function parseOptions(urlOrOptions) {
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
  const operationTimeoutMs = checkMs("operationTimeoutMs", options.operationTimeoutMs ?? DATABASE_OPERATION_TIMEOUT_MS);
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

/** An etcd error reply as a typed error: `grpc` is its gRPC status code. */
class EtcdError extends Error {
  constructor(message, grpc) {
    super(message);
    this.grpc = grpc;
  }
}

export const unavailable = (message, cause) => Object.assign(new StoreUnavailableError(`locksmith: etcd: ${message}`), cause ? { cause } : {});

// -------------------------------------------------------------------------------------
// Requests

/**
 * The members of one store and how to reach them: the member in use (`current`), the
 * login token, and the work left in the background (lease revokes, clean-ups), which
 * `close()` waits for. Once closed, every request fails with StoreClosedError.
 */
export class EtcdGateway {
  #options;
  #endpoints;
  #current = 0;
  #token;
  #authenticating;
  #closed = false;
  // Leases to revoke and other clean-ups, run in the background.
  #background = new Set();

  /** `options` as parseOptions() answers them. */
  constructor(options) {
    this.#options = options;
    this.#endpoints = options.endpoints;
    this.#current = Math.floor(Math.random() * this.#endpoints.length);
  }

  get closed() {
    return this.#closed;
  }

  /** The member in use: `{ index, endpoint }`. */
  get current() {
    return { index: this.#current, endpoint: this.#endpoints[this.#current] };
  }

  /** Whether a login is due before the next request (a username, and no token yet or any more). */
  get loginDue() {
    return this.#options.username !== undefined && this.#token === undefined;
  }

  /** Drops the login token (etcd said it is no longer good): the next request logs in again. */
  forgetToken() {
    this.#token = undefined;
  }

  /** The headers of a request outside `call()` (the watch): JSON, and the token if any. */
  headers() {
    return this.#token !== undefined ? { "content-type": "application/json", authorization: this.#token } : { "content-type": "application/json" };
  }

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
      if (login && this.#options.username !== undefined && this.#token === undefined) await this.authenticate(deadline);
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
          this.rotate(index);
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
            this.rotate(index);
            continue;
          }
          throw new EtcdError(message, code);
        }
        if (!response.ok || reply === null || typeof reply !== "object") {
          uncertain ||= response.status >= 500 || response.ok;
          lastError = new Error(`HTTP ${response.status} from ${endpoint}: ${text.slice(0, 200)}`);
          this.rotate(index);
          continue;
        }
        return { reply, uncertain };
      } catch (err) {
        if (err instanceof EtcdError || err instanceof LockStoreError) throw err;
        // No answer: refused (never applied), or cut or timed out after sending (maybe applied).
        uncertain ||= sent && !/ECONNREFUSED|ENOTFOUND|EAI_AGAIN|connection refused/i.test(`${err?.cause?.code} ${err?.cause?.message} ${err?.message}`);
        lastError = controller.signal.aborted ? new Error(`${endpoint} did not answer within ${Math.round(budget)} ms`) : err;
        this.rotate(index);
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
  rotate(index) {
    if (this.#current === index) this.#current = (index + 1) % this.#endpoints.length;
  }

  /** Logs in (`/v3/auth/authenticate`); later requests carry the token. One login at a time. */
  authenticate(deadline) {
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
  async request(path, body, deadline, what) {
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

  deadline() {
    return now() + this.#options.operationTimeoutMs;
  }

  async txn(txn, deadline, what) {
    return this.request("kv/txn", txn, deadline, what);
  }

  /** The key's current kv, or undefined. */
  async get(key, deadline, what) {
    const { reply } = await this.request("kv/range", { key: b64(key) }, deadline, what);
    return reply.kvs?.[0];
  }

  /** Every kv under `prefix`, and the revision they were read at. */
  async list(prefix, deadline, what) {
    const { reply } = await this.request("kv/range", { key: b64(prefix), range_end: prefixEnd(prefix) }, deadline, what);
    return { kvs: reply.kvs ?? [], revision: reply.header.revision };
  }

  /** A lease for a hold of `ttlMs`: its ID (a decimal string: lease IDs exceed 2^53). */
  async grant(ttlMs, deadline) {
    return (await this.lease(ttlMs, deadline)).id;
  }

  /**
   * `grant()` answering `{ id, until }`: `until` is when the lease ends at the earliest, on
   * this process's clock (the server's TTL, which may be raised to its minimum, counted
   * from before the request was sent: the server granted it later).
   */
  async lease(ttlMs, deadline) {
    const sentAt = now();
    const { reply } = await this.request("lease/grant", { TTL: leaseSeconds(ttlMs) }, deadline, "a lease grant");
    return { id: reply.ID, until: sentAt + Number(reply.TTL ?? leaseSeconds(ttlMs)) * 1_000 };
  }

  /**
   * Renews `lease` to its whole TTL (one keep-alive, which etcd's leader answers without
   * a write): until when it lasts at the earliest on this process's clock, or undefined
   * when it is gone (revoked, run out) or the answer is not one.
   */
  async keepAlive(lease, deadline) {
    const sentAt = now();
    const { reply } = await this.request("lease/keepalive", { ID: lease }, deadline, "a lease keep-alive");
    // A stream's answer: `{ result }`, or `{ error }` (which the request did not type).
    const ttl = Number(reply.result?.TTL ?? 0);
    return reply.result?.ID === lease && ttl > 0 ? sentAt + ttl * 1_000 : undefined;
  }

  /**
   * Revokes a lease in the background (a lease no key uses any more, or an attempt's whose
   * outcome is unknown: revoking it deletes what the attempt put, and an attempt applied
   * after it fails, its lease gone). Tried again until etcd answers (done, or the lease was
   * gone already), for REVOKE_RETRY_MS at most. Resolves when it is over.
   */
  revoke(lease) {
    if (!lease || lease === "0" || this.#closed) return Promise.resolve();
    const giveUpAt = now() + REVOKE_RETRY_MS;
    const revoking = (async () => {
      for (let pause = REVOKE_PAUSE_MIN_MS; ; pause = Math.min(REVOKE_PAUSE_MAX_MS, pause * 2)) {
        try {
          await this.#call("lease/revoke", { ID: lease }, this.deadline(), { what: "a lease revoke" });
          return;
        } catch (err) {
          // An answer (NOT_FOUND: revoked already, or run out) ends it, as does close().
          if (err instanceof EtcdError || err instanceof LockStoreError || this.#closed || now() + pause >= giveUpAt) return;
        }
        await new Promise((resolve) => unref(setTimeout(resolve, pause)));
      }
    })();
    this.background(revoking);
    return revoking;
  }

  /** Revokes the leases of the previous kvs a transaction's puts and deletes replaced, except `keep`. */
  revokeReplaced(reply, keep) {
    for (const r of reply.responses ?? []) {
      const prevs = r.response_put?.prev_kv ? [r.response_put.prev_kv] : (r.response_delete_range?.prev_kvs ?? []);
      for (const prev of prevs) if (prev.lease && prev.lease !== keep) this.revoke(prev.lease);
    }
  }

  /** Checks that a member answers and runs etcd 3.4 or newer, logs in, and reads once (to learn of authentication now). */
  async checkServer() {
    const { reply } = await this.request("maintenance/status", {}, this.deadline(), "a status request");
    const [major, minor] = String(reply.version ?? "")
      .split(".")
      .map(Number);
    if (!(major > 3 || (major === 3 && minor >= 4))) {
      throw new LockStoreError(
        `locksmith: EtcdLockStore needs etcd 3.4 or newer; ${this.#endpoints[this.#current]} runs ${reply.version ?? "an unknown version"}`,
      );
    }
    if (this.#options.username !== undefined && this.#token === undefined) await this.authenticate(this.deadline());
    // With authentication enabled and no login, a read says so now rather than at the first lock.
    await this.get(`${this.#options.keyPrefix}lock/`, this.deadline(), "a read");
  }

  /** Runs `promise` in the background; close() waits for it. */
  background(promise) {
    const done = promise.catch(noop).finally(() => this.#background.delete(done));
    this.#background.add(done);
  }

  /** Fails every later request with StoreClosedError; resolves once the background work is over. */
  async close() {
    this.#closed = true;
    await Promise.all([...this.#background]);
  }
}
