/* SPDX-License-Identifier: MIT */
/* What the subcommands share: CPU lists checked against the hogs, JSON. */
#include "tool.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int tool_start(struct cpuhog_attr *a)
{
	static cpu_set_t mine; /* the main thread's, before any pinning */
	struct cpuhog_attr def;

	if (!a) {
		cpuhog_attr_init(&def);
		a = &def;
	}
	if (sched_getaffinity(0, sizeof(mine), &mine) == 0) {
		a->cpus = &mine;
		a->cpus_setsize = sizeof(mine);
	}
	return cpuhog_init(a);
}

int tool_cpus(const char *cmd, const char *list, struct tool_set *out,
	      int *all)
{
	struct cpuhog_info in;
	cpu_set_t *hogged;
	char err[256], name[4096];
	unsigned int cpu;
	int n;

	if (cpuhog_get_info(&in) < 0) {
		fprintf(stderr, "cpuhog %s: cannot start the hogs\n", cmd);
		return -EXIT_RUNTIME;
	}
	/* sized for the machine, as the library's own sets are */
	out->ids = in.nr_cpu_ids;
	out->size = CPU_ALLOC_SIZE(in.nr_cpu_ids);
	out->set = CPU_ALLOC(in.nr_cpu_ids);
	hogged = CPU_ALLOC(in.nr_cpu_ids);
	if (!out->set || !hogged || cpuhog_get_cpus(out->size, hogged) < 0) {
		fprintf(stderr, "cpuhog %s: out of memory\n", cmd);
		CPU_FREE(hogged);
		CPU_FREE(out->set);
		return -EXIT_RUNTIME;
	}
	n = parse_cpulist(list, out->size, out->set, hogged, out->size, err,
			  sizeof(err));
	if (n < 0)
		fprintf(stderr, "cpuhog %s: %s\n", cmd, err);
	for (cpu = 0; n > 0 && cpu < out->size * 8; cpu++)
		if (CPU_ISSET_S(cpu, out->size, out->set) &&
		    !CPU_ISSET_S(cpu, out->size, hogged)) {
			format_cpulist(out->size, hogged, name, sizeof(name));
			fprintf(stderr,
				"cpuhog %s: CPU %u is offline or outside this "
				"process's CPUs (taskset, cpuset); allowed: %s\n",
				cmd, cpu, name);
			n = -1;
		}
	if (n == 0)
		fprintf(stderr, "cpuhog %s: empty CPU list\n", cmd);
	*all = n > 0 && CPU_EQUAL_S(out->size, out->set, hogged);
	CPU_FREE(hogged);
	if (n > 0)
		return n;
	CPU_FREE(out->set);
	out->set = NULL;
	return -EXIT_USAGE;
}

int tool_duration(const char *cmd, const char *opt, const char *s,
		  uint64_t *ns)
{
	char err[256];

	if (parse_duration(s, ns, err, sizeof(err)) < 0) {
		fprintf(stderr, "cpuhog %s: %s: %s\n", cmd, opt, err);
		return -1;
	}
	return 0;
}

const char *tool_policy(char *buf, size_t size)
{
	struct cpuhog_info in;

	if (cpuhog_get_info(&in) < 0)
		snprintf(buf, size, "no hogs");
	else if (in.policy == SCHED_FIFO || in.policy == SCHED_RR)
		snprintf(buf, size, "%s %d",
			 in.policy == SCHED_FIFO ? "SCHED_FIFO" : "SCHED_RR",
			 in.priority);
	else
		snprintf(buf, size, "SCHED_OTHER nice %d", in.nice);
	return buf;
}

bool tool_say_priority(const char *cmd, const char *without_rt)
{
	struct cpuhog_info in;
	char pol[64];

	if (cpuhog_get_info(&in) < 0)
		return false;
	tool_policy(pol, sizeof(pol));
	if (in.policy == SCHED_FIFO || in.policy == SCHED_RR) {
		fprintf(stderr, "cpuhog %s: hogs at %s\n", cmd, pol);
		return true;
	}
	fprintf(stderr, "cpuhog %s: hogs at %s, not real time (%s): %s\n", cmd,
		pol, strerror(in.rt_errno ? in.rt_errno : EPERM), without_rt);
	return false;
}

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

uint64_t tool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
