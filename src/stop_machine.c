/* SPDX-License-Identifier: MIT */
/*
 * stop_machine() and stop_two_cpus() on the hogs.
 *
 * Every hog taking part runs stop_cpu(), which walks one state machine:
 *
 *   PREPARE   each hog arrives (or declines: it is off its CPU, which
 *             went offline, so nothing of ours can run there anyway).
 *             The last to arrive moves everyone to RUN.
 *   RUN       fn runs on the CPUs asked for; the others spin.  The last
 *             to acknowledge RUN moves everyone to EXIT.
 *   EXIT      every hog serializes its core and leaves.
 *   ABANDONED the deadline passed in PREPARE (or a CPU that fn must run
 *             on declined): every hog leaves, fn has run nowhere.
 *
 * The phase, the count of arrivals or acknowledgements and the call's
 * generation share one 64-bit word, and every transition is a CAS on it.
 * So PREPARE -> RUN (by the last arrival) and PREPARE -> ABANDONED (by
 * whoever sees the deadline first: a spinning hog or the caller) cannot
 * both happen: either fn runs with every hog in the rendezvous, or it
 * runs nowhere.
 *
 * Why it cannot deadlock: a hog in PREPARE spins only until the deadline;
 * in RUN and EXIT it spins only for hogs that have already arrived, and
 * are therefore running (each on its own CPU, at top priority) the same
 * bounded sequence.  Rendezvous works of two calls are never interleaved
 * on two CPUs in opposite orders, because one multi-CPU call at a time is
 * queued and waited for (multi_lock).  The hogs enforce the deadline
 * themselves, so a caller that cannot run (it shares a CPU with a
 * spinning hog) does not prolong the spin.
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
#include <stdlib.h>
#include <string.h>

enum { PH_PREPARE = 1, PH_RUN, PH_EXIT, PH_ABANDONED };

struct stop_state {
	_Atomic uint64_t word; /* gen:32 | phase:8 | count:24 */
	_Atomic uint32_t declined;    /* hogs that declined, this call */
	_Atomic uint32_t fn_declined; /* one of them was to run fn */
	_Atomic uint32_t fn_claimed;  /* fn_one: a hog has taken fn */
	_Atomic int ret;	      /* first non-zero return of fn */
	unsigned int nr;	      /* hogs taking part */
	bool fn_one;		      /* fn on exactly one CPU */
	cpuhog_fn_t fn;
	void *data;
	uint64_t deadline;
	size_t masksize;
	cpu_set_t *fn_mask; /* CPUs fn runs on (unless fn_one) */
	struct ctx *ctx;
};

#define WORD(gen, ph, n) ((uint64_t)(gen) << 32 | (uint64_t)(ph) << 24 | (n))
#define GEN(v) ((uint32_t)((v) >> 32))
#define PHASE(v) ((unsigned int)((v) >> 24) & 0xff)
#define COUNT(v) ((uint32_t)(v) & 0xffffff)

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

/* CAS @v to @nv if it still belongs to @gen in phase @ph. */
static bool transition(struct stop_state *st, uint64_t v, uint64_t nv)
{
	/* acq_rel: what each hog did in the phase it leaves (fn's effects,
	 * declines, the return value) is seen by all in the next one */
	return atomic_compare_exchange_strong_explicit(
		&st->word, &v, nv, memory_order_acq_rel, memory_order_acquire);
}

static void abandoned(struct stop_state *st)
{
	group_kick(&st->ctx->group); /* the caller may sleep */
}

/* Count one arrival in PREPARE.  false: stale or abandoned, leave. */
static bool arrive(struct stop_state *st, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(&st->word, memory_order_acquire);

	for (;;) {
		uint32_t n = COUNT(v) + 1;
		unsigned int next;

		if (GEN(v) != gen || PHASE(v) != PH_PREPARE)
			return false;
		next = atomic_load_explicit(&st->fn_declined,
					    memory_order_relaxed)
			       ? PH_ABANDONED
			       : PH_RUN;
		if (n < st->nr) {
			if (transition(st, v, v + 1))
				return true;
		} else if (transition(st, v, WORD(gen, next, 0))) {
			if (next == PH_ABANDONED)
				abandoned(st);
			return next == PH_RUN;
		}
		v = atomic_load_explicit(&st->word, memory_order_acquire);
	}
}

/* Spin until the phase reaches @ph.  false: abandoned (or stale). */
static bool await_phase(struct stop_state *st, uint32_t gen, unsigned int ph,
			bool timed)
{
	unsigned int k = 0;

	for (;;) {
		uint64_t v = atomic_load_explicit(&st->word,
						  memory_order_acquire);

		if (GEN(v) != gen || PHASE(v) == PH_ABANDONED)
			return false;
		if (PHASE(v) >= ph)
			return true;
		cpu_relax();
		if (timed && (++k & 63) == 0 && now_ns() > st->deadline &&
		    PHASE(v) == PH_PREPARE &&
		    transition(st, v, WORD(gen, PH_ABANDONED, COUNT(v))))
			abandoned(st);
	}
}

/* Acknowledge RUN; the last of the participants moves to EXIT. */
static void ack_run(struct stop_state *st, uint32_t gen)
{
	uint32_t need = st->nr - atomic_load_explicit(&st->declined,
						      memory_order_relaxed);
	uint64_t v = atomic_load_explicit(&st->word, memory_order_acquire);

	for (;;) {
		uint64_t nv = COUNT(v) + 1 == need ? WORD(gen, PH_EXIT, 0)
						   : v + 1;

		if (transition(st, v, nv))
			return;
		v = atomic_load_explicit(&st->word, memory_order_acquire);
	}
}

static bool runs_fn(struct stop_state *st, struct hog *h)
{
	uint32_t zero = 0;

	if (!st->fn_one)
		return CPU_ISSET_S(h->cpu, st->masksize, st->fn_mask);
	/* relaxed: the RUN transition already ordered everything */
	return atomic_compare_exchange_strong_explicit(
		&st->fn_claimed, &zero, 1, memory_order_relaxed,
		memory_order_relaxed);
}

static void call_fn(struct stop_state *st, struct hog *h)
{
	struct work w = { .fn = st->fn };
	long nvcsw = 0;
	uint64_t t0 = 0;
	int r, zero = 0;

	if (!(h->ctx->flags & CPUHOG_F_NO_CHECKS))
		check_begin(h, &w, &nvcsw, &t0);
	r = st->fn(st->data);
	if (!(h->ctx->flags & CPUHOG_F_NO_CHECKS))
		check_end(h, &w, nvcsw, t0, (int)h->cpu);
	/* relaxed: ack_run()'s acq_rel CAS publishes it */
	if (r)
		atomic_compare_exchange_strong_explicit(&st->ret, &zero, r,
							memory_order_relaxed,
							memory_order_relaxed);
}

static void decline(struct stop_state *st, struct hog *h, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(&st->word, memory_order_acquire);

	/* Only for our own call: a late hog touches nothing. */
	if (GEN(v) != gen || PHASE(v) != PH_PREPARE)
		return;
	/* relaxed: arrive()'s acq_rel CAS orders these before the count */
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
	uint32_t gen = h->slot.gen;

	if (h->off_cpu) {
		decline(st, h, gen);
		return 0;
	}
	if (!arrive(st, gen) || !await_phase(st, gen, PH_RUN, true)) {
		serialize_core();
		return 0;
	}
	if (runs_fn(st, h))
		call_fn(st, h);
	ack_run(st, gen);
	await_phase(st, gen, PH_EXIT, false);
	serialize_core(); /* code fn rewrote is safe to run from here on */
	return 0;
}

/* multi_wait()'s poll: give up once abandoned, or abandon at deadline. */
static int stop_poll(struct ctx *c, bool timed_out)
{
	struct stop_state *st = c->stop;
	uint64_t v = atomic_load_explicit(&st->word, memory_order_acquire);

	if (timed_out && PHASE(v) == PH_PREPARE &&
	    transition(st, v, WORD(GEN(v), PH_ABANDONED, COUNT(v))))
		v = WORD(GEN(v), PH_ABANDONED, 0);
	else if (timed_out)
		v = atomic_load_explicit(&st->word, memory_order_acquire);
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
