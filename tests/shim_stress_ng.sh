#!/bin/sh
# An unmodified, packaged program that uses pthread spinlocks, under the
# shim: stress-ng's pthread stressor creates its lock with
# PTHREAD_PROCESS_SHARED (stress-ng refuses to run the stressor when that
# fails). Bounded by --pthread-ops; checks the exit status and the summary.
#   shim_stress_ng.sh path/to/librqspin-pthread.so
set -u
shim=${1:?usage: $0 librqspin-pthread.so}
command -v stress-ng >/dev/null 2>&1 || { echo "stress-ng not installed (scripts/deps.sh)"; exit 77; }
nm -D "$(command -v stress-ng)" | grep -q ' U pthread_spin_lock' ||
  { echo "this stress-ng does not use pthread_spin_lock"; exit 77; }
out=$(LD_PRELOAD=$shim stress-ng --pthread 2 --pthread-ops 400 --pthread-max 8 \
      --timeout 60 --metrics-brief 2>&1)
rc=$?
echo "$out"
fail() { echo "shim_stress_ng: $*" >&2; exit 1; }
[ "$rc" -eq 0 ] || fail "exit status $rc"
case $out in *"cannot be preloaded"*) fail "the shim was not preloaded";; esac
echo "$out" | grep -q "successful run completed" || fail "no 'successful run completed'"
echo "$out" | grep -Eq "metrc: .* pthread +400 " || fail "not 400 bogo ops"
echo "$out" | grep -q "rqspin-pthread:" && fail "the shim reported a lock failure"
exit 0
