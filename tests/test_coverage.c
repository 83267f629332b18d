/* SPDX-License-Identifier: MIT */
/*
 * A hog on every CPU a thread of ours can run on (issue 32): the set of
 * hogs follows the machine, a call whose promise is exclusion either
 * holds it or says it did not, and bad CPUs are refused.
 *
 * Each stop here runs an fn that watches a counter of a thread of ours
 * for 2 ms: a stop that returns 0 must have kept that thread off its CPU.
 */
#include "cpuset.h"
#include "harness.h"
#include "hotplug.h"

#include <pthread.h>
#include <sched.h>

#define STOPS 5

struct counter {
	_Atomic unsigned long n;
	_Atomic int stop, running;
	unsigned int cpu; /* where the counting thread asks to run */
	unsigned int ms;  /* how long fn watches it (0: 2 ms) */
};

/* Counts in a loop on ->cpu; re-pins itself until the kernel lets it. */
static void *count_loop(void *arg)
{
	struct counter *k = arg;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(k->cpu, &one);
	while (sched_setaffinity(0, sizeof(one), &one) < 0 &&
	       !atomic_load(&k->stop))
		t_sleep_ms(1);
	atomic_store(&k->running, 1);
	while (!atomic_load_explicit(&k->stop, memory_order_relaxed))
		atomic_fetch_add_explicit(&k->n, 1, memory_order_relaxed);
	return NULL;
}

/* fn of the calls: whether the counter moved while fn watched it. */
static int watch(void *arg)
{
	struct counter *k = arg;
	unsigned long before = atomic_load(&k->n);
	uint64_t end = t_now() + (k->ms ? k->ms : 2) * MS;

	while (t_now() < end)
		;
	return atomic_load(&k->n) != before;
}

/*
 * STOPS stops while a thread of ours counts on @cpu: each must either keep
 * it off its CPU (0) or refuse (an error, fn run nowhere).  Returns how
 * many returned 0 while the counter moved.  A stop during which the
 * kernel preempted a hog (RT throttling, in a guest whose vCPUs the host
 * runs late: the header's documented limit) says nothing of the library:
 * it is printed, not judged, and the next waits a second for the RT
 * budget to come back.  NO_HOLD where none of 4 * STOPS could be judged
 * (a 32-vCPU guest on 2 host CPUs preempted a hog in nearly every one).
 */
#define NO_HOLD 77
static int stops_beside(unsigned int cpu)
{
	struct counter k = { .cpu = cpu };
	unsigned long pre;
	pthread_t t;
	int i, bad = 0, judged = 0, r;

	assert_int_equal(pthread_create(&t, NULL, count_loop, &k), 0);
	assert_true(t_spin_until(&k.running, 5000 * MS));
	while (atomic_load(&k.n) < 1000)
		t_sleep_ms(1);
	for (i = 0; judged < STOPS && i < 4 * STOPS; i++) {
		pre = t_hogs_preempted();
		r = stop_machine(watch, &k, 0, NULL);
		assert_true(r == 0 || r == 1 || r == -ENOENT);
		if (t_hogs_preempted() != pre) {
			print_message("stop %d: %d, a hog preempted by the "
				      "kernel: not judged\n", i, r);
			t_sleep_ms(1000);
			continue;
		}
		judged++;
		bad += r == 1;
		print_message("stop %d: %d%s (holds released so far %llu)\n",
			      i, r, r == 1 ? ", our thread ran beside fn" : "",
			      (unsigned long long)t_holds_released());
	}
	atomic_store(&k.stop, 1);
	pthread_join(t, NULL);
	return judged ? bad : NO_HOLD;
}

static int where(void *arg)
{
	(void)arg;
	return sched_getcpu();
}

/* A stop's hold can be seen only on CPUs the kernel schedules: under
 * qemu-user the emulator runs one guest thread alone at times, its
 * others asleep inside it, so a spinning hog lets another thread run. */
static void need_real_hold(void)
{
	if (t_qemu_user())
		t_skip("under qemu-user a spinning hog does not hold its CPU "
		       "(the emulator's exclusive sections)");
}

static void need_two_rt(void)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs two CPUs");
	if (!t_can_rt())
		t_skip("needs real-time priority (root or CAP_SYS_NICE)");
}

/* A CPU that comes online after the hogs were made gets its hog. */
static void online_after_start_is_held(void **state)
{
	int r;

	(void)state;
	need_two_rt();
	need_real_hold();
	if (!t_can_hotplug(1))
		t_skip("needs CPU hotplug (root, a CPU 1 that can go offline)");
	cpuhog_shutdown();
	t_guard_victim(1);
	assert_true(t_set_online(1, 0));
	assert_int_equal(cpuhog_init(NULL), 0);
	assert_true(t_set_online(1, 1));
	assert_int_equal(hog_one_cpu(1, where, NULL), 1);
	r = stops_beside(1);
	cpuhog_shutdown();
	if (r == NO_HOLD)
		t_skip("a hog was preempted by the kernel in every stop (RT "
		       "throttling): no hold stood to judge");
	assert_int_equal(r, 0);
}

/* A child whose stops_beside() found no hold to judge: the test skips. */
static void no_hold_skip(int status)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == NO_HOLD)
		t_skip("a hog was preempted by the kernel in every stop (RT "
		       "throttling): no hold stood to judge");
}

/*
 * A process started with taskset -c 0 whose thread widens its own
 * affinity to CPU 1: the child is started again (exec) with affinity {0},
 * which the library reads at load.
 */
static void widened_child(void)
{
	int r = stops_beside(1);

	exit(r == NO_HOLD ? NO_HOLD : r ? 1 : 0);
}

static void widened_affinity_is_held(void **state)
{
	cpu_set_t zero;
	int status;
	pid_t pid;

	(void)state;
	need_two_rt();
	need_real_hold();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CPU_ZERO(&zero);
		CPU_SET(0, &zero);
		sched_setaffinity(0, sizeof(zero), &zero);
		setenv("CPUHOG_T_WIDENED", "1", 1);
		execl("/proc/self/exe", "test_coverage",
		      "widened_affinity_is_held", (char *)NULL);
		_exit(3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	no_hold_skip(status);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A cpuset that grows while the process runs: its new CPU gets a hog. */
static void grown_child(void *arg)
{
	struct t_cpuset *cs = arg;
	int r;

	if (!t_cpuset_join(cs))
		_exit(4);
	if (cpuhog_init(NULL) != 0)
		_exit(5);
	if (!t_cpuset_cpus(cs, "0-1"))
		_exit(6);
	if (hog_one_cpu(1, where, NULL) != 1)
		_exit(7);
	r = stops_beside(1);
	_exit(r == NO_HOLD ? NO_HOLD : r ? 1 : 0);
}

static void grown_cpuset_is_held(void **state)
{
	struct t_cpuset cs;
	int status;

	(void)state;
	need_two_rt();
	need_real_hold();
	if (T_TSAN)
		t_skip("TSan: the child starts threads after a fork");
	if (!t_cpuset_make(&cs, "0"))
		t_skip("needs a cpuset of its own (root, a cpuset controller)");
	status = t_in_child(grown_child, &cs);
	t_cpuset_remove(&cs);
	no_hold_skip(status);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * Without real-time priority a thread of ours preempts a hog whenever the
 * scheduler likes (a time slice is a few ms: fn watches for 12): a call
 * whose promise is exclusion refuses (-EPERM) rather than run fn beside
 * it, unless the caller opted into weak mode.
 */
static void nort_exclusion_refused(void **state)
{
	struct counter k = { .cpu = 1, .ms = 12 };
	struct cpuhog_attr a;
	cpu_set_t set, ran;
	pthread_t t;
	int r, i, moved = 0;

	(void)state;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs two CPUs");
	if (t_can_rt())
		t_skip("the hogs are real-time here (this runs under "
		       "tests/nort.sh)");
	assert_int_equal(pthread_create(&t, NULL, count_loop, &k), 0);
	assert_true(t_spin_until(&k.running, 5000 * MS));
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	for (i = 0; i < STOPS; i++) {
		r = hog_one_cpu(1, watch, &k);
		assert_true(r == -EPERM || r == 0 || r == 1);
		moved += r == 1;
		r = hog_cpus_ran(sizeof(set), &set, watch, &k, &ran);
		assert_true(r == -EPERM || r == 0 || r == 1);
		moved += r == 1;
	}
	print_message("exclusion broken in %d of %d calls\n", moved,
		      2 * STOPS);
	assert_int_equal(moved, 0);
	assert_int_equal(hog_one_cpu(1, watch, &k), -EPERM);
	assert_int_equal(hog_cpus(sizeof(set), &set, watch, &k), -EPERM);
	assert_int_equal(try_hog_cpus(sizeof(set), &set, watch, &k), -EPERM);
	assert_int_equal(stop_machine(watch, &k, 0, NULL), -EPERM);
	/* the barrier and the migration promise nothing of exclusion */
	assert_int_equal(hog_synchronize(), 0);
	/* weak mode: the caller accepts that others may run beside fn */
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.flags = CPUHOG_F_WEAK;
	assert_int_equal(cpuhog_init(&a), 0);
	assert_true(hog_one_cpu(1, watch, &k) >= 0);
	atomic_store(&k.stop, 1);
	pthread_join(t, NULL);
	cpuhog_shutdown();
}

/* hog_synchronize() gives up as a stop does when a CPU is held. */
static void sync_bounded_beside_held_cpu(void **state)
{
	struct cpuhog_attr a;
	struct t_held *h;
	pid_t pid;
	int r, done;

	(void)state;
	need_two_rt();
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = 10 * MS;
	assert_int_equal(cpuhog_init(&a), 0);
	t_pin(0);
	h = t_hold_cpu(1, 80 * t_slow(), &pid);
	r = hog_synchronize();
	done = atomic_load(&h->done); /* once: it ends while we print */
	print_message("hog_synchronize: %d, holder %s\n", r,
		      done ? "done" : "still spinning");
	assert_int_equal(r, -ETIMEDOUT);
	assert_int_equal(done, 0);
	waitpid(pid, NULL, 0);
	/* and once the CPU is free again, it passes (with a timeout a slow
	 * guest's vCPUs can meet) */
	assert_int_equal(t_init_scaled(false), 0);
	assert_int_equal(hog_synchronize(), 0);
	cpuhog_shutdown();
}

/*
 * An explicit set that leaves out a CPU where a thread of ours may run:
 * stop_machine() cannot hold that CPU, so it refuses unless weak mode;
 * stop_two_cpus() and hog_one_cpu() promise only their own CPUs.
 */
static void partial_set_refuses_stop(void **state)
{
	struct counter k = { .cpu = 1 };
	struct cpuhog_attr a;
	cpu_set_t zero;
	pthread_t t;

	(void)state;
	need_two_rt();
	cpuhog_shutdown();
	CPU_ZERO(&zero);
	CPU_SET(0, &zero);
	cpuhog_attr_init(&a);
	a.cpus = &zero;
	a.cpus_setsize = sizeof(zero);
	assert_int_equal(cpuhog_init(&a), 0);
	assert_int_equal(pthread_create(&t, NULL, count_loop, &k), 0);
	assert_true(t_spin_until(&k.running, 5000 * MS));
	assert_int_equal(stop_machine(watch, &k, 0, NULL), -EPERM);
	assert_int_equal(stop_machine(watch, &k, sizeof(zero), &zero), -EPERM);
	assert_true(hog_one_cpu(0, watch, &k) >= 0);
	cpuhog_shutdown();
	a.flags = CPUHOG_F_WEAK;
	assert_int_equal(cpuhog_init(&a), 0);
	assert_true(stop_machine(watch, &k, 0, NULL) >= 0);
	atomic_store(&k.stop, 1);
	pthread_join(t, NULL);
	cpuhog_shutdown();
}

/* A CPU that does not exist is refused, not dropped. */
static void nonexistent_cpu_refused(void **state)
{
	size_t sz = CPU_ALLOC_SIZE(4096);
	cpu_set_t *set = CPU_ALLOC(4096);
	struct cpuhog_attr a;

	(void)state;
	cpuhog_shutdown();
	assert_non_null(set);
	CPU_ZERO_S(sz, set);
	CPU_SET_S(0, sz, set);
	CPU_SET_S(4000, sz, set);
	cpuhog_attr_init(&a);
	a.cpus = set;
	a.cpus_setsize = sz;
	assert_int_equal(cpuhog_init(&a), -EINVAL);
	CPU_CLR_S(4000, sz, set);
	assert_int_equal(cpuhog_init(&a), 0);
	cpuhog_shutdown();
	CPU_FREE(set);
}

/* The order of errors: bad argument, then a missing CPU, then privilege. */
static void errors_in_order(void)
{
	assert_int_equal(stop_two_cpus(0, 0, watch, NULL), -EINVAL);
	assert_int_equal(stop_two_cpus(0, 4000, NULL, NULL), -EINVAL);
	assert_int_equal(stop_two_cpus(0, 4000, watch, NULL), -ENOENT);
	assert_int_equal(hog_one_cpu(4000, NULL, NULL), -EINVAL);
	assert_int_equal(hog_one_cpu(4000, watch, NULL), -ENOENT);
}

static void error_order(void **state)
{
	(void)state;
	errors_in_order();
}

static void nort_error_order(void **state)
{
	(void)state;
	if (t_can_rt())
		t_skip("the hogs are real-time here (this runs under "
		       "tests/nort.sh)");
	errors_in_order();
}

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test(online_after_start_is_held),
		cmocka_unit_test(widened_affinity_is_held),
		cmocka_unit_test(grown_cpuset_is_held),
		cmocka_unit_test(sync_bounded_beside_held_cpu),
		cmocka_unit_test(partial_set_refuses_stop),
		cmocka_unit_test(nonexistent_cpu_refused),
		cmocka_unit_test(error_order),
		/* run by CTest without RT privilege: tests/CMakeLists.txt */
		cmocka_unit_test(nort_exclusion_refused),
		cmocka_unit_test(nort_error_order),
	};

	if (getenv("CPUHOG_T_WIDENED"))
		widened_child();
	return t_main(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
}
