// A JS store's failure reaches the caller in one sentence: one `locksmith:` prefix, the
// store's own error class left out when it is one of ours (its code says as much), and
// the cause once — the same words from the native addon and from WebAssembly.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import pg from "pg";

import { PostgresLockStore } from "../js/stores/postgres.mjs";
import { failOnUnhandledRejections, ls, uniqueKey } from "./support/target.mjs";

failOnUnhandledRejections();

const { lock, StoreUnavailableError } = ls;

/** A store whose acquire fails with `fail()` (thrown, or a rejection); the rest answer. */
const failing = (fail) => ({
  acquire: fail,
  release: async () => true,
  extend: async () => true,
  isLocked: async () => false,
  remainingTime: async () => null,
});

const failure = async (store) => {
  const err = await lock(uniqueKey("messages"), 5_000, store)
    .acquire()
    .then(
      () => assert.fail("the acquire succeeded"),
      (e) => e,
    );
  assert.ok(err instanceof StoreUnavailableError, String(err));
  return err.message;
};

const occurrences = (text, part) => text.split(part).length - 1;

describe("a JS store's failure, in the caller's message", () => {
  it("a real PostgreSQL store that cannot connect: one prefix, no class name, the cause once", async () => {
    // Nothing listens on port 1: the pool's connect is refused.
    const pool = new pg.Pool({ connectionString: "postgres://locksmith@127.0.0.1:1/locksmith", connectionTimeoutMillis: 2_000 });
    pool.on("error", () => {});
    const store = new PostgresLockStore(pool, { listen: false });
    try {
      const message = await failure(store);
      assert.match(message, /^locksmith: store unavailable: store\.acquire\(\) failed: PostgreSQL: connect ECONNREFUSED 127\.0\.0\.1:1\b/);
      assert.equal(occurrences(message, "locksmith:"), 1, message);
      assert.equal(occurrences(message, "StoreUnavailableError"), 0, message);
      assert.equal(occurrences(message, "ECONNREFUSED"), 1, message);
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it("an error of the store's own class keeps its name; a plain Error's name is left out", async () => {
    assert.match(
      await failure(
        failing(async () => {
          throw new TypeError("client.send is not a function");
        }),
      ),
      /^locksmith: store unavailable: store\.acquire\(\) failed: TypeError: client\.send is not a function;/,
    );
    assert.match(
      await failure(
        failing(async () => {
          throw new Error("connection reset");
        }),
      ),
      /^locksmith: store unavailable: store\.acquire\(\) failed: connection reset;/,
    );
  });

  it("a rejection that is no Error (a string) is shown as it is", async () => {
    assert.match(
      await failure(failing(() => Promise.reject("the server said no"))),
      /^locksmith: store unavailable: store\.acquire\(\) failed: the server said no;/,
    );
  });

  it("a locksmith error thrown synchronously by the store is cleaned the same way", async () => {
    const message = await failure(
      failing(() => {
        throw new StoreUnavailableError("locksmith: the gateway is down");
      }),
    );
    assert.match(message, /^locksmith: store unavailable: store\.acquire\(\) failed: the gateway is down;/);
  });

  it("a nested store failure says 'store unavailable' once", async () => {
    // A store that wraps another locksmith lock passes its error on as it came.
    const inner = failing(async () => {
      throw new StoreUnavailableError("locksmith: store unavailable: the gateway is down");
    });
    const message = await failure(inner);
    assert.equal(occurrences(message, "store unavailable"), 1, message);
    assert.equal(occurrences(message, "locksmith:"), 1, message);
  });
});
