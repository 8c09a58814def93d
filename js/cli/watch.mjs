// `locksmith watch`: reads the store every --interval; in a terminal it redraws a table in
// place, piped (or with --json) it prints one line per change: a hold that appeared, ended
// or changed owner, a key whose count of waiters changed.
import { StoreError } from "./common.mjs";
import { openReader } from "./readers/open.mjs";
import { changeLine, compareKeys, ESC, electionShown, HIDE_CURSOR, SHOW_CURSOR, screen } from "./render.mjs";

// One hold of a name whose kind has one holder at a time (a lock, a writer) is the same
// hold under another owner; a semaphore's and readers' holds are told apart by owner.
const holdId = (h) => (h.kind === "lock" || h.kind === "write" ? `${h.key}\0${h.kind}` : `${h.key}\0${h.kind}\0${h.owner}`);

/** The changes from `before` to `after` (snapshots), in key order; `first`: `after` is the first. */
function changes(before, after, first) {
  const events = [];
  const was = new Map(before.holds.map((h) => [holdId(h), h]));
  const now = new Map(after.holds.map((h) => [holdId(h), h]));
  // A semaphore hold's events carry its permits.
  const weight = (h) => (h.permits === undefined ? {} : { permits: h.permits });
  const held = (event, h) => ({ event, key: h.key, kind: h.kind, ...weight(h), owner: h.owner, fencingToken: h.fencingToken, remainingMs: h.remainingMs });
  for (const [id, h] of was) if (!now.has(id)) events.push({ event: "ended", key: h.key, kind: h.kind, ...weight(h), owner: h.owner });
  for (const [id, h] of now) {
    const old = was.get(id);
    if (old === undefined) events.push(held(first ? "held" : "acquired", h));
    else if (old.owner !== h.owner) events.push({ ...held("owner-changed", h), previousOwner: old.owner });
  }
  for (const key of new Set([...before.waiters.keys(), ...after.waiters.keys()])) {
    const from = before.waiters.get(key) ?? 0;
    const to = after.waiters.get(key) ?? 0;
    if (from !== to) events.push({ event: "waiters", key, waiters: to, previousWaiters: from });
  }
  const order = { ended: 0, "owner-changed": 1, held: 2, acquired: 2, waiters: 3 };
  return events.sort((a, b) => compareKeys(a.key, b.key) || order[a.event] - order[b.event] || (a.kind ?? "").localeCompare(b.kind ?? ""));
}

/**
 * Runs `read(reader)` every `values.intervalMs` until SIGINT or SIGTERM (then resolves 0),
 * handing each result to `each(result)`. A read that fails is tried once more on a new
 * connection; when that fails too, the store is lost: a StoreError (`what` names the command).
 * `start()` and `end()` run around the loop (a terminal's screen set up and put back).
 */
export async function everyInterval(url, values, what, read, each, { start = () => {}, end = () => {} } = {}) {
  const intervalMs = values.intervalMs;
  let reader = await openReader(url, values);
  let stopping = false;
  let stop;
  const stopped = new Promise((resolve) => {
    stop = () => {
      stopping = true;
      resolve();
    };
  });
  const signals = ["SIGINT", "SIGTERM"];
  for (const signal of signals) process.on(signal, stop);
  start();
  const STOP = Symbol("stop");
  const untilStopped = (promise) => Promise.race([promise, stopped.then(() => STOP)]);
  // A new connection and a first read on it; a reader that connects after a stop is closed.
  const reopen = async () => {
    const fresh = await openReader(url, values);
    if (stopping) {
      await fresh.close();
      return STOP;
    }
    reader = fresh;
    return read(reader);
  };
  let timer;
  try {
    for (;;) {
      let result = await untilStopped(read(reader).catch((err) => err));
      if (result instanceof Error) {
        // Once more, from a new connection: a server restarted between two reads is back.
        const lost = reader;
        reader = undefined;
        await lost.close();
        result = await untilStopped(reopen().catch((err) => err));
        if (result instanceof Error) throw new StoreError(`${what}: the store became unreachable: ${result.message}`);
      }
      if (result === STOP) return 0;
      each(result);
      const next = new Promise((resolve) => {
        timer = setTimeout(resolve, intervalMs);
      });
      if ((await untilStopped(next)) === STOP) return 0;
    }
  } finally {
    clearTimeout(timer);
    for (const signal of signals) process.off(signal, stop);
    end();
    await reader?.close();
  }
}

/** `locksmith watch`: the holds and waiters under `pattern`, live (see the top of this file). */
export async function watch(url, pattern, values, out) {
  const { intervalMs } = values;
  const live = out.isTTY === true && !values.json;
  const restoreCursor = () => out.write(SHOW_CURSOR);
  let previous = { holds: [], waiters: new Map() };
  let first = true;
  const each = (snapshot) => {
    // An election's hold by the election's name.
    snapshot.holds = snapshot.holds.map(electionShown);
    if (live) out.write(screen(snapshot, { url, pattern, intervalMs, rows: out.rows }));
    else {
      const time = new Date().toISOString();
      for (const e of changes(previous, snapshot, first)) out.write(values.json ? `${JSON.stringify({ time, ...e })}\n` : `${changeLine(time, e)}\n`);
    }
    previous = snapshot;
    first = false;
  };
  return everyInterval(url, values, "watch", (reader) => reader.snapshot(pattern), each, {
    start: () => {
      if (!live) return;
      out.write(`${HIDE_CURSOR}${ESC}2J`);
      process.on("exit", restoreCursor);
    },
    end: () => {
      if (!live) return;
      process.off("exit", restoreCursor);
      out.write(`${SHOW_CURSOR}\n`);
    },
  });
}
