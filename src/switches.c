/* SPDX-License-Identifier: MIT */
/*
 * Whether a hog was switched out, mostly without asking the kernel (used
 * by report.c's sleep check).
 *
 * The sleep check compares the hog's voluntary context switches before
 * and after a callback (getrusage(RUSAGE_THREAD)).  Most callbacks are
 * never switched out at all, and the rseq area that glibc registers for
 * every thread can say so for free: the kernel sets its rseq_cs field to
 * 0 when it preempts, blocks, migrates or signals the thread while the
 * instruction pointer is outside that section (include/uapi/linux/
 * rseq.h).  So the hog points it at a section that contains no
 * instruction (the "watch", quiet_cs below), armed before each read of
 * its counts: while the watch stays, the counts read are still exact,
 * and a callback after which it stays did not sleep, with no system call.
 *
 * Every baseline is a read, never an estimate: after its futex wait the
 * hog reads again (one getrusage per wake), because how many times the
 * wait blocked is not knowable (a SIGSTOP and SIGCONT while it waited
 * make it two).  A callback that was switched out is read after (one
 * more getrusage).  Minor faults switch nothing, so the watch holds
 * through them, but the check subtracts them (a fault may wait for
 * another thread's mmap lock): faults of the hog's own code between a
 * read and a callback would hide that callback's sleep, so the hog
 * reuses a read only once warm (SW_WARM callbacks), and forgets it after
 * a report (cpuhog_i_sw_forget()).  Strict mode, which aborts on a report,
 * reads before and after every callback.
 *
 * A callback may use rseq itself and leave rseq_cs pointing at its own
 * section: the watch is then not ours, and the hog reads.  Where glibc
 * registered no rseq area (glibc before 2.35, glibc.pthread.rseq=0,
 * qemu-user), or the kernel does not clear the field on a switch in a
 * system call (6.19 on: watch_works()), every look reads.
 */
#include "internal.h"

#include <stddef.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif
#endif

#ifdef RSEQ_SIG
/*
 * The watch: a section of no instruction (post_commit_offset 0), whose
 * abort address is preceded by the signature glibc registered, as the
 * kernel checks before it looks at the range.  Its abort is never taken:
 * no instruction pointer is inside an empty range.
 */
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
	rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	/* -1, -2: never registered, or the kernel refused */
	return (int32_t)rs->cpu_id >= 0 ? rs : NULL;
}

/* The field is the kernel's __u64; relaxed atomics: single-copy atomic,
 * never torn or cached, and ordered as program order on this thread. */
static uint64_t cs_load(struct hog *h)
{
	return __atomic_load_n(&((struct rseq *)h->sw.rseq)->rseq_cs,
			       __ATOMIC_RELAXED);
}

static void cs_store(struct hog *h, uint64_t v)
{
	__atomic_store_n(&((struct rseq *)h->sw.rseq)->rseq_cs, v,
			 __ATOMIC_RELAXED);
}
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
	return h->sw.rseq && cs_load(h) == (uint64_t)(uintptr_t)&quiet_cs;
#else
	(void)h;
	return false;
#endif
}

static void arm(struct hog *h)
{
#ifdef RSEQ_SIG
	if (h->sw.rseq)
		cs_store(h, (uint64_t)(uintptr_t)&quiet_cs);
	/* the store before what follows (the read, the callback) */
	atomic_signal_fence(memory_order_seq_cst);
#else
	(void)h;
#endif
}

/*
 * Whether this kernel clears the watch when the thread blocks in a system
 * call.  Up to 6.18 it does, at every return to user space after a
 * switch.  The rseq rework of 6.19 looks at rseq_cs only when the thread
 * entered the kernel from an interrupt in user mode (rseq.event.user_irq,
 * include/linux/rseq_entry.h: a critical section may make no system
 * call, so one cannot be inside it), and a callback asleep in a system
 * call leaves the field alone: the watch would miss exactly the sleeps
 * it is for.  So: arm, block in nanosleep(), and look.  A try counts
 * only where the thread blocked and was not preempted (a preemption from
 * user mode clears the watch on either kernel).  Undecided: not used.
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
	h->sw.read = false;
	h->sw.checks = 0;
}

/* A hog's first callbacks run its code for the first time: every first
 * touch of a page is a minor fault (design note). */
#define SW_WARM 4

/* Whether a read may serve a later callback: not in strict mode, whose
 * report aborts (it reads before every callback: exact), and only once
 * the hog's own paths are warm. */
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

/* Read the counts now, off a callback's path (a stop's PREPARE), where
 * the read can serve the callback that follows: the watch is ours and
 * the hog warm. */
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
	/* a minor fault may wait for the mmap lock (another thread's
	 * fork() or mmap()): the process's doing, not the callback's */
	slept = (now.nv - before->nv) - (now.flt - before->flt);
	return slept > 0 ? slept : 0;
}

/* After the hog's own slow paths (a report: symbols looked up, pages
 * touched): their minor faults, which switch nothing, would count
 * against the next callback's sleeps. */
void cpuhog_i_sw_forget(struct hog *h)
{
	h->sw.read = false;
}
