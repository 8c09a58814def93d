#!/usr/bin/env bash
# The cross builds this machine can make, and their smoke tests: linux-x64-musl (musl
# target + musl-tools) and linux-arm64-gnu (gcc-aarch64-linux-gnu), the latter run under
# qemu-user with an arm64 Node. darwin-*, win32-x64-msvc and linux-arm64-musl are built
# and tested by the release workflow on their own runners.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --cross
[ -f js/gen/api.cjs ] || node scripts/build.mjs
node scripts/build-cross.mjs x86_64-unknown-linux-musl
node scripts/build-cross.mjs aarch64-unknown-linux-gnu
LOCKSMITH_CROSS=linux-arm64-gnu,linux-x64-musl node --test --test-reporter=spec js-tests/cross.test.mjs
