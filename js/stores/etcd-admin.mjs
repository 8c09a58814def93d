// EtcdLockStore's time left from leases, and what the CLI sees of its keys (the store's
// ETCD_ADMIN_LIST and ETCD_ADMIN_RELEASE), as functions over the store's state `s`
// (js/stores/etcd.mjs: its options, gateway and the writes it remembers).
import { MAX_MS } from "../api/defaults.mjs";
import { del, holdOf, keptValue, parseValue, unb64, unsegment, valueIs } from "./etcd-codec.mjs";
import { GRPC, unavailable } from "./etcd-gateway.mjs";
import { queueOf } from "./etcd-permits.mjs";

/** Milliseconds left of the hold `kv`: this store's own for a hold it set, else its lease's; null when over. */
export async function timeLeft(s, kv, deadline) {
  const held = holdOf(s.writes, kv);
  if (held.state === "live") return Math.max(1, Math.ceil(held.left));
  if (held.state === "expired") return null;
  return leaseLeft(s, kv, deadline);
}

/** What is left of `kv`'s lease, in milliseconds (whole seconds): null when it ended, MAX_MS without one. */
async function leaseLeft(s, kv, deadline) {
  if (!kv.lease || kv.lease === "0") return MAX_MS;
  try {
    const { reply } = await s.gateway.request("lease/timetolive", { ID: kv.lease }, deadline, "remainingTime");
    // A field at its default (0) is left out of the gateway's JSON.
    const seconds = Number(reply.TTL ?? 0);
    return seconds < 0 ? null : Math.max(1, seconds * 1_000);
  } catch (err) {
    if (err?.cause?.grpc === GRPC.NOT_FOUND) return null;
    throw err;
  }
}

/**
 * The holds under the store's prefix whose names `match(name)` accepts: `[{ key, kind,
 * owner, remainingMs, fencingToken, etcdKey, kv }]` (plain locks, and the admitted entries
 * of semaphores and read-write locks; waiting entries hold nothing; `fair` on fair holds);
 * a plain lock's has `value` too, what its holder proclaimed (or null). Then the places in
 * their fair queues, each queue in order (create revisions), marked `waiting`: `{ key,
 * kind ("lock" or "semaphore"), owner, permits (a semaphore's), remainingMs, kv }`. Time
 * left comes from the leases, in whole seconds. `permitPrefix(key, kind)`: the store's.
 */
export async function adminList(s, match, permitPrefix) {
  const deadline = s.gateway.deadline();
  const { keyPrefix } = s.options;
  const { kvs } = await s.gateway.list(keyPrefix, deadline, "list");
  const sets = new Map();
  const holds = [];
  const places = [];
  const values = new Map();
  for (const kv of kvs) {
    const rest = unb64(kv.key).slice(keyPrefix.length);
    if (rest.startsWith("value/")) {
      values.set(unsegment(rest.slice(6)), kv);
      continue;
    }
    if (rest.startsWith("queue/")) {
      // A fair waiter's place: queue/<lock|semaphore>/<key>/<owner>.
      const [, kind, key, owner] = rest.split("/");
      if ((kind === "lock" || kind === "semaphore") && owner !== undefined && match(unsegment(key))) {
        const permits = kind === "semaphore" ? Number(parseValue(kv).permits) || 1 : undefined;
        places.push({ key: unsegment(key), kind, owner: unsegment(owner), ...(permits && { permits }), waiting: true, kv });
      }
      continue;
    }
    if (rest.startsWith("lock/")) {
      const key = unsegment(rest.slice(5));
      if (match(key)) {
        const { owner, fair } = parseValue(kv);
        holds.push({ key, kind: "lock", owner, fencingToken: Number(kv.create_revision), ...(fair === true && { fair }), etcdKey: unb64(kv.key), kv });
      }
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
    for (const e of queueOf(s, entries, permitPrefix(key, kind), kind)) {
      if (e.admitted)
        holds.push({
          key,
          kind: family === "semaphore" ? "semaphore" : e.role,
          owner: e.owner,
          ...(family === "semaphore" && { permits: e.permits }),
          ...(family === "semaphore" && parseValue(e.kv).fair === true && { fair: true }),
          fencingToken: Number(e.kv.create_revision),
          etcdKey: unb64(e.kv.key),
          kv: e.kv,
        });
    }
  }
  for (const h of holds) if (h.kind === "lock") h.value = keptValue(values.get(h.key), h.kv)?.value ?? null;
  places.sort((a, b) => Number(a.kv.create_revision) - Number(b.kv.create_revision));
  await Promise.all([
    ...holds.map(async (h) => {
      h.remainingMs = await timeLeft(s, h.kv, deadline);
    }),
    ...places.map(async (p) => {
      p.remainingMs = await leaseLeft(s, p.kv, deadline);
    }),
  ]);
  return [...holds, ...places].filter((h) => h.remainingMs !== null);
}

/**
 * Deletes every hold of `key` (its lock, its admitted permits) whoever holds it, in one
 * transaction; answers what it deleted. The places in its fair queues stay (their waiters
 * go on waiting). `list()`: the key's entries, as adminList lists them.
 */
export async function adminRelease(s, key, list) {
  for (let round = 0; round < 3; round++) {
    const holds = (await list()).filter((h) => !h.waiting);
    if (holds.length === 0) return [];
    // Exactly these: none changed since they were listed.
    const { reply } = await s.gateway.txn(
      { compare: holds.map((h) => valueIs(h.etcdKey, h.kv)), success: holds.map((h) => del(h.etcdKey)) },
      s.gateway.deadline(),
      "release",
    );
    if (reply.succeeded) {
      s.gateway.revokeReplaced(reply);
      return holds;
    }
  }
  throw unavailable(`the holds of ${JSON.stringify(key)} kept changing while they were being released`);
}
