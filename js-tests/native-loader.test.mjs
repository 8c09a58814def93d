// The addon loader: napi-rs's triples, musl detection, and an error that lists what was
// tried. Loading from a per-platform package and the fallback are tested on the packed
// package in install.test.mjs.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

const require = createRequire(import.meta.url);
const { TRIPLES, fileOf, isMusl, packageOf, platformTriple, loadAddon, tripleOf } = require("../js/native-loader.cjs");
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

describe("native loader", () => {
  it("names platforms as napi-rs does", () => {
    assert.equal(platformTriple("win32", "x64"), "win32-x64-msvc");
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
    assert.equal(packageOf("linux-x64-gnu"), "locksmith-js-linux-x64-gnu");
    assert.equal(fileOf("darwin-arm64"), "locksmith.darwin-arm64.node");
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
    const err = (() => {
      try {
        loadAddon("linux-arm64-musl");
      } catch (e) {
        return e;
      }
    })();
    assert.equal(err?.code, "LOCKSMITH_NATIVE_UNAVAILABLE");
    assert.match(err.message, /^locksmith: no native addon for linux-arm64-musl could be loaded; tried /);
    assert.match(err.message, /js\/native\/locksmith\.linux-arm64-musl\.node \(not installed\)/);
    assert.match(err.message, /locksmith-js-linux-arm64-musl \(not installed\)/);
  });

  it("says when a platform has no published build at all", () => {
    assert.throws(() => loadAddon("freebsd-x64"), (err) => {
      assert.equal(err.code, "LOCKSMITH_NATIVE_UNAVAILABLE");
      assert.match(err.message, /no native build is published for freebsd-x64; the published ones are linux-x64-gnu, /);
      assert.doesNotMatch(err.message, /locksmith-js-freebsd-x64/, "no package is looked for where none is published");
      return true;
    });
  });
});
