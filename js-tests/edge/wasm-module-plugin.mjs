// esbuild plugin: `import m from "x.wasm?module"` gives a compiled WebAssembly.Module,
// the way Vercel's bundler treats the edge-light entry's import.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

export const wasmModules = {
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
