#!/usr/bin/env bash
# The whole test suite, as CI runs it: install dependencies, then build and
# run CTest in a normal and a ThreadSanitizer build, and cross-compile the
# library for aarch64. Build trees go to ./build-test/ (override: BUILD_ROOT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
root=${BUILD_ROOT:-build-test}
jobs=$(nproc)

run_suite() { # name, cmake args...
  local name=$1; shift
  echo "=== $name build ===" >&2
  cmake -S . -B "$root/$name" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$root/$name" -j"$jobs"
  echo "=== $name tests ===" >&2
  ctest --test-dir "$root/$name" --output-on-failure -j"$jobs"
}

run_suite normal
# TSan needs a fixed address-space layout on kernels with high mmap
# randomisation; setarch -R turns it off for the test processes only.
echo "=== tsan build ===" >&2
cmake -S . -B "$root/tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRQSPIN_SANITIZE=thread \
  -DRQSPIN_BUILD_BENCH=OFF >/dev/null
cmake --build "$root/tsan" -j"$jobs"
echo "=== tsan tests ===" >&2
setarch "$(uname -m)" -R ctest --test-dir "$root/tsan" --output-on-failure -j"$jobs"

echo "=== aarch64 cross build (library only) ===" >&2
cmake -S . -B "$root/aarch64" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DRQSPIN_BUILD_TESTS=OFF -DRQSPIN_BUILD_BENCH=OFF >/dev/null
cmake --build "$root/aarch64" -j"$jobs"
readelf -h "$root/aarch64/librqspin.so" | grep -q "AArch64"
echo "aarch64: librqspin builds" >&2
