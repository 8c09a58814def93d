// Builds the addon for another Rust target into js/native/locksmith.<triple>.node, with
// the linker this machine has for it (apt: musl-tools, gcc-aarch64-linux-gnu), or with
// cargo-zigbuild (`--zig`, the release workflow's aarch64 musl). Each target has its own
// directory under target/, so builds stay incremental.
//   node scripts/build-cross.mjs x86_64-unknown-linux-musl
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const [target, ...flags] = process.argv.slice(2);
if (!target) {
  console.error("usage: node scripts/build-cross.mjs <rust target> [--zig]");
  process.exit(2);
}

const env = { ...process.env };
const upper = target.toUpperCase().replaceAll("-", "_");
const cc = {
  "x86_64-unknown-linux-musl": "musl-gcc",
  "aarch64-unknown-linux-gnu": "aarch64-linux-gnu-gcc",
}[target];
const zig = flags.includes("--zig");
if (cc && !zig && process.platform === "linux") {
  env[`CARGO_TARGET_${upper}_LINKER`] ??= cc;
  env[`CC_${target.replaceAll("-", "_")}`] ??= cc;
}
if (target.includes("musl")) {
  // A Node addon is a shared library: link musl dynamically, as Alpine's node does.
  env[`CARGO_TARGET_${upper}_RUSTFLAGS`] ??= "-C target-feature=-crt-static";
}

execFileSync(
  join(root, "node_modules/.bin/napi"),
  [
    "build",
    "--manifest-path", "node/Cargo.toml",
    "--package-json-path", "package.json",
    "--platform", "--release", "--no-js",
    "--target", target,
    "--output-dir", "js/native",
    "--dts", "binding.d.ts",
    ...(zig ? ["--cross-compile"] : []),
  ],
  { cwd: root, stdio: "inherit", env },
);
