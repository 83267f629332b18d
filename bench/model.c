/* SPDX-License-Identifier: MIT */
/*
 * cpuhog bench --model: stop_machine() and hog_synchronize() at 64 to
 * 4,096 CPUs, predicted from constants measured here, flat against tree
 * (docs/SCALING.md: the model, its constants and what it leaves out).
 *
 * The constants, each the median of MODEL_SAMPLES on two CPUs:
 *   c  one cache-line transfer: half the spinning round trip;
 *   w  the waker's own cost of one futex wake of a sleeping thread on
 *      the other CPU (the system call alone);
 *   L  the wake-up latency: the sleeping round trip less w and c.
 * The model, for N hogs and fan-out k (d = the tree's levels):
 *   wake   the caller's one wake, of its own CPU's hog, which preempts
 *          it at once (w), then the root's subtree: a node wakes its
 *          children one by one, the j-th running j*w + L after the
 *          node; flat is k = N - 1, the root waking all;
 *   count  one phase of the rendezvous: flat, N read-modify-writes of
 *          one line in a row, N*c; a combining tree, k per level, d*k*c;
 *          the last one's store then reaches the spinners, c;
 *   stop   wake + 4 counted phases (arrive, hold, check, run);
 *   sync   wake + one count (the works' completions).
 * The caller, preempted by its own CPU's hog, runs again when that hog
 * is done and finds the call over: no wake back, and nothing charged.
 * The library: the tree wake and the flat count ("w-tree": its stop
 * counts every phase on one word); hog_synchronize() counts its works'
 * completions flat ("sync today").  "c-tree" adds a combining-tree
 * count, a design the library does not build today (docs/SCALING.md).
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_SAMPLES 400
#define MODEL_K 4

struct consts {
	double c, w, l;      /* ns */
	double stop2, sync2; /* measured here, all hogged CPUs; < 0: none */
	const char *why;     /* why a constant is missing, or NULL */
};

/* The median of @run over MODEL_SAMPLES calls, after @setup; < 0: none. */
static double median_of(struct op *op)
{
	static double s[MODEL_SAMPLES];
	size_t n = 0, i;

	op->why[0] = 0;
	if (op->setup && (op->skip = op->setup(op)))
		return -1;
	for (i = 0; i < MODEL_SAMPLES; i++) {
		double ns = op->run(op);

		bench_gap();
		if (ns >= 0)
			s[n++] = ns;
	}
	if (op->teardown)
		op->teardown(op);
	if (n < MODEL_SAMPLES / 2)
		return -1;
	qsort(s, n, sizeof(s[0]), bench_cmp_double);
	return s[n / 2];
}

static double find_median(struct op *ops, size_t n, const char *name)
{
	struct op *op = bench_op_named(ops, n, name);

	return op ? median_of(op) : -1;
}

static void measure(struct consts *k)
{
	struct op ops[24];
	size_t n;
	double spin, sleep;

	memset(ops, 0, sizeof(ops));
	n = limit_ops(ops);
	spin = find_median(ops, n, "limit: cache-line round trip");
	sleep = find_median(ops, n, "limit: futex wake of a sleeping thread");
	memset(ops, 0, sizeof(ops));
	ops[0] = (struct op){ .name = "wake cost", .setup = limit_sleep_setup,
			      .run = limit_wake_cost,
			      .teardown = limit_partner_end };
	k->w = median_of(&ops[0]);
	k->why = spin < 0 || sleep < 0 || k->w < 0 ? "needs two CPUs" : NULL;
	k->c = spin / 2;
	k->l = sleep - k->w - k->c;
	if (k->l < 0)
		k->l = 0;
	memset(ops, 0, sizeof(ops));
	n = ours_ops(ops);
	k->stop2 = find_median(ops, n, "stop_machine, all CPUs");
	k->sync2 = find_median(ops, n, "hog_synchronize");
}

/*
 * The last wake of a subtree of @n hogs whose root runs at 0, as
 * src/wake.c plans it: the n - 1 others cut into at most @k equal parts,
 * each part's first hog a child, woken in order.
 */
static double subtree(unsigned int n, unsigned int k, const struct consts *c)
{
	unsigned int len = n - 1, m = len < k ? len : k, j;
	double worst = 0;

	for (j = 0; j < m; j++) {
		unsigned int a = (unsigned int)((uint64_t)len * j / m);
		unsigned int b = (unsigned int)((uint64_t)len * (j + 1) / m);
		double t = (j + 1) * c->w + c->l + subtree(b - a, k, c);

		if (t > worst)
			worst = t;
	}
	return worst;
}

static unsigned int levels(unsigned int n, unsigned int k)
{
	unsigned int d = 0;
	uint64_t span = 1;

	while (span < n) {
		span *= k;
		d++;
	}
	return d;
}

static double wake(unsigned int n, unsigned int k, const struct consts *c)
{
	return c->w + subtree(n, k, c);
}

/* one phase's count: flat, or a combining tree, which counts on the
 * word alone where n <= k */
static double count(unsigned int n, unsigned int k, bool tree,
		    const struct consts *c)
{
	return (tree && n > k ? levels(n, k) * k : n) * c->c + c->c;
}

struct row {
	unsigned int n;
	double stop_flat, stop_today, stop_tree, sync_flat, sync_today;
};

static void predict(struct row *r, unsigned int n, const struct consts *c)
{
	double wf = wake(n, n > 1 ? n - 1 : 1, c), wt = wake(n, MODEL_K, c);

	r->n = n;
	r->stop_flat = wf + 4 * count(n, MODEL_K, false, c);
	r->stop_today = wt + 4 * count(n, MODEL_K, false, c);
	r->stop_tree = wt + 4 * count(n, MODEL_K, true, c);
	r->sync_flat = wf + count(n, MODEL_K, false, c);
	r->sync_today = wt + count(n, MODEL_K, false, c);
}

static const unsigned int sizes[] = { 2, 64, 256, 1024, 4096 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void print_text(const struct consts *c, const struct row *rows)
{
	size_t i;

	printf("constants (median of %d, CPUs %u and %u): cache line %.0f ns, "
	       "futex wake (waker) %.0f ns, wake-up latency %.0f ns\n",
	       MODEL_SAMPLES, bench_place.here, bench_place.there, c->c, c->w,
	       c->l);
	printf("fan-out %d; times in us; w-tree = tree wake + flat count, "
	       "c-tree = tree wake + combining-tree count\n\n",
	       MODEL_K);
	printf("%6s  %12s %12s %12s   %12s %12s\n", "CPUs", "stop flat",
	       "stop w-tree", "stop c-tree", "sync flat", "sync today");
	for (i = 0; i < NSIZES; i++)
		printf("%6u  %12.1f %12.1f %12.1f   %12.1f %12.1f\n",
		       rows[i].n, rows[i].stop_flat / 1e3,
		       rows[i].stop_today / 1e3, rows[i].stop_tree / 1e3,
		       rows[i].sync_flat / 1e3, rows[i].sync_today / 1e3);
	printf("\nmeasured here (%u hogged CPUs): stop_machine ",
	       bench_place.ncpus);
	if (c->stop2 >= 0)
		printf("%.1f us", c->stop2 / 1e3);
	else
		printf("not measured (no real-time priority)");
	printf(", hog_synchronize %.1f us; the model at %u: %.1f and %.1f "
	       "us\n",
	       c->sync2 / 1e3, bench_place.ncpus, rows[NSIZES].stop_tree / 1e3,
	       rows[NSIZES].sync_today / 1e3);
	printf("the library: stop w-tree (the count on one word; c-tree at "
	       "N <= %d is the same) and sync today; docs/SCALING.md\n",
	       MODEL_K);
}

static void print_json(const struct consts *c, const struct row *rows)
{
	size_t i;

	printf("{\"model\": {\"cache_line_ns\": %.0f, \"wake_ns\": %.0f, "
	       "\"wakeup_latency_ns\": %.0f, \"fanout\": %d,\n \"rows\": [",
	       c->c, c->w, c->l, MODEL_K);
	for (i = 0; i < NSIZES; i++)
		printf("%s\n  {\"cpus\": %u, \"stop_flat_ns\": %.0f, "
		       "\"stop_today_ns\": %.0f, \"stop_ctree_ns\": %.0f, "
		       "\"sync_flat_ns\": %.0f, \"sync_today_ns\": %.0f}",
		       i ? "," : "", rows[i].n, rows[i].stop_flat,
		       rows[i].stop_today, rows[i].stop_tree,
		       rows[i].sync_flat, rows[i].sync_today);
	printf("],\n \"here\": {\"cpus\": %u, \"stop_ns\": %.0f, "
	       "\"sync_ns\": %.0f, \"model_stop_ns\": %.0f, "
	       "\"model_sync_ns\": %.0f}}}\n",
	       bench_place.ncpus, c->stop2, c->sync2,
	       rows[NSIZES].stop_tree, rows[NSIZES].sync_today);
}

int bench_model(bool json)
{
	struct row rows[NSIZES + 1];
	struct consts c;
	size_t i;

	memset(&c, 0, sizeof(c));
	measure(&c);
	if (c.why) {
		fprintf(stderr, "cpuhog bench: --model %s\n", c.why);
		return EXIT_RUNTIME;
	}
	for (i = 0; i < NSIZES; i++)
		predict(&rows[i], sizes[i], &c);
	predict(&rows[NSIZES], bench_place.ncpus, &c);
	if (json)
		print_json(&c, rows);
	else
		print_text(&c, rows);
	return EXIT_OK;
}
