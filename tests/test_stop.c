/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: stop_machine() and stop_two_cpus().  Linked with the static
 * library and --wrap=malloc & co., so that the test sees every allocation
 * the library makes.
 */
#include "harness.h"
#include "../src/outcome.h" /* the stop's own outcome: internal */

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>

/* ---- allocation watch ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
static _Atomic int alloc_fail, alloc_tries;

void *__wrap_malloc(size_t n)
{
	atomic_fetch_add(&alloc_tries, 1);
	return atomic_load(&alloc_fail) ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
	atomic_fetch_add(&alloc_tries, 1);
	return atomic_load(&alloc_fail) ? NULL : __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
	atomic_fetch_add(&alloc_tries, 1);
	return atomic_load(&alloc_fail) ? NULL : __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n)
{
	atomic_fetch_add(&alloc_tries, 1);
	return atomic_load(&alloc_fail) ? NULL : __real_aligned_alloc(a, n);
}

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

/* ---- probes: threads that spin counting, one per CPU ---- */

#define MAXP 64
static _Atomic unsigned long probe_count[MAXP];
static _Atomic int probes_stop;
static pthread_t probe_th[MAXP];
static int nprobes;

static void *probe(void *arg)
{
	int i = (int)(intptr_t)arg;

	t_pin(t_nth_cpu(i));
	while (!atomic_load_explicit(&probes_stop, memory_order_relaxed))
		atomic_fetch_add_explicit(&probe_count[i], 1,
					  memory_order_relaxed);
	return NULL;
}

/* Start a probe on each hogged CPU (at FIFO @rt if non-zero); whether
 * each really runs (a busy machine may keep one off for a while). */
static bool probes_start(int rt)
{
	pthread_attr_t pa;
	struct sched_param sp = { .sched_priority = rt };
	cpu_set_t set;
	unsigned long before[MAXP];
	int i, tries, moved;

	nprobes = t_hog_cpus(&set);
	if (nprobes > MAXP) /* a probe on each of the first MAXP */
		nprobes = MAXP;
	atomic_store(&probes_stop, 0);
	pthread_attr_init(&pa);
	if (rt) {
		pthread_attr_setinheritsched(&pa, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&pa, SCHED_FIFO);
		pthread_attr_setschedparam(&pa, &sp);
	}
	for (i = 0; i < nprobes; i++)
		assert_int_equal(pthread_create(&probe_th[i], &pa, probe,
						(void *)(intptr_t)i),
				 0);
	pthread_attr_destroy(&pa);
	t_sleep_ms(20);
	for (i = 0; i < nprobes; i++)
		before[i] = atomic_load(&probe_count[i]);
	/* each must move within 20 ms; in an overcommitted guest, within
	 * as many host time slices more */
	for (tries = 0; tries < 20 * (int)t_load(); tries++) {
		t_sleep_ms(1);
		for (i = moved = 0; i < nprobes; i++)
			moved += atomic_load(&probe_count[i]) != before[i];
		if (moved == nprobes)
			return true;
	}
	return false;
}

static void probes_end(void)
{
	int i;

	atomic_store(&probes_stop, 1);
	for (i = 0; i < nprobes; i++)
		pthread_join(probe_th[i], NULL);
}

/* Inside the stop: for 5 ms, no probe may move. */
static _Atomic int frozen_runs;
static int probes_frozen(void *arg)
{
	unsigned long snap[MAXP];
	uint64_t end = t_now() + 5 * MS;
	int i, moved = 0;

	(void)arg;
	atomic_fetch_add(&frozen_runs, 1);
	for (i = 0; i < nprobes; i++)
		snap[i] = atomic_load(&probe_count[i]);
	while (t_now() < end)
		;
	for (i = 0; i < nprobes; i++)
		moved += atomic_load(&probe_count[i]) != snap[i];
	return moved ? 100 + moved : 0;
}

/*
 * One stop of probes_frozen; a probe that moved counts only if the hold
 * stood: no hog was preempted meanwhile (t_hogs_preempted(): RT
 * throttling, which an overcommitted guest's slow rendezvous reaches),
 * and the stop did not end it (its own outcome's released: fn's 5 ms
 * took 126 ms at 16 vCPUs, its vCPU not run by the host, past
 * overrun_ns, and the other hogs slept as the header says they do).
 * Such a stop is retried.  Returns false when every try's hold was
 * broken.
 */
static bool frozen_stop(size_t setsize, const cpu_set_t *set)
{
	struct stop_outcome o;
	int tries, r = 0;

	for (tries = 0; tries < 5; tries++) {
		unsigned long pre = t_hogs_preempted();

		r = cpuhog_i_stop_outcome(probes_frozen, NULL, setsize, set,
					  false, 0, 0, &o);
		if (r == -ETIMEDOUT && getenv("CPUHOG_GUEST")) {
			/* ran nowhere, so it says nothing of the hold: at 32
			 * vCPUs on 2 host CPUs a retry after RT throttling
			 * broke a hold timed out (even at 3.2 s) */
			print_message("the stop timed out; again\n");
			continue;
		}
		/* under qemu-user 1 probe in 2 stops moved, with pand busy
		 * on the other CPU: the emulator's, not the hold's */
		if (r <= 100 || (!o.released && !t_qemu_user() &&
				 t_hogs_preempted() == pre)) {
			assert_int_equal(r, 0);
			return true;
		}
		print_message("the hold was broken during the stop (hogs "
			      "preempted +%lu, released %u%s): the probes moved "
			      "%d; again\n", t_hogs_preempted() - pre,
			      o.released, t_qemu_user() ? ", under qemu-user" : "",
			      r - 100);
	}
	return false;
}

static void stop_freezes_everything(void **state)
{
	cpu_set_t set;
	bool held = true;
	int i, rt;

	(void)state;
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO (root or RLIMIT_RTPRIO)");
	/* what is tested is the hold, not the overrun rule: fn's 5 ms lasted
	 * 126 ms at 16 vCPUs (its vCPU not run by the host), past the 100 ms
	 * overrun_ns, and the stop released the hold as documented; so the
	 * bound scales with the guest's sharing (1 on a live machine) */
	assert_int_equal(t_init_scaled(true), 0); /* nor the timeout */
	t_pin(t_nth_cpu(0));
	t_hog_cpus(&set);
	for (rt = 0; rt <= 50; rt += 50) { /* plain and lower-priority RT */
		/* above the RT probes, or they would starve this thread */
		struct sched_param sp = { .sched_priority = rt ? rt + 10 : 0 };

		assert_int_equal(sched_setscheduler(0, rt ? SCHED_FIFO
							  : SCHED_OTHER,
						    &sp),
				 0);
		if (!probes_start(rt)) {
			probes_end();
			sched_setscheduler(0, SCHED_OTHER,
					   &(struct sched_param){ 0 });
			t_skip("a probe did not run before the stops (busy "
			       "machine)");
		}
		for (i = 0; i < 5 && held; i++)
			/* fn on one CPU, then on every CPU at once: nothing
			 * else runs either way */
			held = frozen_stop(0, NULL) &&
			       frozen_stop(sizeof(set), &set);
		probes_end();
		if (!held) {
			sched_setscheduler(0, SCHED_OTHER,
					   &(struct sched_param){ 0 });
			t_skip("the hold was broken in each of 5 tries of a "
			       "stop (RT throttling, or fn past overrun_ns: an "
			       "overcommitted guest's vCPUs are run late enough "
			       "for either)");
		}
	}
	assert_int_equal(sched_setscheduler(0, SCHED_OTHER,
					    &(struct sched_param){ 0 }),
			 0);
	cpuhog_shutdown(); /* the next test's calls start the defaults */
}

/* The same probe under hog_cpus, which does not rendezvous, must see
 * movement: the check above can fail.  That needs the probe on the other
 * CPU to run during the callback, which a busy machine may prevent: a
 * few tries, then a skip that says so (it is the precondition, not the
 * claim). */
static void hog_cpus_does_not_freeze(void **state)
{
	unsigned int cpu = t_nth_cpu(1);
	cpu_set_t one;
	int i, r = 0;

	(void)state;
	if (t_nth_cpu(0) == cpu)
		t_skip("needs two hogged CPUs");
	t_pin(t_nth_cpu(0));
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (!probes_start(0)) {
		probes_end();
		t_skip("a probe did not run (busy machine)");
	}
	for (i = 0; i < 5 && r <= 100; i++)
		r = hog_cpus(sizeof(one), &one, probes_frozen, NULL);
	probes_end();
	if (r == 0)
		t_skip("the probe never ran during the callback (busy machine)");
	assert_true(r > 100);
}

/* fn runs exactly where asked: once per CPU of the set, or once in all. */
static _Atomic int ran_on[CPU_SETSIZE];
static int count_here(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ran_on[sched_getcpu()], 1);
	return 0;
}

static int sum_ran(void)
{
	int i, s = 0;

	for (i = 0; i < CPU_SETSIZE; i++)
		s += atomic_load(&ran_on[i]);
	return s;
}

static void stop_runs_where_asked(void **state)
{
	cpu_set_t set, one;
	int i;

	(void)state;
	t_hog_cpus(&set);
	memset(ran_on, 0, sizeof(ran_on));
	assert_int_equal(stop_machine(count_here, NULL, 0, NULL), 0);
	assert_int_equal(sum_ran(), 1);
	memset(ran_on, 0, sizeof(ran_on));
	assert_int_equal(stop_machine(count_here, NULL, sizeof(set), &set), 0);
	for (i = 0; i < CPU_SETSIZE; i++)
		assert_int_equal(atomic_load(&ran_on[i]), CPU_ISSET(i, &set));
	memset(ran_on, 0, sizeof(ran_on));
	CPU_ZERO(&one);
	CPU_SET(t_nth_cpu(1), &one);
	assert_int_equal(stop_machine(count_here, NULL, sizeof(one), &one), 0);
	assert_int_equal(atomic_load(&ran_on[t_nth_cpu(1)]), 1);
	assert_int_equal(sum_ran(), 1);
}

/*
 * The same at every fan-out of the wake tree (wake.c), which wakes a
 * stop's hogs: 2 and 3 make a tree of two levels or more from 5 hogs, 4
 * (the default) from 5, flat has the caller wake them all.  On 2 CPUs
 * every fan-out is flat.
 */
static void stop_every_wake_fanout(void **state)
{
	const uint64_t fanins[] = { 2, 3, 4, CPUHOG_WAKE_FLAT };
	struct cpuhog_attr a;
	cpu_set_t set;
	unsigned int f;
	int i, cpu, n;

	(void)state;
	n = t_hog_cpus(&set);
	for (f = 0; f < sizeof(fanins) / sizeof(fanins[0]); f++) {
		cpuhog_shutdown();
		cpuhog_attr_init(&a);
		a.wake_fanout = fanins[f];
		a.stop_timeout_ns = 200 * MS * t_load(); /* see t_init_scaled */
		assert_int_equal(cpuhog_init(&a), 0);
		for (i = 0; i < 20; i++) {
			memset(ran_on, 0, sizeof(ran_on));
			assert_int_equal(stop_machine(count_here, NULL,
						      sizeof(set), &set),
					 0);
			for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
				assert_int_equal(atomic_load(&ran_on[cpu]),
						 CPU_ISSET(cpu, &set));
			memset(ran_on, 0, sizeof(ran_on));
			assert_int_equal(stop_machine(count_here, NULL, 0, NULL),
					 0);
			assert_int_equal(sum_ran(), 1);
		}
	}
	cpuhog_shutdown(); /* the next test's calls start the defaults */
	if (n < 3)
		t_skip("needs 3 CPUs for a tree (fan-out 2): on 2 every "
		       "fan-out is flat (make check-smp runs it)");
}

static int value_on_last(void *arg)
{
	return sched_getcpu() == *(int *)arg ? 77 : 0;
}

static int call_stop(void *arg)
{
	(void)arg;
	return stop_machine(nothing, NULL, 0, NULL) == -EDEADLK &&
			       stop_two_cpus(0, 1, nothing, NULL) == -EDEADLK
		       ? 0
		       : -1;
}

static void stop_results_and_errors(void **state)
{
	cpu_set_t set, none, far;
	long bad = 0;
	int last;

	(void)state;
	last = (int)t_nth_cpu(t_hog_cpus(&set) - 1);
	CPU_ZERO(&none);
	CPU_ZERO(&far);
	CPU_SET(CPU_SETSIZE - 1, &far);
	assert_int_equal(stop_machine(value_on_last, &last, sizeof(set), &set),
			 77);
	assert_int_equal(stop_machine(NULL, NULL, 0, NULL), -EINVAL);
	assert_int_equal(t_stop_judged(sizeof(none), &none, &bad), -ENOENT);
	assert_int_equal(t_stop_judged(sizeof(far), &far, &bad), -ENOENT);
	assert_int_equal(bad, 0);
	assert_int_equal(hog_one_cpu(t_nth_cpu(0), call_stop, NULL), 0);
}

/* ---- timeout: a CPU held by another process's FIFO 99 spinner ---- */

static void stop_times_out_on_held_cpu(void **state)
{
	unsigned int victim = t_nth_cpu(1), mine = t_nth_cpu(0);
	struct t_held *h;
	struct cpuhog_attr a;
	struct cpuhog_info in;
	int status, r, tries;
	pid_t pid;

	(void)state;
	if (victim == mine || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = 10 * MS;
	assert_int_equal(cpuhog_init(&a), 0);
	t_pin(mine);
	memset(ran_on, 0, sizeof(ran_on));
	/* a guest's vCPUs come slowly, and each hog's steps move the
	 * deadline on: hold longer there */
	h = t_hold_cpu(victim, 80 * t_slow() * t_many(), &pid);
	r = stop_machine(count_here, NULL, 0, NULL);
	/* it gave up while the CPU was still held: no hang */
	assert_int_equal(atomic_load(&h->done), 0);
	assert_int_equal(r, -ETIMEDOUT);
	assert_int_equal(stop_two_cpus(mine, victim, count_here, NULL),
			 -ETIMEDOUT);
	assert_int_equal(sum_ran(), 0); /* fn ran nowhere */
	/* the other CPU is not held back meanwhile */
	assert_int_equal(hog_one_cpu(mine, count_here, NULL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.stop_timeouts, 2);
	/* once the CPU is free, stops work again.  10 ms is short for an
	 * emulated guest's vCPUs, which the host runs late: a few more
	 * tries there, each of which must have run fn nowhere.  Past one
	 * vCPU per host CPU it is shorter than the host leaves a vCPU
	 * unrun (at 64 vCPUs on 2 host CPUs, 50 tries in a row timed
	 * out): there the library restarts with its timeout scaled, and
	 * the same context's recovery is what a live machine tests */
	if (t_load() > 1)
		assert_int_equal(t_init_scaled(false), 0);
	memset(ran_on, 0, sizeof(ran_on));
	for (tries = 0; tries < 50; tries++) {
		r = stop_machine(count_here, NULL, 0, NULL);
		if (r != -ETIMEDOUT)
			break;
		assert_int_equal(sum_ran(), 0);
	}
	assert_int_equal(r, 0);
	assert_int_equal(sum_ran(), 1);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.stop_timeouts,
			 (t_load() > 1 ? 0 : 2) + (uint64_t)tries);
	assert_int_equal(in.queued, in.run + in.refused);
	munmap(h, sizeof(*h));
	cpuhog_shutdown();
}

/*
 * The default stop timeout from the environment (CPUHOG_STOP_TIMEOUT_MS):
 * with 20 ms, a stop on a CPU held for 60 ms gives up while it is held;
 * with 5 s the same stop waits the hold out and runs; a value that is not
 * a plain count of milliseconds is ignored (the default, 200 ms, also
 * outlasts the hold).  A timeout in the attributes still wins.
 */
static int env_stop(const char *env, uint64_t attr_ns, unsigned int hold_ms,
		    bool *was_held)
{
	unsigned int victim = t_nth_cpu(1), mine = t_nth_cpu(0);
	struct cpuhog_attr a;
	struct t_held *h;
	int status, r;
	pid_t pid;

	cpuhog_shutdown();
	assert_int_equal(setenv("CPUHOG_STOP_TIMEOUT_MS", env, 1), 0);
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = attr_ns;
	assert_int_equal(cpuhog_init(&a), 0);
	assert_int_equal(unsetenv("CPUHOG_STOP_TIMEOUT_MS"), 0);
	t_pin(mine);
	memset(ran_on, 0, sizeof(ran_on));
	h = t_hold_cpu(victim, hold_ms, &pid);
	r = stop_machine(count_here, NULL, 0, NULL);
	*was_held = !atomic_load(&h->done);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	munmap(h, sizeof(*h));
	cpuhog_shutdown();
	assert_int_equal(sum_ran(), r == 0 ? 1 : 0);
	return r;
}

static void stop_timeout_from_environment(void **state)
{
	unsigned int hold = 60 * t_slow() * t_many();
	char outlasts[16]; /* a timeout four times the hold, 5 s at least */
	bool held;

	(void)state;
	if (t_nth_cpu(1) == t_nth_cpu(0) || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	snprintf(outlasts, sizeof(outlasts), "%u",
		 4 * hold > 5000 ? 4 * hold : 5000);
	assert_int_equal(env_stop("20", 0, hold, &held), -ETIMEDOUT);
	/* it gave up while the CPU was still held: on a live machine; a
	 * guest's late arrivals move the deadline on (at 32 vCPUs a 20 ms
	 * stop outlasted a 1.2 s hold), and its result is what counts */
	assert_true(held || getenv("CPUHOG_GUEST"));
	assert_int_equal(env_stop(outlasts, 0, hold, &held), 0);
	/* the attributes' timeout wins over the environment's */
	assert_int_equal(env_stop(outlasts, 20 * MS, hold, &held), -ETIMEDOUT);
	assert_true(held || getenv("CPUHOG_GUEST"));
	if (getenv("CPUHOG_GUEST"))
		return; /* 200 ms is too short for a guest: that is the point */
	/* a value that is not a number of ms is ignored: the default 200 ms
	 * outlasts a 60 ms hold (unscaled: under qemu-user a 600 ms hold
	 * outlasted the default, which is what this must not test) */
	assert_int_equal(env_stop("20ms", 0, 60, &held), 0);
	assert_int_equal(env_stop("0", 0, 60, &held), 0);
}

/* ---- no allocation on the path, once initialised ---- */
static void stop_never_allocates(void **state)
{
	cpu_set_t set;
	int tries;

	(void)state;
	t_hog_cpus(&set);
	atomic_store(&alloc_tries, 0);
	atomic_store(&alloc_fail, 1);
	assert_int_equal(stop_machine(nothing, NULL, 0, NULL), 0);
	assert_int_equal(stop_machine(nothing, NULL, sizeof(set), &set), 0);
	assert_int_equal(stop_two_cpus(t_nth_cpu(0), t_nth_cpu(1), nothing,
				       NULL),
			 t_nth_cpu(0) == t_nth_cpu(1) ? -EINVAL : 0);
	assert_int_equal(hog_one_cpu(t_nth_cpu(1), nothing, NULL), 0);
	assert_int_equal(hog_cpus(sizeof(set), &set, nothing, NULL), 0);
	assert_int_equal(hog_synchronize(), 0);
	tries = atomic_load(&alloc_tries);
	atomic_store(&alloc_fail, 0);
	assert_int_equal(tries, 0);
	/* and the wrap sees allocations at all: init does allocate */
	cpuhog_shutdown();
	assert_int_equal(cpuhog_init(NULL), 0);
	assert_true(atomic_load(&alloc_tries) > 0);
}

/* ---- stop_two_cpus ---- */
static _Atomic int two_ran;
static int frozen_other(void *arg)
{
	int other = *(int *)arg;
	unsigned long before = atomic_load(&probe_count[other]);
	uint64_t end = t_now() + 5 * MS;

	atomic_fetch_add(&two_ran, 1);
	while (t_now() < end)
		;
	return atomic_load(&probe_count[other]) == before ? sched_getcpu()
							 : -100;
}

/* stop_two_cpus(first, second, frozen_other), counted once in two_ran;
 * under qemu-user a moved probe is tried again (its hogs can sleep inside
 * the emulator's exclusive sections: 1 run in 2 saw the held CPU's probe
 * move there, never on a live machine or in a guest) */
static int two_frozen(unsigned int first, unsigned int second, int *idx)
{
	int r = -100;

	for (int i = 0; i < 10; i++) {
		r = stop_two_cpus(first, second, frozen_other, idx);
		if (r != -100 || !t_qemu_user())
			break;
		print_message("the held CPU's probe moved under qemu-user; "
			      "again\n");
		atomic_fetch_sub(&two_ran, 1);
	}
	return r;
}

static void two_cpus_rendezvous(void **state)
{
	unsigned int a = t_nth_cpu(0), b = t_nth_cpu(1);
	int idx_b = 1, idx_a = 0;

	(void)state;
	if (a == b || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	/* fn's 5 ms took 140 ms at 64 vCPUs (its vCPU not run by the
	 * host), past overrun_ns, and the stop released the hold as
	 * documented: the bound scales with the guest's sharing */
	assert_int_equal(t_init_scaled(true), 0);
	if (!probes_start(0)) {
		probes_end();
		t_skip("a probe did not run (busy machine)");
	}
	/* fn on the first, the second held: its probe does not move */
	assert_int_equal(two_frozen(b, a, &idx_a), (int)b);
	assert_int_equal(two_frozen(a, b, &idx_b), (int)a);
	probes_end();
	assert_int_equal(atomic_load(&two_ran), 2);
	assert_int_equal(stop_two_cpus(a, a, nothing, NULL), -EINVAL);
	assert_int_equal(stop_two_cpus(a, 99999, nothing, NULL), -ENOENT);
	assert_int_equal(stop_two_cpus(99999, a, nothing, NULL), -ENOENT);
	assert_int_equal(stop_two_cpus(a, b, NULL, NULL), -EINVAL);
}

/* ---- every multi-CPU call at once, from several threads ---- */
static _Atomic int mix_stop;
static _Atomic long mix_runs;
static int mix_fn(void *arg)
{
	(void)arg;
	atomic_fetch_add(&mix_runs, 1);
	return 0;
}

static void *mixer(void *arg)
{
	unsigned int seed = (unsigned int)(intptr_t)arg;
	cpu_set_t set;
	int n = t_hog_cpus(&set);
	long bad = 0;

	while (!atomic_load(&mix_stop)) {
		unsigned int a = t_nth_cpu((int)(rand_r(&seed) % (unsigned)n));
		unsigned int b = t_nth_cpu((int)(rand_r(&seed) % (unsigned)n));
		int r;

		switch (rand_r(&seed) % 6) {
		case 0:
			bad += t_stop_judged(0, NULL, &bad) != 0;
			break;
		case 1:
			bad += t_stop_judged(sizeof(set), &set, &bad) != 0;
			break;
		case 2:
			r = t_stop_two_judged(a, b, &bad);
			bad += a == b ? r != -EINVAL : r != 0;
			break;
		case 3:
			bad += hog_cpus(sizeof(set), &set, mix_fn, NULL) != 0;
			break;
		case 4:
			r = try_hog_cpus(sizeof(set), &set, mix_fn, NULL);
			bad += r != 0 && r != -EAGAIN;
			break;
		default:
			bad += hog_one_cpu(a, mix_fn, NULL) != 0;
			bad += hog_synchronize() != 0;
			break;
		}
		atomic_fetch_add(&mix_runs, 1);
	}
	return (void *)(intptr_t)bad;
}

static void mixed_multi_cpu_stress(void **state)
{
	pthread_t th[4];
	void *bad;
	int i;

	(void)state;
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, mixer,
						(void *)(intptr_t)(i + 1)),
				 0);
	t_sleep_ms(1500);
	atomic_store(&mix_stop, 1);
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], &bad);
		assert_int_equal((intptr_t)bad, 0);
	}
	assert_true(atomic_load(&mix_runs) > 0);
}


/*
 * Two processes stopping back to back at the same time: each makes 300
 * stops of a short fn, and every one of both must run (stops are
 * serialized machine-wide, as the kernel's stop_cpus_mutex serializes
 * its stoppers: neither process's hogs ever wait behind the other's).
 * The fork comes before either process has hogs (no threads at the fork,
 * for TSan); each makes its own.
 */
#define TWO_PROC_STOPS 300
struct two_proc {
	_Atomic int ready;
	_Atomic int failed[2]; /* stops that did not return 0 */
	_Atomic int last_err[2];
};

static void two_proc_stops(struct two_proc *t, int me)
{
	int i, r;

	assert_int_equal(t_init_scaled(false), 0);
	atomic_fetch_add(&t->ready, 1);
	while (atomic_load(&t->ready) < 2)
		;
	for (i = 0; i < TWO_PROC_STOPS; i++) {
		r = stop_machine(nothing, NULL, 0, NULL);
		if (r != 0) {
			atomic_fetch_add(&t->failed[me], 1);
			atomic_store(&t->last_err[me], r);
		}
	}
	cpuhog_shutdown();
}

static void two_processes_stop_together(void **state)
{
	struct two_proc *t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status;
	pid_t pid;

	(void)state;
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO");
	assert_true(t != MAP_FAILED);
	cpuhog_shutdown(); /* no threads at the fork */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		t_alarm(60); /* the one knob: 600 s in an emulated guest */
		two_proc_stops(t, 1);
		_exit(0);
	}
	two_proc_stops(t, 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		print_message("the child: %s %d\n",
			      WIFEXITED(status) ? "exit" : "signal",
			      WIFEXITED(status) ? WEXITSTATUS(status)
						: WTERMSIG(status));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	print_message("two processes, %d stops each: %d and %d failed "
		      "(last errors %d, %d)\n",
		      TWO_PROC_STOPS, atomic_load(&t->failed[0]),
		      atomic_load(&t->failed[1]), atomic_load(&t->last_err[0]),
		      atomic_load(&t->last_err[1]));
	assert_int_equal(atomic_load(&t->failed[0]), 0);
	assert_int_equal(atomic_load(&t->failed[1]), 0);
	munmap(t, sizeof(*t));
}

/*
 * Another process holding the machine-wide stop lock, as its own stop
 * would: ours waits for it, then runs; held past the lock's bound (four
 * stop timeouts: a squatter), ours goes on unserialized and runs; and a
 * holder that dies frees it (the kernel drops an open file description's
 * lock with its last descriptor).
 */
static void stop_serialized_with_other_processes(void **state)
{
	_Atomic int *held = mmap(NULL, sizeof(*held), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct stop_outcome o;
	struct cpuhog_info in;
	struct cpuhog_attr a;
	int status, r;
	pid_t pid;

	(void)state;
	assert_true(held != MAP_FAILED);
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = 20 * MS * t_slow() * t_load();
	assert_int_equal(cpuhog_init(&a), 0);
	assert_int_equal(cpuhog_get_info(&in), 0);
	if (!in.stop_serialized)
		t_skip("/run/lock/cpuhog-stop.lock cannot be had here: stops "
		       "are not serialized between processes");
	/* held for less than the bound: the stop waits, then runs */
	pid = t_hold_stop_lock(30 * t_slow() * t_load(), held);
	memset(ran_on, 0, sizeof(ran_on));
	r = cpuhog_i_stop_outcome(count_here, NULL, 0, NULL, false, 0, 0, &o);
	assert_int_equal(r, 0);
	assert_true(o.serialized && o.lock_waited);
	assert_int_equal(o.ended, STOP_RAN);
	assert_int_equal(sum_ran(), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* held past it (a squatter on the file): the stop goes on
	 * unserialized, as well as it can, rather than fail */
	pid = t_hold_stop_lock(0, held);
	memset(ran_on, 0, sizeof(ran_on));
	r = cpuhog_i_stop_outcome(count_here, NULL, 0, NULL, false, 0, 0, &o);
	assert_int_equal(r, 0);
	assert_true(o.lock_waited && o.lock_waited_out && !o.serialized);
	assert_int_equal(o.ended, STOP_RAN);
	assert_int_equal(sum_ran(), 1);
	/* its holder killed in the middle: the lock goes with it */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	r = cpuhog_i_stop_outcome(count_here, NULL, 0, NULL, false, 0, 0, &o);
	assert_int_equal(r, 0);
	assert_true(o.serialized && !o.lock_waited);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_true(in.stop_lock_waits >= 2);
	munmap((void *)held, sizeof(*held));
	cpuhog_shutdown();
}

T_MAIN(((const struct CMUnitTest[]){
	cmocka_unit_test(stop_freezes_everything),
	cmocka_unit_test(hog_cpus_does_not_freeze),
	cmocka_unit_test(stop_runs_where_asked),
	cmocka_unit_test(stop_every_wake_fanout),
	cmocka_unit_test(stop_results_and_errors),
	cmocka_unit_test(stop_times_out_on_held_cpu),
	cmocka_unit_test(stop_timeout_from_environment),
	cmocka_unit_test(stop_never_allocates),
	cmocka_unit_test(two_cpus_rendezvous),
	cmocka_unit_test(mixed_multi_cpu_stress),
	cmocka_unit_test(two_processes_stop_together),
	cmocka_unit_test(stop_serialized_with_other_processes),
}))
