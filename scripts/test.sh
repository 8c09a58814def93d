#!/usr/bin/env bash
# The whole test run, the same locally and in CI: formatting and lint (Rust and JS), Rust tests, the wasm32 build of
# core, the addon build, and the JS suites.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "setup"
bash scripts/setup.sh --redis --postgres --etcd --mysql --runtimes --cross

step "rustfmt"
cargo fmt --all --check

step "JS format and lint (Biome, pinned in package.json; biome.json says what)"
node_modules/.bin/biome check --error-on-warnings .

step "clippy"
# The addon's napi registrations are compiled out under cfg(test), so it is linted as a library only.
cargo clippy --workspace --all-targets --exclude locksmith-node --quiet -- -D warnings
cargo clippy -p locksmith-node --quiet -- -D warnings
cargo clippy -p locksmith-wasm --target wasm32-unknown-unknown --quiet -- -D warnings
# The Redis engine (locksmith-redis) for wasm32, as the WebAssembly build's second module uses it.
cargo clippy -p locksmith-wasm-redis --target wasm32-unknown-unknown --quiet -- -D warnings

step "rustdoc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

step "core builds for wasm32 without JS or runtime dependencies"
# getrandom's JS backend is the wasm crate's choice; core builds with it switched on here.
cargo build -p locksmith-core --target wasm32-unknown-unknown --features getrandom/wasm_js --quiet
for target in "$(rustc -vV | sed -n 's/^host: //p')" wasm32-unknown-unknown; do
  if cargo tree -p locksmith-core -e normal --prefix none --target "$target" | grep -E '^(tokio|napi|napi-derive|wasm-bindgen|wasm-bindgen-futures|js-sys|web-sys) '; then
    echo "locksmith-core must not depend on the crates above (target $target)" >&2
    exit 1
  fi
done

step "cargo test"
cargo test --workspace --quiet

step "build the package"
node scripts/build.mjs

step "wasm size budget"
node scripts/wasm-size.mjs

step "JS tests (native)"
node --test --test-reporter=spec --test-concurrency=2 js-tests/

step "JS tests (wasm)"
LOCKSMITH_TARGET=wasm node --test --test-reporter=spec --test-concurrency=2 js-tests/

step "cross build: linux-arm64-gnu, smoke-tested under qemu-user (npm run test:cross builds and checks the other targets)"
node scripts/build-cross.mjs aarch64-unknown-linux-gnu
LOCKSMITH_CROSS=linux-arm64-gnu node --test --test-reporter=spec js-tests/cross.test.mjs

step "types"
node_modules/.bin/tsc -p js-tests/types/tsconfig.json
