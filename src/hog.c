/* SPDX-License-Identifier: MIT */
/*
 * The hogs and their queues: one thread per CPU, pinned, at the highest
 * priority the process may have, that sleeps until work is queued, then
 * runs it in order, and nothing else.  A queue is a lock-free stack
 * (push: one CAS; take: one exchange of the whole), with no half-linked
 * state, so a hog at FIFO 99 never waits for a producer preempted
 * mid-push.  Every wait ends on a futex, never in an unbounded spin, so no
 * caller of any priority starves, or is starved by, the hog it waits for.
 * work_finish() publishes a completion: the work's state word and, in a
 * multi-CPU call, the call's count, whose zero wakes the caller.  Kernel
 * entries per work: the futex wait, an rt_sigpending() after completion
 * (report.c), and a getrusage() per wake or switched-out fn (switches.c).
 */
#include "internal.h"
#include "probes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

static void hog_sleep(struct hog *h)
{
	struct wait w = WAIT(&h->q.sleeping, 1, 0, NO_DEADLINE);

	/* seq_cst loads: Dekker with cpuhog_i_wake_hog() (platform.c) */
	while (atomic_load(&h->q.head) == NULL && !atomic_load(&h->stop))
		cpuhog_i_wait_turn(&w);
	/* relaxed: only a hint for producers; the queue itself is re-read */
	atomic_store_explicit(&h->q.sleeping, 0, memory_order_relaxed);
}

static void group_arrive(struct group *g, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(&g->word, memory_order_relaxed);

	do {
		/* A stale generation: the call gave up on us long ago. */
		if ((uint32_t)(v >> 32) != gen || (uint32_t)v == 0)
			return;
		/* acq_rel: our result before the count, for the caller */
	} while (!atomic_compare_exchange_weak_explicit(
		&g->word, &v, v - 1, memory_order_acq_rel,
		memory_order_relaxed));
	if ((uint32_t)(v - 1) == 0)
		cpuhog_i_wait_kick(&g->seq); /* cpuhog_i_multi_wait()'s */
}

/* Publish a work's result.  After the exchange the owner may reuse @w. */
static void work_finish(struct work *w, int ret, uint32_t ran)
{
	struct group *g = w->group;
	uint32_t gen = w->gen, old;

	w->ret = ret;
	w->ran = ran;
	/* release: ret and ran before DONE, for the waiter's acquire */
	old = atomic_exchange_explicit(&w->state, W_DONE, memory_order_release);
	if (old & W_WAITER)
		cpuhog_i_futex_wake(&w->state, INT_MAX);
	if (g)
		group_arrive(g, gen);
}

/* relaxed: work_finish()'s release publishes it to the caller */
static void stamp_now(_Atomic uint64_t *at)
{
	atomic_store_explicit(at, cpuhog_i_now_ns(), memory_order_relaxed);
}

/* Run @w; false, with @w untouched, where the hog's last look before fn
 * finds it moved off its CPU. */
static bool run_one(struct hog *h, struct work *w)
{
	bool internal = w->flags & W_F_INTERNAL;
	bool check = !internal && !(h->ctx->flags & CPUHOG_F_NO_CHECKS);
	struct check ck;
	int ret;

	if (check)
		cpuhog_i_check_begin(h, &ck);
	/* a move during cpuhog_i_check_begin()'s system call: look again */
	if (check && sched_getcpu() != (int)h->cpu)
		return false;
	PROBE3(fn_start, h->cpu, w->fn, w->arg);
	if (w->flags & W_F_TIMED) /* a report was asked for */
		stamp_now(&h->t.arrived);
	ret = w->fn(w->arg);
	if (w->flags & W_F_TIMED)
		stamp_now(&h->t.released);
	PROBE3(fn_end, h->cpu, w->fn, ret);
	if (check)
		cpuhog_i_check_end(h, w->fn, &ck);
	else if (!internal && sched_getcpu() != (int)h->cpu)
		hog_bump(&h->count.migrated);
	hog_bump(&h->count.run);
	work_finish(w, ret, 1);
	/* after the completion, as a wake's cold first system call would
	 * delay the caller (hog_one_cpu(3), NOTES) */
	if (!internal)
		cpuhog_i_redirect_signals(h);
	return true;
}

/* Where the hog runs, for its own checks and its callers' hints. */
static void note_where(struct hog *h, bool here)
{
	h->off_cpu = !here;
	h->pin.pinned = h->pin.pinned && here;
	/* relaxed: a hint for multi-CPU callers, who check it */
	if (atomic_load_explicit(&h->away, memory_order_relaxed) == here)
		atomic_store_explicit(&h->away, !here, memory_order_relaxed);
}

/*
 * Whether this hog runs pinned to its CPU, re-pinning it if it can.  The
 * affinity (a system call; sched_getcpu() is free) is read when a hog
 * found itself off (g_moved) and every REREAD_EVERY batches, which only a
 * mask widened under a hog that stayed (a taskset) waits for.
 */
#define REREAD_EVERY 64

static _Atomic uint32_t g_moved; /* +1 each time a hog finds itself off */

/* Every hog reads its affinity at its next batch (a stop found one
 * unpinned). */
void cpuhog_i_hogs_look_again(void)
{
	atomic_fetch_add_explicit(&g_moved, 1, memory_order_relaxed);
}

static bool hog_here(struct hog *h)
{
	/* relaxed: a hint to look, not an order on anything else */
	uint32_t moved = atomic_load_explicit(&g_moved, memory_order_relaxed);
	struct hog_pin *p = &h->pin;
	bool on = sched_getcpu() == (int)h->cpu;

	if (on && p->pinned && p->moved_seen == moved &&
	    p->until_reread-- > 0)
		return true;
	if (!on)
		moved = atomic_fetch_add_explicit(&g_moved, 1,
						  memory_order_relaxed) + 1;
	p->moved_seen = moved;
	p->until_reread = REREAD_EVERY;
	p->pinned = cpuhog_i_pinned_to(p->masksize, p->mask, h->cpu) ||
		    cpuhog_i_pin_to(p->masksize, p->mask, h->cpu) == 0;
	return p->pinned;
}

/* Run a batch, oldest first; moved off its CPU, the hog fails the works
 * with -ENOENT rather than run them on a CPU nobody asked for. */
static void run_batch(struct hog *h, struct work *list)
{
	struct work *w = NULL;
	bool here;

	/* reverse @list (newest first); a multi-CPU call's work (the slot):
	 * its subtree's wakes before anything */
	while (list) {
		struct work *next = list->next;

		if (list == &h->slot)
			cpuhog_i_wake_kids(h);
		list->next = w;
		w = list;
		list = next;
	}
	here = hog_here(h);
	while (w) {
		struct work *next = w->next; /* before w is finished */

		here = here && sched_getcpu() == (int)h->cpu;
		note_where(h, here);
		if ((!here && !(w->flags & W_F_INTERNAL)) || !run_one(h, w)) {
			here = false; /* or moved at run_one()'s last look */
			note_where(h, here);
			hog_bump(&h->count.refused);
			work_finish(w, -ENOENT, 0);
		}
		w = next;
	}
}

void *cpuhog_i_hog_main(void *arg)
{
	struct hog *h = arg;
	struct work *list;

	cpuhog_i_self = h;
	h->tid = gettid();
	h->status_fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	cpuhog_i_sw_init(h);
	cpuhog_i_obtain_priority(h, h->ctx->want_priority);
	/* release: tid and priority fields before the creator reads them */
	atomic_store_explicit(&h->started, 1, memory_order_release);
	cpuhog_i_futex_wake(&h->started, 1);

	for (;;) {
		/* acquire: the works' fields, written before their push */
		list = atomic_exchange_explicit(&h->q.head, NULL,
						memory_order_acquire);
		if (list) {
			run_batch(h, list);
			cpuhog_i_poll_unpark(h);
			continue;
		}
		/* Exit only once drained: queued works are never dropped. */
		if (atomic_load(&h->stop))
			break;
		hog_sleep(h);
	}
	return NULL;
}

/* Push @w on @h's queue; a sleeping hog sees it only once woken. */
void cpuhog_i_push_work(struct hog *h, struct work *w)
{
	struct work *old =
		atomic_load_explicit(&h->q.head, memory_order_relaxed);

	/* relaxed: a statistic, balanced against run + refused when idle */
	atomic_fetch_add_explicit(&h->q.queued, 1, memory_order_relaxed);
	do {
		w->next = old;
		/* seq_cst: releases w's fields to the hog's acquire exchange,
		 * and orders the push before cpuhog_i_wake_hog()'s load */
	} while (!atomic_compare_exchange_weak(&h->q.head, &old, w));
}

void cpuhog_i_queue_work(struct hog *h, struct work *w)
{
	cpuhog_i_push_work(h, w);
	cpuhog_i_wake_hog(h);
}

/* Wait until *@st leaves W_QUEUED (acquire, in the turns: ret and ran),
 * spinning @spin_ns first; -ETIMEDOUT at @deadline. */
static int state_wait(_Atomic uint32_t *st, uint64_t spin_ns,
		      uint64_t deadline)
{
	struct wait w =
		WAIT(st, W_WAITER, spin_ns ? cpuhog_i_deadline_in(spin_ns) : 0,
		     deadline);

	while ((w.seen & W_STATE) == W_QUEUED) {
		if (w.slept == -ETIMEDOUT)
			return -ETIMEDOUT;
		cpuhog_i_wait_turn(&w);
	}
	return 0;
}

int cpuhog_i_work_wait(struct work *w, bool may_spin, uint64_t spin_ns)
{
	state_wait(&w->state, may_spin ? spin_ns : 0, NO_DEADLINE);
	return w->ret;
}

int cpuhog_i_slot_wait_free(struct work *slot, uint64_t deadline)
{
	return state_wait(&slot->state, 0, deadline);
}
