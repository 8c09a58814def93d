// Builds what the package needs, incrementally (cargo only rebuilds what changed):
// the JS surface in CommonJS form, the native addon, and the WebAssembly build.
// `node scripts/build.mjs native` or `... wasm` builds one half.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: "inherit" });

mkdirSync(join(root, "js/gen"), { recursive: true });
buildSync({
  entryPoints: [join(root, "js/api.mjs")],
  outfile: join(root, "js/gen/api.cjs"),
  format: "cjs",
  platform: "neutral",
  logLevel: "warning",
});
// The one hand-kept index.d.ts, also as .d.cts: what TypeScript reads for `require("locksmith")`
// under node16/nodenext (a .d.ts in a "type": "module" package describes ES modules only).
copyFileSync(join(root, "js/index.d.ts"), join(root, "js/index.d.cts"));

const only = process.argv[2];

if (only !== "wasm") {
  const napi = join(root, "node_modules/.bin/napi");
  run(napi, [
  "build",
  "--manifest-path", "node/Cargo.toml",
  "--package-json-path", "package.json",
  "--platform", "--release", "--no-js",
  "--output-dir", "js/native",
  "--dts", "binding.d.ts",
  ]);
}

if (only !== "native") {
  // Panic locations name source files; without the machine's cargo home in them the
  // module is the same size on every machine (npm test checks it against a budget).
  const cargoHome = process.env.CARGO_HOME ?? join(homedir(), ".cargo");
  execFileSync(
    "cargo",
    ["build", "-p", "locksmith-wasm", "--target", "wasm32-unknown-unknown", "--profile", "wasm-release", "--quiet"],
    {
      cwd: root,
      stdio: "inherit",
      env: {
        ...process.env,
        CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS: `--remap-path-prefix=${join(cargoHome, "registry/src")}=/cargo`,
      },
    },
  );
  const built = join(root, "target/wasm32-unknown-unknown/wasm-release/locksmith_wasm.wasm");
  const out = join(root, "js/wasm");
  const wasmFile = join(out, "locksmith_wasm_bg.wasm");
  let fresh = false;
  try {
    fresh = statSync(wasmFile).mtimeMs >= statSync(built).mtimeMs;
  } catch {}
  if (!fresh) {
    run("wasm-bindgen", [
      // --weak-refs: wasm objects are freed when their JS wrappers are collected.
      "--target", "web", "--out-dir", out, "--no-typescript", "--weak-refs",
      "--remove-name-section", "--remove-producers-section", built,
    ]);
    run(join(root, "node_modules/.bin/wasm-opt"), ["-Oz", "--enable-bulk-memory", "--enable-nontrapping-float-to-int", "--enable-sign-ext", "--enable-mutable-globals", wasmFile, "-o", wasmFile]);
  }
  // Node's fallback when no native addon loads: the wasm API as CommonJS, so that
  // `require("locksmith")` keeps working (js/index.cjs).
  buildSync({
    entryPoints: [join(root, "js/wasm-fallback.mjs")],
    outfile: join(root, "js/gen/wasm.cjs"),
    bundle: true,
    format: "cjs",
    platform: "node",
    logLevel: "warning",
    // The glue's default init() would fetch the .wasm next to import.meta.url; the fallback
    // passes the bytes to initSync instead.
    logOverride: { "empty-import-meta": "silent" },
  });
  const bytes = readFileSync(wasmFile);
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
  console.log(`locksmith_wasm_bg.wasm: ${kb(bytes.length)} raw, ${kb(gzipSync(bytes, { level: 9 }).length)} gzipped`);
}
