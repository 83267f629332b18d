/* SPDX-License-Identifier: MIT */
/* Per-CPU counts of what interrupted a CPU (noise_src.c). */
#ifndef CPUHOG_NOISE_SRC_H
#define CPUHOG_NOISE_SRC_H

#include <stdint.h>
#include <stdio.h>

#define NOISE_SRC_LABEL 40

/* Rows of per-CPU counts: row i, CPU c at v[i * ncpu + c]. */
struct noise_src {
	unsigned int n, cap, ncpu;
	char (*label)[NOISE_SRC_LABEL]; /* "irq LOC", "softirq TIMER" */
	uint64_t *v;
};

/* Read /proc/interrupts and /proc/softirqs for CPUs 0..@ncpu-1; -1 if
 * either cannot be read (@s is then empty). */
int noise_src_read(struct noise_src *s, unsigned int ncpu);
/* @after becomes @after - @before, row by row (matched by label). */
void noise_src_delta(struct noise_src *after, const struct noise_src *before);
/* ", label count" for the @top largest counts of @cpu, to stdout. */
void noise_src_text(const struct noise_src *d, unsigned int cpu,
		    unsigned int top);
/* {"label": count, ...} of @cpu's nonzero counts. */
void noise_src_json(const struct noise_src *d, unsigned int cpu, FILE *f);
void noise_src_free(struct noise_src *s);

#endif
