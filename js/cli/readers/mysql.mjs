// The MySQL and MariaDB reader: what `locksmith` sees of MySqlLockStore's tables
// (js/stores/mysql.cjs), through `mysql2` when it is installed, timed by the server's clock
// as the store reads it (`NOW_MS`, js/stores/sql-mysql.cjs). Its release takes the row
// locks the store changes holds under, as the store's own release would.
import { NOW_MS } from "../../stores/sql-mysql.cjs";
import { address, CONNECT_TIMEOUT_MS, fingerprint, hold, StoreError, storeCall, UsageError } from "../common.mjs";
import { HOLDING, keptValue, likeOf, optionalImport, tablesOf, waits } from "./sql.mjs";

const quote = (identifier) => `\`${identifier}\``;
const REMAINING_MS = `expires_at - ${NOW_MS}`;
const bytesText = (value) => (Buffer.isBuffer(value) ? value.toString("utf8") : String(value));

const mysqlHold = (r, kind) =>
  hold(bytesText(r.key), kind, Number(r.remaining_ms), r.fencing_token === null ? null : Number(r.fencing_token), bytesText(r.owner), r.permits);
// A permits row's hold as reported: a fair semaphore's holder (role 'fair') is a semaphore's.
const permitHold = (r) => mysqlHold(r, r.role === "fair" ? "semaphore" : r.role);

export class MySqlReader {
  #db;
  #locks;
  #permits;
  #keys;
  #where;

  static async open(url, { table }) {
    const mysql = await optionalImport("mysql2/promise", "MySQL");
    if (!mysql) throw new UsageError("MySQL URLs need mysql2: npm install mysql2");
    const parsed = new URL(url);
    const where = address(parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "localhost", parsed.port || 3306);
    let db;
    try {
      db = await (mysql.default ?? mysql).createConnection({ uri: url, connectTimeout: CONNECT_TIMEOUT_MS, supportBigNumbers: true });
    } catch (err) {
      // A server that answered and refused (an SQLSTATE: the login, no such database).
      if (typeof err?.sqlState === "string") throw new StoreError(`MySQL at ${where} refused the connection: ${err.message}`);
      throw new StoreError(`could not reach MySQL at ${where}: ${err.message}`);
    }
    db.on("error", () => {});
    return new MySqlReader(db, table, where);
  }

  constructor(db, table, where) {
    this.#db = db;
    ({ locks: this.#locks, permits: this.#permits, keys: this.#keys } = tablesOf(table, quote));
    this.#where = `MySQL at ${where}`;
  }

  async #query(sql, params) {
    const [rows] = await this.#db.query({ sql, timeout: CONNECT_TIMEOUT_MS }, params);
    return rows;
  }

  #holdsWhere(condition, value) {
    return Promise.all([
      // Whole rows: tables made before the value columns have none (keptValue).
      this.#query(
        `SELECT l.*, ${REMAINING_MS} AS remaining_ms FROM ${this.#locks} AS l
          WHERE expires_at > ${NOW_MS} AND \`key\` ${condition} ? ORDER BY \`key\``,
        [value],
      ),
      // role: semaphore, fair (a fair semaphore's), read or write; a waiting writer's claim,
      // waiting readers, a fair waiter's place and a fair lock's mark hold nothing.
      this.#query(
        `SELECT \`key\`, role, owner, fencing_token, semaphore_limit, permits, ${REMAINING_MS} AS remaining_ms FROM ${this.#permits}
          WHERE expires_at > ${NOW_MS} AND role IN ${HOLDING} AND \`key\` ${condition} ?
          ORDER BY \`key\`, role, owner`,
        [value],
      ),
    ]).then(([locks, permits]) => ({ locks, permits }));
  }

  list(pattern) {
    return storeCall(this.#where, async () => {
      const { locks, permits } = await this.#holdsWhere("LIKE", likeOf(pattern));
      return [...locks.map((r) => mysqlHold(r, "lock")), ...permits.map(permitHold)];
    });
  }

  snapshot(pattern) {
    return storeCall(this.#where, async () => {
      const [holds, counts] = await Promise.all([
        this.list(pattern),
        this.#query(
          `SELECT \`key\`, SUM(role NOT IN ${HOLDING} AND role <> 'mark') AS waiting FROM ${this.#permits}
            WHERE (kind = 'rw' OR role IN ('place', 'mark', 'fair')) AND expires_at > ${NOW_MS} AND \`key\` LIKE ? GROUP BY \`key\``,
          [likeOf(pattern)],
        ),
      ]);
      // Read-write locks and fair queues only: a plain lock's or semaphore's waiters leave no rows.
      return { holds, waiters: new Map(counts.map((r) => [bytesText(r.key), Number(r.waiting)])), absentWaiters: null };
    });
  }

  inspect(key) {
    return storeCall(this.#where, async () => {
      const [{ locks, permits }, rw, fair] = await Promise.all([
        this.#holdsWhere("=", key),
        this.#query(
          `SELECT role, owner, ${REMAINING_MS} AS remaining_ms FROM ${this.#permits}
            WHERE kind = 'rw' AND \`key\` = ? AND expires_at > ${NOW_MS} ORDER BY role, owner`,
          [key],
        ),
        // A fair queue's places in line (by the number each drew when it joined), and marks.
        this.#query(
          `SELECT kind, role, owner, ${REMAINING_MS} AS remaining_ms FROM ${this.#permits}
            WHERE kind IN ('lock', 'semaphore') AND role IN ('place', 'mark', 'fair') AND \`key\` = ? AND expires_at > ${NOW_MS}
            ORDER BY kind, fencing_token`,
          [key],
        ),
      ]);
      const waiting = [
        ...rw
          .filter(waits)
          .map((r) => ({ kind: r.role === "claim" ? "write" : "read", owner: fingerprint(bytesText(r.owner)), remainingMs: Number(r.remaining_ms) })),
        ...fair
          .filter((r) => r.role === "place")
          .map((r) => ({ kind: bytesText(r.kind), owner: fingerprint(bytesText(r.owner)), remainingMs: Number(r.remaining_ms) })),
      ];
      const semaphore = permits.find((r) => r.role === "semaphore" || r.role === "fair");
      return {
        holders: [...locks.map((r) => ({ ...mysqlHold(r, "lock"), value: keptValue(r) })), ...permits.map(permitHold)],
        limit: semaphore?.semaphore_limit == null ? null : Number(semaphore.semaphore_limit),
        waiting,
        // Only a read-write lock's waiters and a fair queue's leave rows; a plain lock's or
        // semaphore's none.
        waiters: rw.length > 0 || fair.length > 0 ? waiting.length : null,
      };
    });
  }

  release(key) {
    return storeCall(this.#where, async () => {
      // Under the row locks the store decides each kind of hold under (js/stores/mysql.cjs):
      // the lock's own row, and the semaphore's and read-write lock's rows in <table>_keys.
      await this.#query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
      await this.#query("START TRANSACTION");
      try {
        // The row's lock whatever its expiry (a fair grant takes it too, so none is under
        // way while this runs), then the live hold, if any.
        const rows = await this.#query(
          `SELECT \`key\`, owner, fencing_token, ${REMAINING_MS} AS remaining_ms, expires_at > ${NOW_MS} AS live FROM ${this.#locks}
            WHERE \`key\` = ? FOR UPDATE`,
          [key],
        );
        const locks = rows.filter((r) => Number(r.live) === 1);
        // Expired, not deleted, as the store's own release does, with a fair hold's mark
        // (the key's waiters stay in line).
        for (const r of locks) {
          await this.#query(`UPDATE ${this.#locks} SET expires_at = ${NOW_MS} WHERE \`key\` = ?`, [key]);
          await this.#query(`DELETE FROM ${this.#permits} WHERE kind = 'lock' AND \`key\` = ? AND owner = ? AND role = 'mark'`, [key, r.owner]);
        }
        for (const set of ["semaphore", "rw"]) {
          await this.#query(`INSERT INTO ${this.#keys} (kind, \`key\`) VALUES (?, ?) ON DUPLICATE KEY UPDATE kind = kind`, [set, key]);
        }
        const permits = await this.#query(
          `SELECT \`key\`, kind, role, owner, fencing_token, permits, ${REMAINING_MS} AS remaining_ms FROM ${this.#permits}
            WHERE \`key\` = ? AND role IN ${HOLDING} AND expires_at > ${NOW_MS}`,
          [key],
        );
        for (const r of permits) {
          await this.#query(`DELETE FROM ${this.#permits} WHERE kind = ? AND \`key\` = ? AND owner = ?`, [r.kind, key, r.owner]);
        }
        // A writer's hold ended: the readers waiting for it take their turn.
        if (permits.some((r) => r.role === "write")) {
          await this.#query(`UPDATE ${this.#permits} SET role = 'turn' WHERE kind = 'rw' AND \`key\` = ? AND role = 'waiting' AND expires_at > ${NOW_MS}`, [
            key,
          ]);
        }
        await this.#query("COMMIT");
        const owners = (r) => bytesText(r.owner);
        return [...locks.map((r) => mysqlHold(r, "lock")), ...permits.sort((a, b) => owners(a).localeCompare(owners(b))).map(permitHold)];
      } catch (err) {
        await this.#query("ROLLBACK").catch(() => {});
        throw err;
      }
    });
  }

  async close() {
    await this.#db.end().catch(() => this.#db.destroy());
  }
}
