// Nothing fails silently: the mistakes that let two holders in without an error get a
// process warning, once per process — a TTL under a second given as a bare number (a TTL
// meant in seconds), and the default per-process memory store in a process that is one of
// several (a cluster worker, a PM2 instance, a worker thread). Each case is a child
// process whose stderr is read. LOCKSMITH_WARNINGS=0 turns them off, and so does Node's
// --disable-warning=<code>.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ENTRY, countLines as count, runModule } from "./support/child.mjs";

/** Runs `code` (an ES module that imports the build under test as `ls`); resolves to { code, stdout, stderr }. */
function child(code, { env = {}, execArgv = [] } = {}) {
  // The parent's own settings must not decide the child's warnings.
  const unset = ["LOCKSMITH_WARNINGS", "NODE_APP_INSTANCE", "pm_id", "NODE_OPTIONS"];
  return runModule(`import * as ls from ${JSON.stringify(ENTRY)};\n${code}`, { env, execArgv, unset, prefix: "locksmith-warnings-" });
}

const SHORT_TTL = /\(node:\d+\) \[LOCKSMITH_SHORT_TTL\] Warning: locksmith: /;
const PROCESS_LOCAL = /\[LOCKSMITH_PROCESS_LOCAL_STORE\] Warning: locksmith: /;

describe("the short-TTL warning", () => {
  it('lock(key, 30) warns once that TTLs are milliseconds, suggesting a string like "30s"', async () => {
    const { code, stdout, stderr } = await child(`
      // 100 ms of work under a 30 ms TTL: the hold is lost midway (run() says so), and
      // before that, once, the process is told why.
      const work = () => new Promise((resolve) => setTimeout(resolve, 100));
      const lost = (p) => p.then(() => "kept", (err) => err.code);
      console.log(await lost(ls.lock("k", 30).run(work)));
      console.log(await lost(ls.lock("k", 30).run(work)));
      console.log(await lost(ls.semaphore("s", 2, 50).run(work)));
      console.log(await lost(ls.readWriteLock("rw", 10).writeLock().run(work)));
    `);
    assert.equal(code, 0, stderr);
    assert.equal(stdout, "LOCK_NOT_HELD\n".repeat(4));
    assert.equal(count(stderr, SHORT_TTL), 1, `one warning per process:\n${stderr}`);
    assert.match(stderr, /LOCKSMITH_SHORT_TTL\] Warning: locksmith: a lock's TTL of 30 ms is under a second/);
    assert.match(stderr, /TTLs are in milliseconds/);
    assert.match(stderr, /"30s"/);
    // Its advice silences this warning alone, not the one about a forgotten store.
    assert.match(stderr, /--disable-warning=LOCKSMITH_SHORT_TTL/);
  });

  it("a fractional TTL is refused without advice first (the advice would be about a TTL not taken)", async () => {
    const { code, stderr } = await child(`
      try { ls.lock("k", 1.5); } catch (err) { console.log(err.code); }
      ls.lock("k", 30);
    `);
    assert.equal(code, 0, stderr);
    assert.equal(count(stderr, SHORT_TTL), 1, stderr);
    assert.match(stderr, /TTL of 30 ms/, "the later real one is warned of");
  });

  it("extend(ms) under a second warns too", async () => {
    const { code, stderr } = await child(`
      const l = ls.lock("k", 10_000);
      await l.acquire();
      await l.extend(20);
      await l.release();
    `);
    assert.equal(code, 0, stderr);
    assert.equal(count(stderr, SHORT_TTL), 1, stderr);
    assert.match(stderr, /TTL of 20 ms/);
  });

  it("no warning for a TTL of a second or more, nor for one whose string states its unit", async () => {
    const { code, stderr } = await child(`
      await ls.lock("a", 1_000).run(() => {});
      await ls.lock("b").run(() => {});
      await ls.lock("c", "250ms").run(() => {});
      await ls.lock("d", "30s").run(() => {}, { timeout: 5, retryDelay: 1 });
    `);
    assert.equal(code, 0, stderr);
    assert.equal(stderr, "");
  });

  it("LOCKSMITH_WARNINGS=0 and --disable-warning=LOCKSMITH_SHORT_TTL silence it", async () => {
    const code = `await ls.lock("k", 30).run(() => {});`;
    assert.equal((await child(code)).stderr === "", false, "warned by default");
    assert.equal((await child(code, { env: { LOCKSMITH_WARNINGS: "0" } })).stderr, "");
    assert.equal((await child(code, { execArgv: ["--disable-warning=LOCKSMITH_SHORT_TTL"] })).stderr, "");
  });
});

describe("the process-local default store warning", () => {
  const USE_DEFAULT = `await ls.lock("job", 30_000).run(() => {});`;

  it("a cluster worker that locks on the default store is warned, once", async () => {
    const { code, stdout, stderr } = await child(`
      const cluster = (await import("node:cluster")).default;
      if (cluster.isPrimary) {
        ${USE_DEFAULT}
        const worker = cluster.fork();
        await new Promise((resolve) => worker.once("exit", resolve));
        console.log("primary done");
      } else {
        ${USE_DEFAULT}
        ${USE_DEFAULT}
        cluster.worker.disconnect();
      }
    `);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /primary done/);
    assert.equal(count(stderr, PROCESS_LOCAL), 1, `the worker warns once, the primary not at all:\n${stderr}`);
    assert.match(stderr, /a cluster worker/);
    assert.match(stderr, /setLockStore\(/);
  });

  it("a PM2 instance (NODE_APP_INSTANCE or pm_id) is warned", async () => {
    for (const env of [{ NODE_APP_INSTANCE: "0" }, { pm_id: "3" }]) {
      const { code, stderr } = await child(USE_DEFAULT, { env });
      assert.equal(code, 0, stderr);
      assert.equal(count(stderr, PROCESS_LOCAL), 1, `${JSON.stringify(env)}:\n${stderr}`);
      assert.match(stderr, /PM2/);
    }
  });

  it("a worker thread that locks on the default store is warned", async () => {
    const { code, stdout, stderr } = await child(`
      const { Worker } = await import("node:worker_threads");
      const inWorker = \`import * as ls from ${JSON.stringify(ENTRY)}; await ls.lock("job", 30_000).run(() => {});\`;
      const worker = new Worker(new URL("data:text/javascript," + encodeURIComponent(inWorker)));
      await new Promise((resolve, reject) => { worker.once("exit", resolve); worker.once("error", reject); });
      console.log("joined");
    `);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /joined/);
    assert.equal(count(stderr, PROCESS_LOCAL), 1, stderr);
    assert.match(stderr, /a worker thread/);
  });

  it("no warning for a lock restored into, or lockAll() on, a store given by name", async () => {
    // restoreLock(text, store) and lockAll(keys, ttl, store) never touch the default store.
    const { code, stderr } = await child(
      `
      const store = new ls.MemoryLockStore();
      const held = ls.lock("job", 30_000, store);
      await held.acquire();
      const back = ls.restoreLock(held.serialize(), store);
      await back.release();
      const all = ls.lockAll(["a", "b"], 30_000, store);
      await all.acquire();
      await ls.restoreLock(all.serialize(), store).release();
    `,
      { env: { NODE_APP_INSTANCE: "0" } },
    );
    assert.equal(code, 0, stderr);
    assert.equal(stderr, "", "no process-local warning: the default store was never made");
  });

  it("no warning in a plain process, with a store set, or with LOCKSMITH_WARNINGS=0", async () => {
    assert.equal((await child(USE_DEFAULT)).stderr, "", "a lone process");
    const setStore = `
      ls.setLockStore(new ls.MemoryLockStore());
      ${USE_DEFAULT}
    `;
    assert.equal((await child(setStore, { env: { NODE_APP_INSTANCE: "0" } })).stderr, "", "a store chosen on purpose");
    assert.equal((await child(USE_DEFAULT, { env: { NODE_APP_INSTANCE: "0", LOCKSMITH_WARNINGS: "0" } })).stderr, "", "switched off");
    assert.equal(
      (await child(USE_DEFAULT, { env: { NODE_APP_INSTANCE: "0" }, execArgv: ["--disable-warning=LOCKSMITH_PROCESS_LOCAL_STORE"] })).stderr,
      "",
      "Node's own switch",
    );
  });
});
