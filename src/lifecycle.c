/* SPDX-License-Identifier: MIT */
/*
 * The hogs' lifecycle: making the context (lazily at the first call, or
 * cpuhog_init()), shutting it down, and forgetting it in a forked child.
 *
 * A call holds a reference to the context for its whole length
 * (context.c); cpuhog_i_ctx_get() makes the context where there is none,
 * so this file is every call's entry (cpuhog_i_call_enter()).  Shutdown
 * retires the context, then drains every queue before it joins the
 * hogs: a queued work always finishes.  After fork() the child has only
 * the forking thread: the context is parked on an orphan list (freed at
 * the next init, when malloc is surely usable) and cpuhog_i_epoch moves
 * on, so a work the parent had queued reads as not run, not as a hang.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic bool g_shutting; /* no context: a call makes none */
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static struct ctx *g_orphans; /* contexts inherited over fork() */

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) ||      \
	__has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DEFAULT_STACK (512u << 10) /* sanitizers need far more stack */
#else
/* With the guard page and the hog's own state: under 64 KiB per CPU. */
#define DEFAULT_STACK (56u << 10)
#endif

/* Around what holds g_init_lock: a handler of this thread must not wait
 * for it (cpuhog_i_in_call 2).  Returns what cpuhog_i_in_call was, or -1:
 * it was 2. */
static int lock_init(void)
{
	int was = cpuhog_i_in_call;

	if (was == 2)
		return -1;
	cpuhog_i_in_call = 2;
	atomic_signal_fence(memory_order_seq_cst);
	pthread_mutex_lock(&g_init_lock);
	return was;
}

static void unlock_init(int was)
{
	pthread_mutex_unlock(&g_init_lock);
	atomic_signal_fence(memory_order_seq_cst);
	cpuhog_i_in_call = was;
}

static void ctx_free(struct ctx *c)
{
	unsigned int i;

	for (i = 0; c->hogs && i < c->nr_hogs; i++) {
		free(c->hogs[i].pin.mask);
		if (c->hogs[i].status_fd >= 0)
			close(c->hogs[i].status_fd);
		/* the pollers: stopped, or a fork's inherited */
		cpuhog_i_poll_forget(&c->hogs[i]);
	}
	free(c->hogs);
	free(c->by_cpu);
	free(c->sel.hog);
	free(c->sel.flags);
	free(c->by_topo);
	free(c->kid_store);
	CPU_FREE(c->mscratch);
	CPU_FREE(c->mscratch2);
	CPU_FREE(c->reach_set);
	free(c->attr_cpus);
	CPU_FREE(c->possible);
	free(c->stop);
	free(c);
}

/*
 * The watcher sleeps until shutdown; its affinity, set to every possible
 * CPU, the kernel bounds by the cpuset and the active CPUs: where it may
 * run is where any thread of ours may go (multi.c, cpuhog_i_reach()).
 */
static void *watch_main(void *arg)
{
	struct ctx *c = arg;

	c->watch_tid = gettid();
	/* release: watch_tid before the creator's acquire */
	atomic_store_explicit(&c->watch_state, 1, memory_order_release);
	cpuhog_i_futex_wake(&c->watch_state, 1);
	while (atomic_load(&c->watch_state) == 1)
		cpuhog_i_futex_wait(&c->watch_state, 1, NO_DEADLINE);
	return NULL;
}

static int watch_start(struct ctx *c)
{
	int r = cpuhog_i_thread_start(&c->watcher, PTHREAD_STACK_MIN,
				      CPU_ALLOC_SIZE(c->nr_cpu_ids), c->possible,
				      c->possible, watch_main, c,
				      "cpuhog-watch");

	if (r < 0)
		return r;
	/* acquire: pairs with watch_main()'s release */
	while (!atomic_load_explicit(&c->watch_state, memory_order_acquire))
		cpuhog_i_futex_wait(&c->watch_state, 0, NO_DEADLINE);
	return 0;
}

/* Only once per context, by hogs_stop(); state 0: none started. */
static void watch_stop(struct ctx *c)
{
	if (!atomic_load(&c->watch_state))
		return;
	atomic_store(&c->watch_state, 2);
	cpuhog_i_futex_wake(&c->watch_state, 1);
	pthread_join(c->watcher, NULL);
}

/* Stop every hog once its queue is drained, and join them, until
 * @until (CLOCK_REALTIME; NULL: for ever).  false: one is still running. */
static bool hogs_stop(struct ctx *c, const struct timespec *until)
{
	unsigned int i;

	for (i = 0; i < c->nr_hogs; i++)
		cpuhog_i_poll_stop(&c->hogs[i]);
	for (i = 0; i < c->nr_hogs; i++) {
		atomic_store(&c->hogs[i].stop, true); /* seq_cst: see wake.c */
		store_load_fence(); /* stop before cpuhog_i_wake_hog()'s look */
		cpuhog_i_wake_hog(&c->hogs[i]);
	}
	for (i = 0; i < c->nr_hogs; i++)
		if (until ? pthread_timedjoin_np(c->hogs[i].thread, NULL, until)
			  : pthread_join(c->hogs[i].thread, NULL))
			return false;
	watch_stop(c);
	pthread_mutex_destroy(&c->multi_lock);
	return true;
}

/* -EINVAL if @set names a CPU that cannot exist on this machine. */
static int cpus_exist(size_t setsize, const cpu_set_t *set)
{
	unsigned int nr;
	cpu_set_t *possible = cpuhog_i_possible_set(&nr);
	size_t cpu, sz = CPU_ALLOC_SIZE(nr);
	int r = 0;

	if (!possible)
		return -ENOMEM;
	for (cpu = 0; cpu < setsize * 8 && !r; cpu++)
		if (CPU_ISSET_S(cpu, setsize, set) &&
		    !CPU_ISSET_S(cpu, sz, possible))
			r = -EINVAL;
	CPU_FREE(possible);
	return r;
}

/* @a in this version's layout: an older caller's struct is copied into
 * @full as far as its size goes, the fields it lacks left 0 (their
 * defaults), so that nothing past its end is read.  Size 0 (a struct
 * not made by cpuhog_attr_init()) reads as this version's. */
static const struct cpuhog_attr *attr_full(const struct cpuhog_attr *a,
					   struct cpuhog_attr *full)
{
	if (!a || !a->size || a->size >= sizeof(*full) ||
	    a->size < offsetof(struct cpuhog_attr, wake_fanout))
		return a;
	memset(full, 0, sizeof(*full));
	memcpy(full, a, a->size);
	return full;
}

static int attr_check(const struct cpuhog_attr *a)
{
	const unsigned int flags = CPUHOG_F_STRICT | CPUHOG_F_WEAK_STOP |
				   CPUHOG_F_NO_CHECKS | CPUHOG_F_POLL;

	if (!a)
		return 0;
	/* the first version ended where wake_fanout begins; a spin is a
	 * busy wait, and a second is already far too long; a fan-out of 1
	 * is a chain, N wakes in a row, as slow as flat */
	if ((a->size && a->size < offsetof(struct cpuhog_attr, wake_fanout)) ||
	    (a->flags & ~flags) || a->priority < 0 ||
	    a->priority > sched_get_priority_max(SCHED_FIFO) ||
	    (a->stack_size && a->stack_size < (size_t)PTHREAD_STACK_MIN) ||
	    (a->cpus && !a->cpus_setsize) ||
	    (a->spin_ns > 1000000000u && a->spin_ns != CPUHOG_NO_SPIN) ||
	    a->wake_fanout == 1)
		return -EINVAL;
	return a->cpus ? cpus_exist(a->cpus_setsize, a->cpus) : 0;
}

/*
 * The default stop timeout: 200 ms, or CPUHOG_STOP_TIMEOUT_MS (digits,
 * 1 to 3,600,000; anything else is ignored).  A VM whose vCPUs share few
 * host CPUs can leave one unrun for longer, which the library cannot
 * tell from a CPU held by someone else: its operator says so here.
 */
static uint64_t default_stop_timeout(void)
{
	const char *s = getenv("CPUHOG_STOP_TIMEOUT_MS");
	unsigned long long ms = 0;
	char *end;

	if (s && *s >= '0' && *s <= '9') {
		errno = 0;
		ms = strtoull(s, &end, 10);
		if (errno || *end || ms < 1 || ms > 3600000ull)
			ms = 0;
	}
	return ms ? ms * 1000000ull : 200000000ull;
}

/* The settings of c->attr; the flags in force (the environment's
 * included) kept there too. */
static void ctx_settings(struct ctx *c)
{
	const char *strict = getenv("CPUHOG_STRICT");
	const char *poll = getenv("CPUHOG_POLL");
	const char *weak = getenv("CPUHOG_WEAK");
	const struct cpuhog_attr *a = &c->attr;

	c->flags = a->flags;
	if (strict && strcmp(strict, "1") == 0)
		c->flags |= CPUHOG_F_STRICT;
	if (poll && strcmp(poll, "1") == 0)
		c->flags |= CPUHOG_F_POLL;
	if (weak && strcmp(weak, "1") == 0)
		c->flags |= CPUHOG_F_WEAK;
	c->attr.flags = c->flags;
	c->poll_ns = a->poll_ns;
	c->want_priority =
		a->priority ? a->priority : sched_get_priority_max(SCHED_FIFO);
	c->stack_size = a->stack_size ? a->stack_size : DEFAULT_STACK;
	c->overrun_ns = a->overrun_ns ? a->overrun_ns : 100000000u;
	c->stop_timeout_ns = a->stop_timeout_ns ? a->stop_timeout_ns
						: default_stop_timeout();
	c->spin_ns = a->spin_ns == CPUHOG_NO_SPIN ? 0
		     : a->spin_ns		   ? a->spin_ns
						   : 50000u;
}

/*
 * The CPUs to hog: the attribute's set, else every possible CPU, as the
 * kernel keeps a stopper per possible CPU: wherever a thread of ours may
 * run, now or after a hotplug, a cpuset change or its own
 * sched_setaffinity(), there is a hog (away until its CPU can be had).
 * Either is a set of nr_cpu_ids CPUs.
 */
static const cpu_set_t *wanted_cpus(const struct ctx *c)
{
	return c->attr_cpus ? c->attr_cpus : c->possible;
}

/* Create the hog of @cpu, born pinned (or away while its CPU cannot be
 * had): it never runs fn on another CPU. */
static int hog_start(struct ctx *c, struct hog *h, unsigned int cpu)
{
	char name[16];
	int r;

	h->cpu = cpu;
	h->ctx = c;
	h->status_fd = -1;
	h->pin.masksize = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	h->pin.mask = CPU_ALLOC(c->nr_cpu_ids);
	if (!h->pin.mask)
		return -ENOMEM;
	CPU_ZERO_S(h->pin.masksize, h->pin.mask);
	CPU_SET_S(cpu, h->pin.masksize, h->pin.mask);
	snprintf(name, sizeof(name), "cpuhog/%u", cpu % 100000000u);
	r = cpuhog_i_thread_start(&h->thread, c->stack_size, h->pin.masksize,
				  h->pin.mask, c->possible, cpuhog_i_hog_main,
				  h, name);
	if (r < 0) {
		free(h->pin.mask);
		return r;
	}
	atomic_store_explicit(&h->away, r == 1, memory_order_relaxed);
	return 0;
}

/* Everything a call may need, made with the context: a call (a stop
 * included) never allocates. */
static int ctx_alloc(struct ctx *c)
{
	unsigned int n = CPU_COUNT_S(CPU_ALLOC_SIZE(c->nr_cpu_ids),
				     wanted_cpus(c));
	pthread_mutexattr_t ma;

	if (!n)
		n = 1;
	c->by_cpu = calloc(c->nr_cpu_ids, sizeof(*c->by_cpu));
	c->hogs = aligned_alloc(CACHELINE, sizeof(struct hog) * n);
	c->sel.hog = calloc(n, sizeof(*c->sel.hog));
	c->sel.flags = calloc(n, sizeof(*c->sel.flags));
	c->by_topo = calloc(n, sizeof(*c->by_topo));
	c->fanout = cpuhog_i_fanout_of(c->attr.wake_fanout, n); /* at most n */
	c->kid_store = calloc((size_t)n * c->fanout, sizeof(*c->kid_store));
	c->mscratch = CPU_ALLOC(c->nr_cpu_ids);
	c->mscratch2 = CPU_ALLOC(c->nr_cpu_ids);
	c->reach_set = CPU_ALLOC(c->nr_cpu_ids);
	c->stop = calloc(1, sizeof(*c->stop));
	if (!c->by_cpu || !c->hogs || !c->sel.hog || !c->sel.flags ||
	    !c->mscratch || !c->mscratch2 || !c->reach_set || !c->stop ||
	    !c->by_topo || !c->kid_store)
		return -ENOMEM;
	memset(c->hogs, 0, sizeof(struct hog) * n);
	pthread_mutexattr_init(&ma);
	/* Callers of any priority take it: inherit, don't invert. */
	pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&c->multi_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	c->stop->serialized = cpuhog_i_stop_lock_open();
	c->stop->ctx = c;
	return 0;
}

/* Wait until every hog is set up; rt_ok: all have real time. */
static void hogs_await_start(struct ctx *c)
{
	unsigned int i;

	c->rt_ok = true;
	for (i = 0; i < c->nr_hogs; i++) {
		struct hog *h = &c->hogs[i];

		/* acquire: pairs with cpuhog_i_hog_main()'s release */
		while (!atomic_load_explicit(&h->started, memory_order_acquire))
			cpuhog_i_futex_wait(&h->started, 0, NO_DEADLINE);
		if (h->sched.policy != SCHED_FIFO &&
		    h->sched.policy != SCHED_RR)
			c->rt_ok = false;
	}
}

/* A hog for every wanted CPU, then the watcher; -ENOENT if none of the
 * CPUs can be had now.  On failure what started is stopped again. */
static int hogs_start(struct ctx *c)
{
	const cpu_set_t *want = wanted_cpus(c);
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	unsigned int cpu, here = 0;
	int r = 0;

	for (cpu = 0; cpu < c->nr_cpu_ids; cpu++) {
		struct hog *h = &c->hogs[c->nr_hogs];

		if (!CPU_ISSET_S(cpu, sz, want))
			continue;
		r = hog_start(c, h, cpu);
		if (r < 0)
			break;
		c->by_cpu[cpu] = h;
		c->nr_hogs++;
		here += !atomic_load_explicit(&h->away, memory_order_relaxed);
	}
	hogs_await_start(c);
	if (r == 0)
		r = here ? watch_start(c) : -ENOENT;
	if (r < 0)
		hogs_stop(c, NULL);
	return r;
}

/* Poll mode: a poller per hog, or none at all (the flag says which). */
static void pollers_start(struct ctx *c)
{
	unsigned int i;

	for (i = 0; (c->flags & CPUHOG_F_POLL) && i < c->nr_hogs; i++)
		if (cpuhog_i_poll_start(&c->hogs[i]) < 0) {
			while (i-- > 0)
				cpuhog_i_poll_stop(&c->hogs[i]);
			c->flags &= ~(unsigned int)CPUHOG_F_POLL;
			return;
		}
}

/* Keep what @c is made with (defaults where @a is NULL), for its
 * settings and for a forked child to make its context alike; its CPUs
 * (attr_check(): all possible) in a set of nr_cpu_ids. */
static int attr_keep(struct ctx *c, const struct cpuhog_attr *a)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);

	cpuhog_attr_init(&c->attr);
	if (a) /* every field ctx_settings() reads, reserved_ left 0 */
		memcpy(&c->attr, a, offsetof(struct cpuhog_attr, reserved_));
	c->attr.size = sizeof(c->attr);
	if (!a || !a->cpus)
		return 0;
	c->attr_cpus = CPU_ALLOC(c->nr_cpu_ids);
	if (!c->attr_cpus)
		return -ENOMEM;
	CPU_ZERO_S(sz, c->attr_cpus);
	memcpy(c->attr_cpus, a->cpus,
	       a->cpus_setsize < sz ? a->cpus_setsize : sz);
	c->attr.cpus = c->attr_cpus;
	c->attr.cpus_setsize = sz;
	/* for cpuhog_i_reach() */
	c->partial = !CPU_EQUAL_S(sz, c->attr_cpus, c->possible);
	return 0;
}

static int ctx_create(const struct cpuhog_attr *a, struct ctx **out)
{
	struct ctx *c = calloc(1, sizeof(*c));
	int r = -ENOMEM;

	if (!c)
		return -ENOMEM;
	c->possible = cpuhog_i_possible_set(&c->nr_cpu_ids);
	if (c->possible)
		r = attr_keep(c, a);
	if (r == 0) {
		ctx_settings(c);
		r = ctx_alloc(c);
	}
	if (r == 0)
		r = hogs_start(c);
	if (r < 0) {
		ctx_free(c);
		return r;
	}
	cpuhog_i_topo_sort(c);
	pollers_start(c);
	*out = c;
	return 0;
}

/* In a forked child: forget the context (freed at the next init) and
 * reset the locks that a parent's thread may have held. */
static void atfork_child(void)
{
	struct ctx *c = cpuhog_i_ctx_forget();

	if (c) {
		c->orphan_next = g_orphans;
		g_orphans = c;
	}
	atomic_store_explicit(&g_shutting, false, memory_order_relaxed);
	pthread_mutex_init(&g_init_lock, NULL);
}

static void atfork_register(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static void orphans_free(void)
{
	while (g_orphans) {
		struct ctx *c = g_orphans;

		g_orphans = c->orphan_next;
		ctx_free(c);
	}
}

/*
 * Initialise with @attr; @inherit: an implicit init (a call's, @attr
 * NULL), which in a forked child takes the parent's attributes from the
 * context the fork left behind, as the child inherits its affinity.
 */
static int init_as(const struct cpuhog_attr *attr, bool inherit)
{
	struct cpuhog_attr kept, full;
	cpu_set_t *kept_cpus = NULL;
	struct ctx *c;
	int r, was;

	if (cpuhog_i_self)
		return -EDEADLK;
	attr = attr_full(attr, &full);
	r = attr_check(attr);
	if (r < 0)
		return r;
	pthread_once(&g_atfork_once, atfork_register);
	was = lock_init();
	if (was < 0)
		return -EDEADLK; /* a handler, interrupting init or shutdown */
	if (cpuhog_i_ctx_current()) {
		unlock_init(was);
		return -EALREADY;
	}
	/* The latest orphan is the parent's context at the fork.  The
	 * orphans are freed before the new context is made: malloc's locks
	 * may be taken in a forked child, and freed memory is what the new
	 * context gets without them (ASan's allocator deadlocks otherwise). */
	if (inherit && g_orphans) {
		kept = g_orphans->attr;
		kept_cpus = g_orphans->attr_cpus;
		g_orphans->attr_cpus = NULL;
		attr = &kept;
	}
	orphans_free();
	r = ctx_create(attr, &c);
	free(kept_cpus);
	if (r == 0) {
		atomic_store_explicit(&cpuhog_i_spin_ns, c->spin_ns,
				      memory_order_relaxed);
		cpuhog_i_ctx_publish(c);
	}
	unlock_init(was);
	return r;
}

struct ctx *cpuhog_i_ctx_get(int *err)
{
	for (;;) {
		struct ctx *c = cpuhog_i_ctx_ref();
		int r;

		if (c)
			return c;
		if (atomic_load(&g_shutting) || cpuhog_i_self) {
			*err = -ESHUTDOWN;
			return NULL;
		}
		r = init_as(NULL, true);
		if (r < 0 && r != -EALREADY) {
			*err = r;
			return NULL;
		}
	}
}

static void call_out(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	cpuhog_i_in_call = 0;
}

/*
 * The entry of every call that may block or take a lock.  A thread
 * already inside one is a signal handler's: it would wait for what its
 * own thread holds and hang, so -EDEADLK.  The signal fences keep the
 * flag's stores in place against a handler of this thread.
 */
struct ctx *cpuhog_i_call_enter(int *err)
{
	struct ctx *c;

	if (cpuhog_i_in_call) {
		*err = -EDEADLK;
		return NULL;
	}
	cpuhog_i_in_call = 1;
	atomic_signal_fence(memory_order_seq_cst);
	c = cpuhog_i_ctx_get(err);
	if (!c)
		call_out();
	return c;
}

void cpuhog_i_call_leave(void)
{
	cpuhog_i_ctx_put();
	call_out();
}

/* A call whose promise is exclusion holds it only where the hogs outrank
 * our other threads: without real time it refuses, unless weak mode.
 * Checked after the call's arguments and CPUs. */
int cpuhog_i_call_exclusive(const struct ctx *c)
{
	return c->rt_ok || (c->flags & CPUHOG_F_WEAK) ? 0 : -EPERM;
}

void cpuhog_attr_init(struct cpuhog_attr *attr)
{
	if (!attr)
		return;
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
}

int cpuhog_init(const struct cpuhog_attr *attr)
{
	return init_as(attr, false);
}

/* Into @t, when unload() stops waiting for @c's threads to go: in
 * 250 ms, or the stop timeout where longer (at most 10 s): one not gone
 * by then is held by someone else, as a stop would judge. */
static const struct timespec *unload_until(const struct ctx *c,
					   struct timespec *t)
{
	uint64_t ns = 250000000u;

	if (c->stop_timeout_ns > ns)
		ns = c->stop_timeout_ns < 10000000000u ? c->stop_timeout_ns
						     : 10000000000u;
	clock_gettime(CLOCK_REALTIME, t);
	ns += (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
	t->tv_sec = (time_t)(ns / 1000000000u);
	t->tv_nsec = (long)(ns % 1000000000u);
	return t;
}

/*
 * dlclose() or exit(): the hogs must not outlive the code they run.  With
 * no call in progress, shut down, the hogs joined for a bounded time (one
 * held by someone else is left to the process's end, its context not
 * freed).  With one in progress (exit() from another thread) the call
 * holds the context: stop only the pollers, so that the process's end
 * does not wait for a SCHED_IDLE poller's turn on a busy CPU (poll.c);
 * their rounds nap, so they go even beside a real-time thread of ours.
 */
__attribute__((destructor)) static void unload(void)
{
	struct timespec until;
	struct ctx *c;
	int was;

	if (cpuhog_i_self || cpuhog_i_in_call || cpuhog_i_ctx_held ||
	    (was = lock_init()) < 0)
		return;
	c = cpuhog_i_ctx_quiet() ? cpuhog_i_ctx_retire() : NULL;
	if (c && hogs_stop(c, unload_until(c, &until)))
		ctx_free(c);
	unlock_init(was);
	/* a call in progress: shutdown waits for our reference */
	if (c || !(c = cpuhog_i_ctx_ref()))
		return;
	cpuhog_i_poll_exit_all(c->hogs, c->nr_hogs, unload_until(c, &until));
	cpuhog_i_ctx_put();
}

void cpuhog_shutdown(void)
{
	struct ctx *c;
	int was;

	/* inside a call (a handler interrupted it): that call counts in
	 * g_users, which would never drain */
	if (cpuhog_i_self || cpuhog_i_in_call || cpuhog_i_ctx_held ||
	    (was = lock_init()) < 0)
		return;
	if (cpuhog_i_ctx_current()) {
		atomic_store(&g_shutting, true);
		c = cpuhog_i_ctx_retire();
		hogs_stop(c, NULL); /* drains every queue */
		ctx_free(c);
		atomic_store(&g_shutting, false);
	}
	unlock_init(was);
}

static uint64_t relaxed(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

/* What the hogs say: their CPUs, the weakest scheduling, the counters. */
static void info_hogs(struct ctx *c, struct cpuhog_info *info)
{
	unsigned int i;

	info->policy = SCHED_FIFO;
	info->priority = INT_MAX;
	for (i = 0; i < c->nr_hogs; i++) {
		struct hog *h = &c->hogs[i];
		bool rt = h->sched.policy == SCHED_FIFO ||
			  h->sched.policy == SCHED_RR;

		if (h->cpu < CPU_SETSIZE)
			CPU_SET(h->cpu, &info->cpus);
		if (!rt && info->policy != SCHED_OTHER) {
			info->policy = h->sched.policy;
			info->priority = 0;
			info->nice = h->sched.nice;
			info->rt_errno = h->sched.rt_errno;
		}
		if (rt && info->policy == SCHED_FIFO &&
		    h->sched.priority < info->priority)
			info->priority = h->sched.priority;
		if (!rt && h->sched.nice > info->nice)
			info->nice = h->sched.nice;
		info->queued += relaxed(&h->q.queued);
		info->run += relaxed(&h->count.run);
		info->refused += relaxed(&h->count.refused);
		info->slept += relaxed(&h->count.slept);
		info->overran += relaxed(&h->count.overran);
		info->migrated += relaxed(&h->count.migrated);
	}
}

int cpuhog_get_info(struct cpuhog_info *info)
{
	struct ctx *c;
	int err;

	if (!info)
		return -EINVAL;
	c = cpuhog_i_ctx_get(&err);
	if (!c)
		return err;
	memset(info, 0, sizeof(*info));
	info->nr_cpu_ids = c->nr_cpu_ids;
	info->nr_hogs = c->nr_hogs;
	info->flags = c->flags;
	info->stack_size = c->stack_size;
	info_hogs(c, info);
	info->stops = relaxed(&c->stops);
	info->stop_timeouts = relaxed(&c->stop_timeouts);
	info->holds_released = relaxed(&c->holds_released);
	cpuhog_i_poll_counts(c, &info->poll_claims, &info->poll_fallbacks);
	info->poll_sync_acks = relaxed(&c->poll_sync_acks);
	info->transit_naps = relaxed(&c->transit_naps);
	info->late_waits = relaxed(&c->late_waits);
	info->stop_misses = relaxed(&c->stop_misses);
	info->stop_lock_waits = relaxed(&c->stop_lock_waits);
	info->stop_serialized = atomic_load_explicit(&c->stop->serialized,
						     memory_order_relaxed);
	info->sync_passes = relaxed(&c->sync_seq) / 2;
	cpuhog_i_ctx_put();
	return 0;
}

/* Fill @set with the CPUs of the hogs for which @which holds (NULL:
 * all); returns how many, or -EINVAL or cpuhog_i_ctx_get()'s error. */
static int hog_cpu_set(size_t setsize, cpu_set_t *set,
		       bool (*which)(const struct hog *h))
{
	struct ctx *c;
	unsigned int i;
	int n = 0;

	if (!set)
		return -EINVAL;
	c = cpuhog_i_ctx_get(&n);
	if (!c)
		return n;
	if (setsize < CPU_ALLOC_SIZE(c->nr_cpu_ids)) {
		cpuhog_i_ctx_put();
		return -EINVAL;
	}
	CPU_ZERO_S(setsize, set);
	for (i = 0; i < c->nr_hogs; i++)
		if (!which || which(&c->hogs[i])) {
			CPU_SET_S(c->hogs[i].cpu, setsize, set);
			n++;
		}
	cpuhog_i_ctx_put();
	return n;
}

int cpuhog_get_cpus(size_t setsize, cpu_set_t *set)
{
	return hog_cpu_set(setsize, set, NULL);
}

int cpuhog_get_polling(size_t setsize, cpu_set_t *set)
{
	return hog_cpu_set(setsize, set, cpuhog_i_poll_polling);
}

const char *cpuhog_version(void)
{
	return CPUHOG_VERSION_STRING;
}
