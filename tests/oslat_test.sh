#!/bin/sh
# cpuhog noise against rt-tests' oslat, like with like: the same CPU, the
# same length, the same policy (SCHED_FIFO 99: oslat -f 99 and cpuhog
# noise -P 99), both measuring continuously, one run each, no retry.
#
# Each run lasts 2 s, longer than the RT budget (sched_rt_runtime_us of
# every sched_rt_period_us, 950 ms of 1 s by default), so both meet RT
# throttling, or on kernels with the fair server (6.12 on) its
# replacement: a SCHED_OTHER task kept off the CPU that long gets the
# rest of the period.  How long a measuring thread then waits depends on
# what SCHED_OTHER work wants that CPU at that moment (a kworker: a few
# ms; a busy task: all 50 ms), which differs from one run to the next.
# So a SCHED_OTHER spinner pinned to the CPU runs beside both, and both
# should see the same window, the largest gap of each.  With throttling
# off (-1, before the fair server) the spinner never runs and both
# measure the CPU's own noise.  Either way the maxima must agree within
# 10x, counting anything under 10 us as 10 us.
# usage: oslat_test.sh CPUHOG      (skipped: exit 77, without oslat)
set -u
command -v oslat >/dev/null || { echo "skipped: oslat (rt-tests) not installed"; exit 77; }
[ "$(nproc)" -ge 2 ] || { echo "skipped: needs 2 CPUs"; exit 77; }
cpu=$(($(nproc) - 1))
if ! "$1" info | grep -q "^hog scheduling: *SCHED_FIFO priority 99"; then
	echo "skipped: no SCHED_FIFO 99 here (oslat -f 99 needs it too)"
	exit 77
fi
runtime=$(cat /proc/sys/kernel/sched_rt_runtime_us 2>/dev/null || echo "?")
period=$(cat /proc/sys/kernel/sched_rt_period_us 2>/dev/null || echo "?")
timeout 60 taskset -c "$cpu" sh -c 'while :; do :; done' &
spinner=$!
trap 'kill $spinner 2>/dev/null' EXIT INT TERM
ours=$("$1" noise --cpus "$cpu" --duration 2s --priority 99 --json 2>/dev/null |
	sed -n 's/.*"max_gap_ns": \([0-9]*\).*/\1/p')
theirs=$(oslat -c "$cpu" -D 2 -f 99 -q 2>&1 | sed -n 's/.*Maximum:[^0-9]*\([0-9]*\).*/\1/p')
[ -n "$ours" ] && [ -n "$theirs" ] || { echo "could not read: '$ours' '$theirs'"; exit 1; }
ours_us=$((ours / 1000))
echo "CPU $cpu, 2 s each at SCHED_FIFO 99 beside a SCHED_OTHER spinner;"
echo "RT budget $runtime us of every $period us"
echo "cpuhog noise max gap ${ours_us} us, oslat max ${theirs} us"
a=$((ours_us < 10 ? 10 : ours_us)) b=$((theirs < 10 ? 10 : theirs))
if [ $((a * 10)) -ge "$b" ] && [ $((b * 10)) -ge "$a" ]; then
	echo "agree within 10x"
	exit 0
fi
echo "disagree by more than 10x"
exit 1
