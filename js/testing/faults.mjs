// Store-call faults: one implementation for the test kit's TestStore (on its virtual
// clock), for withFaults() over a real store (on real time), and for the history
// checker's stores across a network (js-tests/histories). Each fault acts on store calls
// as a network and a server would: a call fails before it reaches the store, reaches it
// late, or reaches it and is applied while its answer is lost.
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN } from "../api/symbols.mjs";
import { StoreUnavailableError, checkArity, checkOptionKeys, closest, invalid, typeName } from "../api/errors.mjs";
import { durationMs } from "../api/durations.mjs";

/** The store calls a fault can name in `calls` (the JS store contract's methods). */
export const STORE_CALLS = Object.freeze([
  "acquire",
  "release",
  "extend",
  "isLocked",
  "remainingTime",
  "isHeldBy",
  "ownerRemainingTime",
  "acquirePermit",
  "releasePermit",
  "extendPermit",
  "countPermits",
  "permitRemainingTime",
  "acquireAll",
  "acquireFair",
  "holder",
  "proclaim",
]);

/**
 * A method's call name: the shipped stores' token paths are their acquires, and a fair
 * lock's release and extend (the Redis stores' releaseFair, extendFair) are releases and extends.
 */
export function callName(method) {
  if (method === ACQUIRE_TOKEN) return "acquire";
  if (method === ACQUIRE_PERMIT_TOKEN) return "acquirePermit";
  if (method === "releaseFair") return "release";
  if (method === "extendFair") return "extend";
  return STORE_CALLS.includes(method) ? method : undefined;
}

/** A duration (milliseconds, "2s", or a function answering one per call), checked. */
function delayOf(name, value) {
  if (typeof value === "function") return value;
  const ms = durationMs(name, value);
  if (!Number.isFinite(ms) || ms < 0) throw invalid(`${name} must be a finite duration, 0 or more; got ${ms}`);
  return () => ms;
}

function countOf(name, value) {
  if (value === Infinity || (Number.isInteger(value) && value >= 1)) return value;
  throw invalid(`${name} must be a whole number of calls, 1 or more (or Infinity); got ${typeof value === "number" ? value : typeName(value)}`);
}

function callsOf(where, options, known) {
  if (options === undefined) return { calls: null };
  if (options === null || typeof options !== "object") throw invalid(`${where}'s options must be an object; got ${typeName(options)}`);
  checkOptionKeys(options, known, where);
  const { calls } = options;
  if (calls === undefined) return { ...options, calls: null };
  if (!Array.isArray(calls) || calls.length === 0)
    throw invalid(`${where}: calls must be a non-empty array of store calls (${STORE_CALLS.join(", ")}); got ${typeName(calls)}`);
  for (const call of calls) {
    if (!STORE_CALLS.includes(call)) {
      const near = typeof call === "string" ? closest(call, STORE_CALLS) : undefined;
      throw invalid(
        `${where}: ${JSON.stringify(call) ?? typeName(call)} is not a store call${near ? ` (did you mean \`${near}\`?)` : ""}; the calls are ${STORE_CALLS.join(", ")}`,
      );
    }
  }
  return { ...options, calls: new Set(calls) };
}

/**
 * The faults armed on one store's calls. `now()` and `sleep(ms)` are the time they run on:
 * a TestClock's, or real time; `lostAfterMs()` is how long a call whose answer is lost
 * takes to fail (the store's operation timeout).
 */
export class Faults {
  #rules = [];
  #now;
  #sleep;
  #lostAfterMs;

  constructor({ now, sleep, lostAfterMs }) {
    this.#now = now;
    this.#sleep = sleep;
    this.#lostAfterMs = lostAfterMs;
  }

  /** The next `count` calls (of `calls`, if given) fail with StoreUnavailableError before they reach the store. */
  failNext(count = 1, options = undefined) {
    checkArity(arguments, 2, "failNext(count?, { calls }?)");
    const { calls } = callsOf("failNext()", options, ["calls"]);
    this.#rules.push({ type: "fail", left: countOf("count", count), calls });
  }

  /** Every call (of `calls`, if given) fails for `duration` from now: an outage. */
  failFor(duration, options = undefined) {
    checkArity(arguments, 2, "failFor(duration, { calls }?)");
    if (typeof duration === "function") throw invalid("failFor()'s duration is a duration, not a function (delay() takes one)");
    const ms = delayOf("duration", duration)();
    const { calls } = callsOf("failFor()", options, ["calls"]);
    this.#rules.push({ type: "fail", left: Infinity, until: this.#now() + ms, calls });
  }

  /**
   * Calls (the next `count`, of `calls`, if given) reach the store `duration` late, and
   * their answers come back `answer` late. A duration may be a function, asked per call.
   */
  delay(duration, options = undefined) {
    checkArity(arguments, 2, "delay(duration, { count, calls, answer }?)");
    const request = delayOf("duration", duration);
    const { calls, count = Infinity, answer } = callsOf("delay()", options, ["count", "calls", "answer"]);
    this.#rules.push({
      type: "delay",
      left: countOf("count", count),
      calls,
      request,
      answer: answer === undefined ? undefined : delayOf("answer", answer),
    });
  }

  /**
   * The next `count` calls (of `calls`, if given) reach the store and are applied, and
   * their answers never come back: each fails with StoreUnavailableError at the store's
   * `operationTimeoutMs` (as a client's command timeout would), its outcome unknown to
   * the caller (an acquire may have been granted).
   */
  loseAnswers(count = 1, options = undefined) {
    checkArity(arguments, 2, "loseAnswers(count?, { calls }?)");
    const { calls } = callsOf("loseAnswers()", options, ["calls"]);
    this.#rules.push({ type: "lose", left: countOf("count", count), calls });
  }

  /** Disarms every fault; calls on their way keep what they met. */
  clear() {
    this.#rules = [];
  }

  /** The first armed rule of `type` for call `op`, used once. */
  #take(type, op) {
    const now = this.#now();
    for (let i = 0; i < this.#rules.length; i++) {
      const rule = this.#rules[i];
      if (rule.until !== undefined && now >= rule.until) {
        this.#rules.splice(i--, 1);
        continue;
      }
      if (rule.type !== type || (rule.calls !== null && !rule.calls.has(op))) continue;
      if (--rule.left === 0) this.#rules.splice(i, 1);
      return rule;
    }
    return undefined;
  }

  /** Makes store call `op` (`send()` makes it on the store) through the armed faults. */
  async run(op, send) {
    const failed = this.#take("fail", op);
    if (failed !== undefined) {
      throw new StoreUnavailableError(`locksmith: store unavailable: a fault the test injected (${failed.until === undefined ? "failNext" : "failFor"})`);
    }
    const delayed = this.#take("delay", op);
    if (delayed !== undefined) await this.#sleep(msOf("delay()", delayed.request(op)));
    const lost = this.#take("lose", op) !== undefined;
    const sent = send();
    if (lost) {
      Promise.resolve(sent).catch(() => {});
      await this.#sleep(this.#lostAfterMs());
      throw new StoreUnavailableError("locksmith: store unavailable: no answer, a fault the test injected (loseAnswers: the call was applied)");
    }
    if (delayed?.answer === undefined) return sent;
    try {
      return await sent;
    } finally {
      await this.#sleep(msOf("delay()'s answer", delayed.answer(op)));
    }
  }
}

/** What a delay function answered, checked: its mistakes are named as its own. */
function msOf(where, ms) {
  if (typeof ms === "number" && Number.isFinite(ms) && ms >= 0) return ms;
  throw invalid(`${where}: the delay function must answer milliseconds (a finite number, 0 or more); got ${typeof ms === "number" ? ms : typeName(ms)}`);
}
