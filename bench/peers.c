/* SPDX-License-Identifier: MIT */
/*
 * The peers measured in this process:
 *  - the design the seeds replaced: a thread created, pinned, given top
 *    priority and joined per call (for hog_one_cpu and for stop_machine);
 *  - a Boehm-GC-style stop-the-world: pthread_kill every thread of a set,
 *    each acknowledges and waits in its handler until restarted;
 *  - membarrier(2), PRIVATE_EXPEDITED and GLOBAL;
 * and, through helper programs (bench/peer.h): liburcu's synchronize_rcu
 * (memb flavour), OpenMP and DPDK, each where its package was found at
 * build time.
 */
#include "bench.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- a thread per call ---- */

struct percall {
	unsigned int cpu;
	_Atomic uint32_t *go;
	_Atomic int *arrived;
	int n;
};

static void *percall_one(void *arg)
{
	(void)arg;
	return NULL; /* the work: nothing, as in our runs */
}

static int create_pinned(pthread_t *th, unsigned int cpu,
			 void *(*fn)(void *), void *arg)
{
	struct sched_param sp = { .sched_priority =
					  sched_get_priority_max(SCHED_FIFO) };
	pthread_attr_t pa;
	cpu_set_t one;
	int r;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	pthread_attr_init(&pa);
	pthread_attr_setaffinity_np(&pa, sizeof(one), &one);
	pthread_attr_setinheritsched(&pa, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&pa, SCHED_FIFO);
	pthread_attr_setschedparam(&pa, &sp);
	r = pthread_create(th, &pa, fn, arg);
	if (r == EPERM) { /* no RT here: the same without it */
		pthread_attr_setinheritsched(&pa, PTHREAD_INHERIT_SCHED);
		r = pthread_create(th, &pa, fn, arg);
	}
	pthread_attr_destroy(&pa);
	return r;
}

static double thread_per_call_one(struct op *op)
{
	uint64_t t0 = tool_now_ns();
	pthread_t th;

	(void)op;
	if (create_pinned(&th, bench_place.there, percall_one, NULL))
		return -EAGAIN;
	pthread_join(th, NULL);
	return (double)(tool_now_ns() - t0);
}

/* The old stop_machine: a thread per CPU, released together, meeting in
 * a spinning rendezvous, fn on one of them. */
static void *percall_stop(void *arg)
{
	struct percall *p = arg;

	while (!atomic_load(p->go))
		syscall(SYS_futex, p->go, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	atomic_fetch_add(p->arrived, 1);
	while (atomic_load(p->arrived) < p->n) /* the rendezvous */
		;
	return NULL;
}

static double thread_per_call_stop(struct op *op)
{
	struct percall p[CPU_SETSIZE];
	pthread_t th[CPU_SETSIZE];
	_Atomic uint32_t go = 0;
	_Atomic int arrived = 0;
	uint64_t t0 = tool_now_ns();
	unsigned int cpu, n = 0, i;

	(void)op;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &bench_place.cpus))
			continue;
		p[n] = (struct percall){ cpu, &go, &arrived,
					 (int)bench_place.ncpus };
		if (create_pinned(&th[n], cpu, percall_stop, &p[n]))
			return -EAGAIN;
		n++;
	}
	atomic_store(&go, 1);
	syscall(SYS_futex, &go, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return (double)(tool_now_ns() - t0);
}

/* ---- signal-based stop-the-world ---- */

struct stw {
	pthread_t th[CPU_SETSIZE];
	unsigned int n;
	sem_t ack;
	_Atomic int restart, quit;
	struct sigaction old_stop, old_go;
};
static struct stw *stw_cur;

static void on_stop(int sig)
{
	sigset_t wait;

	(void)sig;
	sem_post(&stw_cur->ack); /* async-signal-safe */
	sigfillset(&wait);
	sigdelset(&wait, SIGUSR2);
	while (!atomic_load(&stw_cur->restart))
		sigsuspend(&wait);
	sem_post(&stw_cur->ack);
}

static void on_go(int sig)
{
	(void)sig;
}

static void *stw_thread(void *arg)
{
	struct stw *s = arg;

	while (!atomic_load(&s->quit))
		pause(); /* a mutator at rest */
	return NULL;
}

static const char *stw_setup(struct op *op)
{
	struct stw *s = calloc(1, sizeof(*s));
	struct sigaction sa;
	unsigned int cpu;

	if (!s)
		return "out of memory";
	sem_init(&s->ack, 0, 0);
	memset(&sa, 0, sizeof(sa));
	sigfillset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sigaction(SIGUSR1, &sa, &s->old_stop);
	sa.sa_handler = on_go;
	sigaction(SIGUSR2, &sa, &s->old_go);
	stw_cur = s;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &bench_place.cpus) &&
		    create_pinned(&s->th[s->n], cpu, stw_thread, s) == 0)
			s->n++;
	op->state = s;
	usleep(1000);
	return NULL;
}

static double stw_run(struct op *op)
{
	struct stw *s = op->state;
	uint64_t t0 = tool_now_ns();
	unsigned int i;

	atomic_store(&s->restart, 0);
	for (i = 0; i < s->n; i++)
		pthread_kill(s->th[i], SIGUSR1);
	for (i = 0; i < s->n; i++)
		sem_wait(&s->ack); /* all stopped: the world is ours */
	atomic_store(&s->restart, 1);
	for (i = 0; i < s->n; i++)
		pthread_kill(s->th[i], SIGUSR2);
	for (i = 0; i < s->n; i++)
		sem_wait(&s->ack); /* all running again */
	return (double)(tool_now_ns() - t0);
}

static void stw_teardown(struct op *op)
{
	struct stw *s = op->state;
	unsigned int i;

	atomic_store(&s->quit, 1);
	for (i = 0; i < s->n; i++) {
		pthread_kill(s->th[i], SIGUSR2);
		pthread_join(s->th[i], NULL);
	}
	sigaction(SIGUSR1, &s->old_stop, NULL);
	sigaction(SIGUSR2, &s->old_go, NULL);
	sem_destroy(&s->ack);
	free(s);
}

/* ---- membarrier and liburcu ---- */

static const char *membarrier_setup(struct op *op)
{
	static int registered;

	(void)op;
	if (!registered &&
	    syscall(SYS_membarrier,
		    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) < 0)
		return "membarrier PRIVATE_EXPEDITED not available";
	registered = 1;
	return NULL;
}

static const char *membarrier_busy_setup(struct op *op)
{
	const char *why = membarrier_setup(op);

	return why ? why : busy_setup(op);
}

static double membarrier_private(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) <
	    0)
		return -errno;
	return (double)(tool_now_ns() - t0);
}

static const char *global_setup(struct op *op)
{
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	(void)op;
	return cmds >= 0 && (cmds & MEMBARRIER_CMD_GLOBAL)
		       ? NULL
		       : "membarrier GLOBAL not available";
}

static double membarrier_global(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) < 0)
		return -errno;
	return (double)(tool_now_ns() - t0);
}

size_t peer_ops(struct op *ops)
{
	size_t n = 0;

	ops[n++] = (struct op){ .name = "thread per call, other CPU",
				.run = thread_per_call_one };
	ops[n++] = (struct op){ .name = "thread per CPU per call, stop",
				.run = thread_per_call_stop };
	ops[n++] = (struct op){ .name = "thread per CPU per call, stop, remote busy",
				.setup = busy_setup,
				.run = thread_per_call_stop,
				.teardown = busy_teardown };
	ops[n++] = (struct op){ .name = "signal stop-the-world (Boehm GC)",
				.setup = stw_setup,
				.run = stw_run,
				.teardown = stw_teardown };
	ops[n++] = (struct op){ .name = "membarrier PRIVATE_EXPEDITED",
				.setup = membarrier_setup,
				.run = membarrier_private };
	ops[n++] = (struct op){ .name = "membarrier PRIVATE_EXPEDITED, remote busy",
				.setup = membarrier_busy_setup,
				.run = membarrier_private,
				.teardown = busy_teardown };
	ops[n++] = (struct op){ .name = "membarrier GLOBAL",
				.setup = global_setup,
				.run = membarrier_global };
	ops[n++] = (struct op){ .name = "liburcu synchronize_rcu (memb)",
				.helper = "urcu",
				.child = "urcu" };
	ops[n++] = (struct op){ .name = "OpenMP parallel region, passive",
				.helper = "openmp",
				.child = "omp",
				.child_env = "OMP_WAIT_POLICY=passive" };
	ops[n++] = (struct op){ .name = "OpenMP parallel region, default",
				.helper = "openmp",
				.child = "omp" };
	ops[n++] = (struct op){ .name = "DPDK rte_eal_remote_launch+wait",
				.helper = "dpdk",
				.child = "dpdk-remote" };
	ops[n++] = (struct op){ .name = "DPDK rte_eal_mp_remote_launch+wait",
				.helper = "dpdk",
				.child = "dpdk-mp" };
	for (size_t i = 0; i < n; i++) {
		ops[i].kind = "peer";
		if (ops[i].helper)
			ops[i].skip = bench_helper_missing(ops[i].helper);
	}
	return n;
}
