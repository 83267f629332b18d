/* SPDX-License-Identifier: MIT */
/*
 * Platform bits: futexes, the clock, CPU sets and affinity, scheduling
 * policy, and the core-serializing instruction.  Linux and glibc only.
 */
#include "internal.h"
#include "cpulist.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
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

/*
 * Sleep while *addr == val, until woken or (if not NO_DEADLINE) until the
 * CLOCK_MONOTONIC deadline.  Returns 0 or -ETIMEDOUT; a wake-up may be
 * spurious, so callers re-check their condition.
 */
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
	/* BITSET takes an absolute CLOCK_MONOTONIC deadline. */
	r = syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, val, tsp, NULL,
		    FUTEX_BITSET_MATCH_ANY);
	return r < 0 ? -errno : 0;
}

/*
 * The address may belong to a work whose owner has already seen it done
 * and reused the memory: a private futex wake on such an address is at
 * worst a spurious wake-up for whoever sleeps there, which every waiter
 * tolerates.
 */
void cpuhog_i_futex_wake(_Atomic uint32_t *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/*
 * The one wait of every waiter (a hog's for work, a work's, a call's
 * caller, a stop's hogs, a parked poller), in turns: the waiter looks at
 * what it waits for and, not done, takes a turn: a spin (the clock read
 * every CLOCK_EVERY spins) until w->spin_end; then its bit set in the
 * futex word; then a sleep on the word until w->deadline.  Each turn
 * ends with the word read anew, for the next look.
 *
 * No wake-up is lost.  A waker makes what is waited for true, then
 * either moves the word on (cpuhog_i_wait_kick(); a CAS or exchange of its own:
 * work_finish(), poll.c), waking the sleepers where the bit was set, or
 * only loads the word, after a seq_cst store of what is waited for
 * (cpuhog_i_wake_hog()).  The waiter sleeps only while the word still reads as
 * it did before its last look, its bit set: no move came since that
 * read, which saw the last one (acquire, against the move's release),
 * and with it what was made true.  Against a waker that only loads, the
 * bit's seq_cst CAS and the look after it are the other half of
 * Dekker's pattern.
 */
#define CLOCK_EVERY 16

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

/*
 * Parse a sysfs CPU list file into @set (CPUs past its end ignored).
 * Returns the number of CPUs read, or -1 if the file cannot be read.
 */
int cpuhog_i_read_cpulist(const char *path, size_t setsize, cpu_set_t *set)
{
	char buf[4096];
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return parse_cpulist(buf, setsize, set);
}

/*
 * A hog's /proc status file (struct hog.status_fd), whole, into @buf,
 * NUL-terminated.  Any thread may read it: the descriptor names the hog.
 * false if it cannot be read.
 */
bool cpuhog_i_read_status(int fd, char *buf, size_t size)
{
	ssize_t n = fd >= 0 ? pread(fd, buf, size - 1, 0) : -1;

	if (n <= 0)
		return false;
	buf[n] = 0;
	return true;
}

/*
 * Whether the hog whose status file is @status_fd may run on @cpu by its
 * own mask, not masked with the active CPUs as sched_getaffinity()
 * reports it (/proc's Cpus_allowed_list): true for a CPU that is going
 * offline, false for one that left the cpuset.  true when it cannot tell.
 */
bool cpuhog_i_mask_allows(int status_fd, size_t setsize, cpu_set_t *scratch,
			  unsigned int cpu)
{
	char buf[4096], *p;

	if (!cpuhog_i_read_status(status_fd, buf, sizeof(buf)))
		return true;
	p = strstr(buf, "\nCpus_allowed_list:");
	if (!p)
		return true;
	p += 19; /* past the name, then the tab */
	if (parse_cpulist(p + strspn(p, " \t"), setsize, scratch) < 0)
		return true;
	return CPU_ISSET_S(cpu, setsize, scratch);
}

/* One more than the highest CPU number the kernel may ever bring up. */
unsigned int cpuhog_i_possible_cpus(void)
{
	size_t sz = CPU_ALLOC_SIZE(1u << 16);
	cpu_set_t *set = CPU_ALLOC(1u << 16);
	unsigned int cpu, best = 0;
	long conf = sysconf(_SC_NPROCESSORS_CONF);

	if (set && cpuhog_i_read_cpulist("/sys/devices/system/cpu/possible", sz,
					 set) > 0)
		for (cpu = 0; cpu < (1u << 16); cpu++)
			if (CPU_ISSET_S(cpu, sz, set))
				best = cpu + 1;
	CPU_FREE(set);
	if (conf > 0 && (unsigned long)conf > best)
		best = (unsigned int)conf;
	return best ? best : 1;
}

/*
 * Whether thread @tid (0: the caller) may run on @cpu alone.  The kernel
 * reports affinity within the active CPUs, so a CPU on its way offline
 * reads as not allowed before its threads are moved off it.
 */
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

/*
 * Create a thread with @pa pinned to the CPU of @one; where that CPU
 * cannot be had now (offline, outside the cpuset: EINVAL), on the CPUs
 * of @wide instead, from where it pins itself once its CPU is back.
 * Returns 0 (pinned), 1 (away) or a negative errno.
 */
int cpuhog_i_thread_start(pthread_t *t, pthread_attr_t *pa, size_t setsize,
			  const cpu_set_t *one, const cpu_set_t *wide,
			  void *(*fn)(void *), void *arg)
{
	int r;

	pthread_attr_setaffinity_np(pa, setsize, one);
	r = pthread_create(t, pa, fn, arg);
	if (r != EINVAL)
		return -r;
	pthread_attr_setaffinity_np(pa, setsize, wide);
	r = pthread_create(t, pa, fn, arg);
	return r ? -r : 1;
}

/*
 * Pin the calling thread to @cpu.  The kernel moves the thread there
 * before sched_setaffinity() returns; it fails (EINVAL) when @cpu is
 * offline or outside the cpuset.
 */
int cpuhog_i_pin_to(size_t setsize, cpu_set_t *scratch, unsigned int cpu)
{
	CPU_ZERO_S(setsize, scratch);
	CPU_SET_S(cpu, setsize, scratch);
	if (sched_setaffinity(0, setsize, scratch) < 0)
		return -errno;
	return sched_getcpu() == (int)cpu ? 0 : -EAGAIN;
}

/*
 * Give the calling hog the best scheduling the process may have:
 * SCHED_FIFO at @want, else at RLIMIT_RTPRIO, else SCHED_OTHER at the
 * lowest nice allowed.  Records what it got and why RT was refused.
 */
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
	/* RLIMIT_NICE allows nice down to 20 - rlim_cur. */
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
	struct rusage ru;

	out->nv = out->niv = out->flt = 0;
	if (getrusage(RUSAGE_THREAD, &ru) == 0) {
		out->nv = ru.ru_nvcsw;
		out->niv = ru.ru_nivcsw;
		out->flt = ru.ru_minflt;
	}
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <string.h>

enum { BY_CPUID, BY_SERIALIZE, BY_IRET };

/*
 * How this CPU serializes: SERIALIZE where it has it; else CPUID, which
 * is cheap on hardware, except in a guest of a hypervisor we know
 * (KVM, Hyper-V, VMware, Xen), which intercepts every CPUID (a VM exit
 * each): there an IRET to the next instruction, the kernel's sync_core()
 * fallback, which stays in the guest.  Not elsewhere: QEMU's TCG pops
 * IRETQ's frame from the user stack as a supervisor access that SMAP
 * refuses, faulting the guest's kernel, and binary translators (Valgrind,
 * FEX) may not decode it.
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

/*
 * Make the instruction stream coherent with earlier stores on this CPU:
 * code rewritten by a stop_machine() callback is safe to run afterwards.
 */
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
