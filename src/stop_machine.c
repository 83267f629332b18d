/* SPDX-License-Identifier: MIT */
/*
 * stop_machine() and stop_two_cpus(): the kernel's multi_cpu_stop() on the
 * hogs, in one loop (stop_cpu()), kept so by two rules.  Stops never
 * interleave: one multi-CPU call at a time in a process (multi_lock), one
 * stop at a time on the machine (serialize.c, the kernel's
 * stop_cpus_mutex).  And the set is fixed when the stop begins: a hog
 * found off its CPU aborts the rendezvous, and the call begins again on
 * the new set, at most STOP_TRIES times (as stop_two_cpus() retries).
 *
 * Each hog acts on a phase, acknowledges it (the last acknowledgement moves
 * the word on) and waits for the next.  PREPARE: it is on its CPU.  HOLD:
 * all spin.  CHECK: each is still on its CPU, now that all were held.  RUN:
 * fn.  EXIT: each serializes its core.  TIMEDOUT, NOCPU: abandoned before
 * RUN, fn ran nowhere.  The caller acknowledges PREPARE too, once it holds
 * the machine-wide lock: the remote hogs wake meanwhile, and none spins in
 * HOLD before.  rules[] says what a waiter does on each event: the deadline
 * (stop_timeout_ns after any hog's latest step), a lost hold (a hog off its
 * CPU, or a quiet one no longer pinned), fn past overrun_ns.  The word is
 * gen:32 | phase:8 | acks to come:24; every transition is a CAS on it, so
 * HOLD -> RUN and an abandonment exclude each other, and a stale hog of an
 * abandoned call finds another generation and leaves.  Nothing here
 * allocates or does I/O.  Model: tests/model/stop.pml; kernel entries:
 * tests/test_entries.c.
 */
#include "internal.h"
#include "probes.h"
#include "outcome.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

enum { PH_PREPARE = 1, PH_HOLD, PH_CHECK, PH_RUN, PH_EXIT, PH_TIMEDOUT,
       PH_NOCPU };
enum { A_NONE, A_TIMEDOUT, A_NOCPU, A_SLEEP }; /* what an event does */

static const struct {
	/* spins spin_ns, then sleeps (the caller may be queueing on this
	 * CPU); else spins, and looks */
	bool sleeps;
	unsigned char deadline, lost, overrun;
} rules[] = {
	/*              sleeps  deadline    hold lost  fn overran */
	[PH_PREPARE] = { true,  A_TIMEDOUT, A_NONE,    A_NONE },
	[PH_HOLD]    = { false, A_TIMEDOUT, A_NOCPU,   A_NONE },
	[PH_CHECK]   = { false, A_TIMEDOUT, A_NOCPU,   A_NONE },
	[PH_RUN]     = { false, A_NONE,     A_SLEEP,   A_SLEEP },
};

#define WORD(gen, ph, n) ((uint64_t)(gen) << 32 | (uint64_t)(ph) << 24 | (n))
#define GEN(v) ((uint32_t)((v) >> 32))
#define PHASE(v) ((unsigned int)((v) >> 24) & 0xff)
#define COUNT(v) ((uint32_t)(v)&0xffffff)

#define LOOK_NS 1000000u /* how often a spinning hog looks around */
#define QUIET_NS 10000000u /* a hog that long without a look is looked at */
#define STOP_TRIES 4	 /* rendezvous begun on a changed set, at most */

/* acquire: what the hogs did before the transition seen */
#define LOAD(st) atomic_load_explicit(&(st)->word, memory_order_acquire)
#define RELAXED(p) atomic_load_explicit(p, memory_order_relaxed)
#define SET(p, x) atomic_store_explicit(p, x, memory_order_relaxed)
#define COUNT_UP(p) atomic_fetch_add_explicit(p, 1, memory_order_relaxed)
/* sched_getcpu(): rseq or the vDSO, no system call */
#define on_own_cpu(h) (sched_getcpu() == (int)(h)->cpu)

/* CAS the word from *@v (reloaded on failure) to @nv.  seq_cst: what a
 * hog did in the phase it leaves (fn's effects, ran_gen) is seen by all
 * in the next. */
static bool transition(struct stop_state *st, uint64_t *v, uint64_t nv)
{
	if (!atomic_compare_exchange_strong(&st->word, v, nv))
		return false;
	if (PHASE(*v) == PHASE(nv))
		return true; /* a count: nobody sleeps on those */
	PROBE2(stop_phase, GEN(nv), PHASE(nv));
	cpuhog_i_wait_kick(&st->wake);
	if (PHASE(nv) >= PH_TIMEDOUT) /* the caller may sleep */
		cpuhog_i_wait_kick(&st->ctx->group.seq);
	return true;
}

/* Give call @gen up as @why, unless it is past CHECK. */
static void abandon(struct stop_state *st, uint32_t gen, unsigned int why)
{
	uint64_t v = LOAD(st);

	while (GEN(v) == gen && PHASE(v) < PH_RUN &&
	       !transition(st, &v, WORD(gen, why, 0)))
		;
}

/* Whether the call's deadline has passed at @t; a look that finds it
 * more than LOOK_NS late counts in cpuhog_info.late_waits. */
static bool past_deadline(struct stop_state *st, uint64_t t)
{
	uint64_t d = RELAXED(&st->deadline);

	if (t <= d)
		return false;
	if (d != NO_DEADLINE && t > d + LOOK_NS)
		COUNT_UP(&st->ctx->late_waits);
	return true;
}

/* Acknowledge phase @ph of call @gen; the last one moves the word on.
 * Before RUN a step moves the deadline to stop_timeout_ns from now, if
 * later (relaxed: a time, read at each look). */
static void ack(struct stop_state *st, uint32_t gen, unsigned int ph)
{
	uint64_t v = LOAD(st), nv, t = ph == PH_CHECK ? cpuhog_i_now_ns() : 0;
	uint64_t d = RELAXED(&st->deadline),
		 nd = ph < PH_RUN ? cpuhog_i_deadline_in(st->ctx->stop_timeout_ns)
				  : 0;

	while (GEN(v) == gen && d < nd &&
	       !atomic_compare_exchange_weak_explicit(&st->deadline, &d, nd,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
	do {
		if (GEN(v) != gen || PHASE(v) != ph)
			return;
		nv = COUNT(v) > 1	   ? v - 1
		     : ph + 1 < PH_EXIT ? WORD(gen, ph + 1, RELAXED(&st->n))
					: WORD(gen, PH_EXIT, 0);
	} while (!transition(st, &v, nv));
	/* t read before the CAS: no hog finds RUN begun after its "now" */
	if (ph == PH_CHECK && PHASE(nv) == PH_RUN)
		SET(&st->run_at, t);
}

/* Note call @gen's hold released, as @why; true.  Only forward, so a
 * stale hog cannot undo a later call's note (relaxed: a hint at each
 * look; the caller reads it after EXIT). */
static bool release_hold(struct stop_state *st, uint32_t gen, unsigned int why)
{
	uint32_t r = RELAXED(&st->released);

	while ((int32_t)(gen - r) > 0)
		if (atomic_compare_exchange_weak_explicit(&st->released, &r, gen,
							  memory_order_relaxed,
							  memory_order_relaxed)) {
			SET(&st->release_why, why); /* the winner's reason */
			PROBE2(stop_released, gen, why);
			break;
		}
	return true;
}

/* Move *@at from @seen to @to unless another did (relaxed: a claim on a
 * time orders nothing else). */
static bool claim(_Atomic uint64_t *at, uint64_t seen, uint64_t to)
{
	return atomic_compare_exchange_strong_explicit(
		at, &seen, to, memory_order_relaxed, memory_order_relaxed);
}

/* Whether call @gen's hold is lost: this hog is off its CPU, or the next
 * quiet hog (no look of its own for QUIET_NS) is no longer pinned.  The
 * looks are the stop's, not each quiet hog's, each twice as far from the
 * last as the one before: where vCPUs run in turns all are quiet now and
 * then, and the system calls grow with the logarithm of the stop's
 * length, not with N times it. */
static bool hold_lost(struct stop_state *st, struct hog *h, uint32_t gen,
		      uint64_t now)
{
	unsigned int i, nr = st->ctx->nr_hogs;
	uint64_t next = RELAXED(&st->next_look), gap = RELAXED(&st->look_gap);

	SET(&h->st.beat, now);
	if (RELAXED(&st->released) == gen)
		return true;
	if (!on_own_cpu(h))
		return release_hold(st, gen, STOP_LOST);
	for (i = 0; now >= next && i < nr; i++) {
		struct hog *x = &st->ctx->hogs[(h->st.look_at + i) % nr];
		uint64_t b = RELAXED(&x->st.beat);

		if (x == h || b > now || now - b < QUIET_NS ||
		    RELAXED(&x->st.held_gen) != gen)
			continue;
		if (!claim(&st->next_look, next, now + gap) ||
		    !claim(&x->st.beat, b, now))
			return false;
		SET(&st->look_gap, 2 * gap);
		h->st.look_at = (h->st.look_at + i + 1) % nr;
		if (cpuhog_i_affine_only(x->tid, h->pin.masksize, h->pin.mask,
					 x->cpu))
			return false;
		cpuhog_i_hogs_look_again(); /* widened: it re-pins itself */
		return release_hold(st, gen, STOP_LOST);
	}
	return false;
}

/* Whether fn has run past overrun_ns (the hold then ends). */
static bool overran(struct stop_state *st, uint32_t gen, uint64_t now)
{
	uint64_t at = RELAXED(&st->run_at);

	return at && now > at && now - at > st->ctx->overrun_ns &&
	       release_hold(st, gen, STOP_OVERRUN);
}

/* A report's time: the first one stands. */
static void stamp(_Atomic uint64_t *at, uint64_t t)
{
	if (!RELAXED(at))
		SET(at, t);
}

/* Wait while call @gen is in phase @ph, doing what rules[@ph] says at
 * each look (LOOK_NS apart, or where it sleeps at each wake-up); returns
 * the word that ended the wait. */
static uint64_t await(struct stop_state *st, struct hog *h, uint32_t gen,
		      unsigned int ph)
{
	struct wait w = WAIT(
		&st->wake, 1,
		rules[ph].sleeps ? cpuhog_i_deadline_in(st->ctx->spin_ns)
				 : NO_DEADLINE,
		RELAXED(&st->deadline));
	uint64_t look = 0, t = 0, v;
	unsigned int a;

	for (; GEN(v = LOAD(st)) == gen && PHASE(v) == ph;
	     t = cpuhog_i_wait_turn(&w)) {
		if (!t || t < look)
			continue;
		look = rules[ph].sleeps ? 0 : t + LOOK_NS;
		a = rules[ph].deadline && past_deadline(st, t)
			    ? rules[ph].deadline
		    : rules[ph].lost && hold_lost(st, h, gen, t)
			    ? rules[ph].lost
		    : rules[ph].overrun && overran(st, gen, t)
			    ? rules[ph].overrun
			    : A_NONE;
		if (a == A_TIMEDOUT || a == A_NOCPU)
			abandon(st, gen, a == A_TIMEDOUT ? PH_TIMEDOUT : PH_NOCPU);
		w.deadline = RELAXED(&st->deadline);
		if (a == A_SLEEP) { /* the hold ends: no more looks */
			if (RELAXED(&st->timing))
				stamp(&h->t.released, t);
			look = w.deadline = NO_DEADLINE;
			w.spin_end = 0;
		}
	}
	return v;
}

/* fn here if asked, or (any one CPU) by the first to claim it (relaxed:
 * CHECK -> RUN ordered all; load first so N hogs do not all write one
 * line).  Moved since CHECK, no fn; moved under fn, the hold ended. */
static void call_fn(struct stop_state *st, struct hog *h, uint32_t gen)
{
	bool check = !(h->ctx->flags & CPUHOG_F_NO_CHECKS);
	struct check ck;
	int r, zero = 0;

	if (st->fn_one ? RELAXED(&st->fn_claimed) ||
				 atomic_exchange_explicit(&st->fn_claimed, 1,
							  memory_order_relaxed)
		       : !(h->slot.flags & W_F_RUNS_FN))
		return;
	if (check)
		cpuhog_i_check_begin(h, &ck);
	if (!on_own_cpu(h))
		return;
	PROBE3(stop_fn_start, h->cpu, st->fn, gen);
	r = st->fn(st->data);
	PROBE3(stop_fn_end, h->cpu, st->fn, r);
	if (check)
		cpuhog_i_check_end(h, st->fn, &ck);
	if (!on_own_cpu(h))
		release_hold(st, gen, STOP_LOST);
	cpuhog_i_redirect_signals(h);
	/* relaxed, both: the RUN -> EXIT transition publishes them */
	SET(&h->st.ran_gen, gen);
	if (r) /* the first non-zero */
		atomic_compare_exchange_strong_explicit(&st->ret, &zero, r,
							memory_order_relaxed,
							memory_order_relaxed);
}

/* Every hog's callback: the kernel's loop.  beat and held_gen (relaxed)
 * tell the others whom to look at. */
static int stop_cpu(void *arg)
{
	struct stop_state *st = arg;
	struct hog *h = cpuhog_i_self;
	uint32_t gen = h->slot.gen;
	uint64_t v = LOAD(st);
	unsigned int ph = 0;

	while (GEN(v) == gen && PHASE(v) > ph && PHASE(v) < PH_EXIT) {
		ph = PHASE(v);
		SET(&h->st.beat, cpuhog_i_now_ns());
		SET(&h->st.held_gen, gen);
		if ((ph == PH_PREPARE || ph == PH_CHECK) &&
		    (h->off_cpu || !on_own_cpu(h))) { /* the set is fixed */
			abandon(st, gen, PH_NOCPU);
			break;
		}
		/* the sleep check's read now, not in RUN where all wait */
		if (ph == PH_PREPARE && !(h->ctx->flags & CPUHOG_F_NO_CHECKS) &&
		    (st->fn_one || (h->slot.flags & W_F_RUNS_FN)))
			cpuhog_i_sw_prime(h);
		if (RELAXED(&st->timing) && (ph == PH_PREPARE || ph == PH_HOLD))
			stamp(ph == PH_PREPARE ? &h->t.arrived : &h->t.held,
			      cpuhog_i_now_ns());
		if (ph == PH_RUN && on_own_cpu(h))
			call_fn(st, h, gen);
		ack(st, gen, ph);
		v = await(st, h, gen, ph);
	}
	if (ph && RELAXED(&st->timing))
		stamp(&h->t.released, cpuhog_i_now_ns());
	cpuhog_i_serialize_core(); /* code fn rewrote is safe to run now */
	/* which core: for the caller (relaxed: completion publishes it) */
	SET(&h->st.serialized_at,
	    (uint64_t)gen << 32 | (uint32_t)sched_getcpu());
	return 0;
}

/* cpuhog_i_multi_wait()'s poll: before RUN wait to the deadline (a step
 * moves it), then abandon; RUN is waited out. */
static int stop_poll(struct ctx *c, bool timed_out, uint64_t *deadline)
{
	struct stop_state *st = c->stop;
	uint64_t v = LOAD(st);

	*deadline = PHASE(v) >= PH_RUN ? NO_DEADLINE : RELAXED(&st->deadline);
	if (timed_out && PHASE(v) < PH_RUN &&
	    past_deadline(st, cpuhog_i_now_ns()))
		abandon(st, GEN(v), PH_TIMEDOUT);
	return PHASE(LOAD(st)) >= PH_TIMEDOUT ? -ECANCELED : 0;
}

/* Serialize the caller's core after fn ran, unless its hog did so there
 * after fn (a CPUID, which a hypervisor traps, spared). */
static void serialize_here(struct ctx *c, uint32_t gen)
{
	unsigned int cpu = (unsigned int)sched_getcpu();
	struct hog *h = cpuhog_i_hog_of(c, cpu);

	if (!h || RELAXED(&h->st.serialized_at) != ((uint64_t)gen << 32 | cpu))
		cpuhog_i_serialize_core();
}

/* How call @gen of @s ended, into @o: fn's value, an error, or -EAGAIN
 * where fn ran nowhere because a CPU went away. */
static int stop_result(struct ctx *c, struct sel *s, uint32_t gen,
		       struct stop_outcome *o)
{
	struct stop_state *st = c->stop;
	unsigned int i, ph = PHASE(LOAD(st));

	if (ph != PH_EXIT) {
		o->ended = ph == PH_NOCPU ? STOP_NOCPU : STOP_TIMEDOUT;
		if (ph != PH_NOCPU)
			COUNT_UP(&c->stop_timeouts);
		return ph == PH_NOCPU ? -EAGAIN : -ETIMEDOUT;
	}
	serialize_here(c, gen);
	o->ended = STOP_RAN;
	for (i = 0; i < s->n; i++) /* relaxed: EXIT, acquired, published it */
		if (RELAXED(&s->hog[i]->st.ran_gen) == gen) {
			o->fn_runs++;
			if (s->hog[i]->cpu < CPU_SETSIZE)
				CPU_SET(s->hog[i]->cpu, &o->ran);
		}
	if (RELAXED(&st->released) == gen) {
		o->released = RELAXED(&st->release_why);
		COUNT_UP(&c->holds_released);
	}
	if (o->fn_runs != o->fn_want) { /* a hog moved after CHECK */
		COUNT_UP(&c->stop_misses);
		return o->fn_runs ? -EINTR : -EAGAIN;
	}
	COUNT_UP(&c->stops);
	return RELAXED(&st->ret);
}

/* One rendezvous of the hogs of @s (fn on any one, @fn_one). */
static int stop_once(struct ctx *c, struct sel *s, bool fn_one,
		     struct stop_outcome *o)
{
	struct stop_state *st = c->stop;
	uint64_t deadline = cpuhog_i_deadline_in(c->stop_timeout_ns);
	int64_t gen = cpuhog_i_multi_reserve(c, s, deadline);
	struct hog *root;
	unsigned int i;

	o->tries++;
	o->pushed = false;
	o->fn_runs = o->released = 0;
	o->fn_want = fn_one;
	o->ended = STOP_TIMEDOUT;
	CPU_ZERO(&o->ran);
	if (gen < 0) {
		COUNT_UP(&c->stop_timeouts);
		return (int)gen;
	}
	/* armed only now: a stale work the reserve waited out may have
	 * stamped its hog's times */
	o->pushed = true;
	if (o->rep)
		cpuhog_i_stop_report_arm(c, s, true);
	for (i = 0; !fn_one && i < s->n; i++)
		o->fn_want += !!(s->flags[i] & W_F_RUNS_FN);
	st->fn_one = fn_one;
	/* relaxed, all: the seq_cst pushes publish them.  No deadline until
	 * the caller's own acknowledgement of PREPARE (its count is n + 1):
	 * the lock's wait is bounded apart */
	SET(&st->deadline, NO_DEADLINE);
	/* release_hold()'s order starts here: no earlier release is ours */
	SET(&st->released, (uint32_t)gen - 1);
	SET(&st->fn_claimed, 0);
	SET(&st->ret, 0);
	SET(&st->run_at, 0);
	SET(&st->look_gap, QUIET_NS);
	SET(&st->n, s->n);
	SET(&st->word, WORD(gen, PH_PREPARE, s->n + 1));
	root = cpuhog_i_multi_push(c, s, (uint32_t)gen, stop_cpu, st,
				   W_F_INTERNAL);
	/* the remote hogs wake meanwhile; none spins in HOLD before the
	 * caller's acknowledgement, which comes once it holds the lock */
	if (o->tries == 1)
		cpuhog_i_stop_lock(c, o);
	/* before the root's wake: the caller, preempted by its own CPU's
	 * hog, may not run again before the others spin in HOLD */
	SET(&st->deadline, cpuhog_i_deadline_in(c->stop_timeout_ns));
	ack(st, (uint32_t)gen, PH_PREPARE);
	cpuhog_i_wake_hog(root);
	cpuhog_i_multi_wait(c, s, RELAXED(&st->deadline), stop_poll);
	return stop_result(c, s, (uint32_t)gen, o);
}

/* The stop of @s under multi_lock, begun again on a new selection while
 * a CPU went away before fn ran, at most STOP_TRIES times. */
static int stop_tries(struct ctx *c, struct sel *s, size_t setsize,
		       const cpu_set_t *cpus, bool two, unsigned int cpu1,
		       unsigned int cpu2, struct stop_outcome *o)
{
	int r = -EAGAIN;

	while (r == -EAGAIN && o->tries < STOP_TRIES) {
		if (o->tries) { /* the set changed: read reach anew */
			c->reach_fresh = false;
			s = cpuhog_i_stop_select(c, setsize, cpus, two, cpu1,
						 cpu2);
		}
		r = s ? stop_once(c, s, !cpus && !two, o) : -ENOENT;
		if (o->rep && s)
			cpuhog_i_stop_report_try(s, o);
	}
	cpuhog_i_stop_unlock(o);
	return r == -EAGAIN ? -ENOENT : r;
}

int cpuhog_i_stop_report(cpuhog_fn_t fn, void *data, size_t setsize,
			 const cpu_set_t *cpus, bool two, unsigned int cpu1,
			 unsigned int cpu2, struct stop_outcome *o,
			 struct cpuhog_report *rep)
{
	struct stop_outcome own;
	struct ctx *c = NULL;
	struct sel *s;
	int r;

	o = o ? o : &own;
	PROBE3(stop_entry, fn, two, rep != NULL);
	r = cpuhog_i_stop_report_begin(o, rep) < 0 || !fn ||
			    (two && cpu1 == cpu2)
		    ? -EINVAL
	    : cpuhog_i_self ? -EDEADLK
			    : 0;
	if (r == 0 && (c = cpuhog_i_call_enter(&r))) {
		cpuhog_i_multi_lock(c, false);
		c->stop->fn = fn;
		c->stop->data = data;
		/* the CPUs, and the promise: no thread of ours where no hog
		 * is */
		s = cpuhog_i_stop_select(c, setsize, cpus, two, cpu1, cpu2);
		r = !s ? -ENOENT
		    : !two && cpuhog_i_uncovered(c) &&
				    !(c->flags & CPUHOG_F_WEAK)
			    ? -EPERM
			    : cpuhog_i_call_exclusive(c);
		if (r == 0)
			r = stop_tries(c, s, setsize, cpus, two, cpu1, cpu2, o);
	}
	cpuhog_i_stop_report_end(c, o, o->ret = r); /* CPUs let go: /proc */
	if (c) {
		if (o->rep)
			cpuhog_i_stop_report_arm(c, NULL, false);
		cpuhog_i_multi_unlock(c);
		cpuhog_i_call_leave();
	}
	PROBE3(stop_return, r, o->tries, o->released);
	return r;
}

int stop_machine(cpuhog_fn_t fn, void *data, size_t setsize,
		 const cpu_set_t *cpus)
{
	return cpuhog_i_stop_report(fn, data, setsize, cpus, false, 0, 0,
				    NULL, NULL);
}

int stop_two_cpus(unsigned int cpu1, unsigned int cpu2, cpuhog_fn_t fn,
		  void *arg)
{
	return cpuhog_i_stop_report(fn, arg, 0, NULL, true, cpu1, cpu2, NULL,
				    NULL);
}

int stop_machine_report(cpuhog_fn_t fn, void *data, size_t setsize,
			const cpu_set_t *cpus, struct cpuhog_report *rep)
{
	return cpuhog_i_stop_report(fn, data, setsize, cpus, false, 0, 0,
				    NULL, rep);
}

int stop_two_cpus_report(unsigned int cpu1, unsigned int cpu2, cpuhog_fn_t fn,
			 void *arg, struct cpuhog_report *rep)
{
	return cpuhog_i_stop_report(fn, arg, 0, NULL, true, cpu1, cpu2, NULL,
				    rep);
}
