// Checks of the errors tests expect, for assert.rejects and assert.throws.
import assert from "node:assert/strict";

/**
 * Checks an InvalidArgumentError: its code, name and `locksmith: ` message, the message
 * matching `pattern` when one is given, and an instance of `base` (the build's LockError)
 * when one is given.
 */
export const invalidArgument = (pattern, base) => (err) => {
  if (base) assert.ok(err instanceof base, `a ${base.name}, got ${err?.stack ?? err}`);
  assert.equal(err.code, "INVALID_ARGUMENT");
  assert.equal(err.name, "InvalidArgumentError");
  assert.match(err.message, /^locksmith: /);
  if (pattern) assert.match(err.message, pattern);
  return true;
};
