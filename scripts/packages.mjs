// The npm packages as they are published, made from one list: package.json's
// `napi.targets`. The napi-rs CLI creates a package per target (`napi create-npm-dirs`),
// each built binary is copied into its package; the main package is
// the repository's own `npm pack`, with those packages as its optionalDependencies (what
// `napi pre-publish` adds at release). The release workflow and npm test run this same
// script.
//
//   node scripts/packages.mjs [--out DIR] [--binaries DIR] [--ignore-scripts]
//                                                            stage and pack; prints JSON
//   node scripts/packages.mjs --matrix                       the release build matrix (JSON)
//
// DIR (default target/packages) /npm/<triple>/ holds each platform's package, DIR/*.tgz
// the packed ones (the main package, and each platform package that has its binary),
// DIR/main/ the main package unpacked. --binaries: where the built .node files are
// (default js/native/). --ignore-scripts: no prepack build first (the tree is built).
// The main package.json loses the repository's scripts and devDependencies. See
// docs/contributing.md ("Packing").
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { linkerOf } from "./cross-tools.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const { TRIPLES, tripleOf, packageOf, fileOf } = require("../js/native-loader.cjs");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

/**
 * Where the release builds and tests each target. Everything a Linux machine can build
 * (scripts/cross-tools.mjs: apt linkers, mingw-w64, Zig) is built on Linux with the same
 * commands as here (`scripts/setup.sh --cross-for=<target>`, then
 * `scripts/build-cross.mjs <target>`); the MSVC build needs Windows. Each build is tested
 * on its own platform (musl builds in an Alpine container).
 */
export function buildMatrix() {
  return pkg.napi.targets.map((target) => {
    const triple = tripleOf(target);
    const host = linkerOf(target, "linux") ? "ubuntu-22.04" : target.includes("windows") ? "windows-2022" : target.includes("apple") ? "macos-14" : null;
    if (!host) throw new Error(`locksmith: no release runner builds ${target} (scripts/packages.mjs)`);
    const [platform, arch] = triple.split("-");
    const testHost = {
      linux: arch === "arm64" ? "ubuntu-22.04-arm" : "ubuntu-22.04",
      darwin: arch === "arm64" ? "macos-14" : "macos-15-intel",
      win32: arch === "arm64" ? "windows-11-arm" : "windows-2022",
    }[platform];
    return { triple, target, host, testHost, alpine: target.includes("musl") };
  });
}

const run = (cmd, args, cwd = root) => execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
const napi = join(root, "node_modules/.bin/napi");

/** `npm pack` of `dir` into `out`; the tarball's path. */
function pack(dir, out, ignoreScripts) {
  const args = ["pack", "--silent", "--pack-destination", out];
  if (ignoreScripts) args.push("--ignore-scripts");
  return join(out, run("npm", args, dir).trim().split("\n").pop());
}

let stagings = 0;

/**
 * Stages and packs every package into `out`. `binaries` is where the built `.node`
 * files are (js/native/ here; the release's downloaded artifacts there).
 * `ignoreScripts` skips the main package's prepack build (for a tree already built).
 */
export function stagePackages({ out = join(root, "target/packages"), binaries = join(root, "js/native"), ignoreScripts = false } = {}) {
  out = resolve(out);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const npmDir = join(out, "npm");
  // The napi-rs CLI writes only inside the project: it makes the folders there, and they
  // are copied to `out`.
  // A folder of this call's own: two stagings at once (test files run in parallel) must
  // not share it.
  const made = join(root, `target/npm-dirs-${process.pid}-${stagings++}`);
  rmSync(made, { recursive: true, force: true });
  run(napi, ["create-npm-dirs", "--cwd", root, "--package-json-path", "package.json", "--npm-dir", made]);
  cpSync(made, npmDir, { recursive: true });
  rmSync(made, { recursive: true, force: true });
  // The napi-rs CLI gives every target whose ABI is `gnu` `"libc": ["glibc"]`, Windows'
  // too; npm knows a libc on Linux only and refuses such a package anywhere else
  // (EBADPLATFORM, which for an optional dependency means silently left out).
  for (const triple of TRIPLES.filter((t) => !t.startsWith("linux-"))) {
    const file = join(npmDir, triple, "package.json");
    const manifest = JSON.parse(readFileSync(file, "utf8"));
    if (manifest.libc) {
      delete manifest.libc;
      writeFileSync(file, `${JSON.stringify(manifest, null, 2)}\n`);
    }
  }
  // The generated packages say what their binary is for; a README of our own says so too.
  for (const triple of TRIPLES) {
    writeFileSync(
      join(npmDir, triple, "README.md"),
      `# ${packageOf(triple)}\n\nThe ${triple} native addon of [${pkg.name}](https://www.npmjs.com/package/${pkg.name}). ` +
        `Install \`${pkg.name}\` itself: npm adds this package on ${triple} by itself, as an optional dependency.\n`,
    );
  }
  // Each built binary into its package (what `napi artifacts` does, which insists on
  // every target's; here a machine builds some). The release's artifacts sit one folder
  // down each (bindings-<triple>/).
  const found = existsSync(binaries) ? readdirSync(resolve(binaries), { recursive: true }).map(String) : [];
  for (const triple of TRIPLES) {
    const file = found.find((f) => basename(f) === fileOf(triple));
    if (file) copyFileSync(join(resolve(binaries), file), join(npmDir, triple, fileOf(triple)));
  }
  const platforms = {};
  for (const triple of TRIPLES) {
    const dir = join(npmDir, triple);
    const has = existsSync(join(dir, fileOf(triple)));
    platforms[triple] = { name: packageOf(triple), dir, tarball: has ? pack(dir, out, true) : null };
  }
  // The main package: the repository's own pack, unpacked, given its optionalDependencies, packed again.
  const first = pack(root, out, ignoreScripts);
  const main = join(out, "main");
  mkdirSync(main);
  run("tar", ["-xzf", first, "-C", main, "--strip-components=1"]);
  rmSync(first);
  const manifest = JSON.parse(readFileSync(join(main, "package.json"), "utf8"));
  manifest.optionalDependencies = Object.fromEntries(TRIPLES.map((t) => [packageOf(t), pkg.version]));
  // Nothing of the repository's own workflow: its scripts (prepack would build from Rust
  // sources the package does not hold; test, bench and the rest run its tooling) and its
  // devDependencies are not a consumer's.
  delete manifest.scripts;
  delete manifest.devDependencies;
  writeFileSync(join(main, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  const tarball = pack(main, out, true);
  return { main: tarball, mainDir: main, platforms };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { out: { type: "string" }, binaries: { type: "string" }, matrix: { type: "boolean" }, "ignore-scripts": { type: "boolean" } },
  });
  if (values.matrix) {
    console.log(JSON.stringify({ include: buildMatrix() }));
  } else {
    const staged = stagePackages({ out: values.out, binaries: values.binaries, ignoreScripts: values["ignore-scripts"] });
    console.log(JSON.stringify(staged, null, 2));
    const missing = Object.entries(staged.platforms)
      .filter(([, p]) => !p.tarball)
      .map(([t]) => t);
    if (missing.length) console.error(`packages.mjs: no binary here for ${missing.join(", ")}: those packages were not packed`);
  }
}
