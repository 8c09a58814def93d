#!/usr/bin/env bash
# The whole test run, the same locally and in CI: lint, Rust tests, the wasm32 build of
# core, the addon build, and the JS suites.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "setup"
bash scripts/setup.sh --redis

step "rustfmt"
cargo fmt --all --check

step "clippy"
# The addon's napi registrations are compiled out under cfg(test), so it is linted as a library only.
cargo clippy --workspace --all-targets --exclude locksmith-node --quiet -- -D warnings
cargo clippy -p locksmith-node --quiet -- -D warnings
cargo clippy -p locksmith-wasm --target wasm32-unknown-unknown --quiet -- -D warnings

step "rustdoc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "core builds for wasm32 without JS or runtime dependencies"
cargo build -p locksmith-core --target wasm32-unknown-unknown --quiet
if cargo tree -p locksmith-core -e normal --prefix none | grep -E '^(tokio|napi|wasm-bindgen|js-sys) '; then
  echo "locksmith-core must not depend on the crates above" >&2
  exit 1
fi

step "cargo test"
cargo test --workspace --quiet

step "build the package"
node scripts/build.mjs

step "JS tests (native)"
node --test --test-reporter=spec --test-concurrency=2 js-tests/

step "JS tests (wasm)"
LOCKSMITH_TARGET=wasm node --test --test-reporter=spec --test-concurrency=2 js-tests/

step "types"
node_modules/.bin/tsc -p js-tests/types/tsconfig.json
