#!/usr/bin/env bash
# Build examples/ as a project of its own against an installed librqspin
# (find_package(rqspin)) and run its smoke tests there.
# Usage: run.sh <build dir> <scratch dir>          (installs the build first)
#        run.sh --prefix <installed prefix> <scratch dir>
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
examples=$(cd "$(dirname "$0")/../../examples" && pwd)
# A copy, so that nothing of the source tree around examples/ is reachable.
cp -r "$examples" "$work/examples"
cmake -S "$work/examples" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/build" -j2 >/dev/null
ctest --test-dir "$work/build" --output-on-failure >"$work/ctest.log" 2>&1 ||
  { cat "$work/ctest.log"; exit 1; }
grep -E "tests passed" "$work/ctest.log"
echo "examples: built out of the tree against $prefix; smoke tests pass"
