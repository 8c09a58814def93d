// FileLockStore: locks in a file every process of the host opens. The conformance
// suite, processes that hold, die and wait on one file, and bad input; the WebAssembly
// build refuses it. The history checker runs it with 8 processes
// (js-tests/histories/histories-servers.test.mjs), and the primitives' scenarios run on it
// (js-tests/conformance/primitives.test.mjs).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { conformance } from "../conformance/conformance.mjs";
import { TARGET, failOnUnhandledRejections, ls, sleep, uniqueKey } from "../support/target.mjs";

await failOnUnhandledRejections();

const { FileLockStore, Lock, semaphore } = ls;

let dir;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "locksmith-file-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});
let files = 0;
const lockFile = () => join(dir, `locks-${files++}`);

if (TARGET !== "native") {
  describe("FileLockStore in the WebAssembly build", () => {
    it("refuses to open, with UNSUPPORTED and what to use instead", async () => {
      await assert.rejects(FileLockStore.open(lockFile()), (err) => {
        assert.equal(err.code, "UNSUPPORTED");
        assert.match(err.message, /^locksmith: FileLockStore needs the native addon/);
        return true;
      });
    });
  });
} else {
  conformance("FileLockStore", { makeStore: () => FileLockStore.open(lockFile()), closeStore: (store) => store.close(), fencing: true, exactOwnership: true });

  /**
   * A child process on `path` that runs `script` (its body: `store`, `Lock`, `key`,
   * `say(message)` to the parent) and waits until killed.
   */
  function child(path, key, script) {
    const source = `
      import { FileLockStore, Lock, semaphore } from "locksmith-js";
      const store = await FileLockStore.open(${JSON.stringify(path)});
      const key = ${JSON.stringify(key)};
      const say = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
      ${script}
      setInterval(() => {}, 1 << 30);
    `;
    const proc = spawn(process.execPath, ["--input-type=module", "-e", source], { stdio: ["ignore", "pipe", "inherit"] });
    const lines = [];
    let wake;
    let buffered = "";
    proc.stdout.on("data", (d) => {
      buffered += d;
      for (let i = buffered.indexOf("\n"); i >= 0; i = buffered.indexOf("\n")) {
        lines.push(JSON.parse(buffered.slice(0, i)));
        buffered = buffered.slice(i + 1);
        wake?.();
      }
    });
    return {
      proc,
      /** The child's next message. */
      async next() {
        while (lines.length === 0) {
          if (proc.exitCode !== null) throw new Error(`the child exited with ${proc.exitCode}`);
          await new Promise((resolve) => {
            wake = resolve;
            setTimeout(resolve, 100);
          });
        }
        return lines.shift();
      },
      kill: () => proc.kill("SIGKILL"),
    };
  }

  describe("FileLockStore across processes", () => {
    it("a holder killed with SIGKILL frees its hold at its TTL, not before", { timeout: 20_000 }, async () => {
      const path = lockFile();
      const key = uniqueKey("killed");
      const holder = child(path, key, `const l = new Lock(key, 1_500, store); say({ got: await l.acquire(), token: l.fencingToken });`);
      try {
        const { got, token } = await holder.next();
        assert.equal(got, true);
        holder.kill();
        await new Promise((resolve) => holder.proc.once("exit", resolve));
        const killedAt = performance.now();
        const store = await FileLockStore.open(path);
        const waiter = new Lock(key, 1_000, store);
        assert.equal(await waiter.acquire(), false, "the dead holder's hold is still live");
        assert.equal(await waiter.acquire({ timeout: 5_000, retryDelay: 25 }), true);
        const waited = performance.now() - killedAt;
        assert.ok(waited > 1_000 && waited < 2_500, `got the key ${Math.round(waited)} ms after the kill (TTL 1500 ms)`);
        assert.ok(waiter.fencingToken > token, `token ${waiter.fencingToken} after ${token}`);
        await waiter.release();
        await store.close();
      } finally {
        holder.kill();
      }
    });

    it("a waiter wakes at another process's release, not at its retryDelay", { timeout: 20_000 }, async () => {
      const path = lockFile();
      const key = uniqueKey("wake");
      const holder = child(
        path,
        key,
        `const l = new Lock(key, 10_000, store); say({ got: await l.acquire() }); setTimeout(async () => say({ released: await l.release(), at: Date.now() }), 400);`,
      );
      const store = await FileLockStore.open(path);
      try {
        assert.deepEqual(await holder.next(), { got: true });
        const waiter = new Lock(key, 1_000, store);
        const started = Date.now();
        assert.equal(await waiter.acquire({ timeout: 8_000, retryDelay: 5_000 }), true);
        const { released, at } = await holder.next();
        assert.equal(released, true);
        const late = Date.now() - at;
        assert.ok(late < 1_000, `woke ${late} ms after the release (${Date.now() - started} ms in all); a retry would be 5 s`);
        await waiter.release();
      } finally {
        holder.kill();
        await store.close();
      }
    });

    it("two processes share a weighted semaphore's permits", { timeout: 20_000 }, async () => {
      const path = lockFile();
      const key = uniqueKey("sem");
      const other = child(path, key, `const s = semaphore(key, 3, 10_000, store); say({ got: await s.acquire({ permits: 2 }) });`);
      const store = await FileLockStore.open(path);
      try {
        assert.deepEqual(await other.next(), { got: true });
        const mine = semaphore(key, 3, 10_000, store);
        assert.equal(await mine.count(), 2);
        assert.equal(await mine.acquire({ permits: 2 }), false, "2 + 2 of 3");
        assert.equal(await mine.acquire(), true);
        assert.equal(await mine.count(), 3);
        await mine.release();
      } finally {
        other.kill();
        await store.close();
      }
    });
  });

  describe("FileLockStore input", () => {
    it("refuses unknown options, a path that is not a string, and a bad busyTimeoutMs", async () => {
      await assert.rejects(FileLockStore.open(lockFile(), { busyTimeout: 5 }), { code: "INVALID_ARGUMENT", message: /unknown option `busyTimeout`/ });
      await assert.rejects(FileLockStore.open(42), { code: "INVALID_ARGUMENT", message: /^locksmith: path/ });
      await assert.rejects(FileLockStore.open(lockFile(), { busyTimeoutMs: -1 }), { code: "INVALID_ARGUMENT", message: /^locksmith: busyTimeoutMs must be/ });
      assert.throws(() => new FileLockStore(), { code: "INVALID_ARGUMENT", message: /FileLockStore\.open/ });
    });

    it("a path it cannot open is STORE_ERROR naming the path; a directory too", async () => {
      const missing = join(dir, "no-such-dir", "locks");
      await assert.rejects(FileLockStore.open(missing), (err) => {
        assert.equal(err.code, "STORE_ERROR");
        assert.ok(err.message.startsWith("locksmith: ") && err.message.includes(missing), err.message);
        return true;
      });
      await assert.rejects(FileLockStore.open(dir), { code: "STORE_ERROR" });
      // A device reads back nothing: every process would see no holds.
      await assert.rejects(FileLockStore.open("/dev/null"), { code: "STORE_ERROR", message: /not a regular file/ });
    });

    it("refuses, at open, a file that is not a lock file, and leaves it as it was", async () => {
      const path = lockFile();
      await writeFile(path, "some other program's data, long enough to look like a header: 0123456789");
      await assert.rejects(FileLockStore.open(path), { code: "STORE_ERROR", message: /is not a locksmith lock file/ });
      assert.equal(await readFile(path, "utf8"), "some other program's data, long enough to look like a header: 0123456789");
    });

    it("makes the file, names itself, and refuses calls once closed", async () => {
      const path = lockFile();
      const store = await FileLockStore.open(path);
      assert.equal(store.path, path);
      assert.ok((await stat(path)).isFile());
      const l = new Lock(uniqueKey("closed"), 1_000, store);
      assert.equal(await l.acquire(), true);
      await store.close();
      // close() released the hold (release() finds nothing held); the store refuses calls.
      assert.equal(await l.release(), false);
      await assert.rejects(l.acquire(), { code: "STORE_CLOSED" });
      await assert.rejects(store.isLocked(l.key), { code: "STORE_CLOSED" });
      await sleep(0);
    });
  });
}
