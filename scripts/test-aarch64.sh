#!/usr/bin/env bash
# The aarch64 tests under qemu-user: cross-build the library and its tests
# (cmake/aarch64-linux-gnu.cmake, Debian's multiarch libc6:arm64 and
# liburcu-dev:arm64), then run CTest twice through qemu-aarch64, on an LSE
# core (-cpu max) and on an LL/SC-only core (-cpu cortex-a57). One build
# serves both: its atomics are GCC's outline atomics, which pick the
# instruction family at run time (tests aarch64_atomics and
# aarch64_outline_atomics check that).
#
#   scripts/test-aarch64.sh [build dir]     default: build-test/aarch64-qemu
#
# Called by scripts/test.sh; runs alone after scripts/deps.sh. Tests qemu
# cannot run are listed, with the reason, in tests/qemu_skip.txt. Emulated
# runs are slower: RQSPIN_TEST_SLOWDOWN (default 10, see tests/test_util.h)
# divides the tests' iteration counts and stretches their hang guards.
#
# The shim tests print "ld.so: object ... from LD_PRELOAD cannot be
# preloaded": that is the host's loader starting qemu itself (an x86-64
# program) with the test's LD_PRELOAD; the guest's loader does preload it.
#
# qemu's -L / makes the guest load /lib/ld-linux-aarch64.so.1 and the
# multiarch libraries (/usr/lib/aarch64-linux-gnu). With the cross
# toolchain's tree (-L /usr/aarch64-linux-gnu) instead, a test that starts
# threads hangs in qemu 7.2 (qspin_cross_unlock: still running after 30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${BUILD_ROOT:-build-test}/aarch64-qemu}
jobs=$(nproc)
export RQSPIN_TEST_SLOWDOWN=${RQSPIN_TEST_SLOWDOWN:-10}

command -v qemu-aarch64 >/dev/null || { echo "test-aarch64: qemu-aarch64 missing (scripts/deps.sh)" >&2; exit 1; }
[ -e /lib/ld-linux-aarch64.so.1 ] || { echo "test-aarch64: libc6:arm64 missing (scripts/deps.sh)" >&2; exit 1; }

echo "=== aarch64 cross build with tests ===" >&2
# The emulator line goes in front of every test executable: CTest runs
# them through qemu; RQSPIN_TEST_EMULATOR tells the tests so. The CPU is
# not on that line but in QEMU_CPU (qemu-user reads it), set per run below,
# so that one build serves both CPUs.
cmake --no-warn-unused-cli -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRQSPIN_BUILD_BENCH=OFF -DRQSPIN_BUILD_EXAMPLES=OFF \
  "-DCMAKE_CROSSCOMPILING_EMULATOR=env;RQSPIN_TEST_EMULATOR=qemu-aarch64;qemu-aarch64;-L;/" >/dev/null
cmake --build "$build" -j"$jobs"

# The skip list: "name | reason" lines of tests/qemu_skip.txt.
skip=()
echo "=== aarch64 under qemu: tests not run (tests/qemu_skip.txt) ===" >&2
while IFS='|' read -r name why; do
  name=${name//[[:space:]]/}
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  skip+=("^${name}\$")
  printf '  %-20s %s\n' "$name" "${why# }" >&2
done <tests/qemu_skip.txt
exclude=$(IFS='|'; echo "${skip[*]}")

# Both CPUs run even when the first fails: which of them fails says
# something (LSE or LL/SC).
failed=()
for cpu in max cortex-a57; do
  lse=1
  [ "$cpu" = max ] || lse=0
  echo "=== aarch64 tests under qemu -cpu $cpu ($([ $lse = 1 ] && echo LSE || echo LL/SC) atomics, slowdown $RQSPIN_TEST_SLOWDOWN) ===" >&2
  QEMU_CPU=$cpu RQSPIN_TEST_EXPECT_LSE=$lse \
    ctest --test-dir "$build" --output-on-failure -j"$jobs" -E "$exclude" || failed+=("$cpu")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-aarch64: tests failed under qemu -cpu ${failed[*]}" >&2
  exit 1
fi
