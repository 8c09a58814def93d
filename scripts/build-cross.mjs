// Builds the addon for another Rust target into js/native/locksmith.<triple>.node, with
// the linker this machine has for it (apt: musl-tools, gcc-aarch64-linux-gnu), or with
// cargo-zigbuild (`--zig`, the release workflow's aarch64 musl). Each target has its own
// directory under target/, so builds stay incremental.
//   node scripts/build-cross.mjs x86_64-unknown-linux-musl
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
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
  let rustflags = "-C target-feature=-crt-static";
  if (target === "x86_64-unknown-linux-musl" && !zig && process.platform === "linux") {
    // Rust's unwinder links libgcc_s.so.1, which Alpine's libgcc package provides at run
    // time; musl-tools has none to link against, so point the linker at the host's copy
    // (and only at it: the host's libc stays out of the search path).
    const dir = join(root, "target/musl-link");
    mkdirSync(dir, { recursive: true });
    const lib = ["/lib/x86_64-linux-gnu/libgcc_s.so.1", "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"].find(existsSync);
    if (lib) {
      for (const name of ["libgcc_s.so", "libgcc_s.so.1"]) {
        rmSync(join(dir, name), { force: true });
        symlinkSync(lib, join(dir, name));
      }
      rustflags += ` -L native=${dir}`;
    }
  }
  // RUSTFLAGS, not CARGO_TARGET_<T>_RUSTFLAGS: napi sets RUSTFLAGS for musl targets, which
  // would hide the latter. With --target it reaches only the target's artifacts.
  env.RUSTFLAGS = [process.env.RUSTFLAGS, rustflags].filter(Boolean).join(" ");
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
