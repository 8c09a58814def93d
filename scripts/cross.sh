#!/usr/bin/env bash
# Every cross build this machine can make (package.json's napi.targets less the host's own
# and the MSVC one, which needs Windows), one at a time, and their checks
# (js-tests/cross.test.mjs): linux-arm64-gnu under qemu-user; the musl builds link musl
# alone; the macOS builds read with llvm tools; win32-x64-gnu run for real in Node for
# Windows under Wine (the lock essentials, the memory stores' conformance suite, a Redis
# lock); win32-arm64-gnullvm read with llvm tools; every platform package packed.
# `npm run test:cross`; .ci/run runs it after npm test. `--build-only` (npm run
# build:cross) stops after the builds.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "setup (--cross-all)"
bash scripts/setup.sh --native-only --redis --cross-all
[ -f js/gen/api.cjs ] && [ -f js/wasm/locksmith_wasm_bg.wasm ] || node scripts/build.mjs

targets=$(node --input-type=module -e '
  import { linkerOf } from "./scripts/cross-tools.mjs";
  import { readFileSync } from "node:fs";
  for (const t of JSON.parse(readFileSync("package.json", "utf8")).napi.targets) if (linkerOf(t) && !linkerOf(t).native) console.log(t);')
for target in $targets; do
  step "build $target"
  start=$SECONDS
  node scripts/build-cross.mjs "$target"
  echo "cross: $target built in $((SECONDS - start)) s"
done

[ "${1:-}" = --build-only ] && exit 0

step "checks"
checks=$(node -e '
  const { tripleOf } = require("./js/native-loader.cjs");
  console.log([...process.argv.slice(1).map(tripleOf), "packages"].join(","));' $targets)
LOCKSMITH_CROSS=$checks node --test --test-reporter=spec js-tests/cross.test.mjs
