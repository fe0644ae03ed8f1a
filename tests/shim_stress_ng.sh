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
run() {
  out=$(LD_PRELOAD=$shim stress-ng --pthread 2 --pthread-ops 400 --pthread-max 8 \
        --timeout 60 --metrics-brief "$@" 2>&1)
  rc=$?
  echo "$out"
}
fail() { echo "shim_stress_ng: $*" >&2; exit 1; }
run
# stress-ng 0.15 once (1 run in 8 CI runs; 0 in 43 runs here, 25 of them
# beside a ctest -j2 load) ended with exit status 2, "unsuccessful run
# completed", its 400 bogo ops done, and no failure message, no stressor
# killed and no report from the shim. Such a run is repeated once, verbose,
# both outputs kept; any run with a failure message, a shim report or a
# second failure fails the test.
if [ "$rc" -eq 2 ] && ! echo "$out" | grep -Eq "fail:|rqspin-pthread:|terminated" &&
   echo "$out" | grep -q "unsuccessful run completed"; then
  echo "shim_stress_ng: exit status 2 without a failure message: once more, verbose" >&2
  run -v
fi
[ "$rc" -eq 0 ] || fail "exit status $rc"
case $out in *"cannot be preloaded"*) fail "the shim was not preloaded";; esac
echo "$out" | grep -q "successful run completed" || fail "no 'successful run completed'"
echo "$out" | grep -Eq "metrc: .* pthread +400 " || fail "not 400 bogo ops"
echo "$out" | grep -q "rqspin-pthread:" && fail "the shim reported a lock failure"
exit 0
