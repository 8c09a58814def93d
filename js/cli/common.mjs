// What the `locksmith` command and its store readers share: the command's two errors, a
// hold as it reports one (the owner as a fingerprint, never the token), the store call
// that names the store in its error, and the glob that every reader matches names with.
import { createHash } from "node:crypto";

/** Wrong input: the message, then (with `usage`) the usage text. Exit 2. */
export class UsageError extends Error {
  constructor(message, { usage = false } = {}) {
    super(message);
    this.usage = usage;
  }
}

/** The store could not be reached, refused the login, or failed the request. Exit 2. */
export class StoreError extends Error {}

/** The first 8 hex digits of the owner token's SHA-256: enough to tell holders apart. */
export const fingerprint = (owner) => createHash("sha256").update(String(owner)).digest("hex").slice(0, 8);

/**
 * A hold as the command reports it: the owner as its fingerprint; a semaphore hold with
 * its `permits` (how many of the limit it holds), other kinds without.
 */
export const hold = (key, kind, remainingMs, fencingToken, owner, permits) => ({
  key,
  kind,
  ...(kind === "semaphore" && { permits: Number(permits ?? 1) }),
  remainingMs,
  fencingToken,
  owner: fingerprint(owner),
});

/** Of a store's entries where waiters leave a place (`waiting`), how many wait on each key. */
export function waitersByKey(entries) {
  const waiters = new Map();
  for (const e of entries) if (e.waiting) waiters.set(e.key, (waiters.get(e.key) ?? 0) + 1);
  return waiters;
}

/** The places in line among a key's entries, in their order, as `inspect` lists them. */
export const waitingOf = (entries) => entries.filter((e) => e.waiting).map((e) => ({ kind: e.kind, owner: fingerprint(e.owner), remainingMs: e.remainingMs }));

export const redact = (url) => url.replace(/\/\/[^/@]*@/, "//***@");
export const address = (host, port) => `${host.includes(":") ? `[${host}]` : host}:${port}`;

export const CONNECT_TIMEOUT_MS = 5_000;

/** Runs `work`; an error that is not already the command's own becomes a StoreError naming `where`. */
export async function storeCall(where, work) {
  try {
    return await work();
  } catch (err) {
    if (err instanceof StoreError || err instanceof UsageError) throw err;
    throw new StoreError(`${where}: ${err?.message ?? err}`);
  }
}

export const globEscape = (s) => s.replace(/[\\*?[\]]/g, "\\$&");
export const regexEscape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A Redis glob (`*`, `?`, `[...]`, `\` escapes) as a RegExp over whole names. */
export function globRegExp(glob) {
  let source = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "\\" && i + 1 < glob.length) source += regexEscape(glob[++i]);
    else if (c === "*") source += "[\\s\\S]*";
    else if (c === "?") source += "[\\s\\S]";
    else if (c === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end === -1) source += "\\[";
      else {
        const body = glob.slice(i + 1, end);
        source += `[${body.startsWith("^") ? `^${body.slice(1).replace(/\\/g, "\\\\")}` : body.replace(/\\/g, "\\\\")}]`;
        i = end;
      }
    } else source += regexEscape(c);
  }
  return new RegExp(`^${source}$`);
}
