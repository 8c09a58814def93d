// Reading `lock.serialize()`'s text back, for `restoreLock()` in both builds. The text
// is written by the Rust core (SerializedLock::to_json). Here the host's JSON.parse reads
// it and each field's JSON type is checked; the core then checks the values
// (SerializedLock::from_fields): ranges, the owner token, keys in canonical order, which
// fields go together. A JSON reader in Rust cost the WebAssembly module a tenth of its size.
import { InvalidSerializedLockError, wellFormed } from "./errors.mjs";

/** Longer text is refused before it is parsed (64 keys of 1 KB, escaped, fit). */
export const MAX_SERIALIZED_LENGTH = 160 * 1024;

const bad = (why) => new InvalidSerializedLockError(`locksmith: invalid serialized lock: ${why}`);

const FIELDS = ["key", "ttlMs", "owner", "fencingToken", "expiresAt", "kind", "limit", "keys", "fencingTokens"];

const jsonType = (value) => (value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : `a ${typeof value}`);

/** A string the bindings carry as it is (a lone surrogate would turn into U+FFFD). */
function string(name, value) {
  if (typeof value !== "string") throw bad(`${name} must be a string; got ${jsonType(value)}`);
  if (!wellFormed(value)) {
    throw bad(`${name} has a lone surrogate (\\ud800-\\udfff escape without its pair)`);
  }
  return value;
}

function number(name, value) {
  if (typeof value !== "number") throw bad(`${name} must be a number; got ${jsonType(value)}`);
  return value;
}

/**
 * `text`'s fields as the bindings' `restore()` takes them: `undefined` for an absent or
 * null field, a null token in fencingTokens as NaN.
 */
export function serializedFields(text) {
  if (text.length > MAX_SERIALIZED_LENGTH) {
    throw bad(`it is ${text.length} characters long; a serialized lock is at most ${MAX_SERIALIZED_LENGTH}`);
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    // Not JSON.parse's message: it quotes the text, and the text is a bearer secret.
    throw bad(`expected JSON {"key", "ttlMs", "owner"} from serialize(); this is not JSON`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw bad(`expected JSON {"key", "ttlMs", "owner"} from serialize(); got ${jsonType(value)}`);
  }
  for (const name of Object.keys(value)) {
    if (!FIELDS.includes(name)) {
      throw bad(`unknown field ${JSON.stringify(name)}, expected one of ${FIELDS.map((f) => `"${f}"`).join(", ")}`);
    }
  }
  const field = (name, read) => (value[name] === undefined || value[name] === null ? undefined : read(name, value[name]));
  const list = (name, item) => (_, items) => {
    if (!Array.isArray(items)) throw bad(`${name} must be an array; got ${jsonType(items)}`);
    return items.map((entry, i) => item(`${name}[${i}]`, entry));
  };
  return {
    key: field("key", string),
    keys: field("keys", list("keys", string)),
    ttlMs: field("ttlMs", number),
    owner: field("owner", string),
    fencingToken: field("fencingToken", number),
    expiresAt: field("expiresAt", number),
    kind: field("kind", string),
    limit: field("limit", number),
    fencingTokens: field(
      "fencingTokens",
      list("fencingTokens", (name, t) => (t === null ? Number.NaN : number(name, t))),
    ),
  };
}
