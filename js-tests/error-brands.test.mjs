// `instanceof` on locksmith's errors answers by brand, not by which copy of the classes
// made the error: the package's ES modules, its CommonJS build (what the SQL stores
// throw from), and a second copy of the module (as a bundler or a test runner's
// per-file module registry makes) all agree, and the class hierarchy holds.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

import { ls } from "./support/target.mjs";

const require = createRequire(import.meta.url);
const copy = await import("../js/api/errors.mjs?a-second-copy");
const NAMES = [
  "LockError",
  "AbortError",
  "LockNotHeldError",
  "InvalidArgumentError",
  "InvalidSerializedLockError",
  "StoreUnavailableError",
  "StoreContractViolationError",
  "LockStoreError",
  "StoreClosedError",
  "StoreNotSetError",
  "UnsupportedError",
];

describe("error classes answer instanceof by brand", () => {
  it("a second copy of the classes is a different set of classes", () => {
    for (const name of NAMES) assert.notEqual(copy[name], ls[name], name);
  });

  it("an error from either copy is an instance of the same class in the other, and of LockError and Error", () => {
    for (const name of NAMES) {
      for (const [Made, Asked] of [
        [copy[name], ls[name]],
        [ls[name], copy[name]],
      ]) {
        const err = name === "LockError" ? new Made("locksmith: x", "X") : new Made("locksmith: x");
        assert.ok(err instanceof Asked, `${name} from one copy is a ${name} of the other`);
        assert.ok(err instanceof ls.LockError, `${name} is a LockError`);
        assert.ok(err instanceof copy.LockError, `${name} is a LockError of the copy`);
        assert.ok(err instanceof Error, `${name} is an Error`);
        assert.equal(err.name, name);
      }
    }
  });

  it("the hierarchy holds: no error is an instance of a sibling class", () => {
    for (const made of NAMES.filter((n) => n !== "LockError")) {
      const err = new copy[made]("locksmith: x");
      for (const asked of NAMES.filter((n) => n !== "LockError" && n !== made)) {
        assert.ok(!(err instanceof ls[asked]), `a ${made} is not a ${asked}`);
      }
    }
    assert.ok(!(new ls.LockError("locksmith: x", "X") instanceof copy.StoreUnavailableError));
    assert.ok(!(new copy.StoreClosedError("locksmith: closed") instanceof ls.StoreUnavailableError));
  });

  it("things that are not locksmith's errors are not instances", () => {
    for (const value of [null, undefined, 0, "LockError", {}, new Error("x"), Object.create(null), () => {}]) {
      assert.ok(!(value instanceof ls.LockError), typeof value);
      assert.ok(!(value instanceof copy.StoreClosedError), typeof value);
    }
    // A class's own prototype is not an instance of it; a subclass's prototype is one of its parent.
    for (const name of NAMES) assert.ok(!(ls[name].prototype instanceof copy[name]), `${name}.prototype`);
    assert.ok(copy.StoreClosedError.prototype instanceof ls.LockError);
    // A look-alike object with a `code` and a `name` is not branded.
    assert.ok(!({ name: "LockError", code: "STORE_CLOSED" } instanceof ls.LockError));
  });

  it("a user's subclass answers by its prototype chain", () => {
    class JobLockError extends ls.LockError {}
    const mine = new JobLockError("locksmith: mine", "MINE");
    assert.ok(mine instanceof JobLockError);
    assert.ok(mine instanceof ls.LockError);
    assert.ok(mine instanceof copy.LockError);
    assert.ok(!(new ls.LockError("locksmith: x", "X") instanceof JobLockError));
    assert.ok(!(new copy.LockStoreError("locksmith: x") instanceof JobLockError));
  });

  it("a CommonJS store's error is an instance of the API's class in this build", () => {
    const { PostgresLockStore } = require("../js/stores/postgres.cjs");
    const err = (() => {
      try {
        new PostgresLockStore({ connectionString: "postgres://localhost/x", bogus: 1 });
      } catch (e) {
        return e;
      }
      assert.fail("an unknown option was taken");
    })();
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.ok(err instanceof ls.InvalidArgumentError);
    assert.ok(err instanceof copy.InvalidArgumentError);
    assert.ok(err instanceof ls.LockError);
  });

  it("an error the build itself throws is an instance of the copy's class", async () => {
    const err = await (async () => ls.lock("", 1_000).acquire())().then(
      () => assert.fail("an empty key was taken"),
      (e) => e,
    );
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.ok(err instanceof copy.InvalidArgumentError);
    assert.ok(err instanceof copy.LockError);
  });
});
