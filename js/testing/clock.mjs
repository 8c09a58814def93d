// The test kit's virtual clock: the time of every lock over a test store (TTLs and
// expiry, retry delays and wait timeouts, autoExtend, the lease deadline, the store
// bridge's call timeout), moved only by `advance()`. It never touches the global timers:
// each binding asks it for a native counterpart (`VirtualClock`) whose sleeps are this
// clock's promises, and a lock over a test store is made on that counterpart.
import { InvalidArgumentError, LockError, checkArity, typeName } from "../api/errors.mjs";
import { durationMs } from "../api/durations.mjs";
import { NATIVE_CLOCK, TEST_BINDINGS } from "../api/symbols.mjs";
import { MAX_MS } from "../api/defaults.mjs";

/** `clock[FOLLOW](target)`: `target.set(ms)` is called each time the clock moves. */
export const FOLLOW = Symbol.for("locksmith.testing.follow");
/** `clock[KEEP_BUSY](promise)`: the clock does not settle before `promise` does; returns it. */
export const KEEP_BUSY = Symbol.for("locksmith.testing.keepBusy");

/**
 * One turn of the event loop, on a channel rather than a timer: a test runner's fake
 * timers (which replace setTimeout, setImmediate and queueMicrotask) must not stop the
 * clock. Every promise reaction queued before it has run when it resolves.
 */
function turn() {
  return new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      port2.close();
      resolve();
    };
    port2.postMessage(null);
  });
}

// How many turns advance() waits for work that never settles before it says so.
const MAX_TURNS = 100_000;

/**
 * A clock that moves only when told: `await clock.advance("30s")` runs, in order, every
 * sleep of every lock over it that falls due, and returns once nothing is running and
 * nothing more is due up to the new time.
 */
export class TestClock {
  #now = 0;
  /** What the wall clock (`Date.now()`) reads at time 0, for what travels between hosts (serialize()). */
  #unixStartMs;
  /** Sleeps, earliest first: `{ at, seq, wake }`. */
  #sleepers = [];
  #seq = 0;
  /** Bumped by everything that happens on the clock, so that settle() sees that something did. */
  #activity = 0;
  /** Each binding's side of this clock, by the binding's VirtualClock class. */
  #natives = new Map();
  /** The bindings' counts of work on its way (the addon's tasks on its own thread). */
  #pendingWork = new Set();
  /** Others that keep the clock's time (`FOLLOW`). */
  #followers = new Set();
  /** Promises the clock waits for before it settles (`KEEP_BUSY`). */
  #busy = 0;
  #advancing = false;

  constructor(options = {}) {
    if (arguments.length > 1) checkArity(arguments, 1, "new TestClock(options?)");
    if (options === null || typeof options !== "object") {
      throw new InvalidArgumentError(`locksmith: new TestClock() takes an options object ({ startMs }); got ${typeName(options)}`);
    }
    const { startMs, ...rest } = options;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) throw new InvalidArgumentError(`locksmith: unknown TestClock option ${JSON.stringify(unknown[0])} (it takes startMs)`);
    this.#unixStartMs = startMs === undefined ? 1_767_225_600_000 : epochMs(startMs);
  }

  /** Milliseconds since the clock was made. */
  now() {
    return this.#now;
  }

  /** The wall-clock time the clock stands at, in milliseconds since 1970 (2026-01-01 at time 0 unless `startMs` says). */
  unixTimeMs() {
    return this.#unixStartMs + this.#now;
  }

  /** A promise that resolves when the clock reaches `ms` (`sleep`, on this clock). */
  sleepUntil(ms) {
    if (typeof ms !== "number" || !Number.isFinite(ms)) {
      throw new InvalidArgumentError(
        `locksmith: sleepUntil() takes a time on the clock, in milliseconds (a finite number); got ${typeof ms === "number" ? ms : typeName(ms)}`,
      );
    }
    this.#activity++;
    return new Promise((wake) => {
      if (ms <= this.#now) return wake();
      const sleeper = { at: ms, seq: this.#seq++, wake };
      // Earliest first; sleeps due at the same time in the order they were asked for.
      let lo = 0;
      let hi = this.#sleepers.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.#sleepers[mid].at <= ms) lo = mid + 1;
        else hi = mid;
      }
      this.#sleepers.splice(lo, 0, sleeper);
    });
  }

  /** A promise that resolves `duration` from now on this clock. */
  sleep(duration) {
    return this.sleepUntil(this.#now + wholeMs("duration", duration));
  }

  /** Tells the clock that something happened on it (a test store's call), so that settle() waits for what follows. */
  touch() {
    this.#activity++;
    // What happened may wake tasks on a binding's own thread (the addon's): it keeps the
    // process up while they run.
    for (const { binding, native } of this.#natives.values()) binding.clockActive?.(native);
  }

  /**
   * Moves the clock forward by `duration` (milliseconds or a string with a unit: "30s"),
   * running what falls due on the way in order, each once the work before it settled.
   * `advance(0)` lets the work on its way settle without moving time.
   */
  async advance(duration) {
    if (arguments.length !== 1) checkArity(arguments, 1, "advance(duration)");
    const ms = wholeMs("duration", duration);
    if (this.#advancing) {
      throw new InvalidArgumentError("locksmith: advance() is already running on this clock: await it before advancing again");
    }
    this.#advancing = true;
    try {
      const target = this.#now + ms;
      await this.#settle();
      while (this.#sleepers.length > 0 && this.#sleepers[0].at <= target) {
        this.#set(Math.max(this.#now, this.#sleepers[0].at));
        while (this.#sleepers.length > 0 && this.#sleepers[0].at <= this.#now) this.#sleepers.shift().wake();
        this.#activity++;
        await this.#settle();
      }
      this.#set(target);
      await this.#settle();
    } finally {
      this.#advancing = false;
    }
  }

  #set(ms) {
    this.#now = ms;
    for (const { native } of this.#natives.values()) native.set(ms);
    for (const follower of this.#followers) follower.set(ms);
  }

  /** Waits until a turn of the event loop passes with nothing new on the clock and no work on its way. */
  async #settle() {
    for (let turns = 0; turns < MAX_TURNS; turns++) {
      const seen = this.#activity;
      await turn();
      if (this.#activity === seen && this.#idle()) return;
    }
    throw new LockError(
      `locksmith: the test clock waited ${MAX_TURNS} turns of the event loop for the locks over it to settle (something keeps calling the store or sleeping without time passing)`,
      "CLOCK_BUSY",
    );
  }

  #idle() {
    if (this.#busy > 0) return false;
    for (const pendingWork of this.#pendingWork) if (pendingWork() !== 0) return false;
    return true;
  }

  [FOLLOW](target) {
    this.#followers.add(target);
  }

  [KEEP_BUSY](promise) {
    this.#busy++;
    const done = () => {
      this.#busy--;
      this.#activity++;
    };
    promise.then(done, done);
    return promise;
  }

  /** The binding's side of this clock, made once per binding. */
  [NATIVE_CLOCK](binding) {
    let native = this.#natives.get(binding.VirtualClock)?.native;
    if (native === undefined) {
      // The addon reads what the promise resolves to: null, not undefined.
      native = new binding.VirtualClock((ms) => this.sleepUntil(ms).then(() => null), this.#now, this.#unixStartMs);
      this.#natives.set(binding.VirtualClock, { binding, native });
      // The addon's count of this clock's work on its own thread (WebAssembly has none).
      if (typeof native.pendingWork === "function") this.#pendingWork.add(() => native.pendingWork());
    }
    return native;
  }
}

/** `startMs`: milliseconds since 1970, or a Date. */
function epochMs(value) {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0) {
    throw new InvalidArgumentError(
      `locksmith: startMs must be a time as milliseconds since 1970 (a whole number, 0 or more) or a Date; got ${typeof ms === "number" ? ms : typeName(value)}`,
    );
  }
  return ms;
}

function wholeMs(name, value) {
  const ms = durationMs(name, value);
  // At most what a TTL may be: the addon keeps times in whole milliseconds.
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_MS) {
    throw new InvalidArgumentError(`locksmith: ${name} must be a finite number of milliseconds from 0 to ${MAX_MS}; got ${ms}`);
  }
  return Math.ceil(ms);
}

/** The binding of the first build of the API that was loaded, for a test store's memory. */
export function firstBinding() {
  const bindings = globalThis[TEST_BINDINGS];
  if (!Array.isArray(bindings) || bindings.length === 0) {
    throw new LockError("locksmith: no build of locksmith-js is loaded: import the package (its lock(), say) before making a TestStore", "NOT_INITIALIZED");
  }
  return bindings[0];
}
