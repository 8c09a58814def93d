// What `locksmith` prints: holds in key order, as a table (list), one key's report
// (inspect), a change as a line and the screen redrawn in a terminal (watch).
import { ELECTION_KEY_PREFIX } from "../api/defaults.mjs";
import { redact } from "./common.mjs";

export const compareKeys = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
export const sortHolds = (holds) => holds.sort((a, b) => compareKeys(a.key, b.key) || a.kind.localeCompare(b.kind) || a.owner.localeCompare(b.owner));

export const seconds = (ms) => (ms === null ? "no expiry" : `${(ms / 1000).toFixed(1)} s`);
/** A hold's kind as text: a semaphore hold of more than one permit with them ("semaphore ×3"). */
/** A hold as shown: an election's (its key is ELECTION_KEY_PREFIX and the name) by its name, of kind "election". */
export const electionShown = (h) => (h.key.startsWith(ELECTION_KEY_PREFIX) ? { ...h, key: h.key.slice(ELECTION_KEY_PREFIX.length), kind: "election" } : h);

export const kindText = (h) => (h.permits > 1 ? `${h.kind} ×${h.permits}` : h.kind);

/** Rows as columns padded to their widest cell. */
export function columns(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => String(c).padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

export function table(holds) {
  return columns([
    ["KEY", "KIND", "REMAINING", "FENCING TOKEN", "OWNER"],
    ...holds.map((h) => [h.key, kindText(h), seconds(h.remainingMs), h.fencingToken ?? "-", h.owner]),
  ]);
}

const STORE_CANNOT_TELL =
  "the store does not tell: PostgreSQL, MySQL, a lock file and etcd keep rows only for a read-write lock's waiters (etcd for none) and a fair queue's places";

/** 1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, 21st. */
function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th");
  return `${n}${suffix}`;
}

/** What inspect reports of `key` from a reader's answer (`found`): its holders in order, their kind, the waiters. */
export function inspectReport(key, found) {
  const holders = sortHolds(found.holders).map(({ key: _, ...h }) => h);
  const kinds = [...new Set(holders.map((h) => h.kind))];
  return {
    key,
    held: holders.length > 0,
    kind: kinds.length === 0 ? null : kinds.length === 1 ? kinds[0] : "mixed",
    holders,
    limit: found.limit,
    waiters: found.waiters,
    waiting: found.waiting,
  };
}

/** The report as text: held or free, the holders' table, the waiting readers and writer, the waiters (`url`: the store's). */
export function inspectText(result, url) {
  const { key, holders } = result;
  const lines = [];
  if (!result.held) lines.push(`${JSON.stringify(key)} is free`);
  else {
    // The permits held: a semaphore holder's weight each.
    const taken = holders.reduce((sum, h) => sum + (h.permits ?? 1), 0);
    const what = result.kind === "semaphore" && result.limit !== null ? `semaphore, ${taken} of ${result.limit} permits` : result.kind;
    lines.push(`${JSON.stringify(key)} is held (${what}):`);
    lines.push(
      columns([["KIND", "REMAINING", "FENCING TOKEN", "OWNER"], ...holders.map((h) => [kindText(h), seconds(h.remainingMs), h.fencingToken ?? "-", h.owner])]),
    );
  }
  // A fair queue's places come in its order (a key's lock and its semaphore queue apart).
  const inLine = {};
  for (const w of result.waiting) {
    const who =
      w.kind === "write"
        ? "a writer"
        : w.kind === "read"
          ? "a reader"
          : `${ordinal((inLine[w.kind] = (inLine[w.kind] ?? 0) + 1))} in the fair ${w.kind}'s queue`;
    lines.push(`waiting: ${who}, ${w.owner} (its place kept for ${seconds(w.remainingMs)})`);
  }
  lines.push(
    result.waiters === null
      ? `waiters: unknown (${STORE_CANNOT_TELL})`
      : url.startsWith("redis")
        ? `waiters: ${result.waiters} (connections subscribed to its release messages)`
        : `waiters: ${result.waiters}`,
  );
  return `${lines.join("\n")}\n`;
}

/** A change as one line of text: the time, the event (as in --json), the name, then what changed. */
export function changeLine(at, e) {
  const head = `${at}  ${e.event.padEnd(13)}  ${e.key}`;
  if (e.event === "waiters") return `${head}  ${e.previousWaiters} → ${e.waiters}`;
  if (e.event === "ended") return `${head}  ${kindText(e)}  ${e.owner}`;
  const token = e.fencingToken === null ? "" : `  fencing token ${e.fencingToken}`;
  const owner = e.event === "owner-changed" ? `${e.previousOwner} → ${e.owner}` : e.owner;
  return `${head}  ${kindText(e)}  ${owner}${token}  ${seconds(e.remainingMs)} left`;
}

export const ESC = "\x1b[";
export const HIDE_CURSOR = `${ESC}?25l`;
export const SHOW_CURSOR = `${ESC}?25h`;

/** The screen: a title, then every hold and every name waited on, cut to the terminal's height. */
export function screen(snapshot, { url, pattern, intervalMs, rows: height }) {
  const byKey = new Map();
  for (const h of snapshot.holds) byKey.set(h.key, [...(byKey.get(h.key) ?? []), h]);
  for (const key of snapshot.waiters.keys()) if (!byKey.has(key)) byKey.set(key, []);
  const waiters = (key) => String(snapshot.waiters.get(key) ?? snapshot.absentWaiters ?? "-");
  const rows = [];
  for (const key of [...byKey.keys()].sort(compareKeys)) {
    const holds = sortHolds(byKey.get(key));
    if (holds.length === 0) rows.push([key, "(free)", "-", "-", "-", waiters(key)]);
    for (const h of holds) rows.push([h.key, kindText(h), seconds(h.remainingMs), h.fencingToken ?? "-", h.owner, waiters(key)]);
  }
  const title = `locksmith watch ${redact(url)} ${pattern}  every ${intervalMs / 1000} s  ${new Date().toLocaleTimeString()}  (Ctrl-C to stop)`;
  const room = Math.max(1, (height ?? 24) - 4);
  const shown = rows.length > room ? rows.slice(0, room - 1) : rows;
  const lines = [title, ""];
  if (rows.length === 0) lines.push("no locks held");
  else lines.push(columns([["KEY", "KIND", "REMAINING", "FENCING TOKEN", "OWNER", "WAITERS"], ...shown]));
  if (shown.length < rows.length) lines.push(`… and ${rows.length - shown.length} more`);
  return `${ESC}H${lines.join(`${ESC}K\n`)}${ESC}K\n${ESC}J`;
}
