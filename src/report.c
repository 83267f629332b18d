/* SPDX-License-Identifier: MIT */
/*
 * Checking callbacks.  The kernel disables preemption around a stopper's
 * callback and oopses if it sleeps; user space cannot, so we watch: a
 * voluntary context switch while the callback ran means it blocked, and
 * a wall time over the threshold means it hogged for too long.  Each
 * function is reported once per kind, counted every time.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
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
	char msg[512];
	Dl_info di;
	const char *name = "?";
	int n;

	memset(&di, 0, sizeof(di));
	if (dladdr(*(void **)&fn, &di) && di.dli_sname)
		name = di.dli_sname;
	n = snprintf(msg, sizeof(msg), "cpuhog: callback %s (%p) on CPU %u %s%s\n",
		     name, *(void **)&fn, h->cpu, what, tail);
	/* write(2), not stdio: a hog must not queue behind a FILE lock held
	 * by a thread it has preempted */
	if (n > 0)
		(void)!write(STDERR_FILENO, msg,
			     (size_t)n < sizeof(msg) ? (size_t)n
						     : sizeof(msg) - 1);
}

static void bump(_Atomic uint64_t *ctr)
{
	/* relaxed load + store: only the hog writes its counters */
	atomic_store_explicit(
		ctr, atomic_load_explicit(ctr, memory_order_relaxed) + 1,
		memory_order_relaxed);
}

void check_begin(struct hog *h, struct work *w, long *nvcsw, uint64_t *t0)
{
	(void)h;
	(void)w;
	*nvcsw = thread_nvcsw();
	*t0 = now_ns();
}

void check_end(struct hog *h, struct work *w, long nvcsw, uint64_t t0,
	       int cpu_before)
{
	uint64_t dt = now_ns() - t0;
	long slept = thread_nvcsw() - nvcsw;
	struct ctx *c = h->ctx;
	char what[96];

	if (sched_getcpu() != cpu_before)
		bump(&h->migrated);
	if (slept > 0) {
		bump(&h->slept);
		if (c->flags & CPUHOG_F_STRICT) {
			snprintf(what, sizeof(what),
				 "slept (%ld voluntary context switches)",
				 slept);
			say(h, w->fn, what,
			    ": hog callbacks must not sleep; aborting (strict mode)");
			abort();
		}
		if (first_report(c, w->fn, KIND_SLEPT)) {
			snprintf(what, sizeof(what),
				 "slept (%ld voluntary context switches)",
				 slept);
			say(h, w->fn, what, ": hog callbacks must not sleep");
		}
	}
	if (dt > c->overrun_ns) {
		bump(&h->overran);
		if (first_report(c, w->fn, KIND_OVERRAN)) {
			snprintf(what, sizeof(what),
				 "ran %.1f ms (threshold %.1f ms)", dt / 1e6,
				 c->overrun_ns / 1e6);
			say(h, w->fn, what, ": hogs freeze their CPU");
		}
	}
}

/*
 * A callback that raised a signal at its own thread (raise(), tgkill)
 * left it pending on a hog, which blocks every signal: it would never be
 * delivered.  Hand each one to the process instead, where a thread that
 * does not block it takes it.  Costs one sigpending() per callback.
 */
void redirect_signals(void)
{
	struct timespec zero = { 0, 0 };
	siginfo_t si[32];
	sigset_t pending;
	int sig, n = 0, i;

	if (sigpending(&pending) < 0)
		return;
	/* Take them all first, then re-send: a re-sent signal is pending on
	 * the process and must not be taken again here. */
	for (sig = 1; sig < NSIG && n < 32; sig++) {
		sigset_t one;

		if (sigismember(&pending, sig) != 1)
			continue;
		sigemptyset(&one);
		sigaddset(&one, sig);
		while (n < 32 && sigtimedwait(&one, &si[n], &zero) == sig) {
			n++;
			if (sig < SIGRTMIN)
				break; /* standard signals do not queue */
		}
	}
	for (i = 0; i < n; i++) {
		/* queued values survive where the kernel lets us re-queue */
		if (si[i].si_code == SI_TKILL || si[i].si_code >= 0 ||
		    syscall(SYS_rt_sigqueueinfo, getpid(), si[i].si_signo,
			    &si[i]) < 0)
			kill(getpid(), si[i].si_signo);
	}
}
