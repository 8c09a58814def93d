// A child Node process that runs a module of a test's own against the build under test,
// and whose output the test reads (warnings, exit codes).
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

import { TARGET } from "./target.mjs";

/** The build under test's ES module entry, as a URL a child's import() takes. */
export const ENTRY = new URL(TARGET === "wasm" ? "../../js/wasm.mjs" : "../../js/node.mjs", import.meta.url).href;

/**
 * Runs `source` as an ES module file (a file, not -e: a cluster primary forks its own
 * script) in a new Node process with `execArgv`, and this process's environment with `env`
 * over it, less the variables named in `unset` that `env` does not set (the parent's own
 * settings must not decide the child's). Resolves to { code, stdout, stderr } whatever
 * its exit code. A child ended by a signal (a crash, or killed after `timeoutMs`) rejects
 * (the error's `signal` says which).
 */
export async function runModule(source, { env = {}, execArgv = [], unset = [], prefix = "locksmith-child-", timeoutMs = 30_000 } = {}) {
  const environment = { ...process.env, ...env };
  for (const name of unset) {
    if (!(name in env)) delete environment[name];
  }
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const file = join(dir, "child.mjs");
  await writeFile(file, source);
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [...execArgv, file], { env: environment, timeout: timeoutMs });
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (typeof err.code !== "number") throw err;
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** How many lines of `text` match `pattern`. */
export const countLines = (text, pattern) => text.split("\n").filter((line) => pattern.test(line)).length;
