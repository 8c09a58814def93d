// Run by Node for Windows under Wine (js-tests/cross.test.mjs) in a consumer folder where
// the packed locksmith-js and locksmith-js-win32-x64-gnu are installed as npm lays them
// out: imports the package by name, runs the lock essentials and a Redis lock, and writes
// what it saw as JSON to the file its first argument names (under Wine, Node has no
// usable stdout pipe).
//   node.exe essentials.mjs OUT.json REDIS_URL HELD_KEY
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const [out, redisUrl, heldKey] = process.argv.slice(2);
const report = { platform: process.platform, arch: process.arch, node: process.version };
try {
  const ls = await import("locksmith-js");
  const { smoke } = await import("./smoke.mjs");
  report.backend = ls.backend;
  report.smoke = await smoke(ls);
  // The addon file Node loaded, as the package's loader found it.
  report.loaded = Object.keys(createRequire(import.meta.url).cache).filter((k) => k.endsWith(".node"));

  const store = await ls.RedisLockStore.connect(redisUrl);
  try {
    const a = new ls.Lock(`wine:invoice:${process.pid}`, 5_000, store);
    const b = new ls.Lock(`wine:invoice:${process.pid}`, 5_000, store);
    const redis = {};
    redis.acquired = await a.acquire();
    redis.secondRefused = !(await b.acquire({ timeout: 0 }));
    const firstToken = a.fencingToken;
    redis.token = typeof firstToken;
    redis.extended = await a.extend(10_000).then(() => true);
    redis.left = (await a.getRemainingTime()) > 5_000;
    // The second handle waits, and gets the lock when the first lets go.
    const waiting = b.acquire({ timeout: 5_000 });
    redis.released = await a.release();
    redis.waiterGotIt = await waiting;
    redis.tokensGrow = b.fencingToken > firstToken;
    redis.releasedSecond = await b.release();
    // A lock the test process on Linux holds through its own build: the same key layout.
    const theirs = new ls.Lock(heldKey, 5_000, store);
    redis.linuxHoldSeen = await theirs.isLocked();
    redis.linuxHoldRefused = !(await theirs.acquire({ timeout: 0 }));
    redis.keepAliveAsked = globalThis.__keepAliveCalls > 0;
    report.redis = redis;
  } finally {
    await store.close();
  }
} catch (err) {
  report.error = String(err?.stack ?? err);
}
writeFileSync(out, JSON.stringify(report));
