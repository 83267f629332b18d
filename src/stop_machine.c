/* SPDX-License-Identifier: MIT */
/*
 * stop_machine() and stop_two_cpus() on the hogs.
 *
 * Every hog taking part runs stop_cpu(), which walks one state machine;
 * in each phase, the last hog to acknowledge it moves everyone on:
 *
 *   PREPARE   each hog arrives (or declines: it is off its CPU, which
 *             went offline, so nothing of ours can run there anyway).
 *             Early arrivals spin briefly, then sleep: the caller may
 *             still be queueing, perhaps on the very CPU of an early
 *             hog, and must not be starved by it.
 *   HOLD      every hog spins on its CPU and acknowledges it.  From the
 *             last acknowledgement on, every CPU is held.
 *   RUN       fn runs on the CPUs asked for; the others spin.
 *   EXIT      every hog serializes its core and leaves.
 *   ABANDONED the deadline passed in PREPARE or HOLD (or a CPU that fn
 *             must run on declined): every hog leaves, fn ran nowhere.
 *
 * (The kernel's DISABLE_IRQ phase has no user-space counterpart; hogs
 * run with every signal blocked throughout, which is the nearest thing.)
 *
 * The phase, the count of acknowledgements and the call's generation
 * share one 64-bit word, and every transition is a CAS on it.  So
 * HOLD -> RUN and {PREPARE, HOLD} -> ABANDONED cannot both happen:
 * either fn runs with every hog spinning in the rendezvous, or nowhere.
 *
 * Why it cannot deadlock: a hog waits in PREPARE and HOLD only until the
 * deadline, and in PREPARE it sleeps, so whatever it waits for can run.
 * In RUN and EXIT it waits only for hogs that have acknowledged HOLD and
 * are therefore spinning the same bounded sequence, each on its own CPU
 * at top priority.  Rendezvous works of two calls are never interleaved
 * on two CPUs in opposite orders, because one multi-CPU call at a time is
 * queued and waited for (multi_lock).  The hogs enforce the deadline
 * themselves, so a caller that cannot run does not prolong the spin.
 *
 * Why nothing is touched after an abandon: the state lives in the
 * context, not in the caller's frame, and a hog that arrives late finds
 * a newer generation or ABANDONED and leaves without reading fn or data.
 * Its leftover work keeps its slot busy; the next multi-CPU call waits
 * for that slot (until its own deadline, for a stop).
 *
 * Nothing here allocates, creates threads or does I/O: the state and its
 * CPU mask were allocated at init.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { PH_PREPARE = 1, PH_HOLD, PH_RUN, PH_EXIT, PH_ABANDONED };

struct stop_state {
	_Atomic uint64_t word; /* gen:32 | phase:8 | count:24 */
	_Atomic uint32_t wake; /* futex for hogs sleeping in PREPARE */
	_Atomic uint32_t declined;    /* hogs that declined, this call */
	_Atomic uint32_t fn_declined; /* one of them was to run fn */
	_Atomic uint32_t fn_claimed;  /* fn_one: a hog has taken fn */
	_Atomic int ret;	      /* first non-zero return of fn */
	unsigned int nr;	      /* hogs taking part */
	bool fn_one;		      /* fn on exactly one CPU */
	cpuhog_fn_t fn;
	void *data;
	uint64_t deadline, spin_ns;
	size_t masksize;
	cpu_set_t *fn_mask; /* CPUs fn runs on (unless fn_one) */
	struct ctx *ctx;
};

#define WORD(gen, ph, n) ((uint64_t)(gen) << 32 | (uint64_t)(ph) << 24 | (n))
#define GEN(v) ((uint32_t)((v) >> 32))
#define PHASE(v) ((unsigned int)((v) >> 24) & 0xff)
#define COUNT(v) ((uint32_t)(v)&0xffffff)

struct stop_state *stop_state_alloc(unsigned int nr_cpu_ids)
{
	struct stop_state *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->masksize = CPU_ALLOC_SIZE(nr_cpu_ids);
	st->fn_mask = CPU_ALLOC(nr_cpu_ids);
	if (!st->fn_mask) {
		free(st);
		return NULL;
	}
	return st;
}

void stop_state_free(struct stop_state *st)
{
	if (st)
		CPU_FREE(st->fn_mask);
	free(st);
}

static uint64_t load_word(struct stop_state *st)
{
	/* acquire: what the hogs did before the transition we observe */
	return atomic_load_explicit(&st->word, memory_order_acquire);
}

/* Wake the hogs sleeping in PREPARE, after the phase left PREPARE. */
static void wake_sleepers(struct stop_state *st)
{
	/* seq_cst: after the transition; a sleeper that reads the new
	 * value sees the new phase, one that read the old one is woken */
	atomic_fetch_add(&st->wake, 1);
	futex_wake(&st->wake, INT_MAX);
}

static bool transition(struct stop_state *st, uint64_t v, uint64_t nv)
{
	/* seq_cst (acq_rel at least): what each hog did in the phase it
	 * leaves (fn's effects, declines, the return value) is seen by all
	 * in the next; seq_cst also orders it before wake_sleepers() */
	if (!atomic_compare_exchange_strong(&st->word, &v, nv))
		return false;
	if (PHASE(v) == PH_PREPARE && PHASE(nv) != PH_PREPARE)
		wake_sleepers(st);
	if (PHASE(nv) == PH_ABANDONED)
		group_kick(&st->ctx->group); /* the caller may sleep */
	return true;
}

/* Give up at the deadline, if fn has not been let run yet. */
static void abandon(struct stop_state *st, uint64_t v)
{
	if (PHASE(v) == PH_PREPARE || PHASE(v) == PH_HOLD)
		transition(st, v, WORD(GEN(v), PH_ABANDONED, COUNT(v)));
}

/*
 * Acknowledge phase @ph of call @gen; the last of @need moves everyone
 * to @next.  false: the call was abandoned (or is stale).
 */
static bool ack(struct stop_state *st, uint32_t gen, unsigned int ph,
		uint32_t need, unsigned int next)
{
	uint64_t v = load_word(st);

	for (;;) {
		uint64_t nv = COUNT(v) + 1 >= need ? WORD(gen, next, 0) : v + 1;

		if (GEN(v) != gen || PHASE(v) != ph)
			return false;
		if (transition(st, v, nv))
			return next != PH_ABANDONED;
		v = load_word(st);
	}
}

/*
 * Spin until the phase passes @ph; timed: abandon at the deadline.
 *
 * After YIELD_NS of spinning, yield at every turn.  Normally the wait is
 * far shorter.  It is not when the kernel moved a hog off a CPU that went
 * offline (or left the cpuset) onto one whose hog spins here: both at the
 * same FIFO priority, the moved one would never run and this spin would
 * never end.  sched_yield() lets only threads of our own priority run, so
 * the hold on everything below us stands.
 */
#define YIELD_NS 1000000u
static bool await_phase(struct stop_state *st, uint32_t gen, unsigned int ph,
			bool timed)
{
	uint64_t yield_at = now_ns() + YIELD_NS, t;
	bool yield = false;
	unsigned int k = 0;

	for (;;) {
		uint64_t v = load_word(st);

		if (GEN(v) != gen || PHASE(v) == PH_ABANDONED)
			return false;
		if (PHASE(v) > ph)
			return true;
		if (yield)
			sched_yield();
		else
			cpu_relax();
		if ((++k & 63) != 0)
			continue;
		t = now_ns();
		yield = t > yield_at;
		if (timed && t > st->deadline)
			abandon(st, v);
	}
}

/* PREPARE: spin for a while, then sleep, until everyone has arrived. */
static bool await_arrivals(struct stop_state *st, uint32_t gen)
{
	uint64_t spin_end = now_ns() + st->spin_ns, t;
	unsigned int k = 0;

	for (;;) {
		/* acquire: pairs with wake_sleepers()'s seq_cst increment */
		uint32_t w = atomic_load_explicit(&st->wake,
						  memory_order_acquire);
		uint64_t v = load_word(st);

		if (GEN(v) != gen || PHASE(v) == PH_ABANDONED)
			return false;
		if (PHASE(v) > PH_PREPARE)
			return true;
		if ((++k & 15) != 0) {
			cpu_relax();
			continue;
		}
		t = now_ns(); /* every 16 turns: the deadline, then the spin */
		if (t > st->deadline)
			abandon(st, v);
		else if (t < spin_end)
			cpu_relax();
		else
			futex_wait(&st->wake, w, st->deadline);
	}
}

static bool runs_fn(struct stop_state *st, struct hog *h)
{
	uint32_t zero = 0;

	if (!st->fn_one)
		return CPU_ISSET_S(h->cpu, st->masksize, st->fn_mask);
	/* relaxed: the HOLD -> RUN transition already ordered everything */
	return atomic_compare_exchange_strong_explicit(
		&st->fn_claimed, &zero, 1, memory_order_relaxed,
		memory_order_relaxed);
}

static void call_fn(struct stop_state *st, struct hog *h)
{
	struct work w = { .fn = st->fn };
	bool check = !(h->ctx->flags & CPUHOG_F_NO_CHECKS);
	long nvcsw = 0;
	uint64_t t0 = 0;
	int r, zero = 0;

	if (check)
		check_begin(h, &w, &nvcsw, &t0);
	r = st->fn(st->data);
	if (check)
		check_end(h, &w, nvcsw, t0, (int)h->cpu);
	redirect_signals();
	/* relaxed: the RUN -> EXIT transition publishes it */
	if (r)
		atomic_compare_exchange_strong_explicit(&st->ret, &zero, r,
							memory_order_relaxed,
							memory_order_relaxed);
}

/* After the arrivals: HOLD, unless a CPU that fn needs declined. */
static bool arrive(struct stop_state *st, uint32_t gen)
{
	uint64_t v = load_word(st);

	for (;;) {
		bool last = COUNT(v) + 1 >= st->nr;
		unsigned int next = atomic_load_explicit(&st->fn_declined,
							 memory_order_relaxed)
					    ? PH_ABANDONED
					    : PH_HOLD;

		if (GEN(v) != gen || PHASE(v) != PH_PREPARE)
			return false;
		if (transition(st, v, last ? WORD(gen, next, 0) : v + 1))
			return !last || next == PH_HOLD;
		v = load_word(st);
	}
}

/* Off our CPU: count as arrived, take no further part. */
static void decline(struct stop_state *st, struct hog *h, uint32_t gen)
{
	uint64_t v = load_word(st);

	/* Only for our own call: a late hog touches nothing. */
	if (GEN(v) != gen || PHASE(v) != PH_PREPARE)
		return;
	/* relaxed: ack()'s CAS orders these before the count */
	atomic_fetch_add_explicit(&st->declined, 1, memory_order_relaxed);
	if (!st->fn_one && CPU_ISSET_S(h->cpu, st->masksize, st->fn_mask))
		atomic_store_explicit(&st->fn_declined, 1,
				      memory_order_relaxed);
	arrive(st, gen);
}

/* The callback every participating hog runs. */
static int stop_cpu(void *arg)
{
	struct stop_state *st = arg;
	struct hog *h = cpuhog_self;
	uint32_t gen = h->slot.gen, need;

	if (h->off_cpu) {
		decline(st, h, gen);
		return 0;
	}
	if (!arrive(st, gen) || !await_arrivals(st, gen))
		goto out;
	/* relaxed: the PREPARE -> HOLD transition ordered the declines */
	need = st->nr - atomic_load_explicit(&st->declined,
					     memory_order_relaxed);
	if (!ack(st, gen, PH_HOLD, need, PH_RUN) ||
	    !await_phase(st, gen, PH_HOLD, true))
		goto out;
	if (runs_fn(st, h))
		call_fn(st, h);
	ack(st, gen, PH_RUN, need, PH_EXIT);
	await_phase(st, gen, PH_RUN, false);
out:
	serialize_core(); /* code fn rewrote is safe to run from here on */
	return 0;
}

/* multi_wait()'s poll: give up once abandoned, or abandon at deadline. */
static int stop_poll(struct ctx *c, bool timed_out)
{
	struct stop_state *st = c->stop;
	uint64_t v = load_word(st);

	if (timed_out) {
		abandon(st, v);
		v = load_word(st);
	}
	if (PHASE(v) != PH_ABANDONED)
		return 0;
	return atomic_load_explicit(&st->fn_declined, memory_order_relaxed)
		       ? -ENOENT
		       : -ETIMEDOUT;
}

/* Run the stop on the @n hogs in c->msel; fn_mask is already set. */
static int stop_run(struct ctx *c, unsigned int n, cpuhog_fn_t fn, void *data,
		    bool fn_one)
{
	struct stop_state *st = c->stop;
	uint64_t deadline = now_ns() + c->stop_timeout_ns;
	int64_t gen = multi_reserve(c, n, deadline);
	int r;

	if (gen < 0) {
		atomic_fetch_add_explicit(&c->stop_timeouts, 1,
					  memory_order_relaxed);
		return (int)gen;
	}
	st->ctx = c;
	st->nr = n;
	st->fn = fn;
	st->data = data;
	st->fn_one = fn_one;
	st->deadline = deadline;
	st->spin_ns = c->spin_ns;
	/* relaxed, all: multi_push()'s seq_cst pushes publish them */
	atomic_store_explicit(&st->declined, 0, memory_order_relaxed);
	atomic_store_explicit(&st->fn_declined, 0, memory_order_relaxed);
	atomic_store_explicit(&st->fn_claimed, 0, memory_order_relaxed);
	atomic_store_explicit(&st->ret, 0, memory_order_relaxed);
	atomic_store_explicit(&st->word, WORD(gen, PH_PREPARE, 0),
			      memory_order_relaxed);
	multi_push(c, n, (uint32_t)gen, stop_cpu, st, true);
	r = multi_wait(c, deadline, stop_poll);
	serialize_core();
	if (r < 0) {
		atomic_fetch_add_explicit(&c->stop_timeouts, r == -ETIMEDOUT,
					  memory_order_relaxed);
		return r;
	}
	atomic_fetch_add_explicit(&c->stops, 1, memory_order_relaxed);
	return atomic_load_explicit(&st->ret, memory_order_relaxed);
}

/* Common entry: checks, the context and the multi-CPU lock. */
static struct ctx *stop_enter(cpuhog_fn_t fn, int *err)
{
	struct ctx *c;

	*err = 0;
	if (!fn) {
		*err = -EINVAL;
		return NULL;
	}
	if (cpuhog_self) {
		*err = -EDEADLK;
		return NULL;
	}
	c = ctx_get(err);
	if (!c)
		return NULL;
	if (!c->rt_ok && !(c->flags & CPUHOG_F_WEAK_STOP)) {
		ctx_put();
		*err = -EPERM;
		return NULL;
	}
	multi_lock(c, false);
	return c;
}

static void stop_leave(struct ctx *c)
{
	pthread_mutex_unlock(&c->multi_lock);
	ctx_put();
}

/* Copy @cpus into fn_mask; -ENOENT if one of them has no hog. */
static int set_fn_mask(struct ctx *c, size_t setsize, const cpu_set_t *cpus)
{
	struct stop_state *st = c->stop;
	size_t cpu, bits = setsize * 8;
	unsigned int n = 0;

	CPU_ZERO_S(st->masksize, st->fn_mask);
	for (cpu = 0; cpu < bits; cpu++) {
		if (!CPU_ISSET_S(cpu, setsize, cpus))
			continue;
		if (cpu >= c->nr_cpu_ids || !c->by_cpu[cpu])
			return -ENOENT;
		CPU_SET_S(cpu, st->masksize, st->fn_mask);
		n++;
	}
	return n ? 0 : -ENOENT;
}

int stop_machine(cpuhog_fn_t fn, void *data, size_t setsize,
		 const cpu_set_t *cpus)
{
	unsigned int i;
	struct ctx *c;
	int r;

	c = stop_enter(fn, &r);
	if (!c)
		return r;
	r = cpus ? set_fn_mask(c, setsize, cpus) : 0;
	if (r == 0) {
		for (i = 0; i < c->nr_hogs; i++)
			c->msel[i] = &c->hogs[i];
		r = stop_run(c, c->nr_hogs, fn, data, !cpus);
	}
	stop_leave(c);
	return r;
}

int stop_two_cpus(unsigned int cpu1, unsigned int cpu2, cpuhog_fn_t fn,
		  void *arg)
{
	struct stop_state *st;
	struct hog *h1, *h2;
	struct ctx *c;
	int r;

	if (cpu1 == cpu2 && fn)
		return -EINVAL;
	c = stop_enter(fn, &r);
	if (!c)
		return r;
	st = c->stop;
	h1 = hog_of(c, cpu1);
	h2 = hog_of(c, cpu2);
	r = -ENOENT;
	if (h1 && h2) {
		/* CPU order, like every multi-CPU call */
		c->msel[0] = cpu1 < cpu2 ? h1 : h2;
		c->msel[1] = cpu1 < cpu2 ? h2 : h1;
		CPU_ZERO_S(st->masksize, st->fn_mask);
		CPU_SET_S(cpu1, st->masksize, st->fn_mask);
		r = stop_run(c, 2, fn, arg, false);
	}
	stop_leave(c);
	return r;
}
