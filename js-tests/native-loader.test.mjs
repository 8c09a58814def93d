// The addon loader: napi-rs's triples, musl detection, and an error that lists what was
// tried. Loading from a per-platform package and the fallback are tested on the packed
// package in install.test.mjs.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

const require = createRequire(import.meta.url);
const { TRIPLES, isMusl, platformTriple, loadAddon } = require("../js/native-loader.cjs");
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

describe("native loader", () => {
  it("names platforms as napi-rs does", () => {
    assert.equal(platformTriple("win32", "x64"), "win32-x64-msvc");
    assert.equal(platformTriple("darwin", "arm64"), "darwin-arm64");
    assert.equal(platformTriple("darwin", "x64"), "darwin-x64");
    assert.equal(platformTriple("linux", "x64", false), "linux-x64-gnu");
    assert.equal(platformTriple("linux", "arm64", true), "linux-arm64-musl");
  });

  it("has a package directory for every triple it looks for, each holding one .node", () => {
    for (const triple of TRIPLES) {
      const dir = new URL(`../npm/${triple}/package.json`, import.meta.url);
      assert.ok(existsSync(dir), `npm/${triple}/package.json exists`);
      const sub = JSON.parse(readFileSync(dir, "utf8"));
      assert.equal(sub.name, `locksmith-${triple}`);
      assert.deepEqual(sub.files, [`locksmith.${triple}.node`]);
      assert.equal(sub.main, `locksmith.${triple}.node`);
      assert.equal(sub.version, pkg.version, "versions move together");
    }
    assert.equal(pkg.napi.targets.length, TRIPLES.length, "package.json napi.targets lists the same platforms");
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
    assert.match(err.message, /locksmith-linux-arm64-musl \(not installed\)/);
  });

  it("says when a platform has no published build at all", () => {
    assert.throws(() => loadAddon("freebsd-x64"), (err) => {
      assert.equal(err.code, "LOCKSMITH_NATIVE_UNAVAILABLE");
      assert.match(err.message, /no native build is published for freebsd-x64; the published ones are linux-x64-gnu, /);
      assert.doesNotMatch(err.message, /locksmith-freebsd-x64/, "no package is looked for where none is published");
      return true;
    });
  });
});
