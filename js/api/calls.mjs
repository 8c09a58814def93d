// Calls in flight to a binding, by id: the promise lives here, the binding reports
// outcomes in bulk (the addon's completion channel, the Redis engines' outcome arrays).
// One table per binding: the addon's lock calls and its Redis engine share one.

/** The largest call id (a u32 on the Rust side); ids wrap to 0 after it. */
const MAX_CALL_ID = 0xffff_ffff;

/** The value an engine reports for a release subscription that was cancelled. */
export const CANCELLED = -1e300;

/**
 * What keeps the process alive while calls wait, or lets it go (`ref`/`unref`). In Node,
 * a message port, which a test runner's fake timers do not replace (a faked interval
 * keeps nothing alive); elsewhere a timer.
 */
function keepAliveTimer() {
  const node = typeof process === "object" && process.release?.name === "node" && globalThis.Deno === undefined && globalThis.Bun === undefined;
  if (node && typeof MessageChannel === "function" && typeof MessagePort?.prototype?.ref === "function") {
    const { port1 } = new MessageChannel();
    port1.on("message", () => {});
    port1.ref();
    return port1;
  }
  return setInterval(() => {}, 1 << 30);
}

/**
 * Keeps the process alive until `end()`, as calls in flight do (keepAliveTimer): for work
 * that holds nothing else open, such as an election's leader waiting on its signal.
 */
export function keepAlive() {
  const handle = keepAliveTimer();
  return { end: () => (typeof handle === "object" && typeof handle.close === "function" ? handle.close() : clearInterval(handle)) };
}

export class Calls {
  #pending = new Map();
  #nextId;
  #holding = 0;
  #keepAlive;
  #mapError;
  #mapThrown;

  /**
   * `firstId`: where ids start (tests start near the top to reach the wrap-around);
   * `mapError(message)`: the error a failed call rejects with (`CODE locksmith: ...`);
   * `mapThrown(err)`: the error a call that threw at its start rejects with.
   */
  constructor({ firstId = 0, mapError = (message) => new Error(message), mapThrown = (err) => err } = {}) {
    this.#nextId = firstId >>> 0;
    this.#mapError = mapError;
    this.#mapThrown = mapThrown;
  }

  /**
   * Starts `start(id)` and returns the promise of its outcome, decoded by `kind`
   * (`flag`, `number`, `token`, `all`, `nothing`, `listener`). A background call (a hold's
   * watch, a release subscription) does not keep the process alive. `after(started)`
   * runs once the call is on record, with what `start` returned.
   */
  start(start, kind = "flag", background = false, after, owner) {
    let id = this.#nextId;
    while (this.#pending.has(id)) id = id === MAX_CALL_ID ? 0 : id + 1;
    this.#nextId = id === MAX_CALL_ID ? 0 : id + 1;
    return new Promise((resolve, reject) => {
      let started;
      try {
        started = start(id);
      } catch (err) {
        reject(this.#mapThrown(err));
        return;
      }
      this.#pending.set(id, { resolve, reject, kind, background, owner });
      if (!background && this.#holding++ === 0) this.#hold();
      after?.(started);
    });
  }

  /** How many calls that keep the process alive (not background ones) are in flight. */
  get inFlight() {
    return this.#holding;
  }

  #hold() {
    if (this.#keepAlive === undefined) this.#keepAlive = keepAliveTimer();
    else this.#keepAlive.ref?.();
  }

  #letGo() {
    // Where timers have ref/unref (Node, Bun) one timer serves for good; elsewhere it goes.
    if (typeof this.#keepAlive?.unref === "function") {
      this.#keepAlive.unref();
    } else {
      clearInterval(this.#keepAlive);
      this.#keepAlive = undefined;
    }
  }

  /** Takes call `id` off the table; `undefined` if it is not there. */
  finish(id) {
    const call = this.#pending.get(id);
    if (call === undefined) return undefined;
    this.#pending.delete(id);
    if (!call.background && --this.#holding === 0) this.#letGo();
    return call;
  }

  /** Settles the calls in an engine turn's outcome array, `[next timer, id, value, ...]`, `count` numbers long. */
  settle(outcomes, count, engine) {
    let errors;
    for (let i = 1; i < count; i += 2) {
      const value = outcomes[i + 1];
      const call = this.finish(outcomes[i]);
      if (call === undefined || value === CANCELLED) continue;
      if (value <= -2) {
        errors ??= engine.errors();
        const text = errors[-2 - value];
        // An "all" call's tokens come beside the errors: `=` and one per key (`-` for none).
        if (call.kind === "all" && text.startsWith("=")) {
          call.resolve(
            text
              .slice(1)
              .split(" ")
              .map((t) => (t === "-" ? null : Number(t))),
          );
        } else {
          call.reject(this.#mapError(text));
        }
        continue;
      }
      switch (call.kind) {
        case "flag":
          call.resolve(value === 1 ? true : value === 0 ? false : undefined);
          break;
        case "number":
          call.resolve(value < 0 ? null : value);
          break;
        case "token":
          // The fencing token; 0: not taken; -1: taken without a token.
          call.resolve(value > 0 ? value : value === -1);
          break;
        case "all":
          // Not taken: the index of a key found held; -1: not these keys in one step (null).
          call.resolve(value >= 0 ? value : null);
          break;
        default:
          call.resolve(undefined);
      }
    }
  }

  /** Settles a call from the addon's completion channel (`{ id, flag, number, error }`). */
  deliver(done) {
    const call = this.finish(done.id);
    if (call === undefined) return;
    if (done.error != null) call.reject(this.#mapError(done.error));
    else call.resolve(call.kind === "number" ? (done.number ?? null) : (done.flag ?? undefined));
  }

  /** Resolves the release subscriptions of `owner` (its store closed: waiters find out now). */
  resolveListeners(owner) {
    for (const [id, call] of this.#pending) {
      if (call.owner === owner && call.kind === "listener") {
        this.finish(id);
        call.resolve();
      }
    }
  }
}
