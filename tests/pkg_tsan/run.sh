#!/usr/bin/env bash
# A ThreadSanitizer program against the installed TSan variant
# (rqspin::rqspin_tsan) runs the storage value-lock pattern without a report.
# Usage: run.sh <build dir with -DRQSPIN_BUILD_TSAN_VARIANT=ON> <scratch dir>
set -euo pipefail
build=$1 work=$2
src=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/app" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app" >/dev/null
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$work/prefix/share/rqspin/tsan-liburcu.supp"
setarch "$(uname -m)" -R "$work/app/value_lock"
echo "tsan variant: no ThreadSanitizer report"
