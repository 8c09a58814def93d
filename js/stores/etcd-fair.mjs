// EtcdLockStore's fair locks and semaphores (`{ fair: true }`: the store contract's
// `acquireFair`), as functions over the store's state `s` (js/stores/etcd-permits.mjs
// says what it holds; `s.places` remembers the place each waiting owner of this store
// last saw, by its etcd key).
//
// A key's fair queue is one etcd key per waiter, `<prefix>queue/<lock|semaphore>/<key>/<owner>`,
// ordered by create revision, each under the lease of its waiter's latest attempt (the
// TTL rounded up to seconds, at least the server's minimum): a waiter that stops asking
// (crashed, paused) loses its place when that lease runs out and etcd deletes the key.
// A place's value is `{"ttl","permits","w"}` (`w`: the write id of the attempt that put
// it). Places are only ever added at the end (a new key's create revision is the
// cluster's next), so a waiter that is first stays first until it leaves.
//
// Each attempt has a lease of its own (granted on its way, or a spare granted ahead, see
// leaseFor) and then, in one transaction: when the key has room and the owner is first
// in line (its place exactly as it last saw it and none created before it; with no
// place, nobody in line), deletes its place and puts the hold under the lease; else puts
// its place under the lease (its own again where it is exactly as expected: a put keeps
// the create revision; a new one at the end where it has none, or none that it
// expected), or, for an attempt that does not wait, deletes any, and reads the queue and
// the key. An attempt whose place's lease still lasts its whole TTL from now and some
// (a TTL under the lease's whole seconds, or under the server's minimum) takes no new
// lease: the place lasts long enough as it is, and a hold put under that lease outlives
// its holder's deadline as one under a new lease would; it writes nothing unless granted.
// - A plain lock has room when its key is absent: the grant is one transaction.
// - A semaphore has room when its entries' permits and the owner's fit in the limit, a
//   sum no compare can make: the attempt's first transaction renews its place and reads
//   the queue and the entries; when that shows it first with room, a second one grants
//   it if no entry was created since that read (deletions only free permits; an extend
//   re-puts an entry as it was) and its place (or the empty queue) is as read. Its hold
//   is an entry like any other (the permit methods release, extend and count it), put
//   last, so every observer admits it.
// - A fair hold's value carries `"fair":true`. While one stands or anyone queues, a
//   handle that is not fair is refused with InvalidArgumentError (the plain acquire and
//   acquirePermit check: their transactions require the queue empty), and a fair handle
//   on a key that other handles hold is refused too.
// - Uncertain outcomes as everywhere in the store: every write compares the exact value
//   it expects, so a try applied late finds something else and changes nothing; a try
//   of the same call that went unanswered and was applied is recognized by its write id;
//   a call that fails has its lease revoked (after.cleanup), which deletes what it put
//   and fails it if it is applied later, and the lock asks again under a new owner (so
//   with a new place) while its clean-up gives the old place up. A call one of whose tries
//   that could grant went unanswered fails rather than answer "waiting" (unsureGrant):
//   that try compares only the place, which the call may leave as it was.
// - Wake-ups: a place deleted (given up by a release, run out, or granted) is a deletion
//   under the store's prefix: the watch wakes the key's waiters, as a release does. A
//   waiter refused at a read is refused again without a transaction while the watch has
//   streamed no deletion for its key since, its place renewed by a keep-alive of its
//   lease when that is due (refusedQuietly): waiters do not spin on etcd.
// - The first places of one store's waiters on a key land in the order they asked, whatever
//   their requests' race to the server (takeTurn).
import {
  absent,
  b64,
  del,
  firstKv,
  get,
  holdOf,
  kvsOf,
  leaseSeconds,
  lockValue,
  noneBefore,
  noneCreatedSince,
  noneUnder,
  now,
  parseValue,
  put,
  range,
  segment,
  unb64,
  unref,
  valueEquals,
  valueIs,
} from "./etcd-codec.mjs";
import { GRPC, unavailable } from "./etcd-gateway.mjs";
import { limitMismatch, unfairHolder } from "../api/errors.mjs";
import { queueOf } from "./etcd-permits.mjs";

// Places remembered past this many are forgotten (an attempt that knows none reads its own).
const PLACES_MAX = 10_000;

const placeValue = (ttl, permits, w) => JSON.stringify({ ttl, permits, w });

/**
 * The place an attempt expects at `placeKey`, as this store last saw it: `{ value,
 * revision, lease, until, readAt, freeBy }` (its base64 value, create revision, lease,
 * and when that lease ends at the earliest on this process's clock, undefined when
 * unknown; for an owner refused while it waits, the revision of the read that refused it
 * and when a hold this store set, seen then, runs out by this store's clock).
 */
const remembered = (s, placeKey) => s.places.get(placeKey);

function remember(s, placeKey, place) {
  if (place === undefined) {
    s.places.delete(placeKey);
    return;
  }
  if (s.places.size >= PLACES_MAX && !s.places.has(placeKey)) s.places.clear();
  s.places.set(placeKey, place);
}

/** A place's kv as an attempt expects it next; `lease` (`{ id, until }`) is the lease the attempt knows, if the place is under it. */
const seen = (kv, lease) =>
  kv === undefined
    ? undefined
    : { value: kv.value, revision: String(kv.create_revision), lease: kv.lease, until: kv.lease === lease?.id ? lease.until : undefined };

/**
 * The lease of an attempt sent at `sentAt` for `ttlMs`: its place's, when it lasts the
 * whole TTL from `sentAt`, renewed by a keep-alive when due (`fresh` false: the place
 * lasts as long as one put again under a new lease would, and so would a hold put under
 * it), else one of this attempt's own (`fresh` true): a spare (below) when it lasts that
 * long, else a new one.
 */
async function leaseFor(s, place, ttlMs, sentAt, deadline) {
  if (place?.lease !== undefined && place.lease !== "0") {
    if (!lasts(place.until, ttlMs, sentAt)) {
      try {
        const until = await s.gateway.keepAlive(place.lease, deadline);
        if (until !== undefined) place.until = until;
      } catch {
        // A lease of its own instead.
      }
    }
    if (place.until - sentAt >= ttlMs) return { id: place.lease, until: place.until, fresh: false };
  }
  const seconds = leaseSeconds(ttlMs);
  const spares = s.spares.get(seconds) ?? [];
  let lease;
  // The oldest granted spare that lasts the whole TTL; older ones end on their own (nothing is under them).
  while (lease === undefined && spares.length > 0 && spares[0].lease !== undefined) {
    const spare = spares.shift().lease;
    if (lasts(spare.until, ttlMs, sentAt)) lease = spare;
  }
  lease ??= await s.gateway.lease(ttlMs, deadline);
  // Leases of these seconds outlast this TTL: spares granted now save the next attempts a round trip.
  if (lease.until - sentAt - ttlMs - RENEW_AHEAD_MS >= SPARE_MIN_MS) spareFor(s, seconds, ttlMs);
  return { ...lease, fresh: true };
}

// Spare leases are granted only where they stay of use this long after their grant; so many per lease length.
const SPARE_MIN_MS = 100;
const SPARES = 2;

/**
 * Grants spare leases of `seconds` in the background, up to SPARES (`s.spares`: by
 * seconds, a list of `{ lease }`, each set once granted). A fair attempt takes one instead
 * of granting a lease on its way, when it still lasts the attempt's whole TTL: a new
 * waiter's place lands, and a grant is answered, one round trip sooner. Each spare is
 * taken by one attempt at most.
 */
function spareFor(s, seconds, ttlMs) {
  if (s.gateway.closed) return;
  let spares = s.spares.get(seconds);
  if (spares === undefined) s.spares.set(seconds, (spares = []));
  while (spares.length < SPARES) {
    const spare = {};
    spares.push(spare);
    s.gateway.background(
      s.gateway.lease(ttlMs, s.gateway.deadline()).then(
        (lease) => {
          spare.lease = lease;
        },
        () => {
          const at = spares.indexOf(spare);
          if (at >= 0) spares.splice(at, 1);
        },
      ),
    );
  }
}

/**
 * This store's attempts on `queue` that have no place yet land in the order they were
 * called, whatever their requests' race to the server, so the waiters of one process take
 * their places in the order they asked. `s.turns`: by queue, the latest such attempt:
 * `{ landed, settled, promise }`, `landed` naming what shows it landed (its place, if it
 * waits, and its hold, each as `[etcd key, base64 value]`). An attempt whose turn comes
 * while the one before is still on its way either makes its first write depend on that
 * one's having landed (`ahead()`, see `behind`), or, one that does not wait, waits for it
 * (`wait()`: until it landed or ended, TURN_WAIT_MS at most). `done()` ends the turn: once
 * the attempt landed (placed or granted) or ended.
 */
function takeTurn(s, queue, landed) {
  const before = s.turns.get(queue);
  const turn = { landed, settled: false };
  turn.promise = new Promise((resolve) => {
    turn.resolve = resolve;
  });
  s.turns.set(queue, turn);
  const pending = () => before !== undefined && !before.settled;
  return {
    ahead: () => (pending() ? before.landed : undefined),
    wait: (deadline) => (pending() ? within(before.promise, Math.min(TURN_WAIT_MS, deadline - now())) : undefined),
    done: () => {
      if (turn.settled) return;
      turn.settled = true;
      turn.resolve();
      if (s.turns.get(queue) === turn) s.turns.delete(queue);
    },
  };
}

/**
 * A waiting attempt's first place, put only once the attempt ahead of it (`ahead`, see
 * takeTurn) has landed: a nested transaction that puts `placeKey` (absent) under `lease`
 * where the place of the one ahead is there, else where its hold is.
 */
function behind(ahead, placeKey, value, lease) {
  const take = ([key, landed], otherwise) => ({
    request_txn: {
      compare: [absent(placeKey), valueEquals(key, landed)],
      success: [put(placeKey, value, lease)],
      ...(otherwise && { failure: [otherwise] }),
    },
  });
  const held = take(ahead.hold);
  return ahead.place === undefined ? held : take(ahead.place, held);
}

// How long an attempt waits for the one before it at most (a request that hangs is
// another member's business: it takes a third of operationTimeoutMs at least).
const TURN_WAIT_MS = 1_000;

/** Resolves once `promise` settles or `ms` passed. */
function within(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((resolve) => (timer = unref(setTimeout(resolve, Math.max(0, ms)))))]).finally(() => clearTimeout(timer));
}

/**
 * Whether an attempt of a waiting owner whose place is `place` would be refused as its
 * last one was: no hold seen then has run out by this store's clock, and the watch has
 * streamed no deletion that wakes `name` since the read that refused it (nothing else
 * makes room or moves a place up: holds and places only leave). A deletion still on its
 * way wakes the waiter, which then asks etcd.
 */
const refusedAgain = (s, place, name) => place?.readAt !== undefined && now() < place.freeBy && s.watch.quiet(name, place.readAt);

/**
 * An attempt of a waiting owner whose last one was refused, answered false without a
 * transaction while nothing changed (refusedAgain): its place lasts its whole TTL from
 * `sentAt` as it is, or once a keep-alive of its lease renewed it. Whether it did (else
 * the attempt asks etcd as any other).
 */
async function refusedQuietly(s, place, name, ttlMs, sentAt, deadline) {
  if (!refusedAgain(s, place, name)) return false;
  if (lasts(place.until, ttlMs, sentAt)) return true;
  let until;
  try {
    until = await s.gateway.keepAlive(place.lease, deadline);
  } catch {
    return false; // the transaction tells
  }
  if (until === undefined) return false; // its lease is gone, and its place with it
  place.until = until;
  return until - sentAt >= ttlMs && refusedAgain(s, place, name);
}

/**
 * Whether a lease that ends at `until` at the earliest is of use to an attempt sent at
 * `sentAt` for `ttlMs`: it lasts the whole TTL, and RENEW_AHEAD_MS more, so the place under
 * it is renewed well before it could run out (a waiter asks again within a third of its
 * TTL, and that attempt's renewal may take a while).
 */
const lasts = (until, ttlMs, sentAt) => until !== undefined && until - sentAt >= ttlMs + RENEW_AHEAD_MS;
const RENEW_AHEAD_MS = 250;

/** When the first of `holds` (holdOf answers) that this store times runs out by its clock: now when one has no time left, Infinity when none is its. */
function freeBy(holds) {
  let at = Number.POSITIVE_INFINITY;
  for (const h of holds) if (h?.state === "live") at = Math.min(at, now() + Math.max(0, h.left));
  return at;
}

/** Whether no place in `places` was created before `revision`. */
const noneAhead = (places, revision) => places.every((p) => BigInt(p.create_revision) >= BigInt(revision));

/**
 * The request that keeps `owner`'s place: for an attempt that waits, a nested
 * transaction that puts it under `lease` where it is exactly `place` (renewed, its
 * create revision kept) or, expecting none, absent (a new place at the end); for one
 * that does not wait, its deletion (it keeps none).
 */
function stand(placeKey, place, value, lease, waits) {
  if (!waits) return del(placeKey);
  return { request_txn: { compare: [place ? valueEquals(placeKey, place.value) : absent(placeKey)], success: [put(placeKey, value, lease)] } };
}

/** Revokes the lease of the place that `stand`'s response replaced or deleted, unless it is `lease` (this call's). */
function revokeStood(s, response, lease) {
  if (response?.response_txn) {
    if (response.response_txn.succeeded) s.gateway.revokeReplaced(response.response_txn, lease);
  } else if (response) {
    s.gateway.revokeReplaced({ responses: [response] }, lease);
  }
}

/**
 * A waiting attempt's place after a read that found `found` there (or nothing): the place
 * as the next round expects it, and whether it is this call's (`placed`: put by this call
 * under a lease of its own, or the place it keeps under the lease it kept). When it is not
 * (the place it expected ran out, so the next round takes one at the end, or it found one
 * it did not expect, renewed next round): after the attempt of this store it is behind
 * (`ahead`) landed or ended, with a lease of this call for the next round's place.
 */
async function afterRead(s, found, { lease, write, turn, ahead, ttlMs, sentAt, deadline }) {
  const place = seen(found, lease);
  const placed = found !== undefined && (lease.fresh ? parseValue(found).w === write.id : found.lease === lease.id);
  if (placed) {
    turn?.done();
    return { place, placed, lease };
  }
  if (ahead) await turn.wait(deadline);
  return { place, placed, lease: lease.fresh ? lease : await leaseFor(s, undefined, ttlMs, sentAt, deadline) };
}

/** Deletes the place `placeKey` if it is still exactly `kv`, and revokes its lease unless it is `keep`. */
async function dropPlace(s, placeKey, kv, deadline, keep) {
  const { reply } = await s.gateway.txn({ compare: [valueIs(placeKey, kv)], success: [del(placeKey)] }, deadline, "acquireFair");
  s.gateway.revokeReplaced(reply, keep);
}

/**
 * One fair attempt on the plain lock `name` (the etcd key of `key`'s lock), its queue
 * under `queue`: the hold's fencing token (the lock key's create revision), or false.
 */
export async function acquireFairLock(s, key, owner, ttlMs, waits, name, queue, after) {
  const sentAt = now();
  const deadline = sentAt + s.options.operationTimeoutMs;
  const placeKey = `${queue}${segment(owner)}`;
  let place = remembered(s, placeKey);
  if (waits && (await refusedQuietly(s, place, `lock:${key}`, ttlMs, sentAt, deadline))) return false;
  const write = s.writes.add(name, owner, ttlMs, sentAt, (w) => lockValue(owner, ttlMs, w, true));
  const mine = placeValue(ttlMs, 1, write.id);
  let lease; // { id, until, fresh }: granted in this call, or its place's
  let placed = false; // its place is under `lease`, as it last read
  let outcome; // "taken", "waiting" (its place kept) or "refused"; undefined: failed (and may have been applied)
  let unsure = false; // a try that could grant went unanswered (see unsureGrant)
  // One with no place takes its turn behind this store's earlier such attempts.
  const turn =
    waits && place !== undefined ? undefined : takeTurn(s, queue, { place: waits ? [placeKey, b64(mine)] : undefined, hold: [name, b64(write.value)] });
  try {
    lease = await leaseFor(s, waits ? place : undefined, ttlMs, sentAt, deadline);
    if (!waits) await turn?.wait(deadline);
    // Five rounds at most: each that changes nothing found something else, and says what.
    for (let round = 0; round < 5; round++) {
      // A first place behind an attempt of this store still on its way: put once that one landed; no grant yet.
      const ahead = round === 0 && waits ? turn?.ahead() : undefined;
      // The lock free, and this owner first in line: its place exactly as expected with
      // none created before it or, expecting none, nobody in line.
      const first = place ? [valueEquals(placeKey, place.value), noneBefore(queue, place.revision)] : [noneUnder(queue)];
      // A place under a lease of this call is renewed (put again) when refused; one under
      // the lease it keeps is left as it is.
      const stood = ahead ? [behind(ahead, placeKey, mine, lease.id)] : lease.fresh || !waits ? [stand(placeKey, place, mine, lease.id, waits)] : [];
      const reads = [...stood, get(name), range(queue)];
      const { reply, uncertain } = await s.gateway.txn(
        ahead
          ? { compare: [], success: reads }
          : { compare: [absent(name), ...first], success: [put(name, write.value, lease.id), del(placeKey)], failure: reads },
        deadline,
        "acquireFair",
      );
      if (!ahead && reply.succeeded) {
        s.gateway.revokeReplaced(reply, lease.id);
        outcome = "taken";
        return Number(reply.header.revision);
      }
      unsure ||= !ahead && uncertain;
      const responses = reply.responses ?? [];
      const [read, line] = responses.slice(stood.length);
      if (stood.length > 0 && !ahead) revokeStood(s, responses[0], lease.id);
      const kv = firstKv(read);
      const places = kvsOf(line);
      const found = places.find((p) => unb64(p.key) === placeKey);
      let free = kv === undefined;
      if (kv !== undefined) {
        const held = holdOf(s.writes, kv, owner);
        if (held.w === write.id) {
          // An unanswered earlier try of this call was applied: the lock is its. This
          // try put a place beside the hold (under the same lease): out.
          outcome = "taken";
          if (found !== undefined && parseValue(found).w === write.id) await dropPlace(s, placeKey, found, deadline, lease.id);
          return Number(kv.create_revision);
        }
        if (held.state === "expired") {
          // A hold this store set, past its TTL: over by its holder's own reckoning.
          // Delete exactly that hold, as a plain acquire does; the key is free.
          const { reply: gone } = await s.gateway.txn({ compare: [valueIs(name, kv)], success: [del(name)] }, deadline, "acquireFair");
          if (gone.succeeded) {
            s.gateway.revokeReplaced(gone);
            s.writes.over(s.writes.get(held.w));
          }
          free = true;
        } else if (!held.fair) {
          outcome = "refused";
          if (found !== undefined) await dropPlace(s, placeKey, found, deadline);
          throw unfairHolder("lock", key);
        }
      }
      if (!waits) {
        // Its place, if any, was deleted: granted only on a free key nobody queues for.
        place = undefined;
        if (free && places.length === 0) continue;
        outcome = "refused";
        return false;
      }
      ({ place, placed, lease } = await afterRead(s, found, { lease, write, turn, ahead, ttlMs, sentAt, deadline }));
      if (!placed) continue;
      if (free && noneAhead(places, found.create_revision)) continue; // freed meanwhile: the grant
      if (unsure) throw unsureGrant(key);
      outcome = "waiting";
      place.readAt = String(reply.header.revision);
      place.freeBy = freeBy([kv && holdOf(s.writes, kv, owner)]);
      return false;
    }
    if (placed && !unsure) {
      outcome = "waiting";
      return false;
    }
    if (unsure) throw unsureGrant(key);
    throw unavailable(`acquireFair on ${JSON.stringify(key)}: the lock and its queue kept changing`);
  } catch (err) {
    if (err?.cause?.grpc === GRPC.NOT_FOUND) throw unavailable("the lease of this acquireFair ran out before its transaction was applied", err);
    throw err;
  } finally {
    turn?.done();
    settle(s, placeKey, place, write, lease, outcome, after);
  }
}

/**
 * One fair attempt on the semaphore `key` (its entries under `base`, this owner's at
 * `entryKey`, its queue under `queue`) for `weight` of its `limit`: the hold's fencing
 * token (its entry's create revision), or false.
 */
export async function acquireFairPermit(s, key, owner, ttlMs, limit, weight, waits, base, entryKey, queue, after) {
  const sentAt = now();
  const deadline = sentAt + s.options.operationTimeoutMs;
  const placeKey = `${queue}${segment(owner)}`;
  let place = remembered(s, placeKey);
  if (waits && (await refusedQuietly(s, place, `semaphore:${key}`, ttlMs, sentAt, deadline))) return false;
  // An entry as acquirePermit writes it (one permit without `permits`), marked fair.
  const write = s.writes.add(entryKey, owner, ttlMs, sentAt, (w) =>
    JSON.stringify({ role: "semaphore", ttl: ttlMs, limit, ...(weight > 1 && { permits: weight }), w, fair: true }),
  );
  const mine = placeValue(ttlMs, weight, write.id);
  let lease;
  let placed = false;
  let outcome;
  // The revision of a read that found this owner first in line with room: the next transaction grants.
  let roomAt;
  let unsure = false; // a try that could grant went unanswered (see unsureGrant)
  const turn =
    waits && place !== undefined ? undefined : takeTurn(s, queue, { place: waits ? [placeKey, b64(mine)] : undefined, hold: [entryKey, b64(write.value)] });
  try {
    lease = await leaseFor(s, waits ? place : undefined, ttlMs, sentAt, deadline);
    if (!waits) await turn?.wait(deadline);
    // Six rounds at most: a read, its grant, and rounds that found something else.
    for (let round = 0; round < 6; round++) {
      // A first place behind an attempt of this store still on its way: put once that one landed (takeTurn).
      const ahead = round === 0 && waits ? turn?.ahead() : undefined;
      const stood = ahead ? [behind(ahead, placeKey, mine, lease.id)] : lease.fresh || !waits ? [stand(placeKey, place, mine, lease.id, waits)] : [];
      const reads = [...stood, range(queue), range(base)];
      const txn =
        roomAt === undefined
          ? { compare: [], success: reads }
          : {
              compare: [absent(entryKey), noneCreatedSince(base, roomAt), ...(place ? [valueEquals(placeKey, place.value)] : [noneUnder(queue)])],
              success: [put(entryKey, write.value, lease.id), del(placeKey)],
              failure: reads,
            };
      const granting = roomAt !== undefined;
      roomAt = undefined;
      const { reply, uncertain } = await s.gateway.txn(txn, deadline, "acquireFair");
      if (granting && reply.succeeded) {
        s.gateway.revokeReplaced(reply, lease.id);
        outcome = "taken";
        return Number(reply.header.revision);
      }
      unsure ||= granting && uncertain;
      const responses = reply.responses ?? [];
      const [line, held] = responses.slice(stood.length);
      if (stood.length > 0 && !ahead) revokeStood(s, responses[0], lease.id);
      const places = kvsOf(line);
      const found = places.find((p) => unb64(p.key) === placeKey);
      const entries = queueOf(s, kvsOf(held), base, "semaphore", limit, owner);
      const own = entries.find((e) => e.owner === owner);
      if (own !== undefined) {
        const ours = found !== undefined && parseValue(found).w === write.id;
        if (own.w === write.id) {
          // An unanswered earlier try of this call was applied: the permits are its.
          outcome = "taken";
          if (ours) await dropPlace(s, placeKey, found, deadline, lease.id);
          return Number(own.kv.create_revision);
        }
        // This owner holds already (another call's hold): nothing more.
        outcome = "refused";
        if (ours) await dropPlace(s, placeKey, found, deadline);
        return false;
      }
      const holders = entries.filter((e) => e.admitted);
      const other = holders.find((e) => typeof e.limit === "number" && e.limit !== limit);
      if (other !== undefined || holders.some((e) => !e.fair)) {
        outcome = "refused";
        if (found !== undefined) await dropPlace(s, placeKey, found, deadline);
        throw other !== undefined ? limitMismatch(key, other.limit, limit) : unfairHolder("semaphore", key);
      }
      // Every entry's permits count, as acquirePermit's admission counts them: its entry, put now, would be last.
      const room = entries.reduce((sum, e) => sum + e.permits, 0) + weight <= limit;
      if (!waits) {
        place = undefined;
        if (room && places.length === 0) {
          roomAt = String(reply.header.revision);
          continue;
        }
        outcome = "refused";
        return false;
      }
      ({ place, placed, lease } = await afterRead(s, found, { lease, write, turn, ahead, ttlMs, sentAt, deadline }));
      if (!placed) continue;
      if (room && noneAhead(places, found.create_revision)) {
        roomAt = String(reply.header.revision);
        continue;
      }
      if (unsure) throw unsureGrant(key);
      outcome = "waiting";
      place.readAt = String(reply.header.revision);
      place.freeBy = freeBy(entries);
      return false;
    }
    if (placed && !unsure) {
      outcome = "waiting";
      return false;
    }
    if (unsure) throw unsureGrant(key);
    throw unavailable(`acquireFair on ${JSON.stringify(key)}: the semaphore and its queue kept changing`);
  } catch (err) {
    if (err?.cause?.grpc === GRPC.NOT_FOUND) throw unavailable("the lease of this acquireFair ran out before its transaction was applied", err);
    throw err;
  } finally {
    turn?.done();
    if (outcome === "taken") {
      // The next in line may fit beside it (the watch tells other processes: its place was deleted).
      s.watch.wake(`semaphore:${key}`);
    }
    settle(s, placeKey, place, write, lease, outcome, after);
  }
}

/**
 * The error of a call that would answer "waiting" after a try of it that could grant went
 * unanswered (the gateway sends a transaction to the next member when one does not answer,
 * and the first may still be applied later). Such a try compares what the call expected of
 * its place, which a refused try leaves as it was where the place keeps its lease (and
 * every round of one call writes the same value): landing after the call answered, it
 * would take the key for a call that is over and delete the place. Failing instead
 * revokes the call's lease (settle): the place and whatever the try put go with it, and a
 * try that lands later fails. The wait asks again under a new owner, at the end of the
 * queue, as after any STORE_UNAVAILABLE.
 */
const unsureGrant = (key) =>
  unavailable(`acquireFair on ${JSON.stringify(key)}: a try that could grant went unanswered; its place is given up rather than left for that try`);

/** An attempt's end: what it remembers of its place, its write, its lease. */
function settle(s, placeKey, place, write, lease, outcome, after) {
  remember(s, placeKey, outcome === "waiting" ? place : undefined);
  if (outcome === "taken") return;
  if (outcome === "waiting") {
    // The hold's write is void; the lease keeps the place.
    s.writes.over(write);
  } else if (outcome === "refused") {
    // Nothing of it stays (a place it had was taken out, or goes with the lease).
    s.writes.over(write);
    if (lease !== undefined) after.cleanup = s.gateway.revoke(lease.id);
  } else if (lease !== undefined) {
    // Failed: whatever it did or will do goes with its lease (its place too, kept or put).
    after.cleanup = s.gateway.revoke(lease.id).then(() => s.writes.over(write));
  } else {
    s.writes.over(write); // never sent
  }
}
