// The documentation runs. Every ```js / ```ts block of README.md and docs/*.md is
// extracted and run as its own Node process, importing the package by its name
// (`locksmith-js` resolves to this repository through its exports map, by
// self-reference). A block opts out with `no-run` in its info string (```js no-run),
// for what cannot run here: a wrangler-bundled Durable Object, a fragment of a larger
// object. A block marked `native` (```js native: FileLockStore) runs in the native pass
// only, as the WebAssembly build refuses what it shows. The samples get only what a reader would supply themselves:
//
//   - REDIS_URL: a redis-server of the tests' own (one database per sample);
//   - DATABASE_URL: a PostgreSQL of the tests' own (one database per sample);
//   - MYSQL_URL: a MariaDB of the tests' own (one database per sample), started only
//     when a sample names it;
//   - stubs of the app's own functions (charge, rebuild, processBatch, ...), set on
//     globalThis before the sample loads (see PRELUDE), so a sample's own declaration
//     of the same name simply shadows them.
//
// A sample fails when it does not parse, throws, rejects, exits non-zero or does not
// exit by itself within SAMPLE_TIMEOUT_MS (a client left open keeps Node alive). A
// module whose default export has a `fetch` (a Worker) is also called once, with a
// request and an `env` holding REDIS_URL. `ts` blocks are stripped of their types with
// esbuild first.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { transformSync } from "esbuild";
import pg from "pg";

import { mysqlMissing, startMysql } from "./support/mysql-server.mjs";
import { postgresMissing, startPostgres } from "./support/postgres-server.mjs";
import { startRedis } from "./support/redis-server.mjs";
import { TARGET } from "./support/target.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const SAMPLE_TIMEOUT_MS = 20_000;
const CONCURRENCY = 4;
const LANGS = new Map([
  ["js", "js"],
  ["javascript", "js"],
  ["mjs", "js"],
  ["ts", "ts"],
  ["typescript", "ts"],
]);
const NO_RUN = "no-run";
const REPOSITORY = "https://github.com/locksmith-rs/locksmith";

/**
 * The fenced code blocks of a Markdown text: `{ line, lang, info, code, run }`, `line`
 * being the fence's 1-based line. Fences may be indented (inside a list item); the
 * indent is taken off the block's lines.
 */
export function codeBlocks(markdown) {
  const lines = markdown.split("\n");
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( {0,3})(`{3,}|~{3,})\s*([^\s`]*)\s*([^`]*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, word, rest] = open;
    const body = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}\\s*$`);
      if (close.test(lines[j])) break;
      body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j].trimStart());
    }
    const info = `${word} ${rest}`.trim();
    blocks.push({
      line: i + 1,
      lang: word.toLowerCase(),
      info,
      code: body.join("\n") + "\n",
      run: LANGS.has(word.toLowerCase()) && !rest.split(/\s+/).includes(NO_RUN),
      native: rest.split(/\s+/).includes("native"),
    });
    i = j;
  }
  return blocks;
}

/** README.md and docs/*.md, with their paths relative to the repository. */
function docFiles() {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`);
  return ["README.md", ...docs].map((path) => ({ path, text: readFileSync(join(ROOT, path), "utf8") }));
}

// The app's own functions and data, as a reader's app would have them. Each records
// what it was asked, so a sample can print or assert it.
const PRELUDE = `
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const calls = (globalThis.appCalls = []);
const app = (name, ms = 5, result = name + ": done") => async (...args) => {
  calls.push([name, ...args]);
  await sleep(ms);
  return result;
};
Object.assign(globalThis, {
  sleep,
  invoice: { id: 42, amountCents: 1999 },
  charge: app("charge", 20, { receipt: "r-42" }),
  rebuild: app("rebuild"),
  exportReport: app("exportReport"),
  render: app("render"),
  edit: app("edit"),
  sendReminder: app("sendReminder"),
  runMigration: app("runMigration"),
  processBatch: app("processBatch"),
  batches: [1, 2, 3],
  // A job queue between two workers of the same app.
  queue: {
    jobs: [],
    async dispatch(job) { this.jobs.push(JSON.parse(JSON.stringify(job))); },
    async next() { return this.jobs.shift(); },
  },
});
`;

// Loads a sample and, if it is a Worker module, calls its fetch once.
const RUNNER = `
const mod = await import(new URL(process.argv[2], "file://").href);
const worker = mod.default;
if (worker && typeof worker.fetch === "function") {
  const env = { REDIS_URL: process.env.REDIS_URL };
  const response = await worker.fetch(new Request("http://localhost/"), env, { waitUntil() {}, passThroughOnException() {} });
  console.log("fetch:", response.status, await response.text());
}
`;

let dir;
let seq = 0;

async function scratch() {
  dir ??= await mkdtemp(join(ROOT, "js-tests", ".docs-samples-"));
  await writeFile(join(dir, "prelude.mjs"), PRELUDE);
  await writeFile(join(dir, "runner.mjs"), RUNNER);
}

/**
 * Runs one sample: resolves with `{ code, signal, timedOut, output }`. `env` is added
 * to the child's environment.
 */
async function runSample({ code, lang }, { env = {}, timeoutMs = SAMPLE_TIMEOUT_MS, name = "sample" } = {}) {
  const source = lang === "ts" ? transformSync(code, { loader: "ts", format: "esm", target: "node20" }).code : code;
  const file = join(dir, `${name.replace(/[^a-z0-9]+/gi, "-")}-${seq++}.mjs`);
  await writeFile(file, source);
  const child = spawn(process.execPath, ["--import", join(dir, "prelude.mjs"), join(dir, "runner.mjs"), file], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...(TARGET === "wasm" ? { LOCKSMITH_FORCE_WASM: "1" } : {}),
      NODE_TEST_CONTEXT: undefined, // a sample that uses node:test reports on its own
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, timeoutMs);
  const [exitCode, signal] = await new Promise((resolve) => child.on("close", (c, s) => resolve([c, s])));
  clearTimeout(timer);
  return { code: exitCode, signal, timedOut, output, file };
}

function assertPassed(result, where) {
  const why = result.timedOut
    ? `did not exit within ${SAMPLE_TIMEOUT_MS} ms (something keeps Node alive: a client left open?)`
    : `exited with ${result.signal ?? result.code}`;
  assert.ok(!result.timedOut && result.code === 0, `${where} ${why}\n--- sample (${relative(ROOT, result.file)}) output ---\n${result.output}`);
}

describe("the runner itself", { concurrency: CONCURRENCY }, () => {
  before(scratch);

  it("extracts js and ts blocks, indented ones too, and skips no-run blocks and other languages", () => {
    const md = [
      "# t",
      "```js",
      "console.log(1);",
      "```",
      "- a list item:",
      "  ```ts",
      "  const n: number = 2;",
      "  ```",
      "```js no-run",
      "export default {};",
      "```",
      "```sh",
      "npm test",
      "```",
    ].join("\n");
    const blocks = codeBlocks(md);
    assert.deepEqual(
      blocks.map((b) => [b.line, b.lang, b.run, b.code]),
      [
        [2, "js", true, "console.log(1);\n"],
        [6, "ts", true, "const n: number = 2;\n"],
        [9, "js", false, "export default {};\n"],
        [12, "sh", false, "npm test\n"],
      ],
    );
  });

  it("passes a sample that runs and exits", async () => {
    const result = await runSample({
      lang: "js",
      code: 'import { lock } from "locksmith-js";\nconst [ran] = await lock("k").run(() => charge(invoice));\nif (!ran) throw new Error("not run");\n',
    });
    assertPassed(result, "the good sample");
  });

  it("strips a ts sample's types", async () => {
    const result = await runSample({
      lang: "ts",
      code: 'import { lock, type Lock } from "locksmith-js";\nconst l: Lock = lock("k");\nconsole.log(await l.acquire());\n',
    });
    assertPassed(result, "the ts sample");
    assert.match(result.output, /true/);
  });

  // The kinds of breakage the docs once had: each must fail the build.
  const broken = {
    "a top-level return": 'import { lock } from "locksmith-js";\nconst [ran] = await lock("k").run(() => 1);\nif (!ran) return;\n',
    "a missing import": 'const [ran] = await lock("k").run(() => 1);\n',
    "a const declared twice": 'import { lock } from "locksmith-js";\nconst l = lock("a");\nconst l = lock("b");\n',
    "a rejection": 'import { lock } from "locksmith-js";\nawait lock("k", 10).run(() => { throw new Error("boom"); });\n',
    "an unknown subpath": 'import { nothing } from "locksmith-js/nothing";\n',
  };
  for (const [what, code] of Object.entries(broken)) {
    it(`fails a sample with ${what}`, async () => {
      const result = await runSample({ lang: "js", code }, { name: "broken" });
      assert.equal(result.timedOut, false);
      assert.notEqual(result.code, 0, `expected a failure, got exit 0:\n${result.output}`);
    });
  }

  // docs/testing.md's samples test a user's code: each must fail once that code has the
  // bug the sample is about. Each mutation names a text of the sample and what replaces it.
  const mutants = {
    "a job that ignores its lost lock": ["if (l.signal.aborted) return { stopped: true, done };", ""],
    "a wait that gives up early": ['l.acquire({ timeout: "5s" })', 'l.acquire({ timeout: "4s" })'],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the sample's own template literal
    "two workers on two keys": ["lock(`charge:${order.id}`", "lock(`charge:${order.id}:${Math.random()}`"],
    "a wait shorter than the outage": ['l.acquire({ timeout: "30s" })', 'l.acquire({ timeout: "1500ms" })'],
    "a hold left held": ['lock("report", "30s", store).run(async () => {', 'lock("report", "30s", store).acquire().then(async () => {'],
  };
  for (const [what, [from, to]] of Object.entries(mutants)) {
    it(`fails docs/testing.md's sample on ${what}`, async () => {
      const samples = codeBlocks(readFileSync(join(ROOT, "docs/testing.md"), "utf8")).filter((b) => b.run && b.code.includes(from));
      assert.equal(samples.length, 1, `one sample of docs/testing.md holds ${JSON.stringify(from)}`);
      const result = await runSample({ lang: samples[0].lang, code: samples[0].code.replace(from, to) }, { name: "mutant" });
      assert.equal(result.timedOut, false, `the mutant hung:\n${result.output}`);
      assert.notEqual(result.code, 0, `the mutant passed:\n${result.output}`);
      // It fails by the sample's own checks (an assertion, the kit's HOLDS_REMAIN, the
      // outage's error reaching the test), not by a crash of the sample.
      assert.match(result.output, /AssertionError|HOLDS_REMAIN|STORE_UNAVAILABLE/, result.output);
    });
  }

  it("fails a sample that never exits (a client left open)", async () => {
    const result = await runSample({ lang: "js", code: "setInterval(() => {}, 1_000);\n" }, { timeoutMs: 1_500, name: "hangs" });
    assert.equal(result.timedOut, true);
  });
});

/** The anchors GitHub gives a Markdown file's headings (outside code blocks). */
export function anchors(markdown) {
  const seen = new Map();
  const out = new Set();
  let fence = null;
  for (const line of markdown.split("\n")) {
    const f = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (fence === null) fence = f[1][0];
      else if (f[1][0] === fence) fence = null;
      continue;
    }
    const h = fence === null && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = h[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe("links", () => {
  // The README is the npm page too: there a relative link only works for a file the
  // tarball has. Links to the rest of the repository are absolute.
  const files = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).files;
  const inTarball = (path) =>
    path === "package.json" ||
    path === "README.md" ||
    path === "LICENSE" ||
    files.some((glob) => new RegExp(`^${glob.replace(/\./g, "\\.").replace(/\*/g, "[^/]*")}$`).test(path));

  for (const { path, text } of docFiles()) {
    it(`${path}: every link to the repository resolves`, () => {
      const problems = [];
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (target.startsWith("#")) {
          if (!anchors(text).has(target.slice(1))) problems.push(`${target}: no such heading in ${path}`);
          continue;
        }
        if (/^(https?:|mailto:)/.test(target) && !target.startsWith(`${REPOSITORY}/`)) continue;
        let file;
        if (target.startsWith(`${REPOSITORY}/`)) {
          const m = /^\/(?:blob|tree)\/main\/([^#?]+)/.exec(target.slice(REPOSITORY.length));
          if (!m) {
            if (!/^\/(issues|pulls|releases)/.test(target.slice(REPOSITORY.length)) && target !== `${REPOSITORY}#readme`)
              problems.push(`${target}: not a /blob/main/ link`);
            continue;
          }
          file = m[1];
        } else {
          file = join(dirname(path), target.split("#")[0]).replace(/\\/g, "/");
          if (path === "README.md" && !inTarball(file))
            problems.push(`${target}: relative, but ${file} is not in the npm tarball (link to ${REPOSITORY}/blob/main/${file})`);
        }
        if (!existsSync(join(ROOT, file))) {
          problems.push(`${target}: ${file} does not exist`);
          continue;
        }
        const anchor = target.split("#")[1];
        if (anchor && file.endsWith(".md") && !anchors(readFileSync(join(ROOT, file), "utf8")).has(anchor)) {
          problems.push(`${target}: ${file} has no heading #${anchor}`);
        }
      }
      assert.deepEqual(problems, []);
    });
  }
});

describe("documentation samples", { concurrency: CONCURRENCY }, () => {
  let redis;
  let postgres;
  let redisDb = 0;
  const pgMissing = postgresMissing();
  const myMissing = mysqlMissing();
  // The MariaDB, started by the first sample that needs it.
  let mysql;

  before(async () => {
    await scratch();
    redis = await startRedis(["--databases", "512"]);
    if (!(await pgMissing)) postgres = await startPostgres();
  });

  after(async () => {
    await redis?.stop();
    await postgres?.dispose();
    await (await mysql?.catch(() => undefined))?.dispose();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A database of its own on the tests' MariaDB, as a URL. */
  async function freshMysqlDatabase(name) {
    mysql ??= startMysql();
    const server = await mysql;
    const { default: mysql2 } = await import("mysql2/promise");
    const admin = await mysql2.createConnection(server.url);
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    return server.url.replace(/\/locksmith$/, `/${name}`);
  }

  /** A database of its own on the tests' PostgreSQL, as a URL. */
  async function freshDatabase(name) {
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    return postgres.url.replace(/\/postgres$/, `/${name}`);
  }

  for (const { path, text } of docFiles()) {
    const blocks = codeBlocks(text).filter((b) => LANGS.has(b.lang));
    for (const block of blocks) {
      const where = `${path}:${block.line}`;
      if (!block.run) {
        it(`${where} (${block.info}: not run)`, { skip: "marked no-run" }, () => {});
        continue;
      }
      if (block.native && TARGET !== "native") {
        it(`${where} (${block.info}: the native addon's)`, { skip: "run by the native pass" }, () => {});
        continue;
      }
      const needsPostgres = block.code.includes("DATABASE_URL");
      const needsMysql = block.code.includes("MYSQL_URL");
      it(where, async (t) => {
        const env = { REDIS_URL: `${redis.url}/${++redisDb}` };
        const sample = redisDb;
        if (needsPostgres) {
          const missing = await pgMissing;
          if (missing) {
            if (process.env.CI === "true") assert.fail(`${missing} (CI=true: a missing prerequisite fails the run)`);
            t.skip(missing);
            return;
          }
          env.DATABASE_URL = await freshDatabase(`sample_${redisDb}`);
        }
        if (needsMysql) {
          const missing = await myMissing;
          if (missing) {
            if (process.env.CI === "true") assert.fail(`${missing} (CI=true: a missing prerequisite fails the run)`);
            t.skip(missing);
            return;
          }
          env.MYSQL_URL = await freshMysqlDatabase(`sample_${sample}`);
        }
        const result = await runSample({ ...block, lang: LANGS.get(block.lang) }, { env, name: path });
        assertPassed(result, where);
        // DOCS_SAMPLES_OUTPUT=1 shows what each sample printed.
        if (process.env.DOCS_SAMPLES_OUTPUT) t.diagnostic(result.output.trim());
      });
    }
  }
});
