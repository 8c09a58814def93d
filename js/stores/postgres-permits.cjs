"use strict";
// PostgresLockStore's fair locks and semaphores (`{ fair: true }`: the store contract's
// `acquireFair`, `releaseFair`, `extendFair`), as functions over what the store lends
// them (`s`: its table names `sql`, `transaction(what, fn)`, `run(what, fn)` and
// `serialize(client, name)`).
//
// A key's fair queue is its places: permits rows of role 'place' (kind 'lock' for a fair
// lock, 'semaphore' for a semaphore), one per waiter, ordered by the number each drew from
// the fencing sequence when it joined (kept in its fencing_token column), each leased
// until its waiter's latest attempt + the TTL: a waiter that stops asking (crashed,
// paused) loses its place when that lease runs out. Every attempt is one transaction
// under the key's advisory lock (the one plain acquires of the key take too), which reads
// the key's rows and lets sql-core's decideFair say what to do: grant (the owner's place
// heads the queue, or nobody waits, and the key has room), renew or take the owner's
// place, or drop it (an attempt that does not wait).
//
// - A fair semaphore's holder is a permits row of role 'fair' (a place turns into it: the
//   same primary key), which the permit methods release, extend and count as any holder.
// - A fair lock's hold is a locks row as a plain lock's is (release, extend, holder() and
//   the CLI read it as any), beside a permits row of role 'mark' (kind 'lock', the same
//   owner, expiring with the hold: extendFair moves both), which says it is fair.
// - Fairness belongs to the key: while a fair hold, mark or place lives, a plain acquire,
//   acquireAll or acquirePermit of the key is refused (InvalidArgumentError), and a fair
//   attempt on a key that handles that are not fair hold is refused too.
// - Uncertain outcomes as every acquire of the store: an attempt that fails without a
//   certain answer is cleaned up by the store's Cleanups (its freeOwn deletes the owner's
//   hold, mark and place), and the owner's next attempt takes that clean-up over.
// - Wake-ups: releases NOTIFY as plain ones do; a waiter that gives its place up
//   (releaseFair, releasePermit) and a fair semaphore's grant that leaves others in line
//   and permits free NOTIFY too, so the next in line asks at once.

const { fairKey, limitMismatch, unfairHolder } = require("../gen/api.cjs");
const core = require("./sql-core.cjs");

const { fromNow, nextval, toToken } = require("./sql-postgres.cjs");

/**
 * `acquirePermit()` of a semaphore or read-write lock (`set` "semaphore" or "rw"), in a
 * transaction under the key's advisory lock: the hold's fencing token, or false. A
 * semaphore holder takes `weight` of its `limit` permits, admitted while the live
 * holders' permits and its own fit the limit; read-write locks are phase-fair (sql-core's
 * decidePermit). `free` is the clean-up this attempt took over, run first, and `settled`
 * the handlers that end it (Cleanups.settled).
 */
async function acquirePermit(s, key, owner, ttlMs, kind, set, limit, weight, free, settled) {
  const { permits, sequence } = s.sql;
  const token = await s
    .transaction("acquirePermit", async (client) => {
      await free?.(client);
      await s.serialize(client, `${set}:${key}`);
      const { rows: all } = await client.query(
        `SELECT owner, role, semaphore_limit, permits, expires_at > clock_timestamp() AS live FROM ${permits} WHERE kind = $1 AND key = $2`,
        [set, key],
      );
      // A writer's hold that ran out (no release told us): the waiting readers' turn.
      if (all.some((r) => r.role === "write" && !r.live)) {
        await client.query(
          `WITH gone AS (DELETE FROM ${permits} WHERE kind = $1 AND key = $2 AND role = 'write' AND expires_at <= clock_timestamp() RETURNING 1)
         UPDATE ${permits} SET role = 'turn' WHERE kind = $1 AND key = $2 AND role = 'waiting' AND expires_at > clock_timestamp()`,
          [set, key],
        );
        for (const r of all) if (r.role === "waiting") r.role = "turn";
      }
      const rows = all.filter((r) => r.live).map((r) => ({ owner: r.owner, role: r.role, limit: r.semaphore_limit, permits: r.permits }));
      const { admitted, held, heldLimit, wait, fair: fairKeyed } = core.decidePermit(rows, kind, owner, limit, weight);
      if (held) return false;
      if (heldLimit !== undefined || fairKeyed) return { heldLimit, fairKeyed };
      if (admitted) {
        // A writer's own claim, if any, becomes its hold (same primary key).
        const { rows: inserted } = await client.query(
          `INSERT INTO ${permits} AS p (kind, key, owner, role, expires_at, fencing_token, semaphore_limit, permits)
         VALUES ($1, $2, $3, $4, ${fromNow(5)}, ${nextval(sequence)}, $6, $7)
         ON CONFLICT (kind, key, owner) DO UPDATE
           SET role = excluded.role, expires_at = excluded.expires_at, fencing_token = excluded.fencing_token,
             semaphore_limit = excluded.semaphore_limit, permits = excluded.permits
         RETURNING fencing_token`,
          [set, key, owner, kind, ttlMs, kind === "semaphore" ? limit : null, weight],
        );
        return toToken(inserted[0].fencing_token);
      }
      if (wait === "waiting") {
        await client.query(
          `INSERT INTO ${permits} AS p (kind, key, owner, role, expires_at)
         VALUES ($1, $2, $3, 'waiting', ${fromNow(4)})
         ON CONFLICT (kind, key, owner) DO UPDATE SET role = 'waiting', expires_at = excluded.expires_at, fencing_token = NULL
           WHERE p.role <> 'turn'`,
          [set, key, owner, ttlMs],
        );
      }
      if (wait === "claim") {
        await client.query(
          `INSERT INTO ${permits} AS p (kind, key, owner, role, expires_at)
         VALUES ($1, $2, $3, 'claim', ${fromNow(4)})
         ON CONFLICT (kind, key, owner) DO UPDATE SET role = 'claim', expires_at = excluded.expires_at, fencing_token = NULL`,
          [set, key, owner, ttlMs],
        );
      }
      return false;
    })
    .then(...settled);
  if (token?.fairKeyed) throw fairKey("semaphore", key);
  if (typeof token === "object") throw limitMismatch(key, token.heldLimit, limit);
  return token;
}

/**
 * One attempt of a fair handle, in a transaction under the key's advisory lock: the hold's
 * fencing token, or false. `set` is "lock" or "semaphore"; `free` and `settled` as
 * acquirePermit's.
 */
async function acquireFair(s, key, owner, ttlMs, set, limit, weight, waits, free, settled) {
  const { locks, permits, sequence, channel } = s.sql;
  const answer = await s
    .transaction("acquireFair", async (client) => {
      await free?.(client);
      await s.serialize(client, `${set}:${key}`);
      // The key's rows and, for a lock, its holder, in one statement on one reading of the
      // clock: a hold and its mark expire together (an extend moves both in one statement),
      // so no hold is read live beside its mark read expired.
      const { rows: all } = await client.query(
        `WITH c AS (SELECT clock_timestamp() AS now)
         SELECT owner, role, semaphore_limit, permits, fencing_token FROM ${permits}, c WHERE kind = $1 AND key = $2 AND expires_at > c.now
         UNION ALL
         SELECT owner, 'holder', NULL, 1, fencing_token FROM ${locks}, c WHERE $1 = 'lock' AND key = $2 AND expires_at > c.now`,
        [set, key],
      );
      const rows = all
        .filter((r) => r.role !== "holder")
        .map((r) => ({ owner: r.owner, role: r.role, limit: r.semaphore_limit, permits: r.permits, arrival: Number(r.fencing_token) }));
      const lockHolder = all.find((r) => r.role === "holder")?.owner ?? null;
      const decided = core.decideFair(rows, set, owner, limit, weight, waits, lockHolder);
      if (decided.unfair || decided.heldLimit !== undefined) return decided;
      if (decided.held) return false;
      if (decided.grant) {
        const token = set === "lock" ? await grantLock(s, client, key, owner, ttlMs) : await grantPermits(s, client, key, owner, ttlMs, limit, weight);
        // The next in line may fit beside a semaphore's new holder (if permits are left).
        if (token !== false && decided.others && decided.roomLeft) await client.query("SELECT pg_notify($1, $2)", [channel, `${set}:${key}`]);
        return token;
      }
      if (decided.place === "renew") {
        await client.query(`UPDATE ${permits} SET expires_at = ${fromNow(4)} WHERE kind = $1 AND key = $2 AND owner = $3`, [set, key, owner, ttlMs]);
      } else if (decided.place === "take") {
        // At the end of the line: a number larger than every place's (and an expired place
        // of the owner's own, if the sweep left it, gets a new one).
        await client.query(
          `INSERT INTO ${permits} AS p (kind, key, owner, role, expires_at, fencing_token, permits)
         VALUES ($1, $2, $3, 'place', ${fromNow(4)}, ${nextval(sequence)}, $5)
         ON CONFLICT (kind, key, owner) DO UPDATE
           SET role = 'place', expires_at = excluded.expires_at, fencing_token = excluded.fencing_token,
             semaphore_limit = NULL, permits = excluded.permits`,
          [set, key, owner, ttlMs, weight],
        );
      } else if (decided.place === "drop") {
        await client.query(`DELETE FROM ${permits} WHERE kind = $1 AND key = $2 AND owner = $3 AND role = 'place'`, [set, key, owner]);
        await client.query("SELECT pg_notify($1, $2)", [channel, `${set}:${key}`]);
      }
      return false;
    })
    .then(...settled);
  if (answer?.unfair) throw unfairHolder(set, key);
  if (answer?.heldLimit !== undefined) throw limitMismatch(key, answer.heldLimit, limit);
  return answer;
}

/** Takes the free lock `key` for `owner` (its place becomes the hold's mark): the token, or false. */
async function grantLock(s, client, key, owner, ttlMs) {
  const { locks, permits, sequence } = s.sql;
  await client.query(
    `INSERT INTO ${locks} AS held (key, owner, expires_at, fencing_token)
     VALUES ($1, $2, ${fromNow(3)}, NULL)
     ON CONFLICT (key) DO UPDATE
       SET owner = excluded.owner, expires_at = excluded.expires_at, fencing_token = NULL
       WHERE held.expires_at <= clock_timestamp()`,
    [key, owner, ttlMs],
  );
  // The token drawn once the hold is in place, as a plain acquire's (see its comment),
  // and the mark written from the hold's own row in the same statement: its expiry is the
  // hold's to the microsecond (a timestamp read back into JS keeps milliseconds only).
  const { rows } = await client.query(
    `WITH held AS (
       UPDATE ${locks} SET fencing_token = ${nextval(sequence)}
       WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()
       RETURNING fencing_token, expires_at
     ),
     marked AS (
       INSERT INTO ${permits} (kind, key, owner, role, expires_at, fencing_token)
       SELECT 'lock', $1, $2, 'mark', expires_at, fencing_token FROM held
       ON CONFLICT (kind, key, owner) DO UPDATE SET role = 'mark', expires_at = excluded.expires_at, fencing_token = excluded.fencing_token
       RETURNING 1
     )
     SELECT fencing_token FROM held`,
    [key, owner],
  );
  if (rows.length === 0) return false;
  return toToken(rows[0].fencing_token);
}

/** Admits `owner` with `weight` of the semaphore's `limit` permits (its place becomes the hold): the token. */
async function grantPermits(s, client, key, owner, ttlMs, limit, weight) {
  const { permits, sequence } = s.sql;
  const { rows } = await client.query(
    `INSERT INTO ${permits} AS p (kind, key, owner, role, expires_at, fencing_token, semaphore_limit, permits)
     VALUES ('semaphore', $1, $2, 'fair', ${fromNow(3)}, ${nextval(sequence)}, $4, $5)
     ON CONFLICT (kind, key, owner) DO UPDATE
       SET role = 'fair', expires_at = excluded.expires_at, fencing_token = excluded.fencing_token,
         semaphore_limit = excluded.semaphore_limit, permits = excluded.permits
     RETURNING fencing_token`,
    [key, owner, ttlMs, limit, weight],
  );
  return toToken(rows[0].fencing_token);
}

/**
 * Frees the fair lock `key` if `owner` holds it, with its mark, and gives up the owner's
 * place (a fair wait that ended): whether it held the lock. Announces either.
 */
async function releaseFair(s, key, owner) {
  return s.run("releaseFair", (client) => freeLock(s.sql, client, key, owner));
}

/**
 * Deletes `owner`'s hold of the lock `key`, with a fair lock's mark and place, on
 * `client`, and announces it if there was any: whether a live hold went. (A fair release,
 * and the clean-up after any lock acquire whose outcome was uncertain.)
 */
async function freeLock(sql, client, key, owner) {
  const { locks, permits, channel } = sql;
  const { rows } = await client.query(
    `WITH gone AS (
       DELETE FROM ${locks} WHERE key = $1 AND owner = $2 RETURNING expires_at > clock_timestamp() AS live
     ),
     left_queue AS (
       DELETE FROM ${permits} WHERE kind = 'lock' AND key = $1 AND owner = $2 RETURNING 1
     )
     SELECT (SELECT bool_or(live) FROM gone) AS live, pg_notify($3, $4)
     WHERE EXISTS (SELECT 1 FROM gone) OR EXISTS (SELECT 1 FROM left_queue)`,
    [key, owner, channel, `lock:${key}`],
  );
  return rows.length > 0 && rows[0].live === true;
}

/** Moves the expiry of `owner`'s fair lock `key`, and of its mark, to `ttlMs` from now: whether it held it. */
async function extendFair(s, key, owner, ttlMs) {
  const { locks, permits } = s.sql;
  // The mark's expiry is set to the hold's new one, exactly.
  const { rows } = await s.run("extendFair", (client) =>
    client.query(
      `WITH held AS (
         UPDATE ${locks} SET expires_at = ${fromNow(3)}
         WHERE key = $1 AND owner = $2 AND expires_at > clock_timestamp()
         RETURNING expires_at
       ),
       marked AS (
         UPDATE ${permits} SET expires_at = (SELECT expires_at FROM held)
         WHERE kind = 'lock' AND key = $1 AND owner = $2 AND role = 'mark' AND EXISTS (SELECT 1 FROM held)
         RETURNING 1
       )
       SELECT count(*)::int AS n FROM held`,
      [key, owner, ttlMs],
    ),
  );
  return rows[0].n > 0;
}

module.exports = { acquireFair, acquirePermit, extendFair, freeLock, releaseFair };
