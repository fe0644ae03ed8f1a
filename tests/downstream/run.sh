#!/usr/bin/env bash
# Install the build tree into a scratch prefix, then build a tiny program
# against it twice: with find_package(rqspin) and with pkg-config.
set -euo pipefail
build=$1 work=$2
src=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/share/rqspin/tsan-liburcu.supp" || { echo "no tsan-liburcu.supp installed"; exit 1; }
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/downstream"
"$work/cmake-build/downstream_static"
libdir=$(dirname "$(find "$work/prefix" -name rqspin.pc)")
PKG_CONFIG_PATH=$libdir cc -std=c11 "$src/main.c" -o "$work/pc-downstream" \
  $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs rqspin) -Wl,-rpath,"$(dirname "$libdir")"
"$work/pc-downstream"
echo "downstream: find_package (shared, static) and pkg-config builds run"
