/* SPDX-License-Identifier: MIT */
/*
 * cpuhog.h - monopolize CPUs from a Linux application.
 *
 * libcpuhog keeps one preallocated hog thread pinned to each CPU the
 * process may use, at the highest real-time priority it can get, and runs
 * callers' functions on them and nothing else.  It is the user-space
 * counterpart of the kernel's cpu_stop (first posted as "cpuhog").
 *
 * Conventions of every call below:
 *  - errors are negative errno values; a callback's own return value is
 *    passed back unchanged (so a callback should not return -ENOENT & co.
 *    if the caller must tell them apart);
 *  - errors come in one order: a bad argument (-EINVAL), then a CPU that
 *    has no hog or cannot be had (-ENOENT), then a promise that cannot
 *    hold (-EPERM: see CPUHOG_F_WEAK);
 *  - CPU numbers are the kernel's (sched_getcpu(), taskset -c);
 *  - CPU sets follow glibc: @setsize as for sched_setaffinity(), so sets
 *    from CPU_ALLOC() of any size work;
 *  - "hog context" means inside a callback run by a hog.  Calls that wait
 *    return -EDEADLK there: a hog cannot wait for itself;
 *  - signal handlers: hog_one_cpu_nowait(), hog_work_done(),
 *    hog_work_wait(), cpuhog_attr_init() and cpuhog_version() are
 *    async-signal-safe once the library is initialised (AS-Safe in
 *    attributes(7)); every other call is AS-Unsafe.  Called from a
 *    handler whose thread was inside another call of the library, a call
 *    that may block returns -EDEADLK rather than wait for what its own
 *    thread holds (cpuhog_shutdown() returns at once).
 *
 * Callbacks must not sleep (no blocking locks, no I/O, no sleeping
 * syscalls) and should be short: a hog at SCHED_FIFO 99 freezes its CPU
 * for every other thread until it returns.  User space cannot disable
 * preemption, so the library checks instead: see CPUHOG_STRICT below.
 *
 * What user space cannot give: hogs do not stop interrupts, softirqs or
 * the kernel's own per-CPU stopper (which outranks SCHED_FIFO 99), and
 * RT throttling (/proc/sys/kernel/sched_rt_runtime_us, 950 ms of every
 * second by default) lets other threads run when a hog spins for longer.
 */
#ifndef CPUHOG_H
#define CPUHOG_H

/*
 * cpu_set_t and the CPU_* macros are GNU API of <sched.h>: _GNU_SOURCE
 * must be defined before the first #include of the file, which only the
 * compiler's command line can promise.  `pkg-config --cflags cpuhog` and
 * the CMake targets cpuhog::cpuhog and cpuhog::cpuhog_static carry
 * -D_GNU_SOURCE; g++ defines it always.
 */
#include <sched.h>
#if !defined(__USE_GNU) || !defined(CPU_SETSIZE)
#error "cpuhog.h needs _GNU_SOURCE (for cpu_set_t): compile with -D_GNU_SOURCE (pkg-config --cflags cpuhog and the CMake target cpuhog::cpuhog give it), or #define _GNU_SOURCE before the first #include"
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CPUHOG_API __attribute__((visibility("default")))
#else
#define CPUHOG_API
#endif

#define CPUHOG_VERSION_MAJOR 0
#define CPUHOG_VERSION_MINOR 1
#define CPUHOG_VERSION_PATCH 0
#define CPUHOG_VERSION_STRING "0.1.0"

/* A function run by a hog.  Its return value is passed back to the caller. */
typedef int (*cpuhog_fn_t)(void *arg);

/*
 * A work buffer for hog_one_cpu_nowait(), owned by the caller.  It must be
 * zeroed before its first use (static storage, "= CPUHOG_WORK_INIT" or
 * memset); after that it may be queued again once its work has finished.
 * The contents are private.
 */
struct cpuhog_work {
	union {
		void *p[8];
		uint64_t u[8];
	} private_;
};
#define CPUHOG_WORK_INIT                                                       \
	{                                                                      \
		{                                                              \
			{ 0 }                                                  \
		}                                                              \
	}

/* Flags for cpuhog_attr.flags. */
enum {
	/* Abort the process when a callback sleeps (like the kernel's
	 * "scheduling while atomic").  The environment variable
	 * CPUHOG_STRICT=1 sets it too.  "Sleeps" is a voluntary context
	 * switch beyond the callback's minor page faults: a fault may wait
	 * for the mmap lock that another thread's fork() or mmap() holds,
	 * which is not the callback's doing.  So a callback that faults and
	 * sleeps in one run can escape once; a major fault counts. */
	CPUHOG_F_STRICT = 1u << 0,
	/* Weak mode: let the calls whose promise is exclusion (hog_one_cpu,
	 * hog_one_cpu_nowait, hog_cpus, hog_cpus_ran, try_hog_cpus,
	 * stop_machine, stop_two_cpus) run where that promise cannot hold,
	 * instead of refusing with -EPERM: when the hogs could not get
	 * real-time priority (another thread of ours may then preempt a
	 * hog mid-fn), and, for stop_machine(), when an explicit
	 * cpuhog_attr.cpus leaves out a CPU where a thread of ours may run.
	 * The environment variable CPUHOG_WEAK=1 sets it too. */
	CPUHOG_F_WEAK = 1u << 1,
	CPUHOG_F_WEAK_STOP = CPUHOG_F_WEAK, /* its first name */
	/* Do not check callbacks for sleeping or overrunning (saves two
	 * getrusage() calls per callback). */
	CPUHOG_F_NO_CHECKS = 1u << 2,
	/* Poll mode: a poller thread per hogged CPU, at SCHED_IDLE, sees
	 * new work and wakes the hog on its own CPU, instead of the caller
	 * waking it from another: calls to idle CPUs near the cache-line
	 * floor.  Callbacks still run in the hogs, with every promise of
	 * sleep mode.  A poller steps aside while another task wants its
	 * CPU (callers then wake the hog as in sleep mode).  Cost: idle
	 * polled CPUs are 100% busy (top, power, an SMT sibling, a VM's
	 * host).  CPUHOG_POLL=1 sets it too; cpuhog_info.flags has it only
	 * when every poller runs.  See cpuhog_get_polling(). */
	CPUHOG_F_POLL = 1u << 3,
};

/*
 * Options for cpuhog_init().  Call cpuhog_attr_init() first, then change
 * what you need: the structure may grow in later versions (the size field
 * tells the library which version the caller was built against), and
 * zero always means "the default".
 */
struct cpuhog_attr {
	size_t size;        /* set by cpuhog_attr_init() */
	unsigned int flags; /* CPUHOG_F_* */
	/* SCHED_FIFO priority for the hogs; 0: sched_get_priority_max(). */
	int priority;
	/* Stack of each hog thread; 0: 56 KiB (more under sanitizers). */
	size_t stack_size;
	/* A callback running longer than this is reported; 0: 100 ms.
	 * Also how long stop_machine() holds the other CPUs for a fn that
	 * has not returned (see there); UINT64_MAX: never reported. */
	uint64_t overrun_ns;
	/* stop_machine()/stop_two_cpus() give up when no hog arrived for
	 * this long (from the call, then from the latest arrival), or the
	 * hogs were not all held this long after the last arrival; 0:
	 * 200 ms, or CPUHOG_STOP_TIMEOUT_MS from the environment (for a VM
	 * whose vCPUs share few host CPUs, which can leave one unrun for
	 * longer); CPUHOG_NO_TIMEOUT: wait for ever (the waiting hogs
	 * sleep). */
	uint64_t stop_timeout_ns;
	/* A caller waiting for a hog on another CPU spins this long before
	 * it sleeps; 0: 50 us; CPUHOG_NO_SPIN: never spin; at most one
	 * second (-EINVAL beyond). */
	uint64_t spin_ns;
	/* CPUs to put hogs on (bits beyond setsize are clear); a CPU that
	 * cannot exist here (not in /sys/devices/system/cpu/possible) is
	 * -EINVAL.  NULL: every possible CPU, as the kernel keeps a stopper
	 * per possible CPU.  A CPU that is offline or outside the cpuset
	 * has its hog all the same, away until the CPU can be had: so a
	 * CPU that comes online or joins the cpuset later, or that a
	 * thread of ours widens its affinity to, has its hog before the
	 * next call needs it.  A set that leaves out a CPU where a thread
	 * of ours may run makes stop_machine() refuse (-EPERM) unless
	 * CPUHOG_F_WEAK. */
	size_t cpus_setsize;
	const cpu_set_t *cpus;
	/* Poll mode: a poller parks this long after its hog's last work,
	 * until the next (the adaptive choice; Seastar polls 200 us);
	 * 0: it polls for as long as its CPU is idle. */
	uint64_t poll_ns;
	/* Multi-CPU calls wake their hogs down a tree: the caller wakes at
	 * most this many, and each woken hog as many more; 0: 4, or
	 * CPUHOG_WAKE_FANOUT from the environment; CPUHOG_WAKE_FLAT (or
	 * any number of CPUs or more): the caller wakes every hog itself.
	 * 1 is -EINVAL. */
	uint64_t wake_fanout;
	uint64_t reserved_[6];
};
#define CPUHOG_NO_SPIN UINT64_MAX
#define CPUHOG_NO_TIMEOUT UINT64_MAX
#define CPUHOG_WAKE_FLAT UINT64_MAX

/* What cpuhog_get_info() reports. */
struct cpuhog_info {
	unsigned int nr_cpu_ids; /* one more than the highest CPU number */
	/* CPUs that have a hog: every CPU of the set (cpuhog_attr.cpus),
	 * online or not; the hog of a CPU that cannot be had now waits,
	 * away, until it can. */
	unsigned int nr_hogs;
	cpu_set_t cpus; /* those below CPU_SETSIZE; see cpuhog_get_cpus()
			   for larger machines */
	/* The weakest scheduling any hog obtained: policy SCHED_FIFO with
	 * priority, or SCHED_OTHER with nice.  rt_errno says why real time
	 * was refused (EPERM: no CAP_SYS_NICE and RLIMIT_RTPRIO 0), else 0. */
	int policy;
	int priority;
	int nice;
	int rt_errno;
	unsigned int flags; /* CPUHOG_F_* in force */
	size_t stack_size;  /* of each hog thread */
	/* Counters since cpuhog_init(), over all hogs.  Once the hogs are
	 * idle: queued == run + refused. */
	uint64_t queued;   /* works handed to a hog */
	uint64_t run;      /* callbacks run */
	uint64_t refused;  /* works failed without running (-ENOENT: the
			      hog was off its CPU) */
	uint64_t slept;    /* callbacks that blocked */
	uint64_t overran;  /* callbacks longer than overrun_ns */
	uint64_t migrated; /* callbacks that ended on another CPU than they
			      began (the CPU went away under them) */
	uint64_t stops;    /* stop_machine()/stop_two_cpus() that ran fn */
	uint64_t stop_timeouts; /* ... that gave up (-ETIMEDOUT) */
	uint64_t holds_released; /* stops whose hold ended before fn
				    returned (see stop_machine()) */
	/* Poll mode: wake-ups a poller took; wake-ups callers made while
	 * poll mode was on (the poller was not running: its CPU busy, or
	 * parked); CPUs that hog_synchronize() did not wake, their poller
	 * having acknowledged. */
	uint64_t poll_claims;
	uint64_t poll_fallbacks;
	uint64_t poll_sync_acks;
	/* Naps of 4 ms a multi-CPU call took after it ended, because a CPU
	 * was half-way through going offline (the kernel's threads must run
	 * on the CPUs left); a CPU that is merely out of the cpuset costs
	 * none. */
	uint64_t transit_naps;
	/* Debugging: waits of a stop (a hog's or the caller's) that saw
	 * the stop's deadline more than a millisecond after it passed
	 * (their thread was not run, or something kept it from looking).
	 * A hang is then more than a bare timeout. */
	uint64_t late_waits;
	/* Stops that ran fn on fewer CPUs than asked (none: -ENOENT; some:
	 * -EINTR): a hog moved off its CPU in the microseconds between its
	 * last check and fn (see stop_machine()). */
	uint64_t stop_misses;
	/* Passes hog_synchronize() made: concurrent callers share them, so
	 * this may be less than the calls (see hog_synchronize()). */
	uint64_t sync_passes;
	/* Stops that found another process's stop under way and waited for
	 * it (stops are serialized machine-wide, see stop_machine()). */
	uint64_t stop_lock_waits;
	/* 1 where stops are serialized with other processes' (a lock on
	 * /run/lock/cpuhog-stop.lock); 0 where that file cannot be had
	 * (another mount namespace, a read-only /run): two processes'
	 * stops at once may then time out against each other. */
	unsigned int stop_serialized;
};

/*
 * cpuhog_attr_init - fill @attr with the defaults.
 * Context: any.
 */
CPUHOG_API void cpuhog_attr_init(struct cpuhog_attr *attr);

/*
 * cpuhog_init - create the hogs: one thread per CPU, pinned, at real-time
 * priority where the process may have it.
 * @attr: options, or NULL for the defaults.
 *
 * Optional: every call below initialises with the defaults if needed.
 * After fork() the child has no hogs; its first call makes them with the
 * attributes the parent's hogs were made with (flags, priority, timeouts,
 * poll_ns, the CPU set), as a child inherits its parent's affinity.  An
 * explicit cpuhog_init() in the child uses what it is given instead.
 * Context: may sleep; not from hog context.
 * Returns 0; -EALREADY if already initialised (nothing changes); -EINVAL
 * for a bad @attr (a CPU in @attr->cpus that cannot exist here too);
 * -ENOENT if no CPU of the set can be had now (offline, outside the
 * cpuset); -EDEADLK from hog context; -ENOMEM or -EAGAIN if threads
 * cannot be created.
 */
CPUHOG_API int cpuhog_init(const struct cpuhog_attr *attr);

/*
 * cpuhog_shutdown - stop every hog and free the library's memory.
 *
 * Waits for calls in progress and for queued works, which still run.
 * Calls that start meanwhile return -ESHUTDOWN; calls after it
 * initialise again.  dlclose() of the library, and exit() with no call
 * in progress, do the same, joining the hogs for at most 250 ms.
 * Context: may sleep; does nothing from hog context.
 */
CPUHOG_API void cpuhog_shutdown(void);

/*
 * cpuhog_get_info - what the hogs obtained, and their counters.
 * Context: may sleep (initialises if needed).
 * Returns 0, -EINVAL for NULL, or an error of cpuhog_init().
 */
CPUHOG_API int cpuhog_get_info(struct cpuhog_info *info);

/*
 * cpuhog_get_cpus - the CPUs that have a hog, in a set of any size.
 * Context: may sleep (initialises if needed).
 * Returns the number of hogs; -EINVAL if @set is NULL or too small for
 * nr_cpu_ids.
 */
CPUHOG_API int cpuhog_get_cpus(size_t setsize, cpu_set_t *set);

/*
 * cpuhog_get_polling - the CPUs whose poller is polling at this moment
 * (poll mode): not parked by poll_ns, not stepped aside for another task,
 * not away with its CPU.  A snapshot; it changes as the CPUs get busy.
 * Context: may sleep (initialises if needed).
 * Returns how many; 0 in sleep mode; -EINVAL if @set is NULL or too
 * small for nr_cpu_ids.
 */
CPUHOG_API int cpuhog_get_polling(size_t setsize, cpu_set_t *set);

/*
 * hog_one_cpu - run fn(arg) on @cpu in full hog mode, and wait for it.
 * Context: may sleep; not from hog context.
 * Returns what fn returned; -EINVAL for NULL @fn; -ENOENT if @cpu has no
 * hog or is not usable now (offline, outside the cpuset): fn did not run;
 * -EPERM if the hogs lack real-time priority and CPUHOG_F_WEAK is not
 * set (another thread of ours could run on @cpu beside fn); -EDEADLK
 * from hog context; -ESHUTDOWN during cpuhog_shutdown().
 */
CPUHOG_API int hog_one_cpu(unsigned int cpu, cpuhog_fn_t fn, void *arg);

/*
 * hog_one_cpu_nowait - queue fn(arg) on @cpu and return at once.
 * @work_buf: zeroed before first use, not queued now; the caller keeps it
 * alive until the work has finished (hog_work_wait()).
 *
 * Works queued to one CPU run in the order they were queued.
 * Context: any thread, hog context included; does not sleep once the
 * library is initialised.
 * Returns true if queued; false, with nothing queued, for NULL @fn or
 * @work_buf, a buffer still queued or running, a @cpu without a hog, hogs
 * without real-time priority (unless CPUHOG_F_WEAK, as hog_one_cpu()), or
 * during cpuhog_shutdown().  A queued work on a CPU that went away
 * finishes with -ENOENT without running.
 */
CPUHOG_API bool hog_one_cpu_nowait(unsigned int cpu, cpuhog_fn_t fn, void *arg,
				   struct cpuhog_work *work_buf);

/*
 * hog_work_wait - wait for a work queued by hog_one_cpu_nowait().
 * Context: may sleep; not from hog context.  Several threads may wait.
 * Returns what fn returned (again on each call, until the buffer is
 * queued anew); -ENOENT if the work did not run, which includes a work
 * queued by the parent of a forked child, waited for in the child (it
 * runs in the parent only); -EINVAL for a buffer never queued; -EDEADLK
 * from hog context, or from a signal handler whose thread was inside a
 * call of the library (perhaps the hog_one_cpu_nowait() queueing this
 * very buffer).
 */
CPUHOG_API int hog_work_wait(struct cpuhog_work *work_buf);

/*
 * hog_work_done - whether hog_work_wait() would return at once: true for
 * a finished work, and for a buffer never queued; false while queued or
 * running.
 * Context: any.
 */
CPUHOG_API bool hog_work_done(const struct cpuhog_work *work_buf);

/*
 * hog_cpus - run fn(arg) on every CPU of @cpus that has a hog, and wait.
 *
 * All works are queued before any is waited for; the callbacks do not
 * wait for one another (see stop_machine() for that).  CPUs without a hog
 * are skipped.  Serialized with every other multi-CPU call.
 * Context: may sleep; not from hog context.
 * Returns 0 if every callback returned 0, else one of their non-zero
 * values; -ENOENT if fn ran nowhere (an empty set too); -EINVAL for NULL
 * @cpus or @fn; -EPERM, with nothing run, if the hogs lack real-time
 * priority and CPUHOG_F_WEAK is not set; -EDEADLK from hog context.
 */
CPUHOG_API int hog_cpus(size_t setsize, const cpu_set_t *cpus, cpuhog_fn_t fn,
			void *arg);

/*
 * hog_cpus_ran - hog_cpus(), and where fn ran.
 * @ran: filled (@setsize bytes, as @cpus; it may be @cpus) with the CPUs
 * whose hog ran fn.
 * A CPU of @cpus missing from it was skipped (it has no hog) or refused
 * (it went offline or left the cpuset before fn started there): a drain
 * of per-CPU data learns here which CPUs it still has to visit.
 * Returns as hog_cpus(); @ran is filled whatever it returns but -EINVAL
 * (for NULL @ran too) and -EDEADLK.
 */
CPUHOG_API int hog_cpus_ran(size_t setsize, const cpu_set_t *cpus,
			    cpuhog_fn_t fn, void *arg, cpu_set_t *ran);

/*
 * try_hog_cpus - hog_cpus(), unless another multi-CPU call is in progress.
 * Returns as hog_cpus(), or -EAGAIN at once with nothing queued.
 */
CPUHOG_API int try_hog_cpus(size_t setsize, const cpu_set_t *cpus,
			    cpuhog_fn_t fn, void *arg);

/*
 * stop_machine - run fn(data) while every hogged CPU is held.
 * @cpus: the CPUs fn runs on (each must have a hog); NULL: exactly one,
 * whichever hog gets there first (do not rely on which).
 *
 * Every hog enters one rendezvous; fn runs on @cpus while the other hogs
 * spin with signals blocked, and none leaves before fn has returned
 * everywhere.  While fn runs, no other thread of the process, nor any
 * thread of the system below the hogs' priority, runs on a hogged CPU
 * (interrupts and the kernel still do).  Other threads are stopped
 * wherever the scheduler left them, possibly between two loads of what fn
 * changes: the update is indivisible for them, but a reader that needs
 * several words to agree must re-check (a generation, as in
 * examples/stop_machine.c), or the change must be one instruction's
 * worth (examples/livepatch.c).  Each hog serializes its core
 * before it leaves (x86: serialize or cpuid; arm64: isb), so code that fn
 * rewrote is safe to run afterwards, once what fn wrote has reached the
 * instruction side: on x86 it always has; on arm64, whose instruction
 * caches do not snoop data writes, fn must call
 * __builtin___clear_cache(start, end) on the bytes it wrote (the cache
 * maintenance it issues is broadcast to every CPU).
 * No setup, no allocation, no thread creation on its path.  If no hog
 * arrived for cpuhog_attr.stop_timeout_ns (counted from the call, then
 * from the latest arrival), or the hogs were not all held within that
 * long of the last arrival, it releases every CPU and returns -ETIMEDOUT
 * with fn run nowhere.  So a CPU held by someone else fails the stop in
 * about stop_timeout_ns, while a machine whose CPUs all come, only
 * slowly (an overcommitted VM), still gets its stop.  The deadline counts
 * from the caller's last wake of a hog at the earliest.
 * Offline CPUs (and CPUs that left the cpuset) take no part: nothing of
 * ours runs there.  A CPU that comes online or joins the cpuset between
 * two stops has its hog at the next (cpuhog_attr.cpus); one that comes
 * online during a stop is not held by it (the kernel's stop_machine
 * blocks hotplug meanwhile; user space cannot).  With an explicit
 * cpuhog_attr.cpus that leaves out a CPU where a thread of ours may run
 * (online, in the cpuset), the stop cannot hold that CPU and refuses
 * with -EPERM, unless CPUHOG_F_WEAK.
 *
 * The return value says whether fn ran: 0 or fn's value means it ran
 * exactly once on each CPU of @cpus (once in all for NULL), and nowhere
 * else; -EINTR means it ran on some CPUs of @cpus but not all (below);
 * any other error means it ran nowhere.
 *
 * The hold has two limits, and the kernel sets both.  If a held CPU
 * starts going offline (or leaves the cpuset) before fn starts, the stop
 * begins again on the CPUs left, as the kernel's stop_two_cpus() does,
 * and after four such tries gives up with -ENOENT: every hog says it is
 * still on its own CPU after all are held, and each checks again just
 * before fn.  A hog moved in
 * the microseconds between the two leaves fn alone: -ENOENT if fn ran
 * nowhere, -EINTR if it ran on other CPUs of @cpus
 * (cpuhog_info.stop_misses counts both).  Once fn runs: if a held CPU goes away, or fn
 * runs longer than cpuhog_attr.overrun_ns (100 ms; a fn that blocks on a
 * lock whose owner a hog keeps off its CPU would otherwise spin the
 * others until RT throttling, or for ever without it), the other hogs
 * stop spinning and sleep until fn returns: from then on other threads
 * may run beside fn.  fn still runs to its end and its value is
 * returned; cpuhog_info.holds_released counts such stops, and the
 * overrun is reported.
 * Serialized with every other multi-CPU call, and with other processes'
 * stops (the kernel's stop_cpus_mutex, machine-wide): one that finds
 * another's under way waits for it, at most four stop_timeout_ns (a
 * holder that keeps it longer is taken for one that squats on the file:
 * the stop then goes on unserialized, as well as it can, and times out
 * only if another stop really holds the CPUs); cpuhog_info.stop_serialized
 * says where the lock cannot be had at all, cpuhog_info.stop_lock_waits
 * counts the waits.
 * Context: may sleep; not from hog context.  fn must not sleep.
 * Returns 0 or a non-zero value fn returned; -EINVAL for NULL @fn;
 * -ENOENT if a CPU of @cpus has no hog or is offline, if @cpus is empty,
 * if no hogged CPU is online, or if a CPU went away before fn started
 * (fn ran nowhere: call again); -EINTR if a CPU of @cpus went away just
 * before fn started there, fn having run on others of @cpus;
 * -ETIMEDOUT (fn ran nowhere); -EPERM (fn ran nowhere) if the hogs
 * lack real-time priority, or a thread of ours may run on a CPU that has
 * no hog, and CPUHOG_F_WEAK is not set; -EDEADLK from hog context.
 */
CPUHOG_API int stop_machine(cpuhog_fn_t fn, void *data, size_t setsize,
			    const cpu_set_t *cpus);

/*
 * stop_two_cpus - stop_machine() on two CPUs: fn(arg) runs on @cpu1 while
 * @cpu2 spins in the same rendezvous.
 * Context and returns as stop_machine(); -EINVAL if the CPUs are equal,
 * -ENOENT if either has no hog or is offline (as the kernel's); -EPERM
 * only for priority: it holds the two CPUs, not the machine.
 */
CPUHOG_API int stop_two_cpus(unsigned int cpu1, unsigned int cpu2,
			     cpuhog_fn_t fn, void *arg);

/*
 * A stop's report, asked for by stop_machine_report() and
 * stop_two_cpus_report(): who came, when, what held the stop up; and
 * the report of the calls that hold nothing, hog_cpus_report() and
 * hog_synchronize_report() (what each fills is said there).  Call
 * cpuhog_report_init() first, then point @cpu at an array of your own
 * for the per-CPU part (NULL: none); the structure may grow in later
 * versions (the size field tells the library which version the caller
 * was built against).  Times are nanoseconds of CLOCK_MONOTONIC from the
 * call's start; 0 means "never".  Filling it allocates nothing unless the
 * stop failed (then /proc is read, see below).
 */
enum {
	/* cpuhog_report.ended: how the (last) rendezvous ended */
	CPUHOG_END_NONE = 0,  /* none began (a bad argument, -EPERM...) */
	CPUHOG_END_RAN,	      /* every CPU was held and fn ran */
	CPUHOG_END_TIMEDOUT,  /* a CPU never came: -ETIMEDOUT */
	CPUHOG_END_NOCPU,     /* a CPU went away before fn: -ENOENT */
	/* -ETIMEDOUT after another process kept the machine-wide stop
	 * lock past its bound (the stop went on unserialized) */
	CPUHOG_END_LOCKED_OUT,
};
enum {
	/* cpuhog_report.released: why the hold ended before fn returned */
	CPUHOG_RELEASED_NONE = 0, /* it stood until fn returned */
	CPUHOG_RELEASED_LOST,	  /* a held CPU went away while fn ran */
	CPUHOG_RELEASED_OVERRUN,  /* fn ran past cpuhog_attr.overrun_ns */
};
/* cpuhog_report_cpu.flags */
enum {
	CPUHOG_RC_ARRIVED = 1u << 0, /* its hog came to the rendezvous */
	CPUHOG_RC_HELD = 1u << 1,    /* and was held with all the others */
	CPUHOG_RC_RAN = 1u << 2,     /* fn ran there */
	CPUHOG_RC_MISSING = 1u << 3, /* its hog never came: see pid... */
};

/* One CPU of the stop's last rendezvous. */
struct cpuhog_report_cpu {
	unsigned int cpu;
	unsigned int flags;   /* CPUHOG_RC_* */
	uint64_t arrived_ns;  /* its hog arrived on its CPU */
	uint64_t held_ns;     /* its hog saw every CPU arrived */
	uint64_t released_ns; /* its hog stopped holding (left, or slept) */
	/* CPUHOG_RC_MISSING: the task found running there: of the
	 * runnable tasks last on this CPU (/proc/PID/task/TID/stat, hogs
	 * of ours and the calling thread aside), the one that ran while watched (schedstat, up to
	 * 25 ms: /proc's times move at the scheduler's tick), the highest
	 * priority breaking a tie; pid 0: none found.  A
	 * snapshot, taken after the stop gave up: the holder may have
	 * moved or gone. */
	pid_t pid, tid;
	int policy;   /* SCHED_FIFO, SCHED_RR, SCHED_OTHER... */
	int priority; /* rt_priority (0 for SCHED_OTHER) */
	char comm[16];
	unsigned int nr_running; /* tasks found runnable there, hogs aside */
};

struct cpuhog_report {
	size_t size;		    /* set by cpuhog_report_init() */
	struct cpuhog_report_cpu *cpu; /* the caller's array, or NULL */
	unsigned int cpu_len;	    /* its entries */
	/* Filled by the call: */
	unsigned int nr_cpu;   /* CPUs of the last rendezvous (entries
				  filled: min(nr_cpu, cpu_len)), */
	unsigned int nr_missing; /* of which never came */
	int ret;	       /* what the call returned */
	unsigned int ended;    /* CPUHOG_END_* */
	unsigned int released; /* CPUHOG_RELEASED_* */
	unsigned int tries;    /* rendezvous begun (more: CPUs went away) */
	unsigned int fn_runs;  /* CPUs fn ran on */
	bool serialized;       /* held the machine-wide stop lock */
	bool lock_waited;      /* and found another process's stop in it */
	uint64_t all_held_ns;  /* every CPU was held (0: never) */
	uint64_t hold_ns;      /* the hold's length: until the first CPU
				  stopped holding */
	uint64_t total_ns;     /* the whole call */
	/* The same, as sets (CPUs below CPU_SETSIZE): */
	cpu_set_t ran;	   /* fn ran there */
	cpu_set_t held;	   /* held with all the others */
	cpu_set_t missing; /* never came */
	uint64_t reserved_[8];
};

/*
 * cpuhog_report_init - zero @rep and set its size; then set @rep->cpu and
 * @rep->cpu_len for the per-CPU part.
 * Context: any (async-signal-safe).
 */
CPUHOG_API void cpuhog_report_init(struct cpuhog_report *rep);

/*
 * stop_machine_report - stop_machine(), and a report of it into @rep
 * (NULL: stop_machine() itself).
 *
 * The report says which CPUs ran fn and, per CPU of the last rendezvous
 * (a rendezvous begun again when a CPU went away: tries), when its hog
 * arrived, was held and let go; when every CPU was held and for how
 * long; whether the hold was released before fn returned, and why.  When
 * the stop fails (-ETIMEDOUT, -ENOENT), the CPUs whose hog never came
 * are marked CPUHOG_RC_MISSING, each with the task that ran there as far
 * as /proc tells: read only then, after the CPUs are let go (it may
 * allocate).  The hogs take the times only for a call that asks.
 * Context: as stop_machine().
 * Returns as stop_machine(); -EINVAL also for a @rep whose size is
 * below the first version's, or a cpu_len without an array.  @rep is
 * filled whatever it returns, but for -EINVAL.
 */
CPUHOG_API int stop_machine_report(cpuhog_fn_t fn, void *data, size_t setsize,
				   const cpu_set_t *cpus,
				   struct cpuhog_report *rep);

/*
 * stop_two_cpus_report - stop_two_cpus(), and a report of it, as
 * stop_machine_report().
 */
CPUHOG_API int stop_two_cpus_report(unsigned int cpu1, unsigned int cpu2,
				    cpuhog_fn_t fn, void *arg,
				    struct cpuhog_report *rep);

/*
 * hog_cpus_report - hog_cpus(), and a report of it into @rep (NULL:
 * hog_cpus() itself).
 *
 * Nothing is held, so the report is of the works: per CPU of the call
 * (the selected hogs, in the wake tree's order), arrived_ns when fn
 * started there and released_ns when it returned, flags
 * CPUHOG_RC_ARRIVED | CPUHOG_RC_RAN where it ran, none where the hog
 * refused (its CPU went offline or left the cpuset); all_held_ns when
 * every CPU of the call had started fn (0: not every one did); fn_runs,
 * ran; tries 1 once the works were queued; ended CPUHOG_END_RAN, or
 * CPUHOG_END_NOCPU where fn ran nowhere, or CPUHOG_END_NONE where the
 * call failed before queueing (-EINVAL, -ENOENT, -EPERM, -EDEADLK).  held_ns, hold_ns, held,
 * released, serialized and lock_waited stay 0; no CPU is ever missing
 * (hog_cpus() waits for every one).  The hogs take the times only for a
 * call that asks; the report allocates nothing.
 * Context: as hog_cpus().
 * Returns as hog_cpus(); -EINVAL also for a bad @rep (as
 * stop_machine_report()).  @rep is filled whatever it returns, but for
 * a bad @rep.
 */
CPUHOG_API int hog_cpus_report(size_t setsize, const cpu_set_t *cpus,
			       cpuhog_fn_t fn, void *arg,
			       struct cpuhog_report *rep);

/*
 * hog_synchronize - force every hogged CPU through the scheduler.
 *
 * Returns once each hogged CPU has run its hog since the call began (the
 * caller's own CPU counts at once: the caller runs there).  Every thread
 * that was running on those CPUs has been switched out meanwhile, which
 * is a full memory barrier between the caller and each of them: what
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) gives.  It is a barrier,
 * not an RCU grace period: it waits for no reader to leave a critical
 * section, and freeing what a reader may still hold after it is a
 * use-after-free.  Threads on CPUs
 * without a hog are not covered.  Works without real-time priority.
 * A hogged CPU that left the cpuset while the call ran may still run a
 * thread of ours the kernel has not moved yet: then the call also asks
 * the kernel for that barrier (membarrier(2)).
 * In poll mode a CPU whose poller runs acknowledges instead of switching
 * to its hog: no thread of ours runs there then (src/poll.c says why
 * that is the same barrier).
 * Concurrent callers share the work, as the kernel's expedited grace
 * periods do: a call is served by any pass over the CPUs that began after
 * it began, so callers that come together cost at most two passes
 * (cpuhog_info.sync_passes counts them).
 * Bounded as stop_machine() is: when no CPU passed for
 * cpuhog_attr.stop_timeout_ns (a CPU held by another process's real-time
 * thread), it gives up with -ETIMEDOUT; the barrier then did not happen.
 * Context: may sleep; not from hog context.
 * Returns 0; -ETIMEDOUT; -EDEADLK from hog context.
 */
CPUHOG_API int hog_synchronize(void);

/*
 * hog_synchronize_report - hog_synchronize(), and a report of it into
 * @rep (NULL: hog_synchronize() itself).
 *
 * The call makes a pass of its own (it does not share another caller's)
 * and reports it: per CPU of the pass, the caller's own (passed as the
 * pass began), those whose poller acknowledged (poll mode: passed when
 * the poll ended), then those whose hog was woken, arrived_ns when the
 * hog ran there and released_ns when it was done; flags
 * CPUHOG_RC_ARRIVED for a CPU that passed, with CPUHOG_RC_RAN where the
 * call succeeded, CPUHOG_RC_MISSING for one whose hog never came;
 * all_held_ns when the last CPU passed (0: not every one did); fn_runs
 * and ran: the CPUs that passed (none on failure: the barrier did not
 * happen); no flags for a CPU whose hog was never asked (the call gave
 * up waiting for its previous work first).  On -ETIMEDOUT each missing
 * CPU names the task that ran there, as stop_machine_report() does (it
 * may then allocate, and reads /proc for up to 25 ms).  CPUs out of reach (offline,
 * outside the cpuset), which the kernel's barrier covers, are not in it.
 * held_ns, hold_ns, held, released, serialized and lock_waited stay 0.
 * Context: as hog_synchronize().
 * Returns as hog_synchronize(); -EINVAL for a bad @rep (as
 * stop_machine_report()).  @rep is filled whatever it returns, but for
 * -EINVAL.
 */
CPUHOG_API int hog_synchronize_report(struct cpuhog_report *rep);

/*
 * hog_migrate - move thread @tid to @cpu, the way the kernel's migration
 * thread did: a hog displaces it from the CPU it runs on, and sets its
 * affinity while it cannot run.
 * @tid: a thread id (gettid()); 0: the calling thread.
 *
 * On return 0, @tid's affinity is {cpu}, it runs nowhere else, and it
 * next runs on @cpu.
 * Context: may sleep; not from hog context.
 * Only threads of this process: another process's thread (or a stale tid
 * the system has given to one) is not the library's to move.
 * Returns 0; -ESRCH for no such thread in this process; -ENOENT if @cpu
 * has no hog or is not usable now (offline, outside the cpuset); -EINVAL
 * if @tid is a hog; -EPERM where the kernel refuses; -EDEADLK from hog
 * context.
 */
CPUHOG_API int hog_migrate(pid_t tid, unsigned int cpu);

/* Convenience: the library's version, "MAJOR.MINOR.PATCH". */
CPUHOG_API const char *cpuhog_version(void);

#ifdef __cplusplus
}
#endif
#endif /* CPUHOG_H */
