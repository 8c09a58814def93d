"use strict";
// Finds and loads the native addon the way napi-rs's generated loader does: the
// platform's triple (with musl detected on Linux), a development build in js/native/
// first, then the per-platform package `locksmith-js-<triple>` that npm installs as an
// optional dependency. When none loads, the error lists every file and package tried and
// says what an installed user can do.
//
// The platforms come from one list: package.json's `napi.targets` (Rust target triples),
// which also drives the per-platform packages (scripts/packages.mjs) and the release.

const { existsSync, readFileSync } = require("node:fs");
const { join } = require("node:path");

const pkg = require("../package.json");

const ARCH = { x86_64: "x64", aarch64: "arm64", i686: "ia32", armv7: "arm", riscv64gc: "riscv64", powerpc64le: "ppc64", s390x: "s390x" };
const PLATFORM = { linux: "linux", darwin: "darwin", windows: "win32", freebsd: "freebsd", android: "android" };

/**
 * napi-rs's name for a Rust target: `x86_64-unknown-linux-gnu` → `linux-x64-gnu`,
 * `aarch64-apple-darwin` → `darwin-arm64`, `x86_64-pc-windows-gnu` → `win32-x64-gnu`.
 */
function tripleOf(target) {
  const parts = target.split("-");
  const arch = ARCH[parts[0]];
  const sys = parts.length === 3 && parts[1] === "apple" ? "darwin" : parts[2];
  const platform = PLATFORM[sys];
  if (!arch || !platform) throw new Error(`locksmith: package.json napi.targets has ${target}, which has no napi-rs platform name here`);
  const abi = platform === "darwin" ? undefined : parts[3];
  return abi ? `${platform}-${arch}-${abi}` : `${platform}-${arch}`;
}

/** The triples locksmith publishes a package for, from package.json's napi.targets. */
const TRIPLES = pkg.napi.targets.map(tripleOf);
/** The npm package that carries `triple`'s binary. */
const packageOf = (triple) => `${pkg.napi.packageName}-${triple}`;
const fileOf = (triple) => `${pkg.napi.binaryName}.${triple}.node`;

/** Whether this Linux runs on musl libc (Alpine) rather than glibc. */
function isMusl() {
  // The ldd script names its libc; reading it needs no child process and no permission
  // beyond reading a file (napi-rs checks it first too).
  try {
    return readFileSync("/usr/bin/ldd", "utf8").includes("musl");
  } catch {}
  // Where ldd is missing: the process report's glibc version (absent on musl).
  try {
    if (typeof process.report?.getReport === "function") {
      process.report.excludeNetwork = true;
      return !process.report.getReport().header?.glibcVersionRuntime;
    }
  } catch {}
  return false;
}

/** The napi-rs triple of a platform: `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`, ... */
function platformTriple(platform = process.platform, arch = process.arch, musl = platform === "linux" && isMusl()) {
  switch (platform) {
    case "linux":
      return `linux-${arch}-${musl ? "musl" : "gnu"}`;
    case "win32":
      return `win32-${arch}-msvc`;
    default:
      return `${platform}-${arch}`;
  }
}

/**
 * The triples worth trying for `triple`, best first: itself, and on Windows the other
 * toolchains' builds of the same architecture, MSVC first, then GNU (`win32-x64-gnu`,
 * built with mingw-w64; `win32-arm64-gnullvm`, with LLVM's mingw): the official Node for
 * Windows loads any of them, so a machine without the MSVC package uses the GNU one.
 */
function candidatesFor(triple) {
  const win = /^win32-([^-]+)-(msvc|gnu|gnullvm)$/.exec(triple);
  const wanted = win ? [triple, ...["msvc", "gnu", "gnullvm"].map((abi) => `win32-${win[1]}-${abi}`)] : [triple];
  return [...new Set(wanted)].filter((t) => TRIPLES.includes(t));
}

/**
 * Loads the addon, or throws an Error with code LOCKSMITH_NATIVE_UNAVAILABLE whose
 * message lists what was tried, why each failed, and what to do.
 */
function loadAddon(triple = platformTriple()) {
  const published = candidatesFor(triple);
  // A development build of any of them first (a checkout, or the release's test job with
  // the one binary it tests), then the published packages.
  const attempts = [...new Set([triple, ...published])].map((t) => ({ spec: `./native/${fileOf(t)}`, shown: `js/native/${fileOf(t)}` }));
  for (const t of published) attempts.push({ spec: packageOf(t), shown: packageOf(t) });
  const tried = [];
  for (const { spec, shown } of attempts) {
    try {
      return require(spec);
    } catch (err) {
      const missing = err?.code === "MODULE_NOT_FOUND" && String(err.message).includes(spec);
      tried.push(`${shown} (${missing ? "not installed" : err.message})`);
    }
  }
  // A checkout of the project's repository builds its own addon; an installed package
  // gets it from npm.
  const checkout = existsSync(join(__dirname, "..", "Cargo.toml"));
  let advice;
  if (published.length === 0) {
    advice = `no native build is published for ${triple}; the published ones are ${TRIPLES.join(", ")}`;
  } else if (checkout) {
    advice = "build it with `npm run build`";
  } else {
    advice =
      `npm installs ${packageOf(published[0])} as an optional dependency of ${pkg.name}: reinstall without ` +
      `--omit=optional / --no-optional (a lockfile made on another platform can leave it out: remove ` +
      `node_modules and the lockfile, then npm install), or add it as an optional dependency with ` +
      `\`npm install --save-optional ${packageOf(published[0])}@${pkg.version}\``;
  }
  const err = new Error(`locksmith: no native addon for ${triple} could be loaded; tried ${tried.join("; ")}. ${advice}.`);
  err.code = "LOCKSMITH_NATIVE_UNAVAILABLE";
  err.tried = tried;
  throw err;
}

module.exports = { TRIPLES, tripleOf, packageOf, fileOf, isMusl, platformTriple, candidatesFor, loadAddon };
