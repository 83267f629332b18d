/* SPDX-License-Identifier: MIT */
/*
 * Shared by the tests.  Each test case runs in its own process under
 * CTest (the case name is argv[1], a cmocka filter), with a timeout: a
 * bug here can wedge a CPU, and one case must not take the others down.
 *
 * Every hog a test runs is kept well under 100 ms: these machines have
 * two CPUs, and a SCHED_FIFO 99 spinner freezes one.
 */
#ifndef CPUHOG_TEST_HARNESS_H
#define CPUHOG_TEST_HARNESS_H

#include <cpuhog.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define MS 1000000ull

/* TSan cannot start threads in a child forked from a threaded process. */
#if defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif
#ifndef T_TSAN
#define T_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#else
#define T_ASAN 0
#endif

/* Skip the running case, saying why (CTest shows it with the skip). */
#define t_skip(why)                                                            \
	do {                                                                   \
		print_message("skipped: %s\n", why);                          \
		skip();                                                        \
	} while (0)

static inline uint64_t t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline unsigned int t_slow(void);

/* Spin until *flag is non-zero, for at most @max_ns times the slowness
 * knob (a hang-catcher: t_slow()); returns whether it became so. */
static inline bool t_spin_until(_Atomic int *flag, uint64_t max_ns)
{
	uint64_t end = t_now() + max_ns * t_slow();

	while (!atomic_load(flag))
		if (t_now() > end)
			return false;
	return true;
}

static inline void t_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * The one slowness knob: CPUHOG_TEST_SLOW, a whole multiplier (default 1),
 * read once.  The runners that run the tests slowly set it (make check-smp's
 * guest, scripts/smp-guest.sh: 10, times the vCPUs per host CPU past 8;
 * qemu-user, cmake/aarch64-linux-gnu.cmake, and the arm64 guest: 10).  The
 * harness applies it to every timeout and hang-catcher it offers
 * (t_bound(), t_spin_until(), t_in_child()'s alarm, t_init_scaled()):
 * never to an assertion about speed, which is no verdict of make check
 * (a timing claim is a figure, or a test labelled timing: make
 * check-timing).
 */
static inline unsigned int t_slow(void)
{
	static _Atomic unsigned int slow;
	unsigned int v = atomic_load_explicit(&slow, memory_order_relaxed);

	if (!v) {
		const char *s = getenv("CPUHOG_TEST_SLOW");
		long n = s ? atol(s) : 1;

		v = n > 1 && n < 10000 ? (unsigned int)n : 1;
		atomic_store_explicit(&slow, v, memory_order_relaxed);
	}
	return v;
}

/* A bound that catches a hang: @ns, scaled by the knob. */
static inline uint64_t t_bound(uint64_t ns)
{
	return ns * t_slow();
}

/* A process-wide hang-catcher: SIGALRM after @s seconds, scaled. */
static inline void t_alarm(unsigned int s)
{
	alarm(s * t_slow());
}

/* How many of @n rounds of a test's load to run: on a runner the knob
 * calls slow, fewer, so that the test takes about as long (at least 1). */
static inline int t_fewer(int n)
{
	int k = n / (int)t_slow();

	return k > 1 ? k : 1;
}

/* Whether the test runs under qemu-user (make check-arm64 sets
 * CPUHOG_EMULATOR): one process on the host's kernel, whose /proc shows
 * the host's view of it. */
static inline int t_qemu_user(void)
{
	const char *s = getenv("CPUHOG_EMULATOR");

	return s && !strcmp(s, "qemu-user");
}

/*
 * Left for tests/test_stop.c and tests/test_entries.c until they move to
 * the knob (t_slow()); no other test uses t_load() or t_many().
 *
 * How many of the guest's vCPUs share one host CPU (1 on a live machine):
 * a wait for every CPU to come lasts about that many host time slices
 * more, so bounds on such waits scale by it.
 */
static inline unsigned int t_load(void)
{
	const char *s = getenv("CPUHOG_GUEST_LOAD");
	int n = s ? atoi(s) : 1;

	return n > 1 ? (unsigned int)n : 1;
}

/*
 * Past 8 vCPUs per host CPU, how many times longer a guest's stop takes to
 * bring every hog in than at 8 (1 below): a CPU held "for longer than a
 * stop takes to give up" is held that much longer (at 32 vCPUs on 2 host
 * CPUs a stop with a 10 ms timeout gave up only after 800 ms, each of the
 * 31 late hogs' arrivals moving its deadline on).
 */
static inline unsigned int t_many(void)
{
	return t_load() > 8 ? t_load() / 8 : 1;
}

/*
 * Restart the library with its stop timeout scaled by the knob, for a
 * test that is about something else than the timeout (in a 32-vCPU guest
 * on 2 host CPUs a vCPU went unrun for over 200 ms while its peers ran);
 * and with overrun_ns scaled too, where @overrun.  The caller shuts it
 * down.
 */
static inline int t_init_scaled(bool overrun)
{
	struct cpuhog_attr a;

	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = t_bound(200 * MS);
	if (overrun)
		a.overrun_ns = t_bound(100 * MS);
	return cpuhog_init(&a);
}

/* Pin the calling thread to @cpu. */
static inline void t_pin(unsigned int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
}

/* The CPUs that have hogs, and how many. */
static inline int t_hog_cpus(cpu_set_t *set)
{
	struct cpuhog_info in;

	assert_int_equal(cpuhog_get_info(&in), 0);
	*set = in.cpus;
	return (int)in.nr_hogs;
}

/* The n-th hogged CPU (wrapping). */
static inline unsigned int t_nth_cpu(int n)
{
	cpu_set_t set;
	int count = t_hog_cpus(&set), i, seen = 0;

	n %= count;
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set) && seen++ == n)
			return (unsigned int)i;
	fail();
	return 0;
}

/* Whether this process may use SCHED_FIFO (root, CAP_SYS_NICE, rlimit). */
static inline bool t_can_rt(void)
{
	struct cpuhog_info in;

	assert_int_equal(cpuhog_get_info(&in), 0);
	return in.policy == SCHED_FIFO;
}

/*
 * The stop invariant: a stop that returns 0 (or fn's value) ran fn exactly
 * once on each CPU it was asked to (exactly once in all, for "any one
 * CPU"); a stop that returns a library error ran it nowhere.  fn counts
 * its runs in a struct t_runs, one per call.
 */
struct t_runs {
	_Atomic int on[CPU_SETSIZE];
	_Atomic int total;
};

static inline int t_count_run(void *arg)
{
	struct t_runs *r = arg;
	int cpu = sched_getcpu();

	if (cpu >= 0 && cpu < CPU_SETSIZE)
		atomic_fetch_add(&r->on[cpu], 1);
	atomic_fetch_add(&r->total, 1);
	return 0;
}

/* -EINTR: fn ran on some CPUs of @want, at most once each, not on all. */
static inline bool t_runs_partial(struct t_runs *r, const cpu_set_t *want)
{
	int cpu, n;

	for (cpu = 0; want && cpu < CPU_SETSIZE; cpu++) {
		n = atomic_load(&r->on[cpu]);
		if (n > (CPU_ISSET(cpu, want) ? 1 : 0))
			return false;
	}
	return want && atomic_load(&r->total) > 0 &&
	       atomic_load(&r->total) < CPU_COUNT(want);
}

/* Whether @r agrees with @ret for a stop asked to run on @want (NULL:
 * any one CPU). */
static inline bool t_runs_ok(struct t_runs *r, int ret, const cpu_set_t *want)
{
	int cpu;

	if (ret == -EINTR)
		return t_runs_partial(r, want);
	if (ret < 0)
		return atomic_load(&r->total) == 0;
	if (!want)
		return atomic_load(&r->total) == 1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (atomic_load(&r->on[cpu]) != (CPU_ISSET(cpu, want) ? 1 : 0))
			return false;
	return true;
}

/* What a judged stop did, printed when it broke the invariant. */
static inline void t_runs_print(const char *what, struct t_runs *r, int ret)
{
	int cpu;

	print_message("%s returned %d; fn ran %d times:", what, ret,
		      atomic_load(&r->total));
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (atomic_load(&r->on[cpu]))
			print_message(" CPU %d x%d", cpu,
				      atomic_load(&r->on[cpu]));
	print_message("\n");
}

/* stop_machine() with a counting fn, judged by the stop invariant: *bad
 * grows by one if it broke.  Returns the stop's result. */
static inline int t_stop_judged(size_t setsize, const cpu_set_t *cpus,
				long *bad)
{
	struct t_runs runs;
	int r;

	memset(&runs, 0, sizeof(runs));
	r = stop_machine(t_count_run, &runs, setsize, cpus);
	if (!t_runs_ok(&runs, r, cpus)) {
		t_runs_print("stop_machine", &runs, r);
		++*bad;
	}
	return r;
}

/* The same for stop_two_cpus(): fn on @cpu1 alone. */
static inline int t_stop_two_judged(unsigned int cpu1, unsigned int cpu2,
				    long *bad)
{
	struct t_runs runs;
	cpu_set_t one;
	int r;

	memset(&runs, 0, sizeof(runs));
	CPU_ZERO(&one);
	if (cpu1 < CPU_SETSIZE)
		CPU_SET(cpu1, &one);
	r = stop_two_cpus(cpu1, cpu2, t_count_run, &runs);
	if (!t_runs_ok(&runs, r, &one)) {
		t_runs_print("stop_two_cpus", &runs, r);
		++*bad;
	}
	return r;
}

/*
 * Another process's SCHED_FIFO 99 spinner on @cpu for @ms, or until the
 * test sets let_go: a CPU held by someone else.  Returns once it spins;
 * *pid to wait for.  Keep @ms well under 100.  Its real-time CPU time is
 * bounded (RLIMIT_RTTIME, 50 ms past @ms): a spinner that outlives its
 * clock is killed.
 */
struct t_held {
	_Atomic int armed, started, done;
	_Atomic int let_go;	      /* set by the test: end the hold now */
	_Atomic uint64_t released_at; /* t_now() as it let go */
};

/* The same, spinning only once a byte comes on @go (a pipe's read end)
 * where @go >= 0: it waits there at FIFO 99, and its wake by a thread
 * of ours at FIFO 99 on @cpu queues it behind that thread.  Returns once
 * it waits (called on @cpu: it runs until it blocks). */
static inline struct t_held *t_hold_cpu_on(unsigned int cpu, unsigned int ms,
					   pid_t *pid, int go)
{
	struct t_held *h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct sched_param sp = { .sched_priority = 99 };
	char byte;

	assert_true(h != MAP_FAILED);
	*pid = fork();
	assert_true(*pid >= 0);
	if (*pid == 0) {
		struct rlimit rt = { (rlim_t)(ms + 50) * 1000,
				     (rlim_t)(ms + 60) * 1000 };
		uint64_t end;

		t_pin(cpu);
		if (setrlimit(RLIMIT_RTTIME, &rt) < 0 ||
		    sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
			_exit(3);
		atomic_store(&h->armed, 1);
		if (go >= 0 && read(go, &byte, 1) != 1)
			_exit(4);
		end = t_now() + ms * MS;
		atomic_store(&h->started, 1);
		while (t_now() < end && !atomic_load(&h->let_go))
			;
		atomic_store(&h->released_at, t_now());
		atomic_store(&h->done, 1);
		_exit(0);
	}
	while (!atomic_load(go < 0 ? &h->started : &h->armed))
		t_sleep_ms(1);
	return h;
}

static inline struct t_held *t_hold_cpu(unsigned int cpu, unsigned int ms,
					pid_t *pid)
{
	return t_hold_cpu_on(cpu, ms, pid, -1);
}

/* Another process holding the machine-wide stop lock (src/serialize.c)
 * as its own stop would, for @ms (0: until killed); @held shared. */
static inline pid_t t_hold_stop_lock(unsigned int ms, _Atomic int *held)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	pid_t pid;

	atomic_store(held, 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) { /* system calls only: the parent has threads */
		int fd = open("/run/lock/cpuhog-stop.lock", O_RDWR);

		if (fd < 0 || fcntl(fd, F_OFD_SETLKW, &fl) < 0)
			_exit(3);
		atomic_store(held, 1);
		if (ms)
			t_sleep_ms(ms);
		else
			pause();
		_exit(0);
	}
	while (!atomic_load(held)) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid)
			fail_msg("the stop lock's holder could not take it");
		t_sleep_ms(1);
	}
	return pid;
}

/* Run @fn in a child process; returns its wait status. */
static inline int t_in_child(void (*fn)(void *), void *arg)
{
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* a hung child must not outlive the test; a slow runner's
		 * child takes longer (fork_during_storm's poll variant at 64
		 * vCPUs: killed by a 30 s alarm): the knob */
		t_alarm(30);
		fn(arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* Read a whole small file into @buf (NUL-terminated); returns its length. */
static inline size_t t_slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, size - 1, f);
		fclose(f);
	}
	buf[n] = 0;
	return n;
}

/* Stops whose hold the library ended before fn returned (fn overran
 * overrun_ns, or a held hog's CPU went away): cpuhog_info.holds_released. */
static inline uint64_t t_holds_released(void)
{
	struct cpuhog_info in;

	assert_int_equal(cpuhog_get_info(&in), 0);
	return in.holds_released;
}

/* The tid of our thread named @comm (/proc/self/task/TID/comm), or
 * whose name begins so where @prefix; 0: none. */
static inline pid_t t_tid_named(const char *comm, bool prefix)
{
	DIR *d = opendir("/proc/self/task");
	size_t len = strlen(comm);
	char path[300], buf[64];
	struct dirent *e;
	pid_t tid = 0;

	while (d && !tid && (e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		if (e->d_name[0] != '.' && t_slurp(path, buf, sizeof(buf)) &&
		    !strncmp(buf, comm, len) && (prefix || buf[len] == '\n'))
			tid = (pid_t)atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return tid;
}

/*
 * The hogs' involuntary context switches, summed (/proc/self/task/
 * TID/status): it moves only when the kernel took a CPU from a hog, which
 * at FIFO 99 is RT throttling (or a stop of the kernel's own).  A test of
 * "nothing else ran" reads it around the stop: if it moved, the kernel
 * broke the hold, the header's documented limit, not the library.
 */
static inline unsigned long t_hogs_preempted(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned long sum = 0, v;
	char path[300], buf[2048], *p;

	while (d && (e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		if (e->d_name[0] == '.' || !t_slurp(path, buf, sizeof(buf)) ||
		    strncmp(buf, "cpuhog/", 7))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 e->d_name);
		t_slurp(path, buf, sizeof(buf));
		p = strstr(buf, "nonvoluntary_ctxt_switches:");
		if (p && sscanf(p, "nonvoluntary_ctxt_switches: %lu", &v) == 1)
			sum += v;
	}
	if (d)
		closedir(d);
	return sum;
}

/* Why a hold cannot be judged here, or NULL: under qemu-user, whose
 * threads sleep inside the emulator while it runs one of them alone (its
 * exclusive sections), no hold is there to judge, a missing capability
 * that a test skips for up front.  (t_hold_stood() answered false there
 * after every stop, and a test tried five times and then skipped.) */
static inline const char *t_hold_unjudgeable(void)
{
	return t_qemu_user() ? "under qemu-user the emulator runs one thread "
			       "alone in its exclusive sections and the "
			       "others sleep inside it: no hold to judge"
			     : NULL;
}

static inline int t_main(const struct CMUnitTest *tests, size_t n, int argc,
			 char **argv)
{
	size_t i;

	if (argc > 1) {
		/* a name that matches no case is a broken CTest entry */
		for (i = 0; i < n && strcmp(tests[i].name, argv[1]); i++)
			;
		if (i == n) {
			fprintf(stderr, "no test case named '%s'\n", argv[1]);
			return 2;
		}
		cmocka_set_test_filter(argv[1]);
	}
	return _cmocka_run_group_tests("cpuhog", tests, n, NULL, NULL);
}

#define T_MAIN(tests)                                                         \
	int main(int argc, char **argv)                                        \
	{                                                                      \
		return t_main(tests, sizeof(tests) / sizeof(tests[0]), argc,   \
			      argv);                                           \
	}

/* glibc's rseq area for this thread; NULL where it registered none
 * (qemu-user, glibc.pthread.rseq=0, glibc before 2.35). */
static inline struct rseq *t_rseq(void)
{
	struct rseq *rs;

	if (__rseq_size < 16)
		return NULL;
	rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	return (int)rs->cpu_id >= 0 ? rs : NULL;
}

/* A critical section of no instruction, its abort address after the
 * signature glibc registered: rseq_cs pointing at it restarts nothing,
 * and the kernel clears it when it switches the thread out (up to 6.18;
 * src/switches.c). */
static inline uint64_t t_empty_cs(void)
{
	static const struct {
		uint32_t sig, at;
	} sig = { RSEQ_SIG, 0 };
	static const struct rseq_cs cs = {
		.start_ip = (uint64_t)(uintptr_t)&sig.at,
		.abort_ip = (uint64_t)(uintptr_t)&sig.at,
	};

	return (uint64_t)(uintptr_t)&cs;
}

#endif
