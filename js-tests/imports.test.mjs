// Imports run one way (docs/ARCHITECTURE.md): the leaf modules of js/api import nothing
// of the project's, the Redis driver and its sockets never reach the API, and the API
// never imports a store or the driver; and every file under js/ is in the folder table.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const js = join(root, "js");

/** Every .mjs/.cjs under js/ (build outputs aside), relative to the repository. */
function modules(dir = js) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return ["gen", "native", "wasm"].includes(entry.name) && dir === js ? [] : modules(path);
    return /\.(mjs|cjs)$/.test(entry.name) ? [relative(root, path)] : [];
  });
}

/** The project files a module imports (relative specifiers, resolved), static and dynamic. */
function importsOf(file) {
  const text = readFileSync(join(root, file), "utf8");
  const specs = [...text.matchAll(/(?:\bfrom|\bimport|\brequire)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => m[1]);
  return specs.map((spec) => normalize(join(dirname(file), spec)));
}

const all = modules();
const graph = new Map(all.map((file) => [file, importsOf(file)]));

/** Everything `file` reaches through imports. */
function reach(file, seen = new Set()) {
  for (const next of graph.get(file) ?? []) {
    if (seen.has(next)) continue;
    seen.add(next);
    reach(next, seen);
  }
  return seen;
}

it("finds the modules it checks", () => {
  for (const file of ["js/api/api.mjs", "js/redis/driver.mjs", "js/redis/wasm-store.mjs", "js/stores/postgres.cjs", "js/cli/cli.mjs"]) {
    assert.ok(all.includes(file), file);
  }
});

it("errors, defaults, symbols, the call table and the diagnostics channels import nothing of the project's", () => {
  for (const leaf of ["js/api/errors.mjs", "js/api/defaults.mjs", "js/api/symbols.mjs", "js/api/calls.mjs", "js/api/diagnostics.mjs"]) {
    assert.deepEqual(graph.get(leaf), [], leaf);
  }
});

it("the stores' argument checks import only errors and defaults", () => {
  assert.deepEqual(graph.get("js/api/checks.mjs").sort(), ["js/api/defaults.mjs", "js/api/errors.mjs"]);
});

it("defines MAX_MS, checkPermits, checkKind and typeName once, in js/api", () => {
  const found = all.flatMap((file) =>
    [...readFileSync(join(root, file), "utf8").matchAll(/\b(?:const|function) (MAX_MS|checkPermits|checkKind|typeName)\b/g)].map((m) => `${m[1]} in ${file}`),
  );
  assert.deepEqual(found.sort(), [
    "MAX_MS in js/api/defaults.mjs",
    "checkKind in js/api/checks.mjs",
    "checkPermits in js/api/checks.mjs",
    "typeName in js/api/errors.mjs",
  ]);
});

it("the Redis driver, its sockets and the WebAssembly store never reach the API", () => {
  for (const file of all.filter((f) => f.startsWith("js/redis/"))) {
    assert.ok(!reach(file).has("js/api/api.mjs"), `${file} reaches js/api/api.mjs`);
  }
});

it("the API never imports a store, the driver or the CLI", () => {
  for (const file of reach("js/api/api.mjs")) {
    assert.ok(!/^js\/(stores|redis|cli)\//.test(file), `js/api/api.mjs reaches ${file}`);
  }
});

it("every relative import names a file that exists", () => {
  for (const [file, imports] of graph) {
    for (const target of imports)
      assert.ok(all.includes(target) || /\/(gen|native|wasm)\//.test(target) || target.endsWith(".json"), `${file} imports ${target}, which is not there`);
  }
});

/** docs/ARCHITECTURE.md's folder table: each row's folder and the names and globs its "what" column has in backticks. */
function folderTable() {
  const text = readFileSync(join(root, "docs/ARCHITECTURE.md"), "utf8");
  const start = text.indexOf("\n## Folders\n");
  const section = text.slice(start, text.indexOf("\n## ", start + 1));
  return [...section.matchAll(/^\| `([^`]+)` \| (.*) \|$/gm)].map(([, folder, what]) => ({ folder, names: [...what.matchAll(/`([^`]+)`/g)].map((m) => m[1]) }));
}

/** Whether `name` (a file name, a path below the row's folder, or a glob of either with `*`) names `path`. */
function names(name, path) {
  const pattern = new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", "[^/]*")}$`);
  return pattern.test(path) || pattern.test(path.split("/").pop());
}

it("every file under js/ is in docs/ARCHITECTURE.md's folder table, by name or by a glob the table states", () => {
  const rows = folderTable().filter((row) => row.folder.startsWith("js/"));
  assert.ok(rows.length >= 5, "the table has its js/ rows");
  /** Every file below `dir`, build outputs (js/gen, js/native, js/wasm, the .d.cts copies) aside. */
  const files = (dir) =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return ["js/gen", "js/native", "js/wasm"].includes(path) ? [] : files(path);
      return path.endsWith(".d.cts") ? [] : [path];
    });
  const missing = files("js").filter((file) => {
    // The row of the file's nearest folder.
    const row = rows.filter((r) => file.startsWith(r.folder)).sort((a, b) => b.folder.length - a.folder.length)[0];
    return !row?.names.some((name) => names(name, file.slice(row.folder.length)));
  });
  assert.deepEqual(missing, [], "files the folder table does not name: add them to their folder's row");
});
