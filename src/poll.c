/* SPDX-License-Identifier: MIT */
/*
 * Poll mode (CPUHOG_F_POLL): a poller per hogged CPU, polling at SCHED_IDLE.
 *
 * Why.  Waking a sleeping hog from another CPU costs an IPI and, on an
 * idle CPU, its exit from idle: 20-40 us here, which no design whose
 * threads sleep can beat.  Runtimes that spin (OpenMP, DPDK, Seastar)
 * get near the cache-line floor and pay with a core nobody else may use.
 * Here the spinning is done at the lowest priority there is.
 *
 * Which design.  A separate poller, not a hog that polls and raises
 * itself: a poller never holds real-time priority, so no state of it can
 * leave a thread spinning at FIFO 99 with no work (the raise would be a
 * sched_setscheduler() call on every request, and a lost race would leave
 * exactly that).  The poller watches its hog's queue and, when work
 * arrives for a sleeping hog, wakes it with a futex on its own CPU: no
 * IPI, no idle exit; the hog preempts it at once.  Callbacks still run in
 * the hog, with every promise of sleep mode; the rendezvous of
 * stop_machine() is unchanged, only its wake-ups get faster.
 *
 * The wake-up handshake is the hog's own (hog.c): a hog going to sleep
 * sets `sleeping` and re-checks its queue; whoever takes `sleeping` from
 * 1 to 0 with an exchange owns the one futex wake, poller or producer.
 * A producer leaves the wake to the poller only while the poller's beat
 * (a time stamp it writes each round) is fresh, i.e. it is running now,
 * and only for CLAIM_NS; a poller that is not running (its CPU busy,
 * parked, away) costs the producer one cache-line read.
 *
 * Not stealing the CPU.  SCHED_IDLE weighs 3 against a nice-0 thread's
 * 1024, but only among the tasks of one group: under autogroup or a cpu
 * cgroup, a group whose only runnable task is our poller competes at a
 * full group's weight (measured here: a CPU-bound thread in another
 * session kept 51% of its throughput beside a bare SCHED_IDLE spinner).
 * So the poller steps aside by itself.  It counts the time it lost
 * (pauses in its loop) and when others took over LOST_MAX_NS of a
 * WINDOW_NS window it parks; an interrupt, a kworker or the hypervisor
 * taking the vCPU for 100 us here and there does not count (they happen
 * dozens of times a second on an idle VM).  Our own hog counts too: a
 * CPU kept 10% busy by calls is a busy CPU, and a poller that stayed
 * there would be the CPU-bound job beside a call storm's frequent
 * wake-ups that starves other sessions (a canary process woke 0.5-0.8 s
 * late in the hotplug and fork storms when the hog's runs were exempt).
 * Parked, it looks at its CPU's idle time (/proc/stat) every ASIDE_NS,
 * a read of a few microseconds, and polls again only once the CPU was
 * IDLE_ENOUGH percent idle: it never competes to find out.  Meanwhile
 * producers wake the hog as in sleep mode.  The same rule keeps a poller
 * moved by an offline from acting as a CPU-bound job beside the kernel's
 * threads (docs/RELIABILITY.md).
 *
 * hog_synchronize().  A poller running on its CPU now means no other
 * thread of ours runs there: each was switched out, and a context switch
 * is a full barrier (the scheduler's smp_mb__after_spinlock()).  So the
 * caller bumps a generation (seq_cst), and a poller that reads it, is
 * still on its CPU, and issues a seq_cst fence before publishing its ack
 * (release) proves, for that CPU, what a hog's run would: a thread that
 * was running there at the bump was switched out before the poller ran
 * (its accesses ordered before the ack, which the caller acquires), and
 * one switched in later passes a context switch after the poller read
 * the new generation (so after the caller's accesses).  That is the
 * argument of membarrier(2)'s expedited command, with the poller's
 * presence in place of its IPI.  A CPU whose poller does not answer in
 * CLAIM_NS gets its hog, as in sleep mode.
 *
 * Within the process, SCHED_IDLE does not mean "only when nothing else
 * runs": EEVDF may pick a poller over a runnable thread of ours (a new
 * poller has no lag against it), and with HZ=250 and no preemption of a
 * running fair task between ticks, that thread then waits up to 4 ms (a
 * trace caught a caller waiting 4.5 ms behind its CPU's poller after its
 * first stop_machine()).  So a poller calls sched_yield() every YIELD_NS:
 * its deadline moves on and a runnable thread is picked; when none is,
 * the call returns at once.
 *
 * A new poller starts stepped aside: it polls once its CPU was idle
 * for a whole look (100 ms after cpuhog_init() on an idle machine).  A
 * short-lived process, or a forked child that calls a few times and
 * exits, then never competes.  And a poller is SCHED_IDLE only while it
 * polls: born SCHED_OTHER (never the creator's real time), it goes back
 * to SCHED_OTHER when it parks, where the process may (see park()),
 * because a thread must run to exit: a fork storm's children, whose
 * SCHED_IDLE pollers sat on CPUs busy with the parent's calls, took up
 * to a second each to be reaped, and the canary woke 130 ms late.
 *
 * The same holds for the process's exit: exit_group() kills every
 * thread, but the process is gone only once each has run, and a polling
 * poller beside a busy CPU of its session waited 118-174 ms for its turn
 * (sleep mode: 1 ms).  So exit() stops the pollers first (a destructor
 * in lifecycle.c; poll_exit_all()).  A process killed by a signal's default
 * action runs no code of ours: its pollers still wait for their turn.
 *
 * With cpuhog_attr.poll_ns the poller parks after that long without
 * work, and the hog unparks it after its next batch (Seastar's reactors
 * poll 200 us, then sleep).  A poller whose CPU went away parks and
 * re-pins itself when the CPU is back.  Nothing here allocates on a
 * call's path.
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

/* The calling thread's policy: SCHED_IDLE to poll (resume()), SCHED_OTHER
 * parked. */
static void set_policy(int policy)
{
	struct sched_param sp = { 0 };

	sched_setscheduler(0, policy, &sp);
}

/*
 * Park until unparked, stopped, or @deadline; producers see it at once.
 * Parked, a poller is SCHED_OTHER (born so; back from SCHED_IDLE where
 * the process may: CAP_SYS_NICE, or RLIMIT_NICE 20): a thread must run
 * to die, and a
 * SCHED_IDLE one on a busy CPU waited up to a second to, holding up its
 * process's exit (a forked child's waitpid() took 170-970 ms, not 3).
 */
static void park(struct hog *h, uint32_t how, uint64_t deadline)
{
	struct wait w = WAIT(&h->poll_parked, how, 0, deadline);

	/* relaxed: a hint for producers, who then wake the hog themselves */
	atomic_store_explicit(&h->poll_beat, 0, memory_order_relaxed);
	set_policy(SCHED_OTHER); /* EPERM without the privilege: stays */
	/* parked (the first turn), then the seq_cst look at poll_stop, which
	 * poll_tell_stop() stores before it moves the word: one sleep */
	do
		wait_turn(&w);
	while (w.slept == 1 && w.seen == how && !atomic_load(&h->poll_stop));
	atomic_store(&h->poll_parked, POLLING);
}

/* Work for a sleeping hog: take the wake (the exchange owns it). */
static void claim(struct hog *h)
{
	/* acquire: pairs with the producer's seq_cst push */
	if (!atomic_load_explicit(&h->head, memory_order_acquire))
		return;
	if (atomic_load(&h->sleeping) && atomic_exchange(&h->sleeping, 0)) {
		atomic_fetch_add_explicit(&h->poll_claims, 1,
					  memory_order_relaxed);
		futex_wake(&h->sleeping, 1);
	}
}

/* Acknowledge hog_synchronize()'s generation @gen (design note). */
static void ack(struct hog *h, uint32_t gen)
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
	atomic_store_explicit(&h->poll_ack, gen, memory_order_release);
}

struct poller {
	uint64_t prev, last_work, window, lost, yielded;
	uint32_t batches;
	int stat_fd; /* /proc/stat, for the CPU's idle time */
	char *buf;
	size_t bufsize;
};

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
static void aside(struct hog *h, struct poller *p)
{
	long long before = cpu_idle(p, h->cpu), after;
	long hz = sysconf(_SC_CLK_TCK);

	for (;;) {
		park(h, PARKED_TIMED, deadline_in(ASIDE_NS));
		if (atomic_load_explicit(&h->poll_stop, memory_order_relaxed))
			return;
		after = cpu_idle(p, h->cpu);
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
	p->prev = p->window = p->yielded = p->last_work = now_ns();
	p->lost = 0;
}

/* Whether our hog ran a batch since we last looked: then @t is the last
 * work (poll_ns).  Asked at every pause and before every poll_ns park: a
 * call's batch pauses us for ~5 us only, under PAUSE_NS, and a poller
 * that looked only at long pauses parked while calls came every 500 us. */
static bool worked(struct hog *h, struct poller *p, uint64_t t)
{
	uint32_t b = atomic_load_explicit(&h->batches, memory_order_relaxed);

	if (b == p->batches)
		return false;
	p->batches = b;
	p->last_work = t;
	return true;
}

/*
 * Whether this CPU is busy: others (our hog included) took more than
 * LOST_MAX_NS of the window.  Then step aside until it is idle again
 * (design note).
 */
static bool stepped_aside(struct hog *h, struct poller *p, uint64_t t)
{
	if (t - p->window > WINDOW_NS) { /* a new window */
		p->window = t;
		p->lost = 0;
	}
	worked(h, p, t);
	p->lost += t - p->prev;
	p->prev = t;
	if (p->lost > LOST_MAX_NS) {
		aside(h, p);
		resume(p);
		return true;
	}
	return false;
}

/* Off our CPU (offline, cpuset): park, then try to go back. */
static void away(struct hog *h, struct poller *p)
{
	park(h, PARKED_TIMED, deadline_in(AWAY_RETRY_NS));
	pin_to(h->masksize, h->poll_mask, h->cpu);
	resume(p);
}

static void *poller_main(void *arg)
{
	struct hog *h = arg;
	struct ctx *c = h->ctx;
	struct poller p = { 0 };
	uint32_t gen, acked = atomic_load(&c->sync_gen);
	uint64_t t;

	/* the CPU lines of /proc/stat: 'cpuN' and ten numbers each */
	p.bufsize = 256 + 160 * (size_t)c->nr_cpu_ids;
	p.buf = malloc(p.bufsize);
	p.stat_fd = p.buf ? open("/proc/stat", O_RDONLY | O_CLOEXEC) : -1;
	/* the context owns them too: a forked child, where this thread
	 * does not exist, frees them with its inherited context */
	h->poll_fd = p.stat_fd;
	h->poll_buf = p.buf;
	/* start as if stepped aside: poll only once the CPU was idle for a
	 * whole look (a new poller would otherwise compete for it first) */
	aside(h, &p);
	resume(&p);
	while (!atomic_load_explicit(&h->poll_stop, memory_order_relaxed)) {
		/* a round: a few loads and two vDSO calls, ~50 ns; a pause
		 * over PAUSE_NS: another task ran, or our hog */
		t = now_ns();
		if (t - p.prev > PAUSE_NS && stepped_aside(h, &p, t))
			continue;
		/* acquire: the caller's accesses before its bump */
		gen = atomic_load_explicit(&c->sync_gen, memory_order_acquire);
		if (sched_getcpu() != (int)h->cpu) { /* after the load */
			away(h, &p);
			continue;
		}
		atomic_store_explicit(&h->poll_beat, t, memory_order_relaxed);
		if (gen != acked)
			ack(h, acked = gen);
		claim(h);
		if (c->poll_ns && t - p.last_work > c->poll_ns &&
		    !worked(h, &p, t)) {
			park(h, PARKED_IDLE, NO_DEADLINE); /* to the next batch */
			resume(&p);
			continue;
		}
		if (t - p.yielded > YIELD_NS) {
			/* a runnable thread of ours goes first; the time it
			 * takes counts as lost in the next round */
			sched_yield();
			p.yielded = t;
		}
		p.prev = t;
		cpu_relax();
	}
	/* seq_cst: raise_until_left()'s raises after this leave us raised */
	atomic_store(&h->poll_left, true);
	h->poll_fd = -1;
	h->poll_buf = NULL;
	if (p.stat_fd >= 0)
		close(p.stat_fd);
	free(p.buf);
	return NULL;
}

/* Whether @h's poller is running on its CPU now. */
static bool poller_live(struct hog *h)
{
	uint64_t beat = atomic_load_explicit(&h->poll_beat,
					     memory_order_relaxed);

	return beat && (int64_t)(now_ns() - beat) < LIVE_NS;
}

/*
 * The producer's side of a wake-up (from wake_hog(), the work pushed):
 * while the poller runs, give it the wake for CLAIM_NS.  Returns true
 * when the hog is awake (the poller, or the hog itself, took it).
 */
bool poll_offer(struct hog *h)
{
	uint64_t end;

	if (!h->poller_on)
		return false;
	/* on the poller's own CPU it cannot run while we spin; a local
	 * wake-up is cheap there anyway */
	if (sched_getcpu() == (int)h->cpu)
		return false;
	if (!poller_live(h))
		goto fallback;
	end = now_ns() + CLAIM_NS;
	while (atomic_load(&h->sleeping)) {
		cpu_relax();
		if (now_ns() > end)
			goto fallback;
	}
	return true;
fallback:
	atomic_fetch_add_explicit(&h->poll_fallbacks, 1, memory_order_relaxed);
	return false;
}

/* The hog's side, after each batch: count it, and a poller parked for
 * want of work (poll_ns) polls again.  One that stepped aside or is away
 * stays parked: a busy CPU must not see it back at each call. */
void poll_unpark(struct hog *h)
{
	uint32_t idle = PARKED_IDLE;

	if (!h->poller_on)
		return; /* sleep mode: nothing to count */
	atomic_fetch_add_explicit(&h->batches, 1, memory_order_relaxed);
	if (atomic_load(&h->poll_parked) == PARKED_IDLE &&
	    atomic_compare_exchange_strong(&h->poll_parked, &idle, POLLING))
		futex_wake(&h->poll_parked, 1);
}

/*
 * hog_synchronize()'s fast path, under the multi-CPU lock: the pollers
 * of c->msel[0..n) that run now acknowledge a new generation.  Leaves in
 * c->msel those that did not (their hogs must run) and returns how many.
 */
unsigned int poll_sync(struct ctx *c, unsigned int n)
{
	uint32_t gen;
	uint64_t end;
	unsigned int i, left = 0, asked = 0;

	if (!(c->flags & CPUHOG_F_POLL))
		return n;
	/* seq_cst: the caller's accesses before, ordered with the fence
	 * the caller issued; a poller that reads gen sees them */
	gen = atomic_fetch_add(&c->sync_gen, 1) + 1;
	for (i = 0; i < n; i++)
		asked += poller_live(c->msel[i]);
	end = now_ns() + (asked ? CLAIM_NS : 0);
	do {
		for (i = left = 0; i < n; i++)
			/* acquire: pairs with ack()'s release */
			if (atomic_load_explicit(&c->msel[i]->poll_ack,
						 memory_order_acquire) != gen)
				c->msel[left++] = c->msel[i];
		atomic_fetch_add_explicit(&c->poll_sync_acks, n - left,
					  memory_order_relaxed);
		n = left;
	} while (n && now_ns() < end && (cpu_relax(), true));
	return n;
}

int poll_start(struct hog *h)
{
	struct sched_param sp = { 0 };
	pthread_attr_t pa;
	sigset_t all;
	char name[16];
	int r;

	h->poll_mask = CPU_ALLOC(h->ctx->nr_cpu_ids);
	if (!h->poll_mask)
		return -ENOMEM;
	CPU_ZERO_S(h->masksize, h->poll_mask);
	CPU_SET_S(h->cpu, h->masksize, h->poll_mask);
	sigfillset(&all);
	pthread_attr_init(&pa);
	pthread_attr_setstacksize(&pa, PTHREAD_STACK_MIN + 16384);
	pthread_attr_setsigmask_np(&pa, &all);
	/* born SCHED_OTHER, not the creator's real time; it parks first and
	 * turns SCHED_IDLE itself when it starts polling (resume()) */
	pthread_attr_setinheritsched(&pa, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&pa, SCHED_OTHER);
	pthread_attr_setschedparam(&pa, &sp);
	atomic_store_explicit(&h->poll_left, false, memory_order_relaxed);
	/* away with its hog, where the CPU cannot be had now (away()) */
	r = thread_start(&h->poller, &pa, h->masksize, h->poll_mask,
			 h->ctx->possible, poller_main, h);
	pthread_attr_destroy(&pa);
	if (r < 0) {
		CPU_FREE(h->poll_mask);
		h->poll_mask = NULL;
		return r;
	}
	h->poller_on = true;
	snprintf(name, sizeof(name), "cpuhog-p/%u", h->cpu % 1000000u);
	pthread_setname_np(h->poller, name);
	return 0;
}

/* Tell the poller to leave, and wake it if parked. */
static void poll_tell_stop(struct hog *h)
{
	atomic_store(&h->poll_stop, true);
	if (atomic_exchange(&h->poll_parked, POLLING))
		futex_wake(&h->poll_parked, 1);
}

/*
 * A polling poller is SCHED_IDLE: on a busy CPU its next turn may be a
 * tenth of a second away, and it must run to stop, or to let its process
 * exit.  Raised to SCHED_OTHER only, a poller that had polled at
 * SCHED_IDLE kept the vruntime it ran up there (341 times its run time,
 * at weight 3) on a kernel that does not renormalize it (6.1's CFS), and
 * waited 0.1-2 s behind a busy task of its CPU: so the lowest real-time
 * priority where the process may, else SCHED_OTHER.
 */
static void raise_poller(struct hog *h)
{
	if (pthread_setschedparam(h->poller, SCHED_FIFO,
				  &(struct sched_param){ 1 }) != 0)
		pthread_setschedparam(h->poller, SCHED_OTHER,
				      &(struct sched_param){ 0 });
}

/*
 * Raise the poller until it has left its loop.  One raise is not
 * enough: a poller between its look at poll_stop and its own
 * set_policy() (park(), resume()) lowers itself again after us, then
 * waits its turn behind the busy task (at 16 vCPUs, exit took 1.7 s of
 * a 2 s spinner).  Once it is raised and running, it reaches its loop's
 * head and leaves; a raise after poll_left holds.
 */
static void raise_until_left(struct hog *h)
{
	struct timespec nap = { 0, 50000 };

	for (;;) {
		raise_poller(h);
		if (atomic_load(&h->poll_left))
			return;
		nanosleep(&nap, NULL);
	}
}

static bool past(const struct timespec *until)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > until->tv_sec ||
	       (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec);
}

/*
 * The process exits: every poller of @hogs is told to leave, then all are
 * raised, round after round, until each has left its loop or @until
 * (CLOCK_REALTIME), and those that left are joined, so that no finished
 * thread is left unjoined.  Every poller is raised for the whole window:
 * raised one after another against one deadline, the later ones got a
 * single raise each once the first had used the time, and one that then
 * lowered itself (raise_until_left()) held a 16-vCPU guest's exit 2 s.
 * A poller that cannot run by then (exit() from a callback of a stop,
 * whose hogs spin on every CPU) the exit kills.  Calls made after this
 * (other destructors) wake their hogs themselves.
 */
void poll_exit_all(struct hog *hogs, unsigned int n,
		   const struct timespec *until)
{
	struct timespec nap = { 0, 50000 };
	unsigned int i, gone;

	for (i = 0; i < n; i++)
		if (hogs[i].poller_on)
			poll_tell_stop(&hogs[i]);
	do {
		for (i = 0, gone = 0; i < n; i++) {
			if (!hogs[i].poller_on || atomic_load(&hogs[i].poll_left))
				gone++;
			else
				raise_poller(&hogs[i]);
		}
	} while (gone < n && !past(until) && nanosleep(&nap, NULL) == 0);
	for (i = 0; i < n; i++)
		if (hogs[i].poller_on && atomic_load(&hogs[i].poll_left) &&
		    pthread_timedjoin_np(hogs[i].poller, NULL, until) == 0)
			atomic_store(&hogs[i].poller_on, false);
}

void poll_stop(struct hog *h)
{
	if (!h->poller_on)
		return;
	poll_tell_stop(h);
	raise_until_left(h);
	pthread_join(h->poller, NULL);
	h->poller_on = false;
	CPU_FREE(h->poll_mask);
	h->poll_mask = NULL;
}

/* Polling now: not parked, and a beat within a tick (running, or about
 * to run again). */
bool poll_polling(const struct hog *h)
{
	uint64_t beat = atomic_load_explicit(&h->poll_beat,
					     memory_order_relaxed);

	return h->poller_on && beat && (int64_t)(now_ns() - beat) < 10000000 &&
	       atomic_load(&h->poll_parked) == POLLING;
}
