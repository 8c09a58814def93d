// The defaults and limits kept once on each side agree: js/api/defaults.mjs (every JS
// module's) against the values the Rust code uses, read from the addon and from the
// WebAssembly Redis engine.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { it } from "node:test";

import * as defaults from "../js/api/defaults.mjs";
import { DEFAULTS } from "../js/redis/driver.mjs";

const require = createRequire(import.meta.url);

it("the addon's Rust defaults are js/api/defaults.mjs's", () => {
  const { loadAddon } = require("../js/native-loader.cjs");
  const c = loadAddon().constants();
  assert.deepEqual(
    { DEFAULT_TTL_MS: c.defaultTtlMs, MAX_MS: c.maxMs, FENCE_GRACE_MS: c.fenceGraceMs, DEFAULT_KEY_PREFIX: c.defaultKeyPrefix, MAX_LIMIT: c.maxLimit },
    {
      DEFAULT_TTL_MS: defaults.DEFAULT_TTL_MS,
      MAX_MS: defaults.MAX_MS,
      FENCE_GRACE_MS: defaults.FENCE_GRACE_MS,
      DEFAULT_KEY_PREFIX: defaults.DEFAULT_KEY_PREFIX,
      MAX_LIMIT: defaults.MAX_LIMIT,
    },
  );
});

it("the WebAssembly Redis engine's Rust defaults are js/api/defaults.mjs's", async () => {
  const engine = await import("../js/wasm/locksmith_wasm_redis.js");
  engine.initSync({ module: await readFile(new URL("../js/wasm/locksmith_wasm_redis_bg.wasm", import.meta.url)) });
  const [ttl, maxMs, grace, maxLimit, prefix] = engine.constants();
  assert.deepEqual(
    [ttl, maxMs, grace, maxLimit, prefix],
    [defaults.DEFAULT_TTL_MS, defaults.MAX_MS, defaults.FENCE_GRACE_MS, defaults.MAX_LIMIT, defaults.DEFAULT_KEY_PREFIX],
  );
});

it("RedisLockStore.connect()'s key prefix default is the shared one", () => {
  assert.equal(DEFAULTS.keyPrefix, defaults.DEFAULT_KEY_PREFIX);
});
