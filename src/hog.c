/* SPDX-License-Identifier: MIT */
/*
 * The hogs and their queues: one thread per CPU, pinned, at the highest
 * priority the process may have, that sleeps until work is queued and then
 * runs it, in order, and nothing else.
 *
 * A hog's queue is a lock-free stack: producers push with one CAS, the
 * hog takes the whole stack with one exchange and reverses it.  There is
 * no half-linked state, so a hog at SCHED_FIFO 99 never waits for a
 * producer that was preempted in the middle of a push (possibly on the
 * hog's own CPU): it either sees the work or it does not.
 *
 * Waiting is sleeping: every wait in this library ends on a futex, never
 * in an unbounded spin, so a caller of any priority on any CPU cannot be
 * starved by, or starve, the hog it waits for.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Thread_local struct hog *cpuhog_self;

/*
 * The context and the count of calls using it.  The count lives outside
 * the context so that a call may announce itself before it knows whether
 * a context exists; see ctx_get() and cpuhog_shutdown().
 */
static _Atomic(struct ctx *) g_ctx;
static _Atomic uint32_t g_users;
static _Atomic bool g_shutting;
static _Atomic uint64_t g_spin_ns; /* for hog_work_wait(), which holds no
				      reference to the context */
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static struct ctx *g_orphans; /* contexts inherited over fork() */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DEFAULT_STACK (512u << 10) /* sanitizers need far more stack */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DEFAULT_STACK (512u << 10)
#endif
#endif
#ifndef DEFAULT_STACK
/* With the guard page and the hog's own state: under 64 KiB per CPU. */
#define DEFAULT_STACK (56u << 10)
#endif

/* ---- the hog thread ---------------------------------------------------- */

static void wake_hog(struct hog *h)
{
	/*
	 * seq_cst load after the producer's seq_cst push: with hog_sleep()'s
	 * store-then-load this is Dekker's pattern, so either the hog sees
	 * the work or we see it asleep.  The exchange lets one producer of
	 * many pay for the system call.
	 */
	if (atomic_load(&h->sleeping) && atomic_exchange(&h->sleeping, 0))
		futex_wake(&h->sleeping, 1);
}

static void hog_sleep(struct hog *h)
{
	atomic_store(&h->sleeping, 1); /* seq_cst: see wake_hog() */
	if (atomic_load(&h->head) == NULL && !atomic_load(&h->stop))
		futex_wait(&h->sleeping, 1, NO_DEADLINE);
	/* relaxed: only a hint for producers; the queue itself is re-read */
	atomic_store_explicit(&h->sleeping, 0, memory_order_relaxed);
}

static void group_arrive(struct group *g, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(&g->word, memory_order_relaxed);

	do {
		/* A stale generation: the call gave up on us long ago. */
		if ((uint32_t)(v >> 32) != gen || (uint32_t)v == 0)
			return;
		/* acq_rel: our work's result before the count, for the
		 * caller's acquire of the count reaching zero */
	} while (!atomic_compare_exchange_weak_explicit(
		&g->word, &v, v - 1, memory_order_acq_rel,
		memory_order_relaxed));
	if ((uint32_t)(v - 1) == 0)
		group_kick(g);
}

/* Publish a work's result.  After the exchange the owner may reuse @w. */
static void work_finish(struct work *w, int ret, uint32_t ran)
{
	struct group *g = w->group;
	uint32_t gen = w->gen, old;

	w->ret = ret;
	w->ran = ran;
	/* release: ret and ran before DONE, for the waiter's acquire */
	old = atomic_exchange_explicit(&w->state, W_DONE, memory_order_release);
	if (old & W_WAITER)
		futex_wake(&w->state, INT_MAX);
	if (g)
		group_arrive(g, gen);
}

static void hog_count(_Atomic uint64_t *ctr)
{
	/* relaxed load + store: the hog is the only writer */
	atomic_store_explicit(
		ctr, atomic_load_explicit(ctr, memory_order_relaxed) + 1,
		memory_order_relaxed);
}

static void run_one(struct hog *h, struct work *w)
{
	bool check = !w->internal && !(h->ctx->flags & CPUHOG_F_NO_CHECKS);
	long nvcsw = 0;
	uint64_t t0 = 0;
	int ret;

	if (check)
		check_begin(h, w, &nvcsw, &t0);
	ret = w->fn(w->arg);
	if (check)
		check_end(h, w, nvcsw, t0, (int)h->cpu);
	else if (sched_getcpu() != (int)h->cpu)
		hog_count(&h->migrated);
	if (!w->internal)
		redirect_signals();
	hog_count(&h->run);
	work_finish(w, ret, 1);
}

/*
 * Run a batch, oldest first.  The CPU is checked once per batch (its
 * affinity) and before each work (where it runs now): if the CPU went
 * offline or left the cpuset the kernel has moved us elsewhere, and the
 * works fail with -ENOENT rather than run on a CPU nobody asked for.
 */
static void run_batch(struct hog *h, struct work *w)
{
	bool here = pinned_to(h->masksize, h->mask, h->cpu) ||
		    pin_to(h->masksize, h->mask, h->cpu) == 0;

	while (w) {
		struct work *next = w->next; /* before w is finished */

		here = here && sched_getcpu() == (int)h->cpu;
		h->off_cpu = !here;
		if (here || w->internal) {
			run_one(h, w);
		} else {
			hog_count(&h->refused);
			work_finish(w, -ENOENT, 0);
		}
		w = next;
	}
}

static struct work *reverse(struct work *w)
{
	struct work *r = NULL;

	while (w) {
		struct work *next = w->next;

		w->next = r;
		r = w;
		w = next;
	}
	return r;
}

static void *hog_main(void *arg)
{
	struct hog *h = arg;
	struct work *list;

	cpuhog_self = h;
	h->tid = gettid();
	obtain_priority(h, h->ctx->want_priority);
	/* release: tid and priority fields before the creator reads them */
	atomic_store_explicit(&h->started, 1, memory_order_release);
	futex_wake(&h->started, 1);

	for (;;) {
		/* acquire: the works' fields, written before their push */
		list = atomic_exchange_explicit(&h->head, NULL,
						memory_order_acquire);
		if (list) {
			run_batch(h, reverse(list));
			continue;
		}
		/* Exit only once drained: queued works are never dropped. */
		if (atomic_load(&h->stop))
			break;
		hog_sleep(h);
	}
	return NULL;
}

/* ---- queueing and waiting ---------------------------------------------- */

void queue_work(struct hog *h, struct work *w)
{
	struct work *old = atomic_load_explicit(&h->head, memory_order_relaxed);

	/* relaxed: a statistic, balanced against run + refused when idle */
	atomic_fetch_add_explicit(&h->queued, 1, memory_order_relaxed);
	do {
		w->next = old;
		/* seq_cst: releases w's fields to the hog's acquire exchange,
		 * and orders the push before wake_hog()'s load */
	} while (!atomic_compare_exchange_weak(&h->head, &old, w));
	wake_hog(h);
}

/* Sleep until *st leaves W_QUEUED, or until @deadline. */
static int state_sleep(_Atomic uint32_t *st, uint64_t deadline)
{
	uint32_t s = atomic_load_explicit(st, memory_order_acquire);

	while ((s & W_STATE) == W_QUEUED) {
		/* announce ourselves, so that work_finish() wakes us */
		if (!(s & W_WAITER)) {
			if (!atomic_compare_exchange_weak_explicit(
				    st, &s, s | W_WAITER,
				    memory_order_acquire,
				    memory_order_acquire))
				continue;
			s |= W_WAITER;
		}
		if (futex_wait(st, s, deadline) == -ETIMEDOUT) {
			s = atomic_load_explicit(st, memory_order_acquire);
			return (s & W_STATE) == W_QUEUED ? -ETIMEDOUT : 0;
		}
		s = atomic_load_explicit(st, memory_order_acquire);
	}
	return 0;
}

int work_wait(struct work *w, bool may_spin, uint64_t spin_ns)
{
	if (may_spin && spin_ns) {
		uint64_t end = now_ns() + spin_ns;
		unsigned int k = 0;

		/* acquire: ret and ran, once DONE is seen */
		while ((atomic_load_explicit(&w->state, memory_order_acquire) &
			W_STATE) == W_QUEUED) {
			cpu_relax();
			if ((++k & 31) == 0 && now_ns() > end)
				break;
		}
	}
	state_sleep(&w->state, NO_DEADLINE);
	return w->ret;
}

int slot_wait_free(struct work *slot, uint64_t deadline)
{
	return state_sleep(&slot->state, deadline);
}

/* ---- the context ------------------------------------------------------- */

struct ctx *ctx_get(int *err)
{
	for (;;) {
		struct ctx *c;
		int r;

		/*
		 * seq_cst increment, then seq_cst load: Dekker with
		 * cpuhog_shutdown()'s store of NULL and load of the count.
		 * Either shutdown sees us and waits, or we see NULL.
		 */
		atomic_fetch_add(&g_users, 1);
		c = atomic_load(&g_ctx);
		if (c)
			return c;
		ctx_put();
		if (atomic_load(&g_shutting) || cpuhog_self) {
			*err = -ESHUTDOWN;
			return NULL;
		}
		r = cpuhog_init(NULL);
		if (r < 0 && r != -EALREADY) {
			*err = r;
			return NULL;
		}
	}
}

void ctx_put(void)
{
	/* release: our last use of the context before shutdown frees it */
	atomic_fetch_sub_explicit(&g_users, 1, memory_order_release);
}

struct hog *hog_of(struct ctx *c, unsigned int cpu)
{
	return cpu < c->nr_cpu_ids ? c->by_cpu[cpu] : NULL;
}

static void ctx_free(struct ctx *c)
{
	unsigned int i;

	for (i = 0; c->hogs && i < c->nr_hogs; i++)
		free(c->hogs[i].mask);
	free(c->hogs);
	free(c->by_cpu);
	free(c->msel);
	stop_state_free(c->stop);
	free(c);
}

static void hogs_stop(struct ctx *c)
{
	unsigned int i;

	for (i = 0; i < c->nr_hogs; i++) {
		atomic_store(&c->hogs[i].stop, true); /* seq_cst: see wake_hog */
		wake_hog(&c->hogs[i]);
	}
	for (i = 0; i < c->nr_hogs; i++)
		pthread_join(c->hogs[i].thread, NULL);
	pthread_mutex_destroy(&c->multi_lock);
}

static int attr_check(const struct cpuhog_attr *a)
{
	int max = sched_get_priority_max(SCHED_FIFO);

	if (!a)
		return 0;
	if (a->size && a->size < offsetof(struct cpuhog_attr, reserved_))
		return -EINVAL;
	if (a->flags & ~(unsigned int)(CPUHOG_F_STRICT | CPUHOG_F_WEAK_STOP |
				       CPUHOG_F_NO_CHECKS))
		return -EINVAL;
	if (a->priority < 0 || a->priority > max)
		return -EINVAL;
	if (a->stack_size && a->stack_size < (size_t)PTHREAD_STACK_MIN)
		return -EINVAL;
	if (a->cpus && !a->cpus_setsize)
		return -EINVAL;
	return 0;
}

static void ctx_settings(struct ctx *c, const struct cpuhog_attr *a)
{
	const char *strict = getenv("CPUHOG_STRICT");
	struct cpuhog_attr def;

	if (!a) {
		cpuhog_attr_init(&def);
		a = &def;
	}
	c->flags = a->flags;
	if (strict && strcmp(strict, "1") == 0)
		c->flags |= CPUHOG_F_STRICT;
	c->want_priority =
		a->priority ? a->priority : sched_get_priority_max(SCHED_FIFO);
	c->stack_size = a->stack_size ? a->stack_size : DEFAULT_STACK;
	c->overrun_ns = a->overrun_ns ? a->overrun_ns : 100000000u;
	c->stop_timeout_ns = a->stop_timeout_ns ? a->stop_timeout_ns
						: 200000000u;
	c->spin_ns = a->spin_ns == CPUHOG_NO_SPIN ? 0
		     : a->spin_ns		   ? a->spin_ns
						   : 50000u;
}

/*
 * The CPUs to hog: the attribute's set, else every online CPU (those
 * outside the cpuset fail to pin and get no hog).  Not the calling
 * thread's affinity: which thread initialises must not matter.
 */
static cpu_set_t *wanted_cpus(struct ctx *c, const struct cpuhog_attr *a,
			      size_t *size)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	cpu_set_t *set = CPU_ALLOC(c->nr_cpu_ids);
	unsigned int cpu;

	if (!set)
		return NULL;
	*size = sz;
	CPU_ZERO_S(sz, set);
	if (a && a->cpus) {
		memcpy(set, a->cpus, a->cpus_setsize < sz ? a->cpus_setsize : sz);
	} else if (read_cpulist("/sys/devices/system/cpu/online", sz, set,
				c->nr_cpu_ids) <= 0) {
		for (cpu = 0; cpu < c->nr_cpu_ids; cpu++)
			CPU_SET_S(cpu, sz, set);
	}
	return set;
}

/* Create the hog of @cpu.  -EINVAL: the CPU cannot be used. */
static int hog_start(struct ctx *c, struct hog *h, unsigned int cpu)
{
	pthread_attr_t pa;
	sigset_t all;
	char name[16];
	int r;

	h->cpu = cpu;
	h->ctx = c;
	h->masksize = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	h->mask = CPU_ALLOC(c->nr_cpu_ids);
	if (!h->mask)
		return -ENOMEM;
	CPU_ZERO_S(h->masksize, h->mask);
	CPU_SET_S(cpu, h->masksize, h->mask);
	sigfillset(&all);
	pthread_attr_init(&pa);
	pthread_attr_setstacksize(&pa, c->stack_size);
	/* Born pinned and with every signal blocked: no window where a
	 * signal lands in a hog or the hog runs on another CPU. */
	pthread_attr_setaffinity_np(&pa, h->masksize, h->mask);
	pthread_attr_setsigmask_np(&pa, &all);
	r = -pthread_create(&h->thread, &pa, hog_main, h);
	pthread_attr_destroy(&pa);
	if (r)
		return r;
	snprintf(name, sizeof(name), "cpuhog/%u", cpu % 100000000u);
	pthread_setname_np(h->thread, name);
	return 0;
}

static void hogs_await_start(struct ctx *c)
{
	unsigned int i;

	c->rt_ok = true;
	for (i = 0; i < c->nr_hogs; i++) {
		struct hog *h = &c->hogs[i];

		/* acquire: pairs with hog_main()'s release of started */
		while (!atomic_load_explicit(&h->started, memory_order_acquire))
			futex_wait(&h->started, 0, NO_DEADLINE);
		if (h->policy != SCHED_FIFO && h->policy != SCHED_RR)
			c->rt_ok = false;
	}
}

static int ctx_alloc(struct ctx *c, unsigned int n)
{
	c->by_cpu = calloc(c->nr_cpu_ids, sizeof(*c->by_cpu));
	c->hogs = aligned_alloc(CACHELINE, sizeof(struct hog) * (n ? n : 1));
	c->msel = calloc(n ? n : 1, sizeof(*c->msel));
	c->stop = stop_state_alloc(c->nr_cpu_ids);
	if (!c->by_cpu || !c->hogs || !c->msel || !c->stop)
		return -ENOMEM;
	memset(c->hogs, 0, sizeof(struct hog) * (n ? n : 1));
	return 0;
}

static int hogs_start(struct ctx *c, size_t sz, const cpu_set_t *want)
{
	unsigned int cpu;
	int r;

	for (cpu = 0; cpu < c->nr_cpu_ids; cpu++) {
		struct hog *h = &c->hogs[c->nr_hogs];

		if (!CPU_ISSET_S(cpu, sz, want))
			continue;
		r = hog_start(c, h, cpu);
		if (r == -EINVAL) { /* offline or outside the cpuset */
			free(h->mask);
			memset(h, 0, sizeof(*h));
			continue;
		}
		if (r < 0) {
			free(h->mask);
			memset(h, 0, sizeof(*h));
			return r;
		}
		c->by_cpu[cpu] = h;
		c->nr_hogs++;
	}
	return c->nr_hogs ? 0 : -ENOENT;
}

static int ctx_create(const struct cpuhog_attr *a, struct ctx **out)
{
	struct ctx *c = calloc(1, sizeof(*c));
	pthread_mutexattr_t ma;
	cpu_set_t *want;
	size_t sz;
	int r;

	if (!c)
		return -ENOMEM;
	c->nr_cpu_ids = possible_cpus();
	ctx_settings(c, a);
	want = wanted_cpus(c, a, &sz);
	r = want ? ctx_alloc(c, (unsigned int)CPU_COUNT_S(sz, want)) : -ENOMEM;
	if (r == 0) {
		pthread_mutexattr_init(&ma);
		/* Callers of any priority take it: inherit, don't invert. */
		pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
		pthread_mutex_init(&c->multi_lock, &ma);
		pthread_mutexattr_destroy(&ma);
		r = hogs_start(c, sz, want);
		hogs_await_start(c);
		if (r < 0)
			hogs_stop(c);
	}
	CPU_FREE(want);
	if (r < 0) {
		ctx_free(c);
		return r;
	}
	*out = c;
	return 0;
}

/*
 * After fork() the child has none of the hog threads: forget the
 * context (its memory is freed at the next init, when malloc is surely
 * usable) and reset the locks that a parent's thread may have held.
 */
static void atfork_child(void)
{
	struct ctx *c = atomic_load_explicit(&g_ctx, memory_order_relaxed);

	if (c) {
		c->orphan_next = g_orphans;
		g_orphans = c;
	}
	atomic_store_explicit(&g_ctx, NULL, memory_order_relaxed);
	atomic_store_explicit(&g_users, 0, memory_order_relaxed);
	atomic_store_explicit(&g_shutting, false, memory_order_relaxed);
	pthread_mutex_init(&g_init_lock, NULL);
	cpuhog_self = NULL;
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

/* ---- the API ----------------------------------------------------------- */

void cpuhog_attr_init(struct cpuhog_attr *attr)
{
	if (!attr)
		return;
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
}

int cpuhog_init(const struct cpuhog_attr *attr)
{
	struct ctx *c;
	int r;

	if (cpuhog_self)
		return -EDEADLK;
	r = attr_check(attr);
	if (r < 0)
		return r;
	pthread_once(&g_atfork_once, atfork_register);
	pthread_mutex_lock(&g_init_lock);
	if (atomic_load(&g_ctx)) {
		pthread_mutex_unlock(&g_init_lock);
		return -EALREADY;
	}
	orphans_free();
	r = ctx_create(attr, &c);
	if (r == 0) {
		atomic_store_explicit(&g_spin_ns, c->spin_ns,
				      memory_order_relaxed);
		/* release: the whole context before any call can see it */
		atomic_store_explicit(&g_ctx, c, memory_order_release);
	}
	pthread_mutex_unlock(&g_init_lock);
	return r;
}

void cpuhog_shutdown(void)
{
	struct ctx *c;

	if (cpuhog_self)
		return;
	pthread_mutex_lock(&g_init_lock);
	c = atomic_load(&g_ctx);
	if (c) {
		atomic_store(&g_shutting, true);
		atomic_store(&g_ctx, NULL); /* seq_cst: see ctx_get() */
		while (atomic_load(&g_users) != 0)
			nanosleep(&(struct timespec){ 0, 100000 }, NULL);
		hogs_stop(c); /* drains every queue */
		ctx_free(c);
		atomic_store(&g_shutting, false);
	}
	pthread_mutex_unlock(&g_init_lock);
}

static bool may_spin(unsigned int cpu)
{
	/* Never spin for our own CPU: the hog could not run meanwhile if
	 * we are at its priority, and would preempt us anyway otherwise. */
	return sched_getcpu() != (int)cpu;
}

int hog_one_cpu(unsigned int cpu, cpuhog_fn_t fn, void *arg)
{
	struct work w = { .fn = fn, .arg = arg, .cpu = cpu };
	struct ctx *c;
	struct hog *h;
	int err = 0;

	if (!fn)
		return -EINVAL;
	if (cpuhog_self)
		return -EDEADLK;
	c = ctx_get(&err);
	if (!c)
		return err;
	h = hog_of(c, cpu);
	if (!h) {
		ctx_put();
		return -ENOENT;
	}
	atomic_init(&w.state, W_QUEUED);
	queue_work(h, &w);
	err = work_wait(&w, may_spin(cpu), c->spin_ns);
	ctx_put();
	return err;
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
	c = ctx_get(&err);
	if (!c)
		return false;
	h = hog_of(c, cpu);
	/* acquire: a previous run's hog is done with the buffer.  The CAS
	 * also settles two callers racing for one buffer. */
	if (!h || !atomic_compare_exchange_strong_explicit(
			  &w->state, &s, W_QUEUED, memory_order_acquire,
			  memory_order_relaxed)) {
		ctx_put();
		return false;
	}
	w->fn = fn;
	w->arg = arg;
	w->cpu = cpu;
	w->group = NULL;
	w->internal = 0;
	queue_work(h, w);
	ctx_put();
	return true;
}

int hog_work_wait(struct cpuhog_work *work_buf)
{
	struct work *w = (struct work *)work_buf;
	uint32_t s;

	if (!w)
		return -EINVAL;
	s = atomic_load_explicit(&w->state, memory_order_acquire) & ~W_WAITER;
	if (s != W_QUEUED && s != W_DONE)
		return -EINVAL;
	if (cpuhog_self)
		return -EDEADLK;
	return work_wait(w, may_spin(w->cpu),
			 atomic_load_explicit(&g_spin_ns,
					      memory_order_relaxed));
}

bool hog_work_done(const struct cpuhog_work *work_buf)
{
	struct work *w = (struct work *)work_buf;

	/* acquire: so that a following hog_work_wait() reads the result */
	return w && atomic_load_explicit(&w->state, memory_order_acquire) ==
			    W_DONE;
}

static uint64_t sum(struct ctx *c, size_t off)
{
	uint64_t s = 0;
	unsigned int i;

	for (i = 0; i < c->nr_hogs; i++)
		s += atomic_load_explicit(
			(_Atomic uint64_t *)((char *)&c->hogs[i] + off),
			memory_order_relaxed);
	return s;
}

static void info_sched(struct ctx *c, struct cpuhog_info *info)
{
	unsigned int i;

	info->policy = SCHED_FIFO;
	info->priority = INT_MAX;
	for (i = 0; i < c->nr_hogs; i++) {
		struct hog *h = &c->hogs[i];
		bool rt = h->policy == SCHED_FIFO || h->policy == SCHED_RR;

		if (h->cpu < CPU_SETSIZE)
			CPU_SET(h->cpu, &info->cpus);
		if (!rt && info->policy != SCHED_OTHER) {
			info->policy = h->policy;
			info->priority = 0;
			info->nice = h->nice;
			info->rt_errno = h->rt_errno;
		}
		if (rt && info->policy == SCHED_FIFO &&
		    h->priority < info->priority)
			info->priority = h->priority;
		if (!rt && h->nice > info->nice)
			info->nice = h->nice;
	}
}

int cpuhog_get_info(struct cpuhog_info *info)
{
	struct ctx *c;
	int err;

	if (!info)
		return -EINVAL;
	c = ctx_get(&err);
	if (!c)
		return err;
	memset(info, 0, sizeof(*info));
	info->nr_cpu_ids = c->nr_cpu_ids;
	info->nr_hogs = c->nr_hogs;
	info->flags = c->flags;
	info->stack_size = c->stack_size;
	info_sched(c, info);
	info->queued = sum(c, offsetof(struct hog, queued));
	info->run = sum(c, offsetof(struct hog, run));
	info->refused = sum(c, offsetof(struct hog, refused));
	info->slept = sum(c, offsetof(struct hog, slept));
	info->overran = sum(c, offsetof(struct hog, overran));
	info->migrated = sum(c, offsetof(struct hog, migrated));
	info->stops = atomic_load_explicit(&c->stops, memory_order_relaxed);
	info->stop_timeouts =
		atomic_load_explicit(&c->stop_timeouts, memory_order_relaxed);
	ctx_put();
	return 0;
}

int cpuhog_get_cpus(size_t setsize, cpu_set_t *set)
{
	struct ctx *c;
	unsigned int i;
	int err;

	if (!set)
		return -EINVAL;
	c = ctx_get(&err);
	if (!c)
		return err;
	if (setsize < CPU_ALLOC_SIZE(c->nr_cpu_ids)) {
		ctx_put();
		return -EINVAL;
	}
	CPU_ZERO_S(setsize, set);
	for (i = 0; i < c->nr_hogs; i++)
		CPU_SET_S(c->hogs[i].cpu, setsize, set);
	err = (int)c->nr_hogs;
	ctx_put();
	return err;
}

const char *cpuhog_version(void)
{
	return CPUHOG_VERSION_STRING;
}
