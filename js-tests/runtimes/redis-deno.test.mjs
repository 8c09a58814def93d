// RedisLockStore on Deno over Deno.connectTls: rediss:// to a redis-server whose
// certificate a private CA signed, trusted through tlsCaCert (Deno's caCerts); refused
// without it; tlsInsecure refused as Deno cannot do it. (Plain TCP on Deno, through
// npm:locksmith-js, is in js-tests/install.test.mjs.)
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, it } from "node:test";
import { promisify } from "node:util";

import { TARGET } from "../support/target.mjs";
import { tlsRedis } from "../support/tls.mjs";

const run = promisify(execFile);
const require = createRequire(import.meta.url);

describe("RedisLockStore on Deno", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  it("connects with rediss:// through Deno.connectTls, trusting a private CA", { timeout: 60_000 }, async (t) => {
    const tls = await tlsRedis(t, "locksmith-deno-tls-");
    if (!tls) return;
    const { ca, tlsPort } = tls;
    const { dir } = tls.certs;
    try {
      const entry = new URL("../../js/wasm.mjs", import.meta.url).href;
      const url = `rediss://localhost:${tlsPort}`;
      const fast = { connectTimeoutMs: 1_000, commandTimeoutMs: 1_000, reconnectRetries: 0 };
      await writeFile(
        join(dir, "tls.mjs"),
        `import * as ls from ${JSON.stringify(entry)};
         const url = ${JSON.stringify(url)};
         const fast = ${JSON.stringify(fast)};
         const store = await ls.RedisLockStore.connect({ url, tlsCaCert: ${JSON.stringify(ca)}, ...fast });
         const lock = new ls.Lock("deno-tls", 5_000, store);
         const taken = await lock.acquire();
         const token = typeof lock.fencingToken;
         const released = await lock.release();
         await store.close();
         const untrusted = await ls.RedisLockStore.connect({ url, ...fast }).then(() => "connected", (e) => e.code);
         const insecure = await ls.RedisLockStore.connect({ url, tlsInsecure: true, ...fast }).then(() => "connected", (e) => [e.code, e.message]);
         console.log(JSON.stringify({ taken, token, released, untrusted, insecure }));`,
      );
      const deno = require.resolve("deno/bin.cjs");
      const { stdout } = await run(process.execPath, [deno, "run", "--allow-read", "--allow-net=localhost,127.0.0.1", "--no-prompt", "tls.mjs"], {
        cwd: dir,
        env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
      });
      const out = JSON.parse(stdout.trim().split("\n").pop());
      assert.deepEqual(out.taken, true);
      assert.equal(out.token, "number");
      assert.equal(out.released, true);
      assert.equal(out.untrusted, "STORE_UNAVAILABLE", "a server certificate from an unknown CA is refused");
      assert.equal(out.insecure[0], "UNSUPPORTED");
      assert.match(out.insecure[1], /^locksmith: tlsInsecure is not available on Deno/);
    } finally {
      await tls.dispose();
    }
  });
});
