#!/usr/bin/env bash
# The whole test suite, as CI runs it: install dependencies, then build and
# run CTest in a normal build and in ThreadSanitizer, AddressSanitizer and
# UndefinedBehaviorSanitizer builds, cross-compile the library for aarch64
# and run its tests there under qemu-user. Build trees go to ./build-test/
# (override: BUILD_ROOT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
root=${BUILD_ROOT:-build-test}
jobs=$(nproc)

run_suite() { # name, runner prefix (may be empty), cmake args...
  local name=$1 runner=$2; shift 2
  echo "=== $name build ===" >&2
  cmake -S . -B "$root/$name" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$root/$name" -j"$jobs"
  echo "=== $name tests ===" >&2
  $runner ctest --test-dir "$root/$name" --output-on-failure -j"$jobs"
}

run_suite normal ""
# The sanitizer builds skip the benchmark harness (its smoke tests run in
# the normal build). TSan needs a fixed address-space layout on kernels
# with high mmap randomisation: setarch -R turns that off for the tests.
run_suite tsan "setarch $(uname -m) -R" -DRQSPIN_SANITIZE=thread -DRQSPIN_BUILD_BENCH=OFF
run_suite asan "" -DRQSPIN_SANITIZE=address -DRQSPIN_BUILD_BENCH=OFF
run_suite ubsan "" -DRQSPIN_SANITIZE=undefined -DRQSPIN_BUILD_BENCH=OFF

echo "=== aarch64 cross build (library only) ===" >&2
cmake -S . -B "$root/aarch64" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DRQSPIN_BUILD_TESTS=OFF -DRQSPIN_BUILD_BENCH=OFF -DRQSPIN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$root/aarch64" -j"$jobs"
readelf -h "$root/aarch64/librqspin.so" | grep -q "AArch64"
echo "aarch64: librqspin builds" >&2
# The tests on aarch64: cross-built, run under qemu-user on an LSE and an
# LL/SC core (scripts/test-aarch64.sh, tests/qemu_skip.txt).
bash scripts/test-aarch64.sh "$root/aarch64-qemu"

echo "=== Debian packages (cpack -G DEB) ===" >&2
# Build librqspin0 and librqspin-dev from the normal build, install them,
# build the downstream program and the examples against /usr, then remove
# them again (also when a step fails).
(cd "$root/normal" && cpack -G DEB >/dev/null)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
debs=("$root"/normal/librqspin0_*.deb "$root"/normal/librqspin-dev_*.deb)
trap '$SUDO dpkg -P librqspin-dev librqspin0 >/dev/null 2>&1 || true' EXIT
$SUDO dpkg -i "${debs[@]}" >/dev/null
bash tests/downstream/run.sh --prefix /usr "$root/deb-downstream"
bash tests/pkg_examples/run.sh --prefix /usr "$root/deb-examples"
$SUDO dpkg -P librqspin-dev librqspin0 >/dev/null
trap - EXIT
echo "deb: librqspin0 and librqspin-dev install, and programs build against them" >&2

# With an arm64 liburcu installed the Debian multiarch way
# (dpkg --add-architecture arm64; apt-get install liburcu-dev:arm64), the
# cross-built library must link it (CTest aarch64_multiarch_urcu checks the
# lookup itself against a placeholder tree).
if [ -e /usr/lib/aarch64-linux-gnu/liburcu-memb.so ]; then
  echo "=== aarch64 cross build against the multiarch arm64 liburcu ===" >&2
  bash tests/pkg_aarch64/multiarch.sh --build . "$root/aarch64-multiarch"
fi
