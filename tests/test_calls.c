/* SPDX-License-Identifier: MIT */
/* Unit tests: the semantics of each hog_* call, one by one. */
#include "harness.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

static int where(void *arg)
{
	(void)arg;
	return sched_getcpu();
}

static int plus_cpu(void *arg)
{
	return *(int *)arg + sched_getcpu();
}

/* hog_one_cpu runs fn on the CPU asked for and passes its value back. */
static void one_cpu_runs_there(void **state)
{
	cpu_set_t set;
	int cpu, base = 1000;

	(void)state;
	t_hog_cpus(&set);
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &set))
			continue;
		assert_int_equal(hog_one_cpu((unsigned int)cpu, where, NULL),
				 cpu);
		assert_int_equal(hog_one_cpu((unsigned int)cpu, plus_cpu, &base),
				 base + cpu);
	}
}

/*
 * Lost wake-ups between a hog going to sleep and a producer queueing:
 * hog_sleep() sets "sleeping" (a CAS) then loads the queue,
 * cpuhog_i_wake_hog() pushes then loads "sleeping" (Dekker's pattern,
 * seq_cst).  Works queued back
 * to back, each the moment the last finished, so that many pushes land
 * while the hog is between its store and its load; the caller polls
 * hog_work_done() and never sleeps, so only the hog's side is tested.
 * A work not done after a generous bound is a lost wake-up (the hog
 * asleep with work queued): counted, then the next push wakes it.  Under
 * qemu-aarch64 7.2 (make check-arm64) a seq_cst store and a seq_cst load
 * were reordered (stlr; ldar without a store-load barrier on an x86
 * host) and the soak hung in exactly this wait.
 */
static int count_one(void *arg)
{
	atomic_fetch_add((_Atomic int *)arg, 1);
	return 0;
}

static void back_to_back_wakeups_not_lost(void **state)
{
	struct cpuhog_work w = CPUHOG_WORK_INIT;
	unsigned int cpu = t_nth_cpu(1);
	uint64_t bound = t_bound(2000 * MS), end, deadline;
	_Atomic int ran = 0;
	int i, lost = 0, n = 0;

	(void)state;
	t_pin(t_nth_cpu(0));
	end = t_now() + 3000 * MS;
	for (i = 0; i < 200000 && t_now() < end && lost < 3; i++) {
		assert_true(hog_one_cpu_nowait(cpu, count_one,
					       (void *)&ran, &w));
		n++;
		deadline = t_now() + bound;
		while (!hog_work_done(&w) && t_now() < deadline)
			;
		if (!hog_work_done(&w)) {
			lost++;
			print_message("work %d on CPU %u not done after %llu "
				      "ms: a lost wake-up\n", i, cpu,
				      (unsigned long long)(bound / MS));
			/* a second push wakes the hog; it runs both */
			assert_int_equal(hog_one_cpu(cpu, count_one,
						     (void *)&ran), 0);
			n++;
			assert_int_equal(hog_work_wait(&w), 0);
		}
	}
	print_message("%d works, %d lost wake-ups\n", n, lost);
	assert_int_equal(atomic_load(&ran), n);
	assert_int_equal(lost, 0);
}

static int negative(void *arg)
{
	(void)arg;
	return -ENOEXEC;
}

static int call_one_cpu(void *arg)
{
	(void)arg;
	return hog_one_cpu(0, where, NULL);
}

static void one_cpu_errors(void **state)
{
	unsigned int cpu = t_nth_cpu(0);

	(void)state;
	assert_int_equal(hog_one_cpu(cpu, NULL, NULL), -EINVAL);
	assert_int_equal(hog_one_cpu(99999, where, NULL), -ENOENT);
	assert_int_equal(hog_one_cpu(UINT_MAX, where, NULL), -ENOENT);
	/* a callback's own negative value passes back unchanged */
	assert_int_equal(hog_one_cpu(cpu, negative, NULL), -ENOEXEC);
	/* from inside a hog: it would wait on itself */
	assert_int_equal(hog_one_cpu(cpu, call_one_cpu, NULL), -EDEADLK);
}

/* A callback that holds its hog until released (bounded: 50 ms). */
static _Atomic int inside, release_;
static int hold(void *arg)
{
	(void)arg;
	atomic_store(&inside, 1);
	/* a hang-catcher, as the main thread releases it at once; but at
	 * 64 vCPUs on 2 host CPUs the main thread came after 50 ms, the hold
	 * had ended, and try_cpus_busy's try found nothing running (0, not
	 * -EAGAIN): as long as the host may leave a vCPU unrun (the
	 * knob, applied by t_spin_until()) */
	return t_spin_until(&release_, 50 * MS)
		       ? 7
		       : -ETIMEDOUT;
}

static void nowait_runs_and_waits(void **state)
{
	struct cpuhog_work w = CPUHOG_WORK_INIT;
	unsigned int cpu = t_nth_cpu(1);

	(void)state;
	/* never queued: done, as hog_work_wait() returns at once */
	assert_true(hog_work_done(&w));
	assert_int_equal(hog_work_wait(&w), -EINVAL);
	assert_true(hog_one_cpu_nowait(cpu, where, NULL, &w));
	assert_int_equal(hog_work_wait(&w), (int)cpu);
	assert_true(hog_work_done(&w));
	/* waiting again gives the same result */
	assert_int_equal(hog_work_wait(&w), (int)cpu);
	/* a finished buffer may be queued again */
	assert_true(hog_one_cpu_nowait(cpu, negative, NULL, &w));
	assert_int_equal(hog_work_wait(&w), -ENOEXEC);
}

static void nowait_refuses(void **state)
{
	struct cpuhog_work w = CPUHOG_WORK_INIT, junk;
	unsigned int cpu = t_nth_cpu(1);

	(void)state;
	assert_false(hog_one_cpu_nowait(cpu, NULL, NULL, &w));
	assert_false(hog_one_cpu_nowait(cpu, where, NULL, NULL));
	assert_false(hog_one_cpu_nowait(99999, where, NULL, &w));
	assert_int_equal(hog_work_wait(&w), -EINVAL); /* never queued */
	memset(&junk, 0xa5, sizeof(junk));
	assert_false(hog_one_cpu_nowait(cpu, where, NULL, &junk));
	assert_int_equal(hog_work_wait(&junk), -EINVAL);
	assert_int_equal(hog_work_wait(NULL), -EINVAL);

	/* a buffer queued or running cannot be queued again; we stay off
	 * the CPU that is held, or the hog would hold us too */
	if (t_nth_cpu(0) == cpu)
		return;
	t_pin(t_nth_cpu(0));
	atomic_store(&inside, 0);
	atomic_store(&release_, 0);
	assert_true(hog_one_cpu_nowait(cpu, hold, NULL, &w));
	assert_true(t_spin_until(&inside, 5000 * MS));
	assert_false(hog_one_cpu_nowait(cpu, where, NULL, &w));
	assert_false(hog_work_done(&w));
	atomic_store(&release_, 1);
	assert_int_equal(hog_work_wait(&w), 7);
}

/* Works queued to one CPU run in the order queued. */
#define NORDER 64
static int order_log[NORDER], order_n;
static int log_index(void *arg)
{
	/* one hog runs these, one at a time: no race */
	order_log[order_n++] = (int)(intptr_t)arg;
	return 0;
}

static void nowait_in_order(void **state)
{
	struct cpuhog_work w[NORDER];
	unsigned int cpu = t_nth_cpu(1);
	int i;

	(void)state;
	memset(w, 0, sizeof(w));
	order_n = 0;
	for (i = 0; i < NORDER; i++)
		assert_true(hog_one_cpu_nowait(cpu, log_index,
					       (void *)(intptr_t)i, &w[i]));
	for (i = NORDER - 1; i >= 0; i--)
		assert_int_equal(hog_work_wait(&w[i]), 0);
	assert_int_equal(order_n, NORDER);
	for (i = 0; i < NORDER; i++)
		assert_int_equal(order_log[i], i);
}

/* From a callback: nowait is allowed, waiting is not. */
static struct cpuhog_work inner;
static int queue_from_hog(void *arg)
{
	struct cpuhog_work *outer = arg;

	if (hog_work_wait(outer) != -EDEADLK)
		return -1;
	return hog_one_cpu_nowait(t_nth_cpu(0), where, NULL, &inner) ? 0 : -2;
}

static void nowait_from_callback(void **state)
{
	struct cpuhog_work outer = CPUHOG_WORK_INIT;

	(void)state;
	memset(&inner, 0, sizeof(inner));
	assert_true(hog_one_cpu_nowait(t_nth_cpu(1), queue_from_hog, &outer,
				       &outer));
	assert_int_equal(hog_work_wait(&outer), 0);
	assert_int_equal(hog_work_wait(&inner), (int)t_nth_cpu(0));
}

/* hog_cpus: once on every CPU of the set, each on its own CPU. */
static _Atomic int ran_on[CPU_SETSIZE];
static int count_here(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ran_on[sched_getcpu()], 1);
	return 0;
}

static void cpus_runs_everywhere(void **state)
{
	cpu_set_t set;
	int i;

	(void)state;
	t_hog_cpus(&set);
	memset(ran_on, 0, sizeof(ran_on));
	assert_int_equal(hog_cpus(sizeof(set), &set, count_here, NULL), 0);
	for (i = 0; i < CPU_SETSIZE; i++)
		assert_int_equal(atomic_load(&ran_on[i]),
				 CPU_ISSET(i, &set) ? 1 : 0);
}

/* A set far larger than CPU_SETSIZE: CPUs without a hog are skipped. */
static void cpus_large_set(void **state)
{
	size_t sz = CPU_ALLOC_SIZE(8192);
	cpu_set_t *big = CPU_ALLOC(8192), set;
	int i, n = t_hog_cpus(&set), total = 0;

	(void)state;
	memset(big, 0xff, sz);
	memset(ran_on, 0, sizeof(ran_on));
	assert_int_equal(hog_cpus(sz, big, count_here, NULL), 0);
	for (i = 0; i < CPU_SETSIZE; i++)
		total += atomic_load(&ran_on[i]);
	assert_int_equal(total, n);
	/* only CPUs that do not exist: fn ran nowhere */
	CPU_ZERO_S(sz, big);
	CPU_SET_S(8000, sz, big);
	assert_int_equal(hog_cpus(sz, big, count_here, NULL), -ENOENT);
	CPU_FREE(big);
}

static int nonzero_on_last(void *arg)
{
	return sched_getcpu() == *(int *)arg ? 42 : 0;
}

static int ret0(void *arg)
{
	(void)arg;
	return 0;
}

static int call_cpus_ran(void *arg)
{
	cpu_set_t all, ran;

	(void)arg;
	t_hog_cpus(&all);
	return hog_cpus_ran(sizeof(all), &all, ret0, NULL, &ran);
}

static void cpus_results(void **state)
{
	cpu_set_t set, empty;
	int n = t_hog_cpus(&set), last = (int)t_nth_cpu(n - 1);

	(void)state;
	CPU_ZERO(&empty);
	assert_int_equal(hog_cpus(sizeof(set), &set, nonzero_on_last, &last),
			 42);
	assert_int_equal(hog_cpus(sizeof(set), NULL, where, NULL), -EINVAL);
	assert_int_equal(hog_cpus(sizeof(set), &set, NULL, NULL), -EINVAL);
	assert_int_equal(hog_cpus(sizeof(empty), &empty, where, NULL), -ENOENT);
	assert_int_equal(try_hog_cpus(sizeof(empty), &empty, where, NULL),
			 -ENOENT);
}

/*
 * hog_cpus_ran says where fn ran: every hogged CPU of the set, not a CPU
 * without a hog (hog_cpus returns 0 there too, so a drain could not tell
 * that it missed one); @ran may be @cpus; bad input changes nothing.
 */
static void cpus_ran_reports_where(void **state)
{
	cpu_set_t set, want, ran;
	int n = t_hog_cpus(&set);

	(void)state;
	want = set;
	CPU_SET(CPU_SETSIZE - 1, &set); /* no hog there */
	assert_int_equal(hog_cpus_ran(sizeof(set), &set, ret0, NULL, &ran),
			 0);
	assert_true(CPU_EQUAL(&ran, &want));
	assert_int_equal(CPU_COUNT(&ran), n);
	assert_int_equal(hog_cpus_ran(sizeof(set), &set, ret0, NULL, &set),
			 0); /* in place */
	assert_true(CPU_EQUAL(&set, &want));
	CPU_ZERO(&set);
	CPU_SET(CPU_SETSIZE - 1, &set);
	CPU_SET(0, &ran);
	assert_int_equal(hog_cpus_ran(sizeof(set), &set, ret0, NULL, &ran),
			 -ENOENT);
	assert_int_equal(CPU_COUNT(&ran), 0);
	assert_int_equal(hog_cpus_ran(sizeof(set), &set, ret0, NULL, NULL),
			 -EINVAL);
	assert_int_equal(hog_one_cpu(t_nth_cpu(0), call_cpus_ran, NULL),
			 -EDEADLK);
}

/*
 * All works are queued before any is waited for: each callback waits
 * (bounded) for all of them to have started.  Queueing one CPU at a time
 * and waiting for each would make the first one time out.
 */
static _Atomic int arrived, arrive_reported;
static _Atomic int arrived_on[CPU_SETSIZE];
static const cpu_set_t *arrive_set;
static int arrive_n; /* how many CPUs the last rendezvous asked */

/* A /proc/PID/stat line's state, priority and last CPU (fields 3, 18
 * and 39), in place. */
static const char *stat_fields(char *line)
{
	static char out[64];
	char *p = strrchr(line, ')'), *tok, *save;
	const char *state = "?", *prio = "?", *last = "?";
	int i;

	for (i = 3, tok = p ? strtok_r(p + 1, " ", &save) : NULL; tok;
	     i++, tok = strtok_r(NULL, " ", &save)) {
		if (i == 3)
			state = tok;
		else if (i == 18)
			prio = tok;
		else if (i == 39)
			last = tok;
	}
	snprintf(out, sizeof(out), "state %s prio %s last on CPU %s", state,
		 prio, last);
	return out;
}

/*
 * An all_arrive callback that gave up: which CPUs' callbacks never
 * started, and what each hog thread is doing (state, CPU, wait channel;
 * from inside a callback, a failure's last words), so that a lost wake
 * can be told from a vCPU the host did not run (one callback waited 64 s
 * at 64 vCPUs, fan-out 4, cause not known).
 */
static void arrivals_report(const cpu_set_t *set)
{
	char path[300], line[512], wchan[64];
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int cpu, in = 0, run = 0, asleep = 0;

	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, set) && !atomic_load(&arrived_on[cpu]))
			print_message("all_arrive: CPU %d never arrived\n", cpu);
	while (d && (e = readdir(d))) {
		FILE *f;
		const char *st;

		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f) ||
		    sscanf(line, "%*d (cpuhog/%d)", &cpu) != 1 ||
		    cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, set)) {
			fclose(f);
			continue;
		}
		fclose(f);
		st = stat_fields(line);
		if (atomic_load(&arrived_on[cpu])) {
			/* the arrived: counted, not listed (63 lines at 64) */
			in++;
			run += !strncmp(st, "state R", 7);
			asleep += !strncmp(st, "state S", 7);
			continue;
		}
		snprintf(path, sizeof(path), "/proc/self/task/%s/wchan",
			 e->d_name);
		f = fopen(path, "r");
		wchan[0] = 0;
		if (f && !fgets(wchan, sizeof(wchan), f))
			wchan[0] = 0;
		if (f)
			fclose(f);
		print_message("all_arrive: the hog of CPU %d (tid %s): %s, "
			      "wchan '%s'\n", cpu, e->d_name, st, wchan);
	}
	if (d)
		closedir(d);
	print_message("all_arrive: %d hogs arrived: %d running, %d asleep, "
		      "%d else; %d of %d counted in\n", in, run, asleep,
		      in - run - asleep, atomic_load(&arrived), CPU_COUNT(set));
}

static int all_arrive(void *arg)
{
	int n = *(int *)arg, cpu = sched_getcpu();
	/* a hang-catcher: at 64 vCPUs on 2 host CPUs one such call took
	 * 11 s alone, flat or tree, and past 16 s after other tests */
	uint64_t end = t_now() + t_bound(200 * MS);

	if (cpu >= 0 && cpu < CPU_SETSIZE)
		atomic_store(&arrived_on[cpu], 1);
	atomic_fetch_add(&arrived, 1);
	while (atomic_load(&arrived) < n)
		if (t_now() > end) {
			/* the first to give up says who is missing, now */
			if (!atomic_exchange(&arrive_reported, 1))
				arrivals_report(arrive_set);
			return -ETIMEDOUT;
		}
	return 0;
}

/*
 * hog_cpus of all_arrive on @all's first @n CPUs, or on 8 per host CPU
 * where a guest has more: a rendezvous of every CPU at 64 vCPUs on 2
 * host CPUs waited 64 s for three hogs whose wakes had been made (they
 * arrived after everyone else had given up and slept, with nobody left
 * to wake them), while the guest kernel reported the first of those very
 * CPUs not running, one grace period behind (an RCU stall): 63 vCPUs
 * spinning left the emulator running one vCPU that late, in two runs of
 * two.  What the test asks, every work queued before any is waited for,
 * needs only that the rendezvous spans the tree (4 levels at fan-out 2).
 */
static int arrive_all(const cpu_set_t *all, int n)
{
	static cpu_set_t set;
	int cpu, k = 0;

	/* a guest past 8 vCPUs per host CPU (its knob past 10) */
	if (t_slow() > 10)
		n = n * 10 / (int)t_slow();
	CPU_ZERO(&set);
	for (cpu = 0; cpu < CPU_SETSIZE && k < n; cpu++)
		if (CPU_ISSET(cpu, all)) {
			CPU_SET(cpu, &set);
			k++;
		}
	atomic_store(&arrived, 0);
	atomic_store(&arrive_reported, 0);
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		atomic_store(&arrived_on[cpu], 0);
	arrive_set = &set;
	arrive_n = k;
	return hog_cpus(sizeof(set), &set, all_arrive, &k);
}

static void cpus_queued_before_waiting(void **state)
{
	cpu_set_t set;
	int n = t_hog_cpus(&set);

	(void)state;
	assert_int_equal(arrive_all(&set, n), 0);
	assert_int_equal(atomic_load(&arrived), arrive_n);
}

/*
 * The wake tree (src/wake.c) at every fan-out, flat included: a lost
 * wake is a call that never returns (the test's timeout), a wrong tree a
 * CPU run twice or not at all.  At 2 CPUs every fan-out is flat; in a
 * guest (make check-smp) the fan-outs of 2 and 3 make trees of several
 * levels.  The stop's and the barrier's wakes take the same path.
 */
static void wake_tree_every_fanout(void **state)
{
	const uint64_t fanouts[] = { 2, 3, 4, 7, CPUHOG_WAKE_FLAT };
	struct cpuhog_attr a;
	cpu_set_t set;
	size_t f;
	long bad = 0;
	int i, cpu, n;

	(void)state;
	for (f = 0; f < sizeof(fanouts) / sizeof(fanouts[0]); f++) {
		cpuhog_shutdown();
		cpuhog_attr_init(&a);
		a.wake_fanout = fanouts[f];
		a.stop_timeout_ns = t_bound(1000 * MS);
		assert_int_equal(cpuhog_init(&a), 0);
		n = t_hog_cpus(&set);
		for (i = 0; i < 50; i++) {
			memset(ran_on, 0, sizeof(ran_on));
			assert_int_equal(hog_cpus(sizeof(set), &set,
						  count_here, NULL), 0);
			for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
				bad += atomic_load(&ran_on[cpu]) !=
				       (CPU_ISSET(cpu, &set) ? 1 : 0);
			assert_int_equal(hog_synchronize(), 0);
		}
		/* callbacks that wait for each other: every hog must be
		 * woken though our own CPU's is spinning (woken by a hog,
		 * it once kept the caller from its last wakes for 16 s) */
		assert_int_equal(arrive_all(&set, n), 0);
		for (i = 0; i < 5; i++)
			assert_int_equal(t_stop_judged(0, NULL, &bad), 0);
		assert_int_equal(bad, 0);
	}
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.wake_fanout = 1; /* a chain: refused */
	assert_int_equal(cpuhog_init(&a), -EINVAL);
}

/*
 * Parents that are awake when their slot is pushed: a hog busy with other
 * works takes its multi-CPU slot the moment it is pushed and wakes its
 * children at once.  A child whose work was not yet pushed then finds
 * its queue empty and sleeps again, and nobody wakes it: a lost wake-up,
 * and a call that never returns (seen at 64 vCPUs: every hog asleep, the
 * caller waiting).  Needs 3 hogs for a tree with a parent and a child;
 * fan-out 2 makes as many parents as there can be.
 */
static _Atomic int busy_stop;
static void *keep_hogs_busy(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	cpu_set_t set;
	int n = t_hog_cpus(&set);

	while (!atomic_load(&busy_stop))
		if (hog_one_cpu(t_nth_cpu((int)(rand_r(&seed) % (unsigned)n)),
				where, NULL) < 0)
			return (void *)1;
	return NULL;
}

static void wake_tree_busy_parents(void **state)
{
	struct cpuhog_attr a;
	pthread_t busy[3];
	cpu_set_t set;
	uint64_t end;
	long calls = 0;
	void *bad;
	int i;

	(void)state;
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.wake_fanout = 2;
	assert_int_equal(cpuhog_init(&a), 0);
	if (t_hog_cpus(&set) < 3)
		t_skip("needs 3 CPUs: on 2 the wake tree has no parent and "
		       "child (make check-smp runs it)");
	atomic_store(&busy_stop, 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&busy[i], NULL, keep_hogs_busy,
						(void *)(uintptr_t)(i + 1)),
				 0);
	for (end = t_now() + 1000 * MS; t_now() < end; calls++)
		assert_int_equal(hog_cpus(sizeof(set), &set, count_here, NULL),
				 0);
	atomic_store(&busy_stop, 1);
	for (i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(busy[i], &bad), 0);
		assert_null(bad);
	}
	print_message("%ld calls of every CPU beside 3 busy threads\n", calls);
}

static int call_cpus(void *arg)
{
	cpu_set_t *set = arg;
	int a = hog_cpus(sizeof(*set), set, where, NULL);
	int b = try_hog_cpus(sizeof(*set), set, where, NULL);

	return a == -EDEADLK && b == -EDEADLK ? 0 : -1;
}

static void cpus_from_callback(void **state)
{
	cpu_set_t set;

	(void)state;
	t_hog_cpus(&set);
	assert_int_equal(hog_one_cpu(t_nth_cpu(0), call_cpus, &set), 0);
}

/* try_hog_cpus: -EAGAIN at once, nothing queued, while another runs. */
static _Atomic int try_ran;
static int count_try(void *arg)
{
	(void)arg;
	atomic_fetch_add(&try_ran, 1);
	return 0;
}

static void *hold_cpus(void *arg)
{
	unsigned int cpu = *(unsigned int *)arg;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return (void *)(intptr_t)hog_cpus(sizeof(one), &one, hold, NULL);
}

static void try_cpus_busy(void **state)
{
	unsigned int cpu = t_nth_cpu(1);
	cpu_set_t set;
	pthread_t th;
	void *ret;

	(void)state;
	if (t_nth_cpu(0) == cpu)
		t_skip("needs two hogged CPUs");
	t_pin(t_nth_cpu(0)); /* off the CPU that is held */
	t_hog_cpus(&set);
	atomic_store(&inside, 0);
	atomic_store(&release_, 0);
	atomic_store(&try_ran, 0);
	assert_int_equal(pthread_create(&th, NULL, hold_cpus, &cpu), 0);
	assert_true(t_spin_until(&inside, 5000 * MS));
	assert_int_equal(try_hog_cpus(sizeof(set), &set, count_try, NULL),
			 -EAGAIN);
	atomic_store(&release_, 1);
	pthread_join(th, &ret);
	assert_int_equal((int)(intptr_t)ret, 7);
	assert_int_equal(atomic_load(&try_ran), 0);
	/* and once it is over, try succeeds */
	assert_int_equal(try_hog_cpus(sizeof(set), &set, count_try, NULL), 0);
	assert_int_equal(atomic_load(&try_ran), t_hog_cpus(&set));
}

/* Hogs block every signal: signals go to the application's threads. */
static int signals_blocked(void *arg)
{
	sigset_t cur;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	return sigismember(&cur, SIGINT) && sigismember(&cur, SIGTERM) &&
			       sigismember(&cur, SIGUSR1) &&
			       sigismember(&cur, SIGALRM) &&
			       sigismember(&cur, SIGRTMIN)
		       ? 0
		       : -1;
}

static void hogs_block_signals(void **state)
{
	cpu_set_t set;

	(void)state;
	t_hog_cpus(&set);
	assert_int_equal(hog_cpus(sizeof(set), &set, signals_blocked, NULL), 0);
}

/* ---- calls from a signal handler ---- */

/*
 * A handler that calls into the library while its thread is inside a
 * call deadlocked: hog_one_cpu() nested in hog_one_cpu() hung with every
 * thread in a futex wait, hog_synchronize() nested in hog_cpus() on the
 * library's own lock.  Such a nested call now returns -EDEADLK, as from
 * hog context; hog_one_cpu_nowait() works from a handler (AS-Safe once
 * the library is initialised), and so does a blocking call from a
 * handler whose thread was not inside one.
 */
static _Atomic int h_kind, h_ret, h_ran;
static struct cpuhog_work h_work = CPUHOG_WORK_INIT;
static pid_t h_tid;

static int h_count(void *arg)
{
	(void)arg;
	atomic_fetch_add(&h_ran, 1);
	return 0;
}

static void on_usr2(int sig)
{
	(void)sig;
	switch (atomic_load(&h_kind)) {
	case 0:
		atomic_store(&h_ret, hog_one_cpu(t_nth_cpu(1), h_count, NULL));
		break;
	case 1:
		atomic_store(&h_ret, hog_synchronize());
		break;
	default:
		atomic_store(&h_ret, hog_one_cpu_nowait(t_nth_cpu(1), h_count,
							 NULL, &h_work));
		break;
	}
}

/* A callback that signals the caller's thread while it waits for us. */
static int signal_caller(void *arg)
{
	(void)arg;
	uint64_t end = t_now() + 5 * MS;

	syscall(SYS_tgkill, getpid(), h_tid, SIGUSR2);
	while (t_now() < end)
		; /* the handler runs inside the caller's call */
	return 0;
}

static void calls_from_signal_handler(void **state)
{
	struct sigaction sa = { .sa_handler = on_usr2 };
	cpu_set_t all;

	(void)state;
	alarm(20); /* the nested calls hung for ever */
	h_tid = (pid_t)syscall(SYS_gettid);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	t_hog_cpus(&all);

	atomic_store(&h_kind, 0); /* hog_one_cpu in hog_one_cpu */
	atomic_store(&h_ret, 1);
	assert_int_equal(hog_one_cpu(t_nth_cpu(1), signal_caller, NULL), 0);
	assert_int_equal(atomic_load(&h_ret), -EDEADLK);

	atomic_store(&h_kind, 1); /* hog_synchronize in hog_cpus */
	atomic_store(&h_ret, 1);
	CPU_ZERO(&all);
	CPU_SET(t_nth_cpu(1), &all);
	assert_int_equal(hog_cpus(sizeof(all), &all, signal_caller, NULL), 0);
	assert_int_equal(atomic_load(&h_ret), -EDEADLK);

	atomic_store(&h_kind, 2); /* nowait in hog_one_cpu: works */
	atomic_store(&h_ran, 0);
	assert_int_equal(hog_one_cpu(t_nth_cpu(1), signal_caller, NULL), 0);
	assert_int_equal(atomic_load(&h_ret), 1);
	assert_int_equal(hog_work_wait(&h_work), 0);
	assert_int_equal(atomic_load(&h_ran), 1);

	atomic_store(&h_kind, 0); /* outside any call: works */
	atomic_store(&h_ran, 0);
	raise(SIGUSR2);
	assert_int_equal(atomic_load(&h_ret), 0);
	assert_int_equal(atomic_load(&h_ran), 1);
	signal(SIGUSR2, SIG_DFL);
	alarm(0);
}

/*
 * A storm of signals at a thread inside the library's short calls, whose
 * handler calls in again: cpuhog_shutdown() must return at once where it
 * interrupted a call that holds the context (cpuhog_get_info() and the
 * like, hog_one_cpu_nowait()), and hog_work_wait() must not wait for a
 * work that its own thread was half-way through queueing.  Both hung.
 */
static _Atomic int storm_stop;
static pid_t storm_tid;

static void *storm_main(void *arg)
{
	sigset_t usr1;

	(void)arg;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* only the target gets it */
	while (!atomic_load(&storm_stop)) {
		syscall(SYS_tgkill, getpid(), storm_tid, SIGUSR1);
		usleep(20);
	}
	return NULL;
}

static void signal_storm(void (*handler)(int), void (*loop)(void))
{
	struct sigaction sa = { .sa_handler = handler };
	pthread_t t;

	alarm(20); /* the handler's call hung for ever */
	storm_tid = (pid_t)syscall(SYS_gettid);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	atomic_store(&storm_stop, 0);
	assert_int_equal(pthread_create(&t, NULL, storm_main, NULL), 0);
	loop();
	atomic_store(&storm_stop, 1);
	pthread_join(t, NULL);
	signal(SIGUSR1, SIG_DFL);
	alarm(0);
}

static void shutdown_in_handler(int sig)
{
	(void)sig;
	cpuhog_shutdown();
}

static void short_calls(void)
{
	struct cpuhog_work w = CPUHOG_WORK_INIT;
	struct cpuhog_info in;
	cpu_set_t set;
	uint64_t end = t_now() + 1000 * MS;

	while (t_now() < end) {
		cpuhog_get_info(&in);
		cpuhog_get_cpus(sizeof(set), &set);
		cpuhog_get_polling(sizeof(set), &set);
		if (hog_one_cpu_nowait(0, h_count, NULL, &w))
			hog_work_wait(&w);
	}
}

static void shutdown_from_handler_returns(void **state)
{
	(void)state;
	/* a signal that lands between two calls shuts down for real, from
	 * the handler: TSan reports its free() as signal-unsafe, as it is */
	if (T_TSAN)
		t_skip("TSan: the storm's real shutdowns free memory in a "
		       "handler");
	signal_storm(shutdown_in_handler, short_calls);
	cpuhog_shutdown();
}

static struct cpuhog_work storm_work = CPUHOG_WORK_INIT;

static void wait_in_handler(int sig)
{
	int r = hog_work_wait(&storm_work);

	(void)sig;
	if (r != 0 && r != -EDEADLK && r != -EINVAL)
		abort();
}

static void nowait_calls(void)
{
	uint64_t end = t_now() + 1000 * MS;
	unsigned int cpu = t_nth_cpu(1);

	while (t_now() < end)
		if (hog_one_cpu_nowait(cpu, h_count, NULL, &storm_work))
			assert_int_equal(hog_work_wait(&storm_work), 0);
}

static void work_wait_from_handler_returns(void **state)
{
	(void)state;
	signal_storm(wait_in_handler, nowait_calls);
}

T_MAIN(((const struct CMUnitTest[]){
	cmocka_unit_test(one_cpu_runs_there),
	cmocka_unit_test(one_cpu_errors),
	cmocka_unit_test(nowait_runs_and_waits),
	cmocka_unit_test(back_to_back_wakeups_not_lost),
	cmocka_unit_test(nowait_refuses),
	cmocka_unit_test(nowait_in_order),
	cmocka_unit_test(nowait_from_callback),
	cmocka_unit_test(cpus_runs_everywhere),
	cmocka_unit_test(cpus_large_set),
	cmocka_unit_test(wake_tree_every_fanout),
	cmocka_unit_test(wake_tree_busy_parents),
	cmocka_unit_test(cpus_results),
	cmocka_unit_test(cpus_ran_reports_where),
	cmocka_unit_test(cpus_queued_before_waiting),
	cmocka_unit_test(cpus_from_callback),
	cmocka_unit_test(try_cpus_busy),
	cmocka_unit_test(hogs_block_signals),
	cmocka_unit_test(calls_from_signal_handler),
	cmocka_unit_test(shutdown_from_handler_returns),
	cmocka_unit_test(work_wait_from_handler_returns),
}))
