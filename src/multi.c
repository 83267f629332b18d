/* SPDX-License-Identifier: MIT */
/*
 * Multi-CPU calls: hog_cpus() and its variants, and what stop_machine()
 * and stop_two_cpus() share with them: the call's selection (struct sel),
 * reserve, push and wait.  One multi-CPU call at a time (multi_lock, held
 * for the whole call): no two calls queued in opposite orders on two CPUs
 * can deadlock their rendezvous, and each hog keeps one preallocated work
 * (its slot) for these calls, so none allocates.  The caller wakes one
 * hog (a stop: two) and the hogs the rest (wake.c); it sleeps once if the
 * call outlasts its spin, and once more, then wakes the late hogs, if it
 * outlasts RESCUE_NS (tests/test_entries.c counts the kernel entries).
 */
#include "internal.h"
#include "outcome.h"
#include "probes.h"

#include <errno.h>

#define BACKOFF_NS 1000000u       /* a back-off while a CPU is away */
#define BACKOFF_EVERY_NS 4000000u /* at most once per this (one tick) */
#define TRANSIT_NS 4000000u       /* a back-off while one is in transit */
#define TRANSIT_CHECK_NS 5000000u /* how often sysfs is read for that */
#define RESCUE_NS 1000000u        /* a call pending this long: rescue() */

/* Whether a CPU whose hog is away is still online and in the hog's mask:
 * a hotplug under way, which waits for the kernel's threads (a CPU out of
 * the cpuset is gone from the mask, and no hotplug waits on it). */
static bool in_transit(struct ctx *c, uint64_t now)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	unsigned int i;

	if (now - c->transit_at < TRANSIT_CHECK_NS)
		return c->transit;
	c->transit_at = now;
	c->transit = false;
	if (cpuhog_i_read_cpulist("/sys/devices/system/cpu/online", sz,
				  c->mscratch) <= 0)
		return false;
	for (i = 0; i < c->nr_hogs && !c->transit; i++) {
		struct hog *h = &c->hogs[i];

		if (atomic_load_explicit(&h->away, memory_order_relaxed) &&
		    CPU_ISSET_S(h->cpu, sz, c->mscratch) &&
		    cpuhog_i_mask_allows(h->status_fd, sz, c->mscratch2,
					 h->cpu))
			c->transit = true;
	}
	return c->transit;
}

/* While a CPU is away, back-to-back calls crowd the CPUs left and can
 * starve the kernel's threads an offline waits for: nap, holding the lock,
 * after each call while one is in transit, and once a tick while away. */
void cpuhog_i_multi_unlock(struct ctx *c)
{
	uint64_t now = 0;
	unsigned int i;

	for (i = 0; i < c->nr_hogs && !now; i++)
		if (atomic_load_explicit(&c->hogs[i].away,
					 memory_order_relaxed))
			now = cpuhog_i_now_ns();
	if (now && in_transit(c, now)) {
		atomic_fetch_add_explicit(&c->transit_naps, 1,
					  memory_order_relaxed);
		nanosleep(&(struct timespec){ 0, TRANSIT_NS }, NULL);
	} else if (now && now >= c->backoff_at) {
		nanosleep(&(struct timespec){ 0, BACKOFF_NS }, NULL);
		c->backoff_at = now + BACKOFF_EVERY_NS;
	}
	pthread_mutex_unlock(&c->multi_lock);
}

int cpuhog_i_multi_lock(struct ctx *c, bool try)
{
	int r = try ? pthread_mutex_trylock(&c->multi_lock)
		    : pthread_mutex_lock(&c->multi_lock);

	if (r == EBUSY)
		return -EAGAIN;
	c->reach_fresh = false; /* cpuhog_i_reach() reads anew in each call */
	return -r;
}

/* Where a thread of ours may run now: the watcher's affinity, widened and
 * read back at most once a call (the kernel bounds it by the cpuset and
 * the active CPUs), as a mask set once would not follow the machine. */
const cpu_set_t *cpuhog_i_reach(struct ctx *c)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);

	if (c->reach_fresh)
		return c->reach_set;
	sched_setaffinity(c->watch_tid, sz, c->possible);
	CPU_ZERO_S(sz, c->reach_set);
	if (sched_getaffinity(c->watch_tid, sz, c->reach_set) < 0)
		CPU_ZERO_S(sz, c->reach_set);
	c->reach_fresh = true;
	return c->reach_set;
}

/* Whether @h's CPU can be used now: a hog away is left alone until its
 * CPU is back in reach, as its work would be refused, and waking it in an
 * offline would crowd a surviving CPU. */
bool cpuhog_i_hog_usable(struct ctx *c, struct hog *h)
{
	return !atomic_load_explicit(&h->away, memory_order_relaxed) ||
	       CPU_ISSET_S(h->cpu, CPU_ALLOC_SIZE(c->nr_cpu_ids),
			   cpuhog_i_reach(c));
}

/* Whether a thread of ours may run on a CPU that has no hog: only where
 * an explicit set left CPUs out (c->partial).  Under multi_lock. */
bool cpuhog_i_uncovered(struct ctx *c)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	unsigned int cpu;

	if (!c->partial)
		return false;
	for (cpu = 0; cpu < c->nr_cpu_ids; cpu++)
		if (CPU_ISSET_S(cpu, sz, cpuhog_i_reach(c)) && !c->by_cpu[cpu])
			return true;
	return false;
}

/* The call's selection, empty (under multi_lock): see struct sel. */
struct sel *cpuhog_i_multi_sel(struct ctx *c)
{
	c->sel.n = 0;
	return &c->sel;
}

/* The hogs of @cpus whose CPUs are usable, in topology order. */
static struct sel *select_hogs(struct ctx *c, size_t setsize,
			       const cpu_set_t *cpus)
{
	struct sel *s = cpuhog_i_multi_sel(c);
	size_t bits = setsize * 8;
	unsigned int i;

	for (i = 0; i < c->nr_hogs; i++) {
		struct hog *h = c->by_topo[i];

		if (h->cpu < bits && CPU_ISSET_S(h->cpu, setsize, cpus) &&
		    cpuhog_i_hog_usable(c, h))
			cpuhog_i_sel_add(s, h, 0);
	}
	return s;
}

/* A try's selection, in topology order: every usable hog (with
 * CPUHOG_CPUS left partial, only where our threads may go:
 * cpuhog_i_reach()), fn on those of @cpus (NULL: any one); or, @two,
 * @cpu1's (fn) and @cpu2's.  NULL: a CPU that must take part has no
 * usable hog, or @cpus is empty. */
struct sel *cpuhog_i_stop_select(struct ctx *c, size_t setsize,
				 const cpu_set_t *cpus, bool two,
				 unsigned int cpu1, unsigned int cpu2)
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

/* Reserve the slots of @s (one may be queued still from a stop that gave
 * up): the call's generation, never 0, or -ETIMEDOUT at @deadline.  Every
 * slot is free before the generation comes round, lest a stale hog take a
 * later call of its generation for its own. */
int64_t cpuhog_i_multi_reserve(struct ctx *c, const struct sel *s,
			       uint64_t deadline)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		if (cpuhog_i_slot_wait_free(&s->hog[i]->slot, deadline) < 0)
			return -ETIMEDOUT;
	for (i = 0; c->multi_gen == UINT32_MAX && i < c->nr_hogs; i++)
		if (cpuhog_i_slot_wait_free(&c->hogs[i].slot, deadline) < 0)
			return -ETIMEDOUT;
	if (++c->multi_gen == 0) { /* round: no tag of a past call stays */
		c->multi_gen = 1;
		for (i = 0; i < c->nr_hogs; i++) {
			atomic_store(&c->hogs[i].st.held_gen, 0);
			atomic_store(&c->hogs[i].st.ran_gen, 0);
		}
	}
	return c->multi_gen;
}

/* Queue fn(arg) on the hogs of @s under @gen, with @flags and each hog's
 * own, children before parents; returns the tree's root, for the caller
 * to wake (wake.c). */
struct hog *cpuhog_i_multi_push(struct ctx *c, struct sel *s, uint32_t gen,
				cpuhog_fn_t fn, void *arg, uint32_t flags)
{
	struct hog *root = cpuhog_i_wake_plan(c, s);
	unsigned int i;

	/* relaxed: the pushes below release it to the hogs; stale hogs
	 * only compare it in a CAS */
	atomic_store_explicit(&c->group.word, (uint64_t)gen << 32 | s->n,
			      memory_order_relaxed);
	for (i = s->n; i-- > 0;) { /* reverse plan order: see wake.c */
		struct work *w = &s->hog[i]->slot;

		w->fn = fn;
		w->arg = arg;
		w->group = &c->group;
		w->gen = gen;
		w->cpu = s->hog[i]->cpu;
		w->flags = flags | s->flags[i];
		/* relaxed: published by cpuhog_i_push_work()'s seq_cst push */
		atomic_store_explicit(&w->state, W_QUEUED,
				      memory_order_relaxed);
		cpuhog_i_push_work(s->hog[i], w);
	}
	/* a stop's remote wake first, to overlap the switch to our root */
	if (root && root->tree.nkids && (flags & W_F_INTERNAL) &&
	    (int)root->cpu == sched_getcpu())
		cpuhog_i_wake_hog(root->tree.kids[0]);
	return root;
}

static uint32_t pending(struct ctx *c)
{
	/* acquire: the results of the works counted so far */
	return (uint32_t)atomic_load_explicit(&c->group.word,
					      memory_order_acquire);
}

/* Spin only while our own CPU's hog has nothing left to do for us
 * (sched_getcpu()'s -1 has no hog). */
static bool spin_ok(struct ctx *c)
{
	struct hog *h = cpuhog_i_hog_of(c, (unsigned int)sched_getcpu());

	return !h || !cpuhog_i_slot_queued(h);
}

/* Wake the call's hogs still asleep on their queued slots, their parents
 * late (wake.c); a hog never sleeps on a slot it took. */
static void rescue(const struct sel *s)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		if (cpuhog_i_slot_queued(s->hog[i]))
			cpuhog_i_wake_hog(s->hog[i]);
}

/*
 * Wait until every work of the call on @s has finished.  @poll, if given,
 * is asked at each wake-up and at @deadline (timed_out); an error from it
 * ends the wait, and going on it sets the next deadline.  A short spin
 * first spares a late hog's wake.
 */
int cpuhog_i_multi_wait(struct ctx *c, const struct sel *s, uint64_t deadline,
			int (*poll)(struct ctx *c, bool timed_out,
				    uint64_t *deadline))
{
	uint64_t rescue_at = cpuhog_i_deadline_in(RESCUE_NS);
	struct wait w = WAIT(&c->group.seq, 1,
			     c->spin_ns ? cpuhog_i_deadline_in(c->spin_ns) : 0,
			     deadline);
	int r;

	for (; pending(c); cpuhog_i_wait_turn(&w)) {
		if (w.spin_end) {
			w.spin_end = spin_ok(c) ? w.spin_end : 0;
			continue;
		}
		if (w.slept == -ETIMEDOUT && rescue_at < deadline) {
			rescue(s); /* and no timeout */
			rescue_at = NO_DEADLINE;
			w.slept = 0;
		}
		if (poll && (r = poll(c, w.slept == -ETIMEDOUT, &deadline)) < 0)
			return r;
		if (w.slept == -ETIMEDOUT && !poll)
			return -ETIMEDOUT;
		w.deadline = rescue_at < deadline ? rescue_at : deadline;
	}
	return 0;
}

/* fn(arg) on the hogs of @s: 0, fn's first non-zero return, or -ENOENT
 * where it ran nowhere; the CPUs that ran it into @ran (@setsize bytes),
 * if asked; with a report (@o), the hogs time fn. */
static int run_selected(struct ctx *c, struct sel *s, uint32_t gen,
			cpuhog_fn_t fn, void *arg, size_t setsize,
			cpu_set_t *ran, struct stop_outcome *o)
{
	bool any = false;
	unsigned int i;
	int r = 0;

	if (o)
		cpuhog_i_call_report_arm(s);
	cpuhog_i_wake_hog(
		cpuhog_i_multi_push(c, s, gen, fn, arg, o ? W_F_TIMED : 0));
	cpuhog_i_multi_wait(c, s, NO_DEADLINE, NULL);
	for (i = 0; i < s->n; i++) {
		struct hog *h = s->hog[i];

		if (!h->slot.ran)
			continue;
		r = r ? r : h->slot.ret;
		any = true;
		if (ran && h->cpu < setsize * 8)
			CPU_SET_S(h->cpu, setsize, ran);
	}
	if (o) {
		o->tries = 1;
		o->ended = any ? STOP_RAN : STOP_NOCPU;
		cpuhog_i_call_report_hogs(s, true, o);
	}
	return any ? r : -ENOENT;
}

/* hog_cpus() and its variants: @ran, the CPUs that ran fn, if asked; @o,
 * hog_cpus_report()'s outcome, if any. */
static int do_hog_cpus(size_t setsize, const cpu_set_t *cpus, cpuhog_fn_t fn,
		       void *arg, bool try, cpu_set_t *ran,
		       struct stop_outcome *o)
{
	struct ctx *c;
	struct sel *s;
	int64_t gen;
	int r;

	PROBE2(hog_cpus_entry, fn, try);
	r = !cpus || !fn ? -EINVAL : cpuhog_i_self ? -EDEADLK : 0;
	if (r)
		goto out;
	c = cpuhog_i_call_enter(&r);
	if (c && (r = cpuhog_i_multi_lock(c, try)) < 0)
		cpuhog_i_call_leave();
	s = c && r >= 0 ? select_hogs(c, setsize, cpus) : NULL;
	if (ran) /* after the selection: @ran may be @cpus */
		CPU_ZERO_S(setsize, ran);
	if (!s)
		goto out;
	r = !s->n ? -ENOENT : cpuhog_i_call_exclusive(c);
	gen = r ? 0 : cpuhog_i_multi_reserve(c, s, try ? 0 : NO_DEADLINE);
	if (gen < 0)
		r = -EAGAIN; /* try: a slot held by a stop */
	if (gen > 0)
		r = run_selected(c, s, (uint32_t)gen, fn, arg, setsize, ran, o);
	cpuhog_i_multi_unlock(c);
	cpuhog_i_call_leave();
out:
	PROBE1(hog_cpus_return, r);
	return r;
}

int hog_cpus(size_t setsize, const cpu_set_t *cpus, cpuhog_fn_t fn, void *arg)
{
	return do_hog_cpus(setsize, cpus, fn, arg, false, NULL, NULL);
}

int hog_cpus_ran(size_t setsize, const cpu_set_t *cpus, cpuhog_fn_t fn,
		 void *arg, cpu_set_t *ran)
{
	if (!ran)
		return -EINVAL;
	return do_hog_cpus(setsize, cpus, fn, arg, false, ran, NULL);
}

int try_hog_cpus(size_t setsize, const cpu_set_t *cpus, cpuhog_fn_t fn,
		 void *arg)
{
	return do_hog_cpus(setsize, cpus, fn, arg, true, NULL, NULL);
}

int hog_cpus_report(size_t setsize, const cpu_set_t *cpus, cpuhog_fn_t fn,
		    void *arg, struct cpuhog_report *rep)
{
	struct stop_outcome o;
	int r;

	if (cpuhog_i_stop_report_begin(&o, rep) < 0)
		return -EINVAL;
	r = do_hog_cpus(setsize, cpus, fn, arg, false, NULL, rep ? &o : NULL);
	return cpuhog_i_stop_report_end(NULL, &o, r);
}
