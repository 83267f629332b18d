/* SPDX-License-Identifier: MIT */
/*
 * Poll mode (CPUHOG_F_POLL): a poller per hogged CPU, polling at SCHED_IDLE.
 *
 * Why.  Waking a sleeping hog from another CPU costs an IPI and, on an
 * idle CPU, its exit from idle, which no design whose threads sleep can
 * beat.  Runtimes that spin (OpenMP, DPDK) get near the cache-line floor
 * and pay with a core nobody else may use; here the spinning is done at
 * the lowest priority there is, by a separate thread that never holds
 * real-time priority, so no state of it can leave a FIFO-99 thread
 * spinning with no work.  The poller sees work arrive for its sleeping
 * hog and wakes it with a futex on its own CPU (no IPI, no idle exit);
 * callbacks still run in the hog, with every promise of sleep mode.
 *
 * The hook: cpuhog_i_wake_hog() asks cpuhog_i_poll_offer(), which leaves the
 * wake to a poller whose beat (a time stamp written each round) is fresh, for
 * CLAIM_NS at most.  Whoever takes the hog's `sleeping` from 1 to 0 with
 * an exchange owns the one futex wake, poller or producer (hog.c).
 *
 * Not stealing the CPU.  SCHED_IDLE's weight (3 against 1024) holds only
 * within one group: under autogroup or a cpu cgroup the poller competes
 * at a full group's weight.  So it steps aside by itself: when others
 * (our hog included: a CPU kept busy by calls is a busy CPU) took more
 * than LOST_MAX_NS of a WINDOW_NS window, it parks, and polls again only
 * once /proc/stat shows its CPU IDLE_ENOUGH percent idle over ASIDE_NS.
 * A new poller starts stepped aside, so a short-lived process never
 * competes.  It calls sched_yield() every YIELD_NS, because EEVDF may
 * pick a poller with no lag over a runnable thread of ours, which would
 * then wait a tick.
 *
 * Exit.  A process is gone only once each of its threads has run, and a
 * SCHED_IDLE thread beside a busy CPU may wait a long time for its turn;
 * so a poller is SCHED_IDLE only while it polls (SCHED_OTHER parked), and
 * exit() raises every poller to real time until it has left its loop
 * (cpuhog_i_poll_exit_all(), from a destructor).  Raised to SCHED_OTHER only, a
 * poller would keep the vruntime it ran up at weight 3 on kernels that
 * do not renormalize it (6.1's CFS).  A process killed by a signal's
 * default action runs no code of ours: its pollers still wait their turn.
 *
 * hog_synchronize().  A poller running on its CPU now means no other
 * thread of ours runs there: each was switched out, and a context switch
 * is a full barrier (the scheduler's smp_mb__after_spinlock()).  So the
 * caller bumps a generation (seq_cst), and a poller that reads it, is
 * still on its CPU, and issues a seq_cst fence before publishing its ack
 * (release) proves for that CPU what a hog's run would: membarrier(2)'s
 * expedited argument, with the poller's presence in place of its IPI.  A
 * CPU whose poller does not answer in CLAIM_NS gets its hog.
 *
 * With cpuhog_attr.poll_ns the poller parks after that long without
 * work, and the hog unparks it after its next batch.  A poller whose CPU
 * went away parks and re-pins itself when the CPU is back.  Nothing here
 * allocates on a call's path.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLAIM_NS 5000u        /* a producer leaves a running poller this */
#define LIVE_NS 5000          /* a beat older than this: not running now
				 (a preempted one would cost CLAIM_NS) */
#define PAUSE_NS 20000u       /* shorter pauses: interrupts, VM exits */
#define WINDOW_NS 10000000ull /* the poller keeps count of its lost time */
#define LOST_MAX_NS 1000000ull /* others took more of a window: step aside */
#define ASIDE_NS 100000000ull  /* stepped aside, look at the CPU this often */
#define IDLE_ENOUGH 90         /* % idle over that time: poll again */
#define AWAY_RETRY_NS 100000000ull /* off its CPU: look again this often */
#define YIELD_NS 50000u       /* a poller yields this often (design note) */

/* How a poller is parked: its hog's next batch ends only an idle park. */
enum { POLLING, PARKED_IDLE, PARKED_TIMED };

/* A hog's poller (struct hog.poll): this file's alone. */
struct poller {
	/* Written by the poller, read by producers: when it last looked
	 * (0: parked), the last barrier it acknowledged, the wakes it took;
	 * the futex it parks on (how it is parked, POLLING: not). */
	alignas(CACHELINE) _Atomic uint64_t beat;
	_Atomic uint32_t ack;
	_Atomic uint32_t parked;
	_Atomic uint64_t claims, fallbacks;
	_Atomic bool stop;
	_Atomic bool left; /* out of its loop: changes its policy no more */
	_Atomic bool on;   /* running: producers may leave it the wake */
	/* Written by the hog: its batch count (cpuhog_i_poll_unpark()). */
	alignas(CACHELINE) _Atomic uint32_t batches;
	/* The poller's own: its rounds' counts (stepped_aside()), the last
	 * batch count it saw, its /proc/stat and buffer, its scratch mask
	 * for cpuhog_i_pin_to(); cpuhog_i_poll_forget() frees them. */
	uint64_t prev, last_work, window, lost, yielded;
	uint32_t seen;
	int stat_fd;
	char *buf;
	size_t bufsize;
	cpu_set_t *mask;
	struct hog *hog;
	pthread_t thread;
};

/* The calling thread's policy: SCHED_IDLE to poll (resume()), SCHED_OTHER
 * parked. */
static void set_policy(int policy)
{
	struct sched_param sp = { 0 };

	sched_setscheduler(0, policy, &sp);
}

/*
 * Park until unparked, stopped, or @deadline; producers see it at once.
 * Parked, a poller is SCHED_OTHER where the process may leave SCHED_IDLE
 * (CAP_SYS_NICE, or RLIMIT_NICE 20): a thread must run to die.
 */
static void park(struct poller *p, uint32_t how, uint64_t deadline)
{
	struct wait w = WAIT(&p->parked, how, 0, deadline);

	/* relaxed: a hint for producers, who then wake the hog themselves */
	atomic_store_explicit(&p->beat, 0, memory_order_relaxed);
	set_policy(SCHED_OTHER); /* EPERM without the privilege: stays */
	/* parked (the first turn), then the seq_cst look at stop, which
	 * poll_tell_stop() stores before it moves the word: one sleep */
	do
		cpuhog_i_wait_turn(&w);
	while (w.slept == 1 && w.seen == how && !atomic_load(&p->stop));
	atomic_store(&p->parked, POLLING);
}

/* Work for a sleeping hog: take the wake (the exchange owns it). */
static void claim(struct poller *p)
{
	struct hog *h = p->hog;

	/* acquire: pairs with the producer's seq_cst push */
	if (!atomic_load_explicit(&h->q.head, memory_order_acquire))
		return;
	if (atomic_load(&h->q.sleeping) && atomic_exchange(&h->q.sleeping, 0)) {
		atomic_fetch_add_explicit(&p->claims, 1, memory_order_relaxed);
		cpuhog_i_futex_wake(&h->q.sleeping, 1);
	}
}

/* Acknowledge hog_synchronize()'s generation @gen (design note). */
static void ack(struct poller *p, uint32_t gen)
{
	/* orders what ran on this CPU before us (switched out, a full
	 * barrier each) before the ack the caller acquires */
#ifdef __SANITIZE_THREAD__
	/* GCC's TSan refuses fences: a seq_cst RMW is one on every target
	 * TSan runs on (a locked instruction on x86) */
	static _Atomic uint32_t fence_word;
	atomic_fetch_add(&fence_word, 0);
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
	atomic_store_explicit(&p->ack, gen, memory_order_release);
}

/* The idle time of @cpu so far, in /proc/stat's units; -1 if unknown.
 * The CPU lines come first: one read of the start of the file. */
static long long cpu_idle(struct poller *p, unsigned int cpu)
{
	char want[24], *line;
	long long idle;
	ssize_t got;
	size_t len;

	if (p->stat_fd < 0 ||
	    (got = pread(p->stat_fd, p->buf, p->bufsize - 1, 0)) <= 0)
		return -1;
	p->buf[got] = 0;
	len = (size_t)snprintf(want, sizeof(want), "\ncpu%u ", cpu);
	line = strstr(p->buf, want);
	if (line && sscanf(line + len, "%*s %*s %*s %lld", &idle) == 1)
		return idle;
	return -1;
}

/* Parked aside: until the CPU was idle enough for a whole look. */
static void aside(struct poller *p)
{
	unsigned int cpu = p->hog->cpu;
	long long before = cpu_idle(p, cpu), after;
	long hz = sysconf(_SC_CLK_TCK);

	for (;;) {
		park(p, PARKED_TIMED, cpuhog_i_deadline_in(ASIDE_NS));
		if (atomic_load_explicit(&p->stop, memory_order_relaxed))
			return;
		after = cpu_idle(p, cpu);
		if (before < 0 || after < 0 ||
		    (after - before) * 100 * 1000000000ll >=
			    IDLE_ENOUGH * (long long)ASIDE_NS * hz)
			return;
		before = after;
	}
}

/* Back to polling after a park: SCHED_IDLE, and the counts start over. */
static void resume(struct poller *p)
{
	set_policy(SCHED_IDLE);
	/* poll_ns counts from here too: work may come now */
	p->prev = p->window = p->yielded = p->last_work = cpuhog_i_now_ns();
	p->lost = 0;
}

/* Whether our hog ran a batch since we last looked: then @t is the last
 * work (poll_ns).  Asked before every poll_ns park too: a batch pauses
 * us for less than PAUSE_NS. */
static bool worked(struct poller *p, uint64_t t)
{
	uint32_t b = atomic_load_explicit(&p->batches, memory_order_relaxed);

	if (b == p->seen)
		return false;
	p->seen = b;
	p->last_work = t;
	return true;
}

/*
 * Whether this CPU is busy: others (our hog included) took more than
 * LOST_MAX_NS of the window.  Then step aside until it is idle again
 * (design note).
 */
static bool stepped_aside(struct poller *p, uint64_t t)
{
	if (t - p->window > WINDOW_NS) { /* a new window */
		p->window = t;
		p->lost = 0;
	}
	worked(p, t);
	p->lost += t - p->prev;
	p->prev = t;
	if (p->lost > LOST_MAX_NS) {
		aside(p);
		resume(p);
		return true;
	}
	return false;
}

/* Off our CPU (offline, cpuset): park, then try to go back. */
static void away(struct poller *p)
{
	park(p, PARKED_TIMED, cpuhog_i_deadline_in(AWAY_RETRY_NS));
	cpuhog_i_pin_to(p->hog->pin.masksize, p->mask, p->hog->cpu);
	resume(p);
}

/* One round of the poller's loop. */
static void poll_round(struct poller *p, struct ctx *c, uint32_t *acked)
{
	uint64_t t = cpuhog_i_now_ns();
	uint32_t gen;

	/* a pause over PAUSE_NS: another task ran, or our hog */
	if (t - p->prev > PAUSE_NS && stepped_aside(p, t))
		return;
	/* acquire: the caller's accesses before its bump */
	gen = atomic_load_explicit(&c->sync_gen, memory_order_acquire);
	if (sched_getcpu() != (int)p->hog->cpu) { /* after the load */
		away(p);
		return;
	}
	atomic_store_explicit(&p->beat, t, memory_order_relaxed);
	if (gen != *acked)
		ack(p, *acked = gen);
	claim(p);
	if (c->poll_ns && t - p->last_work > c->poll_ns && !worked(p, t)) {
		park(p, PARKED_IDLE, NO_DEADLINE); /* to the next batch */
		resume(p);
		return;
	}
	if (t - p->yielded > YIELD_NS) {
		/* a runnable thread of ours goes first; the time it takes
		 * counts as lost in the next round */
		sched_yield();
		p->yielded = t;
	}
	p->prev = t;
	cpu_relax();
}

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct ctx *c = p->hog->ctx;
	uint32_t acked = atomic_load(&c->sync_gen);

	/* start as if stepped aside: poll only once the CPU was idle for a
	 * whole look (a new poller would otherwise compete for it first) */
	aside(p);
	resume(p);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed))
		poll_round(p, c, &acked); /* cheap: loads, two vDSO calls */
	/* seq_cst: raised_and_left()'s raises after this leave us raised */
	atomic_store(&p->left, true);
	return NULL;
}

/* Whether @p is running on its CPU now. */
static bool poller_live(struct poller *p)
{
	uint64_t beat = atomic_load_explicit(&p->beat, memory_order_relaxed);

	return beat && (int64_t)(cpuhog_i_now_ns() - beat) < LIVE_NS;
}

/*
 * The hook of the wake path (cpuhog_i_wake_hog(), the work pushed): while the
 * poller runs, give it the wake for CLAIM_NS.  Returns true when the hog
 * is awake (the poller, or the hog itself, took it).
 */
bool cpuhog_i_poll_offer(struct hog *h)
{
	struct poller *p = h->poll;
	uint64_t end;

	if (!p || !atomic_load_explicit(&p->on, memory_order_relaxed))
		return false;
	/* on the poller's own CPU it cannot run while we spin; a local
	 * wake-up is cheap there anyway */
	if (sched_getcpu() == (int)h->cpu)
		return false;
	if (!poller_live(p))
		goto fallback;
	end = cpuhog_i_now_ns() + CLAIM_NS;
	while (atomic_load(&h->q.sleeping)) {
		cpu_relax();
		if (cpuhog_i_now_ns() > end)
			goto fallback;
	}
	return true;
fallback:
	atomic_fetch_add_explicit(&p->fallbacks, 1, memory_order_relaxed);
	return false;
}

/* The hog's side, after each batch: count it, and a poller parked for
 * want of work (poll_ns) polls again.  One that stepped aside or is away
 * stays parked: a busy CPU must not see it back at each call. */
void cpuhog_i_poll_unpark(struct hog *h)
{
	struct poller *p = h->poll;
	uint32_t idle = PARKED_IDLE;

	if (!p || !atomic_load_explicit(&p->on, memory_order_relaxed))
		return; /* sleep mode: nothing to count */
	atomic_fetch_add_explicit(&p->batches, 1, memory_order_relaxed);
	if (atomic_load(&p->parked) == PARKED_IDLE &&
	    atomic_compare_exchange_strong(&p->parked, &idle, POLLING))
		cpuhog_i_futex_wake(&p->parked, 1);
}

/* Whether @h's poller acknowledged generation @gen. */
static bool acked(struct hog *h, uint32_t gen)
{
	/* acquire: pairs with ack()'s release */
	return h->poll &&
	       atomic_load_explicit(&h->poll->ack, memory_order_acquire) == gen;
}

/*
 * hog_synchronize()'s fast path, under the multi-CPU lock: the pollers
 * of the hogs of @s that run now acknowledge a new generation.  Leaves
 * in @s those that did not (their hogs must run).
 */
void cpuhog_i_poll_sync(struct ctx *c, struct sel *s)
{
	uint32_t gen;
	uint64_t end;
	unsigned int i, n = s->n, left = 0, asked = 0;

	if (!(c->flags & CPUHOG_F_POLL))
		return;
	/* seq_cst: the caller's accesses before, ordered with the fence
	 * the caller issued; a poller that reads gen sees them */
	gen = atomic_fetch_add(&c->sync_gen, 1) + 1;
	for (i = 0; i < n; i++)
		asked += s->hog[i]->poll && poller_live(s->hog[i]->poll);
	end = cpuhog_i_now_ns() + (asked ? CLAIM_NS : 0);
	do {
		for (i = left = 0; i < n; i++)
			if (!acked(s->hog[i], gen)) {
				s->flags[left] = s->flags[i];
				s->hog[left++] = s->hog[i];
			}
		atomic_fetch_add_explicit(&c->poll_sync_acks, n - left,
					  memory_order_relaxed);
		n = left;
	} while (n && cpuhog_i_now_ns() < end && (cpu_relax(), true));
	s->n = n;
}

/* @p's memory and descriptors (its thread gone, or never in this
 * process: a forked child's inherited context). */
static void poller_free(struct poller *p)
{
	if (p->stat_fd >= 0)
		close(p->stat_fd);
	free(p->buf);
	CPU_FREE(p->mask);
	free(p);
}

static struct poller *poller_new(struct hog *h)
{
	struct poller *p = aligned_alloc(CACHELINE, sizeof(*p));

	if (!p)
		return NULL;
	memset(p, 0, sizeof(*p));
	p->hog = h;
	/* the CPU lines of /proc/stat: 'cpuN' and ten numbers each */
	p->bufsize = 256 + 160 * (size_t)h->ctx->nr_cpu_ids;
	p->buf = malloc(p->bufsize);
	p->mask = CPU_ALLOC(h->ctx->nr_cpu_ids);
	p->stat_fd = p->buf ? open("/proc/stat", O_RDONLY | O_CLOEXEC) : -1;
	if (!p->buf || !p->mask) {
		poller_free(p);
		return NULL;
	}
	CPU_ZERO_S(h->pin.masksize, p->mask);
	CPU_SET_S(h->cpu, h->pin.masksize, p->mask);
	return p;
}

int cpuhog_i_poll_start(struct hog *h)
{
	struct sched_param sp = { 0 };
	struct poller *p = poller_new(h);
	pthread_attr_t pa;
	sigset_t all;
	char name[16];
	int r;

	if (!p)
		return -ENOMEM;
	sigfillset(&all);
	pthread_attr_init(&pa);
	pthread_attr_setstacksize(&pa, PTHREAD_STACK_MIN + 16384);
	pthread_attr_setsigmask_np(&pa, &all);
	/* born SCHED_OTHER, not the creator's real time; it parks first and
	 * turns SCHED_IDLE itself when it starts polling (resume()) */
	pthread_attr_setinheritsched(&pa, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&pa, SCHED_OTHER);
	pthread_attr_setschedparam(&pa, &sp);
	/* away with its hog, where the CPU cannot be had now (away()) */
	r = cpuhog_i_thread_start(&p->thread, &pa, h->pin.masksize, p->mask,
				  h->ctx->possible, poller_main, p);
	pthread_attr_destroy(&pa);
	if (r < 0) {
		poller_free(p);
		return r;
	}
	atomic_store(&p->on, true);
	h->poll = p;
	snprintf(name, sizeof(name), "cpuhog-p/%u", h->cpu % 1000000u);
	pthread_setname_np(p->thread, name);
	return 0;
}

/* Tell the poller to leave, and wake it if parked. */
static void poll_tell_stop(struct poller *p)
{
	atomic_store(&p->stop, true);
	if (atomic_exchange(&p->parked, POLLING))
		cpuhog_i_futex_wake(&p->parked, 1);
}

/* A poller must run to stop (design note: Exit): the lowest real-time
 * priority where the process may, else SCHED_OTHER. */
static void raise_poller(struct poller *p)
{
	if (pthread_setschedparam(p->thread, SCHED_FIFO,
				  &(struct sched_param){ 1 }) != 0)
		pthread_setschedparam(p->thread, SCHED_OTHER,
				      &(struct sched_param){ 0 });
}

/*
 * Raise the poller until it has left its loop.  A poller between its
 * look at stop and its own set_policy() (park(), resume()) lowers itself
 * again after a raise, so a poller counts as gone only where `left` was
 * read before a raise: that raise came after its last set_policy().
 */
static bool raised_and_left(struct poller *p)
{
	bool left = atomic_load(&p->left); /* seq_cst, before the raise */

	raise_poller(p);
	return left;
}

static bool past(const struct timespec *until)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > until->tv_sec ||
	       (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec);
}

static bool running(struct hog *h)
{
	return h->poll && atomic_load(&h->poll->on);
}

/*
 * The process exits: every poller of @hogs is told to leave, then all are
 * raised together, round after round (one after another against one
 * deadline, the later ones would get a single raise), until each has
 * left its loop or @until (CLOCK_REALTIME); those that left are joined.
 * A poller that cannot run by then (exit() from a stop's callback, whose
 * hogs spin on every CPU) the exit kills.  Calls made after this (other
 * destructors) wake their hogs themselves.
 */
void cpuhog_i_poll_exit_all(struct hog *hogs, unsigned int n,
			    const struct timespec *until)
{
	struct timespec nap = { 0, 50000 };
	unsigned int i, gone;

	for (i = 0; i < n; i++)
		if (running(&hogs[i]))
			poll_tell_stop(hogs[i].poll);
	do {
		for (i = 0, gone = 0; i < n; i++)
			gone += !running(&hogs[i]) ||
				raised_and_left(hogs[i].poll);
	} while (gone < n && !past(until) && nanosleep(&nap, NULL) == 0);
	for (i = 0; i < n; i++)
		if (running(&hogs[i]) && atomic_load(&hogs[i].poll->left) &&
		    pthread_timedjoin_np(hogs[i].poll->thread, NULL, until) == 0)
			atomic_store(&hogs[i].poll->on, false);
}

/* Stop @h's poller and join it.  Its memory stays until ctx_free()
 * (cpuhog_i_poll_forget()): the hog, still running, may read it after a batch.
 */
void cpuhog_i_poll_stop(struct hog *h)
{
	struct timespec nap = { 0, 50000 };
	struct poller *p = h->poll;

	if (!p || !atomic_load(&p->on))
		return;
	poll_tell_stop(p);
	while (!raised_and_left(p))
		nanosleep(&nap, NULL);
	pthread_join(p->thread, NULL);
	atomic_store(&p->on, false);
}

/* The poller's memory, its thread stopped or never in this process (a
 * forked child's inherited context). */
void cpuhog_i_poll_forget(struct hog *h)
{
	if (h->poll)
		poller_free(h->poll);
	h->poll = NULL;
}

/* Polling now: not parked, and a beat within a tick (running, or about
 * to run again). */
bool cpuhog_i_poll_polling(const struct hog *h)
{
	struct poller *p = h->poll;
	uint64_t beat;

	if (!p || !atomic_load(&p->on))
		return false;
	beat = atomic_load_explicit(&p->beat, memory_order_relaxed);
	return beat && (int64_t)(cpuhog_i_now_ns() - beat) < 10000000 &&
	       atomic_load(&p->parked) == POLLING;
}

/* The wakes the pollers took, and those they left to the producers. */
void cpuhog_i_poll_counts(const struct ctx *c, uint64_t *claims,
			  uint64_t *fallbacks)
{
	unsigned int i;

	*claims = *fallbacks = 0;
	for (i = 0; i < c->nr_hogs; i++)
		if (c->hogs[i].poll) {
			*claims += atomic_load_explicit(&c->hogs[i].poll->claims,
							memory_order_relaxed);
			*fallbacks += atomic_load_explicit(
				&c->hogs[i].poll->fallbacks, memory_order_relaxed);
		}
}
