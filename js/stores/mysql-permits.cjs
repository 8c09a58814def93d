"use strict";
// MySqlLockStore's semaphores and read-write locks (acquirePermit) and its fair locks and
// semaphores (`{ fair: true }`: the store contract's `acquireFair`, `releaseFair`,
// `extendFair`), as functions over what the store lends them (`s`: its table names
// `sql`, `transaction(what, fn, internal)`, `run(what, fn)`, `serialize(connection, set,
// key)`, `drawToken(connection)` and `endExpiredWriters(connection, set, key)`).
//
// Fair queues are kept as PostgreSQL's are (js/stores/postgres-permits.cjs says how, and
// sql-core's decideFair decides): a waiter's place is a permits row of role 'place',
// ordered by a number drawn from the fencing counter, leased for the TTL from its
// latest attempt; a fair semaphore's holder has role 'fair'; a fair lock's hold is its
// locks row beside a 'mark' row that expires with it. What serializes a fair attempt
// with the plain ones of its key: a fair semaphore's, the key's row lock (as
// acquirePermit's); a fair lock's, its locks row's lock, which a plain acquire takes too
// (its INSERT ... ON DUPLICATE KEY UPDATE), so a plain acquire reads the queue after
// every fair attempt before it, and the other way round. MySQL has no NOTIFY: waiters
// ask again at their retryDelay, and a fair waiter at least three times per TTL.

const { fairKey, limitMismatch, unfairHolder } = require("../gen/api.cjs");
const core = require("./sql-core.cjs");
const { NOW_MS } = require("./sql-mysql.cjs");

/** A VARBINARY column's value (a Buffer from mysql2) as text. */
const text = (value) => (Buffer.isBuffer(value) ? value.toString("utf8") : String(value));

/**
 * The rows an UPDATE matched: from the server's info text when it sends one ("Rows
 * matched: 1 Changed: 0"), since `affectedRows` counts only the changed rows on a
 * connection without the FOUND_ROWS flag (an extend within the millisecond of the last
 * one changes nothing, yet found the hold).
 */
function matchedRows(result) {
  const found = /Rows matched: (\d+)/.exec(result?.info ?? "");
  return found ? Number(found[1]) : Number(result?.affectedRows ?? 0);
}

/** A permits row as sql-core decides on it. */
const permitRow = (r) => ({
  owner: text(r.owner),
  role: r.role,
  limit: r.semaphore_limit === null ? null : Number(r.semaphore_limit),
  permits: Number(r.permits),
  arrival: r.fencing_token === null ? null : Number(r.fencing_token),
});

/** Writes `owner`'s permits row of `set:key` in `role` (a hold, a claim, a place). */
function upsertPermit(s, c, set, key, owner, role, ttlMs, token, limit, weight) {
  return c.query(
    `INSERT INTO ${s.sql.permits} (kind, \`key\`, owner, role, expires_at, fencing_token, semaphore_limit, permits)
     VALUES (?, ?, ?, ?, ${NOW_MS} + ?, ?, ?, ?)
     ON DUPLICATE KEY UPDATE role = VALUES(role), expires_at = VALUES(expires_at), fencing_token = VALUES(fencing_token),
       semaphore_limit = VALUES(semaphore_limit), permits = VALUES(permits)`,
    [set, key, owner, role, ttlMs, token, limit, weight],
  );
}

/**
 * `acquirePermit()` of a semaphore or read-write lock (`set` "semaphore" or "rw"), in a
 * transaction under the key's row lock: the hold's fencing token, or false (sql-core's
 * decidePermit decides). `free` is the clean-up this attempt took over, run first;
 * `settled` the handlers that end it (Cleanups.settled); `internal` as the store's
 * transaction() takes it (a call admitted before close()).
 */
async function acquirePermit(s, key, owner, ttlMs, kind, set, limit, weight, { free, settled, internal }) {
  const table = s.sql.permits;
  const token = await s
    .transaction(
      "acquirePermit",
      async (c) => {
        await free?.(c);
        await s.serialize(c, set, key);
        // A writer's hold that ran out (no release told us): the waiting readers' turn.
        await s.endExpiredWriters(c, set, key);
        const [all] = await c.query(
          `SELECT owner, role, semaphore_limit, permits, fencing_token, expires_at > ${NOW_MS} AS live FROM ${table} WHERE kind = ? AND \`key\` = ?`,
          [set, key],
        );
        const rows = all.filter((r) => Number(r.live) === 1).map(permitRow);
        const { admitted, held, heldLimit, wait, fair } = core.decidePermit(rows, kind, owner, limit, weight);
        if (held) return false;
        if (heldLimit !== undefined || fair) return { rollback: { heldLimit, fair } };
        if (admitted) {
          // A writer's own claim, or a reader's turn, becomes its hold (same primary key).
          const token = await s.drawToken(c);
          await upsertPermit(s, c, set, key, owner, kind, ttlMs, token, kind === "semaphore" ? limit : null, weight);
          return token;
        }
        // A waiting reader keeps its turn if it has one; a waiting writer's claim keeps new
        // readers out until it expires (the first waiting writer's only).
        if (wait !== undefined) await upsertPermit(s, c, set, key, owner, wait, ttlMs, null, null, weight);
        return false;
      },
      internal,
    )
    .then(...settled);
  if (token?.fair) throw fairKey("semaphore", key);
  if (token !== null && typeof token === "object") throw limitMismatch(key, token.heldLimit, limit);
  return token;
}

/**
 * One attempt of a fair handle (`set` "lock" or "semaphore"), in a transaction under the
 * key's lock: the hold's fencing token, or false. The rest as acquirePermit's.
 */
async function acquireFair(s, key, owner, ttlMs, set, limit, weight, waits, { free, settled, internal }) {
  const { locks, permits } = s.sql;
  const answer = await s
    .transaction(
      "acquireFair",
      async (c) => {
        await free?.(c);
        if (set === "lock") {
          // The locks row's lock, as a plain acquire takes it (a row made here, if none, is
          // a hold that expired long ago).
          await c.query(
            `INSERT INTO ${locks} (\`key\`, owner, expires_at, fencing_token) VALUES (?, '', 0, NULL)
             ON DUPLICATE KEY UPDATE fencing_token = fencing_token`,
            [key],
          );
        } else {
          await s.serialize(c, set, key);
        }
        // The key's rows and, for a lock, its holder, in one statement: on one reading of
        // the clock (a hold and its mark expire together).
        const [all] = await c.query(
          `SELECT owner, role, semaphore_limit, permits, fencing_token FROM ${permits}
             WHERE kind = ? AND \`key\` = ? AND expires_at > ${NOW_MS}
           UNION ALL
           SELECT owner, 'holder', NULL, 1, fencing_token FROM ${locks}
             WHERE ? = 'lock' AND \`key\` = ? AND expires_at > ${NOW_MS}`,
          [set, key, set, key],
        );
        const rows = all.filter((r) => r.role !== "holder").map(permitRow);
        const holder = all.find((r) => r.role === "holder");
        const decided = core.decideFair(rows, set, owner, limit, weight, waits, holder === undefined ? null : text(holder.owner));
        if (decided.unfair || decided.heldLimit !== undefined) return { rollback: decided };
        if (decided.held) return false;
        if (decided.grant) {
          const token = await s.drawToken(c);
          if (set === "lock") {
            await c.query(`UPDATE ${locks} SET owner = ?, expires_at = ${NOW_MS} + ?, fencing_token = ? WHERE \`key\` = ?`, [owner, ttlMs, token, key]);
            // The mark expires with the hold: the same number, copied on the server.
            await c.query(
              `INSERT INTO ${permits} (kind, \`key\`, owner, role, expires_at, fencing_token)
               SELECT 'lock', \`key\`, owner, 'mark', expires_at, fencing_token FROM ${locks} WHERE \`key\` = ?
               ON DUPLICATE KEY UPDATE role = VALUES(role), expires_at = VALUES(expires_at), fencing_token = VALUES(fencing_token)`,
              [key],
            );
          } else {
            // Its place (the same primary key) becomes its hold.
            await upsertPermit(s, c, set, key, owner, "fair", ttlMs, token, limit, weight);
          }
          return token;
        }
        if (decided.place === "renew") {
          await c.query(`UPDATE ${permits} SET expires_at = ${NOW_MS} + ? WHERE kind = ? AND \`key\` = ? AND owner = ?`, [ttlMs, set, key, owner]);
        } else if (decided.place === "take") {
          // At the end of the line: a number larger than every place's.
          await upsertPermit(s, c, set, key, owner, "place", ttlMs, await s.drawToken(c), null, weight);
        } else if (decided.place === "drop") {
          await c.query(`DELETE FROM ${permits} WHERE kind = ? AND \`key\` = ? AND owner = ? AND role = 'place'`, [set, key, owner]);
        }
        return false;
      },
      internal,
    )
    .then(...settled);
  if (answer?.unfair) throw unfairHolder(set, key);
  if (answer?.heldLimit !== undefined) throw limitMismatch(key, answer.heldLimit, limit);
  return answer;
}

/**
 * Frees the fair lock `key` if `owner` holds it (its row stays, expired now, as a plain
 * release leaves it), with its mark, and gives up the owner's place (a fair wait that
 * ended): whether it held the lock.
 */
function releaseFair(s, key, owner) {
  const { locks, permits } = s.sql;
  return s.transaction("releaseFair", async (c) => {
    const [result] = await c.query(`UPDATE ${locks} SET expires_at = ${NOW_MS} WHERE \`key\` = ? AND owner = ? AND expires_at > ${NOW_MS}`, [key, owner]);
    await c.query(`DELETE FROM ${permits} WHERE kind = 'lock' AND \`key\` = ? AND owner = ?`, [key, owner]);
    return matchedRows(result) > 0;
  });
}

/**
 * Moves the expiry of `owner`'s fair lock `key`, and of its mark, to `ttlMs` from now, in
 * one statement (one reading of the clock: the mark's expiry is the hold's): whether it
 * held it.
 */
async function extendFair(s, key, owner, ttlMs) {
  const { locks, permits } = s.sql;
  const [result] = await s.run("extendFair", (c) =>
    c.query(
      `UPDATE ${locks} AS l
         LEFT JOIN ${permits} AS p ON p.kind = 'lock' AND p.\`key\` = l.\`key\` AND p.owner = l.owner AND p.role = 'mark'
       SET l.expires_at = ${NOW_MS} + ?, p.expires_at = ${NOW_MS} + ?
       WHERE l.\`key\` = ? AND l.owner = ? AND l.expires_at > ${NOW_MS}`,
      [ttlMs, ttlMs, key, owner],
    ),
  );
  return matchedRows(result) > 0;
}

module.exports = { acquireFair, acquirePermit, extendFair, matchedRows, releaseFair, text };
