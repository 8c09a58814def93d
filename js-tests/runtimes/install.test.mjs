// The package as users get it: `npm pack`, installed into a fresh project, then used
// by name ("locksmith-js", through the exports map) from ESM and CommonJS in Node, with and
// without its native binary, from a per-platform package, in workerd, the Vercel edge
// runtime, Deno, a browser (headless Chromium) and Bun, and type-checked in every
// TypeScript resolution mode.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";
import { EdgeRuntime } from "edge-runtime";

import { EXPECTED } from "../edge/smoke.mjs";
import { wasmModules } from "../edge/wasm-module-plugin.mjs";
import { startRedis, freePort } from "../support/redis-server.mjs";
import { TARGET, ls } from "../support/target.mjs";
import { miniflareFor } from "../support/workerd-harness.mjs";
import { stagePackages } from "../../scripts/packages.mjs";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../..", import.meta.url));
const require = createRequire(import.meta.url);
const { TRIPLES, fileOf, packageOf, platformTriple } = require("../../js/native-loader.cjs");
const CHROMIUM = "/usr/bin/chromium";
const setup = await readFile(join(root, "scripts/setup.sh"), "utf8");
const BUN = join(root, `.cache/bun-${setup.match(/^bun_version=(\S+)$/m)[1]}/bin/bun`);

/**
 * A prerequisite the test needs. Missing in CI fails the run (scripts/setup.sh installs
 * it); missing on a developer's machine skips the test with a reason.
 */
function prerequisite(t, path, what) {
  if (existsSync(path)) return true;
  const why = `${what} is missing (${path}); scripts/setup.sh installs it`;
  if (process.env.CI === "true") throw new Error(why);
  t.skip(why);
  return false;
}

/** Links this repository's @opentelemetry/api (locksmith-js/otel's optional peer) into the consumer at `dir`. */
async function linkOpenTelemetryApi(dir) {
  await mkdir(join(dir, "node_modules/@opentelemetry"), { recursive: true });
  await symlink(join(root, "node_modules/@opentelemetry/api"), join(dir, "node_modules/@opentelemetry/api"), "dir").catch((e) => {
    if (e.code !== "EEXIST") throw e;
  });
}

/** Writes `code` to `dir/name`, runs it with `cmd` (Node by default), and parses its stdout as JSON. */
async function runScript(dir, name, code, { env = {}, cmd = process.execPath, args = [] } = {}) {
  await writeFile(join(dir, name), code);
  const { stdout, stderr } = await run(cmd, [...args, name], { cwd: dir, env: { ...process.env, ...env } });
  return { out: JSON.parse(stdout.trim().split("\n").pop()), stderr };
}

// Everything a script can see of the API: its export names on both module systems,
// whether they are one instance, a lock run, and what RedisLockStore does.
const PROBE = `
  import * as ls from "locksmith-js";
  import { createRequire } from "node:module";
  const cjs = createRequire(import.meta.url)("locksmith-js");
  const store = ls.setLockStore(new ls.MemoryLockStore());
  const [ran, result] = await ls.lock("invoice:42").run(() => "charged");
  const err = await ls.lock("x").extend().catch((e) => e);
  let redis = "not tried";
  if (ls.backend === "wasm") {
    redis = await ls.RedisLockStore.connect(process.env.LOCKSMITH_PROBE_REDIS_URL).then(
      async (s) => {
        const l = new ls.Lock("probe:" + process.pid, 5_000, s);
        const out = { taken: await l.acquire(), token: typeof l.fencingToken, released: await l.release() };
        await s.close();
        return out;
      },
      (e) => ({ isLockError: e instanceof ls.LockError, code: e.code, message: e.message }),
    );
  }
  console.log(JSON.stringify({
    backend: ls.backend,
    cjsBackend: cjs.backend,
    esm: Object.keys(ls).filter((k) => k !== "default").sort(),
    cjs: Object.keys(cjs).sort(),
    oneInstance: cjs.getLockStore() === store,
    run: [ran, result],
    notHeld: err instanceof cjs.LockNotHeldError && err instanceof ls.LockNotHeldError,
    redisType: typeof ls.RedisLockStore,
    redis,
  }));
`;

describe("the packed package", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let dir;
  let pkg;
  let tarball;
  let nativeProbe;
  let staged;
  let platformTarball;
  let redis;
  before(async () => {
    redis = await startRedis();
    // The probe's RedisLockStore (on the WebAssembly builds) connects here.
    process.env.LOCKSMITH_PROBE_REDIS_URL = redis.url;
    dir = await mkdtemp(join(tmpdir(), "locksmith-install-"));
    // The packages as the release publishes them (scripts/packages.mjs): the main one and
    // this platform's, installed together as npm would from the registry. The tree is
    // already built, so the main package's prepack build is skipped.
    staged = stagePackages({ out: join(root, "target/packages-test"), ignoreScripts: true });
    tarball = staged.main;
    platformTarball = staged.platforms[platformTriple()]?.tarball;
    await writeFile(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    await run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball, platformTarball], { cwd: dir });
    pkg = join(dir, "node_modules/locksmith-js");
    await copyFile(join(root, "js-tests/edge/smoke.mjs"), join(dir, "smoke.mjs"));
  });
  after(async () => {
    await redis?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("ships only what it needs", async () => {
    const files = await readdir(join(pkg, "js"), { recursive: true });
    for (const needed of [
      "types/index.d.ts",
      "types/index.d.cts",
      "index.cjs",
      "native-loader.cjs",
      "node.cjs",
      "node.mjs",
      "workerd.mjs",
      "api/api.mjs",
      "api/errors.mjs",
      "redis/driver.mjs",
      "redis/sockets/workerd.mjs",
      "stores/cloudflare.mjs",
      "types/cloudflare.d.ts",
      "otel.mjs",
      "types/otel.d.ts",
      "gen/otel.cjs",
      "gen/otel.d.cts",
      "cli/cli.mjs",
      "gen/api.cjs",
      "gen/redis-driver.cjs",
      "gen/wasm.cjs",
      "wasm/locksmith_wasm_bg.wasm",
      "wasm/locksmith_wasm_redis_bg.wasm",
    ]) {
      assert.ok(files.includes(needed), `${needed} is in the package`);
    }
    assert.ok(!files.some((f) => f.endsWith(".node")), "no native binary in the main package: each platform's is in its own");
    assert.ok(!files.some((f) => f.includes("binding.d.ts")), "generated binding typings stay internal");
    const top = await readdir(pkg);
    for (const needed of ["LICENSE", "README.md", "package.json"]) assert.ok(top.includes(needed), `${needed} is in the package`);
    assert.ok(!top.some((f) => f.endsWith(".log")), "no profiler logs in the package");
    assert.ok(!top.includes("npm"), "the per-platform packages are published on their own");
    const manifest = JSON.parse(await readFile(join(pkg, "package.json"), "utf8"));
    assert.equal(manifest.name, "locksmith-js");
    assert.deepEqual(manifest.bin, { locksmith: "js/cli/cli.mjs" }, "the command is still `locksmith`");
    const version = JSON.parse(await readFile(join(root, "package.json"), "utf8")).version;
    assert.deepEqual(manifest.optionalDependencies, Object.fromEntries(TRIPLES.map((t) => [`locksmith-js-${t}`, version])));
    for (const field of ["repository", "homepage", "bugs"]) assert.ok(manifest[field], `${field} is set`);
  });

  it("has a per-platform package for every target, each with the right os, cpu and libc", async () => {
    const want = {
      "linux-x64-gnu": [["linux"], ["x64"], ["glibc"]],
      "linux-x64-musl": [["linux"], ["x64"], ["musl"]],
      "linux-arm64-gnu": [["linux"], ["arm64"], ["glibc"]],
      "linux-arm64-musl": [["linux"], ["arm64"], ["musl"]],
      "darwin-x64": [["darwin"], ["x64"], undefined],
      "darwin-arm64": [["darwin"], ["arm64"], undefined],
      "win32-x64-msvc": [["win32"], ["x64"], undefined],
    };
    assert.deepEqual(Object.keys(staged.platforms).sort(), TRIPLES.slice().sort());
    for (const triple of TRIPLES) {
      const sub = JSON.parse(await readFile(join(staged.platforms[triple].dir, "package.json"), "utf8"));
      assert.equal(sub.name, packageOf(triple));
      assert.equal(sub.main, fileOf(triple));
      assert.deepEqual(sub.files, [fileOf(triple)]);
      if (want[triple]) assert.deepEqual([sub.os, sub.cpu, sub.libc], want[triple], triple);
      assert.equal(sub.version, JSON.parse(await readFile(join(root, "package.json"), "utf8")).version, "versions move together");
    }
    // Every package with a binary built here is packed, and holds exactly its binary.
    assert.ok(platformTarball, `this platform's package (${platformTriple()}) is packed`);
    for (const [triple, { tarball: t }] of Object.entries(staged.platforms)) {
      if (!t) continue;
      const { stdout } = await run("tar", ["-tzf", t]);
      assert.deepEqual(stdout.trim().split("\n").sort(), ["package/README.md", `package/${fileOf(triple)}`, "package/package.json"], triple);
    }
  });

  it("installs the locksmith command", async () => {
    const { stdout } = await run(join(dir, "node_modules/.bin/locksmith"), ["--help"], { cwd: dir });
    assert.match(stdout, /locksmith list <store-url>/);
    // The consumer has no Redis client installed, and needs none: the command speaks RESP
    // itself, so a server that is not there is the error, with its address.
    const refused = await run(join(dir, "node_modules/.bin/locksmith"), ["list", "redis://127.0.0.1:1"], { cwd: dir }).catch((e) => e);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /^locksmith: could not reach Redis at 127\.0\.0\.1:1: /);
  });

  it("loads the Redis client stores by subpath, with the package's own error classes", async () => {
    const { out } = await runScript(
      dir,
      "clients.mjs",
      `
      import * as ls from "locksmith-js";
      import { IoRedisLockStore } from "locksmith-js/ioredis";
      import { NodeRedisLockStore } from "locksmith-js/node-redis";
      import { UpstashLockStore } from "locksmith-js/upstash";
      const errors = [IoRedisLockStore, NodeRedisLockStore, UpstashLockStore].map((Store) => {
        try {
          new Store({});
          return "accepted";
        } catch (e) {
          return e instanceof ls.InvalidArgumentError ? e.code : String(e);
        }
      });
      const upstash = new UpstashLockStore({ evalsha() {}, eval() {}, pttl() {}, exists() {} });
      console.log(JSON.stringify({ errors, key: upstash.lockKey("k"), wakes: typeof upstash.onRelease }));
      `,
    );
    assert.deepEqual(out, { errors: ["INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT"], key: "locksmith:{k}", wakes: "undefined" });
  });

  it("requires every Node subpath from CommonJS, with the package's one set of error classes", async () => {
    const { out } = await runScript(
      dir,
      "subpaths.cjs",
      `
      const ls = require("locksmith-js");
      const stores = [
        require("locksmith-js/ioredis").IoRedisLockStore,
        require("locksmith-js/node-redis").NodeRedisLockStore,
        require("locksmith-js/upstash").UpstashLockStore,
        require("locksmith-js/postgres").PostgresLockStore,
        require("locksmith-js/mysql").MySqlLockStore,
      ];
      import("locksmith-js").then(async (esm) => {
        const errors = stores.map((Store) => {
          try {
            new Store({}, { bogus: 1 });
            return "accepted";
          } catch (e) {
            return e instanceof ls.InvalidArgumentError && e instanceof esm.InvalidArgumentError ? e.code : String(e);
          }
        });
        const wasm = require("locksmith-js/wasm");
        const esmWasm = await import("locksmith-js/wasm");
        console.log(JSON.stringify({
          errors,
          kinds: stores.map((s) => typeof s),
          wasm: [wasm.backend, await wasm.lock("k").run(() => 4)],
          sameAsImport: (await import("locksmith-js/ioredis")).IoRedisLockStore.name === stores[0].name,
          wasmNames: Object.keys(wasm).sort().join() === Object.keys(esmWasm).filter((k) => k !== "default").sort().join(),
          classNames: [wasm.lock("k"), wasm.lockAll(["a", "b"]), new wasm.MemoryLockStore()].map((o) => o.constructor.name),
        }));
      });
      `,
    );
    assert.deepEqual(out, {
      errors: ["INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT"],
      kinds: ["function", "function", "function", "function", "function"],
      wasm: ["wasm", [true, 4]],
      sameAsImport: true,
      wasmNames: true,
      classNames: ["Lock", "MultiLock", "MemoryLockStore"],
    });
    // Each Node subpath's `require` condition is a CommonJS file; every subpath's has
    // CommonJS types (locksmith-js/cloudflare's runs its ES module, in a Workers bundle).
    const manifest = JSON.parse(await readFile(join(pkg, "package.json"), "utf8"));
    for (const sub of ["./ioredis", "./node-redis", "./upstash", "./postgres", "./mysql", "./cloudflare", "./otel", "./wasm", "./node"]) {
      const { types, default: target } = manifest.exports[sub].require ?? {};
      if (sub !== "./cloudflare") assert.match(target ?? "", /\.cjs$/, `${sub} has a CommonJS build`);
      assert.match(types ?? "", /\.d\.cts$/, `${sub} has CommonJS types`);
      for (const file of [target, types]) assert.ok(existsSync(join(pkg, file)), `${file} is in the package`);
    }
  });

  it("imports from ESM and requires from CommonJS, as one instance, on the native addon", async () => {
    nativeProbe = (await runScript(dir, "probe.mjs", PROBE)).out;
    assert.equal(nativeProbe.backend, "native");
    assert.equal(nativeProbe.cjsBackend, "native");
    assert.deepEqual(nativeProbe.esm, nativeProbe.cjs, "ESM and CJS export the same names");
    assert.ok(nativeProbe.esm.includes("RedisLockStore") && nativeProbe.esm.includes("backend"));
    assert.equal(nativeProbe.oneInstance, true);
    assert.deepEqual(nativeProbe.run, [true, "charged"]);
    assert.equal(nativeProbe.notHeld, true);
    await writeFile(join(dir, "cjs.cjs"), `const { lock } = require("locksmith-js"); lock("k").run(() => 1).then((r) => console.log(JSON.stringify(r)));`);
    assert.deepEqual(JSON.parse((await run(process.execPath, ["cjs.cjs"], { cwd: dir })).stdout), [true, 1]);
    await writeFile(
      join(dir, "wasm.mjs"),
      `import { lock, backend } from "locksmith-js/wasm"; console.log(JSON.stringify([backend, await lock("k").run(() => 2)]));`,
    );
    assert.deepEqual(JSON.parse((await run(process.execPath, ["wasm.mjs"], { cwd: dir })).stdout), ["wasm", [true, 2]]);
  });

  it("loads locksmith-js/otel from ESM and CommonJS once @opentelemetry/api is installed; without it, only that entry fails", async () => {
    // Without the optional peer, only the otel entry fails, and says what is missing.
    const missing = await run(process.execPath, ["--input-type=module", "-e", 'await import("locksmith-js/otel")'], { cwd: dir }).catch((e) => e);
    assert.match(String(missing.stderr), /Cannot find (package|module) '@opentelemetry\/api'/);
    await linkOpenTelemetryApi(dir);
    const { out } = await runScript(
      dir,
      "otel.mjs",
      `
      import { createRequire } from "node:module";
      import * as ls from "locksmith-js";
      import { instrument } from "locksmith-js/otel";
      const cjs = createRequire(import.meta.url)("locksmith-js/otel");
      const stop = instrument();
      const [ran] = await ls.lock("otel").run(() => 1);
      stop();
      let code;
      try {
        cjs.instrument({ bogus: true });
      } catch (e) {
        code = e instanceof ls.InvalidArgumentError ? e.code : String(e);
      }
      console.log(JSON.stringify({ ran, esm: typeof instrument, cjs: typeof cjs.instrument, code }));
      `,
    );
    assert.deepEqual(out, { ran: true, esm: "function", cjs: "function", code: "INVALID_ARGUMENT" });
  });

  /** Checks that a probe of the WebAssembly fallback shows the native build's whole API. */
  function assertWholeApiOnWasm(probe) {
    assert.equal(probe.backend, "wasm");
    assert.equal(probe.cjsBackend, "wasm");
    assert.deepEqual(probe.esm, nativeProbe.esm, "the ESM entry keeps every export name");
    assert.deepEqual(probe.cjs, nativeProbe.cjs, "the CJS entry keeps every export name");
    assert.equal(probe.oneInstance, true, "ESM and CJS share one instance on the fallback too");
    assert.deepEqual(probe.run, [true, "charged"]);
    assert.equal(probe.notHeld, true);
    assert.equal(probe.redisType, "function", "RedisLockStore is exported, never undefined");
    assert.deepEqual(probe.redis, { taken: true, token: "number", released: true }, "RedisLockStore works on the WebAssembly engine");
  }

  it("falls back to WebAssembly with the whole API when LOCKSMITH_FORCE_WASM=1", async () => {
    const { out, stderr } = await runScript(dir, "probe.mjs", PROBE, { env: { LOCKSMITH_FORCE_WASM: "1" } });
    assertWholeApiOnWasm(out);
    assert.doesNotMatch(stderr, /LOCKSMITH_WASM_FALLBACK/, "asked for, the fallback is not warned about");
  });

  describe("installed without its binary (a platform with none built here)", () => {
    let project;
    const triple = platformTriple();
    before(async () => {
      // Outside the first project: Node would find its node_modules by walking up.
      project = await mkdtemp(join(tmpdir(), "locksmith-released-"));
      await writeFile(join(project, "package.json"), JSON.stringify({ name: "released", private: true, type: "module" }));
      // Only the main package: its optional dependency cannot be fetched (offline), as
      // with --omit=optional or on a platform nobody built for.
      await run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], { cwd: project });
    });
    after(async () => {
      if (project) await rm(project, { recursive: true, force: true });
    });

    it("says what it tried, what to do, and serves the whole API from WebAssembly", async () => {
      const { out, stderr } = await runScript(project, "probe.mjs", PROBE);
      assertWholeApiOnWasm(out);
      assert.match(stderr, /\[LOCKSMITH_WASM_FALLBACK\] Warning: locksmith: no native addon for /);
      assert.ok(stderr.includes(`js/native/locksmith.${triple}.node (not installed)`), stderr);
      assert.ok(stderr.includes(`locksmith-js-${triple} (not installed)`), stderr);
      assert.ok(stderr.includes(`npm install --save-optional locksmith-js-${triple}@`), "the warning says how to get the binary");
      assert.doesNotMatch(stderr, /npm run build/, "an installed user is not told to build the repository");
    });

    it("loads the binary from the per-platform package npm installs beside it", async () => {
      // npm checks the package's os/cpu/libc against this machine (EBADPLATFORM otherwise).
      await run("npm", ["install", "--no-audit", "--no-fund", "--offline", platformTarball], { cwd: project });
      await writeFile(
        join(project, "which.cjs"),
        `const ls = require("locksmith-js");
         const addon = Object.keys(require.cache).filter((k) => k.endsWith(".node"));
         ls.lock("k").run(() => 3).then((r) => console.log(JSON.stringify({ backend: ls.backend, addon, r })));`,
      );
      const { stdout: out, stderr } = await run(process.execPath, ["which.cjs"], { cwd: project });
      const got = JSON.parse(out);
      assert.equal(got.backend, "native");
      assert.deepEqual(got.addon, [join(project, `node_modules/locksmith-js-${triple}/locksmith.${triple}.node`)]);
      assert.deepEqual(got.r, [true, 3]);
      assert.equal(stderr, "");
    });
  });

  // The recipes of README.md's "Bundling" section, run with esbuild's own command line.
  const esbuildCli = (args) =>
    run(join(root, "node_modules/.bin/esbuild"), args, { cwd: dir }).catch((err) => {
      throw new Error(`esbuild ${args.join(" ")} failed:\n${err.stderr}`);
    });

  it("bundles into a Cloudflare worker with plain esbuild (--conditions=workerd,worker --loader:.wasm=copy) that runs in workerd, with the Durable Object store", async () => {
    await writeFile(
      join(dir, "worker.mjs"),
      `import { Lock, lock, InvalidArgumentError } from "locksmith-js";
       import { DurableObjectLockStore, LockDurableObject } from "locksmith-js/cloudflare";
       import fromCjs from "./worker-cjs.cjs";
       export { LockDurableObject };
       export default {
         async fetch(request, env) {
           const held = new Lock("invoice:42", 30_000, new DurableObjectLockStore(env.LOCKS));
           const [ran, result] = await held.run(async () => held.fencingToken);
           const refused = fromCjs();
           return Response.json([await lock("invoice:42").run(async () => "charged"), ran, typeof result, refused instanceof InvalidArgumentError && refused.code]);
         },
       };`,
    );
    // A CommonJS module of the worker: require() of the subpath is the same module as the import,
    // with the same error classes.
    await writeFile(
      join(dir, "worker-cjs.cjs"),
      `const { DurableObjectLockStore } = require("locksmith-js/cloudflare");
       module.exports = () => { try { new DurableObjectLockStore({}); } catch (e) { return e; } };`,
    );
    const out = join(dir, "dist-worker");
    await esbuildCli([
      "worker.mjs",
      "--bundle",
      "--format=esm",
      "--conditions=workerd,worker",
      "--loader:.wasm=copy",
      "--external:cloudflare:*",
      `--outdir=${out}`,
      "--log-level=warning",
    ]);
    // The .wasm modules are copied beside the bundle and imported by their new names;
    // workerd loads them as compiled modules.
    const wasmFiles = (await readdir(out)).filter((f) => f.endsWith(".wasm"));
    assert.equal(wasmFiles.length, 2, `the two .wasm modules beside the bundle: ${wasmFiles}`);
    const mf = miniflareFor(out, { durableObjects: { LOCKS: { className: "LockDurableObject", useSQLite: true } } });
    try {
      const res = await mf.dispatchFetch("http://worker/");
      assert.deepEqual(await res.json(), [[true, "charged"], true, "number", "INVALID_ARGUMENT"]);
    } finally {
      await mf.dispose();
    }
    // `worker` alone (what some Workers bundlers set) picks the same entry.
    const worker = await build({
      entryPoints: [join(dir, "worker.mjs")],
      bundle: true,
      write: false,
      format: "esm",
      conditions: ["worker"],
      external: ["*.wasm", "cloudflare:*"],
      metafile: true,
      logLevel: "error",
    });
    assert.ok(
      Object.keys(worker.metafile.inputs).some((f) => f.endsWith("node_modules/locksmith-js/js/workerd.mjs")),
      "the worker condition takes the workerd entry",
    );
  });

  describe("bundled for Node with esbuild", () => {
    const app = `import { lock, backend, InvalidArgumentError } from "locksmith-js";
      import { IoRedisLockStore } from "locksmith-js/ioredis";
      let refused;
      try { new IoRedisLockStore({}); } catch (e) { refused = e instanceof InvalidArgumentError && e.code; }
      lock("k").run(() => 5).then((r) => console.log(JSON.stringify({ backend, r, refused })));`;
    let elsewhere;
    before(async () => {
      await writeFile(join(dir, "node-app.mjs"), app);
      // Where a bundle is deployed without node_modules.
      elsewhere = await mkdtemp(join(tmpdir(), "locksmith-bundle-"));
    });
    after(async () => {
      if (elsewhere) await rm(elsewhere, { recursive: true, force: true });
    });

    for (const format of ["esm", "cjs"]) {
      it(`${format}: with the package external (--external:locksmith-js), on the native addon`, async () => {
        const file = join(dir, `dist-node-${format}`, format === "esm" ? "app.mjs" : "app.cjs");
        await esbuildCli([
          "node-app.mjs",
          "--bundle",
          "--platform=node",
          `--format=${format}`,
          "--external:locksmith-js",
          `--outfile=${file}`,
          "--log-level=warning",
        ]);
        const { stdout, stderr } = await run(process.execPath, [file], { cwd: dir });
        assert.deepEqual(JSON.parse(stdout), { backend: "native", r: [true, 5], refused: "INVALID_ARGUMENT" });
        assert.equal(stderr, "");
      });
    }

    it("cjs: the whole package in one file, on WebAssembly, with the .wasm files copied into wasm/ beside it", async () => {
      const out = join(elsewhere, "dist");
      await esbuildCli(["node-app.mjs", "--bundle", "--platform=node", "--format=cjs", `--outfile=${join(out, "app.cjs")}`, "--log-level=warning"]);
      await cp(join(pkg, "js/wasm"), join(out, "wasm"), { recursive: true, filter: (f) => !f.endsWith(".js") });
      const { stdout, stderr } = await run(process.execPath, [join(out, "app.cjs")], { cwd: elsewhere, env: { ...process.env, LOCKSMITH_FORCE_WASM: "1" } });
      assert.deepEqual(JSON.parse(stdout), { backend: "wasm", r: [true, 5], refused: "INVALID_ARGUMENT" });
      assert.equal(stderr, "");
    });
  });

  it("runs in the Vercel edge runtime through the edge-light condition", async () => {
    await writeFile(
      join(dir, "edge-entry.mjs"),
      `import * as ls from "locksmith-js";
       import { smoke } from "./smoke.mjs";
       globalThis.runSmoke = async () => ({ ...(await smoke(ls)), backend: ls.backend });`,
    );
    const bundle = await build({
      entryPoints: [join(dir, "edge-entry.mjs")],
      bundle: true,
      format: "iife",
      write: false,
      conditions: ["edge-light"],
      plugins: [wasmModules],
      logLevel: "error",
    });
    assert.ok(bundle.outputFiles[0].text.includes("node_modules/locksmith-js/js/edge-light.mjs"), "the edge-light entry was bundled");
    const runtime = new EdgeRuntime({ initialCode: bundle.outputFiles[0].text });
    const report = await runtime.evaluate("runSmoke()");
    assert.deepEqual(JSON.parse(JSON.stringify(report)), { ...EXPECTED, backend: "wasm" });
  });

  it("runs in Deno through npm:locksmith-js, on the deno condition, without --allow-ffi or a prompt; RedisLockStore over Deno.connect hands locks to Node", async () => {
    const deno = require.resolve("deno/bin.cjs");
    const native = await ls.RedisLockStore.connect(redis.url);
    try {
      const held = new ls.Lock(`deno:held:${process.pid}`, 10_000, native);
      await held.acquire();
      const key = `deno:handoff:${process.pid}`;
      const before = new ls.Lock(key, 10_000, native);
      await before.acquire();
      await before.release();
      const { out, stderr } = await runScript(
        dir,
        "deno.mjs",
        `import * as ls from "npm:locksmith-js";
         import { smoke } from "./smoke.mjs";
         const store = await ls.RedisLockStore.connect(${JSON.stringify(redis.url)});
         const lock = new ls.Lock(${JSON.stringify(key)}, 10_000, store);
         const taken = await lock.acquire();
         const redis = {
           heldInNode: await new ls.Lock(${JSON.stringify(held.key)}, 1_000, store).isLocked(),
           taken,
           token: lock.fencingToken,
           serialized: lock.serialize(),
           bad: await ls.RedisLockStore.connect({ url: ${JSON.stringify(redis.url)}, timeoutMs: 5 }).catch((e) => e.code),
           down: await ls.RedisLockStore.connect({ url: "redis://127.0.0.1:${await freePort()}", reconnectRetries: 0 }).catch((e) => e.code),
           tlsInsecure: await ls.RedisLockStore.connect({ url: "rediss://127.0.0.1:1", tlsInsecure: true }).catch((e) => e.code),
         };
         await store.close();
         console.log(JSON.stringify({ ...(await smoke(ls)), backend: ls.backend, redis }));`,
        {
          cmd: process.execPath,
          args: [deno, "run", "--allow-read", "--allow-net=127.0.0.1", "--no-prompt"],
          env: { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
        },
      );
      const { serialized, token, ...rest } = out.redis;
      assert.deepEqual(
        { ...out, redis: rest },
        {
          ...EXPECTED,
          backend: "wasm",
          redis: { heldInNode: true, taken: true, bad: "INVALID_ARGUMENT", down: "STORE_UNAVAILABLE", tlsInsecure: "UNSUPPORTED" },
        },
      );
      // One fencing counter, one key layout: Node frees what Deno took.
      assert.ok(token > before.fencingToken, `${token} > ${before.fencingToken}`);
      assert.equal(await new ls.Lock(key, 10_000, native).acquireImmediately(), false);
      assert.equal(await ls.restoreLock(serialized, native).release(), true);
      await held.release();
      // Straight to the wasm entry: no attempt at the addon, so no fallback warning.
      assert.doesNotMatch(stderr, /LOCKSMITH_WASM_FALLBACK|native addon/);
    } finally {
      await native.close();
    }
  });

  it("runs in headless Chromium from an esbuild bundle: NOT_INITIALIZED before init(), then the essentials", async (t) => {
    if (!prerequisite(t, CHROMIUM, "Chromium")) return;
    const { chromium } = await import("playwright-core");
    const web = join(dir, "web");
    await mkdir(web);
    await writeFile(
      join(dir, "browser-entry.mjs"),
      `import * as ls from "locksmith-js";
       import { init } from "locksmith-js";
       import { smoke } from "./smoke.mjs";
       window.report = (async () => {
         let early;
         try { new ls.MemoryLockStore(); early = "no error"; } catch (e) { early = e.code; }
         await init();
         return { early, backend: ls.backend, ...(await smoke(ls)) };
       })().catch((e) => ({ failed: String(e) }));`,
    );
    await build({
      entryPoints: [join(dir, "browser-entry.mjs")],
      bundle: true,
      format: "esm",
      platform: "browser",
      outfile: join(web, "app.js"),
      logLevel: "error",
    });
    // init() fetches the .wasm next to the module, as a bundler's asset step would place it.
    await copyFile(join(pkg, "js/wasm/locksmith_wasm_bg.wasm"), join(web, "locksmith_wasm_bg.wasm"));
    await writeFile(join(web, "index.html"), `<!doctype html><script type="module" src="app.js"></script>`);
    const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };
    const server = createServer(async (req, res) => {
      try {
        const file = join(web, new URL(req.url, "http://x").pathname.replace(/^\/$/, "/index.html"));
        const body = await readFile(file);
        res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" }).end(body);
      } catch {
        res.writeHead(404).end();
      }
    });
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${server.address().port}/`);
      await page.waitForFunction(() => window.report !== undefined);
      const report = await page.evaluate(() => window.report);
      assert.deepEqual(report, { early: "NOT_INITIALIZED", backend: "wasm", ...EXPECTED });
    } finally {
      await browser.close();
      server.close();
    }
  });

  it("runs in Bun", async (t) => {
    if (!prerequisite(t, BUN, "Bun (npm package @oven/bun-linux-x64, fetched by scripts/setup.sh --runtimes)")) return;
    const code = `import * as ls from "locksmith-js";
       import { smoke } from "./smoke.mjs";
       console.log(JSON.stringify({ ...(await smoke(ls)), backend: ls.backend }));`;
    const { out } = await runScript(dir, "bun.mjs", code, { cmd: BUN, args: ["run"] });
    // Bun matches the node condition and loads Node addons: the native build.
    assert.deepEqual(out, { ...EXPECTED, backend: "native" });
    const forced = await runScript(dir, "bun.mjs", code, { cmd: BUN, args: ["run"], env: { LOCKSMITH_FORCE_WASM: "1" } });
    assert.deepEqual(forced.out, { ...EXPECTED, backend: "wasm" });
  });

  // Every TypeScript resolution mode, from ESM and from CJS where the mode has both, on
  // code that uses the Node-only API (RedisLockStore, backend), the edge-safe one, every
  // Node subpath, and run()'s result narrowed by `ran`.
  const subpathImports = `
    import { IoRedisLockStore, type RedisClientStoreOptions } from "locksmith-js/ioredis";
    import { NodeRedisLockStore } from "locksmith-js/node-redis";
    import { UpstashLockStore } from "locksmith-js/upstash";
    import { PostgresLockStore } from "locksmith-js/postgres";
    import { MySqlLockStore } from "locksmith-js/mysql";
    import * as onWasm from "locksmith-js/wasm";
    import * as onNode from "locksmith-js/node";
    import { instrument, type InstrumentOptions } from "locksmith-js/otel";`;
  const subpathUses = `
    const clientOptions: RedisClientStoreOptions = { keyPrefix: "app:" };
    export const stores: Array<new (client: any, options?: any) => LockStore> = [IoRedisLockStore, NodeRedisLockStore, UpstashLockStore, PostgresLockStore, MySqlLockStore];
    export const backends: Array<"native" | "wasm"> = [onWasm.backend, onNode.backend, clientOptions.keyPrefix ? "wasm" : "native"];
    export const sameError = (e: unknown): boolean => e instanceof onNode.LockNotHeldError && e instanceof LockNotHeldError;
    const otelOptions: InstrumentOptions = { recordKeys: true };
    export const uninstrument: () => void = instrument(otelOptions);`;
  const consumer = `
    import { lock, restoreLock, setLockStore, MemoryLockStore, RedisLockStore, LockError, LockNotHeldError, backend, type LockStore, type AcquireOptions, type LockErrorCode } from "locksmith-js";
    ${subpathImports}
    const options: AcquireOptions = { timeout: 10 };
    const store: LockStore = setLockStore(new MemoryLockStore());
    export async function main(): Promise<boolean> {
      const [ran, n] = await lock("k", 1_000).run(async () => 1, options);
      const copy = restoreLock(lock("k").serialize(), store);
      const err: unknown = new Error();
      const which: "native" | "wasm" = backend;
      if (which === "native") {
        const redis: RedisLockStore = await RedisLockStore.connect({ url: "redis://127.0.0.1:6379", keyPrefix: "app:" });
        await redis.close();
      }
      const unsupported: LockErrorCode = "UNSUPPORTED";
      return ran && n === 1 && copy.key === "k" && !(err instanceof LockNotHeldError) && err instanceof LockError === false && unsupported.length > 0;
    }
    // After \`if (!ran)\`, the result is the function's (and undefined before it).
    export async function narrowed(): Promise<number> {
      const [ran, n] = await lock("k").run(async () => 1);
      if (!ran) {
        const none: undefined = n;
        return none ?? 0;
      }
      const [again, m] = await lock("k").runImmediately(() => "s");
      return again ? n + m.length : n;
    }
    ${subpathUses}`;
  // A CommonJS file of an ES module project (.cts): require() of every subpath.
  const ctsConsumer = `
    import { LockNotHeldError, type LockStore } from "locksmith-js";
    ${subpathImports}
    ${subpathUses}`;
  // A worker with the Env that \`wrangler types\` writes for a Durable Object binding, over
  // the runtime's types; its Durable Object class subclasses the shipped one.
  const workerConsumer = `
    import { Lock, lock } from "locksmith-js";
    import { DurableObjectLockStore, LockDurableObject } from "locksmith-js/cloudflare";
    export { LockDurableObject };
    interface Env {
      LOCKS: DurableObjectNamespace<LockDurableObject>;
      AUDITED: DurableObjectNamespace<AuditedLocks>;
    }
    export class AuditedLocks extends LockDurableObject {
      override acquire(owner: string, ttlMs: number): number | false {
        const token = super.acquire(owner, ttlMs);
        if (token !== false) void this.ctx.storage.put("last-owner", owner);
        return token;
      }
    }
    export default {
      async fetch(request, env): Promise<Response> {
        const store = new DurableObjectLockStore(env.LOCKS);
        const held = new Lock(new URL(request.url).pathname, 30_000, store);
        const [ran, token] = await held.run(async () => held.fencingToken);
        if (!ran) return new Response("busy", { status: 409 });
        const remaining: number | null = await env.LOCKS.get(env.LOCKS.idFromName("k")).remainingTime();
        const audited = new DurableObjectLockStore(env.AUDITED, { locationHint: "weur" });
        return Response.json({ token, remaining, free: await lock("k").isLocked(), also: await new Lock("k", 1_000, audited).isLocked() });
      },
    } satisfies ExportedHandler<Env>;`;
  const workerTypes = join(root, "node_modules/@cloudflare/workers-types");
  const modes = [
    { name: "node10 (moduleResolution node), CommonJS", type: "commonjs", compilerOptions: { module: "commonjs", moduleResolution: "node" } },
    { name: "node16, ESM, and a .cts file", type: "module", compilerOptions: { module: "node16", moduleResolution: "node16" }, cts: true },
    { name: "node16, CommonJS", type: "commonjs", compilerOptions: { module: "node16", moduleResolution: "node16" } },
    { name: "nodenext, ESM, and a .cts file", type: "module", compilerOptions: { module: "nodenext", moduleResolution: "nodenext" }, cts: true },
    { name: "nodenext, CommonJS", type: "commonjs", compilerOptions: { module: "nodenext", moduleResolution: "nodenext" } },
    { name: "bundler", type: "module", compilerOptions: { module: "esnext", moduleResolution: "bundler" } },
    {
      name: "bundler, browser condition",
      type: "module",
      compilerOptions: { module: "esnext", moduleResolution: "bundler", customConditions: ["browser"] },
      extra: `import { init } from "locksmith-js"; export const ready: Promise<void> = init();`,
    },
    {
      name: "bundler, a Cloudflare worker with wrangler's Env over @cloudflare/workers-types",
      type: "module",
      worker: true,
      compilerOptions: { module: "es2022", moduleResolution: "bundler", lib: ["es2022"], types: ["@cloudflare/workers-types"] },
    },
  ];
  describe("type-checked by tsc", () => {
    const checks = new Map();
    before(async () => {
      // The runtime's types, as a Workers project has them (a devDependency here).
      await mkdir(join(dir, "node_modules/@cloudflare"), { recursive: true });
      await symlink(workerTypes, join(dir, "node_modules/@cloudflare/workers-types"), "dir").catch((e) => {
        if (e.code !== "EEXIST") throw e;
      });
      // locksmith-js/otel's types name @opentelemetry/api's, as an app that uses it has them.
      await linkOpenTelemetryApi(dir);
      // One project per mode, each under the consumer (its node_modules found by walking
      // up); the compilers run side by side.
      for (const mode of modes) {
        const sub = join(dir, `ts-${mode.name.replace(/\W+/g, "-")}`);
        await mkdir(sub, { recursive: true });
        await writeFile(join(sub, "package.json"), JSON.stringify({ type: mode.type }));
        const files = [];
        const add = async (name, code) => {
          await writeFile(join(sub, name), code);
          files.push(name);
        };
        if (mode.worker) {
          await add("worker.ts", workerConsumer);
        } else {
          await add("consumer.ts", consumer + (mode.extra ?? ""));
          if (mode.cts) await add("subpaths.cts", ctsConsumer);
        }
        const compilerOptions = {
          strict: true,
          noEmit: true,
          target: "es2022",
          types: [],
          skipLibCheck: false,
          lib: ["es2022", "dom"],
          ...mode.compilerOptions,
        };
        await writeFile(join(sub, "tsconfig.json"), JSON.stringify({ compilerOptions, files }));
        const check = run(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", sub]).catch((err) => {
          throw new Error(`tsc failed for ${mode.name}:\n${err.stdout}${err.stderr}`);
        });
        check.catch(() => {}); // awaited by its test
        checks.set(mode.name, check);
      }
    });
    for (const mode of modes) {
      it(`type-checks a consumer with moduleResolution ${mode.name}`, async (t) => {
        if (mode.worker && !prerequisite(t, workerTypes, "@cloudflare/workers-types (npm install)")) return;
        await checks.get(mode.name);
      });
    }
  });
});
