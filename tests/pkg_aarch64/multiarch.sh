#!/usr/bin/env bash
# The aarch64 toolchain file finds an arm64 liburcu installed the Debian
# multiarch way and links librqspin.so with it.
#
#   multiarch.sh <source dir> <scratch dir>           configure only, against
#       a fake multiarch tree (placeholder files in usr/lib/aarch64-linux-gnu
#       and usr/include/aarch64-linux-gnu): the library's link line must
#       name that tree's liburcu-bp.so.
#   multiarch.sh --build <source dir> <scratch dir> [<multiarch root>]
#       cross-build the library against a real arm64 liburcu (default root
#       /, i.e. liburcu-dev:arm64 installed) and check that librqspin.so
#       needs liburcu-bp.so.8.
set -euo pipefail
build=0
if [ "$1" = --build ]; then build=1; shift; fi
src=$1 work=$2
root=${3:-}
rm -rf "$work" && mkdir -p "$work"
if [ $build = 0 ]; then
  root=$work/root
  mkdir -p "$root/usr/lib/aarch64-linux-gnu" "$root/usr/include/aarch64-linux-gnu/urcu"
  : >"$root/usr/lib/aarch64-linux-gnu/liburcu-bp.so"
  : >"$root/usr/lib/aarch64-linux-gnu/liburcu-common.so"
  : >"$root/usr/include/aarch64-linux-gnu/urcu/urcu-bp.h"
fi
args=(-DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" -DRQSPIN_BUILD_TESTS=OFF
      -DRQSPIN_BUILD_BENCH=OFF -DRQSPIN_BUILD_EXAMPLES=OFF)
[ -n "$root" ] && args+=(-DRQSPIN_MULTIARCH_ROOT="$root")
cmake -S "$src" -B "$work/build" "${args[@]}" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
if [ $build = 0 ]; then
  link=$(find "$work/build/CMakeFiles/rqspin.dir" -name link.txt)
  grep -q "$root/usr/lib/aarch64-linux-gnu/liburcu-bp.so" "$link" ||
    { echo "multiarch: librqspin.so's link line lacks the arm64 liburcu-bp:"; cat "$link"; exit 1; }
  echo "multiarch: the aarch64 build links $root/usr/lib/aarch64-linux-gnu/liburcu-bp.so"
else
  cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
  readelf -h "$work/build/librqspin.so" | grep -q AArch64
  readelf -d "$work/build/librqspin.so" | grep -q 'NEEDED.*liburcu-bp\.so\.8' ||
    { echo "multiarch: the aarch64 librqspin.so does not need liburcu-bp.so.8"; exit 1; }
  echo "multiarch: the aarch64 librqspin.so links liburcu-bp.so.8"
fi
