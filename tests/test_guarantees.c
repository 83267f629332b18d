/* SPDX-License-Identifier: MIT */
/*
 * The guarantees of include/cpuhog.h, one regression test per defect that
 * broke one.  Each says what it caught; each failed on the code before its
 * fix.  Stops are judged by the stop invariant (harness.h): a return of 0
 * means fn ran exactly once on each CPU asked for, an error that it ran
 * nowhere.
 */
#include "harness.h"
#include "hotplug.h"
#include "../src/outcome.h" /* a stop's own outcome: internal */

#include <pthread.h>
#include <sys/mman.h>

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

static void init_with(uint64_t stop_timeout_ns, uint64_t overrun_ns)
{
	struct cpuhog_attr a;

	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = stop_timeout_ns;
	a.overrun_ns = overrun_ns;
	assert_int_equal(cpuhog_init(&a), 0);
}

/* Two hogged CPUs with real-time hogs, or skip. */
static void need_two_rt(unsigned int *mine, unsigned int *other)
{
	*mine = t_nth_cpu(0);
	*other = t_nth_cpu(1);
	if (*mine == *other)
		t_skip("needs two hogged CPUs");
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO (root or RLIMIT_RTPRIO)");
}

/* ---- a thread of ours that spins at FIFO @prio on @cpu ---- */

struct spinner {
	unsigned int cpu;
	int prio;
	unsigned int delay_ms, spin_ms;
	pthread_t th;
};

static void *spin_main(void *arg)
{
	struct spinner *s = arg;
	struct sched_param sp = { .sched_priority = s->prio };
	uint64_t end;

	t_pin(s->cpu);
	pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	t_sleep_ms(s->delay_ms);
	end = t_now() + s->spin_ms * MS;
	while (t_now() < end)
		;
	return NULL;
}

/*
 * 1a. The caller is starved past the deadline, and by the time it runs
 * every hog has left: the stop was abandoned by a hog.  It returned 0
 * with fn run nowhere, because the caller looked only at the count of
 * finished works.  Either result is judged: 0 (the held CPU came back
 * within stop_timeout_ns of the other hogs' last step, which moves the
 * deadline on) must have run fn once and be counted a stop; -ETIMEDOUT
 * must have run it nowhere and be counted a timeout.  (A 0 was a skip:
 * the very defect, a 0 with fn run nowhere, passed if the invariant's
 * check were ever loosened.)
 */
static void stop_abandoned_while_caller_starved(void **state)
{
	struct spinner starver;
	struct cpuhog_info in;
	struct t_runs runs;
	unsigned int mine, victim;
	struct t_held *h;
	pid_t pid;
	int r, status;

	(void)state;
	need_two_rt(&mine, &victim);
	init_with(10 * MS, 0);
	t_pin(mine);
	h = t_hold_cpu(victim, 40, &pid);
	/* from 2 ms on, the caller's CPU is taken until 60 ms */
	starver = (struct spinner){ mine, 50, 2, 58, 0 };
	assert_int_equal(pthread_create(&starver.th, NULL, spin_main, &starver),
			 0);
	memset(&runs, 0, sizeof(runs));
	r = stop_machine(t_count_run, &runs, 0, NULL);
	pthread_join(starver.th, NULL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	print_message("stop_machine with the caller starved: %d, fn ran %d "
		      "times\n", r, atomic_load(&runs.total));
	if (!t_runs_ok(&runs, r, NULL))
		t_runs_print("stop_machine", &runs, r);
	assert_true(t_runs_ok(&runs, r, NULL));
	assert_true(r == 0 || r == -ETIMEDOUT);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.stops, r == 0 ? 1 : 0);
	assert_int_equal(in.stop_timeouts, r == 0 ? 0 : 1);
	munmap(h, sizeof(*h));
	cpuhog_shutdown();
}

/*
 * A review item that needs three CPUs: a stop abandoned because one CPU
 * was held leaves that CPU's hog behind, late; when it comes it must not
 * count into the next stop (which other hogs are already in) nor let
 * that stop's fn run short or twice.  With two CPUs the late hog's CPU is
 * the only other one, so no next stop can be under way when it comes.
 * Each victim in turn: held 30 ms, stops back to back meanwhile and
 * after; each is judged by the invariant, and every success counted.
 * In a guest whose vCPUs share fewer host CPUs, a stop that nothing
 * holds takes longer: the timeout and the hold scale by the knob.
 */
static void stale_hog_after_abandoned_stop(void **state)
{
	cpu_set_t set;
	struct cpuhog_info in;
	unsigned int mine;
	long bad = 0, ok = 0, timedout = 0;
	int n = t_hog_cpus(&set), v, r;
	unsigned int load = (unsigned int)t_bound(1); /* the knob */

	(void)state;
	if (n < 3)
		t_skip("needs three hogged CPUs (make check-smp)");
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO (root or RLIMIT_RTPRIO)");
	init_with(5 * MS * load, 0);
	mine = t_nth_cpu(0);
	t_pin(mine);
	for (v = 1; v < n && v < 8; v++) {
		struct t_held *h;
		pid_t pid;
		int i, status;

		h = t_hold_cpu(t_nth_cpu(v), 30 * load, &pid);
		for (i = 0; i < 40; i++) {
			r = i & 1 ? t_stop_judged(0, NULL, &bad)
				  : t_stop_judged(sizeof(set), &set, &bad);
			ok += r == 0;
			timedout += r == -ETIMEDOUT;
			assert_true(r == 0 || r == -ETIMEDOUT);
			if (atomic_load(&h->done) && r == 0 && i > 20)
				break;
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		munmap(h, sizeof(*h));
		/* the victim is back: the next stop needs it, and gets it
		 * (a slow guest may time a few out still) */
		for (i = 0; i < 20; i++) {
			r = t_stop_judged(sizeof(set), &set, &bad);
			if (r != -ETIMEDOUT)
				break;
			timedout++;
		}
		if (r != 0)
			print_message("victim CPU %u: the stop after its hold "
				      "returned %d\n", t_nth_cpu(v), r);
		assert_int_equal(r, 0);
		ok++;
	}
	assert_int_equal(cpuhog_get_info(&in), 0);
	print_message("%ld stops ran, %ld timed out on a held CPU, %ld broke "
		      "the invariant\n", ok, timedout, bad);
	assert_int_equal(bad, 0);
	assert_int_equal((long)in.stops, ok);
	assert_int_equal((long)in.stop_timeouts, timedout);
	if (timedout == 0) /* judged all the same: each stop, and the counts */
		print_message("note: no stop timed out (the held CPU never "
			      "delayed one)\n");
	cpuhog_shutdown();
}

/*
 * 1b, 1c, 6, 10 (migrated): calls that need an offline CPU.  The stops
 * returned 0 with fn run nowhere; hog_migrate returned -EINVAL; the
 * declining hog's internal work counted as a migrated callback.
 */
static void calls_to_offline_cpu(void **state)
{
	unsigned int cpu = t_nth_cpu(1), mine = t_nth_cpu(0);
	cpu_set_t one, both;
	struct cpuhog_attr a;
	struct cpuhog_info in;
	struct t_runs runs;
	int r;

	(void)state;
	if (cpu == mine || !t_can_hotplug(cpu))
		t_skip("needs root, two hogged CPUs, CPU hotplug, no TSan");
	t_guard_victim(cpu);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	CPU_ZERO(&both);
	CPU_SET(cpu, &both);
	CPU_SET(mine, &both);
	t_pin(mine);
	assert_true(t_set_online(cpu, 0));

	memset(&runs, 0, sizeof(runs));
	r = stop_machine(t_count_run, &runs, sizeof(one), &one);
	assert_true(t_runs_ok(&runs, r, &one));
	assert_int_equal(r, -ENOENT);
	memset(&runs, 0, sizeof(runs));
	r = stop_machine(t_count_run, &runs, sizeof(both), &both);
	assert_true(t_runs_ok(&runs, r, &both));
	assert_int_equal(r, -ENOENT);
	/* an offline CPU is not one fn must run on: the rest are held */
	memset(&runs, 0, sizeof(runs));
	r = stop_machine(t_count_run, &runs, 0, NULL);
	assert_int_equal(r, 0);
	assert_true(t_runs_ok(&runs, r, NULL));
	/* as in the kernel: both CPUs of stop_two_cpus must be there */
	memset(&runs, 0, sizeof(runs));
	assert_int_equal(stop_two_cpus(mine, cpu, t_count_run, &runs), -ENOENT);
	assert_int_equal(stop_two_cpus(cpu, mine, t_count_run, &runs), -ENOENT);
	assert_int_equal(atomic_load(&runs.total), 0);
	assert_int_equal(hog_migrate(0, cpu), -ENOENT);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_int_equal(in.migrated, 0);

	/* 1c: the only hog is on the offline CPU */
	assert_true(t_set_online(cpu, 1));
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.cpus = &one;
	a.cpus_setsize = sizeof(one);
	assert_int_equal(cpuhog_init(&a), 0);
	assert_true(t_set_online(cpu, 0));
	memset(&runs, 0, sizeof(runs));
	r = stop_machine(t_count_run, &runs, 0, NULL);
	assert_true(t_runs_ok(&runs, r, NULL));
	assert_int_equal(r, -ENOENT);
	assert_true(t_set_online(cpu, 1));
	cpuhog_shutdown();
}

/*
 * 2. While fn runs, a thread at the hogs' own priority pinned to a held
 * CPU must not run.  The hogs' spins yielded after 1 ms, and it ran.
 */
static _Atomic int probe_stop;
static _Atomic unsigned long probe_wakes;

static void *probe_main(void *arg)
{
	unsigned int cpu = (unsigned int)(uintptr_t)arg;
	struct timespec ts = { 0, 200000 };

	t_pin(cpu);
	while (!atomic_load(&probe_stop)) {
		nanosleep(&ts, NULL);
		atomic_fetch_add(&probe_wakes, 1);
	}
	return NULL;
}

static int spin_5ms_watching(void *arg)
{
	unsigned long before = atomic_load(&probe_wakes);
	uint64_t end = t_now() + 5 * MS;

	(void)arg;
	while (t_now() < end)
		;
	return (int)(atomic_load(&probe_wakes) - before);
}

static void hold_survives_long_fn(void **state)
{
	struct sched_param sp;
	struct cpuhog_info in;
	pthread_attr_t pa;
	unsigned int mine, other;
	unsigned long before;
	uint64_t t0;
	pthread_t th;
	cpu_set_t one;
	int i, moved = 0, runs, timedout = 0;

	(void)state;
	need_two_rt(&mine, &other);
	if (t_hold_unjudgeable())
		t_skip(t_hold_unjudgeable());
	/* fn's 5 ms took 160 ms at 64 vCPUs (its vCPU not run by the
	 * host), past overrun_ns, and the stop released the hold as
	 * documented: the bound scales with the guest's sharing */
	assert_int_equal(t_init_scaled(true), 0);
	assert_int_equal(cpuhog_get_info(&in), 0);
	sp.sched_priority = in.priority; /* the hogs' own */
	pthread_attr_init(&pa);
	pthread_attr_setinheritsched(&pa, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&pa, SCHED_FIFO);
	pthread_attr_setschedparam(&pa, &sp);
	assert_int_equal(pthread_create(&th, &pa, probe_main,
					(void *)(uintptr_t)other),
			 0);
	pthread_attr_destroy(&pa);
	/* the probe runs at the hogs' own real-time priority: nothing
	 * ordinary keeps it off its CPU, so a wait for it is a
	 * hang-catcher (it skipped after 20 ms) */
	before = atomic_load(&probe_wakes);
	for (t0 = t_now(); atomic_load(&probe_wakes) == before &&
			   t_now() - t0 < t_bound(2000 * MS);)
		t_sleep_ms(1);
	assert_true(atomic_load(&probe_wakes) != before);
	CPU_ZERO(&one);
	CPU_SET(mine, &one);
	/* fn returns how often the probe woke; a stop that timed out ran
	 * fn nowhere and says nothing about the hold (it was counted into
	 * the wake-ups once: "probe woke -440 times"); nor does one whose
	 * own outcome says its hold was released (fn past overrun_ns, as
	 * documented), nor one during which the kernel preempted a hog (RT
	 * throttling).  Such stops are stopped again, up to 50 in all, five
	 * of which must say something.  (The release was read from the
	 * process's holds_released counter, which any stop moves.) */
	for (i = 0, runs = 0; runs < 5 && i < 50; i++) {
		unsigned long pre = t_hogs_preempted();
		struct stop_outcome o;
		int r = cpuhog_i_stop_outcome(spin_5ms_watching, NULL,
					      sizeof(one), &one, false, 0, 0,
					      &o);

		if (r == -ETIMEDOUT) {
			timedout++;
			continue;
		}
		assert_true(r >= 0);
		if (r > 0 && (o.released || t_hogs_preempted() != pre)) {
			print_message("the hold was broken during the stop "
				      "(released %u, hogs preempted +%lu): "
				      "the probe moved %d; again\n",
				      o.released, t_hogs_preempted() - pre, r);
			continue;
		}
		moved += r;
		runs++;
	}
	atomic_store(&probe_stop, 1);
	pthread_join(th, NULL);
	/* a stop that timed out ran fn nowhere (judged: r < 0, nothing
	 * counted) and says nothing of the hold: how many did is a figure;
	 * five must have run */
	print_message("probe woke %d times during %d ms of fn (figure: %d "
		      "stops timed out)\n", moved, 5 * runs, timedout);
	assert_int_equal(runs, 5);
	assert_int_equal(moved, 0);
}

/*
 * 3. A process-directed signal that every thread blocks (SIGCHLD read
 * with sigwaitinfo) must reach the application untouched.  A hog took it
 * and re-sent it with kill(), as SI_USER from ourselves with status 0.
 */
static void sigchld_not_stolen(void **state)
{
	uint64_t end = t_now() + t_bound(5000 * MS);
	struct timespec ts = { 2, 0 };
	sigset_t chld, pend;
	siginfo_t si;
	pid_t pid;
	int i;

	(void)state;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &chld, NULL), 0);
	cpuhog_shutdown();
	assert_int_equal(cpuhog_init(NULL), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(42);
	do {
		t_sleep_ms(1);
		sigpending(&pend);
	} while (!sigismember(&pend, SIGCHLD) && t_now() < end);
	/* a child that exited is reaped by the kernel's signal at once:
	 * 5 s (the knob's) without it is a hang, not a busy machine */
	assert_true(sigismember(&pend, SIGCHLD));
	for (i = 0; i < 4; i++)
		assert_int_equal(hog_one_cpu(t_nth_cpu(i), nothing, NULL), 0);
	memset(&si, 0, sizeof(si));
	assert_int_equal(sigtimedwait(&chld, &si, &ts), SIGCHLD);
	assert_int_equal(si.si_code, CLD_EXITED);
	assert_int_equal(si.si_pid, pid);
	assert_int_equal(si.si_status, 42);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/*
 * 4. Strict mode while another thread forks: a hog's write faults and
 * waits for fork's mmap lock, which is not the callback sleeping.  The
 * process aborted; without strict mode "slept" was reported.  (An empty
 * callback shows it too, but rarely: the fault must come between fork's
 * TLB flush and its unlock, while the hog is inside the check.)
 */
static _Atomic int callers_stop;
static char touched[2][16 * 4096]; /* one region per calling thread */

/* 20 us of writes to the data segment: no sleep, but a page fault after
 * each fork, likely while fork still holds the mmap lock. */
static int write_pages(void *arg)
{
	char *mine = touched[(uintptr_t)arg];
	uint64_t end = t_now() + 20000;
	size_t i;

	do {
		for (i = 0; i < sizeof(touched[0]); i += 4096)
			mine[i]++;
	} while (t_now() < end);
	return 0;
}

static void *writing_caller(void *arg)
{
	uintptr_t i = (uintptr_t)arg;

	while (!atomic_load(&callers_stop))
		if (hog_one_cpu(t_nth_cpu((int)i), write_pages, arg) != 0)
			_exit(6);
	return NULL;
}

static void strict_child(void *arg)
{
	struct cpuhog_attr a;
	struct cpuhog_info in;
	pthread_t th[2];
	uint64_t end;
	int i, forks = 0;

	(void)arg;
	cpuhog_attr_init(&a);
	a.flags = CPUHOG_F_STRICT;
	if (cpuhog_init(&a) != 0)
		_exit(8);
	for (i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, writing_caller,
			       (void *)(uintptr_t)i);
	end = t_now() + 1000 * MS;
	while (t_now() < end) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		if (pid > 0 && waitpid(pid, NULL, 0) == pid)
			forks++;
	}
	atomic_store(&callers_stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cpuhog_get_info(&in);
	printf("strict mode: %d forks, %llu callbacks, %llu reported slept\n",
	       forks, (unsigned long long)in.run,
	       (unsigned long long)in.slept);
	fflush(stdout);
	_exit(in.slept ? 5 : 0);
}

static void strict_mode_survives_fork(void **state)
{
	int status;

	(void)state;
	if (t_qemu_user())
		t_skip("qemu-user's translator blocks on locks of its own "
		       "inside callbacks (code translated on first run): the "
		       "sleep check counts those, and strict mode aborts");
	status = t_in_child(strict_child, NULL);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * 5. UINT64_MAX as "never": the deadline wrapped and every stop timed
 * out at once.  A spin near the maximum wrapped the same way; it is now
 * refused.
 */
static void timeouts_never(void **state)
{
	struct cpuhog_attr a;
	struct t_runs runs;
	int r;

	(void)state;
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = CPUHOG_NO_TIMEOUT;
	a.spin_ns = CPUHOG_NO_SPIN;
	a.overrun_ns = UINT64_MAX;
	assert_int_equal(cpuhog_init(&a), 0);
	memset(&runs, 0, sizeof(runs));
	r = stop_machine(t_count_run, &runs, 0, NULL);
	assert_int_equal(r, 0);
	assert_true(t_runs_ok(&runs, r, NULL));
	assert_int_equal(hog_one_cpu(t_nth_cpu(1), nothing, NULL), 0);
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.spin_ns = UINT64_MAX - 1;
	assert_int_equal(cpuhog_init(&a), -EINVAL);
	a.spin_ns = 2000000000u; /* over a second: refused too */
	assert_int_equal(cpuhog_init(&a), -EINVAL);
	a.spin_ns = 1000000000u;
	assert_int_equal(cpuhog_init(&a), 0);
	cpuhog_shutdown();
}

/*
 * 9. fn blocks on a lock whose owner was preempted by a held CPU's hog.
 * The other hogs spun until RT throttling (about a second here; for ever
 * with sched_rt_runtime_us = -1).  Now the hold ends at overrun_ns and
 * the owner runs.
 */
static pthread_mutex_t owned = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int owner_locked, fn_started;

static void *owner_main(void *arg)
{
	uint64_t end;

	t_pin((unsigned int)(uintptr_t)arg);
	pthread_mutex_lock(&owned);
	atomic_store(&owner_locked, 1);
	while (!atomic_load(&fn_started))
		;
	end = t_now() + 1 * MS;
	while (t_now() < end)
		;
	pthread_mutex_unlock(&owned);
	return NULL;
}

static int lock_owned(void *arg)
{
	(void)arg;
	atomic_store(&fn_started, 1);
	pthread_mutex_lock(&owned);
	pthread_mutex_unlock(&owned);
	return 7;
}

static void fn_blocked_hold_is_bounded(void **state)
{
	unsigned int mine, other;
	struct cpuhog_info in;
	cpu_set_t one;
	pthread_t th;
	uint64_t t0, dt;
	int r;

	(void)state;
	need_two_rt(&mine, &other);
	init_with(0, 20 * MS);
	t_pin(mine);
	assert_int_equal(pthread_create(&th, NULL, owner_main,
					(void *)(uintptr_t)other),
			 0);
	while (!atomic_load(&owner_locked))
		t_sleep_ms(1);
	CPU_ZERO(&one);
	CPU_SET(mine, &one);
	t0 = t_now();
	r = stop_machine(lock_owned, NULL, sizeof(one), &one);
	dt = t_now() - t0;
	pthread_join(th, NULL);
	print_message("stop with a blocked fn took %.1f ms\n", dt / 1e6);
	assert_int_equal(r, 7);
	assert_int_equal(cpuhog_get_info(&in), 0);
	assert_true(in.holds_released >= 1);
	/* generous: the bound is 20 ms (617 ms at 64 vCPUs on 2 host CPUs) */
	assert_true(dt < t_bound(500 * MS));
	cpuhog_shutdown();
}

/*
 * 10. A buffer never queued: hog_work_done() agrees with hog_work_wait(),
 * which returns at once.  In a forked child, a buffer the parent queued
 * never finishes there: waiting for it hung for ever.
 */
static struct cpuhog_work parent_work = CPUHOG_WORK_INIT;
static _Atomic int release_work;

/* Runs until released (at most 80 ms): still queued when we fork. */
static int until_released(void *arg)
{
	uint64_t end = t_now() + 80 * MS;

	(void)arg;
	while (!atomic_load(&release_work) && t_now() < end)
		;
	return 9;
}

/*
 * The child's copy of the buffer is what it was at the fork: a work that
 * had finished keeps its result (9), one still queued or running is the
 * parent's, and the child's wait refuses it (-ENOENT) and leaves it done.
 * Both are judged (a work that finished before a slow fork was a skip).
 * Exits 0 or 5 (judged, finished before the fork), 4 (wrong).
 */
static void child_waits(void *arg)
{
	int r;

	(void)arg;
	if (hog_work_done(&parent_work) && hog_work_wait(&parent_work) == 9)
		_exit(5);
	r = hog_work_wait(&parent_work);
	_exit(r == -ENOENT && hog_work_done(&parent_work) ? 0 : 4);
}

static void work_buffers_across_fork(void **state)
{
	struct cpuhog_work never = CPUHOG_WORK_INIT;
	int status;

	(void)state;
	assert_int_equal(hog_work_wait(&never), -EINVAL);
	assert_true(hog_work_done(&never));
	assert_true(hog_one_cpu_nowait(t_nth_cpu(1), until_released, NULL,
				       &parent_work));
	status = t_in_child(child_waits, NULL);
	atomic_store(&release_work, 1);
	assert_int_equal(hog_work_wait(&parent_work), 9);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 5) {
		print_message("note: the work finished before the fork: the "
			      "child saw its result\n");
		return;
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * Issue 35: hog_cpus(3) promises that the callbacks do not wait for one
 * another, but the hogs woke down a tree, and a hog whose CPU another
 * process held woke its children only once it ran (an 8-vCPU guest:
 * CPU 5's fn began 381.6 ms late, behind CPU 4, held 400 ms).  On two
 * CPUs the tree is a root and its child, the root the caller's own
 * CPU's hog; so the caller (FIFO 99, pinned) wakes a holder on its own
 * CPU, which queues behind it, then makes the call, whose root queues
 * behind the holder.  Once the root is woken, a thread on the other CPU
 * moves the caller there (before, the kernel would move it at the
 * root's wake, and put the root before the holder); to the other CPU
 * alone, so that a caller already queued behind the holder moves too.
 * The other CPU's fn must begin before the holder lets go, which it does
 * at that fn's start or, past a hang bound (60 ms, scaled), on its own.
 * A try counts only where the root waited for the holder, and was woken
 * while the holder held (a caller that reached its wake only after the
 * holder, say blocked in the call, tests nothing).
 */
static _Atomic uint64_t began[CPU_SETSIZE], root_woken_at;
static _Atomic int calling;
static unsigned int root_cpu, move_to;
static struct t_held *held;

static int note_begin(void *arg)
{
	int cpu = sched_getcpu();

	(void)arg;
	atomic_store(&began[cpu], t_now());
	if (cpu == (int)move_to)
		atomic_store(&held->let_go, 1);
	return 0;
}

/* The state letter of our thread named @comm, from /proc; 0: none. */
static char state_of(const char *comm)
{
	pid_t tid = t_tid_named(comm, false);
	char path[64], buf[256], *p;

	if (!tid)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	t_slurp(path, buf, sizeof(buf));
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* The caller (@arg: its tid) moved to the other CPU once the root is
 * woken (no longer asleep). */
static void *move_when_root_woken(void *arg)
{
	pid_t tid = (pid_t)(intptr_t)arg;
	uint64_t end = t_now() + t_bound(100 * MS);
	char comm[16];
	cpu_set_t one;

	snprintf(comm, sizeof(comm), "cpuhog/%u", root_cpu);
	CPU_ZERO(&one);
	CPU_SET(move_to, &one);
	while (!atomic_load(&calling) && t_now() < end)
		;
	while (state_of(comm) == 'S' && t_now() < end)
		;
	atomic_store(&root_woken_at, t_now());
	return (void *)(intptr_t)sched_setaffinity(tid, sizeof(one), &one);
}

/* One try: 1 if @other's fn began while @mine was still held, 0 if
 * not, -1 if the root was not woken during the hold or did not wait for
 * the holder (nothing judged). */
static int began_while_held(unsigned int mine, unsigned int other)
{
	struct sched_param fifo = { .sched_priority = 99 }, normal = { 0 };
	uint64_t t0, released, woken;
	cpu_set_t both, ran;
	pthread_t mover;
	int go[2], r, status;
	void *moved;
	pid_t pid;

	assert_int_equal(pipe(go), 0);
	root_cpu = mine;
	move_to = other;
	t_pin(other);
	atomic_store(&calling, 0);
	atomic_store(&root_woken_at, 0);
	assert_int_equal(pthread_create(&mover, NULL, move_when_root_woken,
					(void *)(intptr_t)gettid()),
			 0);
	t_pin(mine);
	held = t_hold_cpu_on(mine, (unsigned int)(t_bound(60 * MS) / MS), &pid,
			     go[0]);
	CPU_ZERO(&both);
	CPU_SET(mine, &both);
	CPU_SET(other, &both);
	memset(began, 0, sizeof(began));
	assert_int_equal(pthread_setschedparam(pthread_self(), SCHED_FIFO,
					       &fifo), 0);
	t0 = t_now();
	assert_int_equal(write(go[1], "g", 1), 1);
	atomic_store(&calling, 1);
	r = hog_cpus_ran(sizeof(both), &both, note_begin, NULL, &ran);
	assert_int_equal(pthread_setschedparam(pthread_self(), SCHED_OTHER,
					       &normal), 0);
	assert_int_equal(pthread_join(mover, &moved), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_null(moved);
	assert_int_equal(r, 0);
	assert_true(CPU_EQUAL(&ran, &both));
	released = atomic_load(&held->released_at);
	woken = atomic_load(&root_woken_at);
	print_message("CPU %u held until +%.1f ms, its hog woken by +%.1f ms; "
		      "CPU %u's fn began at +%.1f ms, CPU %u's at +%.1f ms\n",
		      mine, (released - t0) / 1e6, (woken - t0) / 1e6, other,
		      (atomic_load(&began[other]) - t0) / 1e6, mine,
		      (atomic_load(&began[mine]) - t0) / 1e6);
	munmap(held, sizeof(*held));
	close(go[0]);
	close(go[1]);
	if (atomic_load(&began[mine]) < released || woken >= released)
		return -1;
	return atomic_load(&began[other]) < released;
}

static void callbacks_do_not_wait_for_held_cpu(void **state)
{
	unsigned int mine, other;
	int tries, judged = 0, r;

	(void)state;
	need_two_rt(&mine, &other);
	if (t_hold_unjudgeable())
		t_skip(t_hold_unjudgeable());
	init_with(0, 0);
	/* judged three times; a try that tests nothing is none */
	for (tries = 0; tries < 8 && judged < 3; tries++) {
		r = began_while_held(mine, other);
		if (r == 0)
			fail_msg("CPU %u's fn waited for the held CPU %u", other,
				 mine);
		judged += r > 0;
	}
	cpuhog_shutdown();
	if (!judged)
		t_skip("in 8 tries the root was never woken during the hold "
		       "and run after it (the kernel ran it first, or the "
		       "caller came late)");
}

T_MAIN(((const struct CMUnitTest[]){
	cmocka_unit_test(stop_abandoned_while_caller_starved),
	cmocka_unit_test(stale_hog_after_abandoned_stop),
	cmocka_unit_test(calls_to_offline_cpu),
	cmocka_unit_test(hold_survives_long_fn),
	cmocka_unit_test(sigchld_not_stolen),
	cmocka_unit_test(strict_mode_survives_fork),
	cmocka_unit_test(timeouts_never),
	cmocka_unit_test(fn_blocked_hold_is_bounded),
	cmocka_unit_test(work_buffers_across_fork),
	cmocka_unit_test(callbacks_do_not_wait_for_held_cpu),
}))
