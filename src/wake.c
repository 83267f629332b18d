/* SPDX-License-Identifier: MIT */
/*
 * Waking hogs: one (cpuhog_i_wake_hog(), the other half of hog.c's
 * hog_sleep()), and the wake tree, how a multi-CPU call wakes its hogs.
 *
 * Flat, the caller would wake its N hogs one after another, N futex
 * wakes in a row, the last hog woken N wakes after the first.  Here the
 * caller pushes every hog's work (a CAS each, no system call), then
 * wakes one, the root (a stop: two, below); each hog, as soon as it
 * takes its work and before it runs anything, wakes its own at most k
 * children: every hog is woken 1 + ceil(log_k (N - 1)) hops after the
 * call.  k is cpuhog_attr.wake_fanout (default 4; CPUHOG_WAKE_FANOUT in
 * the environment); k >= N is a flat wake made by the root.
 *
 * Why the hogs wake each other: the caller runs below the hogs,
 * unpinned, and a wake it still owes can wait for ever: its own CPU's
 * hog preempts it as soon as it is woken, and a caller the kernel moves
 * lands behind another hog; where that hog's callback waits for the
 * other CPUs (a rendezvous), nothing lets the caller run.  The kernel
 * disables preemption around its queueing for this; user space cannot,
 * so the hogs, which nothing of ours preempts, make the wakes.  The root
 * is the caller's own CPU's hog where the call has one: it preempts the
 * caller anyway.  In a stop the caller wakes the root's first child
 * itself, just before the root: that wake, to another CPU, is the slow
 * one (an IPI, and an exit from idle there), and so it overlaps the
 * switch to the root instead of following it.  The root then finds that
 * child awake.  Should the caller lose its CPU to that child between the
 * two wakes, the child's hog sleeps in PREPARE after spin_ns and the
 * caller goes on.  Only a stop: a hog_cpus() callback may wait for the
 * others' (a rendezvous of its own), and would then spin for ever in
 * front of the caller.
 *
 * The rescue: a hog that runs late (its CPU held by another process's
 * thread at its priority, or busy with a long work) wakes its subtree
 * late, and their callbacks would wait for another CPU's hog.  So a
 * caller whose call is still pending RESCUE_NS after the push wakes
 * every hog of it that still sleeps on its queued slot (rescue(),
 * multi.c).  It only adds to the tree, which alone wakes every hog: the
 * caller may be unable to run (its CPU's hog spinning in a stop).  A
 * call that ends sooner makes no rescue, so no thread's system calls
 * grow with N; one that does wakes only the late subtrees.
 *
 * The shape: the hogs stand in topology order (topology.c), the root
 * first.  A node whose subtree is the list's range [lo, hi) cuts it into
 * at most k equal contiguous parts; each part's first hog is a child,
 * whose subtree is the rest of its part.  Parts near the leaves are small
 * and contiguous, so most hops stay inside one cache domain.
 *
 * Why no wake is lost: the caller writes each selected hog's children
 * (struct hog.kids) under the multi-CPU lock while that hog's slot is
 * free (cpuhog_i_multi_reserve() waited for it), before the push that
 * publishes them; the hog reads them after it took the slot from its
 * queue, and before it finishes the work, after which they may be
 * rewritten.  Every child's work is pushed before its parent's
 * (cpuhog_i_multi_push() pushes in reverse plan order, a child stands
 * after its parent): a parent that is awake may take its slot the moment
 * it is pushed, and its wake must find the child's work there.  So the
 * parent's cpuhog_i_wake_hog() reads the child's sleeping flag after the
 * child's push, both seq_cst: the child sees its work, or the parent
 * sees it asleep (Dekker's pattern, the push made by the caller, the
 * look by the parent or, in a rescue or for a stop's first child, the
 * caller).  A hog refuses its work (off its CPU) only after it has woken
 * its children, so a refusal never strands a subtree.  A spurious wake
 * (a stale slot of an abandoned stop, read with its old children) finds
 * an empty queue and costs one futex wake.
 */
#include "internal.h"

#include <stdlib.h>

/*
 * Wake @h for work pushed on its queue (cpuhog_i_push_work(), hog.c), unless it
 * is awake or its poller takes the wake (cpuhog_i_poll_offer(), poll.c).
 */
void cpuhog_i_wake_hog(struct hog *h)
{
	/* seq_cst, after the producer's seq_cst push: Dekker's pattern
	 * with hog_sleep() (platform.c's note on waiting).  The exchange
	 * lets one producer of many pay for the system call. */
	if (!atomic_load(&h->q.sleeping) || cpuhog_i_poll_offer(h))
		return; /* awake, or its poller took the wake (poll.c) */
	if (atomic_exchange(&h->q.sleeping, 0))
		cpuhog_i_futex_wake(&h->q.sleeping, 1);
}


#define FANOUT_DEFAULT 4

/*
 * The fan-out: @want from the attributes, else CPUHOG_WAKE_FANOUT
 * (digits, 2 or more; anything else is ignored), else the default; at
 * most @nr_hogs, which is the flat wake.
 */
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
		o[a]->tree.nkids = plan(o, a + 1, b, k, o[a]->tree.kids);
	}
	return m;
}

/*
 * Plan the wake of the hogs of @s (topology order; under the multi-CPU
 * lock, every slot free): the root first (the caller's own CPU's hog
 * where it is one of them, moved to the front with its flags), each
 * hog's children set, every child after its parent in @s.  Returns the
 * root, the one hog the caller wakes; NULL for none.
 */
struct hog *cpuhog_i_wake_plan(struct ctx *c, struct sel *s)
{
	struct hog **o = s->hog;
	int me = sched_getcpu();
	unsigned int i;

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
	if (s->n == 0)
		return NULL;
	o[0]->tree.nkids = plan(o, 1, s->n, c->fanout, o[0]->tree.kids);
	return o[0];
}

/* A hog took its slot: wake its children first (see the note on top). */
void cpuhog_i_wake_kids(struct hog *h)
{
	unsigned int i;

	for (i = 0; i < h->tree.nkids; i++)
		cpuhog_i_wake_hog(h->tree.kids[i]);
}
