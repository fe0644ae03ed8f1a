#!/usr/bin/env bash
# Install the build tree into a scratch prefix, then build a small program
# against it: with find_package(rqspin) (shared and static) and with
# pkg-config (shared, and static with --static). The installed CMake files
# must not name this machine's libraries by absolute path.
# Usage: run.sh <build dir> <scratch dir>
#        run.sh --prefix <installed prefix> <scratch dir>  (already installed)
set -euo pipefail
if [ "$1" = --prefix ]; then
  prefix=$2 work=$3
  rm -rf "$work" && mkdir -p "$work"
else
  build=$1 work=$2
  rm -rf "$work" && mkdir -p "$work"
  prefix=$work/prefix
  cmake --install "$build" --prefix "$prefix" >/dev/null
fi
src=$(cd "$(dirname "$0")" && pwd)
test -f "$prefix/share/rqspin/tsan-liburcu.supp" || { echo "no tsan-liburcu.supp installed"; exit 1; }
for f in design.md tsan.md CHANGELOG.md; do
  test -f "$prefix/share/doc/rqspin/$f" || { echo "downstream: no share/doc/rqspin/$f installed"; exit 1; }
done

cmakedir=$(dirname "$(find "$prefix"/lib* -maxdepth 4 -name rqspinConfig.cmake | head -1)")
if grep -nE '"/[^"]*\.(so|a)[";]|/usr/lib' "$cmakedir"/rqspinTargets*.cmake; then
  echo "downstream: the installed CMake package names libraries by absolute path"
  exit 1
fi
grep -q 'find_dependency(urcu)' "$cmakedir/rqspinConfig.cmake" ||
  { echo "downstream: rqspinConfig.cmake does not find liburcu"; exit 1; }

cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/downstream"
"$work/cmake-build/downstream_static"

libdir=$(dirname "$(find "$prefix"/lib* -maxdepth 3 -name rqspin.pc | head -1)")
export PKG_CONFIG_PATH=$libdir
pkg-config --print-requires-private rqspin | grep -q liburcu-bp ||
  { echo "downstream: rqspin.pc lacks liburcu-bp in Requires.private"; exit 1; }
cc -std=c11 "$src/main.c" -o "$work/pc-downstream" \
  $(pkg-config --cflags --libs rqspin) -Wl,-rpath,"$(dirname "$libdir")"
"$work/pc-downstream"
# Static: the archive, then what pkg-config --static adds (liburcu, pthread).
cc -std=c11 "$src/main.c" -o "$work/pc-downstream-static" $(pkg-config --cflags rqspin) \
  "$(dirname "$libdir")/librqspin.a" $(pkg-config --static --libs-only-l rqspin | sed 's/-lrqspin//')
"$work/pc-downstream-static"
# Man pages: a function's name finds its group's page in the prefix.
if command -v man >/dev/null; then
  mandir=$prefix/share/man
  for fn in rqspin_lock qspin_lock rqspin_malloc_nolock rqspin_storage_get rqspin_version \
            rqspin_lock_stats_get; do
    err=$(MANPAGER=cat LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -M "$mandir" 3 "$fn" 2>&1 >/dev/null) ||
      { echo "downstream: man $fn: $err"; exit 1; }
    [ -z "$err" ] || { echo "downstream: man $fn warns: $err"; exit 1; }
  done
fi
echo "downstream: find_package (shared, static) and pkg-config (shared, static) builds run"
