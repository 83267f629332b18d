/* SPDX-License-Identifier: MIT */
/* hog_cpus: flush a per-CPU cache on every CPU, each on its own CPU. */
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
	int cpu, r;

	if (cpuhog_get_info(&info) < 0)
		return 1;
	for (cpu = 0; cpu < SLOTS; cpu++)
		cache[cpu] = CPU_ISSET(cpu, &info.cpus) ? 10 : 0;
	r = hog_cpus(sizeof(info.cpus), &info.cpus, flush, NULL);
	printf("hog_cpus -> %d; flushed %ld from %u CPUs\n", r,
	       atomic_load(&total), info.nr_hogs);
	cpuhog_shutdown();
	return r != 0 || atomic_load(&total) != 10L * info.nr_hogs;
}
