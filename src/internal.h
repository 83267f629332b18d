/* SPDX-License-Identifier: MIT */
/*
 * Private to libcpuhog.  The path of a call:
 *   header -> ctx_get() -> queue_work() onto one hog's list -> hog_main()
 *   runs it -> work_finish() publishes the result -> the caller's wait.
 */
#ifndef CPUHOG_INTERNAL_H
#define CPUHOG_INTERNAL_H

#include "cpuhog.h"

#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <time.h>

/*
 * Every extern name of the library that is not API carries the reserved
 * prefix cpuhog_i_: that is what the linker sees, in the static archive
 * too (hidden visibility keeps them out of the shared library's table).
 * The sources use the short names.
 */
#define affine_only cpuhog_i_affine_only
#define check_begin cpuhog_i_check_begin
#define check_end cpuhog_i_check_end
#define cpuhog_self cpuhog_i_self
#define call_enter cpuhog_i_call_enter
#define call_leave cpuhog_i_call_leave
#define in_call cpuhog_i_in_call
#define ctx_get cpuhog_i_ctx_get
#define ctx_put cpuhog_i_ctx_put
#define deadline_in cpuhog_i_deadline_in
#define futex_wait cpuhog_i_futex_wait
#define futex_wake cpuhog_i_futex_wake
#define g_epoch cpuhog_i_epoch
#define g_spin_ns cpuhog_i_spin_ns
#define group_kick cpuhog_i_group_kick
#define hog_main cpuhog_i_hog_main
#define hog_cpu_set cpuhog_i_hog_cpu_set
#define hog_of cpuhog_i_hog_of
#define hog_usable cpuhog_i_hog_usable
#define mask_allows cpuhog_i_mask_allows
#define multi_lock cpuhog_i_multi_lock
#define multi_push cpuhog_i_multi_push
#define multi_reserve cpuhog_i_multi_reserve
#define multi_result cpuhog_i_multi_result
#define multi_select cpuhog_i_multi_select
#define multi_unlock cpuhog_i_multi_unlock
#define multi_wait cpuhog_i_multi_wait
#define now_ns cpuhog_i_now_ns
#define obtain_priority cpuhog_i_obtain_priority
#define pin_to cpuhog_i_pin_to
#define pinned_to cpuhog_i_pinned_to
#define poll_offer cpuhog_i_poll_offer
#define poll_raise cpuhog_i_poll_raise
#define poll_exit_all cpuhog_i_poll_exit_all
#define poll_start cpuhog_i_poll_start
#define poll_stop cpuhog_i_poll_stop
#define poll_sync cpuhog_i_poll_sync
#define poll_unpark cpuhog_i_poll_unpark
#define possible_cpus cpuhog_i_possible_cpus
#define queue_work cpuhog_i_queue_work
#define read_cpulist cpuhog_i_read_cpulist
#define read_status cpuhog_i_read_status
#define redirect_signals cpuhog_i_redirect_signals
#define serialize_core cpuhog_i_serialize_core
#define slot_wait_free cpuhog_i_slot_wait_free
#define stop_state_alloc cpuhog_i_stop_state_alloc
#define symbol_describe cpuhog_i_symbol_describe
#define stop_state_free cpuhog_i_stop_state_free
#define thread_switches cpuhog_i_thread_switches
#define wake_hog cpuhog_i_wake_hog
#define topo_key cpuhog_i_topo_key
#define topo_sort cpuhog_i_topo_sort
#define fanout_of cpuhog_i_fanout_of
#define wake_kids cpuhog_i_wake_kids
#define wake_plan cpuhog_i_wake_plan
#define push_work cpuhog_i_push_work
#define work_wait cpuhog_i_work_wait

#define HIDDEN __attribute__((visibility("hidden")))
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
	_Atomic uint32_t epoch; /* g_epoch when queued: a fork makes it stale */
};

/* struct work.flags */
enum {
	W_F_INTERNAL = 1u << 0, /* a library callback: exempt from checks,
				   and run even off its CPU (reads off_cpu) */
	W_F_RUNS_FN = 1u << 1,  /* a stop: this CPU runs fn */
	W_F_NEEDED = 1u << 2,   /* a stop: fails (-ENOENT) without this CPU */
};
_Static_assert(sizeof(struct work) <= sizeof(struct cpuhog_work),
	       "struct work must fit in struct cpuhog_work");
_Static_assert(alignof(struct work) <= alignof(struct cpuhog_work),
	       "struct work must align like struct cpuhog_work");

/*
 * The completion of one multi-CPU call.  Lives in the context, not in the
 * caller's frame, because a stop that gave up leaves works behind on a
 * CPU that is still held: when that hog gets to them at last it must find
 * only library memory, and the stale generation tells it not to count.
 */
struct group {
	_Atomic uint64_t word; /* gen << 32 | works still pending */
	_Atomic uint32_t seq;  /* futex: +2 on each wake-worthy event; bit 0
				  set while the caller sleeps */
};

struct hog {
	/* Written by every producer. */
	alignas(CACHELINE) _Atomic(struct work *) head;
	_Atomic uint32_t sleeping; /* futex: 1 while the hog sleeps */
	_Atomic uint64_t queued;

	/* Written by the hog only; the counters are read by get_info. */
	alignas(CACHELINE) unsigned int cpu;
	_Atomic bool stop;
	bool off_cpu; /* the current batch cannot run on cpu */
	/* Set by the hog when it finds its CPU unusable (going offline,
	 * offline, outside the cpuset); multi-CPU calls then leave it alone
	 * until hog_usable() sees the CPU back (see multi.c). */
	_Atomic bool away;
	_Atomic uint32_t started; /* futex: 0 until the hog is set up */
	pid_t tid;
	int status_fd; /* /proc/thread-self/status, for redirect_signals() */
	pthread_t thread;
	struct ctx *ctx;
	int policy, priority, nice, rt_errno;
	_Atomic uint64_t run, refused, slept, overran, migrated;
	size_t masksize;
	cpu_set_t *mask; /* scratch for the affinity check */
	/* The hog's own (hog.c, hog_here()): whether its affinity read as
	 * its CPU alone, at which g_moved, and batches until the next read. */
	bool pinned;
	uint32_t moved_seen;
	unsigned int until_reread;
	/* Stops: the generation this hog holds its CPU for, and when it last
	 * looked around while spinning (read by the other hogs). */
	_Atomic uint32_t held_gen;
	_Atomic uint64_t beat;
	uint32_t rng; /* the hog's own: when it looks next (jitter()) */
	/* The wake tree (wake.c): the hogs this one wakes when it takes
	 * its slot, written by the caller while the slot is free. */
	struct hog **kids;
	unsigned int nkids;
	uint64_t topo; /* its place in topology order (topology.c) */

	/* The work of multi-CPU calls, one at a time (serialized). */
	struct work slot;

	/* Poll mode (poll.c).  Written by the hog: its batch count, which
	 * tells its poller when work last came (poll_ns). */
	_Atomic uint32_t batches;
	/* Written by the poller, read by producers: when it last looked
	 * (0: parked), the last barrier it acknowledged, the wakes it took;
	 * and the futex it parks on. */
	alignas(CACHELINE) _Atomic uint64_t poll_beat;
	_Atomic uint32_t poll_ack;
	_Atomic uint32_t poll_parked; /* futex: how it is parked, 0 polling */
	_Atomic uint64_t poll_claims, poll_fallbacks;
	_Atomic bool poll_stop;
	_Atomic bool poll_left; /* out of its loop: changes its policy no more */
	_Atomic bool poller_on; /* read by producers and the hog */
	cpu_set_t *poll_mask; /* the poller's scratch for pin_to() */
	int poll_fd;    /* the poller's /proc/stat, -1 when it has none */
	char *poll_buf; /* and its buffer: ctx_free() frees both in a fork */
	pthread_t poller;
};

struct stop_state; /* stop_machine.c */

struct ctx {
	unsigned int nr_cpu_ids;
	unsigned int nr_hogs;
	struct hog **by_cpu; /* nr_cpu_ids entries; NULL: no hog */
	struct hog **by_topo; /* nr_hogs entries, in topology order */
	unsigned int fanout;  /* the wake tree's k (wake.c) */
	uint64_t attr_fanout; /* cpuhog_attr.wake_fanout, 0: see wake.c */
	struct hog **kid_store; /* nr_hogs * fanout: every hog's kids */
	struct hog *hogs;    /* nr_hogs entries */
	unsigned int flags;
	int want_priority;
	size_t stack_size;
	uint64_t overrun_ns, stop_timeout_ns, spin_ns, poll_ns;
	bool rt_ok; /* every hog runs SCHED_FIFO */

	/* Multi-CPU calls. */
	pthread_mutex_t multi_lock;
	uint32_t multi_gen; /* under multi_lock */
	uint64_t backoff_at; /* under multi_lock: see multi_unlock() */
	uint64_t transit_at; /* under multi_lock: see in_transit() */
	bool transit;
	struct group group;
	struct hog **msel; /* nr_hogs entries, under multi_lock */
	cpu_set_t *mscratch; /* for hog_usable(), under multi_lock */
	cpu_set_t *mscratch2; /* for in_transit(), under multi_lock */
	uint32_t *mflags;  /* work flags per msel entry, under multi_lock */
	struct stop_state *stop;
	_Atomic uint64_t stops, stop_timeouts, holds_released;
	_Atomic uint64_t transit_naps; /* multi_unlock()'s hotplug naps */
	_Atomic uint64_t late_waits;   /* see cpuhog_info.late_waits */
	_Atomic uint64_t stop_misses;  /* see cpuhog_info.stop_misses */
	_Atomic bool sync_away; /* hog_synchronize(): a hog ran off its CPU */
	/* hog_synchronize()'s passes: twice the passes begun, plus one while
	 * one runs (odd); written under multi_lock (sched.c) */
	_Atomic uint64_t sync_seq;

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

/* hog.c */
HIDDEN extern _Thread_local struct hog *cpuhog_self;
/* Inside a call that may block or lock (call_enter()), or in cpuhog_init()
 * or cpuhog_shutdown(): a signal handler of this thread must not enter
 * another.  Written and read by one thread, its handlers included. */
HIDDEN extern _Thread_local volatile sig_atomic_t in_call;
HIDDEN extern _Atomic uint64_t g_spin_ns; /* hog_work_wait() holds no
					     reference to the context */
HIDDEN extern _Atomic uint32_t g_epoch;  /* moves on in a forked child */
HIDDEN void *hog_main(void *arg);
HIDDEN void wake_hog(struct hog *h);
HIDDEN void push_work(struct hog *h, struct work *w);
HIDDEN uint64_t topo_key(unsigned int cpu, size_t setsize, cpu_set_t *scratch,
			 unsigned int nr_cpu_ids);
HIDDEN void topo_sort(struct ctx *c);
HIDDEN unsigned int fanout_of(uint64_t want, unsigned int nr_hogs);
HIDDEN struct hog *wake_plan(struct ctx *c, struct hog **o, uint32_t *flags,
			      unsigned int n);
HIDDEN void wake_kids(struct hog *h);
HIDDEN struct ctx *ctx_get(int *err);
HIDDEN void ctx_put(void);
HIDDEN struct ctx *call_enter(int *err); /* lifecycle.c */
HIDDEN void call_leave(void);
HIDDEN struct hog *hog_of(struct ctx *c, unsigned int cpu);
HIDDEN int hog_cpu_set(size_t setsize, cpu_set_t *set,
		       bool (*which)(const struct hog *h)); /* lifecycle.c */
HIDDEN void queue_work(struct hog *h, struct work *w);
HIDDEN int work_wait(struct work *w, bool may_spin, uint64_t spin_ns);
HIDDEN int slot_wait_free(struct work *slot, uint64_t deadline);

/* multi.c */
HIDDEN unsigned int multi_select(struct ctx *c, size_t setsize,
				 const cpu_set_t *cpus);
HIDDEN int64_t multi_reserve(struct ctx *c, unsigned int n,
			     uint64_t deadline);
HIDDEN void multi_push(struct ctx *c, unsigned int n, uint32_t gen,
		       cpuhog_fn_t fn, void *arg, uint32_t flags);
HIDDEN int multi_wait(struct ctx *c, uint64_t deadline,
		      int (*poll)(struct ctx *c, bool timed_out,
				  uint64_t *deadline));
HIDDEN int multi_result(struct ctx *c, unsigned int n, bool *ran_any);
HIDDEN void group_kick(struct group *g);
HIDDEN int multi_lock(struct ctx *c, bool try);
HIDDEN void multi_unlock(struct ctx *c);
HIDDEN bool hog_usable(struct hog *h, cpu_set_t *scratch, size_t size);

/* poll.c */
HIDDEN bool poll_offer(struct hog *h);
HIDDEN void poll_unpark(struct hog *h);
HIDDEN int poll_start(struct hog *h);
HIDDEN void poll_stop(struct hog *h);
HIDDEN void poll_exit_all(struct hog *hogs, unsigned int n,
			  const struct timespec *until);
HIDDEN unsigned int poll_sync(struct ctx *c, unsigned int n);

/* stop_machine.c */
HIDDEN struct stop_state *stop_state_alloc(struct ctx *c);
HIDDEN void stop_state_free(struct stop_state *st);

/* report.c: what check_begin() saw, for check_end() */
struct check {
	long nvcsw, minflt;
	uint64_t t0;
};
HIDDEN void check_begin(struct check *ck);
HIDDEN void check_end(struct hog *h, cpuhog_fn_t fn, const struct check *ck);
HIDDEN void redirect_signals(struct hog *h);
/* "sym (file+0xoff)" for a code address, as addr2line takes it: the
 * symbol from dladdr() or the object's own symbol table (symbols.c). */
HIDDEN void symbol_describe(const void *addr, char *buf, size_t size);

/*
 * Between a seq_cst store and a seq_cst load of another location, where
 * the two sides of Dekker's pattern meet (a sleeper says it sleeps, then
 * looks for work; a waker publishes work, then looks for a sleeper).
 * C11 orders the pair with no fence, and so do x86 (the store is an
 * xchg) and arm64 hardware (stlr then ldar: RCsc).  QEMU's user-mode
 * emulation of arm64 on an x86 host (7.2, make check-arm64) does not: it
 * puts its barriers before stlr and after ldar, none between, and the
 * host's store buffer reorders the two.  A litmus test of two seq_cst
 * store-load pairs saw the forbidden outcome 2 to 29 times in 200,000,
 * and the soak hung with a hog asleep on queued work (test_calls
 * back_to_back_wakeups_not_lost lost a wake-up in 11 of 20 runs of 3 s
 * without it, in none of 20 with it).  So
 * on arm64 a full fence (dmb ish): a few nanoseconds on hardware, on
 * paths about to sleep or stop.  Elsewhere nothing.
 */
#if defined(__aarch64__)
#define store_load_fence() atomic_thread_fence(memory_order_seq_cst)
#else
#define store_load_fence() ((void)0)
#endif

/* platform.c */
HIDDEN uint64_t now_ns(void);
HIDDEN uint64_t deadline_in(uint64_t ns);
HIDDEN int futex_wait(_Atomic uint32_t *addr, uint32_t val,
		      uint64_t deadline_ns);
HIDDEN void futex_wake(_Atomic uint32_t *addr, int n);
HIDDEN unsigned int possible_cpus(void);
HIDDEN int read_cpulist(const char *path, size_t setsize, cpu_set_t *set,
			 unsigned int max);
HIDDEN bool affine_only(pid_t tid, size_t setsize, cpu_set_t *scratch,
			unsigned int cpu);
HIDDEN bool read_status(int fd, char *buf, size_t size);
HIDDEN bool mask_allows(int status_fd, size_t setsize, cpu_set_t *scratch,
			unsigned int cpu);
HIDDEN bool pinned_to(size_t setsize, cpu_set_t *scratch, unsigned int cpu);
HIDDEN int pin_to(size_t setsize, cpu_set_t *scratch, unsigned int cpu);
HIDDEN void obtain_priority(struct hog *h, int want);
HIDDEN void serialize_core(void);
HIDDEN void thread_switches(long *nvcsw, long *minflt);

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

#define NO_DEADLINE UINT64_MAX

#endif
