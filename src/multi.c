/* SPDX-License-Identifier: MIT */
/*
 * Multi-CPU calls: hog_cpus(), try_hog_cpus(), hog_cpus_report(), and
 * the machinery that stop_machine() and stop_two_cpus() share with them.
 *
 * One multi-CPU call at a time (multi_lock, held for the whole call).
 * That alone rules out the deadlock the kernel fixed twice: two calls
 * queued in opposite orders on two CPUs, each rendezvous waiting for a
 * hog stuck behind the other.  It also lets each hog keep one
 * preallocated work (its slot) for these calls, so none of them
 * allocates.
 *
 * Kernel entries of hog_cpus() on 2 CPUs (tests/test_entries.c), 1 + 7:
 * the caller's one wake, of its own CPU's hog, which wakes the other
 * (wake.c: a wake the caller still owed could wait behind its own hog);
 * each hog's futex wait, its sleep check's read after the wake
 * (switches.c) and its callback's signal check, rt_sigpending()
 * (report.c).  In poll mode the other hog's wake is its poller's.  On N
 * CPUs the caller wakes one hog (a stop: two, wake.c) and the hogs the
 * rest; the caller sleeps once if the call outlasts its spin, and once
 * more, then wakes the late hogs, if it outlasts RESCUE_NS.
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

/*
 * Whether a CPU whose hog is away is still listed online and still in
 * the hog's own mask: it is on its way out (or in), and the kernel is in
 * the middle of a hotplug that waits for its own threads on the CPUs
 * left.  A CPU that left the process's cpuset is online too, for good,
 * but gone from the mask (the kernel rewrote it): no hotplug waits on it,
 * and calls must not be slowed while it stays out.  Read from sysfs and
 * /proc at most once per TRANSIT_CHECK_NS, under the multi-CPU lock.
 */
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

/*
 * End a multi-CPU call.  While a hogged CPU is away (going offline,
 * offline, out of the cpuset), our callers and hogs crowd onto the CPUs
 * left, and multi-CPU calls back to back from several threads can keep
 * the kernel's own threads there (the RCU grace-period kthread,
 * workqueues) from running, while the offline waits for them.  So the
 * caller sleeps before it lets the next multi-CPU call in, while every
 * other multi-CPU caller is asleep on the lock, and the kernel's threads
 * run: 4 ms after every call while the CPU is still in transit (listed
 * online, not active: the hotplug is waiting), and 1 ms once per 4 ms
 * (one tick) while it stays away (docs/RELIABILITY.md names the test).
 */
void cpuhog_i_multi_unlock(struct ctx *c)
{
	unsigned int i;
	uint64_t now;

	for (i = 0; i < c->nr_hogs; i++)
		if (atomic_load_explicit(&c->hogs[i].away,
					 memory_order_relaxed))
			break;
	if (i < c->nr_hogs) {
		now = cpuhog_i_now_ns();
		if (in_transit(c, now)) {
			atomic_fetch_add_explicit(&c->transit_naps, 1,
						  memory_order_relaxed);
			nanosleep(&(struct timespec){ 0, TRANSIT_NS }, NULL);
		} else if (now >= c->backoff_at) {
			nanosleep(&(struct timespec){ 0, BACKOFF_NS }, NULL);
			c->backoff_at = now + BACKOFF_EVERY_NS;
		}
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

/*
 * Where a thread of ours may run now: the watcher's affinity, set anew to
 * every possible CPU and read back, which the kernel bounds by the cpuset
 * and the active CPUs.  A mask set once would not follow the machine (on
 * 6.1 a thread made while a CPU was offline never gets that CPU back).
 * Two system calls, at most once per multi-CPU call (c->reach_fresh, under
 * multi_lock), and only where a hog is away or an explicit set left CPUs
 * out.
 */
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

/*
 * Whether @h's CPU can be used now (under multi_lock).  A hog away from
 * its CPU (offline, outside the cpuset, or never had) is not woken by
 * multi-CPU calls until its CPU is back in cpuhog_i_reach(): its work would
 * only be refused, and while a CPU goes offline, waking it would put an
 * extra real-time thread on a surviving CPU for every call, starving the
 * kernel's own threads there.  Once back, the hog pins itself on its
 * next work.
 */
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

/* The hogs of @cpus whose CPUs are usable, in topology order (the wake
 * tree's): the call's selection. */
struct sel *cpuhog_i_multi_select(struct ctx *c, size_t setsize,
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

/*
 * Reserve the slots of the hogs of @s for a new call.  A slot can
 * still be queued from a stop that gave up on a held CPU: wait for it
 * until @deadline (-ETIMEDOUT, nothing reserved).  Returns the call's
 * generation, never 0.  Before the 32-bit generation comes round again,
 * every hog's slot must be free: a stale hog of an abandoned call, still
 * queued, would take a later call of its generation for its own.
 */
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

static void slot_push(struct ctx *c, struct hog *h, uint32_t gen,
		      cpuhog_fn_t fn, void *arg, uint32_t flags)
{
	struct work *w = &h->slot;

	w->fn = fn;
	w->arg = arg;
	w->group = &c->group;
	w->gen = gen;
	w->cpu = h->cpu;
	w->flags = flags;
	/* relaxed: published by cpuhog_i_push_work()'s seq_cst push */
	atomic_store_explicit(&w->state, W_QUEUED, memory_order_relaxed);
	cpuhog_i_push_work(h, w);
}

/*
 * Queue fn(arg) on the hogs of @s, under generation @gen, with @flags
 * and each hog's own flags in @s; then wake them down the tree
 * (wake.c): every work pushed first, children before their parents, then
 * the root's wake here (a stop's: after its first child's, where the
 * root is our own CPU's hog).
 */
void cpuhog_i_multi_push(struct ctx *c, struct sel *s, uint32_t gen,
			 cpuhog_fn_t fn, void *arg, uint32_t flags)
{
	struct hog *root = cpuhog_i_wake_plan(c, s);
	unsigned int i;

	/* relaxed: the pushes below release it to the hogs; stale hogs
	 * only compare it in a CAS */
	atomic_store_explicit(&c->group.word, (uint64_t)gen << 32 | s->n,
			      memory_order_relaxed);
	for (i = s->n; i-- > 0;) /* reverse plan order: see wake.c */
		slot_push(c, s->hog[i], gen, fn, arg, flags | s->flags[i]);
	/* a stop's remote wake first, to overlap the switch to our own
	 * CPU's root (wake.c) */
	if (root && root->tree.nkids && (flags & W_F_INTERNAL) &&
	    (int)root->cpu == sched_getcpu())
		cpuhog_i_wake_hog(root->tree.kids[0]);
	if (root)
		cpuhog_i_wake_hog(root);
}

static uint32_t pending(struct ctx *c)
{
	/* acquire: the results of the works counted so far */
	return (uint32_t)atomic_load_explicit(&c->group.word,
					      memory_order_acquire);
}

/* Spin only while our own CPU's hog has nothing left to do for us. */
static bool spin_ok(struct ctx *c)
{
	int cpu = sched_getcpu();
	struct hog *h = cpu >= 0 ? cpuhog_i_hog_of(c, (unsigned int)cpu) : NULL;

	return !h || (atomic_load_explicit(&h->slot.state,
					   memory_order_relaxed) &
		      W_STATE) != W_QUEUED;
}

/*
 * The wake tree's rescue (wake.c): every hog of the call that still
 * sleeps on its queued slot, its parent late, woken by the caller.  A
 * hog never sleeps on a slot it took, so one that sleeps has not seen it
 * (or is about to: the wake is then spurious); a finished slot is left.
 */
static void rescue(const struct sel *s)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		/* relaxed: a stale QUEUED costs a cpuhog_i_wake_hog(), which
		 * only loads a hog that is awake */
		if ((atomic_load_explicit(&s->hog[i]->slot.state,
					  memory_order_relaxed) &
		     W_STATE) == W_QUEUED)
			cpuhog_i_wake_hog(s->hog[i]);
}

/*
 * Wait until every work of the current call, on the hogs of @s, has
 * finished.  @poll, if
 * given, is asked on every wake-up and at @deadline (timed_out), and ends
 * the wait early by returning an error; going on past a deadline, it
 * sets the next one.  A stop spins first too (@poll is not asked during
 * the spin, which is short): once its own CPU's hog is through, the
 * caller may find another hog still in the last phase, and a sleep then
 * costs it a wait and that hog a wake.  RESCUE_NS after it began, still
 * waiting, the caller wakes the hogs still asleep (wake.c).
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
		if (w.spin_end) { /* only while spin_ok() */
			w.spin_end = spin_ok(c) ? w.spin_end : 0;
			continue;
		}
		if (w.slept == -ETIMEDOUT && rescue_at < deadline) {
			rescue(s); /* and no timeout */
			rescue_at = NO_DEADLINE;
			w.slept = 0;
		}
		/* poll moves the deadline on when it chooses to go on */
		if (poll && (r = poll(c, w.slept == -ETIMEDOUT, &deadline)) < 0)
			return r;
		if (w.slept == -ETIMEDOUT && !poll)
			return -ETIMEDOUT;
		w.deadline = rescue_at < deadline ? rescue_at : deadline;
	}
	return 0;
}

/* 0 or a callback's non-zero value; *ran_any: some callback ran. */
int cpuhog_i_multi_result(const struct sel *s, bool *ran_any)
{
	unsigned int i;
	int r = 0;

	*ran_any = false;
	for (i = 0; i < s->n; i++) {
		struct work *w = &s->hog[i]->slot;

		if (!w->ran)
			continue;
		*ran_any = true;
		if (!r)
			r = w->ret;
	}
	return r;
}

/* Which CPUs' hogs ran the call's fn, into @ran (@setsize bytes). */
static void fill_ran(const struct sel *s, size_t setsize, cpu_set_t *ran)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		if (s->hog[i]->slot.ran && s->hog[i]->cpu < setsize * 8)
			CPU_SET_S(s->hog[i]->cpu, setsize, ran);
}

/* fn(arg) on the hogs of @s, under @gen; with a report (@o), the hogs
 * stamp when fn started and returned there. */
static int run_selected(struct ctx *c, struct sel *s, uint32_t gen,
			cpuhog_fn_t fn, void *arg, struct stop_outcome *o)
{
	bool any;
	int r;

	if (o)
		cpuhog_i_call_report_arm(s);
	cpuhog_i_multi_push(c, s, gen, fn, arg, o ? W_F_TIMED : 0);
	cpuhog_i_multi_wait(c, s, NO_DEADLINE, NULL);
	r = cpuhog_i_multi_result(s, &any);
	if (o) {
		o->tries = 1;
		o->ended = any ? STOP_RAN : STOP_NOCPU;
		cpuhog_i_call_report_hogs(s, true, o);
	}
	return any ? r : -ENOENT;
}

static int hog_cpus_probed(size_t setsize, const cpu_set_t *cpus,
			   cpuhog_fn_t fn, void *arg, bool try, cpu_set_t *ran,
			   struct stop_outcome *o);

/* hog_cpus(), hog_cpus_ran(), try_hog_cpus() and hog_cpus_report()
 * (@o: its outcome, NULL for the others), between two probes */
static int do_hog_cpus(size_t setsize, const cpu_set_t *cpus, cpuhog_fn_t fn,
		       void *arg, bool try, cpu_set_t *ran,
		       struct stop_outcome *o)
{
	int r;

	PROBE2(hog_cpus_entry, fn, try);
	r = hog_cpus_probed(setsize, cpus, fn, arg, try, ran, o);
	PROBE1(hog_cpus_return, r);
	return r;
}

static int hog_cpus_probed(size_t setsize, const cpu_set_t *cpus,
			   cpuhog_fn_t fn, void *arg, bool try, cpu_set_t *ran,
			   struct stop_outcome *o)
{
	struct ctx *c;
	struct sel *s;
	int64_t gen;
	int r;

	if (!cpus || !fn)
		return -EINVAL;
	if (cpuhog_i_self)
		return -EDEADLK;
	c = cpuhog_i_call_enter(&r);
	if (c && (r = cpuhog_i_multi_lock(c, try)) < 0) {
		cpuhog_i_call_leave();
		c = NULL;
	}
	if (!c) {
		if (ran)
			CPU_ZERO_S(setsize, ran);
		return r;
	}
	s = cpuhog_i_multi_select(c, setsize, cpus);
	if (ran) /* after the selection: @ran may be @cpus */
		CPU_ZERO_S(setsize, ran);
	gen = !s->n ? -ENOENT
	      : cpuhog_i_call_exclusive(c)
		      ? -EPERM
		      : cpuhog_i_multi_reserve(c, s, try ? 0 : NO_DEADLINE);
	r = gen == -ETIMEDOUT ? -EAGAIN /* try: a slot held by a stop */
	    : gen < 0	      ? (int)gen
			      : 0;
	if (r == 0) {
		r = run_selected(c, s, (uint32_t)gen, fn, arg, o);
		if (ran)
			fill_ran(s, setsize, ran);
	}
	cpuhog_i_multi_unlock(c);
	cpuhog_i_call_leave();
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
