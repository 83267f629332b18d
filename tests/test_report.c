/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: stop_machine_report() and stop_two_cpus_report(), the
 * stop's report (issue 37).  Linked with the static library and
 * --wrap=malloc & co., so that a stop that succeeds is seen to allocate
 * nothing, report or not.
 */
#include "harness.h"

#include <sys/wait.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
static _Atomic int alloc_tries;

void *__wrap_malloc(size_t n)
{
	atomic_fetch_add(&alloc_tries, 1);
	return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
	atomic_fetch_add(&alloc_tries, 1);
	return __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
	atomic_fetch_add(&alloc_tries, 1);
	return __real_realloc(p, n);
}

static uint64_t spin_ns;
static _Atomic int runs;

static int spin(void *arg)
{
	uint64_t end = t_now() + spin_ns;

	(void)arg;
	atomic_fetch_add(&runs, 1);
	while (t_now() < end)
		;
	return 0;
}

static struct cpuhog_report_cpu rc[CPU_SETSIZE];

static void report_init(struct cpuhog_report *rep)
{
	cpuhog_report_init(rep);
	rep->cpu = rc;
	rep->cpu_len = CPU_SETSIZE;
}

/* Every CPU of @rep's array: in order, within the call. */
static void times_ordered(const struct cpuhog_report *rep)
{
	unsigned int i;

	for (i = 0; i < rep->nr_cpu; i++) {
		assert_true(rc[i].flags & CPUHOG_RC_ARRIVED);
		assert_true(rc[i].flags & CPUHOG_RC_HELD);
		assert_false(rc[i].flags & CPUHOG_RC_MISSING);
		assert_true(rc[i].arrived_ns > 0);
		assert_true(rc[i].arrived_ns <= rc[i].held_ns);
		assert_true(rc[i].held_ns <= rc[i].released_ns);
		assert_true(rc[i].released_ns <= rep->total_ns);
		assert_true(rep->all_held_ns <= rc[i].held_ns);
		assert_true(CPU_ISSET(rc[i].cpu, &rep->held));
	}
}

/* ---- a stop that succeeds: every CPU ran fn and was held ---- */
static void report_stop_succeeds(void **state)
{
	struct cpuhog_report rep;
	cpu_set_t set;
	unsigned int i;
	int n;

	(void)state;
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO");
	n = t_hog_cpus(&set);
	spin_ns = 2 * MS;
	atomic_store(&runs, 0);
	report_init(&rep);
	assert_int_equal(stop_machine_report(spin, NULL, sizeof(set), &set,
					     &rep),
			 0);
	assert_int_equal(atomic_load(&runs), n);
	assert_int_equal(rep.ret, 0);
	assert_int_equal(rep.ended, CPUHOG_END_RAN);
	assert_int_equal(rep.released, CPUHOG_RELEASED_NONE);
	assert_int_equal(rep.nr_cpu, n);
	assert_int_equal(rep.nr_missing, 0);
	assert_int_equal(rep.fn_runs, n);
	assert_true(rep.tries >= 1);
	assert_true(CPU_EQUAL(&rep.ran, &set));
	assert_true(CPU_EQUAL(&rep.held, &set));
	assert_int_equal(CPU_COUNT(&rep.missing), 0);
	assert_true(rep.all_held_ns > 0);
	assert_true(rep.hold_ns >= spin_ns); /* fn ran inside the hold */
	assert_true(rep.all_held_ns + rep.hold_ns <= rep.total_ns);
	times_ordered(&rep);
	for (i = 0; i < rep.nr_cpu; i++)
		assert_true(rc[i].flags & CPUHOG_RC_RAN);

	/* fn on any one CPU: one ran it, every one was held */
	report_init(&rep);
	assert_int_equal(stop_machine_report(spin, NULL, 0, NULL, &rep), 0);
	assert_int_equal(rep.fn_runs, 1);
	assert_int_equal(CPU_COUNT(&rep.ran), 1);
	assert_true(CPU_EQUAL(&rep.held, &set));
	times_ordered(&rep);

	/* stop_two_cpus_report(): two CPUs, fn on the first */
	if (n >= 2) {
		unsigned int a = t_nth_cpu(0), b = t_nth_cpu(1);

		report_init(&rep);
		assert_int_equal(stop_two_cpus_report(a, b, spin, NULL, &rep),
				 0);
		assert_int_equal(rep.nr_cpu, 2);
		assert_int_equal(rep.fn_runs, 1);
		assert_true(CPU_ISSET(a, &rep.ran) && !CPU_ISSET(b, &rep.ran));
		assert_true(CPU_ISSET(a, &rep.held) && CPU_ISSET(b, &rep.held));
		assert_true(rep.hold_ns >= spin_ns);
		times_ordered(&rep);
	}
}

/* ---- no report asked, or a bad one ---- */
static void report_arguments(void **state)
{
	struct cpuhog_report rep;

	(void)state;
	spin_ns = 0;
	assert_int_equal(stop_machine_report(spin, NULL, 0, NULL, NULL), 0);
	cpuhog_report_init(&rep);
	assert_int_equal(rep.size, sizeof(rep));
	rep.size = 8; /* older than any version */
	assert_int_equal(stop_machine_report(spin, NULL, 0, NULL, &rep),
			 -EINVAL);
	cpuhog_report_init(&rep);
	rep.cpu_len = 4; /* entries, but no array */
	assert_int_equal(stop_machine_report(spin, NULL, 0, NULL, &rep),
			 -EINVAL);
	/* an error of the call is reported, with no rendezvous */
	cpuhog_report_init(&rep);
	assert_int_equal(stop_machine_report(NULL, NULL, 0, NULL, &rep),
			 -EINVAL);
	cpuhog_report_init(&rep);
	assert_int_equal(stop_two_cpus_report(0, 0, spin, NULL, &rep),
			 -EINVAL);
	assert_int_equal(rep.ret, -EINVAL);
	assert_int_equal(rep.ended, CPUHOG_END_NONE);
	assert_int_equal(rep.tries, 0);
	/* no array: the sets and times still come */
	cpuhog_report_init(&rep);
	assert_int_equal(stop_machine_report(spin, NULL, 0, NULL, &rep), 0);
	assert_int_equal(rep.ended, CPUHOG_END_RAN);
	assert_true(rep.nr_cpu >= 1);
	assert_int_equal(CPU_COUNT(&rep.held), (int)rep.nr_cpu);
}

/* ---- a stop that succeeds allocates nothing, report or not ---- */
static void report_never_allocates(void **state)
{
	struct cpuhog_report rep;
	cpu_set_t set;
	int tries;

	(void)state;
	t_hog_cpus(&set);
	spin_ns = 0;
	report_init(&rep);
	atomic_store(&alloc_tries, 0);
	assert_int_equal(stop_machine_report(spin, NULL, sizeof(set), &set,
					     &rep),
			 0);
	assert_int_equal(stop_two_cpus_report(t_nth_cpu(0), t_nth_cpu(1), spin,
					      NULL, &rep),
			 t_nth_cpu(0) == t_nth_cpu(1) ? -EINVAL : 0);
	tries = atomic_load(&alloc_tries);
	assert_int_equal(tries, 0);
}

/* ---- a stop that times out against another process's FIFO 99 ---- */
/* One try: true if the report named the holder.  On a machine shared
 * with other tests, another process's hog (at 99 too) may run on the
 * CPU in the 2 ms the library watches it, or another process's stop may
 * keep the stop lock: then false, to try again. */
static bool names_holder_once(unsigned int victim, unsigned int mine,
			      unsigned int *locked)
{
	struct cpuhog_report_cpu *miss = NULL;
	struct cpuhog_report rep;
	struct t_held *h;
	unsigned int i;
	int status, r;
	pid_t pid;

	(void)mine; /* the caller's: it may be missing too (below) */
	atomic_store(&runs, 0);
	h = t_hold_cpu(victim, 80 * t_slow() * t_many(), &pid);
	report_init(&rep);
	r = stop_machine_report(spin, NULL, 0, NULL, &rep);
	assert_int_equal(r, -ETIMEDOUT);
	if (rep.ended == CPUHOG_END_LOCKED_OUT) {
		/* another process's stop (another test's) kept the
		 * machine-wide lock, waiting for the held CPU itself */
		assert_int_equal(rep.nr_cpu, 0);
		assert_int_equal(rep.tries, 0);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		print_message("locked out by another process's stop\n");
		++*locked;
		return false;
	}
	assert_int_equal(atomic_load(&h->done), 0); /* still held: no hang */
	assert_int_equal(atomic_load(&runs), 0);
	assert_int_equal(rep.ret, -ETIMEDOUT);
	assert_int_equal(rep.ended, CPUHOG_END_TIMEDOUT);
	assert_int_equal(rep.fn_runs, 0);
	assert_int_equal(CPU_COUNT(&rep.ran), 0);
	assert_int_equal(rep.all_held_ns, 0);
	assert_int_equal(rep.hold_ns, 0);
	assert_true(rep.nr_missing >= 1);
	assert_true(CPU_ISSET(victim, &rep.missing));
	/* every CPU is either missing or arrived (in a guest whose vCPUs
	 * the host runs late, ours may be missing too) */
	for (i = 0; i < rep.nr_cpu; i++)
		if (rc[i].cpu == victim)
			miss = &rc[i];
		else
			assert_true(CPU_ISSET(rc[i].cpu, &rep.missing) ||
				    (rc[i].flags & CPUHOG_RC_ARRIVED));
	assert_non_null(miss);
	assert_true(miss->flags & CPUHOG_RC_MISSING);
	assert_int_equal(miss->arrived_ns, 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	print_message("CPU %u: pid %d tid %d (%s) policy %d priority %d, "
		      "%u runnable; the holder is %d\n",
		      miss->cpu, (int)miss->pid, (int)miss->tid, miss->comm,
		      miss->policy, miss->priority, miss->nr_running, (int)pid);
	if (miss->pid != pid) {
		/* only another process's hog may stand in for the holder */
		assert_int_equal(strncmp(miss->comm, "cpuhog/", 7), 0);
		return false;
	}
	/* the holder, by /proc: its pid, FIFO 99 */
	assert_int_equal(miss->tid, pid);
	assert_int_equal(miss->policy, SCHED_FIFO);
	assert_int_equal(miss->priority, 99);
	assert_true(miss->nr_running >= 1);
	assert_true(miss->comm[0] != 0);
	return true;
}

static void report_names_the_holder(void **state)
{
	unsigned int victim = t_nth_cpu(1), mine = t_nth_cpu(0), tries,
		     locked = 0;
	struct cpuhog_attr a;

	(void)state;
	if (victim == mine || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = 15 * MS;
	assert_int_equal(cpuhog_init(&a), 0);
	t_pin(mine);
	spin_ns = 0;
	for (tries = 0; tries < 6 && !names_holder_once(victim, mine, &locked);
	     tries++)
		t_sleep_ms(100);
	cpuhog_shutdown();
	if (tries == 6 && locked == 6)
		t_skip("other processes' stops kept the stop lock at each try");
	assert_true(tries < 6);
}

/* ---- a hold released by fn's overrun ---- */
static void report_overrun_releases(void **state)
{
	struct cpuhog_report rep;
	struct cpuhog_attr a;
	cpu_set_t one;
	unsigned int mine;

	(void)state;
	if (!t_can_rt() || t_nth_cpu(0) == t_nth_cpu(1))
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.overrun_ns = 3 * MS;
	a.stop_timeout_ns = 200 * MS * t_load();
	assert_int_equal(cpuhog_init(&a), 0);
	mine = t_nth_cpu(0);
	CPU_ZERO(&one);
	CPU_SET(mine, &one);
	spin_ns = 20 * MS;
	atomic_store(&runs, 0);
	report_init(&rep);
	assert_int_equal(stop_machine_report(spin, NULL, sizeof(one), &one,
					     &rep),
			 0);
	assert_int_equal(atomic_load(&runs), 1);
	assert_int_equal(rep.ended, CPUHOG_END_RAN);
	assert_int_equal(rep.released, CPUHOG_RELEASED_OVERRUN);
	assert_true(CPU_ISSET(mine, &rep.ran));
	assert_int_equal(CPU_COUNT(&rep.ran), 1);
	/* the hold ended at the overrun, not before (how soon after is
	 * the looks' timing: in a guest it can be fn's whole time) */
	assert_true(rep.hold_ns >= a.overrun_ns);
	times_ordered(&rep);
	cpuhog_shutdown();
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(report_stop_succeeds),
	cmocka_unit_test(report_arguments),
	cmocka_unit_test(report_never_allocates),
	cmocka_unit_test(report_names_the_holder),
	cmocka_unit_test(report_overrun_releases),
};

T_MAIN(tests)
