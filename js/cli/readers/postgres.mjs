// The PostgreSQL reader: what `locksmith` sees of PostgresLockStore's tables
// (js/stores/postgres.cjs), through `pg` when it is installed. Its release takes the
// advisory locks the store changes holds under and sends the store's NOTIFY, so an
// acquire in flight sees the holds all there or all gone, and the waiters wake.
import { address, CONNECT_TIMEOUT_MS, fingerprint, hold, StoreError, storeCall, UsageError } from "../common.mjs";
import { HOLDING, keptValue, likeOf, optionalImport, tablesOf, waits } from "./sql.mjs";

const quote = (identifier) => `"${identifier}"`;
const REMAINING_MS = "ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint";

// A permits row's `permits` (a semaphore hold's weight): tables made before holds had
// weights have no such column, so the rows are read whole (`p.*`) and a row without it holds 1.
const pgHold = (r, kind) => hold(r.key, kind, Number(r.remaining_ms), r.fencing_token === null ? null : Number(r.fencing_token), r.owner, r.permits);
// A permits row's hold as reported: a fair semaphore's holder (role 'fair') is a semaphore's.
const permitHold = (r) => pgHold(r, r.role === "fair" ? "semaphore" : r.role);

export class PostgresReader {
  #client;
  // The reader's last query, settled: the next one waits for it (see #query).
  #last = Promise.resolve();
  #table;
  #tables;
  #where;

  static async open(url, { table }) {
    const pg = await optionalImport("pg", "PostgreSQL");
    if (!pg) throw new UsageError("PostgreSQL URLs need pg: npm install pg");
    const Client = pg.default?.Client ?? pg.Client;
    const parsed = new URL(url);
    const where = address(parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "localhost", parsed.port || 5432);
    const client = new Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, query_timeout: CONNECT_TIMEOUT_MS });
    client.on("error", () => {});
    try {
      await client.connect();
    } catch (err) {
      // A server that answered and refused (SQLSTATE 28xxx: the login; 3D000: no such database).
      if (typeof err?.code === "string" && /^[0-9A-Z]{5}$/.test(err.code)) {
        throw new StoreError(`PostgreSQL at ${where} refused the connection: ${err.message}`);
      }
      throw new StoreError(`could not reach PostgreSQL at ${where}: ${err.message}`);
    }
    return new PostgresReader(client, table, where);
  }

  constructor(client, table, where) {
    this.#client = client;
    this.#table = table;
    this.#tables = tablesOf(table, quote);
    this.#where = `PostgreSQL at ${where}`;
  }

  /**
   * `client.query(text, params)` after the reader's queries before it: one pg client runs
   * one query at a time (pg 9 refuses a query while another is under way).
   */
  #query(text, params) {
    const run = this.#last.then(() => this.#client.query(text, params));
    this.#last = run.catch(() => {});
    return run;
  }

  #holdsWhere(condition, value) {
    return Promise.all([
      // Whole rows: tables made before the value columns have none (keptValue).
      this.#query(
        `SELECT l.*, ${REMAINING_MS} AS remaining_ms
           FROM ${this.#tables.locks} AS l
          WHERE expires_at > clock_timestamp() AND key ${condition} $1
          ORDER BY key`,
        [value],
      ),
      // role: semaphore, fair (a fair semaphore's), read or write; a waiting writer's claim,
      // a fair waiter's place and a fair lock's mark hold nothing.
      this.#query(
        `SELECT p.*, ${REMAINING_MS} AS remaining_ms
           FROM ${this.#tables.permits} AS p
          WHERE expires_at > clock_timestamp() AND role IN ${HOLDING} AND key ${condition} $1
          ORDER BY key, role, owner`,
        [value],
      ),
    ]).then(([locks, permits]) => ({ locks: locks.rows, permits: permits.rows }));
  }

  list(pattern) {
    return storeCall(this.#where, async () => {
      const { locks, permits } = await this.#holdsWhere("LIKE", likeOf(pattern));
      return [...locks.map((r) => pgHold(r, "lock")), ...permits.map(permitHold)];
    });
  }

  snapshot(pattern) {
    return storeCall(this.#where, async () => {
      const [holds, counts] = await Promise.all([
        this.list(pattern),
        this.#query(
          `SELECT key, count(*) FILTER (WHERE role NOT IN ${HOLDING} AND role <> 'mark') AS waiting FROM ${this.#tables.permits}
            WHERE (kind = 'rw' OR role IN ('place', 'mark', 'fair')) AND expires_at > clock_timestamp() AND key LIKE $1
            GROUP BY key`,
          [likeOf(pattern)],
        ),
      ]);
      // Read-write locks and fair queues only: a plain lock's or semaphore's waiters leave no rows.
      return { holds, waiters: new Map(counts.rows.map((r) => [r.key, Number(r.waiting)])), absentWaiters: null };
    });
  }

  inspect(key) {
    return storeCall(this.#where, async () => {
      const [{ locks, permits }, rw, fair] = await Promise.all([
        this.#holdsWhere("=", key),
        this.#query(
          `SELECT role, owner, ${REMAINING_MS} AS remaining_ms FROM ${this.#tables.permits}
            WHERE kind = 'rw' AND key = $1 AND expires_at > clock_timestamp() ORDER BY role, owner`,
          [key],
        ),
        // A fair queue's places in line (by the number each drew when it joined), and marks.
        this.#query(
          `SELECT kind, role, owner, ${REMAINING_MS} AS remaining_ms FROM ${this.#tables.permits}
            WHERE kind IN ('lock', 'semaphore') AND role IN ('place', 'mark', 'fair') AND key = $1 AND expires_at > clock_timestamp()
            ORDER BY kind, fencing_token`,
          [key],
        ),
      ]);
      const waiting = [
        ...rw.rows
          .filter(waits)
          .map((r) => ({ kind: r.role === "claim" ? "write" : "read", owner: fingerprint(r.owner), remainingMs: Number(r.remaining_ms) })),
        ...fair.rows.filter((r) => r.role === "place").map((r) => ({ kind: r.kind, owner: fingerprint(r.owner), remainingMs: Number(r.remaining_ms) })),
      ];
      const semaphore = permits.find((r) => r.role === "semaphore" || r.role === "fair");
      return {
        holders: [...locks.map((r) => ({ ...pgHold(r, "lock"), value: keptValue(r) })), ...permits.map(permitHold)],
        limit: semaphore?.semaphore_limit ?? null,
        waiting,
        // Only a read-write lock's waiters (readers, and the first waiting writer's claim)
        // and a fair queue's leave rows; a plain lock's or semaphore's leave none.
        waiters: rw.rows.length > 0 || fair.rows.length > 0 ? waiting.length : null,
      };
    });
  }

  release(key) {
    const client = this.#client;
    const { locks: locksTable, permits: permitsTable, name } = this.#tables;
    return storeCall(this.#where, async () => {
      // Under the advisory locks the store decides each kind of hold under (js/stores/postgres.cjs),
      // so an acquire or extend in flight sees the holds either all there or all gone.
      const lockspace = `locksmith:${this.#table}`;
      // READ COMMITTED whatever the default: each statement sees what was committed before the advisory locks.
      await client.query("BEGIN ISOLATION LEVEL READ COMMITTED");
      try {
        for (const set of ["lock", "semaphore", "rw"]) {
          await client.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", [lockspace, `${set}:${key}`]);
        }
        const locks = await client.query(
          `DELETE FROM ${locksTable} WHERE key = $1 AND expires_at > clock_timestamp()
           RETURNING key, owner, fencing_token, ${REMAINING_MS} AS remaining_ms`,
          [key],
        );
        const permits = await client.query(
          `DELETE FROM ${permitsTable} WHERE key = $1 AND role IN ${HOLDING} AND expires_at > clock_timestamp()
           RETURNING *, ${REMAINING_MS} AS remaining_ms`,
          [key],
        );
        // A fair lock's mark goes with its hold (the key's waiters stay in line).
        await client.query(`DELETE FROM ${permitsTable} WHERE kind = 'lock' AND key = $1 AND role = 'mark'`, [key]);
        // Waiters listen on the channel named like the table (without its schema), for
        // `<lock|semaphore|rw>:<key>`; notifications go out at commit.
        const sets = new Set(permits.rows.map((r) => r.kind));
        if (locks.rows.length > 0) sets.add("lock");
        for (const set of sets) await client.query("SELECT pg_notify($1, $2)", [name, `${set}:${key}`]);
        await client.query("COMMIT");
        return [...locks.rows.map((r) => pgHold(r, "lock")), ...permits.rows.sort((a, b) => a.owner.localeCompare(b.owner)).map(permitHold)];
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw err;
      }
    });
  }

  async close() {
    await this.#client.end().catch(() => {});
  }
}
