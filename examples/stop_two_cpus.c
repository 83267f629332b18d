/* SPDX-License-Identifier: MIT */
/* stop_two_cpus: move a balance between two CPUs' counters while both
 * CPUs are held, so neither CPU ever runs a thread that sees it in flight. */
#include <cpuhog.h>
#include <stdio.h>

static long counter[CPU_SETSIZE];

static int transfer(void *arg)
{
	int *cpus = arg;

	counter[cpus[0]] -= 5;
	counter[cpus[1]] += 5;
	return 0;
}

int main(void)
{
	struct cpuhog_info info;
	int cpus[2] = { -1, -1 }, cpu, n = 0, r;

	if (cpuhog_get_info(&info) < 0)
		return 1;
	for (cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
		if (CPU_ISSET(cpu, &info.cpus))
			cpus[n++] = cpu;
	if (n < 2) {
		puts("stop_two_cpus: needs two CPUs; skipped");
		return 0;
	}
	counter[cpus[0]] = 100;
	r = stop_two_cpus((unsigned int)cpus[0], (unsigned int)cpus[1], transfer,
			  cpus);
	printf("stop_two_cpus(%d, %d) -> %d: counters %ld and %ld\n", cpus[0],
	       cpus[1], r, counter[cpus[0]], counter[cpus[1]]);
	cpuhog_shutdown();
	return r != 0 || counter[cpus[0]] + counter[cpus[1]] != 100;
}
