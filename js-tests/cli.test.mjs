// `npx locksmith-js list|release` end to end: the command as a process against a real
// redis-server, on locks that RedisLockStore and a client store hold.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { Redis } from "ioredis";

import { IoRedisLockStore } from "../js/ioredis.mjs";
import { startRedis } from "./redis-server.mjs";
import { ls, TARGET, uniqueKey } from "./target.mjs";

const CLI = fileURLToPath(new URL("../js/cli.mjs", import.meta.url));

/** Runs the command; resolves to { code, stdout, stderr } whatever its exit code. */
async function cli(...args) {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (typeof err.code !== "number") throw err;
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

const fingerprint = (owner) => createHash("sha256").update(owner).digest("hex").slice(0, 8);
const ownerOf = (lock) => JSON.parse(lock.serialize()).owner;

describe("locksmith list / release on Redis", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let server;
  let native;
  let client;
  let viaClient;
  before(async () => {
    server = await startRedis();
    native = await ls.RedisLockStore.connect(server.url);
    client = new Redis(server.url);
    viaClient = new IoRedisLockStore(client);
  });
  after(async () => {
    await native.close();
    await viaClient.close();
    await client.quit();
    await server.stop();
  });

  it("lists held locks with remaining time, fencing token and an owner fingerprint, never the token", async () => {
    const base = uniqueKey("cli");
    const a = new ls.Lock(`${base}:a`, 30_000, native);
    const b = new ls.Lock(`${base}:b`, 60_000, viaClient);
    const other = new ls.Lock(uniqueKey("elsewhere"), 30_000, native);
    await Promise.all([a.acquire(), b.acquire(), other.acquire()]);
    const { code, stdout } = await cli("list", server.url, `${base}:*`, "--json");
    assert.equal(code, 0);
    const listed = stdout.trim().split("\n").map((line) => JSON.parse(line)).sort((x, y) => x.key.localeCompare(y.key));
    assert.deepEqual(listed.map((l) => l.key), [`${base}:a`, `${base}:b`]);
    assert.deepEqual(listed.map((l) => l.fencingToken), [a.fencingToken, b.fencingToken]);
    assert.deepEqual(listed.map((l) => l.owner), [fingerprint(ownerOf(a)), fingerprint(ownerOf(b))]);
    assert.ok(listed[0].remainingMs > 20_000 && listed[0].remainingMs <= 30_000, `${listed[0].remainingMs}`);
    assert.ok(listed[1].remainingMs > 50_000);
    assert.ok(!stdout.includes(ownerOf(a)) && !stdout.includes(ownerOf(b)), "owner tokens stay secret");

    const text = await cli("list", server.url, `${base}:*`);
    assert.match(text.stdout, /^KEY\s+REMAINING\s+FENCING TOKEN\s+OWNER\n/);
    assert.match(text.stdout, new RegExp(`${base}:a\\s+\\d+\\.\\d s\\s+${a.fencingToken}\\s+${fingerprint(ownerOf(a))}`));
    await Promise.all([a.release(), b.release(), other.release()]);
    assert.equal((await cli("list", server.url, `${base}:*`)).stdout, "no locks held\n");
  });

  it("release needs --force, then frees the lock, says what it did, and wakes a waiter", async () => {
    const key = uniqueKey("cli-release");
    const holder = new ls.Lock(key, 30_000, native);
    await holder.acquire();
    const refused = await cli("release", server.url, key);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /^locksmith: release frees .* Add --force/);
    assert.equal(await holder.isExpired(), false, "nothing happened without --force");

    const waiter = new ls.Lock(key, 30_000, native);
    const got = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 });
    const start = performance.now();
    const done = await cli("release", server.url, key, "--force");
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, new RegExp(`^released "${key}": it was held by ${fingerprint(ownerOf(holder))} with \\d+\\.\\d s left \\(fencing token ${holder.fencingToken}\\)`));
    assert.equal(await got, true);
    assert.ok(performance.now() - start < 3_000, "the waiter was woken, not left to its 5 s retry");
    assert.equal(await holder.isExpired(), true);
    await waiter.release();

    const again = await cli("release", server.url, key, "--force");
    assert.equal(again.code, 1);
    assert.match(again.stdout, /was not held: nothing to release/);
  });

  it("says what is wrong with its input", async () => {
    for (const [args, message] of [
      [["list"], /usage: locksmith list/],
      [["list", "http://example.com"], /unsupported store URL scheme http:/],
      [["list", "not a url"], /not a store URL/],
      [["frobnicate", server.url], /unknown command "frobnicate"/],
      [["list", server.url, "--prefix", "a{"], /--prefix must not contain/],
      [["list", server.url, "--bogus"], /Unknown option '--bogus'/],
    ]) {
      const { code, stderr } = await cli(...args);
      assert.equal(code, 2, `${args.join(" ")}: ${stderr}`);
      assert.match(stderr, /^locksmith: /);
      assert.match(stderr, message);
    }
    const down = await cli("list", "redis://:secret@127.0.0.1:1");
    assert.equal(down.code, 1);
    assert.match(down.stderr, /^locksmith: failed: /);
    assert.ok(!down.stderr.includes("secret"));
  });
});
