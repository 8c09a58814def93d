// What a store keeps with an election leader's hold (its `proclaim`): the time the leader
// won, by its own clock, and the JSON value it proclaims. election() writes and reads it;
// the CLI's `leader` command reads it.

/** The record of a leader that won at `since` (ms since the epoch) with the JSON text `text` (or none). */
export function electionRecord(since, text) {
  return text === undefined ? `{"since":${since}}` : `{"since":${since},"value":${text}}`;
}

/**
 * A holder's kept record read back: `{ since, value }` (`since` a Date), each null when
 * the holder kept none or it is not an election's.
 */
export function readElectionRecord(kept) {
  if (typeof kept !== "string") return { since: null, value: null };
  try {
    const parsed = JSON.parse(kept);
    const since = Number.isFinite(parsed?.since) ? new Date(parsed.since) : null;
    return { since, value: parsed?.value === undefined ? null : parsed.value };
  } catch {
    return { since: null, value: null };
  }
}
