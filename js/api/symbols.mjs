// Symbols the shipped stores and the API share, registered (Symbol.for) so that every
// copy of the API — the ES module, the CommonJS build, the WebAssembly fallback — sees
// the same ones. Internal: not part of the JS store contract.

// The WebAssembly build's Redis store answers whether locks of this process already wait
// for a key's release, so a new waiting acquire queues behind them (core's
// `LockStore::has_local_waiters`).
export const HAS_WAITERS = Symbol.for("locksmith.hasWaiters");

// A shipped store's `acquire()` and `acquirePermit()` answer `true`/`false`, as the store
// contract's interface does; locks get the hold's fencing token through these instead:
// the same call, answering the token (or `true` without one), or `false`.
export const ACQUIRE_TOKEN = Symbol.for("locksmith.acquireToken");
export const ACQUIRE_PERMIT_TOKEN = Symbol.for("locksmith.acquirePermitToken");

// A shipped store's short name, as the diagnostics channels report it (`store`):
// "redis", "postgres", ... A store without one is "custom".
export const STORE_NAME = Symbol.for("locksmith.storeName");

// `true` on a shipped store whose holds carry no fencing token (a Redis store with
// `fencing: false`): an election refuses it before it sends anything, rather than taking
// the key to learn that its grant has no term.
export const NO_TOKENS = Symbol.for("locksmith.noTokens");

// The test kit (locksmith-js/testing): a test store's clock, which the JS-store bridge puts
// the store's locks on (`store[TEST_CLOCK][NATIVE_CLOCK](binding)`: the binding's side of
// it), and where each loaded build of the API leaves its binding for the kit.
export const TEST_CLOCK = Symbol.for("locksmith.testing.clock");
export const NATIVE_CLOCK = Symbol.for("locksmith.testing.nativeClock");
export const TEST_BINDINGS = Symbol.for("locksmith.testing.bindings");
