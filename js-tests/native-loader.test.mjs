// The addon loader: napi-rs's triples, musl detection, which package it picks on
// Windows, and an error that lists what was tried. Loading from a per-platform package and
// the fallback are tested on the packed package in install.test.mjs, and on win32 for
// real under Wine in cross.test.mjs (npm run test:cross).
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";

const require = createRequire(import.meta.url);
const { TRIPLES, candidatesFor, fileOf, isMusl, packageOf, platformTriple, loadAddon, tripleOf } = require("../js/native-loader.cjs");
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

describe("native loader", () => {
  it("names platforms as napi-rs does", () => {
    assert.equal(platformTriple("win32", "x64"), "win32-x64-msvc");
    assert.equal(platformTriple("win32", "arm64"), "win32-arm64-msvc");
    assert.equal(platformTriple("darwin", "arm64"), "darwin-arm64");
    assert.equal(platformTriple("darwin", "x64"), "darwin-x64");
    assert.equal(platformTriple("linux", "x64", false), "linux-x64-gnu");
    assert.equal(platformTriple("linux", "arm64", true), "linux-arm64-musl");
  });

  it("takes its platforms from package.json's napi.targets, named as napi-rs names them", () => {
    assert.deepEqual(TRIPLES, pkg.napi.targets.map(tripleOf));
    assert.equal(tripleOf("x86_64-unknown-linux-gnu"), "linux-x64-gnu");
    assert.equal(tripleOf("aarch64-unknown-linux-musl"), "linux-arm64-musl");
    assert.equal(tripleOf("x86_64-apple-darwin"), "darwin-x64");
    assert.equal(tripleOf("aarch64-apple-darwin"), "darwin-arm64");
    assert.equal(tripleOf("x86_64-pc-windows-msvc"), "win32-x64-msvc");
    assert.equal(tripleOf("x86_64-pc-windows-gnu"), "win32-x64-gnu");
    assert.equal(tripleOf("aarch64-pc-windows-gnullvm"), "win32-arm64-gnullvm");
    assert.equal(packageOf("linux-x64-gnu"), "locksmith-js-linux-x64-gnu");
    assert.equal(fileOf("darwin-arm64"), "locksmith.darwin-arm64.node");
  });

  it("publishes the Windows builds made with the GNU toolchains under their own names", () => {
    assert.ok(TRIPLES.includes("win32-x64-gnu"), "the mingw-w64 build (locksmith-js-win32-x64-gnu)");
    assert.ok(TRIPLES.includes("win32-arm64-gnullvm"), "the LLVM mingw build (locksmith-js-win32-arm64-gnullvm)");
    assert.equal(packageOf("win32-x64-gnu"), "locksmith-js-win32-x64-gnu");
  });

  it("on Windows, tries the MSVC build first, then the GNU ones of the same architecture", () => {
    const has = (t) => TRIPLES.includes(t);
    assert.deepEqual(candidatesFor("win32-x64-msvc"), ["win32-x64-msvc", "win32-x64-gnu"].filter(has));
    assert.deepEqual(candidatesFor("win32-x64-gnu"), ["win32-x64-gnu", "win32-x64-msvc"].filter(has));
    assert.deepEqual(candidatesFor("win32-arm64-msvc"), ["win32-arm64-msvc", "win32-arm64-gnu", "win32-arm64-gnullvm"].filter(has));
    assert.deepEqual(candidatesFor("linux-x64-gnu"), ["linux-x64-gnu"], "no other toolchain's build elsewhere");
    assert.deepEqual(candidatesFor("freebsd-x64"), []);
  });

  // The loader copied into an installed layout (node_modules/locksmith-js/js/ and the
  // platform packages beside it), with stand-in packages that say which one was loaded.
  function installedLoader(platformPackages) {
    const dir = mkdtempSync(join(tmpdir(), "locksmith-loader-"));
    const pkgDir = join(dir, "node_modules", pkg.name);
    mkdirSync(join(pkgDir, "js"), { recursive: true });
    copyFileSync(new URL("../js/native-loader.cjs", import.meta.url), join(pkgDir, "js/native-loader.cjs"));
    writeFileSync(join(pkgDir, "package.json"), JSON.stringify({ name: pkg.name, version: pkg.version, napi: pkg.napi }));
    for (const triple of platformPackages) {
      const sub = join(dir, "node_modules", packageOf(triple));
      mkdirSync(sub, { recursive: true });
      writeFileSync(join(sub, "package.json"), JSON.stringify({ name: packageOf(triple), version: pkg.version, main: "stand-in.cjs" }));
      writeFileSync(join(sub, "stand-in.cjs"), `module.exports = { loaded: ${JSON.stringify(triple)} };`);
    }
    const loader = createRequire(join(pkgDir, "js/native-loader.cjs"))("./native-loader.cjs");
    return { loader, remove: () => rmSync(dir, { recursive: true, force: true }) };
  }

  it("picks locksmith-js-win32-x64-gnu on win32-x64 when no MSVC package is installed", () => {
    const gnuOnly = installedLoader(["win32-x64-gnu"]);
    const both = installedLoader(["win32-x64-msvc", "win32-x64-gnu"]);
    try {
      assert.deepEqual(gnuOnly.loader.loadAddon(platformTriple("win32", "x64")), { loaded: "win32-x64-gnu" });
      assert.deepEqual(both.loader.loadAddon(platformTriple("win32", "x64")), { loaded: "win32-x64-msvc" }, "MSVC's when both are there");
    } finally {
      gnuOnly.remove();
      both.remove();
    }
  });

  it("picks locksmith-js-win32-arm64-gnullvm on win32-arm64 when no MSVC package is installed", () => {
    const installed = installedLoader(["win32-arm64-gnullvm"]);
    try {
      assert.deepEqual(installed.loader.loadAddon(platformTriple("win32", "arm64")), { loaded: "win32-arm64-gnullvm" });
    } finally {
      installed.remove();
    }
  });

  it("lists the MSVC package and then the GNU one when neither is installed on win32-x64", () => {
    const none = installedLoader([]);
    try {
      const err = (() => {
        try {
          none.loader.loadAddon("win32-x64-msvc");
        } catch (e) {
          return e;
        }
      })();
      assert.equal(err?.code, "LOCKSMITH_NATIVE_UNAVAILABLE");
      const order = ["locksmith-js-win32-x64-msvc (not installed)", "locksmith-js-win32-x64-gnu (not installed)"].map((s) => err.message.indexOf(s));
      assert.ok(order[0] >= 0 && order[1] > order[0], err.message);
      assert.match(err.message, /npm installs locksmith-js-win32-x64-msvc as an optional dependency/);
    } finally {
      none.remove();
    }
  });

  it("tells glibc from musl by the ldd script", () => {
    const ldd = existsSync("/usr/bin/ldd") ? readFileSync("/usr/bin/ldd", "utf8") : "";
    assert.equal(isMusl(), ldd.includes("musl"));
    if (process.platform === "linux") assert.match(platformTriple(), ldd.includes("musl") ? /-musl$/ : /-gnu$/);
  });

  it("loads this platform's development build", () => {
    const addon = loadAddon();
    assert.equal(typeof addon.NativeMemoryStore, "function");
  });

  it("lists every place it tried when nothing loads", () => {
    // In an installed layout: this checkout's js/native/ may hold the cross builds (npm run
    // test:cross), which fail to load here for another reason than being absent.
    const none = installedLoader([]);
    const err = (() => {
      try {
        none.loader.loadAddon("linux-arm64-musl");
      } catch (e) {
        return e;
      } finally {
        none.remove();
      }
    })();
    assert.equal(err?.code, "LOCKSMITH_NATIVE_UNAVAILABLE");
    assert.match(err.message, /^locksmith: no native addon for linux-arm64-musl could be loaded; tried /);
    assert.match(err.message, /js\/native\/locksmith\.linux-arm64-musl\.node \(not installed\)/);
    assert.match(err.message, /locksmith-js-linux-arm64-musl \(not installed\)/);
  });

  it("says when a platform has no published build at all", () => {
    assert.throws(
      () => loadAddon("freebsd-x64"),
      (err) => {
        assert.equal(err.code, "LOCKSMITH_NATIVE_UNAVAILABLE");
        assert.match(err.message, /no native build is published for freebsd-x64; the published ones are linux-x64-gnu, /);
        assert.doesNotMatch(err.message, /locksmith-js-freebsd-x64/, "no package is looked for where none is published");
        return true;
      },
    );
  });
});
