#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The kernel-only reproduction behind the offline storm's busy-machine
# skip (docs/RELIABILITY.md): one CPU-bound job, four threads that sleep
# 1 ms in a loop, and CPU 1 taken offline and back.  No cpuhog runs.
# On the 6.18 VM this project is developed on, single offlines took 23 s
# and 59 s and the kernel logged "rcu_preempt kthread starved".
#
# Needs root and a CPU 1 that can go offline.  It may stall RCU for a
# minute: never part of `make check`.  CPU 1 comes back and the helpers
# stop on every way out.  Usage: scripts/offline-starvation.sh [CYCLES]
set -u
online=/sys/devices/system/cpu/cpu1/online
[ -w "$online" ] || { echo "needs root and $online" >&2; exit 2; }
cycles=${1:-100}
tmp=$(mktemp -d)
pids=()
cleanup() {
	echo 1 > "$online" 2>/dev/null
	[ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

cat > "$tmp/sleepers.c" <<'C'
#include <pthread.h>
#include <unistd.h>
static void *nap(void *a) { for (;;) usleep(1000); return a; }
int main(void)
{
	pthread_t t;
	for (int i = 0; i < 4; i++)
		pthread_create(&t, 0, nap, 0);
	pause();
}
C
cc -O2 -pthread -o "$tmp/sleepers" "$tmp/sleepers.c" || exit 1
yes > /dev/null & pids+=($!)
"$tmp/sleepers" & pids+=($!)
worst=0
for ((i = 0; i < cycles; i++)); do
	t0=$(date +%s%N)
	echo 0 > "$online"
	ms=$((($(date +%s%N) - t0) / 1000000))
	((ms > worst)) && worst=$ms && echo "offline took $ms ms (cycle $i)"
	sleep 0.02
	echo 1 > "$online"
	sleep 0.02
done
echo "worst offline $worst ms over $cycles cycles"
