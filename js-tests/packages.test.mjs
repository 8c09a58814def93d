// The staged main package (scripts/packages.mjs) carries what a consumer needs and
// nothing of the repository's own workflow: no `scripts` (prepack would rebuild from
// Rust sources that are not in the package; test, bench and the rest run the repository's
// tooling) and no `devDependencies`. Its peers, entry points and platform packages stay.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { stagePackages } from "../scripts/packages.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const source = JSON.parse(await readFile(join(root, "package.json"), "utf8"));

describe("the staged main package", () => {
  let out;
  let staged;
  let manifest;
  before(async () => {
    out = await mkdtemp(join(tmpdir(), "locksmith-packages-"));
    // The tree is built already: no prepack build.
    staged = stagePackages({ out, ignoreScripts: true });
    manifest = JSON.parse(await readFile(join(staged.mainDir, "package.json"), "utf8"));
  });
  after(async () => {
    if (out) await rm(out, { recursive: true, force: true });
  });

  it("has no scripts and no devDependencies", () => {
    assert.equal(manifest.scripts, undefined, JSON.stringify(manifest.scripts));
    assert.equal(manifest.devDependencies, undefined);
    // The repository's own package.json keeps them.
    assert.ok(source.scripts.prepack && source.devDependencies);
  });

  it("keeps what a consumer uses: entry points, the command, peers, and the platform packages", () => {
    for (const field of ["name", "version", "type", "engines", "main", "types", "bin", "exports", "peerDependencies", "peerDependenciesMeta"]) {
      assert.deepEqual(manifest[field], source[field], field);
    }
    assert.deepEqual(
      Object.keys(manifest.optionalDependencies).sort(),
      Object.values(staged.platforms)
        .map((p) => p.name)
        .sort(),
    );
  });

  it("the packed tarball holds that package.json", () => {
    const packed = JSON.parse(execFileSync("tar", ["-xzOf", staged.main, "package/package.json"], { encoding: "utf8" }));
    assert.deepEqual(packed, manifest);
  });
});
