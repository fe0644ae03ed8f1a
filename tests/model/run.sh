#!/usr/bin/env bash
# Model-check the lock slow path (tests/model/qspinlock.pml) with SPIN.
#
#   bash tests/model/run.sh OUTDIR
#
# For each configuration: spin -a generates pan.c in OUTDIR/<config>/, gcc
# compiles it, pan runs an exhaustive search. Exit 0 only if every search
# completed (not truncated by depth or memory) with "errors: 0"; exit 1
# otherwise (the pan output and the command to replay the trail are
# printed); exit 77 (CTest's skip code) when spin is not installed.
set -uo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
# Overrides, for checking the checker: MODEL_PML (another model file),
# PAN_DEPTH (pan's -m search depth bound).
pml=${MODEL_PML:-$here/qspinlock.pml}
depth_bound=${PAN_DEPTH:-200000}
mkdir -p "$1" || exit 1
out=$(cd "$1" && pwd)

if ! command -v spin >/dev/null 2>&1; then
	echo "SKIP: spin is not installed (apt-get install spin)" >&2
	exit 77
fi
CC=${CC:-gcc}
if ! command -v "$CC" >/dev/null 2>&1; then
	echo "FAIL: no C compiler ($CC) for pan.c" >&2
	exit 1
fi

# name | spin -D defines | search: safety (assertions + invalid end
# states) or np (non-progress cycles: liveness, see README.md) |
# all: every statement of the model must be reached (the timeout paths
# are not dead code).
configs=(
	"qspin|-DNT=3 -DROUNDS=3|safety|"
	"qspin-4threads|-DNT=4 -DROUNDS=1|safety|"
	"qspin-nonode|-DNONODE -DNT=3 -DROUNDS=3|safety|"
	"qspin-liveness|-DNT=3 -DROUNDS=2|np|"
	"qspin-nonode-liveness|-DNONODE -DNT=3 -DROUNDS=2|np|"
	"rqspin|-DRQSPIN -DNT=3 -DROUNDS=2|safety|all"
	"rqspin-4threads|-DRQSPIN -DNT=4 -DROUNDS=1|safety|all"
	"rqspin-nonode|-DRQSPIN -DNONODE -DNT=3 -DROUNDS=2|safety|all"
)

fail=0
t_all=$(date +%s%N)
printf '%-22s %-36s %-7s %10s %6s %8s  %s\n' config defines search states depth "pan s" result
for c in "${configs[@]}"; do
	IFS='|' read -r name defs mode want <<<"$c"
	dir=$out/$name
	rm -rf "$dir" && mkdir -p "$dir" || exit 1
	cp "$pml" "$dir/qspinlock.pml"
	result=ok
	(
		cd "$dir" || exit 1
		# shellcheck disable=SC2086
		spin -a $defs qspinlock.pml >spin.out 2>&1 || { cat spin.out; exit 1; }
		if [ "$mode" = np ]; then
			ccflags="-DNP"; panflags="-l"
		else
			ccflags="-DSAFETY"; panflags=""
		fi
		# COLLAPSE is lossless state compression (unlike -DHC4 or
		# bitstate): the search stays exhaustive.
		# shellcheck disable=SC2086
		$CC -O2 $ccflags -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c >cc.out 2>&1 ||
			{ cat cc.out; exit 1; }
		# shellcheck disable=SC2086
		./pan $panflags -m"$depth_bound" -w24 >pan.out 2>&1
		exit 0
	) || result="FAIL (spin/gcc)"
	p=$dir/pan.out
	if [ "$result" = ok ]; then
		if ! grep -q "errors: 0" "$p"; then
			result="FAIL (errors)"
		elif grep -qiE "max search depth too small|depth limit|search not completed|out of memory|MEMLIM bound" "$p"; then
			result="FAIL (search truncated)"
		elif ! grep -q "Full statespace search" "$p"; then
			result="FAIL (not an exhaustive search)"
		elif [ "$want" = all ] && ! grep -qE "unreached in proctype thread" "$p"; then
			result="FAIL (no reachability report)"
		elif [ "$want" = all ] &&
			! grep -A1 "unreached in proctype thread" "$p" | grep -qE "^\s*\(0 of [0-9]+ states\)"; then
			result="FAIL (unreached model code)"
		fi
	fi
	states=$(sed -nE 's/^ *([0-9.e+]+) states, stored.*/\1/p' "$p" 2>/dev/null | head -1)
	depth=$(sed -nE 's/.*depth reached ([0-9]+).*/\1/p' "$p" 2>/dev/null | head -1)
	secs=$(sed -nE 's/^pan: elapsed time ([0-9.e+-]+) seconds.*/\1/p' "$p" 2>/dev/null | head -1)
	printf '%-22s %-36s %-7s %10s %6s %8s  %s\n' "$name" "$defs" "$mode" \
		"${states:-?}" "${depth:-?}" "${secs:-?}" "$result"
	if [ "$result" != ok ]; then
		fail=1
		echo "---- $dir/pan.out ----"
		cat "$p" 2>/dev/null
		if ls "$dir"/*.trail >/dev/null 2>&1; then
			echo "---- replay the trail: cd $dir && spin -t -p -g -l $defs qspinlock.pml ----"
		fi
	fi
done
ms=$((($(date +%s%N) - t_all) / 1000000))
printf 'total wall time (generate, compile, search): %d.%03d s\n' $((ms / 1000)) $((ms % 1000))
if [ $fail -ne 0 ]; then
	echo "MODEL CHECK FAILED" >&2
	exit 1
fi
echo "model check: all configurations complete, errors: 0"
exit 0
