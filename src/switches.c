/* SPDX-License-Identifier: MIT */
/*
 * Whether a hog was switched out, mostly without asking the kernel (used
 * by report.c's sleep check).
 *
 * The sleep check compares the hog's voluntary context switches before
 * and after a callback (getrusage(RUSAGE_THREAD)): two system calls per
 * callback.  Most callbacks are never switched out at all, and the rseq
 * area that glibc registers for every thread can say so for free.  Its
 * rseq_cs field names the thread's current critical section; the kernel
 * sets it to 0 when it preempts, blocks, migrates or signals the thread
 * while the instruction pointer is outside that section (include/uapi/
 * linux/rseq.h: "set to NULL by the kernel ... when the kernel detects
 * that it is preempting or delivering a signal outside of the range").
 * So the hog points it at a section that contains no instruction (the
 * "watch", quiet_cs below) and looks later: still there, and nothing
 * switched the hog out in between, so its counts have not moved.
 *
 * What the hog knows of its counts (struct hog: sw, sw_state):
 *   SW_NONE     nothing: the next look reads them (arming the watch
 *               first, so a switch after the read clears it);
 *   SW_READ     read, and the watch armed before the read: exact for as
 *               long as the watch stays;
 *   SW_CARRIED  carried across the hog's own futex wait: the watch was
 *               armed before it, cleared by it, and the wait returned 0,
 *               woken: that is one block, so nvcsw + 1.  Exact but for a
 *               wait that blocked twice (a SIGSTOP or a cgroup freeze
 *               while the hog waited, or a PREEMPT_RT lock inside the
 *               futex call), which counts one low, or that was woken
 *               before it slept but preempted there, one high.
 *
 * A callback whose watch stays did not sleep: no system call.  One that
 * was switched out is read after (one getrusage), against the baseline.
 * A carried baseline may be one low (above), which would make a callback
 * that was only preempted look as if it slept; so against a carried
 * baseline a sleep counts only where the involuntary switches did not
 * move (the callback was switched out, and not by preemption: it
 * blocked).  The price is that a callback both preempted and asleep, on a
 * carried baseline, goes unreported.  A PREEMPT_RT kernel never carries
 * (it reads after every wake: one getrusage per batch).
 *
 * Minor faults switch nothing, so the watch holds through them, but the
 * check subtracts them (a fault may wait for another thread's mmap
 * lock): faults of the hog's own code between a read and a callback
 * would hide that callback's sleep.  So the hog reuses a read, or
 * carries one, only once warm (SW_WARM), and forgets its counts after a
 * report (sw_forget()), whose paths run for the first time then.  An
 * 8-vCPU guest, where the next work was often queued before the hog
 * looked, hid sleeps so in its first callbacks until reads waited for
 * warmth.  A warm hog faults between callbacks only where the kernel
 * takes its pages away (NUMA balancing, reclaim, a fork's copy-on-write),
 * and such a fault only ever hides a sleep; none makes one up.  Strict
 * mode, which aborts on a report, takes no such chance: it reads before
 * and after every callback (two getrusage), as the check did before the
 * watch (strict_sees_sleep_after_a_fault).
 *
 * A callback may use rseq itself and leave rseq_cs pointing at its own
 * section: the watch is then not ours, and the hog reads, as when it was
 * switched out.  Where glibc registered no rseq area (glibc before 2.35,
 * the glibc.pthread.rseq=0 tunable, qemu-user), or the kernel does not
 * clear the field on a switch in a system call (6.19 on: watch_works()),
 * every look reads: two getrusage() per callback, as before.
 */
#include "internal.h"

#include <stddef.h>
#include <string.h>
#include <sys/utsname.h>

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
	return __atomic_load_n(&((struct rseq *)h->rseq)->rseq_cs,
			       __ATOMIC_RELAXED);
}

static void cs_store(struct hog *h, uint64_t v)
{
	__atomic_store_n(&((struct rseq *)h->rseq)->rseq_cs, v, __ATOMIC_RELAXED);
}
#else
static void *own_area(void)
{
	return NULL;
}
#endif

static _Atomic int carry_ok = -1; /* relaxed: any hog may compute it */
static _Atomic int watch_ok = -1;  /* the same */

/* Whether the watch is ours and still set: no switch since arming it. */
static bool watch_holds(struct hog *h)
{
#ifdef RSEQ_SIG
	/* compiler-only fence: the kernel clears the field on this thread,
	 * between our instructions, as a signal handler would */
	atomic_signal_fence(memory_order_seq_cst);
	return h->rseq && cs_load(h) == (uint64_t)(uintptr_t)&quiet_cs;
#else
	(void)h;
	return false;
#endif
}

static void arm(struct hog *h)
{
#ifdef RSEQ_SIG
	if (h->rseq)
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
		thread_switches(&a);
		arm(h);
		nanosleep(&one_us, NULL);
		held = watch_holds(h);
		thread_switches(&b);
		if (b.nv > a.nv && b.niv == a.niv)
			ok = !held;
	}
	if (ok >= 0)
		atomic_store_explicit(&watch_ok, ok, memory_order_relaxed);
	return ok > 0;
}

/* Whether a woken wait may count as one block: not on PREEMPT_RT, where
 * the futex call's own locks may block too.  (Strict mode carries too,
 * but never uses what it carries: may_reuse().) */
static bool may_carry(void)
{
	return atomic_load_explicit(&carry_ok, memory_order_relaxed) > 0;
}

/* At the hog's start, on its own thread (the rseq area is per thread). */
void sw_init(struct hog *h)
{
	struct utsname u;

	if (atomic_load_explicit(&carry_ok, memory_order_relaxed) < 0)
		atomic_store_explicit(&carry_ok,
				      uname(&u) != 0 ||
					      !strstr(u.version, "PREEMPT_RT"),
				      memory_order_relaxed);
	h->rseq = own_area();
	if (h->rseq && !watch_works(h))
		h->rseq = NULL;
	h->sw_state = SW_NONE;
	h->sw_waits = h->sw_checks = 0;
}

/*
 * A hog's first batches run its code for the first time, and every first
 * touch of a page is a minor fault, which switches nothing: between a
 * read and the next callback such faults would count against that
 * callback's sleeps.  So a hog reuses a read only from its SW_WARM'th
 * callback on, and carries one across a wait only from its SW_WARM'th
 * wait on, its paths warm by then.
 */
#define SW_WARM 4

/* Whether a read may serve a later callback: not in strict mode, whose
 * report aborts (it reads before every callback: exact), and only once
 * the hog's own paths are warm. */
static bool may_reuse(struct hog *h)
{
	return !(h->ctx->flags & CPUHOG_F_STRICT) && h->sw_checks >= SW_WARM;
}

/* The counts now, reading them only if the watch went. */
void sw_now(struct hog *h, struct sw_count *out)
{
	if (h->sw_state == SW_NONE || !may_reuse(h) || !watch_holds(h)) {
		arm(h); /* first: a switch after the read clears it */
		thread_switches(&h->sw);
		h->sw_state = h->rseq ? SW_READ : SW_NONE;
		*out = h->sw;
		out->exact = true;
		return;
	}
	*out = h->sw;
	out->exact = h->sw_state == SW_READ;
}

/* The blocks since @before (a sw_now()): 0 where the watch held. */
long sw_slept_since(struct hog *h, const struct sw_count *before)
{
	struct sw_count now;
	long slept;

	sw_now(h, &now);
	h->sw_checks += h->sw_checks < SW_WARM;
	/* a minor fault may wait for the mmap lock (another thread's
	 * fork() or mmap()): the process's doing, not the callback's */
	slept = (now.nv - before->nv) - (now.flt - before->flt);
	if (!before->exact && now.niv != before->niv)
		return 0; /* preempted, on a baseline maybe one low */
	return slept > 0 ? slept : 0;
}

/* After the hog's own slow paths (a report: symbols looked up, pages
 * touched): their minor faults, which switch nothing, would count
 * against the next callback's sleeps. */
void sw_forget(struct hog *h)
{
	h->sw_state = SW_NONE;
}

/* Before the hog's futex wait: only a watch that holds can be carried. */
void sw_wait_begin(struct hog *h)
{
	if (h->sw_state != SW_NONE && !watch_holds(h))
		h->sw_state = SW_NONE;
}

/* After it, with its result (0: woken). */
void sw_wait_end(struct hog *h, int ret)
{
	bool warm = h->sw_waits >= SW_WARM;

	h->sw_waits += !warm;
	if (h->sw_state == SW_NONE || watch_holds(h))
		return; /* unknown, or never switched out: as it was */
	if (ret == 0 && warm && may_carry()) {
		h->sw.nv += 1;
		h->sw_state = SW_CARRIED;
		arm(h);
	} else {
		h->sw_state = SW_NONE;
	}
}
