/* SPDX-License-Identifier: MIT */
/*
 * Where applications live: every CPU busy.  The other rows call idle
 * CPUs; a server calls stop_machine() and hog_synchronize() while its own
 * threads, and other processes, keep every CPU busy.  Two loads, each a
 * spinning SCHED_OTHER thread pinned to every hogged CPU, the caller's
 * own CPU included:
 *   "ours busy":  threads of this process (a barrier must reach them; the
 *                 caller waits for its turn among them);
 *   "other busy": threads of a child process (nothing of ours to reach,
 *                 but every wake-up preempts someone, and the caller
 *                 again waits for its turn).
 * membarrier(PRIVATE_EXPEDITED) is timed under the same loads.
 */
#include "bench.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct load {
	pthread_t th[CPU_SETSIZE];
	unsigned int n;
	_Atomic int stop;
	pid_t child; /* "other busy": the process that spins */
};

struct spinner {
	struct load *l;
	unsigned int cpu;
};

static void *spin_main(void *arg)
{
	struct spinner *s = arg;
	struct load *l = s->l;

	bench_pin(s->cpu);
	free(s);
	while (!atomic_load_explicit(&l->stop, memory_order_relaxed))
		;
	return NULL;
}

/* A spinner on every hogged CPU, in this process.  Returns how many. */
static unsigned int spin_everywhere(struct load *l)
{
	unsigned int cpu;

	for (cpu = 0; cpu < CPU_SETSIZE && l->n < CPU_SETSIZE; cpu++) {
		struct spinner *s;

		if (!CPU_ISSET(cpu, &bench_place.cpus))
			continue;
		s = malloc(sizeof(*s));
		if (!s)
			break;
		*s = (struct spinner){ l, cpu };
		if (pthread_create(&l->th[l->n], NULL, spin_main, s)) {
			free(s);
			break;
		}
		l->n++;
	}
	return l->n;
}

static void spin_stop(struct load *l)
{
	atomic_store(&l->stop, 1);
	while (l->n)
		pthread_join(l->th[--l->n], NULL);
}

static const char *ours_busy_setup(struct op *op)
{
	struct load *l = calloc(1, sizeof(*l));

	if (!l)
		return "out of memory";
	op->state = l;
	if (spin_everywhere(l) < bench_place.ncpus) {
		spin_stop(l);
		free(l);
		return "pthread_create failed";
	}
	usleep(2000);
	return NULL;
}

/* The child spins on every CPU until killed (no library, no hogs). */
static const char *other_busy_setup(struct op *op)
{
	struct load *l = calloc(1, sizeof(*l));

	if (!l)
		return "out of memory";
	op->state = l;
	l->child = fork();
	if (l->child < 0) {
		free(l);
		return "fork failed";
	}
	if (l->child == 0) {
		struct load mine = { .n = 0 };

		spin_everywhere(&mine);
		for (;;)
			pause();
	}
	usleep(20000); /* its threads started and spinning */
	return NULL;
}

static void busy_all_teardown(struct op *op)
{
	struct load *l = op->state;

	if (l->child > 0) {
		kill(l->child, SIGKILL);
		waitpid(l->child, NULL, 0);
	} else {
		spin_stop(l);
	}
	free(l);
}

static const char *stop_ours_setup(struct op *op)
{
	const char *why = ours_need_rt(op);

	return why ? why : ours_busy_setup(op);
}

static const char *stop_other_setup(struct op *op)
{
	const char *why = ours_need_rt(op);

	return why ? why : other_busy_setup(op);
}

static const char *membarrier_registered(void)
{
	static int registered;

	if (!registered &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		    0, 0) < 0)
		return "membarrier PRIVATE_EXPEDITED not available";
	registered = 1;
	return NULL;
}

static const char *mb_ours_setup(struct op *op)
{
	const char *why = membarrier_registered();

	return why ? why : ours_busy_setup(op);
}

static const char *mb_other_setup(struct op *op)
{
	const char *why = membarrier_registered();

	return why ? why : other_busy_setup(op);
}

static double membarrier_call(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) <
	    0)
		return -errno;
	return (double)(tool_now_ns() - t0);
}

size_t busy_all_ops(struct op *ops)
{
	const struct op list[] = {
		{ .name = BUSY_STOP_OURS, .kind = "ours",
		  .setup = stop_ours_setup, .run = ours_stop_all },
		{ .name = BUSY_SYNC_OURS, .kind = "ours",
		  .setup = ours_busy_setup, .run = ours_synchronize },
		{ .name = BUSY_MB_OURS, .kind = "peer",
		  .setup = mb_ours_setup, .run = membarrier_call },
		{ .name = "stop_machine, another process busy on every CPU",
		  .kind = "ours", .setup = stop_other_setup,
		  .run = ours_stop_all },
		{ .name = "hog_synchronize, another process busy on every CPU",
		  .kind = "ours", .setup = other_busy_setup,
		  .run = ours_synchronize },
		{ .name = "membarrier PRIVATE_EXP., another process busy",
		  .kind = "peer", .setup = mb_other_setup,
		  .run = membarrier_call },
	};
	size_t i, n = sizeof(list) / sizeof(list[0]);

	for (i = 0; i < n; i++) {
		ops[i] = list[i];
		ops[i].teardown = busy_all_teardown;
		ops[i].no_entries = true; /* the spinners' are not the call's */
	}
	return n;
}
