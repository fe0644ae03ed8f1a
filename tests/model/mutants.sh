#!/usr/bin/env bash
# Check the checker: every known-bad variant of the model (mutants.txt)
# must be rejected by SPIN with a counterexample.
#
#   bash tests/model/mutants.sh OUTDIR [MUTANT...]   (default: all)
#
# Each search stops at its first error (pan's default); pan is bounded by
# MUTANT_TIMEOUT seconds (default 120). Exit 0 only if every mutant was
# killed (errors >= 1, trail written); exit 1 if any survived (a complete
# search without errors), timed out or did not build; 77 without spin.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/model/lib.sh
. "$here/lib.sh"

if [ $# -lt 1 ]; then
	echo "usage: $0 OUTDIR [MUTANT...]" >&2
	exit 2
fi
out=$1
shift
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
need_tools || exit $?
limit=${MUTANT_TIMEOUT:-120}

if [ $# -eq 0 ]; then
	mapfile -t names < <(grep -vE '^\s*(#|$)' "$here/mutants.txt" | cut -d'|' -f1)
else
	names=("$@")
fi

fail=0
t_all=$(date +%s%N)
printf '%-24s %-8s %s\n' mutant result "counterexample (first error pan reports)"
for name in "${names[@]}"; do
	line=$(grep -E "^$name\|" "$here/mutants.txt" | head -1)
	if [ -z "$line" ]; then
		echo "unknown mutant: $name" >&2
		fail=1
		continue
	fi
	IFS='|' read -r _ defs mode what <<<"$line"
	dir=$out/$name
	# shellcheck disable=SC2086
	# -O0: most counterexamples are found in a few thousand states, and
	# the compile is what costs (0.7 s of CPU, -O1 2 s).
	PAN_CFLAGS=-O0 PAN_TIMEOUT=$limit pan_run "$dir" "$mode" "-DMUTANT_$name" $defs
	rc=$?
	p=$dir/pan.out
	why=$(grep -m1 -E "^pan:[0-9]+: |^pan: (acceptance|non-progress)" "$p" 2>/dev/null | sed -E 's/ \(at depth [0-9]+\)//')
	if [ $rc -eq 124 ]; then
		result=TIMEOUT
	elif [ ! -f "$p" ] || ! grep -q "errors:" "$p"; then
		result=BROKEN
	elif grep -qE "errors: [1-9]" "$p" && ls "$dir"/*.trail >/dev/null 2>&1; then
		result=killed
	else
		result=SURVIVED
	fi
	printf '%-24s %-8s %s\n' "$name" "$result" "${why:-($what)}"
	if [ "$result" != killed ]; then
		fail=1
		echo "  mutant: $what; config: $defs ($mode); see $dir"
		cat "$dir/spin.out" "$dir/cc.out" 2>/dev/null | head -20
	fi
done
ms=$((($(date +%s%N) - t_all) / 1000000))
printf 'total wall time: %d.%03d s\n' $((ms / 1000)) $((ms % 1000))
if [ $fail -ne 0 ]; then
	echo "MUTATION CHECK FAILED: the model missed a known bug" >&2
	exit 1
fi
echo "mutation check: all ${#names[@]} mutants killed"
exit 0
