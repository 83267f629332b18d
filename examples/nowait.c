/* SPDX-License-Identifier: MIT */
/* hog_one_cpu_nowait + hog_work_wait: hog every CPU at once, collect after. */
#include <cpuhog.h>
#include <stdio.h>
#include <time.h>

static int read_clock(void *arg)
{
	struct timespec *ts = arg;

	clock_gettime(CLOCK_MONOTONIC, ts);
	return sched_getcpu();
}

int main(void)
{
	static struct cpuhog_work work[CPU_SETSIZE]; /* zeroed: ready to queue */
	static struct timespec when[CPU_SETSIZE];
	struct cpuhog_info info;
	int cpu, bad = 0;

	if (cpuhog_get_info(&info) < 0)
		return 1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &info.cpus) &&
		    !hog_one_cpu_nowait((unsigned int)cpu, read_clock, &when[cpu],
					&work[cpu]))
			bad++;
	/* ... the caller is free to do other work here ... */
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &info.cpus))
			continue;
		int ran = hog_work_wait(&work[cpu]);

		printf("CPU %d: ran on %d at %ld.%09ld\n", cpu, ran,
		       (long)when[cpu].tv_sec, when[cpu].tv_nsec);
		bad += ran != cpu;
	}
	cpuhog_shutdown();
	return bad != 0;
}
