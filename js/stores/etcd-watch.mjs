// EtcdLockStore's release wake-ups: one watch over the store's prefix (streamed, DELETE
// events only: releases, leases run out, places in fair queues given up, run out or
// granted), opened while anyone waits and kept a little after the last waiter left;
// while it is down, waiters poll at their retryDelay, and when it opens again every
// waiter tries again (releases in between were missed).
import { checkKind } from "../api/checks.mjs";
import { b64, noop, prefixEnd, unb64, unref, unsegment } from "./etcd-codec.mjs";

// Reconnect backoff, how often the watch's member is probed, how long the watch stays
// open after the last waiter left.
const WATCH_RETRY_MIN_MS = 100;
const WATCH_RETRY_MAX_MS = 2_000;
const WATCH_PROBE_MS = 2_000;
const WATCH_PROBE_TIMEOUT_MS = 1_000;
const WATCH_LINGER_MS = 1_000;
// The deletions remembered by name (see `quiet`): past this many, forgotten.
const DELETIONS_MAX = 10_000;

/**
 * The listeners of one store, by `lock:<key>`, `semaphore:<key>` or `rw:<key>`, and the
 * watch that wakes them, reached through the store's gateway.
 */
export class ReleaseWatch {
  #gateway;
  #options;
  #listeners = new Map();
  #watch;
  #retryMs = WATCH_RETRY_MIN_MS;
  #retryTimer;
  #lingerTimer;
  // While the watch is open: the revision it was opened at (every deletion after it is
  // streamed, in order). Undefined while it is down.
  #since;
  // The revision of the latest deletion streamed, by listener name (`lock:<key>`, ...).
  #deletedAt = new Map();

  /** `options`: the store's (`keyPrefix`, `notifyReleases`, `fetch`). */
  constructor(gateway, options) {
    this.#gateway = gateway;
    this.#options = options;
  }

  /** Calls `listener` when `key` may have been released; returns the function that stops it. */
  on(key, listener, kind) {
    try {
      if (this.#gateway.closed || typeof listener !== "function" || typeof key !== "string") return noop;
      const name = kind === undefined ? `lock:${key}` : `${checkKind(kind)}:${key}`;
      let listeners = this.#listeners.get(name);
      if (listeners === undefined) this.#listeners.set(name, (listeners = new Set()));
      const entry = { listener };
      listeners.add(entry);
      clearTimeout(this.#lingerTimer);
      this.#lingerTimer = undefined;
      this.#start();
      return () => {
        listeners.delete(entry);
        if (listeners.size === 0 && this.#listeners.get(name) === listeners) this.#listeners.delete(name);
        if (this.#listeners.size === 0 && this.#lingerTimer === undefined) {
          this.#lingerTimer = unref(
            setTimeout(() => {
              this.#lingerTimer = undefined;
              if (this.#listeners.size === 0) this.#stop();
            }, WATCH_LINGER_MS),
          );
        }
      };
    } catch {
      return noop;
    }
  }

  /** Calls the listeners of `name` (`lock:<key>`, `semaphore:<key>`, `rw:<key>`). */
  wake(name) {
    for (const { listener } of [...(this.#listeners.get(name) ?? [])]) {
      try {
        listener();
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  #wakeAll() {
    for (const name of [...this.#listeners.keys()]) this.wake(name);
  }

  /**
   * Whether the watch has been open since `revision` (a decimal string, a read's) or
   * before, and has streamed no deletion that wakes `name` after it. A deletion after
   * that read that is still on its way wakes `name`'s listeners when it comes: a fair
   * waiter refused at that read may be refused again until then without asking etcd
   * (js/stores/etcd-fair.mjs).
   */
  quiet(name, revision) {
    if (this.#since === undefined || this.#watch === undefined) return false;
    const read = BigInt(revision);
    if (this.#since > read) return false;
    const deleted = this.#deletedAt.get(name);
    return deleted === undefined || deleted <= read;
  }

  /** The listener name an etcd key's deletion wakes, if any. */
  #nameOf(etcdKey) {
    const { keyPrefix } = this.#options;
    if (!etcdKey.startsWith(keyPrefix)) return undefined;
    const rest = etcdKey.slice(keyPrefix.length);
    if (rest.startsWith("lock/")) return `lock:${unsegment(rest.slice(5))}`;
    // A place in a fair queue (given up, run out, granted): that lock's or semaphore's waiters.
    const queued = rest.startsWith("queue/") ? rest.slice(6) : undefined;
    const path = queued ?? rest;
    for (const family of queued === undefined ? ["semaphore", "rw"] : ["lock", "semaphore"]) {
      if (path.startsWith(`${family}/`)) {
        const inner = path.slice(family.length + 1);
        const slash = inner.indexOf("/");
        if (slash > 0) return `${family}:${unsegment(inner.slice(0, slash))}`;
      }
    }
    return undefined;
  }

  #start() {
    if (this.#watch !== undefined || this.#retryTimer !== undefined || this.#gateway.closed || !this.#options.notifyReleases) return;
    const { index, endpoint } = this.#gateway.current;
    const controller = new AbortController();
    const watch = { controller, probe: undefined };
    this.#watch = watch;
    const ended = () => {
      clearInterval(watch.probe);
      if (this.#watch !== watch) return;
      this.#watch = undefined;
      this.#since = undefined;
      if (this.#gateway.closed || this.#listeners.size === 0) return;
      // Down: waiters poll at their retryDelay until it is back; try another member.
      this.#gateway.rotate(index);
      const delay = this.#retryMs;
      this.#retryMs = Math.min(WATCH_RETRY_MAX_MS, delay * 2);
      this.#retryTimer = unref(
        setTimeout(() => {
          this.#retryTimer = undefined;
          this.#start();
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
          .fetch(`${endpoint}/v3/maintenance/status`, { method: "POST", headers: this.#gateway.headers(), body: "{}", signal: probe.signal })
          .then((r) => r.text())
          .catch(() => controller.abort())
          .finally(() => clearTimeout(timer));
      }, WATCH_PROBE_MS),
    );
    (async () => {
      const prefix = this.#options.keyPrefix;
      const body = JSON.stringify({ create_request: { key: b64(prefix), range_end: prefixEnd(prefix), filters: ["NOPUT"] } });
      if (this.#gateway.loginDue) await this.#gateway.authenticate(this.#gateway.deadline());
      const headers = { ...this.#gateway.headers(), "grpc-metadata-hasleader": "true" };
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
          if (line) this.#onMessage(JSON.parse(line), watch);
        }
      }
    })()
      .catch(() => {})
      .finally(ended);
  }

  #onMessage(message, watch) {
    if (message.error) {
      if (message.error.http_code === 401 || /auth token/.test(String(message.error.message))) this.#gateway.forgetToken();
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
      this.#retryMs = WATCH_RETRY_MIN_MS;
      if (this.#watch === watch) {
        this.#since = BigInt(result.header?.revision ?? "0");
        this.#deletedAt.clear();
      }
      this.#wakeAll();
    }
    for (const event of result.events ?? []) {
      if (event.type !== "DELETE") continue;
      const name = this.#nameOf(unb64(event.kv?.key));
      if (name === undefined) continue;
      const at = BigInt(event.kv?.mod_revision ?? "0");
      if (this.#deletedAt.size >= DELETIONS_MAX && !this.#deletedAt.has(name)) {
        // Forgotten: as if the watch opened now (reads before it ask etcd again).
        this.#deletedAt.clear();
        this.#since = at;
      }
      if (!(this.#deletedAt.get(name) >= at)) this.#deletedAt.set(name, at);
      this.wake(name);
    }
  }

  #stop() {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    const watch = this.#watch;
    this.#watch = undefined;
    this.#since = undefined;
    if (watch) {
      clearInterval(watch.probe);
      watch.controller.abort();
    }
  }

  /** Stops the watch and forgets every listener. */
  close() {
    clearTimeout(this.#lingerTimer);
    this.#stop();
    this.#listeners.clear();
  }
}
