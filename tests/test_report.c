/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: stop_machine_report() and stop_two_cpus_report(), the
 * stop's report, and hog_cpus_report() and hog_synchronize_report(), the
 * report of the calls that hold nothing (issue 37).  Linked with the
 * static library and --wrap=malloc & co., so that a call that succeeds
 * is seen to allocate nothing, report or not.
 */
#include "harness.h"

#include <sys/prctl.h>
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

/* A call of fn spinning @ns on the hogged CPUs (into @set, how many
 * returned), its report @rep fresh; skipped without real-time hogs
 * (stops and hog_cpus() refuse then, -EPERM). */
static int fresh_call(struct cpuhog_report *rep, cpu_set_t *set, uint64_t ns)
{
	if (!t_can_rt())
		t_skip("needs SCHED_FIFO");
	spin_ns = ns;
	atomic_store(&runs, 0);
	report_init(rep);
	return t_hog_cpus(set);
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
	/* overrun_ns by the knob: a guest's vCPU run late must not read as
	 * fn's 2 ms overrunning (the release would be right, and this test
	 * is about a stop that ran) */
	assert_int_equal(t_init_scaled(true), 0);
	n = fresh_call(&rep, &set, 2 * MS);
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

/* ---- a call that times out against another process's FIFO 99 ---- */
/* What the report of a call that timed out on @victim, held by @pid,
 * must say; reaps the holder.  True if it named the holder: on a
 * machine shared with other tests, another process's hog (at 99 too)
 * may run on the CPU in the 2 ms the library watches it, then false, to
 * try again. */
static bool names_holder(const struct cpuhog_report *rep,
			 unsigned int victim, pid_t pid, int ended)
{
	const struct cpuhog_report_cpu *miss = NULL;
	unsigned int i;
	int status;

	assert_int_equal(rep->ret, -ETIMEDOUT);
	assert_int_equal(rep->ended, ended);
	assert_int_equal(rep->fn_runs, 0);
	assert_int_equal(CPU_COUNT(&rep->ran), 0);
	assert_int_equal(rep->all_held_ns, 0);
	assert_int_equal(rep->hold_ns, 0);
	assert_true(rep->nr_missing >= 1);
	assert_true(CPU_ISSET(victim, &rep->missing));
	/* every CPU is either missing or arrived (in a guest whose vCPUs
	 * the host runs late, ours may be missing too) */
	for (i = 0; i < rep->nr_cpu; i++) {
		assert_false(rc[i].flags & CPUHOG_RC_RAN);
		if (rc[i].cpu == victim)
			miss = &rc[i];
		else
			assert_true(CPU_ISSET(rc[i].cpu, &rep->missing) ||
				    (rc[i].flags & CPUHOG_RC_ARRIVED));
	}
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

/* One stop against a holder of @victim: true if the report named it;
 * false also where another process's stop had the stop lock. */
static bool stop_names_holder(unsigned int victim, unsigned int *locked)
{
	struct cpuhog_report rep;
	struct t_held *h;
	int status, r;
	pid_t pid;

	atomic_store(&runs, 0);
	h = t_hold_cpu(victim, 80 * t_slow() * t_many(), &pid);
	report_init(&rep);
	r = stop_machine_report(spin, NULL, 0, NULL, &rep);
	if (rep.lock_waited) {
		/* another process's stop had the machine-wide lock, waiting
		 * for the held CPU itself: what ours met then was that stop
		 * (its end, or its hogs), not only the holder */
		assert_true(r == 0 || r == -ETIMEDOUT);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		print_message("another process's stop had the stop lock\n");
		++*locked;
		return false;
	}
	assert_int_equal(r, -ETIMEDOUT);
	assert_int_equal(atomic_load(&h->done), 0); /* still held: no hang */
	assert_int_equal(atomic_load(&runs), 0);
	return names_holder(&rep, victim, pid, CPUHOG_END_TIMEDOUT);
}

/* One hog_synchronize_report() against a holder of @victim: true if
 * the report named it. */
static bool sync_names_holder(unsigned int victim)
{
	struct cpuhog_report rep;
	struct t_held *h;
	pid_t pid;

	h = t_hold_cpu(victim, 50 * t_slow() * t_many(), &pid);
	report_init(&rep);
	assert_int_equal(hog_synchronize_report(&rep), -ETIMEDOUT);
	assert_int_equal(atomic_load(&h->done), 0); /* still held: no hang */
	return names_holder(&rep, victim, pid, CPUHOG_END_TIMEDOUT);
}

/* The library again with a short stop timeout, @ms, the caller on
 * @mine. */
static void short_timeout(unsigned int mine, unsigned int ms)
{
	struct cpuhog_attr a;

	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.stop_timeout_ns = ms * MS;
	assert_int_equal(cpuhog_init(&a), 0);
	t_pin(mine);
}

static void report_names_the_holder(void **state)
{
	unsigned int victim = t_nth_cpu(1), mine = t_nth_cpu(0), tries,
		     locked = 0;

	(void)state;
	if (victim == mine || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	short_timeout(mine, 15);
	spin_ns = 0;
	for (tries = 0; tries < 6 && !stop_names_holder(victim, &locked);
	     tries++)
		t_sleep_ms(100);
	cpuhog_shutdown();
	if (tries == 6 && locked == 6)
		t_skip("other processes' stops had the stop lock at each try");
	assert_true(tries < 6);
}

/* A task of another process at the holder's priority, queued on @cpu
 * behind it once @go is written to: named as another process's hog
 * would be, and earlier in /proc (forked first). */
static pid_t queue_decoy(unsigned int cpu, int go)
{
	struct sched_param sp = { .sched_priority = 99 };
	pid_t pid = fork();
	char byte;

	assert_true(pid >= 0);
	if (pid == 0) {
		t_pin(cpu);
		prctl(PR_SET_NAME, "cpuhog/decoy");
		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0 ||
		    read(go, &byte, 1) != 1)
			_exit(3);
		_exit(0); /* once the holder lets it run */
	}
	return pid;
}

/* Whether /proc says @pid is in @state (its letter) and last ran on
 * @cpu, within a bound: a guest forks, pins and wakes it late. */
static bool comes_to(pid_t pid, char state, unsigned int cpu)
{
	uint64_t end = t_now() + t_bound(2000 * MS);
	char path[64], buf[1024], *name_end, *p;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	do {
		t_slurp(path, buf, sizeof(buf));
		p = name_end = strrchr(buf, ')');
		for (field = 2; p && field < 39; field++)
			p = strchr(p + 1, ' ');
		if (p && name_end[2] == state && strtoul(p + 1, NULL, 10) == cpu)
			return true;
		t_sleep_ms(1);
	} while (t_now() < end);
	return false;
}

/* One stop against a holder of @victim with a decoy queued behind it:
 * true if the report named the holder, the task that ran; false where
 * another process's stop had the stop lock (*@locked counts it). */
static bool names_running_holder(unsigned int victim, unsigned int *locked)
{
	const struct cpuhog_report_cpu *miss = NULL;
	struct cpuhog_report rep;
	int go[2], status, r;
	pid_t decoy, pid;
	unsigned int i;

	assert_int_equal(pipe(go), 0);
	decoy = queue_decoy(victim, go[0]);
	assert_true(comes_to(decoy, 'S', victim)); /* in its read */
	t_hold_cpu(victim, 80 * t_slow() * t_many(), &pid);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_true(comes_to(decoy, 'R', victim)); /* queued behind */
	report_init(&rep);
	r = stop_machine_report(spin, NULL, 0, NULL, &rep);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(waitpid(decoy, &status, 0), decoy);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(go[0]);
	close(go[1]);
	if (rep.lock_waited) { /* what ours met then was that stop */
		++*locked;
		return false;
	}
	assert_int_equal(r, -ETIMEDOUT);
	for (i = 0; i < rep.nr_cpu; i++)
		if (rc[i].cpu == victim)
			miss = &rc[i];
	assert_non_null(miss);
	assert_true(miss->flags & CPUHOG_RC_MISSING);
	print_message("CPU %u: pid %d (%s), %u runnable; the holder %d, the "
		      "decoy %d\n", victim, (int)miss->pid, miss->comm,
		      miss->nr_running, (int)pid, (int)decoy);
	assert_true(miss->nr_running >= 2);
	assert_int_equal(miss->pid, pid);
	return true;
}

/*
 * Two tasks at one priority on the missing CPU, the holder spinning and
 * a decoy queued behind it (another process's hog looks so beside a
 * spinner): the report names the one that ran.  /proc's run times move
 * at the scheduler's tick: a 2 ms look saw neither run, about half the
 * time at 250 Hz, and named whichever /proc listed first.
 */
static void report_names_the_running_holder(void **state)
{
	unsigned int victim = t_nth_cpu(1), mine = t_nth_cpu(0), tries,
		     locked = 0, judged = 0;

	(void)state;
	if (victim == mine || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	short_timeout(mine, 15);
	spin_ns = 0;
	/* three judged: a short look may see a tick by chance */
	for (tries = 0; tries < 8 && judged < 3; tries++) {
		if (tries)
			t_sleep_ms(100);
		judged += names_running_holder(victim, &locked);
	}
	cpuhog_shutdown();
	if (judged == 0)
		t_skip("other processes' stops had the stop lock at each try");
	print_message("%u stops judged, %u met another's stop lock\n",
		      judged, locked);
}

/*
 * A stop that waited out the machine-wide lock (a squatter kept it past
 * four stop timeouts), went on unserialized and then timed out says so:
 * CPUHOG_END_LOCKED_OUT, not held, fn run nowhere; the CPU it missed is
 * still named.
 */
static void report_locked_out(void **state)
{
	_Atomic int *lock_held = mmap(NULL, sizeof(*lock_held),
				      PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned int victim = t_nth_cpu(1), mine = t_nth_cpu(0);
	struct cpuhog_report rep;
	struct cpuhog_info in;
	struct t_held *h;
	pid_t squatter, pid;
	int status, r;

	(void)state;
	assert_true(lock_held != MAP_FAILED);
	if (victim == mine || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	short_timeout(mine, 5);
	assert_int_equal(cpuhog_get_info(&in), 0);
	if (!in.stop_serialized)
		t_skip("/run/lock/cpuhog-stop.lock cannot be had here: stops "
		       "are not serialized between processes");
	squatter = t_hold_stop_lock(0, lock_held);
	atomic_store(&runs, 0);
	/* the lock's bound (20 ms) and the stop's timeout (5 ms) within
	 * the hold */
	h = t_hold_cpu(victim, 80 * t_slow() * t_many(), &pid);
	report_init(&rep);
	r = stop_machine_report(spin, NULL, 0, NULL, &rep);
	kill(squatter, SIGKILL);
	assert_int_equal(waitpid(squatter, &status, 0), squatter);
	assert_int_equal(r, -ETIMEDOUT);
	assert_int_equal(atomic_load(&h->done), 0); /* still held: no hang */
	assert_true(rep.lock_waited);
	assert_false(rep.serialized);
	assert_int_equal(atomic_load(&runs), 0);
	/* the holder named, or (asserted there) another process's hog
	 * that came to CPU @victim unserialized too */
	names_holder(&rep, victim, pid, CPUHOG_END_LOCKED_OUT);
	cpuhog_shutdown();
	munmap((void *)lock_held, sizeof(*lock_held));
}

/* ---- hog_synchronize_report() that times out names the holder ---- */
static void report_synchronize_names_holder(void **state)
{
	unsigned int victim = t_nth_cpu(1), mine = t_nth_cpu(0), tries;

	(void)state;
	if (victim == mine || !t_can_rt())
		t_skip("needs two hogged CPUs and SCHED_FIFO");
	short_timeout(mine, 15);
	for (tries = 0; tries < 6 && !sync_names_holder(victim); tries++)
		t_sleep_ms(100);
	cpuhog_shutdown();
	assert_true(tries < 6);
}

/* Every CPU of a report of a call that holds nothing: its work ran
 * there, its times in order and within the call, nothing held. */
static void work_times_ordered(const struct cpuhog_report *rep)
{
	unsigned int i;

	for (i = 0; i < rep->nr_cpu; i++) {
		assert_true(rc[i].flags & CPUHOG_RC_ARRIVED);
		assert_true(rc[i].flags & CPUHOG_RC_RAN);
		assert_false(rc[i].flags & CPUHOG_RC_HELD);
		assert_false(rc[i].flags & CPUHOG_RC_MISSING);
		assert_true(rc[i].arrived_ns > 0);
		assert_int_equal(rc[i].held_ns, 0);
		assert_true(rc[i].arrived_ns <= rc[i].released_ns);
		assert_true(rc[i].released_ns <= rep->total_ns);
		assert_true(rc[i].arrived_ns <= rep->all_held_ns);
		assert_true(CPU_ISSET(rc[i].cpu, &rep->ran));
	}
	assert_true(rep->all_held_ns > 0);
	assert_true(rep->all_held_ns <= rep->total_ns);
	assert_int_equal(rep->nr_missing, 0);
	assert_int_equal(CPU_COUNT(&rep->held), 0);
	assert_int_equal(CPU_COUNT(&rep->missing), 0);
	assert_int_equal(rep->hold_ns, 0);
	assert_int_equal(rep->released, CPUHOG_RELEASED_NONE);
	assert_false(rep->serialized);
	assert_int_equal(rep->ended, CPUHOG_END_RAN);
	assert_int_equal(rep->tries, 1);
	assert_int_equal(rep->fn_runs, rep->nr_cpu);
	assert_int_equal(CPU_COUNT(&rep->ran), (int)rep->nr_cpu);
}

/* ---- hog_cpus_report(): fn ran on every CPU, inside its times ---- */
static void report_hog_cpus(void **state)
{
	struct cpuhog_report rep;
	cpu_set_t set;
	unsigned int i;
	int n;

	(void)state;
	n = fresh_call(&rep, &set, 1 * MS);
	atomic_store(&alloc_tries, 0);
	assert_int_equal(hog_cpus_report(sizeof(set), &set, spin, NULL, &rep),
			 0);
	assert_int_equal(atomic_load(&alloc_tries), 0);
	assert_int_equal(atomic_load(&runs), n);
	assert_int_equal(rep.ret, 0);
	assert_int_equal(rep.nr_cpu, n);
	assert_true(CPU_EQUAL(&rep.ran, &set));
	work_times_ordered(&rep);
	for (i = 0; i < rep.nr_cpu; i++) /* fn ran between the stamps */
		assert_true(rc[i].released_ns - rc[i].arrived_ns >= spin_ns);

	/* no report: hog_cpus() itself; an error of the call, reported */
	spin_ns = 0;
	assert_int_equal(hog_cpus_report(sizeof(set), &set, spin, NULL, NULL),
			 0);
	report_init(&rep);
	assert_int_equal(hog_cpus_report(sizeof(set), &set, NULL, NULL, &rep),
			 -EINVAL);
	assert_int_equal(rep.ret, -EINVAL);
	assert_int_equal(rep.ended, CPUHOG_END_NONE);
	assert_int_equal(rep.tries, 0);
	assert_int_equal(rep.nr_cpu, 0);
	rep.size = 8; /* a bad report */
	assert_int_equal(hog_cpus_report(sizeof(set), &set, spin, NULL, &rep),
			 -EINVAL);
}

/* In poll mode a CPU whose poller answers passes too: the same report,
 * whoever answered (the pollers start polling on their own time). */
static void synchronize_polled(int n, const cpu_set_t *set)
{
	struct cpuhog_report rep;
	struct cpuhog_info in;
	struct cpuhog_attr a;
	int i;

	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.flags = CPUHOG_F_POLL;
	a.poll_ns = 0;
	assert_int_equal(cpuhog_init(&a), 0);
	for (i = 0; i < 20; i++) {
		report_init(&rep);
		assert_int_equal(hog_synchronize_report(&rep), 0);
		assert_int_equal(rep.nr_cpu, n);
		assert_true(CPU_EQUAL(&rep.ran, set));
		work_times_ordered(&rep);
		t_sleep_ms(5);
	}
	assert_int_equal(cpuhog_get_info(&in), 0);
	print_message("%llu CPUs answered by their poller\n",
		      (unsigned long long)in.poll_sync_acks);
	cpuhog_shutdown();
}

/* ---- hog_synchronize_report(): every hogged CPU passed ---- */
static void report_synchronize(void **state)
{
	struct cpuhog_report rep;
	unsigned int mine = t_nth_cpu(0);
	cpu_set_t set;
	int n;

	(void)state;
	n = t_hog_cpus(&set);
	t_pin(mine);
	report_init(&rep);
	atomic_store(&alloc_tries, 0);
	assert_int_equal(hog_synchronize_report(&rep), 0);
	assert_int_equal(atomic_load(&alloc_tries), 0);
	assert_int_equal(rep.ret, 0);
	assert_int_equal(rep.nr_cpu, n);
	assert_true(CPU_EQUAL(&rep.ran, &set));
	assert_true(CPU_ISSET(mine, &rep.ran)); /* ours, passed at once */
	work_times_ordered(&rep);

	assert_int_equal(hog_synchronize_report(NULL), 0);
	cpuhog_report_init(&rep);
	rep.cpu_len = 4; /* entries, but no array */
	assert_int_equal(hog_synchronize_report(&rep), -EINVAL);
	/* no array: the sets and times still come */
	cpuhog_report_init(&rep);
	assert_int_equal(hog_synchronize_report(&rep), 0);
	assert_int_equal(rep.fn_runs, n);
	assert_true(rep.all_held_ns > 0);
	synchronize_polled(n, &set);
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
	cmocka_unit_test(report_locked_out),
	cmocka_unit_test(report_names_the_running_holder),
	cmocka_unit_test(report_overrun_releases),
	cmocka_unit_test(report_hog_cpus),
	cmocka_unit_test(report_synchronize),
	cmocka_unit_test(report_synchronize_names_holder),
};

T_MAIN(tests)
