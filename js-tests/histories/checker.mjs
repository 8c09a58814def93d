// The history checker: a pure function over recorded holds (see client.mjs for the
// record). All times are on one host clock, in ms.
//
// A hold is *certainly live* from its grant's reply to the earlier of its release's
// request and (the send time of its last successful acquire or extend) + TTL: the store
// set its expiry no earlier than that send, so no correct store lets anyone else in
// before then. (`slackMs` is taken off the end for clocks that count in whole ms.)
//
// Checks, per key (a `multi` hold, lockAll's, is a plain holder of each of its `keys`,
// with that key's token):
// - `overlap`: never two plain holders whose certainly-live intervals overlap;
// - `over-limit`: never more than `limit` semaphore permits certainly live at once (a
//   hold of n permits counts n);
// - `writer-with-others`: never a writer certainly live beside a reader or a writer;
// - `token-order`: a grant whose acquire was sent after another grant's acquire had
//   returned (so the store granted it later; certainly-live intervals that are ordered
//   are ordered so too) has the larger fencing token;
// - `held-but-refused`: the store answered an extend or the holder's own release as
//   "not yours" while the hold was certainly live;
// - `early-signal`: the signal never aborts as lost while the hold is certainly live
//   (less the drift allowance that the lease model gives up on purpose), nor as
//   released before release() was called;
// - `late-signal`: it aborts within `signalBoundMs` of the hold being certainly gone:
//   released (the release's reply), known lost (an extend or a release said so), or
//   past every expiry a request could have set (the reply of the last acquire or
//   extend that succeeded or whose outcome is unknown, + TTL). Auto-extended holds
//   extend out of sight, so only their release or a known loss counts for them;
// - `after-lost`: once the handle said lost (its signal, an extend refused with
//   LOCK_NOT_HELD, release() false), no extend sent after that succeeds;
// - `extend-after-gone`: no extend of a hold (not auto-extended) succeeds when it was
//   sent after every expiry the earlier requests could have set had passed (the reply
//   of the last acquire or extend that succeeded or whose outcome is unknown, + TTL,
//   + `slackMs`): a holder that slept past its TTL (a paused process) must not get its
//   hold back.
//
// `pauses` (`[{ process, from, to }]`, an OS process stopped with SIGSTOP then continued)
// move the late-signal bound of that process's holds: a stopped process runs no timer,
// so a hold certainly gone while it was stopped must be reported within `signalBoundMs`
// of it running again. And `not-reported-lost`: a hold (not auto-extended, its release
// not sent before the stop, within `slackMs`) whose every possible expiry passed while its process was stopped is
// reported by its signal as lost, not as released.
//
// `stalls` (`[{ process, from, to }]`, a process's event loop held by synchronous work)
// move the late-signal bound the same way: no callback of that process ran meanwhile.
// (Its other threads did: a stall is not a stop, and is not held to `not-reported-lost`.)
//
// `observations` (`[{ client, key, send, reply, term, code }]`, reads of an election's
// leader, client.mjs kind "observe") are held to two more checks, per key:
// - `term-went-back`: a read that began after another had returned never sees an older
//   term (terms grow with each leader, so a later read sees that leader or a later one);
// - `phantom-leader`: a read that saw a term saw a leader that could have been live during
//   the read: a grant of that election with that term, acquired before the read returned
//   and not certainly gone (its release answered) before the read began; or, for a term
//   no grant recorded, a campaign that was aborted, failed or timed out, or was in flight
//   when its process was killed (the store may have granted it: such a hold lives until its
//   clean-up or its TTL) begun before the read
//   returned, whose term is larger than every term granted before that campaign began and
//   smaller than every term granted to a campaign begun after the read. A campaign that won
//   counts too, for terms below the one it won with: it may have been granted and given the
//   grant back before (an attempt answered after its timeout and cleaned up, a win whose
//   record the store could not keep), as its process's campaign loop does, and that grant
//   was gone before the win. (So where terms are dense, as etcd's revisions are, a term
//   between two grants read while someone campaigned passes; a stale one, below a grant
//   made before the campaign began, does not.)
//
// Fair handles (`fair: true` on holds and on the `attempts` that were refused, aborted or
// failed) are held to `fair-order`, per key and family: an acquire B sent more than
// `fairSlackMs` (20: send times are the callers', not the store's) after a waiting acquire A was sent (so A had taken its place in the queue
// before B asked) is not granted while A still waits — before A's wait ended (its grant,
// its abort, its answer, its process's death (`endAt`), or its deadline `send + timeout`), less `fairSlackMs`. An A that
// does not wait (timeout 0) keeps no place, and one whose process was stopped or stalled
// meanwhile may have lost its place (a place lasts the TTL from its latest attempt), as may
// one that met a store outage meanwhile (`outages`, `[{ from, to }]`: a store restart; an
// attempt that fails with STORE_UNAVAILABLE asks again under a new owner, at the end of the
// queue): all are left out.
// Where the store is a JS one, each process also recorded its store's answers on places
// (`places`, client.mjs recordPlaces): then its fair holds and attempts (`placed`, from a
// process whose places are there) are held to the exact rule instead — an owner that first asked after another's place was answered
// is not granted while that place certainly stood (see checkFairPlaces) — with no
// `fairSlackMs`: a place may land well after its acquire was sent (a Raft commit, a
// restarted object), and the answers say when it did.
//
// `checkOrphans` (below) is the end-of-run check: no hold is left on the store that no
// client owns.

const family = (kind) => (kind === "read" || kind === "write" ? "rw" : kind === "multi" ? "lock" : kind);

/** A hold as the holder of each key it holds: a multi hold once per key, with that key's token. */
const perKey = (h) =>
  h.kind === "multi" && Array.isArray(h.keys) ? h.keys.map((key) => ({ ...h, key, acquire: { ...h.acquire, token: h.acquire.tokens?.[key] ?? null } })) : [h];

/** The lease model's drift allowance for a TTL (core's `default_drift_ms`). */
const defaultDrift = (ttl) => Math.min(Math.floor(ttl / 100) + 2, ttl - 1);

/** The times of a hold that the checks use. */
export function holdTimes(hold, slackMs = 2) {
  const okExtends = hold.extends.filter((e) => e.ok);
  // Auto-extend moves the expiry out of sight: the known sets are a lower bound.
  const lastSetSend = Math.max(hold.acquire.send, ...okExtends.map((e) => e.send));
  const start = hold.acquire.reply;
  const leaseEnd = lastSetSend + hold.ttl - slackMs;
  // A leader (kind "election") believes it leads until the last time its `isLeader` said
  // yes (beliefUntil), whatever the lease.
  const end = Math.min(hold.release ? hold.release.send : Infinity, hold.beliefUntil ?? leaseEnd);
  // When the handle itself said lost.
  const said = [];
  if (hold.signal && hold.signal.reason === "lost") said.push(hold.signal.at);
  for (const e of hold.extends) if (e.code === "LOCK_NOT_HELD") said.push(e.reply);
  if (hold.release && hold.release.ok === false && hold.release.code === null) said.push(hold.release.reply);
  const lostAt = said.length > 0 ? Math.min(...said) : Infinity;
  // When it is certainly gone (null: cannot tell): released, or the earlier of a word that
  // it is lost and every expiry a request could have set passing (a loss said late does
  // not make the hold gone late).
  let goneAt = null;
  if (hold.release?.ok === true) goneAt = hold.release.reply;
  else {
    let expired = Infinity;
    if (!hold.auto) {
      const sets = [hold.acquire.reply, ...hold.extends.filter((e) => e.ok || e.code !== "LOCK_NOT_HELD").map((e) => e.reply)];
      expired = Math.max(...sets) + hold.ttl;
    }
    const gone = Math.min(lostAt, expired);
    if (gone !== Infinity) goneAt = gone;
  }
  return { start, end, leaseEnd, lastSetSend, lostAt, goneAt };
}

/**
 * Checks `holds`; returns `{ holds, violations, lateSignals, byType, expiredWhileStopped,
 * lateExtends }`. Each violation is
 * `{ type, key, kind, message, holds: [...] }` with the holds involved (times relative
 * to the run's first request, in ms) for debugging.
 */
export function checkHistory(
  holds,
  {
    slackMs = 2,
    fairSlackMs = 20,
    signalBoundMs = 250,
    maxPerType = 50,
    pauses = [],
    stalls = [],
    outages = [],
    observations = [],
    attempts = [],
    places = [],
  } = {},
) {
  /** The time by which a signal of a hold in `client`'s process must have aborted. */
  const signalDue = (client, goneAt) => {
    const process = Number(String(client).split(".")[0]);
    const mine = [...pauses, ...stalls].filter((p) => p.process === process).sort((a, b) => a.from - b.from);
    let by = goneAt + signalBoundMs;
    for (const p of mine) if (p.from <= by && p.to >= goneAt) by = Math.max(by, p.to + signalBoundMs);
    return by;
  };
  const t0 = holds.reduce((t, h) => Math.min(t, h.acquire.send), Infinity);
  const rel = (t) => (Number.isFinite(t) ? Math.round((t - t0) * 10) / 10 : t);
  const describe = (h) => {
    const t = h.times;
    return {
      client: h.client,
      kind: h.kind,
      key: h.key,
      token: h.acquire.token,
      auto: h.auto,
      acquire: [rel(h.acquire.send), rel(h.acquire.reply)],
      live: [rel(t.start), rel(t.end)],
      extends: h.extends.map((e) => [rel(e.send), rel(e.reply), e.ok ? "ok" : e.code]),
      release: h.release
        ? [rel(h.release.send), rel(h.release.reply), h.release.ok ? "ok" : h.release.ok === null ? "pending" : (h.release.code ?? false)]
        : null,
      signal: h.signal ? [rel(h.signal.at), h.signal.reason, h.signal.code] : null,
    };
  };
  const violations = [];
  const byType = {};
  const report = (type, hs, message) => {
    byType[type] = (byType[type] ?? 0) + 1;
    if (byType[type] > maxPerType) return;
    violations.push({ type, key: hs[0].key, kind: hs[0].kind, message, holds: hs.map(describe) });
  };

  const all = holds.map((h) => ({ ...h, times: holdTimes(h, slackMs) }));
  const groups = new Map();
  for (const h of all.flatMap(perKey)) {
    const name = `${family(h.kind)}\u0000${h.key}`;
    if (!groups.has(name)) groups.set(name, []);
    groups.get(name).push(h);
  }

  for (const group of groups.values()) {
    const live = group.filter((h) => h.times.end > h.times.start).sort((a, b) => a.times.start - b.times.start);
    const fam = family(group[0].kind);
    // Sweep over certainly-live intervals: `active` holds those not yet ended.
    let active = [];
    for (const h of live) {
      active = active.filter((a) => a.times.end > h.times.start);
      if (fam === "lock" || fam === "election") {
        for (const a of active)
          report(
            "overlap",
            [a, h],
            `two holders of lock ${JSON.stringify(h.key)}, both certainly live from ${rel(h.times.start)} to ${rel(Math.min(a.times.end, h.times.end))} ms`,
          );
      } else if (fam === "semaphore") {
        const limit = h.limit ?? Infinity;
        const inUse = active.reduce((sum, a) => sum + (a.permits ?? 1), 0) + (h.permits ?? 1);
        if (inUse > limit)
          report(
            "over-limit",
            [...active, h],
            `${inUse} permits of semaphore ${JSON.stringify(h.key)} (limit ${limit}) certainly live at ${rel(h.times.start)} ms`,
          );
      } else {
        const clash = active.filter((a) => a.kind === "write" || h.kind === "write");
        if (clash.length > 0)
          report(
            "writer-with-others",
            [...clash, h],
            `a writer beside ${clash.length} other holder(s) of read-write lock ${JSON.stringify(h.key)} at ${rel(h.times.start)} ms`,
          );
      }
      active.push(h);
    }

    // Tokens in grant order: every grant whose acquire returned before B's was sent.
    const withToken = group.filter((h) => typeof h.acquire.token === "number");
    const byReply = [...withToken].sort((a, b) => a.acquire.reply - b.acquire.reply);
    const bySend = [...withToken].sort((a, b) => a.acquire.send - b.acquire.send);
    let i = 0;
    let best = null;
    for (const b of bySend) {
      while (i < byReply.length && byReply[i].acquire.reply < b.acquire.send) {
        if (best === null || byReply[i].acquire.token > best.acquire.token) best = byReply[i];
        i++;
      }
      if (best !== null && !(b.acquire.token > best.acquire.token)) {
        report("token-order", [best, b], `fencing token ${b.acquire.token} granted after token ${best.acquire.token} on ${JSON.stringify(b.key)}`);
      }
    }
  }

  let lateSignals = 0;
  // How often the faults' cases came up: holds that expired while their process was
  // stopped, and extends sent after every expiry had passed (each must fail).
  let expiredWhileStopped = 0;
  let lateExtends = 0;
  for (const h of all) {
    const t = h.times;
    // The store refused the holder while it was certainly live. (The handle itself
    // may give up the drift allowance before its TTL: not counted.)
    const drift = defaultDrift(h.ttl);
    for (const e of h.extends) {
      if (e.code === "LOCK_NOT_HELD" && e.reply < t.leaseEnd - drift && !(h.release && h.release.send < e.send)) {
        report("held-but-refused", [h], `an extend answered LOCK_NOT_HELD at ${rel(e.reply)} ms; the hold was certainly live until ${rel(t.leaseEnd)} ms`);
      }
    }
    if (h.release && h.release.ok === false && h.release.code === null && h.release.reply < t.leaseEnd - drift) {
      report(
        "held-but-refused",
        [h],
        `the holder's own release answered false at ${rel(h.release.reply)} ms; the hold was certainly live until ${rel(t.leaseEnd)} ms`,
      );
    }
    // Never early.
    if (h.signal) {
      if (h.signal.reason === "lost" && h.signal.at < t.leaseEnd - drift && !(h.release && h.release.send <= h.signal.at)) {
        report(
          "early-signal",
          [h],
          `the signal aborted as lost (${h.signal.code}) at ${rel(h.signal.at)} ms; the hold was certainly live until ${rel(t.leaseEnd)} ms (less ${drift} ms of drift allowance)`,
        );
      }
      if (h.signal.reason === "released" && !(h.release && h.release.send <= h.signal.at)) {
        report("early-signal", [h], `the signal aborted as released at ${rel(h.signal.at)} ms, before release() was called`);
      }
    }
    // Promptly late.
    if (t.goneAt !== null) {
      const by = signalDue(h.client, t.goneAt);
      const at = h.signal ? h.signal.at : Infinity;
      if (at > by && (h.signal || h.endAt > by)) {
        lateSignals += 1;
        report(
          "late-signal",
          [h],
          h.signal
            ? `the signal aborted at ${rel(at)} ms, ${Math.round(at - t.goneAt)} ms after the hold was certainly gone (${rel(t.goneAt)} ms); the bound is ${signalBoundMs} ms`
            : `the signal never aborted; the hold was certainly gone at ${rel(t.goneAt)} ms`,
        );
      }
    }
    // Nothing succeeds after lost.
    for (const e of h.extends) {
      if (e.ok && e.send > t.lostAt)
        report("after-lost", [h], `an extend sent at ${rel(e.send)} ms succeeded after the handle said lost at ${rel(t.lostAt)} ms`);
    }
    // Expired while its process was stopped: the signal says lost.
    if (!h.auto && pauses.length > 0) {
      const process = Number(String(h.client).split(".")[0]);
      const sets = [h.acquire.reply, ...h.extends.filter((e) => e.ok || e.code !== "LOCK_NOT_HELD").map((e) => e.reply)];
      const goneBy = Math.max(...sets) + h.ttl + slackMs;
      const stop = pauses.find((p) => p.process === process && p.from <= goneBy && p.to >= goneBy);
      // A stop takes effect after the parent noted it (`from`, on the parent's clock): a
      // release sent up to `slackMs` later may have been applied before it, with the hold live.
      const releasedBefore = Boolean(h.release && h.release.send < stop?.from + slackMs);
      if (stop && !releasedBefore) expiredWhileStopped += 1;
      if (stop && !releasedBefore && h.signal?.reason !== "lost") {
        report(
          "not-reported-lost",
          [h],
          `the hold expired by ${rel(goneBy)} ms while its process was stopped (${rel(stop.from)}–${rel(stop.to)} ms); its signal ${h.signal ? `aborted as ${h.signal.reason}` : "never aborted"}`,
        );
      }
    }
    // Nor once every expiry set before it has passed.
    if (!h.auto) {
      let setBy = h.acquire.reply;
      for (const e of h.extends) {
        const goneBy = setBy + h.ttl + slackMs;
        if (e.send > goneBy) lateExtends += 1;
        if (e.ok && e.send > goneBy) {
          report("extend-after-gone", [h], `an extend sent at ${rel(e.send)} ms succeeded; every expiry set before it had passed by ${rel(goneBy)} ms`);
        }
        if (e.ok || e.code !== "LOCK_NOT_HELD") setBy = Math.max(setBy, e.reply);
      }
    }
  }
  checkFairPlaces(places, {
    slackMs,
    report: (key, message, seen) => {
      byType["fair-order"] = (byType["fair-order"] ?? 0) + 1;
      if (byType["fair-order"] <= maxPerType)
        violations.push({
          type: "fair-order",
          key,
          kind: seen[0].kind,
          message,
          places: seen.map((p) => ({ ...p, answers: p.answers.length, first: rel(p.first), queued: rel(p.queued) })),
        });
    },
  });
  // Processes whose places were recorded: their fair records are checked by those (a
  // process killed before it wrote them out is held to the send-time rule).
  const recorded = new Set(places.map((p) => p.process));
  checkFairOrder(holds, attempts, {
    placed: (r) => r.placed === true && recorded.has(Number(String(r.client).split(".")[0])),
    slackMs: fairSlackMs,
    held: (process, from, to) =>
      [...pauses, ...stalls].some((p) => p.process === process && p.from < to && p.to > from) || outages.some((o) => o.from < to && o.to > from),
    report: (type, key, message, seen) => {
      byType[type] = (byType[type] ?? 0) + 1;
      if (byType[type] <= maxPerType)
        violations.push({
          type,
          key,
          kind: seen[0].kind,
          message,
          acquires: seen.map((a) => ({ ...a, send: rel(a.send), end: rel(a.end), granted: rel(a.granted) })),
        });
    },
  });
  checkObservations(observations, all, attempts, {
    slackMs,
    report: (type, key, message, seen) => {
      byType[type] = (byType[type] ?? 0) + 1;
      if (byType[type] <= maxPerType)
        violations.push({ type, key, kind: "election", message, observations: seen.map((o) => ({ ...o, send: rel(o.send), reply: rel(o.reply) })) });
    },
  });
  return { holds: holds.length, violations, lateSignals, byType, expiredWhileStopped, lateExtends, observations: observations.length };
}

/**
 * The fair-order check (see the top of this file) over fair `holds` and `attempts`.
 * `held(process, from, to)`: that process was stopped or stalled, or the store was out, at some time in between.
 */
function checkFairOrder(holds, attempts, { slackMs, held, placed, report }) {
  // (Records whose store's answers on places were kept are checked by those: checkFairPlaces.)
  const acquires = [
    ...holds
      .filter((h) => h.fair && !placed(h))
      .map((h) => ({ client: h.client, kind: h.kind, key: h.key, send: h.acquire.send, timeout: h.timeout, end: h.acquire.reply, granted: h.acquire.reply })),
    ...attempts
      .filter((a) => a.fair && !placed(a))
      .map((a) => ({
        client: a.client,
        kind: a.kind,
        key: a.key,
        send: a.send,
        timeout: a.timeout,
        // (`endAt`: its process was killed with the attempt in flight.)
        end: Math.min(a.reply ?? Infinity, a.abortAt ?? Infinity, a.endAt ?? Infinity),
        granted: null,
      })),
  ];
  const byKey = new Map();
  for (const a of acquires) {
    const name = `${family(a.kind)}:${a.key}`;
    if (!byKey.has(name)) byKey.set(name, []);
    byKey.get(name).push(a);
  }
  for (const list of byKey.values()) {
    const waiters = list.filter((a) => a.timeout > 0);
    for (const b of list) {
      if (b.granted === null) continue;
      for (const a of waiters) {
        const waitEnd = Math.min(a.end, a.send + a.timeout);
        if (a === b || !(a.send + slackMs < b.send) || !(b.granted < waitEnd - slackMs)) continue;
        if (held(Number(String(a.client).split(".")[0]), a.send, b.granted)) continue;
        report(
          "fair-order",
          b.key,
          `${b.kind} ${JSON.stringify(b.key)} was granted to an acquire sent ${Math.round(b.send - a.send)} ms after another that was still waiting (its wait ended ${Math.round(waitEnd - b.granted)} ms later)`,
          [a, b],
        );
        break;
      }
    }
  }
}

/**
 * The fair-order check over the places a JS store answered for (client.mjs recordPlaces):
 * an owner B that first asked after owner A's place was answered (A waiting in the same
 * queue) is not granted while A's place certainly stood: from before B's grant was sent
 * to after it was answered, A had neither given its place up nor been granted, and A's
 * place had stood without a break since its first answer — each answer came before the
 * one before it could have run out (a place lasts `ttl` from the send of each attempt that
 * kept it; one that ran out was taken again at the end) — up to an answer before that
 * window that renewed it past the window's end.
 */
function checkFairPlaces(places, { slackMs, report }) {
  // When `a`'s place, as it stood unbroken from `from` to `to`, was first answered (a place
  // that may have run out between two answers was taken again at the end by the second);
  // undefined when it did not certainly stand throughout.
  const placedSince = (a, from, to) => {
    const answers = [...a.answers].sort((x, y) => x[0] - y[0]);
    let since;
    let lasts = Number.NEGATIVE_INFINITY; // until when the place certainly stands, as renewed so far
    for (const [send, reply] of answers) {
      if (reply > from) break;
      if (reply > lasts) since = reply;
      lasts = Math.max(lasts, send + a.ttl);
    }
    return lasts > to ? since : undefined;
  };
  const byQueue = new Map();
  for (const p of places) {
    const name = `${p.kind}:${p.key}`;
    if (!byQueue.has(name)) byQueue.set(name, []);
    byQueue.get(name).push(p);
  }
  for (const list of byQueue.values()) {
    const waiting = list.filter((p) => p.queued !== null);
    for (const b of list) {
      if (b.grant === null) continue;
      const from = b.grant.send - slackMs;
      const to = b.grant.reply + slackMs;
      for (const a of waiting) {
        if (a === b || (a.end ?? Infinity) <= to || (a.grant !== null && a.grant.send <= to)) continue;
        const since = placedSince(a, from, to);
        if (since === undefined || !(b.first > since + slackMs)) continue;
        report(
          b.key,
          `${b.kind} ${JSON.stringify(b.key)} was granted to an owner that first asked ${Math.round(b.first - since)} ms after another's place was answered, while that place stood`,
          [a, b],
        );
        break;
      }
    }
  }
}

/**
 * The observation checks (see the top of this file); `holds` with their times, `attempts`
 * the acquires that were aborted, failed, or in flight when their process was killed.
 */
function checkObservations(observations, holds, attempts, { slackMs, report }) {
  const byKey = new Map();
  for (const o of observations) {
    if (o.term === null || o.term === undefined || o.reply === null) continue;
    if (!byKey.has(o.key)) byKey.set(o.key, []);
    byKey.get(o.key).push(o);
  }
  for (const [key, seen] of byKey) {
    // term-went-back: the largest term among reads that had returned before each read began.
    const byReply = [...seen].sort((a, b) => a.reply - b.reply);
    const bySend = [...seen].sort((a, b) => a.send - b.send);
    let i = 0;
    let top = null;
    for (const o of bySend) {
      while (i < byReply.length && byReply[i].reply < o.send) {
        if (top === null || byReply[i].term > top.term) top = byReply[i];
        i += 1;
      }
      if (top !== null && o.term < top.term) {
        report(
          "term-went-back",
          key,
          `a read of election ${JSON.stringify(key)} begun at ${o.send} saw term ${o.term}; a read that had returned before it saw ${top.term}`,
          [top, o],
        );
      }
    }
    // phantom-leader: a term no grant of this election could account for during the read.
    const leaders = holds.filter((h) => h.kind === "election" && h.key === key);
    for (const o of seen) {
      const grants = leaders.filter((h) => h.acquire.token === o.term);
      const possible = grants.some((h) => {
        if (h.acquire.send > o.reply + slackMs) return false;
        // Certainly gone once its release answered true. A leadership lost may still be on
        // the store until an extend that lands late runs out: only the end of the run bounds it.
        const released = h.release?.ok === true ? h.release.reply : Infinity;
        const runEnd = h.endAt === null || h.endAt === undefined ? Infinity : h.endAt + h.ttl;
        return Math.min(released, runEnd) + slackMs >= o.send;
      });
      // A term no grant recorded may be a campaign's that was aborted or failed while the
      // store granted it: that hold lives until its clean-up releases it, or its TTL.
      // Its term is then larger than every term granted before that campaign began (tokens
      // grow), which a stale read's is not; it may have landed late, so no time bounds it after.
      // A campaign that won may have been granted before, too, and given that back (a grant
      // whose record the store could not keep, an attempt answered too late): such a term is
      // below the one it won with, and was gone before the win.
      const campaigns = [
        ...attempts.filter((a) => a.kind === "election" && a.key === key).map((a) => ({ send: a.send, gone: Infinity })),
        ...leaders.filter((h) => h.acquire.token !== null && h.acquire.token > o.term).map((h) => ({ send: h.acquire.send, gone: h.acquire.reply })),
      ];
      const unowned =
        grants.length === 0 &&
        campaigns.some(
          (a) =>
            a.send <= o.reply + slackMs &&
            o.send <= a.gone + slackMs &&
            leaders.every((h) => h.acquire.reply >= a.send - slackMs || h.acquire.token === null || h.acquire.token < o.term) &&
            // ... and smaller than every term granted to a campaign begun after the read returned.
            leaders.every((h) => h.acquire.send <= o.reply + slackMs || h.acquire.token === null || h.acquire.token > o.term),
        );
      if (!possible && !unowned) {
        report(
          "phantom-leader",
          key,
          `a read of election ${JSON.stringify(key)} saw term ${o.term}, which no leader${grants.length === 0 ? " was ever granted" : " held"} during the read`,
          [o],
        );
      }
    }
  }
}

/**
 * The holds left on the store at the end of a run that nobody owns. `listed` is what the
 * store held (the CLI's `list --json` rows: `{ key, kind, remainingMs, owner }`, the owner
 * as its fingerprint), read from `listedAt` on the run's clock; `holds` the run's records
 * (each with its owner's fingerprint); `before` the rows listed before the run (another
 * run's, not this one's). Every client has released all it held by then, so a hold left
 * is an orphan unless a client recorded it as granted and its release did not answer
 * true, and it ends no later than that hold could have set it to: the release's reply
 * (or the end of the run) + its TTL + `slackMs`. A hold of an acquire that answered
 * false, failed or was aborted has no grant to match: an orphan. Returns
 * `[{ key, kind, remainingMs, owner, why }]`.
 */
export function checkOrphans(listed, holds, { listedAt, before = [], slackMs = 50 }) {
  const old = new Set(before.map((h) => `${h.key}\u0000${h.kind}\u0000${h.owner}`));
  const byOwner = new Map();
  for (const h of holds) {
    if (!h.owner) continue;
    if (!byOwner.has(h.owner)) byOwner.set(h.owner, []);
    byOwner.get(h.owner).push(h);
  }
  const orphans = [];
  for (const row of listed) {
    if (old.has(`${row.key}\u0000${row.kind}\u0000${row.owner}`)) continue;
    const grants = (byOwner.get(row.owner) ?? []).filter((h) => h.key === row.key || h.keys?.includes(row.key));
    if (grants.length === 0) {
      orphans.push({ ...row, why: "no client recorded its owner as granted (an acquire that answered false, failed or was aborted took it)" });
      continue;
    }
    const open = grants.filter((h) => h.release?.ok !== true);
    if (open.length === 0) {
      orphans.push({ ...row, why: "its owner's holds were all released (true): something set it again after" });
      continue;
    }
    const latest = Math.max(...open.map((h) => (h.release?.reply ?? h.endAt ?? Infinity) + h.ttl + slackMs));
    if (row.remainingMs === null || listedAt + row.remainingMs > latest) {
      // An auto-extended hold whose release failed: extended after its release answered.
      const extendedAfter = open.some((h) => h.auto && h.release?.ok === false);
      orphans.push({
        holds: open.map((h) => ({ client: h.client, kind: h.kind, auto: h.auto, release: h.release, extends: h.extends?.length ?? 0, signal: h.signal })),
        ...row,
        why: `it runs ${row.remainingMs === null ? "forever" : `until ${Math.round(listedAt + row.remainingMs - latest)} ms past`} the latest expiry its owner's unreleased holds could have set${extendedAfter ? " (an auto-extended hold whose release failed: extended after that)" : ""}`,
      });
    }
  }
  return orphans;
}
