/* SPDX-License-Identifier: MIT */
/*
 * cpuhog bench: every call of the library against the physical limits
 * and the peers, interleaved round by round in one run, so that a noisy
 * machine moves all figures together and the ratios hold.
 */
#ifndef CPUHOG_BENCH_H
#define CPUHOG_BENCH_H

#include "../tools/tool.h"

#include <cpuhog.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The placement every measurement shares: the caller on @here, the
 * remote side on @there. */
struct placement {
	unsigned int here, there;
	unsigned int ncpus; /* hogged CPUs */
	cpu_set_t cpus;
};

struct op;
/* One timed operation; returns nanoseconds, or < 0 on failure. */
typedef double (*op_run_fn)(struct op *op);

struct op {
	const char *name;
	const char *kind; /* "ours", "limit", "peer" */
	/* per batch: start helpers; returns NULL or why it is skipped */
	const char *(*setup)(struct op *op);
	op_run_fn run;
	void (*teardown)(struct op *op);
	/* a peer measured by a helper program (bench/peer.h): its name
	 * (cpuhog-bench-NAME) and the tag it measures */
	const char *helper;
	const char *child;
	const char *child_env; /* NAME=VALUE for the child, or NULL */
	const char *skip;      /* why it was not measured */
	const char *error;     /* why it stopped (a failed call) */
	void *state;
	char why[96];
	double *ns;
	size_t n, cap;
	/* kernel entries of the whole process over @calls calls (entries.c) */
	uint64_t entries, calls;
	bool no_entries; /* other threads call too (crowd.c): not counted */
};

struct bench_opts {
	bool quick, json;
	unsigned int rounds;
	double budget_ms; /* per op per round */
};

extern struct placement bench_place;

/* The pause between two samples, spinning: every operation finds the
 * other side idle, as a library that sleeps when idle usually does. */
extern uint64_t bench_gap_ns;
void bench_gap(void);
void bench_entries_open(void);
uint64_t bench_entries(void);
extern const char *bench_entries_why; /* NULL: counted */
void bench_pin(unsigned int cpu);
unsigned int bench_nth_cpu(unsigned int n);
int bench_add_sample(struct op *op, double ns);
int bench_cmp_double(const void *a, const void *b); /* for qsort */
struct op *bench_op_named(struct op *ops, size_t n, const char *name);

/* A thread of ours spinning on the remote CPU during a batch: the case
 * where a barrier has a running thread to reach. */
const char *busy_setup(struct op *op);
void busy_teardown(struct op *op);

/* The operations, by family; each fills @ops and returns how many. */
size_t ours_ops(struct op *ops);
size_t limit_ops(struct op *ops);
size_t peer_ops(struct op *ops);
size_t poll_ops(struct op *ops);
/* The sleeping limit's partner (limits.c), for bench --model (model.c). */
const char *limit_sleep_setup(struct op *op);
double limit_wake_cost(struct op *op);
void limit_partner_end(struct op *op);
int bench_model(bool json);
/* Barriers with concurrent callers (crowd.c); hog_synchronize()'s passes
 * and calls over its row's batches, all callers counted. */
size_t crowd_ops(struct op *ops);
struct crowd_result {
	uint64_t calls, passes;
};
extern struct crowd_result bench_crowd;
/* Our timed calls (bench/ours.c), shared with the poll rows. */
double ours_one_remote(struct op *op);
double ours_cpus_all(struct op *op);
double ours_stop_all(struct op *op);
double ours_synchronize(struct op *op);
/* Why stop_machine() cannot be measured here (no real-time hogs), or
 * NULL. */
const char *ours_need_rt(struct op *op);
/* What a stop costs another process (bench/stop_cost.c): the time a busy
 * thread of it loses per stop_machine() of a 20 us fn; its target is at
 * most fn + 20 us. */
#define STOP_COST_ROW "stop of 20 us fn: other process loses"
#define STOP_COST_FN_NS 20000.0
#define STOP_COST_TARGET_NS (STOP_COST_FN_NS + 20000.0)
size_t stop_cost_ops(struct op *ops);
/* Every CPU busy, with threads of ours or of another process
 * (bench/busy_all.c): stop_machine, hog_synchronize and membarrier. */
#define BUSY_STOP_OURS "stop_machine, ours busy on every CPU"
#define BUSY_SYNC_OURS "hog_synchronize, ours busy on every CPU"
#define BUSY_MB_OURS "membarrier PRIVATE_EXP., ours busy on every CPU"
size_t busy_all_ops(struct op *ops);
/* What poll mode costs others (bench/poll.c): the throughput a CPU-bound
 * process keeps on a polled CPU, and the pollers' CPU time when idle
 * (share of each polled CPU). */
struct poll_cost {
	double kept, poller_share;
	const char *skip;
};
#define POLL_COST_ROUNDS 16
void poll_costs(struct poll_cost *pc, unsigned int rounds, double idle_s);
/* CPU time of our threads whose name starts with @prefix, in ns. */
unsigned long long bench_threads_runtime(const char *prefix);

/* Children: `cpuhog bench --child TAG BUDGET_MS` prints one sample a
 * line ("NAME NS").  Returns the exit status. */
int bench_child(const char *tag, double budget_ms);
/* The peer helpers: the path of cpuhog-bench-NAME into @buf; why it
 * cannot run (static), or NULL. */
const char *bench_helper(const char *name, char *buf, size_t size);
/* The busiest threads of each CPU of @cpus over a 200 ms look, as
 * "CPU 1: name (pid N) 97%, ...; CPU 3: ..." (cpu_users.c). */
void bench_cpu_users(size_t setsize, const cpu_set_t *cpus, char *buf,
		     size_t size);
const char *bench_helper_missing(const char *name);
int bench_rss_child(void);

#endif
