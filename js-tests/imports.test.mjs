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

/** A module's text without its comments (a `//` after a `:` is a URL's, kept). */
function code(file) {
  return readFileSync(join(root, file), "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/(^|[^:\\])\/\/.*$/gm, "$1");
}

/** The names a module exports: its `export class|function|const X` and its `export { … }` lists. */
function exportsOf(file) {
  const text = code(file);
  const declared = [...text.matchAll(/^export (?:class|function|const|let) (\w+)/gm)].map((m) => m[1]);
  const listed = [...text.matchAll(/^export \{([^}]*)\}/gm)].flatMap((m) =>
    m[1].split(",").map((n) =>
      n
        .trim()
        .split(/\s+as\s+/)
        .pop(),
    ),
  );
  return [...declared, ...listed].filter(Boolean);
}

/** What a module takes and from where: each name it imports or requires, with the specifier it names. */
function takenBy(file) {
  const text = code(file);
  const taken = [];
  // "a", "b as c", "b: c" and "...rest" each name what is taken: a, b, b, rest.
  const names = (list) => [...list.matchAll(/(?:^|,)\s*(?:\.\.\.)?(\w+)/g)].map((m) => m[1]);
  // import { a, b as c } from "x" · const { a, b: c } = require("x") · const { a } = await import("x")
  for (const m of text.matchAll(/\bimport\s*\{([^}]*)\}\s*from\s*["']([^"']+)["']/g)) for (const n of names(m[1])) taken.push({ name: n, spec: m[2] });
  for (const m of text.matchAll(/\{([^}]*)\}\s*=\s*(?:require|await\s+import)\s*\(\s*["']([^"']+)["']\s*\)/g))
    for (const n of names(m[1])) taken.push({ name: n, spec: m[2] });
  // import * as ns from "x", import ns from "x", const ns = require("x"): every `ns.name` it reads.
  const namespaces = [
    ...text.matchAll(/\bimport\s+(?:\*\s+as\s+)?(\w+)\s+from\s*["']([^"']+)["']/g),
    ...text.matchAll(/\b(?:const|let|var)\s+(\w+)\s*=\s*(?:require|await\s+import)\s*\(\s*["']([^"']+)["']\s*\)/g),
  ];
  for (const [, ns, spec] of namespaces) for (const m of text.matchAll(new RegExp(`\\b${ns}\\.(\\w+)`, "g"))) taken.push({ name: m[1], spec });
  return taken;
}

/** Every module specifier a module names: static and dynamic imports, re-exports, requires. */
function specifiersOf(file) {
  return [...code(file).matchAll(/(?:\bfrom|\bimport|\brequire)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]);
}

it("every module takes the errors and the shared checks one way per module format, never by the package's name", () => {
  const errors = exportsOf("js/api/errors.mjs");
  const checks = exportsOf("js/api/checks.mjs");
  assert.ok(errors.includes("LockStoreError") && errors.includes("invalid") && checks.includes("checkKind"), "finds what errors.mjs and checks.mjs export");
  const wrong = [];
  for (const file of all) {
    for (const spec of specifiersOf(file)) {
      if (/^locksmith-js(\/|$)/.test(spec)) wrong.push(`${file} imports "${spec}"`);
    }
    for (const { name, spec } of takenBy(file)) {
      const home = errors.includes(name) ? "js/api/errors.mjs" : checks.includes(name) ? "js/api/checks.mjs" : undefined;
      if (home === undefined || /^locksmith-js(\/|$)/.test(spec)) continue;
      const from = spec.startsWith(".") ? normalize(join(dirname(file), spec)) : spec;
      // ES modules: from the file itself, by a relative path; CommonJS: from the CommonJS API.
      const want = file.endsWith(".cjs") ? "js/gen/api.cjs" : home;
      if (from !== want) wrong.push(`${file} takes ${name} from "${spec}", not from ${want}`);
    }
  }
  assert.deepEqual(wrong, []);
});

it("no module in js/api, js/cli or js/stores is over 750 lines (split along a seam, not squeezed)", () => {
  const long = all
    .filter((file) => /^js\/(api|cli|stores)\//.test(file))
    .map((file) => [file, readFileSync(join(root, file), "utf8").split("\n").length - 1])
    .filter(([, lines]) => lines > 750);
  assert.deepEqual(long, [], "modules over 750 lines");
});
