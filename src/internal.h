/* SPDX-License-Identifier: MIT */
/*
 * Private to libcpuhog.  A call's path: the header's function ->
 * cpuhog_i_ctx_get() -> cpuhog_i_queue_work() onto a hog's list ->
 * cpuhog_i_hog_main() runs it -> work_finish() -> the caller's wait.
 * Every extern name that is not API is prefixed cpuhog_i_ where it is
 * used, so the reader sees what the linker sees (hidden visibility keeps
 * them out of the shared library's table); a file's own helpers are
 * static and unprefixed.  The rooms, above the context layer
 * (context.h), call only down this list: report.c and poll.c; wake.c;
 * hog.c; lifecycle.c (contexts, every call's entry); call_report.c; then
 * the calls (tests/layers_test.sh).
 */
#ifndef CPUHOG_INTERNAL_H
#define CPUHOG_INTERNAL_H

#include "cpuhog.h"

#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <time.h>

#define HIDDEN __attribute__((visibility("hidden")))
#include "context.h"

/* serialize.c (under the rooms): stops serialized between processes.
 * lock_open(): false where they cannot be. */
struct stop_outcome;
HIDDEN bool cpuhog_i_stop_lock_open(void);
HIDDEN void cpuhog_i_stop_lock(struct ctx *c, struct stop_outcome *o);
HIDDEN void cpuhog_i_stop_unlock(const struct stop_outcome *o);

/* wake.c: waking one hog, and the wake tree of a multi-CPU call */
HIDDEN void cpuhog_i_wake_hog(struct hog *h);
HIDDEN unsigned int cpuhog_i_fanout_of(uint64_t want, unsigned int nr_hogs);
HIDDEN struct hog *cpuhog_i_wake_plan(struct ctx *c, struct sel *s);
HIDDEN void cpuhog_i_wake_kids(struct hog *h);

/* hog.c: the hog's loop, its queue, a work's completion */
HIDDEN void *cpuhog_i_hog_main(void *arg);
HIDDEN void cpuhog_i_hogs_look_again(void);
HIDDEN void cpuhog_i_push_work(struct hog *h, struct work *w);
HIDDEN void cpuhog_i_queue_work(struct hog *h, struct work *w);
HIDDEN int cpuhog_i_work_wait(struct work *w, bool may_spin, uint64_t spin_ns);
HIDDEN int cpuhog_i_slot_wait_free(struct work *slot, uint64_t deadline);

/* lifecycle.c: a call's entry (making the context on first use) */
HIDDEN struct ctx *cpuhog_i_ctx_get(int *err);
HIDDEN struct ctx *cpuhog_i_call_enter(int *err);
HIDDEN void cpuhog_i_call_leave(void);
HIDDEN int cpuhog_i_call_exclusive(const struct ctx *c);

/* multi.c: the call's selection (struct sel) is handed out here */
HIDDEN struct sel *cpuhog_i_multi_sel(struct ctx *c);
HIDDEN struct sel *cpuhog_i_stop_select(struct ctx *c, size_t setsize,
					const cpu_set_t *cpus, bool two,
					unsigned int cpu1, unsigned int cpu2);
HIDDEN int64_t cpuhog_i_multi_reserve(struct ctx *c, const struct sel *s,
				      uint64_t deadline);
HIDDEN struct hog *cpuhog_i_multi_push(struct ctx *c, struct sel *s,
				       uint32_t gen, cpuhog_fn_t fn, void *arg,
				       uint32_t flags);
HIDDEN int cpuhog_i_multi_wait(struct ctx *c, const struct sel *s,
			       uint64_t deadline,
			       int (*poll)(struct ctx *c, bool timed_out,
					   uint64_t *deadline));
HIDDEN int cpuhog_i_multi_lock(struct ctx *c, bool try);
HIDDEN void cpuhog_i_multi_unlock(struct ctx *c);
HIDDEN const cpu_set_t *cpuhog_i_reach(struct ctx *c);
HIDDEN bool cpuhog_i_hog_usable(struct ctx *c, struct hog *h);
HIDDEN bool cpuhog_i_uncovered(struct ctx *c);

/* call_report.c: the reports of stop_machine_report() and the other
 * multi-CPU calls (outcome.h) */
HIDDEN int cpuhog_i_stop_report_begin(struct stop_outcome *o,
				      struct cpuhog_report *rep);
HIDDEN void cpuhog_i_call_report_arm(const struct sel *s);
HIDDEN void cpuhog_i_call_report_cpu(struct stop_outcome *o, unsigned int cpu,
				     unsigned int flags, uint64_t start,
				     uint64_t end);
HIDDEN void cpuhog_i_call_report_hogs(const struct sel *s, bool pushed,
				      struct stop_outcome *o);
HIDDEN void cpuhog_i_stop_report_arm(struct ctx *c, const struct sel *s,
				     bool on);
HIDDEN void cpuhog_i_stop_report_try(const struct sel *s,
				     struct stop_outcome *o);
HIDDEN int cpuhog_i_stop_report_end(struct ctx *c, struct stop_outcome *o,
				    int ret);
HIDDEN bool cpuhog_i_is_hog(const struct ctx *c, pid_t tid);

/* poll.c */
HIDDEN bool cpuhog_i_poll_offer(struct hog *h);
HIDDEN void cpuhog_i_poll_unpark(struct hog *h);
HIDDEN int cpuhog_i_poll_start(struct hog *h);
HIDDEN void cpuhog_i_poll_stop(struct hog *h);
HIDDEN void cpuhog_i_poll_exit_all(struct hog *hogs, unsigned int n,
				   const struct timespec *until);
HIDDEN void cpuhog_i_poll_sync(struct ctx *c, struct sel *s);
HIDDEN bool cpuhog_i_poll_polling(const struct hog *h);
HIDDEN void cpuhog_i_poll_forget(struct hog *h);
HIDDEN void cpuhog_i_poll_counts(const struct ctx *c, uint64_t *claims,
				 uint64_t *fallbacks);

/* switches.c: whether a hog was switched out, from its rseq area where
 * it can (under the rooms: report.c and hog.c use it) */
HIDDEN void cpuhog_i_sw_init(struct hog *h);
HIDDEN void cpuhog_i_sw_now(struct hog *h, struct sw_count *out);
HIDDEN void cpuhog_i_sw_prime(struct hog *h);
HIDDEN long cpuhog_i_sw_slept_since(struct hog *h,
				    const struct sw_count *before);
HIDDEN void cpuhog_i_sw_forget(struct hog *h);

/* report.c: what cpuhog_i_check_begin() saw, for cpuhog_i_check_end() */
struct check {
	struct sw_count sw;
	uint64_t t0;
};
HIDDEN void cpuhog_i_check_begin(struct hog *h, struct check *ck);
HIDDEN void cpuhog_i_check_end(struct hog *h, cpuhog_fn_t fn,
			       const struct check *ck);
HIDDEN void cpuhog_i_redirect_signals(struct hog *h);
/* "sym (file+0xoff)" for a code address, as addr2line takes it: the
 * symbol from dladdr() or the object's own symbol table (symbols.c). */
HIDDEN void cpuhog_i_symbol_describe(const void *addr, char *buf, size_t size);

/* Between the seq_cst store and the seq_cst load of Dekker's pattern
 * (sleeper: say it sleeps, look for work; waker: publish, look for a
 * sleeper).  C11, x86 and arm64 order the pair unfenced; QEMU's
 * user-mode arm64 on x86 (make check-arm64) does not, so arm64 gets a
 * dmb ish: nanoseconds, on paths about to sleep or stop. */
#if defined(__aarch64__)
#define store_load_fence() atomic_thread_fence(memory_order_seq_cst)
#else
#define store_load_fence() ((void)0)
#endif

/* platform.c */
HIDDEN uint64_t cpuhog_i_now_ns(void);
HIDDEN uint64_t cpuhog_i_deadline_in(uint64_t ns);
HIDDEN int cpuhog_i_futex_wait(_Atomic uint32_t *addr, uint32_t val,
			       uint64_t deadline_ns);
HIDDEN void cpuhog_i_futex_wake(_Atomic uint32_t *addr, int n);
/* A waiter's wait (platform.c): WAIT() reads the word first, as each
 * cpuhog_i_wait_turn() does last; a turn returns the time it read, or 0. */
struct wait {
	_Atomic uint32_t *word; /* the futex, which wakers move */
	uint32_t bit, seen;	/* the waiter bit; the word as last read */
	uint64_t spin_end;	/* a time; 0: the spin is over */
	uint64_t deadline;	/* the sleep's */
	unsigned int spins;
	/* the last turn's cpuhog_i_futex_wait(); 1: it did not sleep */
	int slept;
};
#define WAIT(word, bit, spin_end, deadline)                                   \
	{ (word), (bit), atomic_load_explicit((word), memory_order_acquire),  \
	  (spin_end), (deadline), 0, 1 }
HIDDEN uint64_t cpuhog_i_wait_turn(struct wait *w);
HIDDEN void cpuhog_i_wait_kick(_Atomic uint32_t *word);
HIDDEN cpu_set_t *cpuhog_i_possible_set(unsigned int *nr);
HIDDEN int cpuhog_i_read_cpulist(const char *path, size_t setsize,
				 cpu_set_t *set);
HIDDEN bool cpuhog_i_affine_only(pid_t tid, size_t setsize, cpu_set_t *scratch,
				 unsigned int cpu);
HIDDEN ssize_t cpuhog_i_read_fd(int fd, char *buf, size_t size);
HIDDEN ssize_t cpuhog_i_read_file(const char *path, char *buf, size_t size);
HIDDEN const char *cpuhog_i_stat_field(const char *buf, int n);
HIDDEN bool cpuhog_i_mask_allows(int status_fd, size_t setsize,
				 cpu_set_t *scratch, unsigned int cpu);
HIDDEN bool cpuhog_i_pinned_to(size_t setsize, cpu_set_t *scratch,
			       unsigned int cpu);
HIDDEN int cpuhog_i_pin_to(size_t setsize, cpu_set_t *scratch,
			   unsigned int cpu);
HIDDEN int cpuhog_i_thread_start(pthread_t *t, size_t stack, size_t setsize,
				 const cpu_set_t *one, const cpu_set_t *wide,
				 void *(*fn)(void *), void *arg,
				 const char *name);
HIDDEN void cpuhog_i_obtain_priority(struct hog *h, int want);
HIDDEN void cpuhog_i_serialize_core(void);
HIDDEN void cpuhog_i_thread_switches(struct sw_count *out);

/* One more in a hog's counter: relaxed load and store, as the hog is
 * its only writer. */
static inline void hog_bump(_Atomic uint64_t *ctr)
{
	atomic_store_explicit(
		ctr, atomic_load_explicit(ctr, memory_order_relaxed) + 1,
		memory_order_relaxed);
}

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
