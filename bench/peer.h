/* SPDX-License-Identifier: MIT */
/*
 * The benchmark's peer helpers: one small program per peer library
 * (cpuhog-bench-openmp, -dpdk, -urcu), so that the cpuhog tool itself
 * needs only libcpuhog.  `cpuhog bench` runs each, once per round, from
 * ../libexec/cpuhog beside its own binary (the build tree has the same
 * layout), and reports a missing one as skipped.  A distribution can ship
 * them in a package of their own.
 *
 * The protocol:  cpuhog-bench-NAME TAG BUDGET_MS GAP_US HERE THERE CPU...
 * (the caller's CPU, the remote CPU, every CPU taking part, in order).
 * The helper prints one sample in nanoseconds a line, or one line
 * "skip REASON", and exits 0; anything else is a failed run.
 */
#ifndef CPUHOG_BENCH_PEER_H
#define CPUHOG_BENCH_PEER_H

#include <stdint.h>

#define PEER_MAX_CPUS 1024

struct peer_place {
	unsigned int here, there, ncpus;
	unsigned int cpu[PEER_MAX_CPUS];
};
extern struct peer_place peer_place;

uint64_t peer_now_ns(void);
/* The pause between samples, spinning, as in the tool's own rows. */
void peer_gap(void);
void peer_pin(unsigned int cpu);

/* Each helper: measure @tag for @budget_ms; returns the exit status. */
int peer_run(const char *tag, double budget_ms);

#endif
