/* SPDX-License-Identifier: MIT */
/*
 * The context layer: what a context, a hog, a work and a stop's state
 * are, with context.c (the reference a call holds, who the calling thread
 * is, a hog by CPU) and topology.c (the order the wake tree walks).  It
 * calls none of the rooms above it (internal.h).  Who may write what is
 * said at each field; a context is made whole before it is published
 * (cpuhog_i_ctx_publish()), and freed only after every reference is gone
 * (cpuhog_i_ctx_retire()).
 */
#ifndef CPUHOG_CONTEXT_H
#define CPUHOG_CONTEXT_H

#include "cpuhog.h"

#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CACHELINE 64

/* Work states; the state word is also a futex. */
enum {
	W_IDLE = 0,   /* zeroed buffer, never queued */
	W_QUEUED = 1, /* on a hog's list or running */
	W_DONE = 2,   /* finished: ret and ran are valid */
	W_STATE = 0xff,
	W_WAITER = 0x100, /* someone sleeps on the word: wake on DONE */
};

struct group;

/* The private layout of struct cpuhog_work. */
struct work {
	struct work *next; /* the list link, set before each push */
	cpuhog_fn_t fn;
	void *arg;
	struct group *group; /* multi-CPU calls: where arrival is counted */
	uint32_t gen;        /* multi-CPU calls: the call's generation */
	int ret;
	_Atomic uint32_t state;
	uint32_t ran; /* 1 if fn ran */
	uint32_t cpu;
	uint32_t flags; /* W_F_* */
	_Atomic uint32_t epoch; /* cpuhog_i_epoch when queued: a fork makes
				   it stale */
};

/* struct work.flags */
enum {
	W_F_INTERNAL = 1u << 0, /* a library callback: exempt from checks,
				   and run even off its CPU (reads off_cpu) */
	W_F_RUNS_FN = 1u << 1,  /* a stop: this CPU runs fn */
	W_F_TIMED = 1u << 2,    /* a call with a report: the hog stamps
				   t.arrived and t.released around fn */
};
_Static_assert(sizeof(struct work) <= sizeof(struct cpuhog_work),
	       "struct work must fit in struct cpuhog_work");
_Static_assert(alignof(struct work) <= alignof(struct cpuhog_work),
	       "struct work must align like struct cpuhog_work");

/* The completion of one multi-CPU call, in the context, not the caller's
 * frame: a stale work of a stop that gave up must find library memory,
 * and a generation that tells it not to count. */
struct group {
	_Atomic uint64_t word; /* gen << 32 | works still pending */
	_Atomic uint32_t seq;  /* futex: +2 on each wake-worthy event; bit 0
				  set while the caller sleeps */
};

/* A thread's context switches and minor faults (getrusage()). */
struct sw_count {
	long nv, niv, flt;
};

/* A hog's queue: written by every producer (hog.c, poll.c, wake.c). */
struct hog_queue {
	_Atomic(struct work *) head;
	_Atomic uint32_t sleeping; /* futex: 1 while the hog sleeps */
	_Atomic uint64_t queued;
};

/* What the hog counts, written by it, read by cpuhog_get_info(). */
struct hog_counts {
	_Atomic uint64_t run, refused, slept, overran, migrated;
};

/* The scheduling it asked for and what it got (platform.c), read by
 * cpuhog_get_info() and the reports. */
struct hog_sched {
	int policy, priority, nice, rt_errno;
};

/* The hog's own (hog.c, hog_here()): a scratch mask for the affinity
 * check, whether its affinity read as its CPU alone, at which g_moved,
 * and batches until the next read. */
struct hog_pin {
	size_t masksize;
	cpu_set_t *mask;
	bool pinned;
	uint32_t moved_seen;
	unsigned int until_reread;
};

/* The hog's own (switches.c): its rseq area (NULL: none), its switch
 * counts as last read, whether the watch guards that read, and its
 * callbacks so far (up to SW_WARM). */
struct hog_sw {
	void *rseq;
	struct sw_count last;
	bool read;
	unsigned int checks;
};

/* Stops (stop_machine.c): the generation this hog holds its CPU for, the
 * last it ran fn for (both zeroed by the caller when the generation comes
 * round), where and for which call it serialized its core, when it last
 * looked around while spinning or was looked at (read and claimed by the
 * other hogs), and (its own) which hog it looks at next. */
struct hog_stop {
	_Atomic uint32_t held_gen, ran_gen;
	_Atomic uint64_t serialized_at; /* gen << 32 | the CPU */
	_Atomic uint64_t beat;
	unsigned int look_at;
};

/* A call with a report (call_report.c): when this hog arrived, was held
 * and let go in a stop, or when fn started and returned in a timed work
 * (W_F_TIMED, held unused); cpuhog_i_now_ns(), 0: not yet.  Written by
 * the hog only when the call's timing is on, zeroed by the caller. */
struct hog_times {
	_Atomic uint64_t arrived, held, released;
};

/* The wake tree (wake.c, topology.c): the hogs this one wakes when it
 * takes its slot, written by the caller while the slot is free; its key
 * in topology order and its index in by_topo. */
struct hog_tree {
	struct hog **kids;
	unsigned int nkids;
	uint64_t topo;
	unsigned int pos;
};

struct hog {
	alignas(CACHELINE) struct hog_queue q;

	/* Mostly the hog's own; each group's note says who else writes. */
	alignas(CACHELINE) unsigned int cpu;
	_Atomic bool stop;
	bool off_cpu; /* the current batch cannot run on cpu */
	/* Set by the hog when it finds its CPU unusable (going offline,
	 * offline, outside the cpuset); multi-CPU calls then leave it alone
	 * until cpuhog_i_hog_usable() sees the CPU back (see multi.c). */
	_Atomic bool away;
	_Atomic uint32_t started; /* futex: 0 until the hog is set up */
	pid_t tid;
	int status_fd; /* /proc/thread-self/status, for
			  cpuhog_i_redirect_signals() */
	pthread_t thread;
	struct ctx *ctx;
	struct hog_sched sched;
	struct hog_counts count;
	struct hog_pin pin;
	struct hog_sw sw;
	struct hog_stop st;
	struct hog_times t;
	struct hog_tree tree;

	/* The work of multi-CPU calls, one at a time (serialized), filled
	 * by the caller while it is free. */
	struct work slot;

	struct poller *poll; /* poll mode: its poller (poll.c), or NULL */
};

/* A stop's state (stop_machine.c's), allocated with the context so that
 * a stop allocates nothing (test_stop.stop_never_allocates). */
struct stop_state {
	_Atomic uint64_t word;	   /* gen:32 | phase:8 | acks to come:24 */
	_Atomic uint32_t wake;	   /* futex: kicked at each phase change */
	_Atomic uint32_t released; /* gen whose hold was released, */
	_Atomic uint32_t release_why; /* and why (STOP_LOST, STOP_OVERRUN) */
	_Atomic uint32_t fn_claimed;  /* fn on any one CPU: taken */
	_Atomic int ret;	      /* first non-zero return of fn */
	_Atomic uint64_t run_at;      /* when RUN began */
	/* a report was asked for: the hogs take their times (relaxed) */
	_Atomic bool timing;
	/* Read by hogs before RUN, when a stale one may still read them
	 * while the next call writes: atomics, relaxed.  The deadline
	 * moves on with each step (see extend()). */
	_Atomic uint64_t deadline;
	_Atomic uint32_t n;	/* the call's hogs */
	_Atomic uint64_t next_look; /* the next look's time: hold_lost() */
	_Atomic uint64_t look_gap;  /* and the wait after it */
	/* Read by the call's hogs only (a stale hog leaves before it
	 * looks), fn_one from PREPARE on, fn and data in RUN. */
	bool fn_one;
	cpuhog_fn_t fn;
	void *data;
	/* stops serialized between processes (serialize.c); read by
	 * cpuhog_get_info(), relaxed */
	_Atomic bool serialized;
	struct ctx *ctx;
};

/* The hogs of one multi-CPU call, in the wake tree's order, with each
 * one's work flags; the context's storage (a call allocates nothing),
 * handed out by multi.c under multi_lock and passed down by the call. */
struct sel {
	struct hog **hog;	/* nr_hogs entries */
	uint32_t *flags;	/* nr_hogs entries */
	unsigned int n;
};

/* Whether @h's multi-CPU slot is still queued (acquire: a finished
 * work's ret, ran and times, before its DONE). */
static inline bool cpuhog_i_slot_queued(const struct hog *h)
{
	return (atomic_load_explicit(&h->slot.state, memory_order_acquire) &
		W_STATE) == W_QUEUED;
}

static inline void cpuhog_i_sel_add(struct sel *s, struct hog *h,
				    uint32_t flags)
{
	s->flags[s->n] = flags;
	s->hog[s->n++] = h;
}

struct ctx {
	unsigned int nr_cpu_ids;
	unsigned int nr_hogs;
	struct hog **by_cpu; /* nr_cpu_ids entries; NULL: no hog */
	struct hog **by_topo; /* nr_hogs entries, in topology order */
	unsigned int fanout;  /* the wake tree's k (wake.c) */
	struct hog **kid_store; /* nr_hogs * fanout: every hog's kids */
	struct hog *hogs;    /* nr_hogs entries */
	unsigned int flags;
	int want_priority;
	size_t stack_size;
	uint64_t overrun_ns, stop_timeout_ns, spin_ns, poll_ns;
	bool rt_ok; /* every hog runs SCHED_FIFO */
	cpu_set_t *possible; /* every CPU the kernel may bring up */
	/* An explicit set that leaves out a possible CPU; the watcher,
	 * whose affinity tells where our threads may go (lifecycle.c,
	 * watch_main(); multi.c, cpuhog_i_reach()): its tid, and 0 starting, 1
	 * running, 2 told to stop (a futex). */
	bool partial;
	pid_t watch_tid;
	_Atomic uint32_t watch_state;
	pthread_t watcher;

	/* Multi-CPU calls. */
	pthread_mutex_t multi_lock;
	uint32_t multi_gen; /* under multi_lock */
	uint64_t backoff_at; /* under multi_lock: see cpuhog_i_multi_unlock() */
	uint64_t transit_at; /* under multi_lock: see in_transit() */
	bool transit;
	struct group group;
	struct sel sel; /* multi.c's to hand to the call, under multi_lock */
	cpu_set_t *mscratch; /* scratch, under multi_lock */
	cpu_set_t *reach_set; /* cpuhog_i_reach()'s, under multi_lock */
	bool reach_fresh; /* read in this multi-CPU call */
	cpu_set_t *mscratch2; /* for in_transit(), under multi_lock */
	struct stop_state *stop;
	_Atomic uint64_t stops, stop_timeouts, holds_released;
	_Atomic uint64_t transit_naps; /* multi_unlock's hotplug naps */
	_Atomic uint64_t late_waits;   /* see cpuhog_info.late_waits */
	_Atomic uint64_t stop_misses;  /* see cpuhog_info.stop_misses */
	_Atomic uint64_t stop_lock_waits; /* see cpuhog_info */
	_Atomic bool sync_away; /* hog_synchronize(): a hog ran off its CPU */
	/* hog_synchronize()'s passes: twice the passes begun, plus one while
	 * one runs (odd); written under multi_lock (sched.c) */
	_Atomic uint64_t sync_seq;
	bool sync_failed; /* under multi_lock: the last pass timed out */
	uint32_t sync_left; /* under multi_lock: sync_poll()'s last count */

	/* Poll mode: hog_synchronize()'s generation, the pollers' acks. */
	_Atomic uint32_t sync_gen;
	_Atomic uint64_t poll_sync_acks;

	/* Reported callbacks (once per function and kind). */
	_Atomic(uintptr_t) reported[64];
	struct ctx *orphan_next; /* contexts left behind by fork() */
	/* What it was made with: a forked child's first call makes its own
	 * context from these (cpuhog_init(3), "Fork"). */
	struct cpuhog_attr attr;
	cpu_set_t *attr_cpus; /* a copy of attr.cpus, or NULL */
};

/* context.c: the reference.  A call counts itself as a user before it
 * looks for the context; cpuhog_i_ctx_retire() unpublishes, then waits for the
 * users to drain: Dekker, both sides seq_cst. */
HIDDEN struct ctx *cpuhog_i_ctx_ref(void); /* a reference, or NULL: none */
/* give back cpuhog_i_ctx_ref()'s or cpuhog_i_ctx_get()'s */
HIDDEN void cpuhog_i_ctx_put(void);
HIDDEN void cpuhog_i_ctx_publish(struct ctx *c);
HIDDEN struct ctx *cpuhog_i_ctx_current(void); /* a peek, under the init lock */
HIDDEN struct ctx *cpuhog_i_ctx_retire(void);
HIDDEN bool cpuhog_i_ctx_quiet(void);
HIDDEN struct ctx *cpuhog_i_ctx_forget(void); /* a forked child's, no waiting */
HIDDEN struct hog *cpuhog_i_hog_of(struct ctx *c, unsigned int cpu);

/* context.c: who the calling thread is. */
HIDDEN extern _Thread_local struct hog *cpuhog_i_self; /* NULL: not a hog */
/* Inside a call that may block or lock (cpuhog_i_call_enter()), or in
 * cpuhog_init() or cpuhog_shutdown(): a signal handler of this thread must not
 * enter another.  Written and read by one thread, its handlers included. */
HIDDEN extern _Thread_local volatile sig_atomic_t cpuhog_i_in_call;
/* References this thread holds (cpuhog_i_ctx_ref() to cpuhog_i_ctx_put()), its
 * handlers' included: a handler that finds one must not wait for the context to
 * drain, nor for what its thread was doing (cpuhog_shutdown(),
 * hog_work_wait()). */
HIDDEN extern _Thread_local volatile sig_atomic_t cpuhog_i_ctx_held;
HIDDEN extern _Atomic uint64_t cpuhog_i_spin_ns; /* hog_work_wait() holds no
					     reference to the context */
HIDDEN extern _Atomic uint32_t cpuhog_i_epoch; /* moves on in a forked child */

/* topology.c: each hog's tree.topo and tree.kids, and by_topo in that order */
HIDDEN void cpuhog_i_topo_sort(struct ctx *c);

#endif
