/* SPDX-License-Identifier: MIT */
/*
 * cpuhog tour: every call of the library on every CPU, what happened and
 * how long one call took.  A first look, not a benchmark (cpuhog bench).
 */
#include "tool.h"

#include <cpuhog.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int where(void *arg)
{
	(void)arg;
	return sched_getcpu();
}

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

static const char *policy_name(int p)
{
	return p == SCHED_FIFO ? "SCHED_FIFO" : p == SCHED_RR ? "SCHED_RR"
						: "SCHED_OTHER";
}

static void header(const struct cpuhog_info *in)
{
	printf("libcpuhog %s: %u hogs (CPU ids < %u), ", cpuhog_version(),
	       in->nr_hogs, in->nr_cpu_ids);
	if (in->policy == SCHED_FIFO || in->policy == SCHED_RR)
		printf("%s priority %d\n", policy_name(in->policy),
		       in->priority);
	else
		printf("%s nice %d (real time refused: %s)\n",
		       policy_name(in->policy), in->nice,
		       strerror(in->rt_errno));
}

/* Median of a few timed calls of @f, in microseconds. */
static double timed(int (*f)(void *), void *arg, int *ret)
{
	double t[9], tmp;
	int i, j;

	for (i = 0; i < 9; i++) {
		double t0 = (tool_now_ns() / 1e3);

		*ret = f(arg);
		t[i] = (tool_now_ns() / 1e3) - t0;
	}
	for (i = 1; i < 9; i++)
		for (j = i; j > 0 && t[j - 1] > t[j]; j--)
			tmp = t[j], t[j] = t[j - 1], t[j - 1] = tmp;
	return t[4];
}

static unsigned int tour_cpu;
static int one(void *arg)
{
	(void)arg;
	return hog_one_cpu(tour_cpu, where, NULL);
}
static int nowait(void *arg)
{
	struct cpuhog_work w = CPUHOG_WORK_INIT;

	(void)arg;
	if (!hog_one_cpu_nowait(tour_cpu, where, NULL, &w))
		return -ENOENT;
	return hog_work_wait(&w);
}
static int migrate(void *arg)
{
	int r = hog_migrate(0, tour_cpu);

	(void)arg;
	return r < 0 ? r : sched_getcpu();
}
static cpu_set_t all;
static int cpus(void *arg)
{
	(void)arg;
	return hog_cpus(sizeof(all), &all, nothing, NULL);
}
static int stop(void *arg)
{
	(void)arg;
	return stop_machine(nothing, NULL, 0, NULL);
}
static int sync_(void *arg)
{
	(void)arg;
	return hog_synchronize();
}

static void show(const char *what, int (*f)(void *))
{
	int r;
	double us = timed(f, NULL, &r);

	printf("  %-34s %8.1f us   -> %d%s%s\n", what, us, r, r < 0 ? " " : "",
	       r < 0 ? strerror(-r) : "");
}

int cmd_tour(int argc, char **argv)
{
	struct cpuhog_info in;
	unsigned int cpu;
	char what[64];
	int r;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: cpuhog tour\n"
		       "  run each call of the library on every CPU and time "
		       "it\n");
		return EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "cpuhog tour: unexpected argument '%s'\n"
				"usage: cpuhog tour\n",
			argv[1]);
		return EXIT_USAGE;
	}
	r = tool_start(NULL);
	if (r == 0)
		r = cpuhog_get_info(&in);
	if (r < 0) {
		fprintf(stderr, "cpuhog tour: cannot start the hogs: %s\n",
			strerror(-r));
		return EXIT_RUNTIME;
	}
	tool_say_priority("tour", "the calls whose promise is exclusion "
				  "return -EPERM (CPUHOG_WEAK=1 runs them, at "
				  "the times of ordinary threads)");
	header(&in);
	all = in.cpus;
	for (cpu = 0; cpu < in.nr_cpu_ids && cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &in.cpus))
			continue;
		tour_cpu = cpu;
		snprintf(what, sizeof(what), "hog_one_cpu(%u) -> ran on", cpu);
		show(what, one);
		snprintf(what, sizeof(what), "hog_one_cpu_nowait(%u) + wait", cpu);
		show(what, nowait);
		snprintf(what, sizeof(what), "hog_migrate(self, %u) -> on", cpu);
		show(what, migrate);
	}
	show("hog_cpus(all, empty fn)", cpus);
	show("stop_machine(empty fn)", stop);
	show("hog_synchronize()", sync_);
	cpuhog_get_info(&in);
	printf("counters: queued %llu, run %llu, refused %llu, slept %llu, "
	       "overran %llu, stops %llu\n",
	       (unsigned long long)in.queued, (unsigned long long)in.run,
	       (unsigned long long)in.refused, (unsigned long long)in.slept,
	       (unsigned long long)in.overran, (unsigned long long)in.stops);
	cpuhog_shutdown();
	return EXIT_OK;
}
