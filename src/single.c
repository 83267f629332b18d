/* SPDX-License-Identifier: MIT */
/*
 * The single-CPU calls: hog_one_cpu(), and hog_one_cpu_nowait() with
 * hog_work_wait() and hog_work_done().  A call queues one work (on the
 * caller's stack, or in its buffer) on the CPU's hog and waits on the
 * work's state word: a short spin where the hog is on another CPU, then
 * a futex sleep.  A nowait buffer carries the epoch it was queued in, so
 * that its copy in a forked child reads as not run (-ENOENT) instead of
 * waiting for the parent's hog.  Kernel entries (tests/test_entries.c):
 * the caller's futex wake, none where the hog answers within its spin,
 * and the hog's (hog.c).
 */
#include "internal.h"
#include "probes.h"

#include <errno.h>
#include <sched.h>

/* Not for our own CPU: its hog could not run during our spin at its
 * priority, and would preempt us anyway below it. */
static bool may_spin(unsigned int cpu)
{
	return sched_getcpu() != (int)cpu;
}

static int one_cpu(unsigned int cpu, cpuhog_fn_t fn, void *arg)
{
	struct work w = { .fn = fn, .arg = arg, .cpu = cpu };
	struct ctx *c;
	struct hog *h;
	int err = 0;

	if (!fn)
		return -EINVAL;
	if (cpuhog_i_self)
		return -EDEADLK;
	c = cpuhog_i_call_enter(&err);
	if (!c)
		return err;
	h = cpuhog_i_hog_of(c, cpu);
	err = !h ? -ENOENT : cpuhog_i_call_exclusive(c);
	if (!err) {
		atomic_init(&w.state, W_QUEUED);
		cpuhog_i_queue_work(h, &w);
		err = cpuhog_i_work_wait(&w, may_spin(cpu), c->spin_ns);
	}
	cpuhog_i_call_leave();
	return err;
}

int hog_one_cpu(unsigned int cpu, cpuhog_fn_t fn, void *arg)
{
	int r;

	PROBE2(hog_one_cpu_entry, cpu, fn);
	r = one_cpu(cpu, fn, arg);
	PROBE1(hog_one_cpu_return, r);
	return r;
}

bool hog_one_cpu_nowait(unsigned int cpu, cpuhog_fn_t fn, void *arg,
			struct cpuhog_work *work_buf)
{
	struct work *w = (struct work *)work_buf;
	struct ctx *c;
	struct hog *h;
	uint32_t s;
	int err;

	if (!fn || !w)
		return false;
	s = atomic_load_explicit(&w->state, memory_order_relaxed);
	if (s != W_IDLE && s != W_DONE)
		return false;
	c = cpuhog_i_ctx_get(&err);
	if (!c)
		return false;
	h = cpuhog_i_hog_of(c, cpu);
	/* acquire: a previous run's hog is done with the buffer; the CAS
	 * settles two callers racing for it */
	if (!h || cpuhog_i_call_exclusive(c) ||
	    !atomic_compare_exchange_strong_explicit(&w->state, &s, W_QUEUED,
						     memory_order_acquire,
						     memory_order_relaxed)) {
		cpuhog_i_ctx_put();
		return false;
	}
	w->fn = fn;
	w->arg = arg;
	w->cpu = cpu;
	w->group = NULL;
	w->flags = 0;
	/* relaxed, both: only a fork changes cpuhog_i_epoch (in the child) */
	atomic_store_explicit(
		&w->epoch,
		atomic_load_explicit(&cpuhog_i_epoch, memory_order_relaxed),
		memory_order_relaxed);
	cpuhog_i_queue_work(h, w);
	cpuhog_i_ctx_put();
	return true;
}

/* A work queued before a fork: its hog is the parent's, and this copy
 * would never finish.  It did not run here. */
static bool forked_away(struct work *w, uint32_t s)
{
	if ((s & W_STATE) != W_QUEUED ||
	    atomic_load_explicit(&w->epoch, memory_order_relaxed) ==
		    atomic_load_explicit(&cpuhog_i_epoch, memory_order_relaxed))
		return false;
	w->ret = -ENOENT;
	w->ran = 0;
	/* relaxed: only this thread of the child can see the buffer */
	atomic_store_explicit(&w->state, W_DONE, memory_order_relaxed);
	return true;
}

int hog_work_wait(struct cpuhog_work *work_buf)
{
	struct work *w = (struct work *)work_buf;
	uint32_t s;

	if (!w)
		return -EINVAL;
	s = atomic_load_explicit(&w->state, memory_order_acquire);
	if ((s & W_STATE) != W_QUEUED && (s & W_STATE) != W_DONE)
		return -EINVAL;
	/* hog context, or a handler's thread inside a call: perhaps the
	 * hog_one_cpu_nowait() that marked this buffer queued, unpushed */
	if (cpuhog_i_self || cpuhog_i_in_call || cpuhog_i_ctx_held)
		return -EDEADLK;
	if (forked_away(w, s))
		return -ENOENT;
	return cpuhog_i_work_wait(
		w, may_spin(w->cpu),
		atomic_load_explicit(&cpuhog_i_spin_ns, memory_order_relaxed));
}

bool hog_work_done(const struct cpuhog_work *work_buf)
{
	struct work *w = (struct work *)work_buf;

	/* acquire: a following hog_work_wait() reads the result.  A buffer
	 * never queued is "done": waiting returns at once. */
	return !w ||
	       (atomic_load_explicit(&w->state, memory_order_acquire) &
		W_STATE) != W_QUEUED ||
	       atomic_load_explicit(&w->epoch, memory_order_relaxed) !=
		       atomic_load_explicit(&cpuhog_i_epoch,
					    memory_order_relaxed);
}
