#!/usr/bin/env bash
# Installs what a fresh machine lacks for building and testing locksmith. Safe to run
# again: each step checks first. Flags: --redis also installs redis-server;
# --native-only skips what only the WebAssembly build needs.
set -euo pipefail
cd "$(dirname "$0")/.."

want_redis=0
want_wasm=1
for arg in "$@"; do
  case "$arg" in
    --redis) want_redis=1 ;;
    --native-only) want_wasm=0 ;;
    *) echo "setup.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

command -v cargo >/dev/null || { echo "setup: cargo is missing; install Rust with rustup" >&2; exit 1; }
command -v node >/dev/null || { echo "setup: node (>= 20.17) is missing" >&2; exit 1; }

# The toolchain and wasm32 target pinned in rust-toolchain.toml (rustup installs on demand).
if ! rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen-cli, at exactly the version of the wasm-bindgen crate in Cargo.lock.
wb_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
if [ "$want_wasm" = 1 ] && [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$wb_version" ]; then
  say "installing wasm-bindgen-cli $wb_version (a few minutes, once)"
  # Not --locked: its lockfile pins a webpki-roots version the registry no longer has.
  cargo install wasm-bindgen-cli --version "$wb_version" --quiet
fi

# npm packages, when package-lock.json is newer than what is installed.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages"
  npm ci --no-audit --no-fund --loglevel=error
fi

if [ "$want_redis" = 1 ] && [ -z "${REDIS_SERVER:-}" ] && ! command -v redis-server >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    say "installing redis-server (apt)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "setup: redis-server is missing. Install it (apt-get install redis-server, brew install redis)," >&2
    echo "       or point REDIS_SERVER at a redis-server binary." >&2
    exit 1
  fi
fi
