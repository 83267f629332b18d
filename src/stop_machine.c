/* SPDX-License-Identifier: MIT */
/*
 * stop_machine() and stop_two_cpus(): the kernel's multi_cpu_stop(), on
 * the hogs.  Two things keep it one loop, as they keep the kernel's.
 * Stops never interleave: one multi-CPU call at a time in a process
 * (multi_lock), one stop at a time on the machine (serialize.c, the
 * kernel's stop_cpus_mutex); so no hog of a stop waits behind another
 * stop's, and nobody steps aside.  And the set of CPUs is fixed when the
 * stop begins, the usable hogs, each of which must arrive on its own CPU:
 * one found elsewhere (its CPU went offline or left the cpuset) aborts
 * the rendezvous, and the call begins again on the new set, at most
 * STOP_TRIES times, as the kernel's stop_two_cpus() retries.
 *
 * Each hog (stop_cpu()) acts on a phase, acknowledges it on the stop's
 * word (the last acknowledgement moves the word on) and waits for the
 * next.  PREPARE: it arrives on its own CPU.  HOLD: all spin on theirs.
 * CHECK: each is still on its own (sched_getcpu(), no system call), now
 * that all were held.  RUN: fn runs where asked, after a last look (a hog
 * moved leaves fn alone: -ENOENT where fn ran nowhere, -EINTR where on
 * some).  EXIT: each serializes its core and leaves.  TIMEDOUT, NOCPU:
 * abandoned before RUN, fn ran nowhere.  rules[] says what a waiting hog
 * does on each event: the deadline (stop_timeout_ns after the works'
 * push or the latest step of any hog, its arrival, hold or check: a
 * guest's vCPUs may run late in any phase, not only to arrive; set before
 * the caller's wakes, which its own CPU's hog may answer before the
 * caller runs again); a lost hold (a hog of the stop off its CPU, or
 * quiet and no longer pinned: the kernel moves it, perhaps behind a hog
 * of ours at its priority); fn past overrun_ns (blocked on what a held
 * CPU's thread owns, it would spin the others until RT throttling).
 * Before RUN the stop gives up; in RUN the others sleep until fn returns
 * (holds_released).  PREPARE spins briefly, then sleeps: the caller may
 * still be queueing, perhaps on this hog's CPU.
 *
 * The word is gen:32 | phase:8 | acknowledgements to come:24, every
 * transition a CAS on it: HOLD -> RUN and an abandonment cannot both
 * happen.  fn ran iff it reached EXIT, on the hogs whose ran_gen is the
 * call's.  A stale hog of an abandoned call (queued behind a CPU held by
 * someone else) finds another generation and leaves; no generation comes
 * round while one is queued (cpuhog_i_multi_reserve()).  No deadlock: a hog
 * spins only once all arrived on their CPUs, and only until the next phase, the
 * deadline or a lost hold; in RUN it waits for fn, which the hold limits
 * bound.  Nothing here allocates, creates threads or does I/O but the
 * lock's fcntl().  tests/model/stop.pml models this loop (make check).
 *
 * Kernel entries of a stop on 2 CPUs (tests/test_entries.c), 5 + 3: the
 * caller's lock (two fcntl()), unlock and two wakes, of the other CPU's
 * hog and its own; each hog's futex wait, and where fn runs its sleep
 * check's read and its signal check.
 * Spinning makes none; while some hog is quiet, the stop makes one
 * sched_getaffinity() per QUIET_NS, by whichever hog claims the look.
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
	bool sleeps; /* spins spin_ns, then sleeps (else spins, and looks) */
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

/* acquire: what the hogs did before the transition we observe */
#define LOAD(st) atomic_load_explicit(&(st)->word, memory_order_acquire)
#define RELAXED(p) atomic_load_explicit(p, memory_order_relaxed)
#define SET(p, x) atomic_store_explicit(p, x, memory_order_relaxed)
#define COUNT_UP(p) atomic_fetch_add_explicit(p, 1, memory_order_relaxed)
/* sched_getcpu(): what the kernel wrote at our last return to user space
 * (rseq, or the vDSO), no system call */
#define on_own_cpu(h) (sched_getcpu() == (int)(h)->cpu)

/* CAS the word from *@v (reloaded on failure) to @nv.  seq_cst: what
 * each hog did in the phase it leaves (fn's effects, ran_gen, ret) is
 * seen by all in the next. */
static bool transition(struct stop_state *st, uint64_t *v, uint64_t nv)
{
	if (!atomic_compare_exchange_strong(&st->word, v, nv))
		return false;
	if (PHASE(*v) == PHASE(nv))
		return true; /* a count: nobody sleeps on those */
	PROBE2(stop_phase, GEN(nv), PHASE(nv));
	cpuhog_i_wait_kick(&st->wake); /* the hogs' (await()) */
	if (PHASE(nv) >= PH_TIMEDOUT)
		/* the caller may sleep */
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

/* A step: the deadline is stop_timeout_ns from now, if later.
 * relaxed: a time, read by hogs and the caller at their next look. */
static void extend(struct stop_state *st)
{
	uint64_t d = RELAXED(&st->deadline);
	uint64_t nd = cpuhog_i_deadline_in(RELAXED(&st->timeout_ns));

	while (d < nd && !atomic_compare_exchange_weak_explicit(
				 &st->deadline, &d, nd, memory_order_relaxed,
				 memory_order_relaxed))
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

/* Acknowledge phase @ph of call @gen; the last one moves the word on. */
static void ack(struct stop_state *st, uint32_t gen, unsigned int ph)
{
	uint64_t v = LOAD(st), nv, t = ph == PH_CHECK ? cpuhog_i_now_ns() : 0;

	if (ph < PH_RUN && GEN(v) == gen)
		extend(st);
	do {
		if (GEN(v) != gen || PHASE(v) != ph)
			return;
		nv = COUNT(v) > 1	   ? v - 1
		     : ph + 1 < PH_EXIT ? WORD(gen, ph + 1, RELAXED(&st->n))
					: WORD(gen, PH_EXIT, 0);
	} while (!transition(st, &v, nv));
	/* the time taken before the CAS: a hog that sees RUN and reads the
	 * clock afterwards never finds RUN begun after its own "now" */
	if (ph == PH_CHECK && PHASE(nv) == PH_RUN)
		SET(&st->run_at, t);
}

/* Note that call @gen's hold is released, as @why; true.  Only forward
 * (serial-number order): a stale hog must not undo a later call's note.
 * relaxed: a hint at each look; the caller reads it after EXIT. */
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

/* Move *@at from @seen to @to, unless another did first (relaxed: a
 * claim on a time, which orders nothing else). */
static bool claim(_Atomic uint64_t *at, uint64_t seen, uint64_t to)
{
	return atomic_compare_exchange_strong_explicit(
		at, &seen, to, memory_order_relaxed, memory_order_relaxed);
}

/*
 * A look: whether the hold of call @gen is lost.  This hog is off its
 * CPU, or the next quiet hog of the call (no look of its own for
 * QUIET_NS) is no longer pinned to its CPU.  One look per QUIET_NS for
 * the whole stop (a CAS on next_look claims it), at the next quiet hog
 * (a CAS on its beat): where vCPUs run in turns every hog is quiet now
 * and then, and a look per quiet hog would make each hog's system calls
 * per stop grow with N.  Where one hog is moved and the others spin, it
 * is the one quiet hog, looked at within QUIET_NS.
 */
static bool hold_lost(struct stop_state *st, struct hog *h, uint32_t gen,
		      uint64_t now)
{
	unsigned int i, nr = st->ctx->nr_hogs;
	uint64_t next = RELAXED(&st->next_look);

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
		if (!claim(&st->next_look, next, now + QUIET_NS) ||
		    !claim(&x->st.beat, b, now))
			return false;
		h->st.look_at = (h->st.look_at + i + 1) % nr;
		if (cpuhog_i_affine_only(x->tid, h->pin.masksize, h->pin.mask,
					 x->cpu))
			return false;
		cpuhog_i_hogs_look_again(); /* a widened mask: it re-pins itself
					     */
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

/* A report's time (stop_machine_report()): the first one stands. */
static void stamp(_Atomic uint64_t *at, uint64_t t)
{
	if (!RELAXED(at))
		SET(at, t);
}

/* Wait while call @gen is in phase @ph, doing at each look (LOOK_NS
 * apart; in a phase that sleeps, at every reading of the clock) what
 * rules[@ph] says; returns the word that ended the wait. */
static uint64_t await(struct stop_state *st, struct hog *h, uint32_t gen,
		      unsigned int ph)
{
	struct wait w = WAIT(
		&st->wake, 1,
		rules[ph].sleeps ? cpuhog_i_deadline_in(RELAXED(&st->spin_ns))
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
		if (a == A_SLEEP) { /* the hold ends here: no more looks */
			if (RELAXED(&st->timing))
				stamp(&h->t.released, t);
			look = w.deadline = NO_DEADLINE;
			w.spin_end = 0;
		}
	}
	return v;
}

/* fn on this hog, if asked, or for any one CPU the first to claim it
 * (relaxed: CHECK -> RUN ordered all; the load first, so that N hogs do
 * not all write one line).  The last look: moved since CHECK, it leaves
 * fn alone; moved while fn ran, the hold ended under fn. */
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

/* The callback every hog of the stop runs: the kernel's loop.  The beat
 * and held_gen (relaxed): for the others, to choose whom to look at. */
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
		/* the sleep check's read, if fn may come here: now, while
		 * the others still arrive, not in RUN, where all wait */
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
	cpuhog_i_serialize_core(); /* code fn rewrote is safe to run from here
				      on */
	/* which core that was: the caller's look (relaxed: the work's
	 * completion publishes it) */
	SET(&h->st.serialized_at,
	    (uint64_t)gen << 32 | (uint32_t)sched_getcpu());
	return 0;
}

/* cpuhog_i_multi_wait()'s poll: end the wait once abandoned; before RUN, wait
 * to the deadline (a step moves it on), then abandon; RUN is waited out. */
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

/* One rendezvous of the hogs of @s: fn's value, an error, or -EAGAIN
 * where fn ran nowhere because a CPU went away. */
static int stop_once(struct ctx *c, struct sel *s, bool fn_one,
		     struct stop_outcome *o)
{
	struct stop_state *st = c->stop;
	uint64_t deadline = cpuhog_i_deadline_in(c->stop_timeout_ns);
	int64_t gen = cpuhog_i_multi_reserve(c, s, deadline);
	struct hog *here;
	unsigned int i, ph;

	o->tries++;
	o->pushed = false;
	o->fn_runs = o->released = o->fn_want = 0;
	o->ended = STOP_TIMEDOUT;
	CPU_ZERO(&o->ran);
	if (gen < 0) {
		COUNT_UP(&c->stop_timeouts);
		return (int)gen;
	}
	/* armed only now: a stale work of an earlier call, which the
	 * reserve waited out, may have stamped its hog's times */
	o->pushed = true;
	if (o->rep)
		cpuhog_i_stop_report_arm(c, s, true);
	for (i = 0; i < s->n; i++)
		o->fn_want += fn_one ? i == 0 : !!(s->flags[i] & W_F_RUNS_FN);
	st->fn_one = fn_one;
	/* relaxed, all: cpuhog_i_multi_push()'s seq_cst pushes publish them.
	 * The deadline counts from the push, after which the caller makes its
	 * wakes (wake.c): a hog that comes must never find none set, since
	 * the caller, preempted by its own CPU's hog, may not run again
	 * before the others spin in HOLD */
	SET(&st->deadline, cpuhog_i_deadline_in(c->stop_timeout_ns));
	/* a release of an earlier call must not read as this one's: the
	 * serial-number order of release_hold() starts here */
	SET(&st->released, (uint32_t)gen - 1);
	SET(&st->timeout_ns, c->stop_timeout_ns);
	SET(&st->spin_ns, c->spin_ns);
	SET(&st->fn_claimed, 0);
	SET(&st->ret, 0);
	SET(&st->run_at, 0);
	SET(&st->n, s->n);
	SET(&st->word, WORD(gen, PH_PREPARE, s->n));
	cpuhog_i_multi_push(c, s, (uint32_t)gen, stop_cpu, st, W_F_INTERNAL);
	cpuhog_i_multi_wait(c, s, RELAXED(&st->deadline), stop_poll);
	ph = PHASE(LOAD(st));
	/* fn ran: serialize this core, unless a hog of the stop did so here
	 * after fn (we run here only since; a CPUID, which a hypervisor
	 * traps, spared) */
	i = (unsigned int)sched_getcpu();
	here = cpuhog_i_hog_of(c, i);
	if (ph == PH_EXIT &&
	    (!here || RELAXED(&here->st.serialized_at) !=
			      ((uint64_t)(uint32_t)gen << 32 | i)))
		cpuhog_i_serialize_core();
	if (ph != PH_EXIT) {
		o->ended = ph == PH_NOCPU ? STOP_NOCPU : STOP_TIMEDOUT;
		if (ph != PH_NOCPU)
			COUNT_UP(&c->stop_timeouts);
		return ph == PH_NOCPU ? -EAGAIN : -ETIMEDOUT;
	}
	o->ended = STOP_RAN;
	for (i = 0; i < s->n; i++) /* relaxed: EXIT, acquired, published it */
		if (RELAXED(&s->hog[i]->st.ran_gen) == (uint32_t)gen) {
			o->fn_runs++;
			if (s->hog[i]->cpu < CPU_SETSIZE)
				CPU_SET(s->hog[i]->cpu, &o->ran);
		}
	if (RELAXED(&st->released) == (uint32_t)gen) {
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

/*
 * The hogs of a try, the call's selection, in topology order (the wake
 * tree's): every usable one (where an explicit set left CPUs out, only
 * within where our threads may go: cpuhog_i_reach(), which tells of a
 * CPU gone before its hog can), fn on those of @cpus (NULL: any one);
 * or, @two, those of @cpu1 (fn) and @cpu2.  NULL: a CPU that must take
 * part (or a CPU of @cpus) has no hog or is not usable now, or @cpus is
 * empty.
 */
static struct sel *pick(struct ctx *c, size_t setsize, const cpu_set_t *cpus,
			bool two, unsigned int cpu1, unsigned int cpu2)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	struct sel *s = cpuhog_i_multi_sel(c);
	unsigned int i, fns = 0;

	for (i = 0; i < c->nr_hogs; i++) {
		struct hog *h = c->by_topo[i];
		bool need = two ? h->cpu == cpu1 || h->cpu == cpu2
				: cpus && h->cpu < setsize * 8 &&
					  CPU_ISSET_S(h->cpu, setsize, cpus);
		bool f = two ? h->cpu == cpu1 : need;

		if ((two && !need) || !cpuhog_i_hog_usable(c, h) ||
		    (!two && c->partial &&
		     !CPU_ISSET_S(h->cpu, sz, cpuhog_i_reach(c)))) {
			if (need)
				return NULL;
			continue;
		}
		cpuhog_i_sel_add(s, h, f ? W_F_RUNS_FN : 0);
		fns += f;
	}
	if (two ? s->n != 2
		: !s->n || (cpus && (fns == 0 ||
				     (int)fns != CPU_COUNT_S(setsize, cpus))))
		return NULL;
	return s;
}

/* A stop (@two: of @cpu1 and @cpu2), begun again while a CPU went away
 * before fn ran; reported into @rep where it is not NULL. */
int cpuhog_i_stop_report(cpuhog_fn_t fn, void *data, size_t setsize,
			 const cpu_set_t *cpus, bool two, unsigned int cpu1,
			 unsigned int cpu2, struct stop_outcome *o,
			 struct cpuhog_report *rep)
{
	struct sel *s;
	struct ctx *c;
	int r = 0;

	if (cpuhog_i_stop_report_begin(o, rep) < 0)
		return o->ret = -EINVAL;
	if (!fn || (two && cpu1 == cpu2))
		return cpuhog_i_stop_report_end(NULL, o, o->ret = -EINVAL);
	if (cpuhog_i_self)
		return cpuhog_i_stop_report_end(NULL, o, o->ret = -EDEADLK);
	if (!(c = cpuhog_i_call_enter(&r)))
		return cpuhog_i_stop_report_end(NULL, o, o->ret = r);
	cpuhog_i_multi_lock(c, false);
	/* the CPUs, then the promise (a thread of ours on a CPU that has
	 * no hog: stop_machine() cannot hold it), then the lock, whose
	 * wait has a bound of its own */
	s = pick(c, setsize, cpus, two, cpu1, cpu2);
	r = !s ? -ENOENT
	    : !two && cpuhog_i_uncovered(c) && !(c->flags & CPUHOG_F_WEAK)
		    ? -EPERM
		    : cpuhog_i_call_exclusive(c);
	if (r == 0) {
		/* held past its bound (-ETIMEDOUT): the stop goes on
		 * unserialized; no lock here at all (1): info says so */
		r = cpuhog_i_stop_lock(c->stop_timeout_ns, &o->lock_waited);
		o->serialized = r == 0;
		o->lock_waited_out = r == -ETIMEDOUT;
		if (o->lock_waited)
			COUNT_UP(&c->stop_lock_waits);
		if (r == 1)
			SET(&c->stop->serialized, false);
		r = 0;
	}
	c->stop->fn = fn;
	c->stop->data = data;
	for (r = r < 0 ? r : -EAGAIN; r == -EAGAIN && o->tries < STOP_TRIES;) {
		if (o->tries) { /* the set changed: read where we may go anew */
			c->reach_fresh = false;
			s = pick(c, setsize, cpus, two, cpu1, cpu2);
		}
		r = s ? stop_once(c, s, !cpus && !two, o) : -ENOENT;
		if (o->rep && s)
			cpuhog_i_stop_report_try(s, o);
	}
	if (o->serialized)
		cpuhog_i_stop_unlock();
	o->ret = r == -EAGAIN ? -ENOENT : r;
	if (o->rep) { /* the CPUs are let go: now /proc, where it failed */
		cpuhog_i_stop_report_end(c, o, o->ret);
		cpuhog_i_stop_report_arm(c, NULL, false);
	}
	cpuhog_i_multi_unlock(c);
	cpuhog_i_call_leave();
	return o->ret;
}

int cpuhog_i_stop_outcome(cpuhog_fn_t fn, void *data, size_t setsize,
			  const cpu_set_t *cpus, bool two, unsigned int cpu1,
			  unsigned int cpu2, struct stop_outcome *o)
{
	return cpuhog_i_stop_report(fn, data, setsize, cpus, two, cpu1, cpu2,
				    o, NULL);
}

/* The four calls, between two probes (@two: stop_two_cpus). */
static int stop_probed(cpuhog_fn_t fn, void *data, size_t setsize,
		       const cpu_set_t *cpus, bool two, unsigned int cpu1,
		       unsigned int cpu2, struct cpuhog_report *rep)
{
	struct stop_outcome o;
	int r;

	PROBE3(stop_entry, fn, two, rep != NULL);
	r = cpuhog_i_stop_report(fn, data, setsize, cpus, two, cpu1, cpu2, &o,
				 rep);
	PROBE3(stop_return, r, o.tries, o.released);
	return r;
}

int stop_machine(cpuhog_fn_t fn, void *data, size_t setsize,
		 const cpu_set_t *cpus)
{
	return stop_probed(fn, data, setsize, cpus, false, 0, 0, NULL);
}

int stop_two_cpus(unsigned int cpu1, unsigned int cpu2, cpuhog_fn_t fn,
		  void *arg)
{
	return stop_probed(fn, arg, 0, NULL, true, cpu1, cpu2, NULL);
}

int stop_machine_report(cpuhog_fn_t fn, void *data, size_t setsize,
			const cpu_set_t *cpus, struct cpuhog_report *rep)
{
	return stop_probed(fn, data, setsize, cpus, false, 0, 0, rep);
}

int stop_two_cpus_report(unsigned int cpu1, unsigned int cpu2, cpuhog_fn_t fn,
			 void *arg, struct cpuhog_report *rep)
{
	return stop_probed(fn, arg, 0, NULL, true, cpu1, cpu2, rep);
}
