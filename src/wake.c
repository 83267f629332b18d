/* SPDX-License-Identifier: MIT */
/*
 * The wake tree: how a multi-CPU call wakes its hogs.
 *
 * Flat, the caller wakes its N hogs one after another, N futex wakes in
 * a row on its own CPU, and the last hog starts N wakes after the first
 * (Go's runtime saw that wavefront grow to 800 us at 384 cores).  Here
 * the caller pushes every hog's work (a CAS each, no system call), then
 * wakes at most k of them; each hog, as soon as it takes its work and
 * before it runs anything, wakes its own at most k.  The caller makes at
 * most k wakes and every hog's wake comes ceil(log_k N) hops after the
 * call.  k is cpuhog_attr.wake_fanout (default 4; CPUHOG_WAKE_FANOUT in
 * the environment); k >= N is the flat wake of before.  (The caller's own
 * CPU's hog is one wake more: see below.)
 *
 * The shape: the hogs stand in topology order (topology.c).  The caller's
 * own CPU's hog stays out of the tree: the caller wakes it itself, after
 * its other wakes, since it preempts the caller (woken by another hog it
 * could preempt the caller before the caller's last wake).  A node whose subtree is the
 * list's range [lo, hi) cuts it into at most k equal contiguous parts;
 * each part's first hog is a child, whose subtree is the rest of its
 * part.  Parts near the leaves are small and contiguous, so most hops
 * stay inside one cache domain.
 *
 * Why no wake is lost: the caller writes each selected hog's children
 * (struct hog.kids) under the multi-CPU lock while that hog's slot is
 * free (multi_reserve() waited for it), before the push that publishes
 * them; the hog reads them after it took the slot from its queue, and
 * before it finishes the work, after which the slot may be reserved and
 * the children rewritten.  A child's work was pushed before its parent's
 * (all pushes precede the first wake), so the parent's wake_hog() reads
 * the child's sleeping flag after the child's push, both seq_cst: the
 * child sees its work, or the parent sees it asleep (the Dekker pattern
 * of hog.c, with the push made by the caller and the look by the
 * parent).  A hog refuses its work (off its CPU) only after it has woken
 * its children, so a refusal never strands a subtree.  A spurious wake
 * (a stale slot of an abandoned stop, read with its old children) finds
 * an empty queue and costs one futex wake.
 */
#include "internal.h"

#include <stdlib.h>

#define FANOUT_DEFAULT 4

/*
 * The fan-out: @want from the attributes, else CPUHOG_WAKE_FANOUT
 * (digits, 2 or more; anything else is ignored), else the default; at
 * most @nr_hogs, which is the flat wake.
 */
unsigned int fanout_of(uint64_t want, unsigned int nr_hogs)
{
	const char *s = getenv("CPUHOG_WAKE_FANOUT");
	unsigned long long k = want;
	char *end;

	if (!k && s && *s >= '0' && *s <= '9') {
		k = strtoull(s, &end, 10);
		if (*end || k < 2)
			k = 0;
	}
	if (!k)
		k = FANOUT_DEFAULT;
	if (k > nr_hogs)
		k = nr_hogs ? nr_hogs : 1;
	return (unsigned int)k;
}

/*
 * The children of a node whose subtree is @o[lo, hi), into @kids: the
 * first hog of each of at most @k equal parts; each child's subtree is
 * the rest of its part.  Returns how many.  Recursion depth: the tree's.
 */
static unsigned int plan(struct hog **o, unsigned int lo, unsigned int hi,
			 unsigned int k, struct hog **kids)
{
	unsigned int len = hi - lo, m = len < k ? len : k, j;

	for (j = 0; j < m; j++) {
		unsigned int a = lo + (unsigned int)((uint64_t)len * j / m);
		unsigned int b =
			lo + (unsigned int)((uint64_t)len * (j + 1) / m);

		kids[j] = o[a];
		o[a]->nkids = plan(o, a + 1, b, k, o[a]->kids);
	}
	return m;
}

/*
 * Plan the wake of the @n hogs in @o (c->msel, topology order; under the
 * multi-CPU lock, every slot free): the caller's own CPU's hog moved to
 * the end, each hog's children set.  The caller's own children go to
 * c->roots; returns how many.
 */
unsigned int wake_plan(struct ctx *c, struct hog **o, uint32_t *flags,
		       unsigned int n)
{
	int me = sched_getcpu();
	unsigned int i, roots;

	for (i = 0; i + 1 < n; i++)
		if ((int)o[i]->cpu == me) {
			struct hog *h = o[i];
			uint32_t f = flags[i];

			for (; i + 1 < n; i++) {
				o[i] = o[i + 1];
				flags[i] = flags[i + 1];
			}
			o[n - 1] = h;
			flags[n - 1] = f;
		}
	if (n == 0 || (int)o[n - 1]->cpu != me)
		return plan(o, 0, n, c->fanout, c->roots);
	/* our own CPU's hog: outside the tree, woken by us, after the
	 * roots; woken by a hog, it could preempt us before our last root
	 * wake and, in a callback that waits for the other CPUs, hold
	 * their subtrees asleep (16 s at 64 vCPUs, until RT throttling let
	 * us run) */
	roots = plan(o, 0, n - 1, c->fanout, c->roots);
	o[n - 1]->nkids = 0;
	c->roots[roots] = o[n - 1];
	return roots + 1;
}

/* A hog took its slot: wake its children first (see the note on top). */
void wake_kids(struct hog *h)
{
	unsigned int i;

	for (i = 0; i < h->nkids; i++)
		wake_hog(h->kids[i]);
}
