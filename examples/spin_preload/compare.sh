#!/usr/bin/env bash
# A program's own pthread_spinlock throughput with and without the shim,
# measured in one run, interleaved: for each thread count, glibc then the
# shim, three times; prints the median of each and the ratio.
#   examples/spin_preload/compare.sh BUILD_DIR [threads...]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [threads...]}
shift
threads=${*:-1 2 4 8 16}
prog=$build/examples/spin_counter
shim=$(ls "$build"/librqspin-pthread.so 2>/dev/null || true)
[ -x "$prog" ] && [ -n "$shim" ] || { echo "build $build first (spin_counter, rqspin-pthread)" >&2; exit 2; }

rate() { "$@" | sed -n 's/.*, \([0-9.]*\) M lock\/unlock per second/\1/p'; }
median() { printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }

printf '%8s %14s %14s %8s\n' threads "glibc M/s" "shim M/s" ratio
for t in $threads; do
  g=() s=()
  for r in 1 2 3; do
    g+=("$(rate "$prog" "$t")")
    s+=("$(rate env LD_PRELOAD="$shim" "$prog" "$t")")
  done
  gm=$(median "${g[@]}") sm=$(median "${s[@]}")
  awk -v t="$t" -v g="$gm" -v s="$sm" 'BEGIN { printf "%8s %14s %14s %8.2f\n", t, g, s, s / g }'
done
