/* SPDX-License-Identifier: MIT */
/*
 * Checking callbacks.  The kernel oopses where a stopper's callback
 * sleeps; user space cannot forbid it, so we watch: a voluntary context
 * switch while it ran (switches.c) means it blocked, a wall time over
 * overrun_ns that it hogged too long.  Each function is reported once
 * per kind, counted every time.  And signals a callback raised at its
 * own hog, which blocks them all, are handed on to the process.
 */
#include "internal.h"
#include "probes.h"

#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { KIND_SLEPT, KIND_OVERRAN };

/* Whether this is the first report of @fn for @kind. */
static bool first_report(struct ctx *c, cpuhog_fn_t fn, int kind)
{
	uintptr_t key = (uintptr_t)fn * 2 + (uintptr_t)kind;
	size_t i, n = sizeof(c->reported) / sizeof(c->reported[0]);

	for (i = 0; i < n; i++) {
		uintptr_t cur = 0;

		/* relaxed: the table only deduplicates messages */
		if (atomic_compare_exchange_strong_explicit(
			    &c->reported[i], &cur, key, memory_order_relaxed,
			    memory_order_relaxed))
			return true;
		if (cur == key)
			return false;
	}
	return false; /* table full: count, stay quiet */
}

static void say(struct hog *h, cpuhog_fn_t fn, const char *what,
		const char *tail)
{
	char msg[512], name[256];
	int n;

	cpuhog_i_symbol_describe(*(void **)&fn, name, sizeof(name));
	n = snprintf(msg, sizeof(msg), "cpuhog: callback %s on CPU %u %s%s\n",
		     name, h->cpu, what, tail);
	/* write(2), not stdio: a hog must not queue behind a FILE lock held
	 * by a thread it has preempted */
	if (n > 0)
		(void)!write(STDERR_FILENO, msg,
			     (size_t)n < sizeof(msg) ? (size_t)n
						     : sizeof(msg) - 1);
}

/* A callback slept if it made voluntary switches beyond its minor
 * faults: one that faults often can hide a sleep, and a major fault
 * (disk I/O) counts as one. */
void cpuhog_i_check_begin(struct hog *h, struct check *ck)
{
	cpuhog_i_sw_now(h, &ck->sw);
	ck->t0 = cpuhog_i_now_ns();
}

void cpuhog_i_check_end(struct hog *h, cpuhog_fn_t fn, const struct check *ck)
{
	uint64_t dt = cpuhog_i_now_ns() - ck->t0;
	long slept = cpuhog_i_sw_slept_since(h, &ck->sw);
	struct ctx *c = h->ctx;
	char what[96];

	if (sched_getcpu() != (int)h->cpu)
		hog_bump(&h->count.migrated);
	if (slept > 0) {
		PROBE3(report_sleep, h->cpu, fn, slept);
		hog_bump(&h->count.slept);
		snprintf(what, sizeof(what),
			 "slept (%ld voluntary context switches)", slept);
		if (c->flags & CPUHOG_F_STRICT) {
			say(h, fn, what,
			    ": hog callbacks must not sleep; aborting (strict mode)");
			abort();
		}
		if (first_report(c, fn, KIND_SLEPT))
			say(h, fn, what, ": hog callbacks must not sleep");
	}
	if (dt > c->overrun_ns) {
		PROBE3(report_overrun, h->cpu, fn, dt);
		hog_bump(&h->count.overran);
		if (first_report(c, fn, KIND_OVERRAN)) {
			snprintf(what, sizeof(what),
				 "ran %.1f ms (threshold %.1f ms)", dt / 1e6,
				 c->overrun_ns / 1e6);
			say(h, fn, what, ": hogs freeze their CPU");
		}
	}
	if (slept > 0 || dt > c->overrun_ns)
		cpuhog_i_sw_forget(h); /* what we did here may have faulted */
}

/* The signals pending on the calling thread alone, not the process's;
 * false: cannot tell. */
static bool thread_pending(struct hog *h, uint64_t *mask)
{
	char buf[4096], *p;

	if (cpuhog_i_read_fd(h->status_fd, buf, sizeof(buf)) <= 0)
		return false;
	p = strstr(buf, "\nSigPnd:");
	if (!p)
		return false;
	*mask = strtoull(p + 8, NULL, 16);
	return true;
}

/* Take one instance of @sig, pending on this thread (the kernel takes
 * the thread's own queue before the shared one). */
static bool take(int sig, siginfo_t *si)
{
	struct timespec zero = { 0, 0 };
	sigset_t one;

	sigemptyset(&one);
	sigaddset(&one, sig);
	return sigtimedwait(&one, si, &zero) == sig;
}

/*
 * A signal a callback raised at its own thread (raise(), tgkill) would
 * never be delivered on a hog: hand each to the process, where a thread
 * that does not block it takes it.  The process's own pending signals (a
 * SIGCHLD read with sigwaitinfo) are left alone.  One rt_sigpending()
 * per callback, more only when one is pending.
 */
void cpuhog_i_redirect_signals(struct hog *h)
{
	uint64_t pending = 0, mine;
	siginfo_t si[32];
	int sig, n = 0, i;

	/* the kernel's 64-bit set: glibc's sigisemptyset() can miss RT ones */
	if (syscall(SYS_rt_sigpending, &pending, sizeof(pending)) < 0 ||
	    !pending)
		return;
	/* one at a time: a queued RT signal may stand several times, and
	 * re-sent ones must not be taken again */
	while (n < 32 && thread_pending(h, &mine) && mine) {
		sig = __builtin_ctzll(mine) + 1;
		if (!take(sig, &si[n]))
			break;
		n++;
	}
	for (i = 0; i < n; i++) {
		/* queued values survive where the kernel lets us re-queue */
		if (si[i].si_code == SI_TKILL || si[i].si_code >= 0 ||
		    syscall(SYS_rt_sigqueueinfo, getpid(), si[i].si_signo,
			    &si[i]) < 0)
			kill(getpid(), si[i].si_signo);
	}
}
