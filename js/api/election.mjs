// Leader election: election(name) over the Lock of a binding. One instance leads, the
// others stand by; the leader holds the election's own key (core's election_key: apart
// from every lock key) with autoExtend, so its leadership is a hold with the lease model
// of any hold. Its fencing token is the leader's term. The leadership signal aborts on a
// timer, so after a long stall of the event loop it can be late; `isLeader` compares with
// the lease's deadline when it is read.
import {
  LockNotHeldError,
  StoreContractViolationError,
  StoreUnavailableError,
  UnsupportedError,
  checkArity,
  checkOptionKeys,
  checkString,
  invalid,
  typeName,
  warnOnce,
} from "./errors.mjs";
import { abortedBy } from "./lock-errors.mjs";
import { ELECTION_KEY_PREFIX, MAX_MS } from "./defaults.mjs";
import { electionRecord, readElectionRecord } from "./election-record.mjs";
import { durationMs, hostTimers, optionalDurationMs, ttlDurationMs } from "./durations.mjs";
import { keepAlive } from "./calls.mjs";
import { ASYNC_DISPOSE, KINDED, NATIVE_HANDLE } from "./lock.mjs";
import { parseSignal } from "./options.mjs";
import { NO_TOKENS, TEST_CLOCK } from "./symbols.mjs";

const ELECTION_OPTIONS = ["ttl", "retryDelay", "store"];
const CAMPAIGN_OPTIONS = ["signal", "value"];
const OBSERVE_OPTIONS = ["signal", "interval"];
/** The largest value a leader proclaims: its JSON text, in UTF-8 bytes. */
export const MAX_ELECTION_VALUE_BYTES = 4096;
/** A leader's lease unless `ttl` says otherwise: a standby takes over this long after a leader dies. */
export const DEFAULT_ELECTION_TTL_MS = 15_000;
/** The pause between a standby's attempts (on a store that does not notify releases), and before run() campaigns again. */
export const DEFAULT_ELECTION_RETRY_MS = 50;
/** What only campaign() passes to new Leadership(). */
const GRANTED = Symbol("locksmith.leadership");

const utf8 = new TextEncoder();

/**
 * `value` as the JSON text a leader proclaims, checked: JSON-serializable (no function,
 * symbol, bigint or cycle), at most MAX_ELECTION_VALUE_BYTES. `undefined` stays undefined.
 */
function valueText(value) {
  if (value === undefined) return undefined;
  let text;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw invalid(`value must be a JSON value (a string, number, boolean, null, array or plain object); JSON.stringify refused it: ${err?.message ?? err}`);
  }
  if (typeof text !== "string") throw invalid(`value must be a JSON value (a string, number, boolean, null, array or plain object); got ${typeName(value)}`);
  const bytes = utf8.encode(text).length;
  if (bytes > MAX_ELECTION_VALUE_BYTES) {
    throw invalid(`value must be at most ${MAX_ELECTION_VALUE_BYTES} bytes as JSON; got ${bytes} (proclaim where to find the data, not the data)`);
  }
  return text;
}

/** The store's optional election methods, or an UnsupportedError naming what is missing. */
function needs(store, methods, what) {
  const missing = methods.filter((m) => typeof store?.[m] !== "function");
  if (missing.length > 0) {
    throw new UnsupportedError(
      `locksmith: ${what} needs a store that keeps a leader's value (its ${missing.join(" and ")} method${missing.length > 1 ? "s" : ""}, docs/stores.md); every shipped store has them, this one does not`,
    );
  }
}

function objectOptions(options, what, keys) {
  if (options === undefined || options === null) return {};
  if (typeof options !== "object" || Array.isArray(options)) {
    // A bare duration where election()'s options go was meant as the lease.
    const meant =
      what === "election()" && (typeof options === "number" || typeof options === "string")
        ? ` (to give the lease, write { ttl: ${JSON.stringify(options)} })`
        : "";
    throw invalid(`${what} options must be an object; got ${typeName(options)}${meant}`);
  }
  checkOptionKeys(options, keys, what);
  return options;
}

/** Resolves after `ms` on the store's clock (the test kit's, or the host's timers), or early at `signal`'s abort. */
function pause(store, ms, signal) {
  const clock = store?.[TEST_CLOCK];
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    let timer;
    const done = () => {
      if (timer !== undefined) hostTimers.clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    signal?.addEventListener("abort", done, { once: true });
    if (clock !== undefined) clock.sleep(ms).then(done);
    else timer = hostTimers.setTimeout(done, ms);
  });
}

/** What an election call resolves to when its `signal` aborted first (its answer may still land). */
const ABORTED = Symbol("locksmith.aborted");
/** How long the bridge waits for a JS store's answer unless the store's `operationTimeoutMs` says otherwise. */
const DEFAULT_OPERATION_TIMEOUT_MS = 10_000;

/** An error of a locksmith store (any copy of the API: a `code` and the `locksmith:` words), kept as it is. */
const isLocksmithError = (err) => err instanceof Error && typeof err.code === "string" && /^[A-Z_]+$/.test(err.code) && err.message.startsWith("locksmith:");

/**
 * One call of a store's optional election method (`holder`, `proclaim`), held to what the
 * bridge holds a store's lock calls to: it fails with StoreUnavailableError when the store
 * rejects with an error that is not one of locksmith's, or does not settle within its
 * `operationTimeoutMs` (on the test kit's clock for a TestStore); it resolves to ABORTED
 * at `signal`'s abort. Either way its answer may still land: both methods are guarded by
 * owner and sequence number, so a late one changes nothing that changed since.
 */
function electionCall(store, op, args, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return resolve(ABORTED);
    const configured = store.operationTimeoutMs;
    const timeoutMs = Number.isFinite(configured) && configured > 0 ? configured : DEFAULT_OPERATION_TIMEOUT_MS;
    const timer = new AbortController();
    let settled = false;
    const finish = (settle, value) => {
      if (settled) return;
      settled = true;
      timer.abort();
      signal?.removeEventListener("abort", aborted);
      settle(value);
    };
    const aborted = () => finish(resolve, ABORTED);
    signal?.addEventListener("abort", aborted, { once: true });
    pause(store, timeoutMs, timer.signal).then(() =>
      finish(reject, new StoreUnavailableError(`locksmith: store.${op}() did not settle within ${timeoutMs} ms`)),
    );
    const failed = (err) => {
      if (isLocksmithError(err)) return finish(reject, err);
      const unavailable = new StoreUnavailableError(`locksmith: store.${op}() failed: ${err?.message ?? String(err)}`);
      unavailable.cause = err;
      finish(reject, unavailable);
    };
    try {
      Promise.resolve(store[op](...args)).then((answer) => finish(resolve, answer), failed);
    } catch (err) {
      failed(err);
    }
  });
}

const contract = (message) => new StoreContractViolationError(`locksmith: ${message}`);

/** What an election on a store without fencing tokens is refused with. */
const noTokens = () =>
  new UnsupportedError(
    "locksmith: election() needs a store that gives fencing tokens (a leader's term is its token); this store gives none (a Redis store with `fencing: false`, or a store of your own whose acquire() answers true rather than a growing number)",
  );

/**
 * Refuses, before anything is sent, a shipped store known to give no tokens: a campaign
 * would take the key only to give it back, and meanwhile the store's `holder()` would show
 * another leader's term for it.
 */
function needsTokens(store) {
  if (store?.[NO_TOKENS] === true) throw noTokens();
}

/** A `holder()` answer checked: null, or `{ owner, fencingToken, remainingMs, value }` with a term. */
function checkedHolder(h) {
  if (h === null || h === undefined) return null;
  if (typeof h !== "object" || typeof h.owner !== "string")
    throw contract(`store.holder() must answer null or { owner, fencingToken, remainingMs, value }; got ${typeName(h)}`);
  if (h.fencingToken === null) throw noTokens();
  if (!(Number.isSafeInteger(h.fencingToken) && h.fencingToken > 0)) {
    throw contract(`store.holder() answered a fencingToken of ${String(h.fencingToken)}; an election's leader has a positive safe integer (its term)`);
  }
  if (h.value !== null && h.value !== undefined && typeof h.value !== "string")
    throw contract(`store.holder() answered a value of type ${typeName(h.value)}; it keeps a string or null`);
  return h;
}

/**
 * A signal that aborts when `held` (the leadership's) or `outer` (run()'s) does, and
 * `end()`, which takes its listeners off both: one per term, so a long run() leaves
 * nothing behind on its caller's signal.
 */
function termSignal(held, outer) {
  const controller = new AbortController();
  const abort = () => controller.abort(held.aborted ? held.reason : outer?.reason);
  held.addEventListener("abort", abort, { once: true });
  outer?.addEventListener("abort", abort, { once: true });
  if (held.aborted || outer?.aborted) abort();
  const end = () => {
    held.removeEventListener("abort", abort);
    outer?.removeEventListener("abort", abort);
  };
  return { signal: controller.signal, end };
}

/** `election(name, options)` and its classes over `Lock` (from defineLock). */
export function defineElection(Lock, { getLockStore }) {
  /**
   * A leadership won by `campaign()`: held until `resign()`, or lost (its `signal`
   * aborts at once, as a hold's does).
   */
  class Leadership {
    #lock;
    #term;
    #proclaimer;
    #value;

    constructor(granted, lock, term, proclaimer, value) {
      if (granted !== GRANTED) throw new TypeError("locksmith: a Leadership comes from an election's campaign()");
      this.#lock = lock;
      this.#term = term;
      this.#proclaimer = proclaimer;
      this.#value = value;
    }

    /** The value this leader proclaims (campaign()'s `value`, or the last proclaim()'s), or null. */
    get value() {
      return this.#value === undefined ? null : JSON.parse(this.#value);
    }

    /**
     * Changes the value this leader proclaims, in the same term: observers and `leader()`
     * see it. Rejects with LockNotHeldError when the leadership is lost, and with
     * StoreUnavailableError when the store does not answer (the value may still be kept:
     * `value` here stays the last one the store confirmed).
     */
    async proclaim(value) {
      checkArity(arguments, 1, "proclaim(value)");
      const text = valueText(value);
      if (text === undefined) throw invalid("proclaim() takes the new value (a JSON value; null for none)");
      if (this.#proclaimer === undefined) needs(undefined, ["proclaim"], "proclaim()");
      if (this.#lock.signal.aborted) throw new LockNotHeldError("locksmith: this leadership has ended; a new value needs a new term", this.#lock.key);
      // Proclaims go out one at a time, so the value kept here is the store's.
      if ((await this.#proclaimer(text)) !== true) {
        throw new LockNotHeldError("locksmith: this leadership was lost before its new value was kept; a new value needs a new term", this.#lock.key);
      }
      this.#value = text;
    }

    /** The leader's term: its fencing token, which grows with each new leader. */
    get term() {
      return this.#term;
    }

    /** Aborts when the leadership ends: resigned, or lost (an extend refused, the deadline passed). */
    get signal() {
      return this.#lock.signal;
    }

    /**
     * Whether this leadership still stands, as far as this process knows, compared with
     * the lease's deadline now: exact even when the signal's timer is late after a long
     * stall of the event loop. Check it before a step that must not run once the
     * leadership is lost.
     */
    get isLeader() {
      return !this.#lock.signal.aborted;
    }

    /** Ends the leadership now, so a standby takes over. `true` if it still led. */
    async resign() {
      if (arguments.length > 0) checkArity(arguments, 0, "resign()");
      // Also after a loss seen here: the store may still hold it (an extend's answer lost).
      const lost = this.#lock.signal.aborted;
      try {
        return await this.#lock.release();
      } catch (err) {
        // A leadership already lost (its signal said so) ends at its TTL at the latest: a
        // store that cannot answer now does not make the resign of it fail (in a
        // `finally`, that would hide the error that ended the work).
        if (lost) return false;
        throw err;
      }
    }

    async [ASYNC_DISPOSE]() {
      await this.resign();
    }

    get [Symbol.toStringTag]() {
      return "Leadership";
    }
  }

  /**
   * An election called `name`: campaign() waits to lead, run() leads whenever it can.
   * Its name lives apart from lock names.
   */
  class Election {
    #name;
    #ttlMs;
    #retryDelay;
    #store;

    constructor(name, options = undefined) {
      if (arguments.length > 2) checkArity(arguments, 2, "election(name, options?)");
      checkString("name", name);
      const opts = objectOptions(options, "election()", ELECTION_OPTIONS);
      // A number as a lock's TTL is (with its warning for a bare number under a second).
      this.#ttlMs = opts.ttl === undefined ? DEFAULT_ELECTION_TTL_MS : typeof opts.ttl === "number" ? ttlDurationMs(opts.ttl) : durationMs("ttl", opts.ttl);
      this.#retryDelay = optionalDurationMs("retryDelay", opts.retryDelay) ?? DEFAULT_ELECTION_RETRY_MS;
      // Core's range for a wait's retryDelay, checked here rather than at the first campaign.
      if (!(this.#retryDelay > 0 && this.#retryDelay <= MAX_MS)) {
        throw invalid(`retryDelay must be above 0 and at most ${MAX_MS} milliseconds; got ${this.#retryDelay}`);
      }
      this.#store = opts.store === undefined ? getLockStore() : opts.store;
      this.#name = name;
      // The name and TTL are checked here, by the first handle; core's words are a key's.
      try {
        this.#lock();
      } catch (err) {
        if (err?.code === "INVALID_ARGUMENT" && err.message.startsWith("locksmith: key ")) {
          err.message = err.message.replace("locksmith: key ", "locksmith: an election's name ");
        }
        throw err;
      }
    }

    /** The election's name. */
    get name() {
      return this.#name;
    }

    #lock() {
      // As a string with its unit: a bare number was warned of (if short) when it was given.
      return new Lock(KINDED, { key: this.#name, ttlMs: `${this.#ttlMs}ms`, kind: "election", store: this.#store });
    }

    /** Now in ms, on the store's clock (the test kit's, or the host's). */
    #now() {
      const clock = this.#store?.[TEST_CLOCK];
      return clock === undefined ? hostTimers.now() : clock.now();
    }

    /** The key the store sees for this election. */
    get #key() {
      return `${ELECTION_KEY_PREFIX}${this.#name}`;
    }

    /**
     * Waits until this process leads, then resolves to its Leadership, which lasts until
     * `resign()` or until it is lost. `value`: a small JSON value it proclaims for
     * `leader()`, `observe()` and the CLI. At `signal`'s abort it rejects as an aborted
     * acquire() does.
     */
    async campaign(options = undefined) {
      if (arguments.length > 1) checkArity(arguments, 1, "campaign(options?)");
      const opts = objectOptions(options, "campaign()", CAMPAIGN_OPTIONS);
      const signal = parseSignal(opts.signal);
      const text = valueText(opts.value);
      const store = this.#store;
      // A value needs a store that keeps it; without a value, the time of the win is kept where the store can.
      if (text !== undefined) needs(store, ["proclaim", "holder"], "campaign({ value })");
      needsTokens(store);
      const proclaims = typeof store?.proclaim === "function";
      for (;;) {
        const lock = this.#lock();
        await lock.acquire({ timeout: Number.POSITIVE_INFINITY, retryDelay: this.#retryDelay, autoExtend: true, signal });
        const term = lock.fencingToken;
        if (term === null) {
          await lock.release().catch(() => {});
          throw noTokens();
        }
        if (!proclaims) return new Leadership(GRANTED, lock, term, undefined, text);
        const owner = JSON.parse(lock[NATIVE_HANDLE]().serialize()).owner;
        const since = store?.[TEST_CLOCK]?.unixTimeMs() ?? Date.now();
        const key = this.#key;
        let seq = 0;
        let queue = Promise.resolve();
        // One proclaim at a time, each with the next sequence number.
        const proclaimer = (next, until = undefined) => {
          const call = queue.then(() => electionCall(store, "proclaim", [key, owner, electionRecord(since, next), ++seq], until));
          queue = call.catch(() => {});
          return call.then((answer) => {
            if (answer !== true && answer !== false && answer !== ABORTED)
              throw contract(`store.proclaim() must answer true or false; got ${typeName(answer)}`);
            return answer;
          });
        };
        // The win's record, before anyone is told of the win: observers see the value with the term.
        let kept;
        try {
          kept = await proclaimer(text, signal);
        } catch (err) {
          if (text === undefined) {
            // Only the time of the win was to be kept: the leadership stands without it
            // (leader() shows no `since`), and a store that cannot keep it says why once.
            if (!(err instanceof StoreUnavailableError)) {
              warnOnce(
                "LOCKSMITH_ELECTION_UNRECORDED",
                `locksmith: an election leader's record (when it won) could not be kept: ${err.message.replace(/^locksmith: /, "")}`,
              );
            }
            kept = true;
          } else if (err instanceof StoreUnavailableError) {
            // A value asked for must be kept: this term ends and another is sought.
            kept = undefined;
          } else {
            await lock.release().catch(() => {});
            throw err;
          }
        }
        if (kept === ABORTED || signal?.aborted) {
          let unreleased;
          await lock.release().catch((err) => {
            unreleased = err;
          });
          throw abortedBy(signal, this.#name, unreleased);
        }
        if (kept === true) return new Leadership(GRANTED, lock, term, proclaimer, text);
        // Lost at once, or its value not kept: give it back and campaign again.
        await lock.release().catch(() => {});
        await pause(store, this.#retryDelay, signal);
      }
    }

    /**
     * The current leader: `{ term, value, since }` (`since`, a Date: when it won, by its
     * own clock), or null when nobody leads.
     */
    async leader() {
      if (arguments.length > 0) checkArity(arguments, 0, "leader()");
      needs(this.#store, ["holder"], "leader()");
      needsTokens(this.#store);
      return this.#read();
    }

    /** The leader as the store answers now, or ABORTED at `signal`'s abort. */
    async #read(signal = undefined) {
      const answer = await electionCall(this.#store, "holder", [this.#key], signal);
      if (answer === ABORTED) return ABORTED;
      const h = checkedHolder(answer);
      if (h === null) return null;
      const { since, value } = readElectionRecord(h.value);
      return { term: h.fencingToken, value, since };
    }

    /**
     * The leader as it changes: yields the current one (or null) at once, then each
     * change of leader or of its value, read every `interval` (the retry delay by
     * default). It may skip a leader that came and went between two reads, but it always
     * ends up at the latest; terms never go back (but an older term still read a lease's
     * time later is shown: the store's tokens went back). Ends when `signal` aborts, or when the
     * loop that reads it stops (`break`). A store outage pauses it (it reads again at the
     * next interval); another error ends it with that error.
     */
    observe(options = undefined) {
      if (arguments.length > 1) checkArity(arguments, 1, "observe(options?)");
      // Checked here, at the call, not at the first next().
      const opts = objectOptions(options, "observe()", OBSERVE_OPTIONS);
      const signal = parseSignal(opts.signal);
      const interval = optionalDurationMs("interval", opts.interval) ?? this.#retryDelay;
      if (!(interval > 0 && interval <= MAX_MS)) throw invalid(`interval must be above 0 and at most ${MAX_MS} milliseconds; got ${interval}`);
      needs(this.#store, ["holder"], "observe()");
      needsTokens(this.#store);
      return this.#observe(signal, interval);
    }

    async *#observe(signal, interval) {
      let last;
      // The largest term seen: a read with an older one (a store's replica behind, a read
      // that landed late) is not news. An older term read for longer than a lease is a
      // leader all the same (a store whose tokens went back: a Redis server whose clock
      // stepped back), and is shown.
      let highest = 0;
      let olderSince;
      while (!signal?.aborted) {
        let now;
        try {
          now = await this.#read(signal);
        } catch (err) {
          if (signal?.aborted) return;
          if (!(err instanceof StoreUnavailableError)) throw err;
          await pause(this.#store, interval, signal);
          continue;
        }
        if (now === ABORTED || signal?.aborted) return;
        let older = now !== null && now.term < highest;
        if (older) {
          const at = this.#now();
          olderSince ??= at;
          if (at - olderSince > this.#ttlMs) older = false;
        } else {
          olderSince = undefined;
        }
        if (!older && (last === undefined || !sameLeader(last, now))) {
          if (now !== null) highest = now.term;
          last = now;
          yield now;
        }
        await pause(this.#store, interval, signal);
      }
    }

    /**
     * Leads whenever it can until `signal` aborts: campaigns, calls `fn(signal, { term,
     * leadership })` while leader (`signal` aborts when the leadership ends or run()'s
     * `signal` aborts; `leadership.isLeader` is the exact check), resigns once `fn` has
     * settled, and campaigns again after the retry delay. Resolves once `signal` has
     * aborted and `fn` has settled; rejects with `fn`'s error, after resigning.
     */
    async run(fn, options = undefined) {
      if (arguments.length > 2) checkArity(arguments, 2, "run(fn, options?)");
      if (typeof fn !== "function") throw invalid(`run() takes a function; got ${typeName(fn)}`);
      const opts = objectOptions(options, "run()", CAMPAIGN_OPTIONS);
      const signal = parseSignal(opts.signal);
      const value = opts.value;
      valueText(value);
      while (!signal?.aborted) {
        let leadership;
        try {
          leadership = await this.campaign({ signal, value });
        } catch (err) {
          if (signal?.aborted) return;
          throw err;
        }
        // Won as the signal aborted: no term.
        if (signal?.aborted) {
          await leadership.resign().catch(() => {});
          return;
        }
        const term = termSignal(leadership.signal, signal);
        // A leader stays up while it leads: a fn that only waits for its signal holds
        // nothing that keeps the process alive, and a process that ended there would leave
        // its lease to run out before a standby could lead.
        const alive = keepAlive();
        try {
          await fn(term.signal, { term: leadership.term, leadership });
        } catch (err) {
          await leadership.resign().catch(() => {});
          throw err;
        } finally {
          alive.end();
          term.end();
        }
        // A resign the store cannot answer (an outage that may also have ended the term)
        // does not end run(): the hold, if the store still has it, ends at its TTL, and
        // the next campaign waits for it.
        await leadership.resign().catch(() => {});
        await pause(this.#store, this.#retryDelay, signal);
      }
    }

    get [Symbol.toStringTag]() {
      return "Election";
    }
  }

  /** Whether `a` and `b` (leader() answers) are the same leader with the same value. */
  function sameLeader(a, b) {
    if (a === null || b === null) return a === b;
    return a.term === b.term && a.since?.getTime() === b.since?.getTime() && JSON.stringify(a.value) === JSON.stringify(b.value);
  }

  /** The election called `name` in `options.store` (the configured store by default). */
  function election(name, options = undefined) {
    if (arguments.length > 2) checkArity(arguments, 2, "election(name, options?)");
    return new Election(name, options);
  }

  return { election, Election, Leadership };
}
