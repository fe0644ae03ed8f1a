#!/usr/bin/env bash
# Install the Debian packages the build, tests and benchmarks need (as root,
# or through sudo). Does nothing when they are all present.
set -euo pipefail
# spin: the model check of the lock slow path (tests/model/).
# libc6-dev-arm64-cross: the aarch64 cross build links (crt files, libc).
# man-db, groff-base: the man page check; netcat-openbsd: examples/README.
# The aarch64 tests under qemu (scripts/test-aarch64.sh): qemu-user, the
# cross C++ compiler, and the arm64 libraries the tests load, installed
# the Debian multiarch way (architecture arm64 added below).
# valgrind: its headers (client requests) and the tests/valgrind runs.
pkgs=(build-essential cmake pkg-config libck-dev liburcu-dev libjemalloc-dev
      libmimalloc-dev libbenchmark-dev gnuplot-nox gcc-aarch64-linux-gnu spin
      libc6-dev-arm64-cross man-db groff-base netcat-openbsd stress-ng valgrind
      g++-aarch64-linux-gnu qemu-user libc6:arm64 libstdc++6:arm64 liburcu-dev:arm64)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "deps: installing ${missing[*]}" >&2
dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
$SUDO apt-get update -qq
# --no-remove: an arm64 library must never replace a package of the build
# machine; apt stops instead.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends --no-remove \
  "${missing[@]}" >/dev/null
