#!/bin/sh
# The stop's model (tests/model/stop.pml), checked exhaustively by spin:
# every interleaving of two calls' hogs, with aborts, timeouts, lost
# holds and a stale hog, and of two processes' stops under the lock.
# Skipped (77) where spin or a C compiler is missing.
# usage: model_check.sh MODEL [CC]
set -eu
model=$1
cc=${2:-cc}
command -v spin >/dev/null 2>&1 || { echo "skipped: spin is not installed (Debian package spin)"; exit 77; }
command -v "$cc" >/dev/null 2>&1 || { echo "skipped: no C compiler ($cc)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM
cp "$model" "$dir/model.pml"
cd "$dir"
fails=0
# each configuration: the defines, and what it shows
check() {
	spin $1 -a model.pml >spin.out 2>&1 || { cat spin.out; fails=$((fails + 1)); return; }
	# -DSAFETY: assertions and invalid end states (a hog left waiting,
	# a deadlock); -DCOLLAPSE: exact, compressed state storage
	"$cc" -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=3072 -o pan pan.c
	./pan -m200000 >pan.out 2>&1 || true
	states=$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' pan.out)
	if grep -q "errors: 0" pan.out && ! grep -q "search not completed\|max search depth too small" pan.out; then
		echo "model $2: no error in $states states"
	else
		echo "model $2: FAILED"
		cat pan.out
		[ -f model.pml.trail ] && spin $1 -t -p -g model.pml | tail -60
		fails=$((fails + 1))
	fi
	rm -f model.pml.trail
}
# each configuration, and what it shows; FAULTS bounds the faults of a
# run (each at any step), so that the search stays exhaustive in seconds
check "-DFAULTS=0" "one process, two calls, no fault (every call returns 0)"
check "-DFAULTS=1" "one process, two calls, one abort, timeout, lost hold or overrun at any step"
check "-DFAULTS=2" "one process, two calls, two of them"
check "-DPROCS=2 -DFAULTS=0 -DTIMEOUTS=0" "two processes serialized, no deadline (nobody waits for ever)"
check "-DPROCS=2 -DFAULTS=1" "two processes serialized, one fault"
[ "$fails" = 0 ]
