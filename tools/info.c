/* SPDX-License-Identifier: MIT */
/*
 * cpuhog info [--json]: what the library gets on this machine.  CPUs
 * online and hogged, the scheduling the hogs obtained (and why not real
 * time), RT throttling, isolated and nohz_full CPUs, the cpuidle driver,
 * the membarrier commands the kernel offers.
 */
#include "tool.h"

#include <ctype.h>
#include <getopt.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct facts {
	char online[256], hogged[256], isolated[256], nohz[256], idle[64];
	char rt_runtime[32], rt_period[32];
	char polling[256], sleeping[256]; /* poll mode, per CPU */
	struct cpuhog_info in;
	long membarrier;
};

static void read_line(const char *path, char *buf, size_t size,
		      const char *missing)
{
	FILE *f = fopen(path, "r");

	snprintf(buf, size, "%s", missing);
	if (f) {
		if (fgets(buf, (int)size, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

static const struct {
	long bit;
	const char *name;
} mb_cmds[] = {
	{ MEMBARRIER_CMD_GLOBAL, "GLOBAL" },
	{ MEMBARRIER_CMD_GLOBAL_EXPEDITED, "GLOBAL_EXPEDITED" },
	{ MEMBARRIER_CMD_PRIVATE_EXPEDITED, "PRIVATE_EXPEDITED" },
	{ MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
	  "PRIVATE_EXPEDITED_SYNC_CORE" },
	{ MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, "PRIVATE_EXPEDITED_RSEQ" },
};

/* Poll mode: which hogged CPUs poll now, which do not (parked, stepped
 * aside for another task, away); the pollers get a moment to start. */
static void gather_modes(struct facts *f)
{
	cpu_set_t poll, now, rest;
	int k;

	CPU_ZERO(&poll);
	/* up to 500 ms: a new poller looks at its CPU for 100 ms first, and
	 * one that stepped aside looks again every 100 ms */
	for (k = 0; (f->in.flags & CPUHOG_F_POLL) && k < 50 &&
		    CPU_COUNT(&poll) < (int)f->in.nr_hogs;
	     k++) {
		usleep(10000);
		if (cpuhog_get_polling(sizeof(now), &now) > 0)
			CPU_OR(&poll, &poll, &now);
	}
	CPU_XOR(&rest, &f->in.cpus, &poll);
	format_cpulist(sizeof(poll), &poll, f->polling, sizeof(f->polling));
	format_cpulist(sizeof(rest), &rest, f->sleeping, sizeof(f->sleeping));
}

static void gather(struct facts *f)
{
	read_line("/sys/devices/system/cpu/online", f->online,
		  sizeof(f->online), "unknown");
	read_line("/sys/devices/system/cpu/isolated", f->isolated,
		  sizeof(f->isolated), "unknown");
	read_line("/sys/devices/system/cpu/nohz_full", f->nohz,
		  sizeof(f->nohz), "none");
	read_line("/sys/devices/system/cpu/cpuidle/current_driver", f->idle,
		  sizeof(f->idle), "none");
	read_line("/proc/sys/kernel/sched_rt_runtime_us", f->rt_runtime,
		  sizeof(f->rt_runtime), "unknown");
	read_line("/proc/sys/kernel/sched_rt_period_us", f->rt_period,
		  sizeof(f->rt_period), "unknown");
	if (!strcmp(f->nohz, "(null)"))
		snprintf(f->nohz, sizeof(f->nohz), "none");
	format_cpulist(sizeof(f->in.cpus), &f->in.cpus, f->hogged,
		       sizeof(f->hogged));
	f->membarrier = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	gather_modes(f);
}

static const char *policy(const struct cpuhog_info *in)
{
	return in->policy == SCHED_FIFO ? "SCHED_FIFO"
	       : in->policy == SCHED_RR ? "SCHED_RR"
					: "SCHED_OTHER";
}

static void print_text(const struct facts *f)
{
	size_t i;

	printf("libcpuhog %s\n", cpuhog_version());
	printf("CPUs online:     %s\n", f->online);
	printf("CPUs hogged:     %s (%u hog%s)\n", f->hogged, f->in.nr_hogs,
	       f->in.nr_hogs == 1 ? "" : "s");
	if (f->in.policy == SCHED_FIFO || f->in.policy == SCHED_RR)
		printf("hog scheduling:  %s priority %d\n", policy(&f->in),
		       f->in.priority);
	else
		printf("hog scheduling:  %s nice %d; real time refused: %s "
		       "(needs root, CAP_SYS_NICE or RLIMIT_RTPRIO)\n",
		       policy(&f->in), f->in.nice, strerror(f->in.rt_errno));
	printf("stop_machine:    %s\n",
	       f->in.policy == SCHED_FIFO || f->in.policy == SCHED_RR
		       ? "available"
		       : "refused (-EPERM) without real time, as are "
			 "the other calls whose promise is exclusion; "
			 "CPUHOG_F_WEAK (CPUHOG_WEAK=1) allows them");
	printf("RT throttling:   %s us of every %s us\n", f->rt_runtime,
	       f->rt_period);
	printf("isolated CPUs:   %s\n", f->isolated);
	printf("nohz_full CPUs:  %s\n", f->nohz);
	if (f->in.flags & CPUHOG_F_POLL)
		printf("mode:            poll: polling on %s; sleeping on %s "
		       "(stepped aside for another task, or parked)\n",
		       f->polling, f->sleeping);
	else
		printf("mode:            sleep on %s (CPUHOG_POLL=1 for poll "
		       "mode)\n",
		       f->hogged);
	printf("cpuidle driver:  %s\n", f->idle);
	printf("hog stack:       %zu KiB\n", f->in.stack_size >> 10);
	printf("membarrier:     ");
	if (f->membarrier < 0)
		printf(" not available");
	for (i = 0; f->membarrier >= 0 && i < sizeof(mb_cmds) / sizeof(mb_cmds[0]);
	     i++)
		if (f->membarrier & mb_cmds[i].bit)
			printf(" %s", mb_cmds[i].name);
	printf("\n");
}

static const char *number_or_null(const char *s)
{
	char *end;

	strtol(s, &end, 10);
	return end != s && !*end ? s : "null";
}

static void print_json(const struct facts *f)
{
	size_t i;
	int first = 1;

	printf("{\"version\": ");
	json_string(stdout, cpuhog_version());
	printf(", \"cpus_online\": ");
	json_string(stdout, f->online);
	printf(", \"cpus_hogged\": ");
	json_string(stdout, f->hogged);
	printf(", \"nr_hogs\": %u, \"policy\": ", f->in.nr_hogs);
	json_string(stdout, policy(&f->in));
	printf(", \"priority\": %d, \"nice\": %d, \"rt_refused\": ",
	       f->in.priority, f->in.nice);
	if (f->in.rt_errno)
		json_string(stdout, strerror(f->in.rt_errno));
	else
		printf("null");
	printf(", \"rt_runtime_us\": %s, \"rt_period_us\": %s",
	       number_or_null(f->rt_runtime), number_or_null(f->rt_period));
	printf(", \"isolated\": ");
	json_string(stdout, f->isolated);
	printf(", \"nohz_full\": ");
	json_string(stdout, f->nohz);
	printf(", \"mode\": \"%s\", \"cpus_polling\": ",
	       f->in.flags & CPUHOG_F_POLL ? "poll" : "sleep");
	json_string(stdout, f->polling);
	printf(", \"cpus_sleeping\": ");
	json_string(stdout, f->sleeping);
	printf(", \"cpuidle\": ");
	json_string(stdout, f->idle);
	printf(", \"stack_bytes\": %zu, \"membarrier\": [", f->in.stack_size);
	for (i = 0; f->membarrier >= 0 && i < sizeof(mb_cmds) / sizeof(mb_cmds[0]);
	     i++)
		if (f->membarrier & mb_cmds[i].bit) {
			printf("%s", first ? "" : ", ");
			json_string(stdout, mb_cmds[i].name);
			first = 0;
		}
	printf("]}\n");
}

int cmd_info(int argc, char **argv)
{
	static const struct option lo[] = { { "json", no_argument, 0, 'j' },
					    { "help", no_argument, 0, 'h' },
					    { 0, 0, 0, 0 } };
	struct facts f;
	int json = 0, c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", lo, NULL)) != -1) {
		if (c == 'j') {
			json = 1;
		} else if (c == 'h') {
			printf("usage: cpuhog info [-j|--json]\n"
			       "  what libcpuhog gets on this machine\n");
			return EXIT_OK;
		} else {
			fprintf(stderr, "usage: cpuhog info [-j|--json]\n");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cpuhog info: unexpected argument '%s'\n",
			argv[optind]);
		return EXIT_USAGE;
	}
	memset(&f, 0, sizeof(f));
	r = tool_start(NULL);
	if (r == 0)
		r = cpuhog_get_info(&f.in);
	if (r < 0) {
		fprintf(stderr, "cpuhog info: cannot start the hogs: %s\n",
			strerror(-r));
		return EXIT_RUNTIME;
	}
	gather(&f);
	if (json)
		print_json(&f);
	else
		print_text(&f);
	cpuhog_shutdown();
	return EXIT_OK;
}
