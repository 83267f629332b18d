/* SPDX-License-Identifier: MIT */
/*
 * hog_cpus: flush a per-CPU cache on every CPU, each on its own CPU.
 * hog_cpus_ran says which CPUs were flushed: one that went offline or
 * left the cpuset meanwhile is not, and its slot is drained from here
 * (no one updates it now: its updaters moved with its threads).
 *
 * What the updaters must do for such a drain: update their CPU's slot
 * only while on that CPU (pinned, or checking with rseq), and in one
 * preemption-safe instruction (an atomic add), so that the drain, which
 * runs on that CPU, finds every update whole.
 */
#include <cpuhog.h>
#include <stdatomic.h>
#include <stdio.h>

#define SLOTS CPU_SETSIZE
static long cache[SLOTS];   /* per-CPU, touched only by its own CPU */
static _Atomic long total;

static int flush(void *arg)
{
	int cpu = sched_getcpu();

	(void)arg;
	atomic_fetch_add(&total, cache[cpu]);
	cache[cpu] = 0;
	return 0;
}

int main(void)
{
	struct cpuhog_info info;
	cpu_set_t ran;
	int cpu, r, missed = 0;

	if (cpuhog_get_info(&info) < 0)
		return 1;
	for (cpu = 0; cpu < SLOTS; cpu++)
		cache[cpu] = CPU_ISSET(cpu, &info.cpus) ? 10 : 0;
	r = hog_cpus_ran(sizeof(info.cpus), &info.cpus, flush, NULL, &ran);
	for (cpu = 0; cpu < SLOTS; cpu++)
		if (CPU_ISSET(cpu, &info.cpus) && !CPU_ISSET(cpu, &ran)) {
			atomic_fetch_add(&total, cache[cpu]); /* missed */
			cache[cpu] = 0;
			missed++;
		}
	printf("hog_cpus_ran -> %d; flushed %ld from %u CPUs (%d drained "
	       "from here)\n", r, atomic_load(&total), info.nr_hogs, missed);
	cpuhog_shutdown();
	return r != 0 || atomic_load(&total) != 10L * info.nr_hogs;
}
