// `npm run test:unit`: the JS suites that need no server (no Redis, PostgreSQL, MariaDB,
// etcd or workerd), against the package as it is built, in both builds (the native addon,
// then WebAssembly). About a minute on two cores; `npm test` runs everything.
// Build first if Rust or js/api changed: `npm run build`.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

// Each of these runs on the built-in stores, JS stores in the test process, or child
// Node processes: nothing to install or start.
export const UNIT_SUITES = [
  "js-tests/api.test.mjs",
  "js-tests/arity.test.mjs",
  "js-tests/bench-exclusion.test.mjs",
  "js-tests/call-ids.test.mjs",
  "js-tests/defaults.test.mjs",
  "js-tests/durations.test.mjs",
  "js-tests/imports.test.mjs",
  "js-tests/lock-all.test.mjs",
  "js-tests/native-loader.test.mjs",
  "js-tests/options.test.mjs",
  "js-tests/random-source.test.mjs",
  "js-tests/store-messages.test.mjs",
  "js-tests/timeout-infinity.test.mjs",
  "js-tests/waiters.test.mjs",
  "js-tests/warnings.test.mjs",
  "js-tests/workflows.test.mjs",
  "js-tests/conformance/conformance-database.test.mjs",
  "js-tests/conformance/conformance-memory.test.mjs",
  "js-tests/conformance/store-contract.test.mjs",
];

let failed = false;
for (const target of ["native", "wasm"]) {
  console.log(`\n== unit suites (${target})`);
  const run = spawnSync(process.execPath, ["--test", "--test-concurrency=2", ...UNIT_SUITES], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, LOCKSMITH_TARGET: target },
  });
  if (run.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
