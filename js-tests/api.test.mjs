// Bad input, misbehaving stores, and error classes: every failure is a typed LockError
// with a stable code and a `locksmith:` message; nothing crashes, nothing is left held.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, it } from "node:test";
import { promisify } from "node:util";

import { mapStore } from "./support/js-stores.mjs";
import { until } from "./support/redis-topology.mjs";
import { TARGET, failOnUnhandledRejections, ls, uniqueKey } from "./support/target.mjs";

const { lock, Lock, restoreLock, setLockStore, getLockStore, MemoryLockStore, LockError } = ls;

await failOnUnhandledRejections();

function assertLockError(err, code, name) {
  assert.ok(err instanceof LockError, `a LockError, got ${err?.stack ?? err}`);
  assert.ok(err instanceof Error);
  assert.equal(err.code, code, err.message);
  assert.match(err.message, /^locksmith: /);
  if (name) assert.equal(err.name, name);
  return true;
}

const throwsCode = (fn, code, name) => assert.throws(fn, (err) => assertLockError(err, code, name));
const rejectsCode = (promise, code, name) => assert.rejects(promise, (err) => assertLockError(err, code, name));

describe("bad keys", () => {
  const bad = [
    ["empty", ""],
    ["a number", 42],
    ["undefined", undefined],
    ["null", null],
    ["an object", { key: "k" }],
    ["NUL", "a\0b"],
    ["a newline", "line\nbreak"],
    ["another control character", "bell\u0007"],
    ["too long", "k".repeat(1025)],
    ["too long in UTF-8 bytes", "é".repeat(513)],
    ["a lone high surrogate", "a\ud800"],
    ["a lone low surrogate", "\udc00b"],
  ];
  for (const [what, key] of bad) {
    it(`refuses a key that is ${what}`, () => {
      throwsCode(() => lock(key), "INVALID_ARGUMENT", "InvalidArgumentError");
    });
  }

  it("refuses a lone surrogate wherever a key goes in (it would be carried as U+FFFD: two keys one lock)", () => {
    const store = new ls.MemoryLockStore();
    throwsCode(() => ls.semaphore("s\ud800", 2, 1_000, store), "INVALID_ARGUMENT");
    throwsCode(() => ls.readWriteLock("rw\udfff", 1_000, store), "INVALID_ARGUMENT");
    throwsCode(() => ls.lockAll(["a", "b\ud800"], 1_000, store), "INVALID_ARGUMENT");
    throwsCode(() => new ls.Lock("x\udc00", 1_000, store), "INVALID_ARGUMENT");
    assert.throws(() => lock("a\ud800"), /lone surrogate/);
  });

  it("takes any other Unicode", async () => {
    for (const key of ["请求书:42", "ключ 🔒", "emoji👩‍👩‍👧", "k".repeat(1024), "quote\"'`{}[]--"]) {
      const l = lock(key, 1_000);
      assert.equal(l.key, key);
      assert.equal(await l.acquire(), true);
      assert.equal(restoreLock(l.serialize()).key, key);
      assert.equal(await l.release(), true);
    }
  });
});

describe("bad TTLs", () => {
  const bad = [0, -1, NaN, Infinity, -Infinity, 1.5, 2 ** 31, "100", null, {}];
  for (const ttl of bad) {
    it(`refuses ttlMs ${String(ttl)}`, async () => {
      throwsCode(() => lock("k", ttl), "INVALID_ARGUMENT");
      const l = lock(uniqueKey("ttl"), 1_000);
      await l.acquire();
      if (ttl !== null) await rejectsCode(l.extend(ttl), "INVALID_ARGUMENT");
      assert.equal(await l.isExpired(), false, "a refused extend leaves the hold alone");
      await l.release();
    });
  }

  it("takes the largest TTL", () => {
    assert.equal(lock("k", 2 ** 31 - 1).ttlMs, 2 ** 31 - 1);
    assert.equal(lock("k").ttlMs, 30_000);
  });
});

describe("bad acquire options", () => {
  const bad = [
    { timeout: -1 },
    { timeout: NaN },
    { timeout: -Infinity },
    { timeout: "5" },
    { retryDelay: 0 },
    { retryDelay: -5 },
    { retryDelay: NaN },
    { retryDelay: "10" },
    "fast",
    42,
  ];
  for (const options of bad) {
    it(`refuses ${JSON.stringify(options)}`, async () => {
      const l = lock(uniqueKey("options"));
      await rejectsCode(l.acquire(options), "INVALID_ARGUMENT");
      await rejectsCode(
        l.run(() => {}, options),
        "INVALID_ARGUMENT",
      );
      assert.equal(await l.isLocked(), false, "nothing taken by a refused call");
    });
  }

  it("refuses arguments to new MemoryLockStore(), which has no options", () => {
    for (const args of [[{ bogus: 1 }], ["x"], [{}], [undefined, 5]]) {
      throwsCode(() => new MemoryLockStore(...args), "INVALID_ARGUMENT", "InvalidArgumentError");
    }
    assert.ok(new MemoryLockStore(undefined) instanceof MemoryLockStore);
  });

  it("refuses run() without a function", async () => {
    await rejectsCode(lock("k").run("not a function"), "INVALID_ARGUMENT");
  });
});

describe("bad serialized locks", () => {
  const owner = "0123456789abcdef0123456789abcdef";
  const bad = [
    ["garbage", "garbage"],
    ["empty", ""],
    ["truncated JSON", `{"key":"a","ttlMs":1000,"owner":"${owner}"`],
    ["an array", "[1,2]"],
    ["a missing owner", `{"key":"a","ttlMs":1000}`],
    ["a missing key", `{"ttlMs":1000,"owner":"${owner}"}`],
    ["a key of the wrong type", `{"key":1,"ttlMs":1000,"owner":"${owner}"}`],
    ["a TTL of the wrong type", `{"key":"a","ttlMs":"1000","owner":"${owner}"}`],
    ["a fractional TTL", `{"key":"a","ttlMs":0.5,"owner":"${owner}"}`],
    ["a short owner", `{"key":"a","ttlMs":1000,"owner":"abc"}`],
    ["an unknown field", `{"key":"a","ttlMs":1000,"owner":"${owner}","admin":true}`],
    ["an empty key", `{"key":"","ttlMs":1000,"owner":"${owner}"}`],
    ["a huge string", `{"key":"${"k".repeat(100_000)}","ttlMs":1000,"owner":"${owner}"}`],
    ["JSON null", "null"],
    ["a JSON string", '"a"'],
    ["trailing characters", `{"key":"a","ttlMs":1,"owner":"${owner}"}x`],
    ["a leading zero", `{"key":"a","ttlMs":01,"owner":"${owner}"}`],
    ["a key and keys", `{"key":"a","keys":["a"],"ttlMs":1,"owner":"${owner}","kind":"multi"}`],
    ["keys that are not strings", `{"keys":[1],"ttlMs":1,"owner":"${owner}","kind":"multi"}`],
    ["nested keys", `{"keys":[["a"]],"ttlMs":1,"owner":"${owner}","kind":"multi"}`],
    ["keys that are not an array", `{"keys":"a","ttlMs":1,"owner":"${owner}","kind":"multi"}`],
    ["a trailing comma in keys", `{"keys":["a",],"ttlMs":1,"owner":"${owner}","kind":"multi"}`],
    ["a token of the wrong type", `{"key":"a","ttlMs":1,"owner":"${owner}","fencingToken":"1"}`],
    ["tokens of the wrong type", `{"keys":["a"],"ttlMs":1,"owner":"${owner}","kind":"multi","fencingTokens":["1"]}`],
    ["a TTL in an array", `{"key":"a","ttlMs":[1],"owner":"${owner}"}`],
    ["a kind of the wrong type", `{"key":"a","ttlMs":1,"owner":"${owner}","kind":1}`],
    ["a limit of the wrong type", `{"key":"a","ttlMs":1,"owner":"${owner}","kind":"semaphore","limit":"2"}`],
    ["a lone surrogate in the key", `{"key":"\\ud800","ttlMs":1,"owner":"${owner}"}`],
    ["a control character in the key", `{"key":"a\\u0001","ttlMs":1,"owner":"${owner}"}`],
    ["a token past 2^53", `{"key":"a","ttlMs":1,"owner":"${owner}","fencingToken":9007199254740992}`],
    ["an expiry that is not whole", `{"key":"a","ttlMs":1,"owner":"${owner}","expiresAt":1.5}`],
  ];
  for (const [what, text] of bad) {
    it(`refuses ${what}`, () => {
      throwsCode(() => restoreLock(text), "INVALID_SERIALIZED_LOCK", "InvalidSerializedLockError");
      assert.throws(() => restoreLock(text), /: locksmith: invalid serialized lock: /);
    });
  }

  it("says what is wrong, and never quotes the text (it is a bearer secret)", () => {
    const say = (text) => {
      try {
        restoreLock(text);
      } catch (err) {
        return err.message;
      }
      assert.fail(`restored ${text}`);
    };
    assert.match(say(`{"key":"a","ttlMs":1,"owner":"${owner}","admin":true}`), /unknown field "admin"/);
    assert.match(say(`{"key":1,"ttlMs":1,"owner":"${owner}"}`), /key must be a string; got a number/);
    assert.match(say(`{"key":"a","ttlMs":"1","owner":"${owner}"}`), /ttlMs must be a number; got a string/);
    assert.match(say(`{"keys":["a",2],"ttlMs":1,"owner":"${owner}","kind":"multi"}`), /keys\[1\] must be a string/);
    assert.match(say(`{"key":"a","owner":"${owner}"}`), /missing field `ttlMs`/);
    assert.match(say(`{"key":"a","ttlMs":1,"owner":"${owner}","fencingToken":0}`), /fencing token/);
    assert.match(say(`{"key":"a","ttlMs":1,"owner":"${owner}"`), /not JSON/);
    assert.doesNotMatch(say(`{"key":"a","ttlMs":1,"owner":"${owner}"`), new RegExp(owner));
    assert.match(say("x".repeat(200_000)), /at most 163840/);
  });

  it("reads the text as JSON.parse does: any field order, whitespace, escapes and null for an absent field", async () => {
    const a = lock(uniqueKey("json-forms"), 5_000);
    await a.acquire();
    const { key, ttlMs, owner: own } = JSON.parse(a.serialize());
    const escaped = [...key].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
    const text = ` {\n "owner" : "${own}", "limit": null, "kind": null,\t"ttlMs" : ${ttlMs}, "key":"${escaped}" } `;
    const b = restoreLock(text);
    assert.equal(b.key, key);
    assert.equal(await b.release(), true, "the same hold");
    assert.equal(await a.isLocked(), false);
  });

  it("refuses a lone surrogate where the runtime has no String.prototype.isWellFormed, and takes a pair", async () => {
    const own = Object.getOwnPropertyDescriptor(String.prototype, "isWellFormed");
    const a = lock(uniqueKey("pair-\u{1F512}"), 5_000);
    await a.acquire();
    const text = a.serialize();
    delete String.prototype.isWellFormed;
    try {
      throwsCode(() => restoreLock(`{"key":"\\udfff","ttlMs":1,"owner":"${owner}"}`), "INVALID_SERIALIZED_LOCK");
      throwsCode(() => restoreLock(`{"key":"a\\ud800b","ttlMs":1,"owner":"${owner}"}`), "INVALID_SERIALIZED_LOCK");
      assert.equal(restoreLock(text).key, a.key, "a surrogate pair is one code point");
    } finally {
      if (own) Object.defineProperty(String.prototype, "isWellFormed", own);
    }
    assert.equal(await a.release(), true);
  });

  it("restores the longest serialized form: 64 keys of 1 KB of quotes, each escaped to two bytes", async () => {
    const keys = Array.from({ length: 64 }, (_, i) => `${'"'.repeat(1_020)}${String(i).padStart(4, "0")}`);
    const multi = ls.lockAll(keys, 5_000);
    assert.equal(await multi.acquire(), true);
    const text = multi.serialize();
    assert.ok(text.length > 128 * 1024, `${text.length} characters`);
    const restored = restoreLock(text);
    assert.deepEqual([...restored.keys].sort(), [...keys].sort());
    assert.equal(await restored.release(), true, "the same hold");
    assert.equal(await multi.isLocked(), false);
  });

  it("refuses a non-string", () => {
    throwsCode(() => restoreLock({ key: "a" }), "INVALID_ARGUMENT");
  });

  it("a token restored under another key holds nothing there", async () => {
    const a = lock(uniqueKey("token-a"));
    await a.acquire();
    const forged = JSON.stringify({ ...JSON.parse(a.serialize()), key: uniqueKey("token-b") });
    const b = restoreLock(forged);
    assert.equal(await b.release(), false);
    await rejectsCode(b.extend(), "LOCK_NOT_HELD");
    assert.equal(await a.release(), true);
  });
});

describe("stores that misbehave", () => {
  const base = () => ({ ...mapStore(), operationTimeoutMs: 600 });
  const cases = [
    [
      "throws synchronously",
      (s) => ({
        ...s,
        acquire: () => {
          throw new Error("sync boom");
        },
      }),
      "STORE_UNAVAILABLE",
      /sync boom/,
    ],
    [
      "rejects",
      (s) => ({
        ...s,
        acquire: async () => {
          throw new Error("async boom");
        },
      }),
      "STORE_UNAVAILABLE",
      /async boom/,
    ],
    ["rejects with a non-Error", (s) => ({ ...s, acquire: () => Promise.reject("nope") }), "STORE_UNAVAILABLE", /acquire/],
    ['returns "yes"', (s) => ({ ...s, acquire: async () => "yes" }), "STORE_CONTRACT_VIOLATION", /"yes"/],
    ["returns undefined", (s) => ({ ...s, acquire: async () => undefined }), "STORE_CONTRACT_VIOLATION", /null\/undefined/],
    ["returns an object", (s) => ({ ...s, acquire: async () => ({ ok: true }) }), "STORE_CONTRACT_VIOLATION", /object/],
    ["returns a plain value, not a promise", (s) => ({ ...s, acquire: () => 0 }), "STORE_CONTRACT_VIOLATION", /resolved to 0;/],
    ["never settles", (s) => ({ ...s, acquire: () => new Promise(() => {}) }), "STORE_UNAVAILABLE", /did not settle within 600 ms/],
  ];
  for (const [what, make, code, message] of cases) {
    it(`acquire ${what}`, async () => {
      const store = make(base());
      const l = new Lock(uniqueKey("bad-store"), 1_000, store);
      const err = await l.acquire().catch((e) => e);
      assertLockError(err, code);
      assert.match(err.message, message);
      assert.equal(await l.isExpired(), false);
      await rejectsCode(
        l.run(() => assert.fail("must not run")),
        code,
      );
    });
  }

  it("release and extend that fail", async () => {
    const good = base();
    const store = {
      ...good,
      release: () => Promise.reject(new Error("release boom")),
      extend: async () => "sure",
      isLocked: () => new Promise(() => {}),
      remainingTime: async () => -5,
    };
    const l = new Lock(uniqueKey("bad-store2"), 1_000, store);
    assert.equal(await l.acquire(), true);
    await rejectsCode(l.release(), "STORE_UNAVAILABLE");
    await rejectsCode(l.extend(), "STORE_CONTRACT_VIOLATION");
    await rejectsCode(l.isLocked(), "STORE_UNAVAILABLE");
    await rejectsCode(l.getRemainingTime(), "STORE_CONTRACT_VIOLATION");
    assert.equal(await good.release(l.key, JSON.parse(l.serialize()).owner), true, "still releasable");
  });

  it("a release that fails after run()'s work keeps the result on the error", async () => {
    const store = {
      ...base(),
      release: async () => {
        throw new Error("gone");
      },
    };
    const err = await new Lock(uniqueKey("run-release"), 1_000, store).run(() => "the result").catch((e) => e);
    assertLockError(err, "STORE_UNAVAILABLE");
    assert.equal(err.result, "the result");
  });

  it("an acquire applied after operationTimeoutMs leaves nothing held once it settles", async () => {
    // The bridge gives up at 100 ms; the store grants the attempt at 300 ms. The attempt's
    // clean-up release reaches the store only after that, so it frees the late grant.
    const inner = mapStore();
    const store = {
      ...inner,
      operationTimeoutMs: 100,
      acquire: async (key, owner, ttl) => {
        await new Promise((r) => setTimeout(r, 300));
        return inner.acquire(key, owner, ttl);
      },
    };
    const key = uniqueKey("late-grant");
    const err = await new Lock(key, 10_000, store).acquire().catch((e) => e);
    assert.equal(err.code, "STORE_UNAVAILABLE");
    assert.equal(err.holdMayRemain, true);
    await new Promise((r) => setTimeout(r, 400));
    await until("the late grant is released", async () => !(await inner.isLocked(key)), 1_000);
    assert.equal(await new Lock(key, 10_000, inner).acquire(), true, "another owner gets in");
  });

  it("an acquire whose answer is lost releases what it may have taken", async () => {
    const inner = mapStore();
    const store = {
      ...inner,
      acquire: async (key, owner, ttl) => {
        await inner.acquire(key, owner, ttl);
        throw new Error("connection reset");
      },
    };
    const key = uniqueKey("lost-answer");
    // It answers at once, says a hold may remain, and frees it in the background.
    const err = await new Lock(key, 5_000, store).acquire().catch((e) => e);
    assert.equal(err.code, "STORE_UNAVAILABLE");
    assert.equal(err.holdMayRemain, true);
    assert.match(err.message, /a hold may remain until it settles and is released, or until its TTL/);
    await until("the hold the lost answer took is released", async () => !(await inner.isLocked(key)), 2_000);
  });
});

describe("timers", () => {
  const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

  it("calls through a JS store leave no timer behind once answered", async () => {
    const store = { ...mapStore(), operationTimeoutMs: 10_000 };
    const before = timeouts();
    for (let i = 0; i < 100; i++) {
      const l = new Lock(uniqueKey("timers"), 1_000, store);
      assert.equal(await l.acquire(), true);
      assert.equal(await l.isLocked(), true);
      assert.equal(await l.release(), true);
    }
    const left = timeouts() - before;
    assert.ok(left < 5, `${left} timers still pending after 300 answered store calls`);
  });

  it("a process that used a JS store exits as soon as its work is done", async () => {
    const entry = new URL(TARGET === "wasm" ? "../js/wasm.mjs" : "../js/node.mjs", import.meta.url).href;
    const script = `
      const { Lock } = await import(${JSON.stringify(entry)});
      const held = new Map();
      const store = {
        acquire: async (k) => !held.has(k) && Boolean(held.set(k, 1)),
        release: async (k) => held.delete(k),
        extend: async (k) => held.has(k),
        isLocked: async (k) => held.has(k),
        remainingTime: async () => null,
        operationTimeoutMs: 10_000,
      };
      for (let i = 0; i < 10; i++) {
        const l = new Lock("k", 1_000, store);
        if (!(await l.acquire()) || !(await l.release())) throw new Error("the store misbehaved");
      }`;
    const start = performance.now();
    await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script]);
    const ms = performance.now() - start;
    assert.ok(ms < 5_000, `the process took ${Math.round(ms)} ms to exit (a store call's 10 s timeout kept it alive?)`);
  });
});

describe("stores", () => {
  it("setLockStore refuses what is not a store", () => {
    for (const bad of [null, undefined, 42, "redis", {}, { acquire() {} }]) {
      throwsCode(() => setLockStore(bad), "INVALID_ARGUMENT");
    }
    throwsCode(() => new Lock("k", 1_000, { acquire() {} }), "INVALID_ARGUMENT");
    // A store's connect() not awaited: the message says so.
    const pending = Promise.resolve(new MemoryLockStore());
    assert.throws(
      () => setLockStore(pending),
      (err) => err.code === "INVALID_ARGUMENT" && /did you forget `await`/.test(err.message),
    );
  });

  it("setLockStore returns the store, getLockStore reads it back", async () => {
    const before = getLockStore();
    assert.ok(before instanceof MemoryLockStore, "the default store is a MemoryLockStore");
    const store = mapStore();
    assert.equal(setLockStore(store), store);
    assert.equal(getLockStore(), store);
    const l = lock(uniqueKey("custom"));
    await l.acquire();
    assert.equal(await store.isLocked(l.key), true);
    await l.release();
    setLockStore(before);
  });

  it("each MemoryLockStore is its own", async () => {
    const [a, b] = [new MemoryLockStore(), new MemoryLockStore()];
    assert.equal(await new Lock("same", 1_000, a).acquire(), true);
    assert.equal(await new Lock("same", 1_000, b).acquire(), true);
    a.clear();
    assert.equal(await a.isLocked("same"), false);
  });

  it("MemoryLockStore's plain methods check their arguments", async () => {
    const s = new MemoryLockStore();
    await rejectsCode(s.acquire("k", "o", 0), "INVALID_ARGUMENT");
    await rejectsCode(s.acquire(1, "o", 10), "INVALID_ARGUMENT");
    await rejectsCode(s.extend("k", "o", NaN), "INVALID_ARGUMENT");
  });
});
