// The package as users get it: `npm pack`, installed into a fresh project, then used
// from ESM and CommonJS in Node, bundled into a Cloudflare worker and run in workerd,
// and type-checked by a consumer with moduleResolution node16 and bundler.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

import { TARGET } from "./target.mjs";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));

describe("the packed package", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  let dir;
  let pkg;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "locksmith-install-"));
    const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: root });
    const tarball = join(dir, stdout.trim().split("\n").pop());
    await writeFile(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    await run("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], { cwd: dir });
    pkg = join(dir, "node_modules/locksmith");
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("ships only what it needs", async () => {
    const files = await readdir(join(pkg, "js"), { recursive: true });
    for (const needed of ["index.d.ts", "node.cjs", "node.mjs", "workerd.mjs", "gen/api.cjs", "wasm/locksmith_wasm_bg.wasm"]) {
      assert.ok(files.includes(needed), `${needed} is in the package`);
    }
    assert.ok(files.some((f) => f.endsWith(".node")), "the native addon is in the package");
    assert.ok(!files.some((f) => f.includes("binding.d.ts")), "generated binding typings stay internal");
    const top = await readdir(pkg);
    for (const needed of ["LICENSE", "README.md", "package.json"]) assert.ok(top.includes(needed), `${needed} is in the package`);
    assert.ok(!top.some((f) => f.endsWith(".log")), "no profiler logs in the package");
  });

  it("imports from ESM and requires from CommonJS, as one instance", async () => {
    const script = `
      import { lock, setLockStore, MemoryLockStore, LockNotHeldError } from "locksmith";
      import { createRequire } from "node:module";
      const cjs = createRequire(import.meta.url)("locksmith");
      const store = setLockStore(new MemoryLockStore());
      if (cjs.getLockStore() !== store) throw new Error("ESM and CJS see different stores");
      const [ran, result] = await lock("invoice:42").run(() => "charged");
      const err = await lock("x").extend().catch((e) => e);
      console.log(JSON.stringify({ ran, result, isCjsClass: err instanceof cjs.LockNotHeldError, isEsmClass: err instanceof LockNotHeldError }));
    `;
    await writeFile(join(dir, "esm.mjs"), script);
    const { stdout } = await run(process.execPath, ["esm.mjs"], { cwd: dir });
    assert.deepEqual(JSON.parse(stdout), { ran: true, result: "charged", isCjsClass: true, isEsmClass: true });
    await writeFile(join(dir, "cjs.cjs"), `const { lock } = require("locksmith"); lock("k").run(() => 1).then((r) => console.log(JSON.stringify(r)));`);
    assert.deepEqual(JSON.parse((await run(process.execPath, ["cjs.cjs"], { cwd: dir })).stdout), [true, 1]);
    await writeFile(join(dir, "wasm.mjs"), `import { lock } from "locksmith/wasm"; console.log(JSON.stringify(await lock("k").run(() => 2)));`);
    assert.deepEqual(JSON.parse((await run(process.execPath, ["wasm.mjs"], { cwd: dir })).stdout), [true, 2]);
  });

  it("bundles into a Cloudflare worker that runs in workerd", async () => {
    await writeFile(
      join(dir, "worker.mjs"),
      `import { lock } from "locksmith";
       export default { async fetch() { return Response.json(await lock("invoice:42").run(async () => "charged")); } };`,
    );
    const out = join(dir, "dist");
    await build({
      entryPoints: [join(dir, "worker.mjs")],
      bundle: true,
      format: "esm",
      outfile: join(out, "worker.js"),
      conditions: ["workerd", "worker"],
      external: ["*.wasm"],
      logLevel: "error",
    });
    // esbuild leaves the .wasm import to the runtime, as wrangler does: it ships beside
    // the bundle, and workerd loads it as a compiled module.
    await mkdir(join(out, "wasm"), { recursive: true });
    await cp(join(pkg, "js/wasm/locksmith_wasm_bg.wasm"), join(out, "wasm/locksmith_wasm_bg.wasm"));
    const mf = new Miniflare({
      modules: true,
      scriptPath: join(out, "worker.js"),
      modulesRoot: out,
      modulesRules: [
        { type: "ESModule", include: ["**/*.js"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      compatibilityDate: "2025-01-01",
    });
    try {
      const res = await mf.dispatchFetch("http://worker/");
      assert.deepEqual(await res.json(), [true, "charged"]);
    } finally {
      await mf.dispose();
    }
  });

  for (const resolution of ["node16", "bundler"]) {
    it(`type-checks a consumer with moduleResolution ${resolution}`, async () => {
      const sub = join(dir, `ts-${resolution}`);
      await mkdir(sub, { recursive: true });
      await writeFile(join(sub, "package.json"), JSON.stringify({ type: "module" }));
      await cp(join(dir, "node_modules"), join(sub, "node_modules"), { recursive: true });
      await writeFile(
        join(sub, "consumer.ts"),
        `import { lock, restoreLock, setLockStore, MemoryLockStore, LockNotHeldError, type LockStore, type AcquireOptions } from "locksmith";
         const options: AcquireOptions = { timeout: 10 };
         const store: LockStore = setLockStore(new MemoryLockStore());
         export async function main(): Promise<boolean> {
           const [ran, n] = await lock("k", 1_000).run(async () => 1, options);
           const copy = restoreLock(lock("k").serialize(), store);
           const err: unknown = new Error();
           return ran && n === 1 && copy.key === "k" && !(err instanceof LockNotHeldError);
         }`,
      );
      const module = resolution === "node16" ? "node16" : "esnext";
      await writeFile(
        join(sub, "tsconfig.json"),
        JSON.stringify({ compilerOptions: { strict: true, noEmit: true, module, moduleResolution: resolution, target: "es2022", types: [], skipLibCheck: false, lib: ["es2022", "dom"] }, files: ["consumer.ts"] }),
      );
      await run(join(root, "node_modules/.bin/tsc"), ["-p", sub]);
    });
  }
});
