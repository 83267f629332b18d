/* SPDX-License-Identifier: MIT */
#ifndef CPUHOG_TOOL_H
#define CPUHOG_TOOL_H

#include "parse.h"

#include <cpuhog.h>
#include <stdbool.h>
#include <stdio.h>

/* Exit statuses of every subcommand. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* The longest the tool holds CPUs at a stretch without --force (stall's
 * --for, noise's continuous run on every CPU): long enough for any
 * measurement of a stall, short of what watchdogs call a hang. */
#define TOOL_MAX_HOLD_NS 500000000ull

int cmd_tour(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_stall(int argc, char **argv);
int cmd_noise(int argc, char **argv);

/* A CPU set sized for the machine (CPU ids past 1023 too). */
struct tool_set {
	cpu_set_t *set; /* CPU_ALLOC()ed: CPU_FREE() it */
	size_t size;
	unsigned int ids; /* nr_cpu_ids */
};

/* Parse @list against the hogged CPUs; *all: it is every one of them.
 * Returns the count, or -EXIT_USAGE / -EXIT_RUNTIME after a message. */
int tool_cpus(const char *cmd, const char *list, struct tool_set *out,
	      int *all);
/* Start the hogs with @a (NULL: the defaults) on the CPUs this command
 * was started on (taskset, numactl), as oslat and rtla keep to theirs:
 * the library's own default is every CPU.  Returns cpuhog_init()'s. */
int tool_start(struct cpuhog_attr *a);
/* Parse a duration option; -1 after a message. */
int tool_duration(const char *cmd, const char *opt, const char *s,
		  uint64_t *ns);
void json_string(FILE *f, const char *s);
/* The hogs' scheduling, "SCHED_FIFO 99" or "SCHED_OTHER nice 0". */
const char *tool_policy(char *buf, size_t size);
/* Say once on stderr what priority the hogs have, and without real time
 * what that means for @cmd (@without_rt); returns whether it is RT. */
bool tool_say_priority(const char *cmd, const char *without_rt);
/* CLOCK_MONOTONIC in nanoseconds: every timing of the tool and bench. */
uint64_t tool_now_ns(void);

#endif
