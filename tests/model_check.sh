#!/bin/sh
# The stop's rendezvous models (tests/model/stop.pml, flat; tree.pml,
# the combining tree), checked exhaustively by spin: every interleaving
# of two calls' hogs, with declines, moves, back-offs, timeouts and a
# stale hog.  Skipped (77) where spin or a C
# compiler is missing.   usage: model_check.sh MODEL [CC]
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
case $(basename "$model") in
tree.pml)
	# the combining tree; FAULTS bounds the declines, moves, timeouts
	# and lost holds of a run (each at any step), so that the search
	# stays exhaustive in seconds
	check "-DFAULTS=0" "tree, 4 hogs, back-offs alone (every call must complete; all held when HOLD ends)"
	check "-DFAULTS=1 -DTIMEOUTS=0 -DBACKOFFS=0" "tree, 4 hogs, one decline or move at any step"
	check "-DHOGS=3 -DFAULTS=2 -DTIMEOUTS=0 -DBACKOFFS=0" "tree, 3 hogs, two declines or moves"
	check "-DHOGS=3 -DFAULTS=1" "tree, 3 hogs, back-offs and one decline, move, timeout or lost hold"
	;;
*)
	check "" "with declines, moves, back-offs and timeouts"
	check "-DTIMEOUTS=0 -DMOVES=0" "with back-offs alone (every call must complete: nothing may wait for ever)"
	check "-DTIMEOUTS=0" "with moves, no timeouts (a move alone must end the call)"
	;;
esac
[ "$fails" = 0 ]
