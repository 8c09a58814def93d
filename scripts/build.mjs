// Builds what the package needs, incrementally: the JS surface in CommonJS form and
// the native addon (cargo only rebuilds what changed).
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
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

const napi = join(root, "node_modules/.bin/napi");
run(napi, [
  "build",
  "--manifest-path", "node/Cargo.toml",
  "--package-json-path", "package.json",
  "--platform", "--release", "--no-js",
  "--output-dir", "js/native",
  "--dts", "binding.d.ts",
]);
