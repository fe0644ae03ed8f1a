# Shared by run.sh and mutants.sh (sourced).
# Overrides, for checking the checker: MODEL_PML (another model file),
# PAN_DEPTH (pan's -m search depth bound).
pml=${MODEL_PML:-$here/qspinlock.pml}
depth_bound=${PAN_DEPTH:-200000}
CC=${CC:-gcc}

config_names() {
	grep -vE '^\s*(#|$)' "$here/configs.txt" | cut -d'|' -f1
}

config_line() {
	grep -E "^$1\|" "$here/configs.txt" | head -1 | grep .
}

need_tools() {
	if ! command -v spin >/dev/null 2>&1; then
		echo "SKIP: spin is not installed (apt-get install spin)" >&2
		return 77
	fi
	if ! command -v "$CC" >/dev/null 2>&1; then
		echo "FAIL: no C compiler ($CC) for pan.c" >&2
		return 1
	fi
}

# pan_run DIR MODE DEFINES...: generate, compile and run pan in DIR
# (fresh); pan's output in DIR/pan.out. Extra pan flags in PAN_FLAGS;
# PAN_CFLAGS replaces -O1 for pan.c (-O2 compiles 2.5x longer, about 5 s of
# CPU, and searches only ~10% faster: it pays off from ~30 M states); PAN_TIMEOUT bounds pan's run in seconds (status 124 when it expires).
pan_run() {
	local dir=$1 mode=$2 ccflags panflags
	shift 2
	rm -rf "$dir" && mkdir -p "$dir" || return 1
	cp "$pml" "$dir/qspinlock.pml"
	(
		cd "$dir" || exit 1
		spin -a "$@" qspinlock.pml >spin.out 2>&1 || exit 1
		if [ "$mode" = np ]; then
			ccflags="-DNP"; panflags="-l"
		elif [ "$mode" = npfair ]; then
			# weak fairness: a process that stays enabled moves
			ccflags="-DNP"; panflags="-l -f"
		else
			ccflags="-DSAFETY"; panflags=""
		fi
		# COLLAPSE is lossless state compression (unlike -DHC4 or
		# bitstate): the search stays exhaustive.
		# shellcheck disable=SC2086
		$CC ${PAN_CFLAGS:--O1} $ccflags -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c >cc.out 2>&1 || exit 1
		# shellcheck disable=SC2086
		${PAN_TIMEOUT:+timeout "$PAN_TIMEOUT"} ./pan $panflags ${PAN_FLAGS:-} \
			-m"$depth_bound" -w24 >pan.out 2>&1
		[ $? -eq 124 ] && exit 124
		exit 0
	)
}

search_truncated() {
	grep -qiE "max search depth too small|depth limit|search not completed|out of memory|MEMLIM bound" "$1"
}

pan_states() { sed -nE 's/^ *([0-9.e+]+) states, stored.*/\1/p' "$1" 2>/dev/null | head -1; }
pan_depth() { sed -nE 's/.*depth reached ([0-9]+).*/\1/p' "$1" 2>/dev/null | head -1; }
pan_secs() { sed -nE 's/^pan: elapsed time ([0-9.e+-]+) seconds.*/\1/p' "$1" 2>/dev/null | head -1; }
