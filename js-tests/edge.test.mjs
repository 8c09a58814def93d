// Smoke tests of the WebAssembly build in the Vercel edge-runtime VM (edge-light entry,
// bundled with esbuild the way Vercel treats `.wasm?module`) and in Deno.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { readFile } from "node:fs/promises";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";
import { EdgeRuntime } from "edge-runtime";

import { EXPECTED } from "./edge/smoke.mjs";
import { TARGET } from "./target.mjs";

const here = (p) => fileURLToPath(new URL(p, import.meta.url));

/** esbuild plugin: `import m from "x.wasm?module"` gives a compiled WebAssembly.Module. */
const wasmModules = {
  name: "wasm-module",
  setup(b) {
    b.onResolve({ filter: /\.wasm\?module$/ }, (args) => ({
      path: fileURLToPath(new URL(args.path.replace(/\?module$/, ""), `file://${args.resolveDir}/`)),
      namespace: "wasm-module",
    }));
    b.onLoad({ filter: /.*/, namespace: "wasm-module" }, async (args) => ({
      contents: `const bytes = new Uint8Array([${(await readFile(args.path)).join(",")}]); export default new WebAssembly.Module(bytes);`,
      loader: "js",
    }));
  },
};

describe("edge runtimes", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  it("runs in the Vercel edge-runtime VM through the edge-light entry", async () => {
    const bundle = await build({
      entryPoints: [here("./edge/vercel-entry.mjs")],
      bundle: true,
      format: "iife",
      write: false,
      conditions: ["edge-light"],
      plugins: [wasmModules],
      logLevel: "error",
    });
    const runtime = new EdgeRuntime({ initialCode: bundle.outputFiles[0].text });
    const report = await runtime.evaluate("runSmoke()");
    assert.deepEqual(JSON.parse(JSON.stringify(report)), EXPECTED);
  });

  it("runs in Deno through the default entry", async () => {
    const deno = createRequire(import.meta.url).resolve("deno/bin.cjs");
    const { stdout } = await promisify(execFile)(process.execPath, [deno, "run", "--allow-read", "--no-prompt", here("./deno/smoke.mjs")], {
      env: { ...process.env, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
    });
    assert.deepEqual(JSON.parse(stdout), EXPECTED);
  });
});
