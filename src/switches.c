/* SPDX-License-Identifier: MIT */
/*
 * Whether a hog was switched out, mostly without asking the kernel (for
 * report.c's sleep check, which compares getrusage(RUSAGE_THREAD)'s
 * voluntary switches around a callback).  The kernel zeroes the rseq
 * area's rseq_cs when it preempts, blocks, migrates or signals the
 * thread outside that section, so the hog points it at an empty section
 * (the watch, quiet_cs), armed before each read of its counts: while the
 * watch stays, the counts are still exact, with no system call.
 *
 * Baselines are reads, never estimates (a wait may block more than once).
 * Minor faults switch nothing but are subtracted, so a read is reused
 * only once the hog is warm (SW_WARM) and is forgotten after a report;
 * strict mode reads around every callback.  Without a usable rseq area,
 * or where the kernel does not clear the field (watch_works()), every
 * look reads.
 */
#include "internal.h"

#include <stddef.h>

#if defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif
#endif

#ifdef RSEQ_SIG
/* The watch: an empty section, whose abort (never taken) is preceded by
 * glibc's signature, as the kernel checks. */
static const struct {
	uint32_t sig; /* at abort_ip - 4 */
	uint32_t abort_at;
} quiet_sig = { RSEQ_SIG, 0 };

static const struct rseq_cs quiet_cs = {
	.start_ip = (uint64_t)(uintptr_t)&quiet_sig.abort_at,
	.post_commit_offset = 0,
	.abort_ip = (uint64_t)(uintptr_t)&quiet_sig.abort_at,
};

static struct rseq *own_area(void)
{
	struct rseq *rs;

	/* glibc 2.35 registers the original 20 bytes: rseq_cs is at 8 */
	if (__rseq_size < offsetof(struct rseq, rseq_cs) + 8)
		return NULL;
	rs = (void *)((char *)__builtin_thread_pointer() + __rseq_offset);
	/* -1, -2: never registered, or the kernel refused */
	return (int32_t)rs->cpu_id >= 0 ? rs : NULL;
}

/* The kernel's __u64, accessed relaxed: single-copy atomic, never torn
 * or cached, ordered as program order on this thread. */
#define CS(h) (&((struct rseq *)(h)->sw.rseq)->rseq_cs)
#define QUIET ((uint64_t)(uintptr_t)&quiet_cs)
#else
static void *own_area(void)
{
	return NULL;
}
#endif

static _Atomic int watch_ok = -1; /* relaxed: any hog may compute it */

/* Whether the watch is ours and still set: no switch since arming it. */
static bool watch_holds(struct hog *h)
{
#ifdef RSEQ_SIG
	/* compiler-only fence: the kernel clears the field on this thread,
	 * between our instructions, as a signal handler would */
	atomic_signal_fence(memory_order_seq_cst);
	return h->sw.rseq && __atomic_load_n(CS(h), __ATOMIC_RELAXED) == QUIET;
#else
	(void)h;
	return false;
#endif
}

static void arm(struct hog *h)
{
#ifdef RSEQ_SIG
	if (h->sw.rseq)
		__atomic_store_n(CS(h), QUIET, __ATOMIC_RELAXED);
	/* the store before what follows (the read, the callback) */
	atomic_signal_fence(memory_order_seq_cst);
#else
	(void)h;
#endif
}

/*
 * Whether this kernel clears the watch when the thread blocks in a system
 * call: up to 6.18 it does; 6.19 looks at rseq_cs only after an interrupt
 * in user mode, so the watch would miss the sleeps it is for.  A try
 * counts only where the thread blocked and was not preempted (which
 * clears it on either kernel).  Undecided: not used.
 */
static bool watch_works(struct hog *h)
{
	struct timespec one_us = { 0, 1000 };
	struct sw_count a, b;
	int i, ok = atomic_load_explicit(&watch_ok, memory_order_relaxed);
	bool held;

	for (i = 0; ok < 0 && i < 8; i++) {
		cpuhog_i_thread_switches(&a);
		arm(h);
		nanosleep(&one_us, NULL);
		held = watch_holds(h);
		cpuhog_i_thread_switches(&b);
		if (b.nv > a.nv && b.niv == a.niv)
			ok = !held;
	}
	if (ok >= 0)
		atomic_store_explicit(&watch_ok, ok, memory_order_relaxed);
	return ok > 0;
}

/* At the hog's start, on its own thread (the rseq area is per thread). */
void cpuhog_i_sw_init(struct hog *h)
{
	h->sw.rseq = own_area();
	if (h->sw.rseq && !watch_works(h))
		h->sw.rseq = NULL;
}

/* A hog's first callbacks fault its own code's pages in. */
#define SW_WARM 4

/* Whether a read may serve a later callback: not in strict mode (exact,
 * as its report aborts), and only once the hog is warm. */
static bool may_reuse(struct hog *h)
{
	return !(h->ctx->flags & CPUHOG_F_STRICT) && h->sw.checks >= SW_WARM;
}

/* The counts now, reading them only if the watch went. */
void cpuhog_i_sw_now(struct hog *h, struct sw_count *out)
{
	if (!h->sw.read || !may_reuse(h) || !watch_holds(h)) {
		arm(h); /* first: a switch after the read clears it */
		cpuhog_i_thread_switches(&h->sw.last);
		h->sw.read = h->sw.rseq != NULL;
	}
	*out = h->sw.last;
}

/* Read now, off a callback's path (a stop's PREPARE), where the read
 * can serve the callback that follows. */
void cpuhog_i_sw_prime(struct hog *h)
{
	struct sw_count now;

	if (h->sw.rseq && may_reuse(h))
		cpuhog_i_sw_now(h, &now);
}

/* The blocks since @before (a cpuhog_i_sw_now()): 0 where the watch held. */
long cpuhog_i_sw_slept_since(struct hog *h, const struct sw_count *before)
{
	struct sw_count now;
	long slept;

	cpuhog_i_sw_now(h, &now);
	h->sw.checks += h->sw.checks < SW_WARM;
	/* a minor fault may wait for another thread's mmap lock */
	slept = (now.nv - before->nv) - (now.flt - before->flt);
	return slept > 0 ? slept : 0;
}

/* After the hog's own slow paths (a report), whose minor faults would
 * count against the next callback. */
void cpuhog_i_sw_forget(struct hog *h)
{
	h->sw.read = false;
}
