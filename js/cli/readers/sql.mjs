// What the PostgreSQL and MySQL readers share, with the SQL stores' own schema from their
// core (js/stores/sql-core.cjs): the roles of a permits row
// that hold a key (`HOLDING`, as SQL: a fair semaphore's holder's 'fair' among them); a row
// in any other role waits (a read-write lock's waiting writer's 'claim', its readers
// 'waiting' for their turn and those whose 'turn' it is, a fair waiter's 'place') but a fair
// lock's 'mark', which neither holds nor waits; and the value a plain lock's holder proclaimed.
import { HOLDING, HOLDING_ROLES } from "../../stores/sql-core.cjs";

export { HOLDING };

/**
 * A plain lock's row (`{ fencing_token, value, value_token }`, read whole) as `inspect`
 * reports its holder's value: the one proclaimed for this hold (tagged with its fencing
 * token, as the store's holder() reads it), else null; null too on a table made before
 * the value columns.
 */
export function keptValue(row) {
  const { value, value_token: tag, fencing_token: token } = row;
  if (value === null || value === undefined || tag === null || tag === undefined || token === null) return null;
  if (String(tag) !== String(token)) return null;
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

/** Whether a permits row (`{ role }`) waits rather than holds. */
export const waits = (row) => !HOLDING_ROLES.includes(row.role);

/**
 * The tables of the store whose --table is `table`, quoted by `quote` as the store quotes
 * each name: its locks table, and beside it (in the same schema or database) the permits
 * table `<table>_permits` and MySQL's key rows `<table>_keys`; `name` is the table's own
 * name, without its schema.
 */
export function tablesOf(table, quote) {
  const parts = table.split(".");
  const name = parts.pop();
  const qualify = (n) => [...parts, n].map(quote).join(".");
  return { locks: qualify(name), permits: qualify(`${name}_permits`), keys: qualify(`${name}_keys`), name };
}

/** The module `name`, or undefined when it is not installed. */
export async function optionalImport(name, forWhat) {
  try {
    return await import(name);
  } catch (err) {
    if (err?.code === "ERR_MODULE_NOT_FOUND") return undefined;
    throw new Error(`could not load ${name} for ${forWhat}: ${err.message}`);
  }
}

/** The glob as LIKE: * → %, ? → _, and LIKE's own characters escaped. */
export const likeOf = (pattern) =>
  pattern
    .replace(/[\\%_]/g, "\\$&")
    .replace(/\*/g, "%")
    .replace(/\?/g, "_");
