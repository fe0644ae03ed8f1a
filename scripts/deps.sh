#!/usr/bin/env bash
# Install the Debian packages the build, tests and benchmarks need (as root,
# or through sudo). Does nothing when they are all present.
set -euo pipefail
# spin: the model check of the lock slow path (tests/model/).
# libc6-dev-arm64-cross: the aarch64 cross build links (crt files, libc).
# man-db, groff-base: the man page check; netcat-openbsd: examples/README.
# valgrind: its headers (client requests) and the tests/valgrind runs.
pkgs=(build-essential cmake pkg-config libck-dev liburcu-dev libjemalloc-dev
      libmimalloc-dev libbenchmark-dev gnuplot-nox gcc-aarch64-linux-gnu spin
      libc6-dev-arm64-cross man-db groff-base netcat-openbsd stress-ng valgrind)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
