// The test kit (locksmith-js/testing) under the test runners applications use: node:test,
// Vitest and Jest, each run as a child process on a file of js-tests/runners/ written as
// an application's test would be (the package by its name; ES modules for node:test and
// Vitest, CommonJS for Jest), in the build LOCKSMITH_TARGET names. Each runner must exit 0
// with the expected number of tests passed. The three run at once.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, test } from "node:test";

const root = fileURLToPath(new URL("..", import.meta.url));
const target = process.env.LOCKSMITH_TARGET ?? "native";
// In CI a runner that is not installed fails its test; elsewhere it is skipped.
const ci = !["", "0", "false"].includes(process.env.CI ?? "");

const KILL_AFTER_MS = 30_000;

const out = mkdtempSync(join(tmpdir(), "locksmith-runners-"));
after(() => rmSync(out, { recursive: true, force: true }));

/** Runs `node script ...args` in the repository; resolves to its exit and its output. */
function run(script, args) {
  const env = { ...process.env, LOCKSMITH_TARGET: target, NO_COLOR: "1" };
  // A child of `node --test` would otherwise report to this process as a subtest.
  delete env.NODE_TEST_CONTEXT;
  delete env.FORCE_COLOR;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...(script ? [script] : []), ...args], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    // A runner that does not exit (a lock left waiting on a test clock can keep it up) is
    // stopped, and its test fails.
    const timer = setTimeout(() => child.kill("SIGKILL"), KILL_AFTER_MS);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

/** Counts from a Jest-style JSON report (Jest's `--json`, Vitest's `json` reporter). */
function jsonCounts(file) {
  const report = JSON.parse(readFileSync(file, "utf8"));
  return {
    files: report.testResults.map((result) => basename(result.name)),
    passed: report.numPassedTests,
    failed: report.numFailedTests,
    skipped: report.numPendingTests + report.numTodoTests,
  };
}

/** Counts from node:test's TAP summary. */
function tapCounts(tap) {
  const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, "m").exec(tap)?.[1] ?? Number.NaN);
  return { files: ["kit.node.mjs"], passed: count("pass"), failed: count("fail") + count("cancelled"), skipped: count("skipped") + count("todo") };
}

const runners = [
  {
    name: "node:test",
    bin: null,
    args: ["--test", "--test-reporter=tap", "js-tests/runners/kit.node.mjs"],
    counts: ({ output }) => tapCounts(output),
    expected: { files: ["kit.node.mjs"], passed: 6, failed: 0, skipped: 0 },
  },
  {
    name: "Vitest",
    bin: "node_modules/.bin/vitest",
    args: ["run", "--config", "js-tests/runners/vitest.config.mjs", "--reporter=default", "--reporter=json", `--outputFile.json=${join(out, "vitest.json")}`],
    counts: () => jsonCounts(join(out, "vitest.json")),
    // Two projects (vitest.config.mjs): the package as installed, and as linked.
    expected: { files: ["kit.vitest.mjs", "kit.vitest.mjs"], passed: 16, failed: 0, skipped: 0 },
  },
  {
    name: "Jest",
    bin: "node_modules/.bin/jest",
    args: ["--config", "js-tests/runners/jest.config.cjs", "--ci", "--json", `--outputFile=${join(out, "jest.json")}`],
    counts: () => jsonCounts(join(out, "jest.json")),
    expected: { files: ["kit.jest.cjs"], passed: 8, failed: 0, skipped: 0 },
  },
];

for (const runner of runners) {
  const missing = runner.bin !== null && !existsSync(join(root, runner.bin));
  // Started now, so that the three run at once.
  const result = missing ? null : run(runner.bin && join(root, runner.bin), runner.args);
  // Awaited by the test below; a failure to start is its failure, not an unhandled one.
  result?.catch(() => {});
  const skip = missing && !ci && `${runner.bin} is not installed (npm install)`;
  test(`the test kit under ${runner.name} (${target})`, { skip }, async () => {
    assert.ok(!missing, `${runner.bin} is not installed (npm install)`);
    const { code, signal, output } = await result;
    const tail = output.slice(-6_000);
    assert.equal(signal, null, `${runner.name} did not exit within ${KILL_AFTER_MS / 1000} s:\n${tail}`);
    assert.equal(code, 0, `${runner.name} exited with ${code}:\n${tail}`);
    assert.deepEqual(runner.counts({ output }), runner.expected, `${runner.name}'s counts:\n${tail}`);
  });
}
