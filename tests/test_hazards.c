/* SPDX-License-Identifier: MIT */
/*
 * Regression tests: the hazards a real implementation must survive.
 *  - a caller on the very CPU it hogs, at the hogs' own SCHED_FIFO
 *    priority (a hog or a caller that spun for the other would hang);
 *  - many threads calling everything at once: exact counts;
 *  - shutdown racing with calls;
 *  - a CPU that leaves the cpuset and comes back.
 */
#include "harness.h"
#include "../src/outcome.h" /* a stop's own outcome: internal */
#include "cpuset.h"

#include <pthread.h>

static int where(void *arg)
{
	(void)arg;
	return sched_getcpu();
}

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

/* A SCHED_FIFO 99 caller pinned to @cpu uses every call on every CPU.
 * Each failure is printed with what it returned. */
static intptr_t check_ret(const char *call, unsigned int cpu, int got,
			  int want)
{
	if (got == want)
		return 0;
	print_message("caller on CPU %u: %s returned %d, not %d\n", cpu, call,
		      got, want);
	return 1;
}

static void *fifo_caller(void *arg)
{
	unsigned int cpu = *(unsigned int *)arg, other = t_nth_cpu(1);
	struct sched_param sp = {
		.sched_priority = sched_get_priority_max(SCHED_FIFO)
	};
	struct cpuhog_work w = CPUHOG_WORK_INIT;
	cpu_set_t set;
	intptr_t bad = 0;
	/* fewer rounds where the knob says slow, and where there are many
	 * CPUs (each caller's stops and hog_cpus reach them all, and there
	 * is a caller per CPU): the same calls in the test's time (211 s at
	 * 32 vCPUs with 300 / 16 rounds) */
	int i, n = t_hog_cpus(&set),
	       rounds = t_fewer(300) / (n > 8 ? n / 8 : 1);

	rounds = rounds > 2 ? rounds : 2;
	t_pin(cpu);
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp))
		return (void *)-1;
	if (other == cpu)
		other = t_nth_cpu(0);
	for (i = 0; i < rounds; i++) {
		bad += check_ret("hog_one_cpu(self)", cpu,
				 hog_one_cpu(cpu, where, NULL), (int)cpu);
		bad += check_ret("hog_one_cpu(other)", cpu,
				 hog_one_cpu(other, where, NULL), (int)other);
		bad += !hog_one_cpu_nowait(cpu, where, NULL, &w);
		bad += check_ret("hog_work_wait", cpu, hog_work_wait(&w),
				 (int)cpu);
		bad += check_ret("hog_cpus", cpu,
				 hog_cpus(sizeof(set), &set, nothing, NULL), 0);
		bad += check_ret("hog_synchronize", cpu, hog_synchronize(), 0);
		bad += check_ret("stop_machine", cpu,
				 stop_machine(nothing, NULL, 0, NULL), 0);
	}
	return (void *)bad;
}

static void same_cpu_top_priority_caller(void **state)
{
	cpu_set_t set;
	int n = t_hog_cpus(&set), i;

	(void)state;
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO (root or RLIMIT_RTPRIO)");
	/* what is tested is a top-priority caller on a hog's own CPU, not
	 * the timeout */
	assert_int_equal(t_init_scaled(false), 0);
	for (i = 0; i < n; i++) {
		unsigned int cpu = t_nth_cpu(i);
		pthread_t th;
		void *bad;

		assert_int_equal(pthread_create(&th, NULL, fifo_caller, &cpu),
				 0);
		pthread_join(th, &bad);
		assert_int_equal((intptr_t)bad, 0);
	}
	cpuhog_shutdown();
}

/* ---- many threads, every call, exact counts ---- */

#define NTHREADS 4
static _Atomic long fn_runs;
static _Atomic int stress_stop;

static int counted(void *arg)
{
	atomic_fetch_add(&fn_runs, 1);
	return (int)(intptr_t)arg;
}

struct tally {
	unsigned int seed;
	long expect; /* callbacks this thread caused */
	long bad;
};

static void stress_round(struct tally *t, const cpu_set_t *set, int n)
{
	struct cpuhog_work w[4];
	unsigned int cpu = t_nth_cpu((int)(rand_r(&t->seed) % (unsigned)n));
	int k, r;

	switch (rand_r(&t->seed) % 4) {
	case 0:
		t->bad += hog_one_cpu(cpu, counted, (void *)7) != 7;
		t->expect++;
		break;
	case 1:
		memset(w, 0, sizeof(w));
		for (k = 0; k < 4; k++)
			t->bad += !hog_one_cpu_nowait(
				t_nth_cpu(k % n), counted,
				(void *)(intptr_t)k, &w[k]);
		for (k = 0; k < 4; k++)
			t->bad += hog_work_wait(&w[k]) != k;
		t->expect += 4;
		break;
	case 2:
		t->bad += hog_cpus(sizeof(*set), set, counted, 0) != 0;
		t->expect += n;
		break;
	default:
		r = try_hog_cpus(sizeof(*set), set, counted, 0);
		t->bad += r != 0 && r != -EAGAIN;
		t->expect += r == 0 ? n : 0;
		break;
	}
}

static void *stresser(void *arg)
{
	struct tally *t = arg;
	cpu_set_t set;
	int n = t_hog_cpus(&set);

	while (!atomic_load(&stress_stop))
		stress_round(t, &set, n);
	return NULL;
}

static void many_threads_exact_counts(void **state)
{
	struct tally t[NTHREADS];
	pthread_t th[NTHREADS];
	struct cpuhog_info before, after;
	long expect = 0;
	int i;

	(void)state;
	assert_int_equal(cpuhog_get_info(&before), 0);
	for (i = 0; i < NTHREADS; i++) {
		t[i] = (struct tally){ .seed = (unsigned int)i + 1 };
		assert_int_equal(pthread_create(&th[i], NULL, stresser, &t[i]),
				 0);
	}
	t_sleep_ms(1500);
	atomic_store(&stress_stop, 1);
	for (i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(t[i].bad, 0);
		expect += t[i].expect;
	}
	assert_true(expect > 0);
	assert_int_equal(atomic_load(&fn_runs), expect); /* none lost, none twice */
	assert_int_equal(cpuhog_get_info(&after), 0);
	assert_int_equal(after.queued - before.queued, expect);
	assert_int_equal(after.run - before.run, expect);
	assert_int_equal(after.refused, 0);
}

/* ---- shutdown racing with calls ---- */

static _Atomic long race_ok, race_refused, race_ran;
static int ran_here(void *arg)
{
	(void)arg;
	atomic_fetch_add(&race_ran, 1);
	return sched_getcpu();
}

static void *racer(void *arg)
{
	unsigned int cpu = *(unsigned int *)arg;
	struct cpuhog_work w = CPUHOG_WORK_INIT;

	while (!atomic_load(&stress_stop)) {
		int r = hog_one_cpu(cpu, ran_here, NULL);

		if (r == (int)cpu)
			atomic_fetch_add(&race_ok, 1);
		else if (r == -ESHUTDOWN)
			atomic_fetch_add(&race_refused, 1);
		else
			abort();
		if (hog_one_cpu_nowait(cpu, ran_here, NULL, &w)) {
			if (hog_work_wait(&w) != (int)cpu)
				abort();
			atomic_fetch_add(&race_ok, 1);
		}
	}
	return NULL;
}

static void shutdown_racing_calls(void **state)
{
	unsigned int cpus[2] = { t_nth_cpu(0), t_nth_cpu(1) };
	pthread_t th[2];
	int i;

	(void)state;
	atomic_store(&stress_stop, 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, racer, &cpus[i]),
				 0);
	for (i = 0; i < 40; i++) {
		t_sleep_ms(5);
		cpuhog_shutdown();
	}
	atomic_store(&stress_stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	/* every success ran its callback once, on the CPU asked for */
	assert_int_equal(atomic_load(&race_ok), atomic_load(&race_ran));
	assert_true(atomic_load(&race_ok) > 0);
}

/* ---- a CPU leaves the cpuset, then comes back ---- */

static struct t_cpuset cs;

static void cpuset_child(void *arg)
{
	struct cpuhog_info in;
	unsigned int cpu = 1;
	int i;

	(void)arg;
	if (hog_one_cpu(cpu, where, NULL) != (int)cpu)
		_exit(3);
	if (!t_cpuset_cpus(&cs, "0") || !t_cpuset_join(&cs))
		_exit(4);
	/* the kernel broke the hog's affinity: its work is refused */
	if (hog_one_cpu(cpu, where, NULL) != -ENOENT)
		_exit(5);
	/* out of the cpuset but online: no hotplug waits on it, and the
	 * multi-CPU calls must not nap for one (they napped 4 ms each) */
	for (i = 0; i < 50; i++)
		if (hog_synchronize() != 0)
			_exit(8);
	if (cpuhog_get_info(&in) != 0 || in.transit_naps != 0) {
		fprintf(stderr, "%llu transit naps with CPU 1 out of the "
			"cpuset\n", (unsigned long long)in.transit_naps);
		_exit(9);
	}
	if (!t_cpuset_cpus(&cs, "0-1"))
		_exit(6);
	/* the CPU is back: the hog pins itself again and is usable */
	if (hog_one_cpu(cpu, where, NULL) != (int)cpu)
		_exit(7);
	_exit(0);
}

static bool cpus_0_and_1(void)
{
	cpu_set_t mine;

	sched_getaffinity(0, sizeof(mine), &mine);
	return CPU_ISSET(0, &mine) && CPU_ISSET(1, &mine);
}

static void cpu_leaves_cpuset_and_returns(void **state)
{
	int status;

	(void)state;
	/* the parent stays without hogs, so that the child starts afresh */
	if (!cpus_0_and_1() || !t_cpuset_make(&cs, "0-1"))
		t_skip("needs root, a cpuset controller, CPUs 0 and 1");
	status = t_in_child(cpuset_child, NULL);
	t_cpuset_remove(&cs); /* empty once the child is gone */
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- stops on CPU 1 while the cpuset loses and regains it ---- */

#define FLIP_MS 2000

/*
 * One stop of flip_stops(), judged by the stop invariant and by its own
 * outcome (src/outcome.h): stop_machine() with fn on CPU 1 alone, or
 * stop_two_cpus(1, 0).  One case is let pass, as the header does: this
 * stop's hog moved in the instant between its last check and fn's first
 * instruction, fn ran on, once, and the stop says its hold was lost
 * (released STOP_LOST).  It was let pass whenever the process's
 * holds_released counter had moved meanwhile, for any reason (an
 * overrun, another stop's loss): a stop that broke the invariant and
 * released its hold for another reason passed.
 */
static int flip_stop(bool two, long *bad, long *moved)
{
	struct stop_outcome o;
	struct t_runs runs;
	cpu_set_t one;
	int r;

	memset(&runs, 0, sizeof(runs));
	CPU_ZERO(&one);
	CPU_SET(1, &one);
	r = cpuhog_i_stop_outcome(t_count_run, &runs, two ? 0 : sizeof(one),
				  two ? NULL : &one, two, 1, 0, &o);
	if (t_runs_ok(&runs, r, &one))
		return r;
	if (r == 0 && o.released == STOP_LOST &&
	    atomic_load(&runs.total) == 1) {
		++*moved;
		return r;
	}
	t_runs_print(two ? "stop_two_cpus" : "stop_machine", &runs, r);
	fprintf(stderr, "its outcome: ended %u, fn ran on %u hogs of %u, "
		"released %u\n", o.ended, o.fn_runs, o.fn_want, o.released);
	++*bad;
	return r;
}

/* Back to back for FLIP_MS, each stop judged (flip_stop()).  Exits 10 if
 * a stop broke the invariant, 11 if none ran fn. */
static void flip_stops(void *arg)
{
	long bad = 0, ok = 0, nocpu = 0, timedout = 0, other = 0, moved = 0, k;
	uint64_t end = t_now() + FLIP_MS * MS;
	struct cpuhog_info in;
	int r;

	(void)arg;
	for (k = 0; t_now() < end; k++) {
		r = flip_stop(k & 1, &bad, &moved);
		ok += r == 0;
		nocpu += r == -ENOENT;
		timedout += r == -ETIMEDOUT;
		other += r != 0 && r != -ENOENT && r != -ETIMEDOUT;
	}
	cpuhog_get_info(&in);
	fprintf(stderr, "cpuset flips: %ld stops: %ld ran fn (%ld moved as "
		"fn began, their own hold lost), %ld -ENOENT (%llu missed fn "
		"after CHECK), %ld -ETIMEDOUT, %ld other, %ld broke the "
		"invariant\n",
		k, ok, moved, nocpu, (unsigned long long)in.stop_misses,
		timedout, other, bad);
	_exit(bad || other ? 10 : ok == 0 ? 11 : 0);
}

/*
 * A hog moved off its CPU after acknowledging HOLD waited behind another
 * hog on the CPU it was moved to; when that one slept, the moved one saw
 * RUN and ran fn there, on a CPU nobody asked for, and the stop returned
 * 0.  The parent flips the child's cpuset between 0-1 and 0 at random
 * delays of up to 2 ms while the child stops.
 */
static void stop_lands_where_asked_under_cpuset_flips(void **state)
{
	unsigned int seed = (unsigned int)getpid();
	int status = 0;
	struct cpuhog_attr a;
	int ready[2];
	char c;
	pid_t pid;

	(void)state;
	if (T_TSAN || !cpus_0_and_1() || !t_can_rt())
		t_skip("needs CPUs 0 and 1, real-time priority; TSan: no "
		       "threads after fork");
	if (!t_cpuset_make(&cs, "0-1"))
		t_skip("needs root and a cpuset controller");
	cpuhog_shutdown(); /* the child starts its own hogs, in the set */
	cpuhog_attr_init(&a);
	a.spin_ns = CPUHOG_NO_SPIN;
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(30);
		/* the hogs start with both CPUs in the set; with no spin
		 * before an early arrival sleeps, the last one's wake-up
		 * leaves the others held and waiting: the window asked for */
		if (!t_cpuset_join(&cs) || cpuhog_init(&a) != 0 ||
		    write(ready[1], "", 1) != 1)
			_exit(4);
		flip_stops(NULL);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1)
		c = 0;
	close(ready[0]);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		t_cpuset_cpus(&cs, "0");
		usleep(rand_r(&seed) % 300);
		t_cpuset_cpus(&cs, "0-1");
		usleep(rand_r(&seed) % 300);
	}
	t_cpuset_cpus(&cs, "0-1");
	t_cpuset_remove(&cs);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

T_MAIN(((const struct CMUnitTest[]){
	cmocka_unit_test(same_cpu_top_priority_caller),
	cmocka_unit_test(many_threads_exact_counts),
	cmocka_unit_test(shutdown_racing_calls),
	cmocka_unit_test(cpu_leaves_cpuset_and_returns),
	cmocka_unit_test(stop_lands_where_asked_under_cpuset_flips),
}))
