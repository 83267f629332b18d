/* SPDX-License-Identifier: MIT */
/*
 * Platform bits: the clock, futexes and the one wait of every waiter,
 * /proc and /sys reads, affinity, scheduling policy, and the
 * core-serializing instruction.  Linux and glibc only; it calls no other
 * file of the library, so any of them may call it.
 */
#include "internal.h"
#include "cpulist.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

uint64_t cpuhog_i_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The time @ns from now, saturating: UINT64_MAX (NO_DEADLINE) is never. */
uint64_t cpuhog_i_deadline_in(uint64_t ns)
{
	uint64_t now = cpuhog_i_now_ns();

	return ns >= NO_DEADLINE - now ? NO_DEADLINE : now + ns;
}

/* Sleep while *addr == val, until woken or the CLOCK_MONOTONIC
 * deadline: 0 (perhaps spurious: callers look again) or -ETIMEDOUT. */
int cpuhog_i_futex_wait(_Atomic uint32_t *addr, uint32_t val,
			uint64_t deadline_ns)
{
	struct timespec ts, *tsp = NULL;
	long r;

	if (deadline_ns != NO_DEADLINE) {
		ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
		ts.tv_nsec = (long)(deadline_ns % 1000000000u);
		tsp = &ts;
	}
	/* BITSET: an absolute deadline */
	r = syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, val, tsp, NULL,
		    FUTEX_BITSET_MATCH_ANY);
	return r < 0 ? -errno : 0;
}

/* @addr may be reused memory by now: a spurious wake-up there, which
 * every waiter tolerates. */
void cpuhog_i_futex_wake(_Atomic uint32_t *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/*
 * The one wait of every waiter, in turns between its looks at what it
 * waits for: a spin until w->spin_end, then its bit set in the futex
 * word, then sleeps on the word until w->deadline; each turn ends with
 * the word read anew.  No wake-up is lost: a waker makes the condition
 * true, then moves the word on (cpuhog_i_wait_kick(), work_finish(),
 * poll.c) or, after a seq_cst store, only loads it (cpuhog_i_wake_hog()).
 * The waiter sleeps only while the word reads as before its last look,
 * bit set: no move since (acquire, against the move's release); against
 * a waker that only loads, the bit's seq_cst CAS and the look after it
 * are the other half of Dekker's pattern.
 */
#define CLOCK_EVERY 16 /* spins per read of the clock */

uint64_t cpuhog_i_wait_turn(struct wait *w)
{
	uint64_t now = 0;

	w->slept = 1;
	if (w->spin_end) {
		cpu_relax();
		if (++w->spins % CLOCK_EVERY == 0 &&
		    (now = cpuhog_i_now_ns()) >= w->spin_end)
			w->spin_end = 0;
	} else if (!(w->seen & w->bit)) {
		/* seq_cst; the next look is after it: Dekker (above) */
		if (atomic_compare_exchange_strong(w->word, &w->seen,
						   w->seen | w->bit))
			store_load_fence(); /* the CAS before the look */
	} else {
		w->slept = cpuhog_i_futex_wait(w->word, w->seen, w->deadline);
		now = cpuhog_i_now_ns();
	}
	/* acquire: the move of the word the next look is judged after */
	w->seen = atomic_load_explicit(w->word, memory_order_acquire);
	return now;
}

/* After making true what the waiters on @word (bit 0) wait for. */
void cpuhog_i_wait_kick(_Atomic uint32_t *word)
{
	uint32_t s = atomic_load_explicit(word, memory_order_relaxed);

	/* release: what was made true, before the waiters' acquire of the
	 * word; clearing bit 0 takes the sleepers */
	while (!atomic_compare_exchange_weak_explicit(
		word, &s, (s + 2) & ~1u, memory_order_release,
		memory_order_relaxed))
		;
	if (s & 1)
		cpuhog_i_futex_wake(word, INT_MAX);
}

/* The kernel's CPU list at @p into @set: the number of CPUs, or -1 for
 * a list it does not write. */
static int parse_cpulist(const char *p, size_t setsize, cpu_set_t *set)
{
	struct cpulist_scan sc;

	return cpulist_scan(p, setsize, set, &sc) ? sc.count : -1;
}

/* The file @fd (a hog's status_fd: any thread may read it) from its
 * start, whole, NUL-terminated into @buf: its length, or -1. */
ssize_t cpuhog_i_read_fd(int fd, char *buf, size_t size)
{
	ssize_t n = fd >= 0 ? pread(fd, buf, size - 1, 0) : -1;

	buf[n > 0 ? n : 0] = 0;
	return n;
}

/* The file at @path, as cpuhog_i_read_fd(). */
ssize_t cpuhog_i_read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = cpuhog_i_read_fd(fd, buf, size);

	if (fd >= 0)
		close(fd);
	return n;
}

/* Field @n of the /proc stat line @buf, counted past the command name,
 * which may hold spaces: the blank before it; NULL: none. */
const char *cpuhog_i_stat_field(const char *buf, int n)
{
	const char *p = strrchr(buf, ')');

	while (p && n-- > 2)
		p = strchr(p + 1, ' ');
	return p;
}

/* A sysfs CPU list file into @set (CPUs past its end ignored): the
 * number of CPUs read, or -1 where it cannot be read. */
int cpuhog_i_read_cpulist(const char *path, size_t setsize, cpu_set_t *set)
{
	char buf[4096];

	if (cpuhog_i_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	return parse_cpulist(buf, setsize, set);
}

/*
 * Whether the hog of @status_fd may run on @cpu by its own mask
 * (Cpus_allowed_list), not sched_getaffinity()'s, which is masked with
 * the active CPUs: true for a CPU going offline, false for one that left
 * the cpuset; true when it cannot tell.
 */
bool cpuhog_i_mask_allows(int status_fd, size_t setsize, cpu_set_t *scratch,
			  unsigned int cpu)
{
	char buf[4096], *p;

	if (cpuhog_i_read_fd(status_fd, buf, sizeof(buf)) <= 0 ||
	    !(p = strstr(buf, "\nCpus_allowed_list:")))
		return true;
	p += 19; /* past the name, then the tab */
	return parse_cpulist(p + strspn(p, " \t"), setsize, scratch) < 0 ||
	       CPU_ISSET_S(cpu, setsize, scratch);
}

/* Every CPU the kernel may ever bring up (sysfs "possible"), in a new set
 * of *@nr CPUs, one more than the highest (or than sysconf()'s count);
 * all of them where the file cannot be read.  NULL: no memory. */
cpu_set_t *cpuhog_i_possible_set(unsigned int *nr)
{
	size_t big = CPU_ALLOC_SIZE(1u << 16), sz;
	cpu_set_t *file = CPU_ALLOC(1u << 16), *set;
	unsigned int cpu, best = 0;
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	bool read = file && cpuhog_i_read_cpulist(
				    "/sys/devices/system/cpu/possible", big,
				    file) > 0;

	for (cpu = 0; read && cpu < (1u << 16); cpu++)
		if (CPU_ISSET_S(cpu, big, file))
			best = cpu + 1;
	if (conf > 0 && (unsigned long)conf > best)
		best = (unsigned int)conf;
	*nr = best ? best : 1;
	sz = CPU_ALLOC_SIZE(*nr);
	set = CPU_ALLOC(*nr);
	if (set) {
		CPU_ZERO_S(sz, set);
		for (cpu = 0; cpu < *nr; cpu++)
			if (!read || CPU_ISSET_S(cpu, big, file))
				CPU_SET_S(cpu, sz, set);
	}
	CPU_FREE(file);
	return set;
}

/* Whether thread @tid (0: the caller) may run on @cpu alone; within the
 * active CPUs, so not on one going offline. */
bool cpuhog_i_affine_only(pid_t tid, size_t setsize, cpu_set_t *scratch,
			  unsigned int cpu)
{
	CPU_ZERO_S(setsize, scratch);
	if (sched_getaffinity(tid, setsize, scratch) < 0)
		return false;
	return CPU_COUNT_S(setsize, scratch) == 1 &&
	       CPU_ISSET_S(cpu, setsize, scratch);
}

/* Whether the calling thread may run on @cpu alone and runs there now. */
bool cpuhog_i_pinned_to(size_t setsize, cpu_set_t *scratch, unsigned int cpu)
{
	return sched_getcpu() == (int)cpu &&
	       cpuhog_i_affine_only(0, setsize, scratch, cpu);
}

/* A thread of ours, named @name: every signal blocked from birth, born
 * SCHED_OTHER (a hog raises itself; a poller must not inherit real
 * time), pinned to @one's CPU or, where that cannot be had now (EINVAL),
 * on @wide's, to pin itself once its CPU is back: 0 (pinned), 1 (away)
 * or a negative errno. */
int cpuhog_i_thread_start(pthread_t *t, size_t stack, size_t setsize,
			  const cpu_set_t *one, const cpu_set_t *wide,
			  void *(*fn)(void *), void *arg, const char *name)
{
	pthread_attr_t pa;
	sigset_t all;
	bool away;
	int r;

	sigfillset(&all);
	pthread_attr_init(&pa);
	pthread_attr_setstacksize(&pa, stack);
	pthread_attr_setsigmask_np(&pa, &all);
	pthread_attr_setinheritsched(&pa, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&pa, SCHED_OTHER);
	pthread_attr_setschedparam(&pa, &(struct sched_param){ 0 });
	pthread_attr_setaffinity_np(&pa, setsize, one);
	r = pthread_create(t, &pa, fn, arg);
	away = r == EINVAL;
	if (away) {
		pthread_attr_setaffinity_np(&pa, setsize, wide);
		r = pthread_create(t, &pa, fn, arg);
	}
	pthread_attr_destroy(&pa);
	if (r)
		return -r;
	pthread_setname_np(*t, name);
	return away;
}

/* Pin the calling thread to @cpu, where the kernel moves it before
 * sched_setaffinity() returns (EINVAL: offline, outside the cpuset). */
int cpuhog_i_pin_to(size_t setsize, cpu_set_t *scratch, unsigned int cpu)
{
	CPU_ZERO_S(setsize, scratch);
	CPU_SET_S(cpu, setsize, scratch);
	if (sched_setaffinity(0, setsize, scratch) < 0)
		return -errno;
	return sched_getcpu() == (int)cpu ? 0 : -EAGAIN;
}

/* The best scheduling the process may have for the calling hog: FIFO at
 * @want, else at RLIMIT_RTPRIO, else OTHER at the lowest nice allowed;
 * what it got, and why RT was refused, into h->sched. */
void cpuhog_i_obtain_priority(struct hog *h, int want)
{
	struct sched_param sp = { .sched_priority = want };
	struct rlimit rl;
	int nice_floor = 0;

	h->sched.rt_errno = 0;
	if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
		goto done;
	h->sched.rt_errno = errno;
	if (getrlimit(RLIMIT_RTPRIO, &rl) == 0 && rl.rlim_cur > 0) {
		sp.sched_priority = rl.rlim_cur < (rlim_t)want ? (int)rl.rlim_cur
							       : want;
		if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
			goto done;
	}
	sp.sched_priority = 0;
	sched_setscheduler(0, SCHED_OTHER, &sp);
	/* RLIMIT_NICE allows nice down to 20 - rlim_cur */
	if (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur > 0)
		nice_floor = 20 - (int)(rl.rlim_cur > 40 ? 40 : rl.rlim_cur);
	if (setpriority(PRIO_PROCESS, (id_t)h->tid, -20) < 0 && nice_floor < 0)
		setpriority(PRIO_PROCESS, (id_t)h->tid, nice_floor);
done:
	h->sched.policy = sched_getscheduler(0);
	h->sched.priority = 0;
	if (sched_getparam(0, &sp) == 0)
		h->sched.priority = sp.sched_priority;
	errno = 0;
	h->sched.nice = getpriority(PRIO_PROCESS, (id_t)h->tid);
	if (h->sched.policy == SCHED_FIFO || h->sched.policy == SCHED_RR)
		h->sched.rt_errno = 0;
}

/* The calling thread's context switches and minor faults. */
void cpuhog_i_thread_switches(struct sw_count *out)
{
	struct rusage ru = { 0 }; /* 0s where it fails: it writes none */

	getrusage(RUSAGE_THREAD, &ru);
	out->nv = ru.ru_nvcsw;
	out->niv = ru.ru_nivcsw;
	out->flt = ru.ru_minflt;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

enum { BY_CPUID, BY_SERIALIZE, BY_IRET };

/*
 * How this CPU serializes: SERIALIZE where it has it, else CPUID; but in
 * a guest of KVM, Hyper-V, VMware or Xen, where each CPUID is a VM exit,
 * IRET to self (the kernel's sync_core() fallback).  Only there: QEMU's
 * TCG faults its kernel on IRETQ from user space (SMAP), and binary
 * translators (Valgrind, FEX) may not decode it.
 */
static int serialize_how(void)
{
	static _Atomic int cached = -1; /* relaxed: any thread may compute it */
	int v = atomic_load_explicit(&cached, memory_order_relaxed);
	unsigned int a, b, c, d, sig[3];

	if (v >= 0)
		return v;
	v = BY_CPUID;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 14)))
		v = BY_SERIALIZE;
#if defined(__x86_64__)
	else if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 31))) {
		__cpuid(0x40000000, a, sig[0], sig[1], sig[2]);
		if (!memcmp(sig, "KVMKVMKVM\0\0\0", 12) ||
		    !memcmp(sig, "Microsoft Hv", 12) ||
		    !memcmp(sig, "VMwareVMware", 12) ||
		    !memcmp(sig, "XenVMMXenVMM", 12))
			v = BY_IRET;
	}
#endif
	atomic_store_explicit(&cached, v, memory_order_relaxed);
	return v;
}

/* IRETQ to the next instruction, stepping over the red zone below the
 * stack pointer, which we may not own. */
static void iret_to_self(void)
{
#if defined(__x86_64__)
	unsigned long tmp;

	__asm__ __volatile__("sub $128, %%rsp\n\t"
			     "mov %%ss, %k0\n\t"
			     "pushq %0\n\t"
			     "pushq %%rsp\n\t"
			     "addq $8, (%%rsp)\n\t"
			     "pushfq\n\t"
			     "mov %%cs, %k0\n\t"
			     "pushq %0\n\t"
			     "lea 1f(%%rip), %0\n\t"
			     "pushq %0\n\t"
			     "iretq\n"
			     "1:\n\t"
			     "add $128, %%rsp"
			     : "=&r"(tmp)
			     :
			     : "cc", "memory");
#endif
}
#endif

/* The instruction stream coherent with earlier stores on this CPU: code
 * a stop_machine() callback rewrote is safe to run afterwards. */
void cpuhog_i_serialize_core(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned int a, b, c, d;

	switch (serialize_how()) {
	case BY_SERIALIZE:
		__asm__ __volatile__(".byte 0x0f, 0x01, 0xe8" ::: "memory");
		break;
	case BY_IRET:
		iret_to_self();
		break;
	default:
		__cpuid(0, a, b, c, d);
		(void)a, (void)b, (void)c, (void)d;
	}
#elif defined(__aarch64__)
	__asm__ __volatile__("isb" ::: "memory");
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}
