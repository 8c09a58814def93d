// The JS-store bridge: how core reaches a store written in JS (the JS store contract,
// docs/api.md). Core calls `dispatch(call)` with `{ op, key, owner, ttlMs, … }`; the
// bridge calls the store and hands back its answer in a form every binding can carry,
// or its refusal in core's words. A binding makes the bridge's native half with
// `binding.bridge(dispatch, timeoutMs, capabilities)` (see capabilitiesOf).
import { ACQUIRE_PERMIT_TOKEN, ACQUIRE_TOKEN, HAS_WAITERS, NATIVE_CLOCK, TEST_CLOCK } from "./symbols.mjs";
import { noteCall } from "./shutdown.mjs";
import { noteSharedStore, toLockError, typeName } from "./errors.mjs";
import { checkNumber } from "./durations.mjs";
import { PERMIT_METHODS, checkStore, closeRecord } from "./stores.mjs";

const DEFAULT_OPERATION_TIMEOUT_MS = 10_000;

// A waiter's subscription to a JS store's `onRelease(key, listener, kind)`: a promise
// that resolves when the listener is called. A store that throws gives no wake-up (the
// waiter's retry delay stands), so the promise then never resolves.
function subscribe(store, subscriptions, call) {
  let wake;
  const woken = new Promise((resolve) => {
    wake = resolve;
  });
  try {
    const unsubscribe = store.onRelease(call.key, () => wake(null), call.kind ?? undefined);
    subscriptions.set(call.id, unsubscribe);
  } catch {
    // No wake-up for this wait.
  }
  return woken;
}

// A store that rejects with an INVALID_ARGUMENT error refuses the request itself (a
// semaphore limit that differs from its holders'): that reaches the caller as such, as
// does a STORE_ERROR (reached, and refused: a missing privilege, a key of the wrong
// type), which a wait does not ride out, and an UNSUPPORTED one (a fair handle on a
// store without fair queues). Any other rejection is the store failing (STORE_UNAVAILABLE).
// Closed is final too: a waiting acquire stops rather than riding it out as an outage.
// Each crosses as `{ refused: code, message }` (core's `Answer::refusal`).
const REFUSALS = new Set(["INVALID_ARGUMENT", "STORE_CLOSED", "STORE_ERROR", "UNSUPPORTED"]);
function refusal(err) {
  if (REFUSALS.has(err?.code)) return { refused: err.code, message: String(err.message) };
  throw storeFailure(err);
}

/**
 * A JS store's failure as core words it ("store.acquire() failed: <reason>"): an Error
 * whose message is the reason and whose name is empty, so the addon (which shows
 * `name: message`) and WebAssembly (the message) say the same. The reason drops what
 * the caller's error says already: a `locksmith:` prefix (with "store unavailable: ")
 * and then the class of a locksmith error; a class of the store's own (a TypeError) is
 * kept, a plain Error's is not. A rejection that is no Error is shown as text.
 */
function storeFailure(err) {
  let reason;
  if (err instanceof Error || typeof err?.message === "string") {
    const message = String(err.message);
    reason = message.replace(/^locksmith: (?:store unavailable: )?/, "");
    const name = typeof err.name === "string" ? err.name : "";
    if (reason === message && name !== "" && name !== "Error") reason = `${name}: ${reason}`;
  } else {
    try {
      reason = String(err);
    } catch {
      reason = typeName(err);
    }
  }
  const failure = new Error(reason);
  failure.name = "";
  return failure;
}

// What a JS store's promise resolved to, in a form every binding can carry.
function normalizeAnswer(value) {
  if (value === undefined) return null;
  const type = typeof value;
  // NaN and ±Infinity have no JSON form: they cross as { nonFinite: "NaN" } so the
  // binding reports what the store said instead of failing to convert it.
  if (type === "number" && !Number.isFinite(value)) return { nonFinite: String(value) };
  if (value === null || type === "boolean" || type === "number" || type === "string") return value;
  return Array.isArray(value) ? [] : {};
}

/**
 * A store's `acquireAll` answer for the bridge: an array as `tokens ` and its entries,
 * space-separated (`-` for null, `?` for what is not a number), a string as `text ` and
 * the string (so no string of the store's own reads as tokens); anything else as it
 * came. Core checks it (contract.rs `expect_all`).
 */
function tokensText(value) {
  if (typeof value === "string") return `text ${value}`;
  if (!Array.isArray(value)) return value;
  return `tokens ${value.map((t) => (t === null ? "-" : typeof t === "number" ? String(t) : "?")).join(" ")}`;
}

/** A JS store's calls that can take or free a hold: a store's close() waits for them. */
const HOLD_CALLS = new Set(["acquire", "release", "acquirePermit", "releasePermit", "acquireAll", "acquireFair"]);

/**
 * What `store` offers beyond the five required methods, which core asks for only where
 * the store has it: `isHeldBy`, `permits` (every one of PERMIT_METHODS: semaphores and
 * read-write locks), `onRelease` (wake-ups), `hasWaiters`, `ownerRemainingTime`,
 * `permitWeights` (a semaphore hold of several permits), `acquireAll` (lockAll() in
 * one call) and `acquireFair` (fair locks and semaphores).
 */
function capabilitiesOf(store) {
  return {
    isHeldBy: typeof store.isHeldBy === "function",
    permits: PERMIT_METHODS.every((m) => typeof store[m] === "function"),
    onRelease: typeof store.onRelease === "function",
    hasWaiters: typeof store[HAS_WAITERS] === "function",
    ownerRemainingTime: typeof store.ownerRemainingTime === "function",
    permitWeights: store.permitWeights === true,
    acquireAll: typeof store.acquireAll === "function",
    fair: typeof store.acquireFair === "function",
  };
}

/** The `dispatch(call)` of a bridge to `store`: core's calls, made on the store. */
function dispatcher(store) {
  // onRelease subscriptions by id, each with the store's unsubscribe function.
  const subscriptions = new Map();
  // A store that can be closed: its close() waits for the calls on their way that can
  // take or free a hold (an acquire, and the release that cleans up after it).
  const record = closeRecord(store);
  const tokens = typeof store[ACQUIRE_TOKEN] === "function";
  const permitTokens = typeof store[ACQUIRE_PERMIT_TOKEN] === "function";
  // Acquires still on their way at the store, by key and owner: the bridge stops
  // waiting at operationTimeoutMs, but the store may still grant one later. A release
  // of the same key and owner (core's clean-up of that attempt: each attempt has its
  // own token) goes to the store only once the acquire has settled, so it cannot
  // overtake it and leave a hold nobody owns.
  const acquiring = new Map();
  const settling = (keys, owner, pending) => {
    const settled = Promise.resolve(pending).then(
      () => {},
      () => {},
    );
    for (const key of keys) {
      const id = `${key}\u0000${owner}`;
      acquiring.set(id, settled);
      settled.then(() => acquiring.get(id) === settled && acquiring.delete(id));
    }
    return pending;
  };
  const afterAcquire = (key, owner, release) => {
    const before = acquiring.get(`${key}\u0000${owner}`);
    return before === undefined ? release() : before.then(release);
  };
  const dispatch = (call) => {
    try {
      let pending;
      switch (call.op) {
        case "onRelease":
          return subscribe(store, subscriptions, call);
        case "hasWaiters":
          // Answered at once, never a promise: see HAS_WAITERS.
          try {
            return store[HAS_WAITERS](call.key) === true;
          } catch {
            return false;
          }
        case "offRelease": {
          const unsubscribe = subscriptions.get(call.id);
          subscriptions.delete(call.id);
          if (typeof unsubscribe === "function") {
            try {
              unsubscribe();
            } catch {
              // The wait is over either way.
            }
          }
          return Promise.resolve(null);
        }
        case "acquire":
          // A shipped store hands its fencing token by its own path (see symbols.mjs).
          pending = settling(
            [call.key],
            call.owner,
            tokens ? store[ACQUIRE_TOKEN](call.key, call.owner, call.ttlMs) : store.acquire(call.key, call.owner, call.ttlMs),
          );
          break;
        // A fair lock's release and extend come with the kind "lock": a store that keeps
        // fair locks otherwise than plain ones (the Redis stores) has releaseFair/extendFair.
        case "release":
          pending = afterAcquire(call.key, call.owner, () =>
            call.kind === "lock" && typeof store.releaseFair === "function" ? store.releaseFair(call.key, call.owner) : store.release(call.key, call.owner),
          );
          break;
        case "extend":
          pending =
            call.kind === "lock" && typeof store.extendFair === "function"
              ? store.extendFair(call.key, call.owner, call.ttlMs)
              : store.extend(call.key, call.owner, call.ttlMs);
          break;
        case "isLocked":
          pending = store.isLocked(call.key);
          break;
        case "isHeldBy":
          pending = store.isHeldBy(call.key, call.owner);
          break;
        case "ownerRemainingTime":
          pending = store.ownerRemainingTime(call.key, call.owner);
          break;
        case "acquirePermit":
          // `permits` only for a store with permitWeights, and only above 1.
          pending = settling(
            [call.key],
            call.owner,
            call.permits === undefined || call.permits === null
              ? permitTokens
                ? store[ACQUIRE_PERMIT_TOKEN](call.key, call.owner, call.ttlMs, call.kind, call.limit ?? undefined)
                : store.acquirePermit(call.key, call.owner, call.ttlMs, call.kind, call.limit ?? undefined)
              : permitTokens
                ? store[ACQUIRE_PERMIT_TOKEN](call.key, call.owner, call.ttlMs, call.kind, call.limit ?? undefined, call.permits)
                : store.acquirePermit(call.key, call.owner, call.ttlMs, call.kind, call.limit ?? undefined, call.permits),
          );
          break;
        // A fair handle's attempt: kind "lock" or "semaphore" (with its limit), always its permits.
        case "acquireFair":
          pending = settling(
            [call.key],
            call.owner,
            store.acquireFair(call.key, call.owner, call.ttlMs, call.kind, call.limit ?? undefined, call.permits, call.waits === true),
          );
          break;
        case "releasePermit":
          pending = afterAcquire(call.key, call.owner, () => store.releasePermit(call.key, call.owner, call.kind));
          break;
        case "extendPermit":
          pending = store.extendPermit(call.key, call.owner, call.ttlMs, call.kind);
          break;
        case "countPermits":
          pending = store.countPermits(call.key, call.kind);
          break;
        case "permitRemainingTime":
          pending = store.permitRemainingTime(call.key, call.owner, call.kind);
          break;
        // The keys come one per line; an array of tokens goes back as one string (see contract.rs).
        case "acquireAll": {
          const keys = call.key.split("\n");
          pending = Promise.resolve(settling(keys, call.owner, store.acquireAll(keys, call.owner, call.ttlMs))).then(tokensText);
          break;
        }
        default:
          pending = store.remainingTime(call.key);
      }
      const answer = Promise.resolve(pending).then(normalizeAnswer, refusal);
      return record === undefined || !HOLD_CALLS.has(call.op) ? answer : noteCall(record, answer);
    } catch (err) {
      return Promise.reject(storeFailure(err));
    }
  };
  return dispatch;
}

/** `bridgeFor(store)`: the bridge to a JS store over `binding`, made once per store. */
export function jsStoreBridges(binding) {
  const bridges = new WeakMap();
  return function bridgeFor(store) {
    let bridge = bridges.get(store);
    if (bridge === undefined) {
      checkStore(store);
      // The test kit's store: its locks and its calls' timeout run on its clock.
      const clock = store[TEST_CLOCK];
      // A store of the user's own counts as shared: it is not this process's memory
      // store (the test kit's store is, on a clock of its own).
      if (clock === undefined) noteSharedStore(store);
      const timeout = store.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
      checkNumber("operationTimeoutMs", timeout);
      const dispatch = dispatcher(store);
      try {
        bridge = binding.bridge(dispatch, timeout, capabilitiesOf(store), clock?.[NATIVE_CLOCK](binding));
      } catch (err) {
        throw toLockError(err);
      }
      bridges.set(store, bridge);
    }
    return bridge;
  };
}
