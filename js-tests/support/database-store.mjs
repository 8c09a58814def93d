// The database store recipe of the documentation, over SQLite (sql.js, compiled to
// WebAssembly): a unique primary key makes the insert the atomic step.
import initSqlJs from "sql.js";

/** The recipe's `connection()`: `write` answers `{ changes }`, `select` answers rows. */
export async function sqliteConnection() {
  const SQL = await initSqlJs();
  const db = new SQL.Database();
  db.run("CREATE TABLE locks (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at BIGINT NOT NULL)");
  return {
    async write(sql, params) {
      db.run(sql, params);
      return { changes: db.getRowsModified() };
    },
    async select(sql, params) {
      const statement = db.prepare(sql, params);
      const rows = [];
      while (statement.step()) rows.push(statement.getAsObject());
      statement.free();
      return rows;
    },
    close: () => db.close(),
  };
}

/** The recipe, as documented, with `connection()` passed in. */
export const databaseLockStore = (connection, table = "locks") => ({
  async acquire(key, owner, ttlMs) {
    const now = Date.now();
    // Clear the row first if it has expired, then insert. The PK makes the
    // insert the atomic step: two racing writers, one unique-violation.
    await connection().write(`DELETE FROM ${table} WHERE key = ? AND expires_at <= ?`, [key, now]);
    try {
      await connection().write(`INSERT INTO ${table} (key, owner, expires_at) VALUES (?, ?, ?)`, [key, owner, now + ttlMs]);
      return true;
    } catch {
      return false; // someone else holds it
    }
  },
  async release(key, owner) {
    const res = await connection().write(`DELETE FROM ${table} WHERE key = ? AND owner = ?`, [key, owner]);
    return res.changes > 0;
  },
  async extend(key, owner, ttlMs) {
    const res = await connection().write(`UPDATE ${table} SET expires_at = ? WHERE key = ? AND owner = ? AND expires_at > ?`, [
      Date.now() + ttlMs,
      key,
      owner,
      Date.now(),
    ]);
    return res.changes > 0;
  },
  async isLocked(key) {
    const rows = await connection().select(`SELECT 1 FROM ${table} WHERE key = ? AND expires_at > ?`, [key, Date.now()]);
    return rows.length > 0;
  },
  async remainingTime(key) {
    const rows = await connection().select(`SELECT expires_at FROM ${table} WHERE key = ?`, [key]);
    const row = rows[0];
    if (!row) return null;
    const left = Number(row.expires_at) - Date.now();
    return left > 0 ? left : null;
  },
});
