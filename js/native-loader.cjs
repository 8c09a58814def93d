"use strict";
// Finds and loads the native addon the way napi-rs's generated loader does: the
// platform's triple (with musl detected on Linux), a development build in js/native/
// first, then the per-platform package `locksmith-<triple>` that npm installs as an
// optional dependency. When none loads, the error lists every file and package tried.

const { readFileSync } = require("node:fs");

/** The triples locksmith publishes a package for, as napi-rs names them. */
const TRIPLES = [
  "linux-x64-gnu",
  "linux-x64-musl",
  "linux-arm64-gnu",
  "linux-arm64-musl",
  "darwin-x64",
  "darwin-arm64",
  "win32-x64-msvc",
];

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
 * Loads the addon, or throws an Error with code LOCKSMITH_NATIVE_UNAVAILABLE whose
 * message lists what was tried and why each failed.
 */
function loadAddon(triple = platformTriple()) {
  const file = `locksmith.${triple}.node`;
  const candidates = [`./native/${file}`];
  if (TRIPLES.includes(triple)) candidates.push(`locksmith-${triple}`);
  const tried = [];
  for (const candidate of candidates) {
    try {
      return require(candidate);
    } catch (err) {
      const missing = err?.code === "MODULE_NOT_FOUND" && String(err.message).includes(candidate);
      tried.push(`${candidate.startsWith("./") ? `js/native/${file}` : candidate} (${missing ? "not installed" : err.message})`);
    }
  }
  const supported = TRIPLES.includes(triple)
    ? "reinstall without --no-optional / --omit=optional, or build it with `npm run build`"
    : `no native build is published for ${triple}; the published ones are ${TRIPLES.join(", ")}`;
  const err = new Error(`locksmith: no native addon for ${triple} could be loaded; tried ${tried.join("; ")}. ${supported}`);
  err.code = "LOCKSMITH_NATIVE_UNAVAILABLE";
  err.tried = tried;
  throw err;
}

module.exports = { TRIPLES, isMusl, platformTriple, loadAddon };
