#!/bin/sh
# cpuhog noise against rt-tests' oslat on the same idle CPU for the same
# time: the maximum gaps must agree on their order of magnitude.
# usage: oslat_test.sh CPUHOG      (skipped: exit 77, without oslat)
set -u
command -v oslat >/dev/null || { echo "SKIP: oslat (rt-tests) not installed"; exit 77; }
[ "$(nproc)" -ge 2 ] || { echo "SKIP: needs 2 CPUs"; exit 77; }
cpu=$(($(nproc) - 1))
for try in 1 2 3; do
	# in 100 ms slices: a continuous second at SCHED_FIFO 99 would pass
	# the RT budget (950 ms of 1 s) and count the throttle as a gap
	ours=$("$1" noise --cpus "$cpu" --duration 1s --rest 20ms --json |
		sed -n 's/.*"max_gap_ns": \([0-9]*\).*/\1/p')
	theirs=$(oslat -c "$cpu" -D 1 -q 2>&1 | sed -n 's/.*Maximum:[^0-9]*\([0-9]*\).*/\1/p')
	[ -n "$ours" ] && [ -n "$theirs" ] || { echo "could not read: '$ours' '$theirs'"; exit 1; }
	ours_us=$((ours / 1000))
	echo "try $try: cpuhog noise max gap ${ours_us} us, oslat max ${theirs} us (CPU $cpu)"
	# within 10x of each other, counting anything under 10 us as 10 us
	a=$((ours_us < 10 ? 10 : ours_us)) b=$((theirs < 10 ? 10 : theirs))
	[ $((a * 10)) -ge "$b" ] && [ $((b * 10)) -ge "$a" ] && { echo "agree"; exit 0; }
done
echo "disagree by more than 10x three times"
exit 1
