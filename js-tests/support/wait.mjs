// Waiting in tests: retrying a call until it works, polling a condition until it holds,
// holding the thread, and settling a promise into a value or an error with the time it took.
import { setTimeout as sleep } from "node:timers/promises";

/** Retries `fn` every 50 ms until it stops throwing (a store reconnecting), up to `ms`; its value, or its last error. */
export async function eventually(fn, ms = 5_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

/** Polls `check` (async, truthy when done; a throw counts as not yet) every 50 ms for up to `ms`; fails naming `what`. */
export async function until(what, check, ms = 20_000) {
  const notYet = new Error("not yet");
  try {
    await eventually(async () => {
      if (!(await check())) throw notYet;
    }, ms);
  } catch (err) {
    throw new Error(`timed out waiting for ${what}${err === notYet ? "" : `: ${err.message}`}`);
  }
}

/** Holds the JS thread for `ms`, as a long GC pause or synchronous work would (and what a busy process does to its sockets). */
export function busy(ms) {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** Awaits `promise`, returning `{ value }` or `{ error }`, and how long it took (`ms`). */
export async function settle(promise) {
  const start = performance.now();
  try {
    return { value: await promise, ms: performance.now() - start };
  } catch (error) {
    return { error, ms: performance.now() - start };
  }
}
