/* SPDX-License-Identifier: MIT */
/*
 * stop_machine() and stop_two_cpus() on the hogs.
 *
 * Every hog taking part runs stop_cpu(), which walks one state machine;
 * in each phase the count says how many hogs are still to come, and the
 * last one moves everyone on:
 *
 *   PREPARE   each hog arrives, or declines: it is off its CPU, which
 *             went offline (or left the cpuset), so nothing of ours can
 *             run there anyway.  Early arrivals spin briefly, then sleep:
 *             the caller may still be queueing, perhaps on the very CPU
 *             of an early hog, and must not be starved by it.
 *   HOLD      every hog that arrived spins on its CPU and acknowledges.
 *             From the last acknowledgement on, every CPU is held.
 *   CHECK     every held hog, having seen HOLD end, says it is still on
 *             its own CPU (sched_getcpu(), no system call).  No back-off
 *             here: every hog was spinning on its CPU when HOLD ended,
 *             so no thread at our priority can be queued behind one of
 *             them, and only the kernel (its stopper, RT throttling) or
 *             a hypervisor keeps one from answering.  A hog moved
 *             after its acknowledgement (a cpuset change, a CPU going
 *             offline: the kernel's stopper outranks us) gives up with
 *             NOCPU, or, queued behind a hog on the CPU it was moved to,
 *             is found lost by that hog's look.  So RUN begins only with
 *             every CPU held where it was asked.
 *   RUN       fn runs on the CPUs asked for; the others spin.  A hog
 *             that runs fn checks its CPU once more just before: moved
 *             in the microseconds since CHECK, it leaves fn alone, and
 *             the call says fn ran nowhere (-ENOENT) or, fn having run
 *             on other CPUs of the set, only on some (-EINTR).
 *   EXIT      every hog serializes its core and leaves.
 *   TIMEDOUT  the deadline passed before RUN: fn ran nowhere.  The
 *             deadline is stop_timeout_ns after the call began or after
 *             the latest step a hog made, whichever is later: its
 *             arrival, its first hold, its check (each hog makes each
 *             once).  A stop gives up when no CPU moved on for that long,
 *             not when many CPUs came slowly (an overcommitted VM runs
 *             its vCPUs late: at 8 emulated vCPUs on 2 host CPUs bringing
 *             all in took 75-440 ms, and holding and checking them all
 *             as long again).  Nor does a hog give up before the
 *             caller has woken every hog: the deadline counts from the
 *             last wake (at 32 vCPUs on 2 host CPUs, a caller not run
 *             half-way through its wakes timed stops out).  A waiter run
 *             late is not given grace: in HOLD that waiter is a spinning
 *             hog that RT throttling stopped, and grace kept the others
 *             spinning until a canary was 930 ms late.
 *   NOCPU     a CPU that had to take part declined, or none arrived, or
 *             a held CPU left before RUN: fn ran nowhere.
 *
 * How many hogs ran fn is counted (fn_runs), and the caller compares it
 * with how many were to: a count, not the phase alone, says where fn ran.
 *
 * (The kernel's DISABLE_IRQ phase has no user-space counterpart; hogs
 * run with every signal blocked throughout, which is the nearest thing.)
 *
 * The phase, the count and the call's generation share one 64-bit word,
 * and every transition is a CAS on it: HOLD -> RUN and {PREPARE, HOLD} ->
 * TIMEDOUT/NOCPU cannot both happen.  The caller reads the outcome from
 * that word alone: fn ran iff the word reached EXIT.
 *
 * On more CPUs than the fan-in k, each hog's once-per-call passes (its
 * arrival, first acknowledgement, check, return from RUN) go up a
 * combining tree (rendezvous.c, arrive()), and the word counts only the
 * tree's top nodes: it is written once per phase, and read by all.  A
 * back-off in HOLD withdraws and acknowledges again on the word itself,
 * so the word's count in HOLD is the top nodes not yet emptied plus the
 * hogs stepped aside: it reaches 0 only while every hog is present.  A
 * call in which a CPU declined counts its later phases on the word (the
 * hogs holding), as a call on k CPUs or fewer always does.
 *
 * How many hogs declined, and whether one that had to did, is a second
 * word tagged with the generation (the tally), so that a hog of an
 * abandoned call that runs at last cannot count itself into a later one;
 * a hog that holds only reads it.
 * A hog reads nothing of the caller's but these tagged words and its own
 * slot: a stale one touches nothing that the next call writes.
 *
 * What "held" means, and its limits.  A hog that spins in HOLD, RUN or
 * EXIT looks around once a millisecond: it records its own heartbeat, and
 * for any held hog whose heartbeat is older than that, asks the kernel
 * whether it is still pinned to its CPU.  One that is not (its CPU is
 * going offline or left the cpuset, and the kernel has moved or will move
 * it, possibly onto our CPU behind us at our priority) means the hold is
 * lost: before RUN the stop gives up (NOCPU); in RUN and EXIT the hogs
 * stop spinning and sleep until the phase moves, so that the moved hog
 * can run.  The same happens when fn runs longer than overrun_ns: a fn
 * that blocks on something a held CPU's thread owns would otherwise spin
 * the others until RT throttling, or for ever without it.  Both count in
 * holds_released.  While every CPU taking part stays, and fn returns in
 * time, nothing below the hogs' priority and nothing of ours runs on a
 * held CPU: the hogs never yield.
 *
 * Why it cannot deadlock: a hog waits in PREPARE and HOLD only until the
 * deadline, and in PREPARE it sleeps, so whatever it waits for can run.
 * In RUN and EXIT it waits only for hogs that acknowledged HOLD, each
 * spinning or running fn on its own CPU at top priority, and the hold
 * limits above bound even that.  In HOLD, a hog that has waited about
 * LOOK_NS withdraws its acknowledgement and yields (naps, once HOLD
 * lasted 10 ms), so that whatever the hog we wait for is queued behind
 * (another process's hog in a stop of its own, or a moved hog) can run.
 * Rendezvous works of two calls are never interleaved on two CPUs in
 * opposite orders: one multi-CPU call at a time is queued and waited for
 * (multi_lock).
 *
 * Nothing here allocates, creates threads or does I/O.
 *
 * tests/model/stop.pml (flat) and tests/model/tree.pml (the tree) model
 * this rendezvous for spin, in make check.
 *
 * Kernel entries of a stop on 2 CPUs (tests/test_entries.c), 1 + 4: the
 * caller's one wake, of its own CPU's hog, which wakes the other (its
 * hog preempts it until its part is done; then it spins, if need be, for
 * the other's, and sleeps on the group word only past the spin);
 * each hog's futex wait, and where fn runs its signal check (the sleep
 * check reads only if fn was switched out: switches.c).  In poll mode
 * the other hog's wake is its poller's (1 + 3).  The hogs spin through
 * the phases with no system call; a back-off in HOLD costs a yield (see
 * back_off()), a look at a quiet hog a sched_getaffinity().
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>

enum {
	PH_PREPARE = 1,
	PH_HOLD,
	PH_CHECK,
	PH_RUN,
	PH_EXIT,
	PH_TIMEDOUT, /* from here on: abandoned, fn ran nowhere */
	PH_NOCPU,
};

#define WORD(gen, ph, n) ((uint64_t)(gen) << 32 | (uint64_t)(ph) << 24 | (n))
#define GEN(v) ((uint32_t)((v) >> 32))
#define PHASE(v) ((unsigned int)((v) >> 24) & 0xff)
#define COUNT(v) ((uint32_t)(v)&0xffffff)

/* The tally: gen:32 | a needed CPU declined:1 | hogs declining:31. */
#define T_GONE (1u << 31)
#define T_DECL(t) ((uint32_t)(t) & ~T_GONE)

#define LOOK_NS 1000000u /* how often a spinning hog looks around */

static uint64_t load_word(struct stop_state *st)
{
	/* acquire: what the hogs did before the transition we observe */
	return atomic_load_explicit(&st->word, memory_order_acquire);
}

static uint64_t relaxed(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

static uint32_t relaxed32(_Atomic uint32_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

/* Whether the tally @t (final after PREPARE) leaves the call's later
 * phases to the tree: more hogs than the fan-in, and none declined (a
 * call with declines, rare, counts them on the word, flat). */
static bool tree_after_prepare(struct stop_state *st, uint64_t t)
{
	return relaxed32(&st->n) > relaxed32(&st->k) && T_DECL(t) == 0;
}

/* Hogs holding, by the tally @t: the call's hogs, less the declines. */
static uint32_t held_of(struct stop_state *st, uint64_t t)
{
	return relaxed32(&st->n) - T_DECL(t);
}

/* What the word counts in HOLD, CHECK and RUN: the tree's top nodes, or
 * every hog holding. */
static uint32_t next_count(struct stop_state *st, uint64_t t)
{
	if (tree_after_prepare(st, t))
		return rdv_top(relaxed32(&st->n), relaxed32(&st->k));
	return held_of(st, t);
}

/*
 * Sleep while the word is still @v (or until @deadline).  With
 * transition()'s CAS, increment and load of sleepers this is Dekker's
 * pattern, all seq_cst: either the waker sees us counted and wakes us, or
 * we see its new word and do not sleep.
 */
static void sleep_on_word(struct stop_state *st, uint64_t v, uint64_t deadline)
{
	uint32_t w = atomic_load(&st->wake);

	atomic_fetch_add(&st->sleepers, 1);
	if (atomic_load(&st->word) == v)
		futex_wait(&st->wake, w, deadline);
	atomic_fetch_sub(&st->sleepers, 1);
}

static bool transition(struct stop_state *st, uint64_t v, uint64_t nv)
{
	/* seq_cst (acq_rel at least): what each hog did in the phase it
	 * leaves (fn's effects, the tally, the return value) is seen by all
	 * in the next; seq_cst also for sleep_on_word() */
	if (!atomic_compare_exchange_strong(&st->word, &v, nv))
		return false;
	if (PHASE(v) == PHASE(nv))
		return true; /* a count: nobody sleeps on those */
	atomic_fetch_add(&st->wake, 1);
	if (atomic_load(&st->sleepers))
		futex_wake(&st->wake, INT_MAX);
	if (PHASE(nv) >= PH_TIMEDOUT)
		group_kick(&st->ctx->group); /* the caller may sleep */
	return true;
}

/* A wait that finds the deadline passed at @t: count it if it looks more
 * than LOOK_NS late (cpuhog_info.late_waits). */
static void note_late(struct stop_state *st, uint64_t t)
{
	uint64_t d = relaxed(&st->deadline);

	if (d != NO_DEADLINE && t > d + LOOK_NS)
		atomic_fetch_add_explicit(&st->ctx->late_waits, 1,
					  memory_order_relaxed);
}

/* Give call @gen up as @why, unless fn was already let run. */
static void abandon(struct stop_state *st, uint32_t gen, unsigned int why)
{
	uint64_t v = load_word(st);

	/* loop: a count that moved under us is no reason to keep going */
	while (GEN(v) == gen &&
	       PHASE(v) >= PH_PREPARE && PHASE(v) <= PH_CHECK &&
	       !transition(st, v, WORD(gen, why, 0)))
		v = load_word(st);
}

/* Count a decline into call @gen's tally (@gone: the CPU was needed); a
 * hog that holds only reads it, so that N arrivals do not all write one
 * line.  false: the call is not @gen any more. */
static bool tally(struct stop_state *st, uint32_t gen, bool hold, bool gone)
{
	uint64_t t = relaxed(&st->tally), nt;

	if (hold)
		return GEN(t) == gen;
	do {
		if (GEN(t) != gen)
			return false;
		nt = (t + 1) | (gone ? T_GONE : 0);
		/* release: before our arrival, which the last one reads */
	} while (!atomic_compare_exchange_weak_explicit(
		&st->tally, &t, nt, memory_order_release, memory_order_relaxed));
	return true;
}

/* An arrival: the deadline is stop_timeout_ns from now, if that is later. */
static void extend(struct stop_state *st)
{
	uint64_t d = relaxed(&st->deadline);
	uint64_t nd = deadline_in(relaxed(&st->timeout_ns));

	/* relaxed: a time, read by hogs and the caller at their next look */
	while (d < nd && !atomic_compare_exchange_weak_explicit(
				 &st->deadline, &d, nd, memory_order_relaxed,
				 memory_order_relaxed))
		;
}

/* The last arrival's choice: HOLD with the holders counted, or NOCPU. */
static uint64_t after_prepare(struct stop_state *st, uint32_t gen)
{
	/* acquire: every tally made before the arrivals we follow */
	uint64_t t = atomic_load_explicit(&st->tally, memory_order_acquire);

	if ((t & T_GONE) || held_of(st, t) == 0)
		return WORD(gen, PH_NOCPU, 0);
	return WORD(gen, PH_HOLD, next_count(st, t));
}

/*
 * Count this hog through phase @ph of call @gen; the last one moves
 * everyone to the next phase.  false: the call is no longer in @ph (it
 * was abandoned, or is stale), or it moved to an abandoned phase.
 */
static bool pass(struct stop_state *st, uint32_t gen, unsigned int ph)
{
	uint64_t v = load_word(st), nv, t = ph == PH_CHECK ? now_ns() : 0;

	for (;;) {
		if (GEN(v) != gen || PHASE(v) != ph)
			return false;
		if (COUNT(v) > 1)
			nv = v - 1;
		else if (ph == PH_PREPARE)
			nv = after_prepare(st, gen);
		else if (ph == PH_HOLD || ph == PH_CHECK)
			nv = WORD(gen, ph + 1, next_count(st, relaxed(&st->tally)));
		else
			nv = WORD(gen, PH_EXIT, 0);
		if (transition(st, v, nv))
			break;
		v = load_word(st);
	}
	/* the time taken before the CAS: a hog that sees RUN and reads the
	 * clock afterwards never finds RUN begun after its own "now" */
	if (ph == PH_CHECK && PHASE(nv) == PH_RUN)
		atomic_store_explicit(&st->run_at, t, memory_order_relaxed);
	return PHASE(nv) < PH_TIMEDOUT;
}

/*
 * A pass of phase @ph that each hog makes once per call (its arrival,
 * first acknowledgement, check, return from RUN): up the combining tree
 * where the call has one (rendezvous.c), and on the word for the hog
 * that empties a top node.  true where this hog does not pass the word:
 * the word, which the hog waits on next, says how the call goes.
 */
static bool arrive(struct stop_state *st, struct hog *h, uint32_t gen,
		   unsigned int ph)
{
	struct rdv r = {
		.nodes = st->nodes,
		.word = &st->word,
		.n = relaxed32(&st->n),
		.k = relaxed32(&st->k),
	};

	if (ph != PH_PREPARE && !tree_after_prepare(st, relaxed(&st->tally)))
		r.n = 0; /* flat after a decline: the word counts the holders */
	if (!rdv_climb(&r, h->topo_pos, gen, ph))
		return true;
	return pass(st, gen, ph);
}

/* Whether the caller of call @gen has woken all its hogs. */
static bool all_woken(struct stop_state *st, uint32_t gen)
{
	/* acquire: pairs with stop_run()'s release, so the deadline read
	 * next is at least the one moved on after the last wake */
	return atomic_load_explicit(&st->woken, memory_order_acquire) == gen;
}

/* PREPARE: spin for a while, then sleep, until everyone has arrived. */
static bool await_arrivals(struct stop_state *st, uint32_t gen)
{
	uint64_t spin_end = deadline_in(relaxed(&st->spin_ns)), t, deadline;
	unsigned int k = 0;
	bool woken;

	for (;;) {
		uint64_t v = load_word(st);

		if (GEN(v) != gen || PHASE(v) >= PH_TIMEDOUT)
			return false;
		if (PHASE(v) > PH_PREPARE)
			return true;
		if ((++k & 15) != 0) {
			cpu_relax();
			continue;
		}
		t = now_ns(); /* every 16 turns: the deadline, then the spin */
		woken = all_woken(st, gen); /* before the deadline's read */
		deadline = relaxed(&st->deadline);
		if (t > deadline && !woken) {
			/* the caller, still waking hogs, was not run: the
			 * deadline counts from its last wake (stop_run()) */
			sleep_on_word(st, v, t + LOOK_NS);
		} else if (t > deadline) {
			note_late(st, t);
			abandon(st, gen, PH_TIMEDOUT);
		} else if (t < spin_end)
			cpu_relax();
		else
			sleep_on_word(st, v, deadline);
	}
}

/*
 * Note that call @gen's hold is released.  Only forward (in serial-number
 * order): a stale hog of an abandoned call, whose @gen is older, must not
 * overwrite a later call's note (the later one's holds_released would go
 * uncounted, and its hogs would each find the loss only at their next
 * look).  relaxed: a hint read at each look; the count is read after
 * RUN -> EXIT.
 */
static void release_hold(struct stop_state *st, uint32_t gen)
{
	uint32_t r = atomic_load_explicit(&st->released, memory_order_relaxed);

	while ((int32_t)(gen - r) > 0 &&
	       !atomic_compare_exchange_weak_explicit(&st->released, &r, gen,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/* Whether @x, held for @gen, has stopped looking around and is no longer
 * pinned to its CPU (the CPU is leaving, or left).  @h: who asks. */
static bool hog_lost(struct hog *h, struct hog *x, uint32_t gen, uint64_t now)
{
	if (x == h ||
	    atomic_load_explicit(&x->held_gen, memory_order_relaxed) != gen ||
	    now - atomic_load_explicit(&x->beat, memory_order_relaxed) <
		    LOOK_NS)
		return false;
	return !affine_only(x->tid, h->masksize, h->mask, x->cpu);
}

/*
 * Look around (once every LOOK_NS of spinning): whether the hold of call
 * @gen is lost.  Checks ourselves, then the held hogs that have been
 * quiet for as long; remembers a loss for the other hogs.
 */
static bool hold_lost(struct stop_state *st, struct hog *h, uint32_t gen,
		      uint64_t now)
{
	struct ctx *c = st->ctx;
	unsigned int i;

	atomic_store_explicit(&h->beat, now, memory_order_relaxed);
	if (atomic_load_explicit(&st->released, memory_order_relaxed) == gen)
		return true;
	for (i = 0; i < c->nr_hogs; i++)
		if (hog_lost(h, &c->hogs[i], gen, now))
			break;
	if (i == c->nr_hogs && pinned_to(h->masksize, h->mask, h->cpu))
		return false;
	release_hold(st, gen);
	return true;
}

/* fn has run past overrun_ns: the hold ends (see the note on top). */
static bool run_too_long(struct stop_state *st, uint32_t gen, uint64_t now)
{
	uint64_t at = atomic_load_explicit(&st->run_at, memory_order_relaxed);

	if (!at || now < at || now - at <= st->ctx->overrun_ns)
		return false;
	release_hold(st, gen);
	return true;
}

#define NAP_NS 200000u	    /* a back-off that naps */
#define NAP_AFTER_NS 10000000u  /* back-offs nap once HOLD lasted this, */
#define NAP_AFTER_MAX 100000000u /* or a quarter of the timeout, to this */

/*
 * HOLD has lasted a look: a hog we wait for cannot run.  It may be
 * queued behind a thread at our priority (another process's hog spinning
 * in a stop of its own, which in turn waits for a thread that we keep off
 * our CPU), or moved by a CPU going offline onto a CPU whose hog spins
 * here.  Let whatever it waits for run: withdraw our acknowledgement, so
 * that RUN cannot begin while we are away, step aside, and acknowledge
 * again.  Nothing was promised yet: fn has not started.
 *
 * Stepping aside is a yield at first: both threads above are at our
 * priority, so a yield lets them in, and with nobody there it returns at
 * once.  Only later (see struct pace), now and then a nap: nothing below
 * our priority can hold up a hog we wait for, but the threads on our CPU
 * must not wait for a long deadline.  Naps come late and seldom because
 * where a nap lasts milliseconds (vCPUs the host runs late) the hogs take
 * turns being away: with a nap at every look, every stop with all CPUs
 * present timed out at 4 emulated vCPUs; with a nap at every look after
 * 10 ms, 9 stops in 10 timed out at 8 (the hogs napped 400 times a stop,
 * and six or seven of eight were away at the deadline).
 *
 * The looks come at random, between half a pace and one and a half:
 * two processes' stops whose hogs looked at the same moments swapped
 * CPUs at each look and never met (fork_during_storm: 6 in 40 timed out
 * in HOLD, one hog short, with looks every LOOK_NS exactly).
 */
static uint64_t back_off(struct stop_state *st, uint32_t gen, bool nap)
{
	uint64_t v, t = now_ns();

	/* reload on failure: transition() takes the word by value, and a
	 * retry with the word it failed on failed for ever (a FIFO 99 hog
	 * spun here past every deadline, the hang of the poll soak and of
	 * every guest) */
	do {
		v = load_word(st);
		if (GEN(v) != gen || PHASE(v) != PH_HOLD)
			return 0;
	} while (!transition(st, v, v + 1));
	if (nap)
		nanosleep(&(struct timespec){ 0, NAP_NS }, NULL);
	else
		sched_yield();
	pass(st, gen, PH_HOLD);
	return now_ns() - t;
}

/* The time to the next look in HOLD: @every/2 to 3*@every/2, at random
 * (xorshift32; the hog's own state, seeded with its tid). */
static uint64_t jitter(struct hog *h, uint64_t every)
{
	uint32_t x = h->rng ? h->rng : (uint32_t)h->tid | 1;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	h->rng = x;
	return every / 2 + x % every;
}

static uint64_t clamp(uint64_t x, uint64_t lo, uint64_t hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/*
 * A held hog's pace in HOLD: it looks (and backs off) about every
 * @every, which is as long as the arrivals took, 1 to 16 ms: where the
 * CPUs come slowly (vCPUs the host runs late), frequent back-offs keep
 * the last of them from finding everyone present (at 8 vCPUs on 2 host
 * CPUs, with 1 ms looks, stops timed out after 300 to 500 back-offs with
 * three to seven of the eight hogs away); on a live machine the
 * arrivals take microseconds and a stop wedged by another process's is
 * freed within a millisecond.  From @nap_at on, a quarter of the timeout
 * (10 to 100 ms) after HOLD began, one back-off in four naps: a nap at
 * each look made most hogs away at any time where a 200 us nap lasts
 * milliseconds, and stops timed out with half the hogs napping (8
 * emulated vCPUs).
 *
 * And whatever a back-off costs here, the hogs of a stop are away, all
 * together, at most a quarter of the time: a hog backs off only while
 * its own time away (@away) is at most 1/(4n) of its time in HOLD, n
 * the hogs holding.  So at any moment a quarter of a hog is away, by
 * expectation, on a machine of any size, and the last to arrive finds
 * the others present.  On a live machine a yield or a nap costs what it
 * says, and the budget never binds; where the host runs vCPUs late, a
 * hog that loses its vCPU while away is away for tens of milliseconds
 * and then waits n times as long before it steps aside again (at 64
 * emulated vCPUs on 2 host CPUs, without the budget, stops gave up
 * after 6.4 s in HOLD, with hogs napping at every fourth look).
 */
struct pace {
	uint64_t every, nap_at;
	uint64_t since, away; /* when HOLD began here; time backed off */
	unsigned int n;	      /* hogs holding */
	unsigned int backoffs; /* after nap_at: every fourth one naps */
};

static struct pace pace_of(struct stop_state *st)
{
	uint64_t t = now_ns(), begun = relaxed(&st->begun);
	uint64_t q = relaxed(&st->timeout_ns) / 4;
	/* relaxed: every arrival is in, after PREPARE -> HOLD (acquired) */
	uint32_t n = held_of(st, relaxed(&st->tally));

	return (struct pace){
		.every = clamp(t > begun ? t - begun : 0, LOOK_NS,
			       16 * LOOK_NS),
		.nap_at = t + clamp(q, NAP_AFTER_NS, NAP_AFTER_MAX),
		.since = t,
		.n = n ? n : 1,
	};
}

/* A look in HOLD: back off, if this hog's share of time away allows. */
static void hold_look(struct stop_state *st, uint32_t gen, struct pace *p,
		      uint64_t t)
{
	if (p->away * 4 * p->n > t - p->since)
		return;
	p->away += back_off(st, gen,
			    t > p->nap_at && (++p->backoffs & 3) == 0);
}

/*
 * Spin until the phase passes @ph (HOLD, CHECK or RUN).  Before RUN, give
 * up at the deadline or when the hold is lost, and back off now and then;
 * later, sleep instead of spinning once the hold is lost or fn overran.
 */
static bool await_phase(struct stop_state *st, struct hog *h, uint32_t gen,
			unsigned int ph, struct pace *p)
{
	uint64_t look = now_ns() + (ph == PH_HOLD ? p->every : LOOK_NS), t;
	unsigned int k = 0;
	bool asleep = false;

	for (;;) {
		uint64_t v = load_word(st);

		if (GEN(v) != gen || PHASE(v) >= PH_TIMEDOUT)
			return false;
		if (PHASE(v) > ph)
			return true;
		if (asleep) {
			sleep_on_word(st, v, NO_DEADLINE);
			continue;
		}
		cpu_relax();
		if ((++k & 63) != 0 || (t = now_ns()) < look)
			continue;
		look = t + (ph == PH_HOLD ? jitter(h, p->every) : LOOK_NS);
		if (ph < PH_RUN && t > relaxed(&st->deadline)) {
			note_late(st, t);
			abandon(st, gen, PH_TIMEDOUT);
		}
		else if (ph < PH_RUN && hold_lost(st, h, gen, t))
			abandon(st, gen, PH_NOCPU);
		else if (ph == PH_HOLD)
			hold_look(st, gen, p, t);
		else if (ph == PH_RUN) /* CHECK only looks */
			asleep = hold_lost(st, h, gen, t) ||
				 run_too_long(st, gen, t);
	}
}

/* Whether this hog is on its own CPU: sched_getcpu() reads what the
 * kernel wrote at our last return to user space (rseq, or the vDSO). */
static bool on_own_cpu(struct hog *h)
{
	return sched_getcpu() == (int)h->cpu;
}

/* CHECK: pass it from our own CPU only, else the stop gives up: fn would
 * have run where nobody asked. */
static bool check_in(struct stop_state *st, struct hog *h, uint32_t gen)
{
	if (!on_own_cpu(h)) {
		abandon(st, gen, PH_NOCPU);
		return false;
	}
	return arrive(st, h, gen, PH_CHECK);
}

/* Whether this hog is to run fn: asked to, or, for any one CPU, the
 * first to claim it (a hog moved off its CPU does not). */
static bool runs_fn(struct stop_state *st, struct hog *h)
{
	uint32_t zero = 0;

	if (!st->fn_one)
		return h->slot.flags & W_F_RUNS_FN;
	/* relaxed: the CHECK -> RUN transition already ordered everything;
	 * the load first, so that N hogs do not all write one line */
	return on_own_cpu(h) &&
	       !atomic_load_explicit(&st->fn_claimed, memory_order_relaxed) &&
	       atomic_compare_exchange_strong_explicit(
		       &st->fn_claimed, &zero, 1, memory_order_relaxed,
		       memory_order_relaxed);
}

static void call_fn(struct stop_state *st, struct hog *h)
{
	bool check = !(h->ctx->flags & CPUHOG_F_NO_CHECKS);
	struct check ck;
	int r, zero = 0;

	if (check)
		check_begin(h, &ck);
	/* the last look before fn: moved since CHECK, leave fn alone (the
	 * caller compares fn_runs with fn_want) */
	if (!on_own_cpu(h))
		return;
	r = st->fn(st->data);
	if (check)
		check_end(h, st->fn, &ck);
	/* moved while fn ran: the hold ended under fn (holds_released) */
	if (!on_own_cpu(h))
		release_hold(st, h->slot.gen);
	redirect_signals(h);
	/* relaxed: the RUN -> EXIT transition publishes both */
	atomic_fetch_add_explicit(&st->fn_runs, 1, memory_order_relaxed);
	if (r)
		atomic_compare_exchange_strong_explicit(&st->ret, &zero, r,
							memory_order_relaxed,
							memory_order_relaxed);
}

/* The callback every participating hog runs. */
static int stop_cpu(void *arg)
{
	struct stop_state *st = arg;
	struct hog *h = cpuhog_self;
	uint32_t gen = h->slot.gen;
	bool hold = !h->off_cpu;
	struct pace p;

	if (!tally(st, gen, hold, !hold && (h->slot.flags & W_F_NEEDED)))
		goto out;
	extend(st);
	if (!arrive(st, h, gen, PH_PREPARE) || !hold ||
	    !await_arrivals(st, gen))
		goto out;
	/* relaxed: others read it only with a heartbeat, as a hint whose
	 * check (pinned_to) is a system call of its own */
	atomic_store_explicit(&h->beat, now_ns(), memory_order_relaxed);
	atomic_store_explicit(&h->held_gen, gen, memory_order_relaxed);
	p = pace_of(st);
	/* each hog's first hold and its check are steps, as its arrival:
	 * the deadline moves on (extend()) */
	if (!arrive(st, h, gen, PH_HOLD) || (extend(st), false) ||
	    !await_phase(st, h, gen, PH_HOLD, &p) ||
	    !check_in(st, h, gen) || (extend(st), false) ||
	    !await_phase(st, h, gen, PH_CHECK, &p))
		goto out;
	if (runs_fn(st, h)) {
		call_fn(st, h);
		atomic_store_explicit(&h->beat, now_ns(), memory_order_relaxed);
	}
	arrive(st, h, gen, PH_RUN);
	await_phase(st, h, gen, PH_RUN, &p);
out:
	serialize_core(); /* code fn rewrote is safe to run from here on */
	return 0;
}

/* multi_wait()'s poll: end the wait once abandoned; at the deadline,
 * wait on if an arrival moved it, else abandon, unless fn is already
 * running (then wait for ever: the hold limits bound fn). */
static int stop_poll(struct ctx *c, bool timed_out, uint64_t *deadline)
{
	struct stop_state *st = c->stop;
	uint64_t v = load_word(st), d = relaxed(&st->deadline);

	if (timed_out && d > now_ns()) {
		*deadline = d;
	} else if (timed_out) {
		note_late(st, now_ns());
		abandon(st, GEN(v), PH_TIMEDOUT);
		v = load_word(st);
		*deadline = NO_DEADLINE;
	}
	return PHASE(v) >= PH_TIMEDOUT ? -ECANCELED : 0;
}

/* After the wait: fn ran iff the word reached EXIT. */
static int stop_outcome(struct ctx *c, uint32_t gen)
{
	struct stop_state *st = c->stop;
	uint64_t v = load_word(st);

	/* relaxed: RUN -> EXIT, which we acquired, published it */
	uint32_t runs = atomic_load_explicit(&st->fn_runs, memory_order_relaxed);

	if (GEN(v) == gen && PHASE(v) == PH_EXIT && runs != st->fn_want) {
		/* a hog moved after CHECK left fn alone */
		atomic_fetch_add_explicit(&c->stop_misses, 1,
					  memory_order_relaxed);
		return runs ? -EINTR : -ENOENT;
	}
	if (GEN(v) == gen && PHASE(v) == PH_EXIT) {
		atomic_fetch_add_explicit(&c->stops, 1, memory_order_relaxed);
		if (atomic_load_explicit(&st->released,
					 memory_order_relaxed) == gen)
			atomic_fetch_add_explicit(&c->holds_released, 1,
						  memory_order_relaxed);
		/* relaxed: RUN -> EXIT, which we acquired, published it */
		return atomic_load_explicit(&st->ret, memory_order_relaxed);
	}
	if (PHASE(v) == PH_NOCPU)
		return -ENOENT;
	atomic_fetch_add_explicit(&c->stop_timeouts, 1, memory_order_relaxed);
	return -ETIMEDOUT;
}

static unsigned int fn_count(struct ctx *c, unsigned int n)
{
	unsigned int i, k = 0;

	for (i = 0; i < n; i++)
		k += !!(c->mflags[i] & W_F_RUNS_FN);
	return k;
}

/* Run the stop on the @n hogs in c->msel; c->mflags are set. */
static int stop_run(struct ctx *c, unsigned int n, cpuhog_fn_t fn, void *data,
		    bool fn_one)
{
	struct stop_state *st = c->stop;
	uint64_t deadline = deadline_in(c->stop_timeout_ns);
	int64_t gen = multi_reserve(c, n, deadline);
	unsigned int k;

	if (gen < 0) {
		atomic_fetch_add_explicit(&c->stop_timeouts, 1,
					  memory_order_relaxed);
		return (int)gen;
	}
	st->fn = fn;
	st->data = data;
	st->fn_one = fn_one;
	st->fn_want = fn_one ? 1 : fn_count(c, n);
	atomic_store_explicit(&st->fn_runs, 0, memory_order_relaxed);
	/* relaxed, all: multi_push()'s seq_cst pushes publish them */
	atomic_store_explicit(&st->deadline, deadline, memory_order_relaxed);
	atomic_store_explicit(&st->timeout_ns, c->stop_timeout_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&st->begun, now_ns(), memory_order_relaxed);
	atomic_store_explicit(&st->spin_ns, c->spin_ns, memory_order_relaxed);
	atomic_store_explicit(&st->fn_claimed, 0, memory_order_relaxed);
	atomic_store_explicit(&st->ret, 0, memory_order_relaxed);
	atomic_store_explicit(&st->run_at, 0, memory_order_relaxed);
	atomic_store_explicit(&st->tally, (uint64_t)gen << 32,
			      memory_order_relaxed);
	/* a tree only for a call on every hog, in topology order (each
	 * hog's topo_pos): stop_machine(); k >= 2 keeps stop_two_cpus()
	 * flat */
	k = c->fanout < 2 ? 2 : c->fanout;
	if (n > k && (n != c->nr_hogs || c->msel[0] != c->by_topo[0]))
		k = n;
	atomic_store_explicit(&st->n, n, memory_order_relaxed);
	atomic_store_explicit(&st->k, k, memory_order_relaxed);
	atomic_store_explicit(&st->word, WORD(gen, PH_PREPARE, rdv_top(n, k)),
			      memory_order_relaxed);
	multi_push(c, n, (uint32_t)gen, stop_cpu, st, W_F_INTERNAL);
	/* the deadline counts from the last wake: at 32 vCPUs a caller not
	 * run half-way through its wakes timed stops out while the hogs it
	 * had woken waited, on time, for the ones it had not */
	extend(st);
	/* release: the moved deadline before it, for all_woken()'s acquire */
	atomic_store_explicit(&st->woken, (uint32_t)gen, memory_order_release);
	multi_wait(c, deadline, stop_poll);
	serialize_core();
	return stop_outcome(c, (uint32_t)gen);
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
	c = call_enter(err);
	if (!c)
		return NULL;
	multi_lock(c, false);
	return c;
}

/*
 * The hogs a stop_machine() holds, into c->msel in the wake tree's order:
 * those whose CPUs can be had, and, where an explicit set left CPUs out,
 * only within where our threads may go (reach(), which tells of a CPU
 * gone before its hog can).  *gap: a thread
 * of ours may run on a CPU that has no hog.
 */
static unsigned int stop_select(struct ctx *c, bool *gap)
{
	size_t sz = c->stop->masksize;
	unsigned int i, m = 0, n = multi_select(c, sz, c->possible);

	*gap = uncovered(c);
	for (i = 0; i < n; i++)
		if (!c->partial || CPU_ISSET_S(c->msel[i]->cpu, sz, reach(c)))
			c->msel[m++] = c->msel[i];
	return m;
}

/* Whether every CPU fn is asked to run on is among the @n held. */
static bool fn_cpus_held(struct ctx *c, unsigned int n)
{
	struct stop_state *st = c->stop;
	unsigned int i, want = (unsigned int)CPU_COUNT_S(st->masksize,
							 st->fn_mask);

	for (i = 0; i < n; i++)
		want -= CPU_ISSET_S(c->msel[i]->cpu, st->masksize, st->fn_mask);
	return want == 0;
}

static void stop_leave(struct ctx *c)
{
	multi_unlock(c);
	call_leave();
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
		if (cpu >= c->nr_cpu_ids || !c->by_cpu[cpu] ||
		    !hog_usable(c, c->by_cpu[cpu]))
			return -ENOENT;
		CPU_SET_S(cpu, st->masksize, st->fn_mask);
		n++;
	}
	return n ? 0 : -ENOENT;
}

int stop_machine(cpuhog_fn_t fn, void *data, size_t setsize,
		 const cpu_set_t *cpus)
{
	struct stop_state *st;
	unsigned int i, n;
	struct ctx *c;
	bool gap;
	int r;

	c = stop_enter(fn, &r);
	if (!c)
		return r;
	st = c->stop;
	CPU_ZERO_S(st->masksize, st->fn_mask);
	r = cpus ? set_fn_mask(c, setsize, cpus) : 0;
	n = r ? 0 : stop_select(c, &gap);
	if (r == 0)
		r = !n || !fn_cpus_held(c, n) ? -ENOENT
		    : gap && !(c->flags & CPUHOG_F_WEAK) ? -EPERM
							 : call_exclusive(c);
	if (r == 0) {
		for (i = 0; i < n; i++) {
			bool f = cpus && CPU_ISSET_S(c->msel[i]->cpu,
						     st->masksize, st->fn_mask);

			c->mflags[i] = f ? W_F_RUNS_FN | W_F_NEEDED : 0;
		}
		r = stop_run(c, n, fn, data, !cpus);
	}
	stop_leave(c);
	return r;
}

int stop_two_cpus(unsigned int cpu1, unsigned int cpu2, cpuhog_fn_t fn,
		  void *arg)
{
	struct hog *h1, *h2;
	struct ctx *c;
	int r;

	if (cpu1 == cpu2 && fn)
		return -EINVAL;
	c = stop_enter(fn, &r);
	if (!c)
		return r;
	h1 = hog_of(c, cpu1);
	h2 = hog_of(c, cpu2);
	r = h1 && h2 && hog_usable(c, h1) && hog_usable(c, h2)
		    ? call_exclusive(c)
		    : -ENOENT;
	if (r == 0) {
		/* CPU order, like every multi-CPU call; both needed */
		bool first = cpu1 < cpu2;

		c->msel[0] = first ? h1 : h2;
		c->msel[1] = first ? h2 : h1;
		c->mflags[0] = W_F_NEEDED | (first ? W_F_RUNS_FN : 0);
		c->mflags[1] = W_F_NEEDED | (first ? 0 : W_F_RUNS_FN);
		r = stop_run(c, 2, fn, arg, false);
	}
	stop_leave(c);
	return r;
}
