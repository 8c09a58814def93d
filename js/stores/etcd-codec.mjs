// What EtcdLockStore writes to etcd and reads back: keys and values as the JSON gateway
// carries them (base64), the values of holds and queue entries, the writes the store
// remembers sending (its own clock times its holds), and the request bodies of its
// transactions. No I/O here: js/stores/etcd-gateway.mjs sends what these build.

export const noop = () => {};
export const now = () => performance.now();
export const unref = (timer) => {
  if (typeof timer === "object") timer?.unref?.();
  return timer;
};

// The writes this store remembers (see Writes): swept past this many.
export const WRITES_SWEEP_AT = 10_000;
const WRITES_MAX = 100_000;

// -------------------------------------------------------------------------------------
// Bytes: etcd's JSON gateway carries keys and values as base64.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function bytesToBase64(bytes) {
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

export const b64 = (text) => bytesToBase64(encoder.encode(text));
export const unb64 = (value) => (value ? decoder.decode(base64ToBytes(value)) : "");

/** The first key after every key that starts with `prefix` (etcd's prefix range end), base64. */
export function prefixEnd(prefix) {
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
export const segment = (text) => text.replaceAll("%", "%25").replaceAll("/", "%2F");
export const unsegment = (text) => text.replaceAll("%2F", "/").replaceAll("%25", "%");

/** The prefix of the places of the fair queue of `key`'s plain lock (`kind` "lock") or semaphore ("semaphore"): `<prefix>queue/<kind>/<key>/`. */
export const fairQueue = (keyPrefix, kind, key) => `${keyPrefix}queue/${kind}/${segment(key)}/`;

// -------------------------------------------------------------------------------------
// Values. A plain lock's value is JSON whose first member is the owner, so a transaction
// can check the owner with two comparisons (value > `{"owner":<owner>,` and value < that
// with its last byte raised): exactly the values that begin with it. `w` is the write id.

export const ownerPrefix = (owner) => `{"owner":${JSON.stringify(owner)},`;
/** A plain lock's value; a fair handle's hold is marked `"fair":true` (handles that are not fair are refused while it stands). */
export const lockValue = (owner, ttl, w, fair = false) => `${ownerPrefix(owner)}"ttl":${ttl},"w":${JSON.stringify(w)}${fair ? ',"fair":true' : ""}}`;

export function parseValue(kv) {
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
export class Writes {
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

  /**
   * Marks a write over: what it put was deleted (released, cleaned up, revoked with its
   * lease) or it never took effect. Its record stays until its TTL passes, so a read
   * taken before the delete and answered after it still finds the write over. (A write
   * this store no longer knows counts as live, as another process's does: dropped at
   * once, its entry read late stood ahead of the holds that had gone past it.) The
   * write before it of the same key and owner is the latest again.
   */
  over(entry) {
    if (!entry) return;
    entry.over = true;
    this.#unlink(entry);
  }

  /** Drops a write's record (the sweep); the one before it is the latest again. */
  #forget(entry) {
    this.#byId.delete(entry.id);
    this.#unlink(entry);
  }

  #unlink(entry) {
    const name = `${entry.etcdKey}\u0000${entry.owner}`;
    if (this.#latest.get(name) !== entry) return;
    let before = entry.before;
    while (before && (before.over || !this.#byId.has(before.id))) before = before.before;
    if (before) this.#latest.set(name, before);
    else this.#latest.delete(name);
  }

  get(id) {
    return typeof id === "string" ? this.#byId.get(id) : undefined;
  }

  latest(etcdKey, owner) {
    return this.#latest.get(`${etcdKey}\u0000${owner}`);
  }

  /**
   * `{ state: "live", left }`, `{ state: "expired" }` (ours, TTL passed) or `{ state: "unknown" }`
   * (not ours, or forgotten), as seen by `observer` (the owner asking; none for a question
   * of nobody's). To anyone but its owner, a write whose TTL passed is still live while a
   * later write of the same key and owner is (an extend, or a waiting entry's next
   * attempt, on its way): if it lands, the holder counts its hold from that one, so nobody
   * may go past it meanwhile. It vouches for no time (`left` 0): it may never land. (To its
   * owner, a write whose TTL passed is over: a later one of its own is its own call's
   * business, and reading over sooner is the safe side.)
   */
  status(id, observer) {
    const entry = this.get(id);
    if (!entry) return { state: "unknown" };
    if (entry.over) return { state: "expired" };
    const t = now();
    const left = entry.until - t;
    if (left > 0) return { state: "live", left };
    if (observer !== entry.owner) {
      const latest = this.#latest.get(`${entry.etcdKey}\u0000${entry.owner}`);
      if (latest !== undefined && latest !== entry && latest.until > t) return { state: "live", left: 0 };
    }
    return { state: "expired" };
  }

  #sweep() {
    const t = now();
    for (const entry of this.#byId.values()) {
      if (entry.until <= t) this.#forget(entry);
      entry.before = undefined; // no chains through what the sweep keeps
    }
    for (const entry of this.#byId.values()) {
      if (this.#byId.size <= WRITES_MAX) break;
      this.#forget(entry);
    }
  }
}

/** How a store sees a kv (a lock, a queue entry) given the writes it remembers, asked by `observer` (see `status`): `{ owner, role, limit, permits, behind, fair, w, state, left }`; state "live" / "expired" / "unknown". */
export function holdOf(writes, kv, observer) {
  const value = parseValue(kv);
  return {
    owner: value.owner,
    role: value.role,
    limit: value.limit,
    // A semaphore entry's permits; entries written before holds had weights have none: 1.
    permits: Number.isSafeInteger(value.permits) && value.permits > 0 ? value.permits : 1,
    behind: value.behind,
    // Taken by a fair handle (js/stores/etcd-fair.mjs).
    fair: value.fair === true,
    w: value.w,
    ...writes.status(value.w, observer),
  };
}

/** Notes in `contended` that `name` (a lock's key, a semaphore's prefix) was found taken: its next acquire reads first. */
export function contend(contended, name) {
  if (contended.size >= WRITES_SWEEP_AT) contended.clear();
  contended.add(name);
}

/** A lease's TTL in whole seconds for a hold of `ttlMs`: rounded up (the server may raise it to its minimum). */
export const leaseSeconds = (ttlMs) => Math.max(1, Math.ceil(ttlMs / 1_000));

// Request-building helpers (the gateway's JSON for etcdserverpb messages).
export const put = (key, value, lease) => ({ request_put: { key: b64(key), value: b64(value), lease, prev_kv: true } });
export const del = (key) => ({ request_delete_range: { key: b64(key), prev_kv: true } });
export const get = (key) => ({ request_range: { key: b64(key) } });
export const ownerIs = (key, owner) => {
  const start = ownerPrefix(owner);
  const bytes = encoder.encode(start);
  bytes[bytes.length - 1] += 1; // ',' → '-'
  return [
    { key: b64(key), target: "VALUE", result: "GREATER", value: b64(start) },
    { key: b64(key), target: "VALUE", result: "LESS", value: bytesToBase64(bytes) },
  ];
};
export const valueIs = (key, kv) => ({ key: b64(key), target: "VALUE", result: "EQUAL", value: kv.value });
export const absent = (key) => ({ key: b64(key), target: "CREATE", result: "EQUAL", create_revision: "0" });
/** A range over every key under `prefix`. */
export const range = (prefix) => ({ request_range: { key: b64(prefix), range_end: prefixEnd(prefix) } });

export const firstKv = (response) => response?.response_range?.kvs?.[0];

/** The kvs a transaction's range response read (none when absent). */
export const kvsOf = (response) => response?.response_range?.kvs ?? [];

/** A read of whether any key starts with `prefix`: at most one, without its value. */
export const anyUnder = (prefix) => ({ request_range: { key: b64(prefix), range_end: prefixEnd(prefix), limit: 1, keys_only: true } });

/** A compare that holds while no key starts with `prefix` (etcd compares a range's every key; an empty one as a key of create revision 0). */
export const noneUnder = (prefix) => ({ key: b64(prefix), range_end: prefixEnd(prefix), target: "CREATE", result: "EQUAL", create_revision: "0" });

/** A compare that holds while no key under `prefix` was created before `revision` (a decimal string): nothing stands ahead of a key created at it. */
export const noneBefore = (prefix, revision) => ({
  key: b64(prefix),
  range_end: prefixEnd(prefix),
  target: "CREATE",
  result: "GREATER",
  create_revision: String(BigInt(revision) - 1n),
});

/** A compare that holds while no key under `prefix` was created after `revision` (a decimal string; deletions and puts of keys already there pass). */
export const noneCreatedSince = (prefix, revision) => ({
  key: b64(prefix),
  range_end: prefixEnd(prefix),
  target: "CREATE",
  result: "LESS",
  create_revision: String(BigInt(revision) + 1n),
});

/** A compare that holds while `key`'s value is exactly `value` (base64, as read). */
export const valueEquals = (key, value) => ({ key: b64(key), target: "VALUE", result: "EQUAL", value });

/** A compare that holds while `key` was last written at `revision` (a decimal string; "0": absent). */
export const modIs = (key, revision) => ({ key: b64(key), target: "MOD", result: "EQUAL", mod_revision: String(revision ?? "0") });
/**
 * A nested transaction that moves `key`, if it exists, to `lease`, its value kept (a put
 * with `ignore_value` fails on an absent key, so it is guarded: etcd checks the requests
 * of the branch its compares take only).
 */
export const moveToLease = (key, lease) => ({
  request_txn: {
    compare: [{ key: b64(key), target: "CREATE", result: "GREATER", create_revision: "0" }],
    success: [{ request_put: { key: b64(key), lease, ignore_value: true } }],
  },
});

// -------------------------------------------------------------------------------------
// Proclaimed values. What the holder of a plain lock proclaims (elections) is kept in a
// key of its own, `<prefix>value/<key>`, put under the lock key's lease (so it goes with
// the hold), as JSON naming the hold it belongs to: the lock key's create revision (its
// fencing token) and owner. A value that names another hold is an earlier holder's, left
// until its lease is revoked: it is nobody's now.

export const proclaimedValue = (hold, owner, seq, value) => JSON.stringify({ hold, owner, seq, value });

/** The value `valueKv` keeps for the hold `lockKv` (`{ seq, value }`), or undefined when it keeps none for that hold. */
export function keptValue(valueKv, lockKv) {
  if (valueKv === undefined || lockKv === undefined) return undefined;
  const kept = parseValue(valueKv);
  if (kept.hold !== String(lockKv.create_revision) || kept.owner !== parseValue(lockKv).owner) return undefined;
  if (typeof kept.value !== "string" || typeof kept.seq !== "number") return undefined;
  return { seq: kept.seq, value: kept.value };
}
