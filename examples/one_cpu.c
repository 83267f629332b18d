/* SPDX-License-Identifier: MIT */
/* hog_one_cpu: run a function on each CPU in turn and see where it ran. */
#include <cpuhog.h>
#include <stdio.h>

static int where(void *arg)
{
	(void)arg;
	return sched_getcpu(); /* short, and never sleeps */
}

int main(void)
{
	struct cpuhog_info info;
	int cpu, bad = 0;

	if (cpuhog_get_info(&info) < 0)
		return 1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &info.cpus))
			continue;
		int ran = hog_one_cpu((unsigned int)cpu, where, NULL);

		printf("asked for CPU %d, ran on CPU %d\n", cpu, ran);
		bad += ran != cpu;
	}
	cpuhog_shutdown();
	return bad != 0;
}
