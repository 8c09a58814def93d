// A worker of the tests in real workerd, through Miniflare: bundled with esbuild as
// wrangler bundles it (the package resolved through its exports map under the workerd
// condition; the runtime's `cloudflare:*` modules and the .wasm files left as imports),
// with both of the package's WebAssembly modules beside it.
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * A Miniflare running the bundle `dir`/worker.js, its .js files as ES modules and its
 * .wasm files as compiled modules (as wrangler loads them), with `options` (bindings,
 * durableObjects, ...).
 */
export function miniflareFor(dir, options = {}) {
  return new Miniflare({
    modules: true,
    scriptPath: join(dir, "worker.js"),
    modulesRoot: dir,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: "2025-01-01",
    ...options,
  });
}

/**
 * Starts `entry` (a path under js-tests/) with Miniflare `options` (bindings,
 * durableObjects, ...). Resolves to `{ mf, inputs, dispose() }`; `inputs` are the
 * bundle's source files, relative to the repository.
 */
export async function startWorker(entry, options = {}) {
  const out = await mkdtemp(join(tmpdir(), "locksmith-workerd-"));
  try {
    const result = await build({
      entryPoints: [join(root, "js-tests", entry)],
      bundle: true,
      format: "esm",
      outfile: join(out, "worker.js"),
      conditions: ["workerd", "worker"],
      // node:* as wrangler leaves them under nodejs_compat (a worker of the tests that imports one sets the flag).
      external: ["*.wasm", "cloudflare:*", "node:*"],
      metafile: true,
      logLevel: "error",
    });
    await mkdir(join(out, "wasm"));
    // Both modules ship, as wrangler ships them: the Redis engine's is imported only by
    // RedisLockStore.connect().
    for (const file of ["locksmith_wasm_bg.wasm", "locksmith_wasm_redis_bg.wasm"]) {
      await copyFile(join(root, "js/wasm", file), join(out, "wasm", file));
    }
    const mf = miniflareFor(out, options);
    await mf.ready;
    return {
      mf,
      inputs: Object.keys(result.metafile.inputs),
      async dispose() {
        await mf.dispose();
        await rm(out, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(out, { recursive: true, force: true });
    throw err;
  }
}
