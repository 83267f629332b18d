/* SPDX-License-Identifier: MIT */
/*
 * A stop's own outcome (stop_machine.c fills it; multi.c and sched.c
 * too, for the reports of hog_cpus_report() and hog_synchronize_report()):
 * internal for now, so that tests judge each stop by what happened in it,
 * not by process-wide counters that another thread's stop could move.
 * Linked in from the static library (tests/test_stop.c).
 */
#ifndef CPUHOG_OUTCOME_H
#define CPUHOG_OUTCOME_H

#include "cpuhog.h"

/* How the last rendezvous ended (ended), and why a hold was released. */
enum {
	STOP_RAN = 1,	 /* reached EXIT: fn ran where fn_runs says */
	STOP_TIMEDOUT,	 /* the deadline passed before RUN */
	STOP_NOCPU,	 /* a CPU of the set went away before RUN */
	STOP_LOST = 1,	 /* released: a held CPU went away while fn ran */
	STOP_OVERRUN,	 /* released: fn ran past overrun_ns */
};

struct stop_outcome {
	int ret;	       /* what the call returned */
	unsigned int tries;    /* rendezvous begun (more: CPUs went away) */
	unsigned int ended;    /* STOP_RAN... of the last one */
	unsigned int fn_runs;  /* hogs that ran fn in it, */
	unsigned int fn_want;  /* of how many asked */
	unsigned int released; /* 0: the hold stood; STOP_LOST, STOP_OVERRUN */
	bool pushed;	       /* the last try's works were queued */
	bool serialized;       /* held the machine-wide lock (serialize.c); */
	bool lock_waited_out;  /* not: it was held past its bound */
	bool lock_waited;      /* and found it held by another process */
	cpu_set_t ran;	       /* the CPUs (below CPU_SETSIZE) fn ran on */
	/* stop_machine_report(): the caller's report (NULL: none; then
	 * nothing below is taken), and the call's start */
	struct cpuhog_report *rep;
	uint64_t t0;
	/* hog_cpus_report(), hog_synchronize_report(): CPUs reported whose
	 * hog did not run there (then not every CPU was had) */
	unsigned int absent;
};

/* stop_machine() (@two false) or stop_two_cpus(@cpu1, @cpu2), and how it
 * went, into @o (unless NULL) and @rep (unless NULL); returns what they
 * return. */
__attribute__((visibility("hidden"))) int
cpuhog_i_stop_report(cpuhog_fn_t fn, void *data, size_t setsize,
		     const cpu_set_t *cpus, bool two, unsigned int cpu1,
		     unsigned int cpu2, struct stop_outcome *o,
		     struct cpuhog_report *rep);
#define cpuhog_i_stop_outcome(fn, data, setsize, cpus, two, cpu1, cpu2, o) \
	cpuhog_i_stop_report(fn, data, setsize, cpus, two, cpu1, cpu2, o, NULL)

#endif
