/* SPDX-License-Identifier: MIT */
/*
 * The scheduler's users of the hogs: hog_synchronize(), the expedited
 * barrier (every CPU forced through the scheduler), and hog_migrate(),
 * the migration thread replaced by a single-CPU hog.
 *
 * A synchronize pass on 2 CPUs enters the kernel twice (the other hog's
 * wake and its futex wait), in poll mode not at all when every poller
 * acknowledges (tests/test_entries.c).  Concurrent callers share passes.
 */
#include "internal.h"
#include "outcome.h"
#include "probes.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * hog_synchronize()'s work.  A hog off its CPU (cpuset change) may have
 * been moved before a thread still on that CPU: note it, and the caller
 * asks the kernel for the barrier instead (full_barrier()).
 */
static int nothing(void *arg)
{
	_Atomic bool *away = arg;

	/* relaxed: the work's completion, which the caller acquires */
	if (cpuhog_i_self->off_cpu)
		atomic_store_explicit(away, true, memory_order_relaxed);
	return 0;
}

/* membarrier(2): a full barrier in each thread of ours running now, all
 * a switch gave us; GLOBAL (milliseconds) where EXPEDITED is refused. */
static void full_barrier(void)
{
	static _Atomic int reg; /* 0: not yet asked; 1 registered; -1 no */
	int r = atomic_load_explicit(&reg, memory_order_relaxed);

	if (r == 0) {
		r = syscall(SYS_membarrier,
			    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) ?
			    -1 : 1;
		atomic_store_explicit(&reg, r, memory_order_relaxed);
	}
	if (r > 0 &&
	    !syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
		return;
	syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

/*
 * Passes are shared as the kernel's expedited grace periods are
 * (rcu_seq): c->sync_seq, odd while a pass runs, moves under multi_lock;
 * a caller is served once it reaches seq_snap(), the end of a whole pass
 * begun after the call, so callers that come together cost two passes.
 */
static uint64_t seq_snap(struct ctx *c)
{
	/* seq_cst: after hog_synchronize()'s fence; a pass that begins
	 * after this load orders its hogs after our accesses before it */
	uint64_t s = atomic_load(&c->sync_seq);

	/* idle: the next end; busy: the one after */
	return (s + 3) & ~(uint64_t)1;
}

/* cpuhog_i_multi_wait()'s poll: give up once no hog answered for
 * stop_timeout_ns, not while many answer slowly (an overcommitted VM). */
static int sync_poll(struct ctx *c, bool timed_out, uint64_t *deadline)
{
	uint32_t left = (uint32_t)atomic_load_explicit(&c->group.word,
						       memory_order_relaxed);

	if (left != c->sync_left) {
		c->sync_left = left;
		*deadline = cpuhog_i_deadline_in(c->stop_timeout_ns);
		return 0;
	}
	return timed_out ? -ETIMEDOUT : 0;
}

/* The hogs a pass wakes: every hogged CPU's but ours (@me), less those
 * whose poller answered (with a report: their CPUs into @acked).  One
 * whose CPU cannot be had is not woken: *@away, the kernel does its
 * barrier. */
static struct sel *sync_select(struct ctx *c, int me, bool *away,
			       cpu_set_t *acked)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	struct sel *s = cpuhog_i_multi_sel(c);
	unsigned int i;

	if (acked)
		CPU_ZERO_S(sz, acked);
	for (i = 0; i < c->nr_hogs; i++) { /* the wake tree's order */
		struct hog *h = c->by_topo[i];

		if ((int)h->cpu == me)
			continue;
		if (!cpuhog_i_hog_usable(c, h)) {
			*away = true;
			continue;
		}
		cpuhog_i_sel_add(s, h, 0);
		if (acked)
			CPU_SET_S(h->cpu, sz, acked);
	}
	cpuhog_i_poll_sync(c, s);
	for (i = 0; acked && i < s->n; i++)
		CPU_CLR_S(s->hog[i]->cpu, sz, acked);
	return s;
}

/* A pass's report: our CPU (@me) passed at @t0, the pollers' at
 * @acked_at, then the hogs of @s; CPUHOG_RC_RAN only where @r is 0. */
static void sync_report(struct ctx *c, struct stop_outcome *o, int me,
			uint64_t t0, uint64_t acked_at, const struct sel *s,
			bool pushed, int r)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	unsigned int i, passed = CPUHOG_RC_ARRIVED | (r ? 0 : CPUHOG_RC_RAN);

	o->tries = 1;
	o->ended = r ? STOP_TIMEDOUT : STOP_RAN;
	if (cpuhog_i_hog_of(c, (unsigned int)me)) /* -1: none */
		cpuhog_i_call_report_cpu(o, (unsigned int)me, passed, t0, t0);
	for (i = 0; i < c->nr_hogs; i++) {
		unsigned int cpu = c->by_topo[i]->cpu;

		if (CPU_ISSET_S(cpu, sz, c->mscratch))
			cpuhog_i_call_report_cpu(o, cpu, passed, acked_at,
						 acked_at);
	}
	cpuhog_i_call_report_hogs(s, pushed, o);
}

/* One pass, under multi_lock: every hogged CPU but ours through the
 * scheduler, or its poller's ack; 0, or -ETIMEDOUT.  Reported into @o. */
static int sync_pass(struct ctx *c, struct stop_outcome *o)
{
	uint64_t seq = atomic_load_explicit(&c->sync_seq, memory_order_relaxed);
	uint64_t deadline = cpuhog_i_deadline_in(c->stop_timeout_ns);
	uint64_t t0 = o ? cpuhog_i_now_ns() : 0, acked_at;
	struct sel *s;
	bool away = false;
	int64_t gen;
	int me, r;

	/* seq_cst RMW, a full barrier (TSan refuses fences): the pass's
	 * start before its hogs run, for callers whose seq_snap() was before.
	 * Our own CPU needs no hog: what ran there was switched out. */
	atomic_fetch_add(&c->sync_seq, 1);
	me = sched_getcpu();
	s = sync_select(c, me, &away, o ? c->mscratch : NULL);
	acked_at = o ? cpuhog_i_now_ns() : 0;
	gen = s->n ? cpuhog_i_multi_reserve(c, s, deadline) : -1;
	r = gen == -ETIMEDOUT ? -ETIMEDOUT : 0;
	if (gen >= 0) {
		if (o)
			cpuhog_i_call_report_arm(s);
		/* internal: a hog off its CPU runs it too (see nothing()) */
		atomic_store_explicit(&c->sync_away, false,
				      memory_order_relaxed);
		cpuhog_i_wake_hog(cpuhog_i_multi_push(
			c, s, (uint32_t)gen, nothing, &c->sync_away,
			W_F_INTERNAL | (o ? W_F_TIMED : 0)));
		c->sync_left = s->n;
		r = cpuhog_i_multi_wait(c, s, deadline, sync_poll);
		away |= atomic_load_explicit(&c->sync_away,
					     memory_order_relaxed);
	}
	if (away && !r)
		full_barrier();
	c->sync_failed = r < 0;
	if (o)
		sync_report(c, o, me, t0, acked_at, s, gen >= 0, r);
	/* release: the pass's acknowledgements (cpuhog_i_multi_wait()'s
	 * acquire) before its end, for the callers it served */
	atomic_store_explicit(&c->sync_seq, seq + 2, memory_order_release);
	return r;
}

/* hog_synchronize(); a report (@o) is of a pass of the call's own.
 * noinline: GCC's TSan warns about a fence inlined elsewhere (-Wtsan). */
static __attribute__((noinline)) int synchronize(struct stop_outcome *o)
{
	struct ctx *c = NULL;
	uint64_t want;
	int r;

	PROBE0(hog_synchronize_entry);
	if (cpuhog_i_self)
		r = -EDEADLK;
	else
		c = cpuhog_i_call_enter(&r);
	if (!c) {
		r = o ? cpuhog_i_stop_report_end(NULL, o, r) : r;
		goto out;
	}
	/* our accesses before the call, before the snapshot's load */
	atomic_thread_fence(memory_order_seq_cst);
	want = seq_snap(c);
	cpuhog_i_multi_lock(c, false);
	/* acquire: pairs with sync_pass()'s release of the pass's end; a
	 * pass that timed out served nobody */
	r = 0;
	if (atomic_load_explicit(&c->sync_seq, memory_order_acquire) < want ||
	    c->sync_failed || o)
		r = sync_pass(c, o);
	/* acquire side of the barrier: pairs with each hog's release */
	atomic_thread_fence(memory_order_seq_cst);
	if (o) /* where a CPU never came, who ran there, from /proc */
		cpuhog_i_stop_report_end(c, o, r);
	cpuhog_i_multi_unlock(c);
	cpuhog_i_call_leave();
out:
	PROBE1(hog_synchronize_return, r);
	return r;
}

int hog_synchronize(void)
{
	return synchronize(NULL);
}

int hog_synchronize_report(struct cpuhog_report *rep)
{
	struct stop_outcome o;

	if (cpuhog_i_stop_report_begin(&o, rep) < 0)
		return -EINVAL;
	return synchronize(rep ? &o : NULL);
}

/* The CPU @tid last ran on (field 39 of /proc/self/task/TID/stat). */
static int last_cpu(pid_t tid)
{
	char path[64], buf[1024];
	const char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	if (cpuhog_i_read_file(path, buf, sizeof(buf)) < 0) {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
		cpuhog_i_read_file(path, buf, sizeof(buf));
	}
	p = cpuhog_i_stat_field(buf, 39);
	return p ? atoi(p) : -1;
}

struct migration {
	pid_t tid;
	size_t setsize;
	cpu_set_t *set;
};

/* Runs in the hog of the CPU @tid was on: @tid cannot run there now. */
static int migrate_cpu(void *arg)
{
	struct migration *m = arg;

	if (cpuhog_i_self && cpuhog_i_self->off_cpu)
		return 1; /* that CPU went away: the caller moves it */
	if (sched_setaffinity(m->tid, m->setsize, m->set) == 0)
		return 0;
	/* EINVAL: the set is one hogged CPU, so it is offline or outside
	 * the cpuset now: not usable, as for every call */
	return errno == EINVAL ? -ENOENT : -errno;
}

/* Whether @tid is a thread of this process (tgkill() reaches it only
 * then): not another's, nor a stale tid the system gave someone else. */
static bool own_thread(pid_t tid)
{
	return syscall(SYS_tgkill, getpid(), tid, 0) == 0 || errno == EPERM;
}

/* Whether a hog can preempt @tid at all: not if it is RT at our level. */
static bool displaceable(struct ctx *c, pid_t tid)
{
	struct sched_param sp;
	int pol = sched_getscheduler(tid);

	if (pol != SCHED_FIFO && pol != SCHED_RR)
		return true;
	return c->rt_ok && sched_getparam(tid, &sp) == 0 &&
	       sp.sched_priority < c->want_priority;
}

static int do_migrate(struct ctx *c, struct migration *m, unsigned int cpu)
{
	struct work w = { .fn = migrate_cpu, .arg = m, .flags = W_F_INTERNAL };
	/* last_cpu()'s -1 is past every CPU: no hog */
	struct hog *h = cpuhog_i_hog_of(c, (unsigned int)last_cpu(m->tid));
	int r;

	CPU_ZERO_S(m->setsize, m->set);
	CPU_SET_S(cpu, m->setsize, m->set);
	if (!h || !displaceable(c, m->tid))
		return migrate_cpu(m); /* the kernel's stopper moves it */
	w.cpu = h->cpu;
	atomic_init(&w.state, W_QUEUED);
	cpuhog_i_queue_work(h, &w);
	r = cpuhog_i_work_wait(&w, false, 0);
	return r == 1 ? migrate_cpu(m) : r;
}

static int migrate(pid_t tid, unsigned int cpu)
{
	struct migration m;
	struct ctx *c;
	int r;

	if (cpuhog_i_self)
		return -EDEADLK;
	if (tid < 0)
		return -ESRCH;
	c = cpuhog_i_call_enter(&r);
	if (!c)
		return r;
	m.tid = tid ? tid : gettid();
	m.setsize = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	m.set = CPU_ALLOC(c->nr_cpu_ids);
	if (!m.set)
		r = -ENOMEM;
	else if (!cpuhog_i_hog_of(c, cpu))
		r = -ENOENT;
	else if (!own_thread(m.tid))
		r = -ESRCH;
	else if (sched_getaffinity(m.tid, m.setsize, m.set) < 0)
		r = -errno;
	else if (cpuhog_i_is_hog(c, m.tid))
		r = -EINVAL;
	else
		r = do_migrate(c, &m, cpu);
	CPU_FREE(m.set);
	cpuhog_i_call_leave();
	return r;
}

int hog_migrate(pid_t tid, unsigned int cpu)
{
	int r;

	PROBE2(hog_migrate_entry, tid, cpu);
	r = migrate(tid, cpu);
	PROBE1(hog_migrate_return, r);
	return r;
}
