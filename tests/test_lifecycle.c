/* SPDX-License-Identifier: MIT */
/* Unit tests: init, shutdown, options, what the library reports, idling. */
#include "harness.h"

#include <dirent.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/resource.h>

static int where(void *arg)
{
	(void)arg;
	return sched_getcpu();
}

static void init_twice_and_shutdown(void **state)
{
	unsigned int cpu;

	(void)state;
	cpuhog_shutdown(); /* while nothing is initialised: a no-op */
	assert_int_equal(cpuhog_init(NULL), 0);
	assert_int_equal(cpuhog_init(NULL), -EALREADY);
	cpu = t_nth_cpu(0);
	cpuhog_shutdown();
	cpuhog_shutdown(); /* twice: still fine */
	/* a call after shutdown initialises again */
	assert_int_equal(hog_one_cpu(cpu, where, NULL), (int)cpu);
	cpuhog_shutdown();
	assert_int_equal(cpuhog_init(NULL), 0);
	assert_int_equal(hog_one_cpu(cpu, where, NULL), (int)cpu);
	cpuhog_shutdown();
}

static void bad_attr_changes_nothing(void **state)
{
	struct cpuhog_attr a;
	struct cpuhog_info in;

	(void)state;
	cpuhog_attr_init(&a);
	a.priority = 1000;
	assert_int_equal(cpuhog_init(&a), -EINVAL);
	cpuhog_attr_init(&a);
	a.flags = 1u << 20;
	assert_int_equal(cpuhog_init(&a), -EINVAL);
	cpuhog_attr_init(&a);
	a.stack_size = 1;
	assert_int_equal(cpuhog_init(&a), -EINVAL);
	cpuhog_attr_init(&a);
	a.cpus_setsize = 0;
	a.cpus = (const cpu_set_t *)&a; /* a set without a size */
	assert_int_equal(cpuhog_init(&a), -EINVAL);
	/* nothing was started by any of them: a valid init succeeds */
	cpuhog_attr_init(&a);
	assert_int_equal(cpuhog_init(&a), 0);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_true(in.nr_hogs > 0);
	assert_int_equal(cpuhog_get_info(NULL), -EINVAL);
	cpuhog_shutdown();
}

/* A caller built against the first version passes a struct that ends
 * where wake_fanout begins: nothing past its size is read (the page
 * after it is not readable), and the later fields take their defaults;
 * a size short of the first version's is -EINVAL. */
static void first_version_attr(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE),
	       v1 = offsetof(struct cpuhog_attr, wake_fanout);
	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct cpuhog_attr full, *a = (struct cpuhog_attr *)(m + pg - v1);
	struct cpuhog_info in;

	(void)state;
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m + pg, pg, PROT_NONE), 0);
	cpuhog_attr_init(&full);
	memcpy(a, &full, v1);
	a->size = v1 - 8;
	assert_int_equal(cpuhog_init(a), -EINVAL);
	a->size = v1;
	assert_int_equal(cpuhog_init(a), 0);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_true(in.nr_hogs > 0);
	assert_int_equal(hog_one_cpu(t_nth_cpu(0), where, NULL),
			 (int)t_nth_cpu(0));
	cpuhog_shutdown();
	munmap(m, 2 * pg);
}

/* attr.cpus limits the hogs; a CPU of no hog is -ENOENT. */
static void attr_cpus(void **state)
{
	struct cpuhog_attr a;
	struct cpuhog_info in;
	cpu_set_t one;
	unsigned int cpu = t_nth_cpu(1), other = t_nth_cpu(0);

	(void)state;
	cpuhog_shutdown();
	if (cpu == other)
		t_skip("one CPU only");
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	cpuhog_attr_init(&a);
	a.cpus = &one;
	a.cpus_setsize = sizeof(one);
	assert_int_equal(cpuhog_init(&a), 0);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.nr_hogs, 1);
	assert_true(CPU_EQUAL(&in.cpus, &one));
	assert_int_equal(hog_one_cpu(cpu, where, NULL), (int)cpu);
	assert_int_equal(hog_one_cpu(other, where, NULL), -ENOENT);
	cpuhog_shutdown();
	/* a set whose CPU cannot exist here */
	CPU_ZERO(&one);
	CPU_SET(CPU_SETSIZE - 1, &one);
	a.cpus = &one;
	assert_int_equal(cpuhog_init(&a), -EINVAL);
}

/* The defaults: every CPU of our affinity, and the set in any size. */
static void info_and_cpus(void **state)
{
	struct cpuhog_info in;
	cpu_set_t mine, *big = CPU_ALLOC(4096);
	size_t sz = CPU_ALLOC_SIZE(4096);

	(void)state;
	/* the defaults do not depend on the initialising thread's affinity */
	sched_getaffinity(0, sizeof(mine), &mine);
	t_pin(t_nth_cpu(0));
	cpuhog_shutdown();
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.nr_hogs, CPU_COUNT(&mine));
	assert_true(CPU_EQUAL(&in.cpus, &mine));
	assert_true(in.nr_cpu_ids >= in.nr_hogs);
	assert_int_equal(cpuhog_get_cpus(sz, big), (int)in.nr_hogs);
	assert_true(CPU_ISSET_S(t_nth_cpu(0), sz, big));
	assert_int_equal(cpuhog_get_cpus(sz, NULL), -EINVAL);
	assert_int_equal(cpuhog_get_cpus(0, big), -EINVAL);
	if (getuid() == 0) {
		/* root: real time, at the top */
		assert_int_equal(in.policy, SCHED_FIFO);
		assert_int_equal(in.priority,
				 sched_get_priority_max(SCHED_FIFO));
		assert_int_equal(in.rt_errno, 0);
	}
	CPU_FREE(big);
}

static void attr_priority(void **state)
{
	struct cpuhog_attr a;
	struct cpuhog_info in;

	(void)state;
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO (root or RLIMIT_RTPRIO)");
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.priority = 42;
	assert_int_equal(cpuhog_init(&a), 0);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.policy, SCHED_FIFO);
	assert_int_equal(in.priority, 42);
	cpuhog_shutdown();
}

/* Hog threads: named cpuhog/N, one per CPU. */
static int hog_threads(char names[][16], pid_t *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], comm[64];
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) && n < max) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		t_slurp(path, comm, sizeof(comm));
		comm[strcspn(comm, "\n")] = 0;
		if (strncmp(comm, "cpuhog/", 7))
			continue;
		comm[15] = 0;
		memcpy(names[n], comm, 16);
		tids[n++] = atoi(e->d_name);
	}
	closedir(d);
	return n;
}

static void threads_named(void **state)
{
	char names[64][16], want[16];
	pid_t tids[64];
	cpu_set_t set;
	int n = t_hog_cpus(&set), i, found;

	(void)state;
	assert_int_equal(hog_threads(names, tids, 64), n);
	for (i = 0; i < CPU_SETSIZE; i++) {
		if (!CPU_ISSET(i, &set))
			continue;
		snprintf(want, sizeof(want), "cpuhog/%d", i);
		for (found = 0; found < n && strcmp(names[found], want); found++)
			;
		assert_true(found < n);
	}
}

/* Time a thread has spent on a CPU, in ns (schedstat's first field). */
static unsigned long long runtime_ns(pid_t tid)
{
	char path[64], buf[128];

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	t_slurp(path, buf, sizeof(buf));
	return strtoull(buf, NULL, 10);
}

/* An initialised library that is not called uses no CPU time. */
static void idle_costs_nothing(void **state)
{
	char names[64][16];
	pid_t tids[64];
	unsigned long long before[64];
	int n, i;

	(void)state;
	assert_int_equal(hog_one_cpu(t_nth_cpu(0), where, NULL),
			 (int)t_nth_cpu(0));
	t_sleep_ms(50); /* let the hogs go back to sleep */
	n = hog_threads(names, tids, 64);
	assert_true(n > 0);
	for (i = 0; i < n; i++)
		before[i] = runtime_ns(tids[i]);
	t_sleep_ms(500);
	for (i = 0; i < n; i++)
		assert_int_equal(runtime_ns(tids[i]), before[i]);
}

/* fork(): the child has no hogs but can use the library; the parent is
 * unaffected. */
static void child_uses_library(void *arg)
{
	cpu_set_t set;
	int i, n = t_hog_cpus(&set);

	(void)arg;
	for (i = 0; i < n; i++)
		if (hog_one_cpu(t_nth_cpu(i), where, NULL) != (int)t_nth_cpu(i))
			_exit(3);
	if (hog_cpus(sizeof(set), &set, where, NULL) < 0)
		_exit(4);
	cpuhog_shutdown();
	_exit(0);
}

static void fork_child_usable(void **state)
{
	int status, i;

	(void)state;
	if (T_TSAN)
		t_skip("TSan: no threads in a child of a threaded process");
	assert_int_equal(hog_one_cpu(t_nth_cpu(0), where, NULL),
			 (int)t_nth_cpu(0));
	for (i = 0; i < 3; i++) {
		status = t_in_child(child_uses_library, NULL);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_int_equal(hog_one_cpu(t_nth_cpu(1), where, NULL),
				 (int)t_nth_cpu(1));
	}
}

/* In the child: its first call made hogs as the parent's attributes say
 * (exit 0), or with the defaults (exit 4: one hog per CPU). */
static void child_inherits(void *arg)
{
	unsigned int cpu = *(unsigned int *)arg;
	struct cpuhog_info in;

	if (hog_one_cpu(cpu, where, NULL) != (int)cpu)
		_exit(3);
	if (cpuhog_get_info(&in) != 0)
		_exit(5);
	fprintf(stderr, "child: %u hogs, attributes %s\n", in.nr_hogs,
		in.nr_hogs == 1 ? "as the parent's" : "defaults");
	_exit(in.nr_hogs == 1 && CPU_ISSET(cpu, &in.cpus) ? 0 : 4);
}

/*
 * A forked child's hogs follow the parent's cpuhog_attr: a parent that
 * confined its hogs to one CPU got a child with a FIFO 99 hog on every
 * CPU, in sleep mode, at its first call.
 */
static void fork_child_inherits_attr(void **state)
{
	struct cpuhog_attr a;
	unsigned int cpu;
	cpu_set_t one;
	int status;

	(void)state;
	if (T_TSAN)
		t_skip("TSan: no threads in a child of a threaded process");
	cpu = t_nth_cpu(0);
	if (t_nth_cpu(1) == cpu)
		t_skip("needs two CPUs");
	cpuhog_shutdown();
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	cpuhog_attr_init(&a);
	a.cpus_setsize = sizeof(one);
	a.cpus = &one;
	a.stop_timeout_ns = 300 * MS;
	assert_int_equal(cpuhog_init(&a), 0);
	status = t_in_child(child_inherits, &cpu);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	cpuhog_shutdown();
}

/* Without RT privilege (run under setpriv/prlimit by CTest): the policy
 * obtained is reported honestly, the calls whose promise is exclusion
 * refuse, and the barrier works. */
static void nort_calls_refuse(void **state)
{
	struct sched_param sp = { .sched_priority = 1 };
	struct cpuhog_info in;
	cpu_set_t set;

	(void)state;
	/* the test is only meaningful if RT really is refused here */
	assert_int_equal(sched_setscheduler(0, SCHED_FIFO, &sp), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.policy, SCHED_OTHER);
	assert_int_equal(in.rt_errno, EPERM);
	/* exclusion cannot hold: refused, unless weak mode */
	assert_int_equal(hog_one_cpu(t_nth_cpu(1), where, NULL), -EPERM);
	t_hog_cpus(&set);
	assert_int_equal(hog_cpus(sizeof(set), &set, where, NULL), -EPERM);
	assert_int_equal(stop_machine(where, NULL, 0, NULL), -EPERM);
	assert_int_equal(hog_synchronize(), 0);
}

/* Weak mode, by flag or by the environment: every call runs. */
static void weak_calls_work(void)
{
	cpu_set_t set;

	assert_false(t_can_rt());
	assert_int_equal(hog_one_cpu(t_nth_cpu(1), where, NULL),
			 (int)t_nth_cpu(1));
	t_hog_cpus(&set);
	assert_true(hog_cpus(sizeof(set), &set, where, NULL) >= 0);
	assert_true(stop_machine(where, NULL, 0, NULL) >= 0);
	cpuhog_shutdown();
}

static void nort_weak_calls_work(void **state)
{
	struct cpuhog_attr a;

	(void)state;
	cpuhog_attr_init(&a);
	a.flags = CPUHOG_F_WEAK;
	assert_int_equal(cpuhog_init(&a), 0);
	weak_calls_work();
	setenv("CPUHOG_WEAK", "1", 1);
	weak_calls_work();
}

T_MAIN(((const struct CMUnitTest[]){
	cmocka_unit_test(init_twice_and_shutdown),
	cmocka_unit_test(bad_attr_changes_nothing),
	cmocka_unit_test(first_version_attr),
	cmocka_unit_test(attr_cpus),
	cmocka_unit_test(info_and_cpus),
	cmocka_unit_test(attr_priority),
	cmocka_unit_test(threads_named),
	cmocka_unit_test(idle_costs_nothing),
	cmocka_unit_test(fork_child_usable),
	cmocka_unit_test(fork_child_inherits_attr),
	/* run by CTest without RT privilege: see tests/CMakeLists.txt */
	cmocka_unit_test(nort_calls_refuse),
	cmocka_unit_test(nort_weak_calls_work),
}))
