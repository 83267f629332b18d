/* SPDX-License-Identifier: MIT */
/*
 * Poll mode (CPUHOG_F_POLL): a poller per hogged CPU spins at SCHED_IDLE
 * and wakes its sleeping hog with a futex on its own CPU, so a producer's
 * wake costs no IPI and no idle exit.  Callbacks still run in the hog,
 * and a poller never holds real time, so none can leave a FIFO-99 thread
 * spinning.  Whoever exchanges the hog's `sleeping` from 1 to 0 owns the
 * one futex wake, poller or producer (hog.c).  SCHED_IDLE's weight holds
 * only within a group (autogroup, cgroups), so a poller steps aside from
 * a busy CPU by itself, and starts so.  A process is gone only once each
 * thread ran: a poller is SCHED_IDLE only while it polls, and exit
 * raises it until it left its loop.  hog_synchronize(): a poller running
 * on its CPU means every other thread there was switched out (a full
 * barrier), so its ack of the generation proves what a hog's run would.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLAIM_NS 5000u        /* a producer leaves a running poller this */
#define LIVE_NS 5000          /* a beat older than this: not running now */
#define PAUSE_NS 20000u       /* shorter pauses: interrupts, VM exits */
#define WINDOW_NS 10000000ull /* the poller keeps count of its lost time */
#define LOST_MAX_NS 1000000ull /* others took more of a window: step aside */
#define LOOK_NS 100000000ull  /* parked aside or away: look again this often */
#define IDLE_ENOUGH 90        /* % idle over that time: poll again */
#define NAP (&(struct timespec){ 0, 50000 }) /* waiting for pollers to go */
/* EEVDF may pick a poller with no lag over a runnable thread of ours */
#define YIELD_NS 50000u

/* How a poller is parked: its hog's next batch ends only an idle park. */
enum { POLLING, PARKED_IDLE, PARKED_TIMED };

struct poller {
	/* the poller's, read by producers; beat 0: parked */
	alignas(CACHELINE) _Atomic uint64_t beat;
	_Atomic uint32_t ack;
	_Atomic uint32_t parked; /* its futex: how it is parked */
	_Atomic uint64_t claims, fallbacks;
	_Atomic bool stop;
	_Atomic bool left; /* out of its loop: changes its policy no more */
	_Atomic bool on;   /* running: producers may leave it the wake */
	alignas(CACHELINE) _Atomic uint32_t batches; /* the hog's */
	/* the poller's own; cpuhog_i_poll_forget() frees them */
	uint64_t prev, last_work, window, lost, yielded;
	uint32_t seen;
	int stat_fd;
	char *buf;
	size_t bufsize;
	cpu_set_t *mask;
	struct hog *hog;
	pthread_t thread;
};

/* Park until unparked, stopped, or @deadline: SCHED_OTHER meanwhile where
 * the process may leave SCHED_IDLE, as a thread must run to die. */
static void park(struct poller *p, uint32_t how, uint64_t deadline)
{
	struct wait w = WAIT(&p->parked, how, 0, deadline);

	/* relaxed: a hint for producers, who then wake the hog themselves */
	atomic_store_explicit(&p->beat, 0, memory_order_relaxed);
	/* EPERM without the privilege: stays */
	sched_setscheduler(0, SCHED_OTHER, &(struct sched_param){ 0 });
	/* seq_cst: poll_tell_stop() stores stop before it moves the word */
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

static void ack(struct poller *p, uint32_t gen)
{
	/* orders what ran on this CPU before us (switched out, a full
	 * barrier each) before the ack the caller acquires */
#ifdef __SANITIZE_THREAD__
	/* GCC's TSan refuses fences: a seq_cst RMW is one where TSan runs */
	static _Atomic uint32_t fence_word;
	atomic_fetch_add(&fence_word, 0);
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
	atomic_store_explicit(&p->ack, gen, memory_order_release);
}

/* Our CPU's idle time in /proc/stat's units, -1 if unknown. */
static long long cpu_idle(struct poller *p)
{
	char want[24], *line;
	long long idle;
	size_t len;

	if (cpuhog_i_read_fd(p->stat_fd, p->buf, p->bufsize) <= 0)
		return -1;
	len = (size_t)snprintf(want, sizeof(want), "\ncpu%u ", p->hog->cpu);
	line = strstr(p->buf, want);
	if (line && sscanf(line + len, "%*s %*s %*s %lld", &idle) == 1)
		return idle;
	return -1;
}

/* Back to polling after a park; poll_ns counts from here too. */
static void resume(struct poller *p)
{
	sched_setscheduler(0, SCHED_IDLE, &(struct sched_param){ 0 });
	p->prev = p->window = p->yielded = p->last_work = cpuhog_i_now_ns();
	p->lost = 0;
}

/* Parked aside until the CPU was idle enough for a whole look. */
static void aside(struct poller *p)
{
	long long before = cpu_idle(p), after;
	long hz = sysconf(_SC_CLK_TCK);

	for (;;) {
		park(p, PARKED_TIMED, cpuhog_i_deadline_in(LOOK_NS));
		if (atomic_load_explicit(&p->stop, memory_order_relaxed))
			break;
		after = cpu_idle(p);
		if (before < 0 || after < 0 ||
		    (after - before) * 100 * 1000000000ll >=
			    IDLE_ENOUGH * (long long)LOOK_NS * hz)
			break;
		before = after;
	}
	resume(p);
}

/* Whether our hog ran a batch since we last looked: then @t was work. */
static bool worked(struct poller *p, uint64_t t)
{
	uint32_t b = atomic_load_explicit(&p->batches, memory_order_relaxed);

	if (b == p->seen)
		return false;
	p->seen = b;
	p->last_work = t;
	return true;
}

/* Others (our hog included) took over LOST_MAX_NS of the window: aside. */
static bool stepped_aside(struct poller *p, uint64_t t)
{
	if (t - p->window > WINDOW_NS) {
		p->window = t;
		p->lost = 0;
	}
	worked(p, t);
	p->lost += t - p->prev;
	p->prev = t;
	if (p->lost > LOST_MAX_NS) {
		aside(p);
		return true;
	}
	return false;
}

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
		/* offline, or out of the cpuset: try to go back later */
		park(p, PARKED_TIMED, cpuhog_i_deadline_in(LOOK_NS));
		cpuhog_i_pin_to(p->hog->pin.masksize, p->mask, p->hog->cpu);
		resume(p);
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
		/* the time a thread of ours takes counts as lost next round */
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

	/* start stepped aside: a new poller must not compete for its CPU */
	aside(p);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed))
		poll_round(p, c, &acked);
	/* seq_cst: raised_and_left()'s raises after this leave us raised */
	atomic_store(&p->left, true);
	return NULL;
}

/* Whether @p's beat is younger than @max_ns (0: parked). */
static bool fresh(struct poller *p, int64_t max_ns)
{
	uint64_t beat = atomic_load_explicit(&p->beat, memory_order_relaxed);

	return beat && (int64_t)(cpuhog_i_now_ns() - beat) < max_ns;
}

static bool running(const struct hog *h)
{
	return h->poll && atomic_load(&h->poll->on);
}

/* The wake path's hook: while the poller runs, leave it the wake for
 * CLAIM_NS.  True when the hog is awake (the poller or the hog took it). */
bool cpuhog_i_poll_offer(struct hog *h)
{
	struct poller *p = h->poll;
	uint64_t end;

	/* the poller cannot run on our CPU while we spin: wake locally */
	if (!p || !atomic_load_explicit(&p->on, memory_order_relaxed) ||
	    sched_getcpu() == (int)h->cpu)
		return false;
	if (!fresh(p, LIVE_NS))
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

/* The hog, after each batch: count it, and unpark a poller parked for
 * want of work; one aside or away stays, or a busy CPU sees it back. */
void cpuhog_i_poll_unpark(struct hog *h)
{
	struct poller *p = h->poll;
	uint32_t idle = PARKED_IDLE;

	if (!p || !atomic_load_explicit(&p->on, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&p->batches, 1, memory_order_relaxed);
	if (atomic_load(&p->parked) == PARKED_IDLE &&
	    atomic_compare_exchange_strong(&p->parked, &idle, POLLING))
		cpuhog_i_futex_wake(&p->parked, 1);
}

static bool acked(struct hog *h, uint32_t gen)
{
	/* acquire: pairs with ack()'s release */
	return h->poll &&
	       atomic_load_explicit(&h->poll->ack, memory_order_acquire) == gen;
}

/* hog_synchronize()'s fast path, under the multi-CPU lock: leaves in @s
 * the hogs whose poller did not acknowledge a new generation. */
void cpuhog_i_poll_sync(struct ctx *c, struct sel *s)
{
	uint32_t gen;
	uint64_t end = 0;
	unsigned int i, n = s->n, left;

	if (!(c->flags & CPUHOG_F_POLL))
		return;
	/* seq_cst: a poller that reads gen sees the caller's accesses before */
	gen = atomic_fetch_add(&c->sync_gen, 1) + 1;
	for (i = 0; i < n && !end; i++)
		if (s->hog[i]->poll && fresh(s->hog[i]->poll, LIVE_NS))
			end = cpuhog_i_now_ns() + CLAIM_NS;
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
	/* /proc/stat's CPU lines, which come first: 'cpuN' and ten numbers */
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
	struct poller *p = poller_new(h);
	char name[16];
	int r;

	if (!p)
		return -ENOMEM;
	snprintf(name, sizeof(name), "cpuhog-p/%u", h->cpu % 1000000u);
	/* away with its hog, where the CPU cannot be had now (poll_round()) */
	r = cpuhog_i_thread_start(&p->thread, PTHREAD_STACK_MIN + 16384,
				  h->pin.masksize, p->mask, h->ctx->possible,
				  poller_main, p, name);
	if (r < 0) {
		poller_free(p);
		return r;
	}
	atomic_store(&p->on, true);
	h->poll = p;
	return 0;
}

static void poll_tell_stop(struct poller *p)
{
	atomic_store(&p->stop, true);
	if (atomic_exchange(&p->parked, POLLING))
		cpuhog_i_futex_wake(&p->parked, 1);
}

/*
 * Raise @p so that it runs to stop: FIFO 1 where the process may (raised
 * to SCHED_OTHER, it keeps the vruntime run up at weight 3 on 6.1's CFS),
 * else SCHED_OTHER.  A poller between its look at stop and its own
 * sched_setscheduler() lowers itself again, so it is gone only where `left` was
 * read before a raise: that raise came after its last.
 */
static bool raised_and_left(struct poller *p)
{
	bool left = atomic_load(&p->left); /* seq_cst, before the raise */

	if (pthread_setschedparam(p->thread, SCHED_FIFO,
				  &(struct sched_param){ 1 }) != 0)
		pthread_setschedparam(p->thread, SCHED_OTHER,
				      &(struct sched_param){ 0 });
	return left;
}

static bool past(const struct timespec *until)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > until->tv_sec ||
	       (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec);
}

/*
 * The process exits: tell every poller to leave, then raise all of them
 * round after round (one at a time, the later ones would get one raise)
 * until each left or @until (CLOCK_REALTIME); join those that left.  One
 * that cannot run by then (exit() from a stop's callback) the exit kills.
 */
void cpuhog_i_poll_exit_all(struct hog *hogs, unsigned int n,
			    const struct timespec *until)
{
	unsigned int i, gone;

	for (i = 0; i < n; i++)
		if (running(&hogs[i]))
			poll_tell_stop(hogs[i].poll);
	do {
		for (i = 0, gone = 0; i < n; i++)
			gone += !running(&hogs[i]) ||
				raised_and_left(hogs[i].poll);
	} while (gone < n && !past(until) && nanosleep(NAP, NULL) == 0);
	for (i = 0; i < n; i++)
		if (running(&hogs[i]) && atomic_load(&hogs[i].poll->left) &&
		    !pthread_timedjoin_np(hogs[i].poll->thread, NULL, until))
			atomic_store(&hogs[i].poll->on, false);
}

/* Stop @h's poller and join it; its memory stays until
 * cpuhog_i_poll_forget(), as the hog may still read it after a batch. */
void cpuhog_i_poll_stop(struct hog *h)
{
	struct poller *p = h->poll;

	if (!running(h))
		return;
	poll_tell_stop(p);
	while (!raised_and_left(p))
		nanosleep(NAP, NULL);
	pthread_join(p->thread, NULL);
	atomic_store(&p->on, false);
}

/* Its thread stopped, or never in this process (a forked child's). */
void cpuhog_i_poll_forget(struct hog *h)
{
	if (h->poll)
		poller_free(h->poll);
	h->poll = NULL;
}

/* Polling now: not parked, and a beat within a tick. */
bool cpuhog_i_poll_polling(const struct hog *h)
{
	return running(h) && fresh(h->poll, 10000000) &&
	       atomic_load(&h->poll->parked) == POLLING;
}

void cpuhog_i_poll_counts(const struct ctx *c, uint64_t *claims,
			  uint64_t *fallbacks)
{
	unsigned int i;

	*claims = *fallbacks = 0;
	for (i = 0; i < c->nr_hogs; i++) {
		struct poller *p = c->hogs[i].poll;

		if (!p)
			continue;
		*claims += atomic_load_explicit(&p->claims,
						memory_order_relaxed);
		*fallbacks += atomic_load_explicit(&p->fallbacks,
						   memory_order_relaxed);
	}
}
