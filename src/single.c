/* SPDX-License-Identifier: MIT */
/*
 * The single-CPU calls: hog_one_cpu() and its asynchronous half,
 * hog_one_cpu_nowait() with hog_work_wait() and hog_work_done().
 *
 * A call builds one work (on the caller's stack, or in the caller's
 * buffer), queues it on the CPU's hog (hog.c) and waits on the work's
 * state word: a short spin where the hog is on another CPU, then a futex
 * sleep.  The buffer of a nowait call carries the epoch it was queued in,
 * so that its copy in a forked child reads as not run (-ENOENT) instead
 * of waiting for the parent's hog.
 *
 * Kernel entries of hog_one_cpu() to another CPU (counted by
 * tests/test_entries.c): the caller's futex wake of the sleeping hog,
 * none when the hog answers within the caller's spin; the hog's futex
 * wait (both are the job), then the checks' price: one rt_sigpending()
 * for signals raised in the callback, made once the caller has been
 * answered (hog.c, run_one()).  The sleep check costs nothing
 * where the hog was not switched out during the callback (switches.c),
 * and one getrusage() after a callback that was, or two per callback
 * on a kernel whose rseq cannot tell (6.19 on).  The hog reads its
 * affinity only now and then (hog.c, hog_here()).
 */
#include "internal.h"
#include "probes.h"

#include <errno.h>
#include <sched.h>

static bool may_spin(unsigned int cpu)
{
	/* Never spin for our own CPU: the hog could not run meanwhile if
	 * we are at its priority, and would preempt us anyway otherwise. */
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
	if (err) {
		cpuhog_i_call_leave();
		return err;
	}
	atomic_init(&w.state, W_QUEUED);
	cpuhog_i_queue_work(h, &w);
	err = cpuhog_i_work_wait(&w, may_spin(cpu), c->spin_ns);
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
	/* acquire: a previous run's hog is done with the buffer.  The CAS
	 * also settles two callers racing for one buffer. */
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
	/* relaxed, both: only a fork changes cpuhog_i_epoch, and only in the
	 * child; a reader of the buffer's epoch compares it with that */
	atomic_store_explicit(
		&w->epoch,
		atomic_load_explicit(&cpuhog_i_epoch, memory_order_relaxed),
		memory_order_relaxed);
	cpuhog_i_queue_work(h, w);
	cpuhog_i_ctx_put();
	return true;
}

/*
 * A work queued before this process was forked: its hog is the parent's,
 * and this copy of the buffer would never finish.  It did not run here.
 */
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
	/* from hog context, or from a handler whose thread is inside a
	 * call: perhaps the very hog_one_cpu_nowait() that marked this
	 * buffer queued and has not pushed it yet */
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

	/* acquire: so that a following hog_work_wait() reads the result.
	 * A buffer never queued is "done": waiting returns at once. */
	return !w ||
	       (atomic_load_explicit(&w->state, memory_order_acquire) &
		W_STATE) != W_QUEUED ||
	       atomic_load_explicit(&w->epoch, memory_order_relaxed) !=
		       atomic_load_explicit(&cpuhog_i_epoch,
					    memory_order_relaxed);
}
