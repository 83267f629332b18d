/* SPDX-License-Identifier: MIT */
/*
 * Waking hogs: one (cpuhog_i_wake_hog(), hog_sleep()'s other half), and a
 * multi-CPU call's wake tree: the caller pushes every work, then wakes the
 * root (its own CPU's hog where selected); each hog, on taking its slot
 * and before anything else, wakes its at most k children (k:
 * cpuhog_attr.wake_fanout, else CPUHOG_WAKE_FANOUT, else 4).  Hogs wake,
 * not the caller: it runs below them, and a wake it still owes can wait
 * for ever behind a hog whose callback waits for the other CPUs.  A stop's
 * caller wakes the root's first child just before the root, to overlap
 * that remote wake with the switch to the root (not hog_cpus(): its
 * callback may spin for the others in front of the caller).  multi.c's
 * rescue() wakes the hogs still asleep at RESCUE_NS.  A node cuts its
 * subtree's topology-ordered range into k equal parts, each part's first
 * hog a child, so hops near the leaves stay in one cache domain.
 *
 * No wake is lost: a hog's kids are written under multi_lock while its
 * slot is free and read before its work finishes; each child's work is
 * pushed before its parent's, and the waker loads the child's sleeping
 * flag after that push, both seq_cst (Dekker): the child sees its work or
 * the waker sees it asleep.  A hog wakes its children before it may
 * refuse its work, so a refusal never strands a subtree.
 */
#include "internal.h"

#include <stdlib.h>

/* Wake @h for work pushed on its queue, unless it is awake or its poller
 * takes the wake (poll.c). */
void cpuhog_i_wake_hog(struct hog *h)
{
	/* seq_cst, after the producer's seq_cst push: Dekker's pattern
	 * with hog_sleep().  The exchange lets one producer of many pay for
	 * the system call. */
	if (!atomic_load(&h->q.sleeping) || cpuhog_i_poll_offer(h))
		return;
	if (atomic_exchange(&h->q.sleeping, 0))
		cpuhog_i_futex_wake(&h->q.sleeping, 1);
}

#define FANOUT_DEFAULT 4

/* @want, else CPUHOG_WAKE_FANOUT (digits, 2 or more), else the default;
 * at most @nr_hogs, the flat wake. */
unsigned int cpuhog_i_fanout_of(uint64_t want, unsigned int nr_hogs)
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

/* Set the children of the node whose subtree is @o[lo, hi) into @kids;
 * returns how many.  Recursion depth: the tree's. */
static unsigned int plan(struct hog **o, unsigned int lo, unsigned int hi,
			 unsigned int k, struct hog **kids)
{
	unsigned int len = hi - lo, m = len < k ? len : k, j;

	for (j = 0; j < m; j++) {
		unsigned int a = lo + (unsigned int)((uint64_t)len * j / m);
		unsigned int b =
			lo + (unsigned int)((uint64_t)len * (j + 1) / m);

		kids[j] = o[a];
		o[a]->tree.nkids = plan(o, a + 1, b, k, o[a]->tree.kids);
	}
	return m;
}

/*
 * Plan the wake of @s (under multi_lock, every slot free): the caller's
 * own CPU's hog, if selected, moved to the front with its flags; every
 * child after its parent.  Returns the root, which the caller wakes.
 */
struct hog *cpuhog_i_wake_plan(struct ctx *c, struct sel *s)
{
	struct hog **o = s->hog;
	int me = sched_getcpu();
	unsigned int i;

	if (s->n == 0)
		return NULL;
	for (i = 1; i < s->n; i++)
		if ((int)o[i]->cpu == me) {
			struct hog *h = o[i];
			uint32_t f = s->flags[i];

			for (; i > 0; i--) {
				o[i] = o[i - 1];
				s->flags[i] = s->flags[i - 1];
			}
			o[0] = h;
			s->flags[0] = f;
			break;
		}
	o[0]->tree.nkids = plan(o, 1, s->n, c->fanout, o[0]->tree.kids);
	return o[0];
}

/* A hog took its slot: wake its children first. */
void cpuhog_i_wake_kids(struct hog *h)
{
	unsigned int i;

	for (i = 0; i < h->tree.nkids; i++)
		cpuhog_i_wake_hog(h->tree.kids[i]);
}
