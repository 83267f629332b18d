/* SPDX-License-Identifier: MIT */
/*
 * Poll mode in the bench: the same calls with CPUHOG_F_POLL, interleaved
 * with the sleep-mode rows round by round (each batch re-initialises the
 * library in poll mode and back), and what polling costs others:
 *  - the throughput a CPU-bound SCHED_OTHER process keeps on a polled
 *    CPU, against the same process beside sleeping hogs: the median of
 *    paired windows, each after the process's first 50 ms (the pollers'
 *    onset: they step aside within a few ms).  The process runs in a
 *    session of its own (setsid): under autogroup that is the hard case,
 *    since SCHED_IDLE only weighs 3 within one group;
 *  - the pollers' own CPU time on an idle machine.
 */
#include "bench.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Re-initialise in poll mode (or back); NULL, or why not. */
/* Why the pollers of the hogged CPUs outside @polling did not poll: the
 * threads that kept those CPUs busy, so that a user can act on it. */
static const char *not_polling(const cpu_set_t *polling)
{
	static char why[512];
	char users[400];
	cpu_set_t idle;

	if (cpuhog_get_cpus(sizeof(idle), &idle) < 0)
		CPU_ZERO(&idle);
	CPU_XOR(&idle, &idle, polling); /* hogged, not polling */
	bench_cpu_users(sizeof(idle), &idle, users, sizeof(users));
	snprintf(why, sizeof(why),
		 "the pollers did not start polling within 500 ms (their CPUs "
		 "were busy: %s)",
		 users);
	return why;
}

static const char *init_mode(bool poll)
{
	struct cpuhog_attr a;
	struct cpuhog_info in;
	cpu_set_t set;
	int k;

	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.flags = poll ? CPUHOG_F_POLL : 0;
	if (cpuhog_init(&a) < 0 || cpuhog_get_info(&in) < 0)
		return "cpuhog_init failed";
	if (poll && !(in.flags & CPUHOG_F_POLL))
		return "the pollers could not start";
	/* a new poller looks at its CPU for 100 ms before it polls */
	for (k = 0; poll && k < 500; k++) {
		if (cpuhog_get_polling(sizeof(set), &set) == (int)in.nr_hogs)
			return NULL;
		usleep(1000);
	}
	return poll ? not_polling(&set) : NULL;
}

static const char *poll_setup(struct op *op)
{
	struct cpuhog_info in;

	if (bench_place.here == bench_place.there)
		return "needs two CPUs";
	if (op->run == ours_stop_all &&
	    (cpuhog_get_info(&in) < 0 || in.policy != SCHED_FIFO))
		return "the hogs have no real-time priority (stop_machine "
		       "needs it)";
	return init_mode(true);
}

static void poll_teardown(struct op *op)
{
	(void)op;
	init_mode(false);
}

/* A busy remote CPU, once its poller has stepped aside (it notices within
 * a few ms; the onset is the throughput row's business): the steady
 * state of a busy CPU, as the sleep-mode row measures it. */
static const char *busy_poll_setup(struct op *op)
{
	const char *why = poll_setup(op);
	cpu_set_t set;
	int k;

	if (why || (why = busy_setup(op)))
		return why;
	for (k = 0; k < 200; k++) {
		if (cpuhog_get_polling(sizeof(set), &set) >= 0 &&
		    !CPU_ISSET(bench_place.there, &set))
			break;
		usleep(1000);
	}
	return NULL;
}

static void busy_poll_teardown(struct op *op)
{
	busy_teardown(op);
	poll_teardown(op);
}

size_t poll_ops(struct op *ops)
{
	const struct op list[] = {
		{ .name = "hog_one_cpu, other CPU, poll", .run = ours_one_remote },
		{ .name = "hog_cpus, all CPUs, poll", .run = ours_cpus_all },
		{ .name = "stop_machine, all CPUs, poll", .run = ours_stop_all },
		{ .name = "hog_synchronize, poll", .run = ours_synchronize },
		{ .name = "hog_one_cpu, other CPU, remote busy",
		  .setup = busy_setup, .run = ours_one_remote,
		  .teardown = busy_teardown },
		{ .name = "hog_one_cpu, other CPU, remote busy, poll",
		  .setup = busy_poll_setup, .run = ours_one_remote,
		  .teardown = busy_poll_teardown },
	};
	size_t i, n = sizeof(list) / sizeof(list[0]);

	for (i = 0; i < n; i++) {
		ops[i] = list[i];
		ops[i].kind = "ours";
		if (!ops[i].setup) {
			ops[i].setup = poll_setup;
			ops[i].teardown = poll_teardown;
		}
	}
	return n;
}

/* ---- what polling costs others ---- */

/* Iterations a CPU-bound process in a session of its own gets through
 * on @cpu in @ms; 0 on failure. */
static double spin_elsewhere(unsigned int cpu, unsigned int ms)
{
	int fd[2];
	double count = 0;
	pid_t pid;

	if (pipe(fd) < 0)
		return 0;
	pid = fork();
	if (pid == 0) {
		volatile unsigned long k = 0;
		uint64_t end;

		setsid();
		bench_pin(cpu);
		/* 50 ms first: a poller takes a few ms to step aside for a
		 * job that starts; the steady state is what a job keeps */
		end = tool_now_ns() + 50000000u;
		while (tool_now_ns() < end)
			k++;
		k = 0;
		end = tool_now_ns() + (uint64_t)ms * 1000000u;
		while (tool_now_ns() < end)
			for (int j = 0; j < 1000; j++)
				k++;
		count = (double)k;
		_exit(write(fd[1], &count, sizeof(count)) == sizeof(count) ? 0
									     : 1);
	}
	close(fd[1]);
	if (pid < 0 || read(fd[0], &count, sizeof(count)) != sizeof(count))
		count = 0;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return count;
}

/*
 * Throughput kept: alternate sleep and poll mode @rounds times (at most
 * POLL_COST_ROUNDS), 150 ms each, on the remote CPU; the median of the
 * rounds' ratios.  Then the pollers' CPU
 * time over @idle_s of an idle machine, per polled CPU.
 */
static int cmp_ratio(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void poll_costs(struct poll_cost *pc, unsigned int rounds, double idle_s)
{
	double in_sleep, in_poll, ratio[POLL_COST_ROUNDS];
	unsigned long long before;
	unsigned int r;

	memset(pc, 0, sizeof(*pc));
	if (rounds > POLL_COST_ROUNDS)
		rounds = POLL_COST_ROUNDS;
	if (bench_place.here == bench_place.there) {
		pc->skip = "needs two CPUs";
		return;
	}
	for (r = 0; r < rounds; r++) {
		if (init_mode(false)) {
			pc->skip = "cpuhog_init failed";
			return;
		}
		in_sleep = spin_elsewhere(bench_place.there, 150);
		if (init_mode(true)) {
			pc->skip = "the pollers could not start";
			init_mode(false);
			return;
		}
		in_poll = spin_elsewhere(bench_place.there, 150);
		ratio[r] = in_sleep > 0 ? in_poll / in_sleep : 0;
	}
	/* the median of the paired windows: one window the host disturbs
	 * (+-1.5% between two runs of the same job here) moves it least */
	qsort(ratio, rounds, sizeof(ratio[0]), cmp_ratio);
	pc->kept = ratio[rounds / 2];
	usleep(20000);
	before = bench_threads_runtime("cpuhog-p/");
	usleep((useconds_t)(idle_s * 1e6));
	pc->poller_share = (double)(bench_threads_runtime("cpuhog-p/") - before) /
			   (idle_s * 1e9 * bench_place.ncpus);
	init_mode(false);
}
