// Builds the addon for another Rust target into js/native/locksmith.<triple>.node, the
// way scripts/cross-tools.mjs says this machine links it: a linker from apt (musl-tools,
// gcc-aarch64-linux-gnu, gcc-mingw-w64-x86-64), or cargo-zigbuild with Zig from the PyPI
// package `ziglang` (darwin, aarch64 musl, Windows on arm64). The release workflow runs
// this same script. Each target has its own directory under target/, so builds stay
// incremental. scripts/setup.sh --cross (or --cross-for=<target>) installs the tools.
//   node scripts/build-cross.mjs x86_64-apple-darwin
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";

import { CARGO_ZIGBUILD_VERSION, linkerOf, nodeExe, root, zigDir } from "./cross-tools.mjs";

const [target] = process.argv.slice(2);
if (!target) {
  console.error("usage: node scripts/build-cross.mjs <rust target>");
  process.exit(2);
}
const how = linkerOf(target);
if (!how) {
  console.error(`build-cross: ${target} cannot be built on ${process.platform} (scripts/cross-tools.mjs)`);
  process.exit(2);
}

const fail = (message) => {
  console.error(`build-cross: ${message}; scripts/setup.sh --cross-for=${target} installs it`);
  process.exit(1);
};
const onPath = (cmd) => process.env.PATH.split(delimiter).some((dir) => existsSync(join(dir, cmd)));
const env = { ...process.env };
const upper = target.toUpperCase().replaceAll("-", "_");
const napiArgs = [];

if (how.cc) {
  if (!onPath(how.cc)) fail(`${how.cc} is not on PATH`);
  env[`CARGO_TARGET_${upper}_LINKER`] ??= how.cc;
  env[`CC_${target.replaceAll("-", "_")}`] ??= how.cc;
}

if (how.zig) {
  // Both zig and cargo-zigbuild must be the pinned ones: the napi-rs CLI would otherwise
  // `cargo install` an unpinned cargo-zigbuild, and cargo-zigbuild pick any zig it finds.
  if (!existsSync(join(zigDir, "zig"))) fail(`zig is not in ${zigDir}`);
  let version = "";
  try {
    version = execFileSync("cargo-zigbuild", ["--version"], { encoding: "utf8" }).trim();
  } catch {}
  if (version !== `cargo-zigbuild ${CARGO_ZIGBUILD_VERSION}`) fail(`cargo-zigbuild ${CARGO_ZIGBUILD_VERSION} is not on PATH (found: ${version || "none"})`);
  env.CARGO_ZIGBUILD_ZIG_PATH = join(zigDir, "zig");
  env.PATH = `${zigDir}${delimiter}${env.PATH}`;
  // Its wrappers and sysroot caches stay with the build, not in the home directory.
  env.CARGO_ZIGBUILD_CACHE_DIR ??= join(root, "target/zigbuild-cache");
  env.ZIG_GLOBAL_CACHE_DIR ??= join(root, "target/zig-cache");
  env.ZIG_LOCAL_CACHE_DIR ??= join(root, "target/zig-cache");
  if (how.zig === "napi") napiArgs.push("--cross-compile");
  // napi build runs `$CARGO build ...`, which cargo-zigbuild takes as `zigbuild`.
  else env.CARGO = "cargo-zigbuild";
}

if (target.endsWith("apple-darwin") && how.zig) {
  // The oldest macOS that Node 20 runs on (10.15 on x64, 11 on Apple silicon); left
  // unset, Zig would stamp the addon with its newest SDK's version as the minimum.
  env.MACOSX_DEPLOYMENT_TARGET ??= target.startsWith("x86_64") ? "10.15" : "11.0";
}

if (how.libnode) {
  // napi-build links a windows-gnu addon against `libnode.dll` in LIBNODE_PATH: an import
  // library made from the node.exe of Node for Windows (gendef from mingw-w64-tools,
  // then dlltool), so the addon imports the Node-API functions from node.exe.
  const exe = nodeExe(how.libnode);
  if (!existsSync(exe)) fail(`${exe} is missing`);
  const dir = join(root, `target/libnode-win32-${how.libnode}`);
  const lib = join(dir, "libnode.dll.a");
  if (!existsSync(join(dir, "node.lib")) || statSync(lib).mtimeMs < statSync(exe).mtimeMs) {
    mkdirSync(dir, { recursive: true });
    if (!onPath("gendef")) fail("gendef (mingw-w64-tools) is not on PATH");
    const def = execFileSync("gendef", ["-", exe], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], maxBuffer: 64 << 20 });
    const defFile = join(dir, "node.def");
    writeFileSync(defFile, def);
    const dlltool =
      how.libnode === "x64"
        ? ["x86_64-w64-mingw32-dlltool", ["-d", defFile, "-D", "node.exe", "-l", lib]]
        : ["llvm-dlltool", ["-m", "arm64", "-d", defFile, "-D", "node.exe", "-l", lib]];
    if (!onPath(dlltool[0])) fail(`${dlltool[0]} is not on PATH`);
    execFileSync(dlltool[0], dlltool[1], { cwd: dir, stdio: "inherit" });
    // napi-build looks for the file `libnode.dll` there and asks for `-lnode`, which GNU
    // ld finds as libnode.dll.a and Zig's linker as node.lib.
    for (const name of ["libnode.dll", "node.lib"]) {
      rmSync(join(dir, name), { force: true });
      symlinkSync("libnode.dll.a", join(dir, name));
    }
  }
  env.LIBNODE_PATH = dir;
}

if (target.includes("musl")) {
  // A Node addon is a shared library: link musl dynamically, as Alpine's node does.
  let rustflags = "-C target-feature=-crt-static";
  if (how.cc === "musl-gcc") {
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
    "--manifest-path",
    "node/Cargo.toml",
    "--package-json-path",
    "package.json",
    "--platform",
    "--release",
    "--no-js",
    "--target",
    target,
    "--output-dir",
    "js/native",
    "--dts",
    "binding.d.ts",
    ...napiArgs,
  ],
  { cwd: root, stdio: "inherit", env },
);
