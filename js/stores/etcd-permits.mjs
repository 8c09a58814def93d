// EtcdLockStore's semaphores and read-write locks, as functions over the store's state
// `s` (made once by the store): `s.gateway` (requests, leases, background work, see
// js/stores/etcd-gateway.mjs), `s.writes` (the writes it sent, js/stores/etcd-codec.mjs),
// `s.contended` (the semaphores found full at the last look), `s.watch` (wake-ups) and
// `s.options`. The store checks the arguments, names the keys (`base`, the key's prefix;
// `entryKey`, the owner's entry under it) and orders an owner's calls on a key; these do
// the rest.
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
import { fairKey, limitMismatch } from "../api/errors.mjs";
import {
  absent,
  anyUnder,
  b64,
  contend,
  del,
  fairQueue,
  holdOf,
  kvsOf,
  noneUnder,
  now,
  parseValue,
  put,
  range,
  unb64,
  unsegment,
  valueIs,
} from "./etcd-codec.mjs";
import { GRPC, unavailable } from "./etcd-gateway.mjs";

/** The key's queue, read in a transaction's range response, as `observer` (an owner, or none) sees it: entries in revision order, with whether each is admitted. */
export function queueOf(s, kvs, base, kind, limit, observer) {
  const entries = [];
  const stale = [];
  for (const kv of kvs) {
    const entry = { ...holdOf(s.writes, kv, observer), owner: unsegment(unb64(kv.key).slice(base.length)), kv, revision: BigInt(kv.create_revision) };
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
    s.gateway.background(
      s.gateway.txn({ compare: [valueIs(name, entry.kv)], success: [del(name)] }, s.gateway.deadline(), "a cleanup").then(({ reply }) => {
        if (reply.succeeded) {
          s.gateway.revokeReplaced(reply);
          s.writes.over(s.writes.get(entry.w));
        }
      }),
    );
  }
  return entries;
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
export async function acquireEntry(s, key, owner, ttlMs, kind, limit, weight, base, entryKey, after) {
  const sentAt = now();
  const deadline = sentAt + s.options.operationTimeoutMs;
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
  // The semaphore's fair queue (js/stores/etcd-fair.mjs): while anyone stands in it, or
  // fair handles hold the semaphore, this handle (not fair) is refused.
  const fairPlaces = kind === "semaphore" ? fairQueue(s.options.keyPrefix, "semaphore", key) : undefined;
  if (kind === "semaphore" && s.contended.has(base)) {
    // Full at the last look: one read, and no entry (which others would count) while it still is.
    const { kvs } = await s.gateway.list(base, deadline, "acquirePermit");
    const queue = queueOf(s, kvs, base, kind, limit, owner);
    if (queue.some((e) => e.fair && e.admitted)) throw fairKey("semaphore", key);
    // An entry put now would be last: admitted if every entry's permits and its own fit.
    if (queue.reduce((sum, e) => sum + e.permits, 0) + weight > limit && !queue.some((e) => e.owner === owner)) return false;
  }
  // A semaphore's entries are taken out when refused: expect none. A reader's or writer's waits in the queue.
  let previous = kind === "semaphore" ? undefined : s.writes.latest(entryKey, owner);
  // A waiting entry whose TTL ran out between attempts is over to this store, whose
  // other handles went past it (and may hold behind it now): put back in its place it
  // would stand ahead of them again. It goes to the back of the queue instead, taken out
  // before this attempt's write is noted (while one is on its way, the entry counts as live).
  if (previous !== undefined && (await dropIfOver(s, owner, entryKey, previous.id, { value: b64(previous.value) }, deadline))) previous = undefined;
  const write = s.writes.add(entryKey, owner, ttlMs, sentAt, value);
  let lease;
  let outcome; // "taken", "refused" (entry out again) or "waiting" (entry kept); undefined: failed
  try {
    lease = await s.gateway.grant(ttlMs, deadline);
    // A semaphore's entry is put only while its fair queue is empty, which the reads say.
    const reads = fairPlaces === undefined ? [range(base)] : [range(base), anyUnder(fairPlaces)];
    let expected = previous === undefined ? undefined : b64(previous.value);
    // Four rounds at most: each that changes nothing found something else, and says what.
    for (let round = 0; round < 4; round++) {
      const compare = expected === undefined ? absent(entryKey) : { key: b64(entryKey), target: "VALUE", result: "EQUAL", value: expected };
      const { reply } = await s.gateway.txn(
        {
          compare: fairPlaces === undefined ? [compare] : [compare, noneUnder(fairPlaces)],
          success: [put(entryKey, write.value, lease), ...reads],
          failure: reads,
        },
        deadline,
        "acquirePermit",
      );
      const responses = reply.responses ?? [];
      const kvs = kvsOf(responses[reply.succeeded ? 1 : 0]);
      if (fairPlaces !== undefined && kvsOf(responses.at(-1)).length > 0) {
        // Fair handles queue for it: refused (nothing was written).
        outcome = "refused";
        throw fairKey("semaphore", key);
      }
      if (reply.succeeded) {
        s.gateway.revokeReplaced(reply, lease);
      } else {
        // Not what this call expected: nothing written. Unless it is this call's own
        // entry (an unanswered earlier try of it, applied), expect what is there now.
        const found = kvs.find((kv) => unb64(kv.key) === entryKey);
        if (found === undefined || parseValue(found).w !== write.id) {
          expected = found?.value;
          // An earlier attempt's entry, applied late, that this store counts as over: out (as above).
          if (found !== undefined && (await dropIfOver(s, owner, entryKey, parseValue(found).w, found, deadline))) expected = undefined;
          continue;
        }
      }
      const queue = queueOf(s, kvs, base, kind, limit, owner);
      const mine = queue.find((e) => e.owner === owner);
      if (mine === undefined) continue; // gone meanwhile: put it again
      if (kind === "semaphore") {
        const other = queue.find((e) => e !== mine && typeof e.limit === "number" && e.limit !== limit && e.revision < mine.revision);
        // Fair handles hold it: this one is not fair.
        const fair = queue.some((e) => e !== mine && e.fair);
        if (other || fair) {
          outcome = "refused";
          await drop(s, entryKey, mine.kv, deadline);
          throw fair ? fairKey("semaphore", key) : limitMismatch(key, other.limit, limit);
        }
      }
      if (mine.admitted) {
        outcome = "taken";
        return Number(mine.kv.create_revision);
      }
      if (kind === "semaphore") {
        outcome = "refused";
        await drop(s, entryKey, mine.kv, deadline);
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
    if (kind === "semaphore" && outcome === "taken") s.contended.delete(base);
    if (kind === "semaphore" && outcome === "refused") contend(s.contended, base);
    if (outcome === "refused") {
      s.writes.over(write);
      if (lease !== undefined) after.cleanup = s.gateway.revoke(lease);
    } else if (outcome === undefined && lease !== undefined) {
      // Failed: whatever it did or will do goes with its lease.
      after.cleanup = s.gateway.revoke(lease).then(() => s.writes.over(write));
    }
  }
}

/** Drops `kv` (this owner's entry, put by write `w`) when this store counts that write as over: whether it did. */
async function dropIfOver(s, owner, entryKey, w, kv, deadline) {
  if (s.writes.status(w, owner).state === "live") return false;
  await drop(s, entryKey, kv, deadline);
  return true;
}

/** Deletes the entry `entryKey` (this owner's) if it is still exactly `kv`, and revokes its lease. */
async function drop(s, entryKey, kv, deadline) {
  const { reply } = await s.gateway.txn({ compare: [valueIs(entryKey, kv)], success: [del(entryKey)] }, deadline, "acquirePermit");
  s.gateway.revokeReplaced(reply);
}

/**
 * Drops `owner`'s entry `entryKey` under `base` (a hold, or a place in the queue), and its
 * place `placeKey` in a fair queue if given (an owner that holds nothing gives it up): whether it was a live hold.
 */
export async function releaseEntry(s, key, owner, kind, base, entryKey, placeKey) {
  const { reply, uncertain } = await s.gateway.txn(
    { success: [range(base), del(entryKey), ...(placeKey === undefined ? [] : [del(placeKey)])] },
    s.gateway.deadline(),
    "releasePermit",
  );
  const kvs = reply.responses?.[0]?.response_range?.kvs ?? [];
  const deleted = reply.responses?.[1]?.response_delete_range?.prev_kvs?.[0];
  s.gateway.revokeReplaced(reply);
  if (placeKey !== undefined) {
    s.places.delete(placeKey);
    // A fair waiter's place given up: the waiters behind it may be first now.
    if (reply.responses?.[2]?.response_delete_range?.prev_kvs?.[0] && !deleted) s.watch.wake(`semaphore:${key}`);
  }
  const latest = s.writes.latest(entryKey, owner);
  if (deleted) {
    s.watch.wake(`${kind === "semaphore" ? "semaphore" : "rw"}:${key}`);
    // Read before the write is marked over, as that makes the entry read as over too.
    const held = queueOf(s, kvs, base, kind, undefined, owner).find((e) => e.owner === owner)?.admitted === true;
    s.writes.over(latest);
    return held;
  }
  // An earlier, unanswered attempt may have deleted the hold this store knows is live.
  if (uncertain && latest && s.writes.status(latest.id, owner).state === "live") {
    s.writes.over(latest);
    return true;
  }
  return false;
}

/** Re-puts `owner`'s admitted, live entry under a new lease of `ttlMs`: its place (create revision) stays. */
export async function extendEntry(s, owner, ttlMs, kind, base, entryKey) {
  const sentAt = now();
  const deadline = sentAt + s.options.operationTimeoutMs;
  const [first, lease] = await Promise.all([s.gateway.list(base, deadline, "extendPermit"), s.gateway.grant(ttlMs, deadline)]);
  let kvs = first.kvs;
  // Twice at most: a concurrent extend of the same hold changes it between read and write.
  for (let round = 0; round < 2; round++) {
    const mine = queueOf(s, kvs, base, kind, undefined, owner).find((e) => e.owner === owner);
    if (!mine?.admitted) break;
    const value = parseValue(mine.kv);
    const write = s.writes.add(entryKey, owner, ttlMs, sentAt, (w) => JSON.stringify({ ...value, ttl: ttlMs, w }));
    const { reply } = await s.gateway.txn({ compare: [valueIs(entryKey, mine.kv)], success: [put(entryKey, write.value, lease)] }, deadline, "extendPermit");
    if (reply.succeeded) {
      s.gateway.revokeReplaced(reply, lease);
      return true;
    }
    s.writes.over(write);
    ({ kvs } = await s.gateway.list(base, deadline, "extendPermit"));
  }
  s.gateway.revoke(lease);
  return false;
}

/** How many permits the queue under `base` holds (a semaphore's admitted entries' permits; readers, or one writer). */
export async function countEntries(s, kind, base) {
  const { kvs } = await s.gateway.list(base, s.gateway.deadline(), "countPermits");
  return queueOf(s, kvs, base, kind).reduce((sum, e) => (e.admitted ? sum + e.permits : sum), 0);
}

/** Milliseconds left of `owner`'s permit under `base`, or null (1 for a permit set elsewhere: held, no time vouched for). */
export async function entryRemainingTime(s, owner, kind, base) {
  const { kvs } = await s.gateway.list(base, s.gateway.deadline(), "permitRemainingTime");
  const mine = queueOf(s, kvs, base, kind, undefined, owner).find((e) => e.owner === owner);
  if (!mine?.admitted) return null;
  return mine.state === "live" ? Math.max(1, Math.floor(mine.left)) : 1;
}
