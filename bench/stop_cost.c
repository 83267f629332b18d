/* SPDX-License-Identifier: MIT */
/*
 * What a stop costs everyone else: the time a busy thread of another
 * process loses to one stop_machine() whose fn spins 20 us.
 *
 * Per batch a child process (the "other process", SCHED_OTHER, sharing
 * nothing with us but a mapping) puts a thread on each hogged CPU that
 * reads the clock in a loop and logs every gap between two reads above
 * 1 us (when it ended, how long) in a ring of its own.  Per sample the
 * parent notes the time, stops the machine, and waits until each thread
 * has read the clock again; a thread's loss is its largest gap in that
 * window, counted from the window's start (what it lost before the stop
 * began is not the stop's).  The sample is the mean of the threads'
 * losses: what a busy thread of another process loses per stop, against
 * fn's own 20 us.
 */
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING 1024		/* gaps kept per thread */
#define GAP_NS 1000		/* a gap shorter than this is no loss */
/* A busy thread not back on its CPU this long after the stop: the
 * machine is too loaded to say what the stop cost (-ETIME, not the stop's
 * -ETIMEDOUT). */
#define RESUME_NS 1000000000ull

struct gap {
	_Atomic uint64_t end, len;
};

/* One busy thread's log, written by it alone; cache-line aligned so that
 * the threads do not share lines. */
struct busy_log {
	_Alignas(64) _Atomic uint64_t last; /* its latest clock read */
	_Atomic uint64_t head;		    /* gaps logged so far */
	_Atomic int ready;
	struct gap ring[RING];
};

struct stop_cost {
	pid_t child;
	unsigned int n; /* busy threads: one per hogged CPU */
	struct busy_log *log; /* n of them, shared with the child */
	size_t size;
};

/* In the child: spin on one CPU, logging every gap. */
static void *busy_main(void *arg)
{
	struct busy_log *l = arg;
	uint64_t prev = tool_now_ns(), t, h = 0;

	atomic_store(&l->ready, 1);
	for (;;) {
		t = tool_now_ns();
		if (t - prev > GAP_NS) {
			struct gap *g = &l->ring[h % RING];

			atomic_store_explicit(&g->end, t, memory_order_relaxed);
			atomic_store_explicit(&g->len, t - prev,
					      memory_order_relaxed);
			atomic_store_explicit(&l->head, ++h,
					      memory_order_release);
		}
		atomic_store_explicit(&l->last, t, memory_order_release);
		prev = t;
	}
	return NULL;
}

/* The other process: a busy thread per hogged CPU, until killed. */
static void child_main(struct stop_cost *s)
{
	pthread_t th;
	cpu_set_t one;
	unsigned int i;

	for (i = 0; i < s->n; i++) {
		pthread_attr_t a;

		pthread_attr_init(&a);
		CPU_ZERO(&one);
		CPU_SET(bench_nth_cpu(i), &one);
		pthread_attr_setaffinity_np(&a, sizeof(one), &one);
		if (pthread_create(&th, &a, busy_main, &s->log[i]))
			_exit(1);
		pthread_attr_destroy(&a);
	}
	for (;;)
		pause();
}

static const char *cost_setup(struct op *op)
{
	struct stop_cost *s;
	uint64_t end;
	unsigned int i;
	const char *why = ours_need_rt(op);

	if (why)
		return why;
	if (!(s = calloc(1, sizeof(*s))))
		return "out of memory";
	s->n = bench_place.ncpus;
	s->size = s->n * sizeof(struct busy_log);
	s->log = mmap(NULL, s->size, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s->log == MAP_FAILED) {
		free(s);
		return "mmap failed";
	}
	fflush(NULL);
	s->child = fork();
	if (s->child == 0)
		child_main(s); /* no hogs here: it makes no call */
	if (s->child < 0) {
		munmap(s->log, s->size);
		free(s);
		return "fork failed";
	}
	op->state = s;
	/* every thread running before the first stop */
	end = tool_now_ns() + RESUME_NS;
	for (i = 0; i < s->n; i++)
		while (!atomic_load(&s->log[i].ready) && tool_now_ns() < end)
			usleep(100);
	return NULL;
}

static void cost_teardown(struct op *op)
{
	struct stop_cost *s = op->state;

	kill(s->child, SIGKILL);
	waitpid(s->child, NULL, 0);
	munmap(s->log, s->size);
	free(s);
}

/* fn: 20 us of work on one CPU while every other is held. */
static int spin_20us(void *arg)
{
	uint64_t end = tool_now_ns() + (uint64_t)STOP_COST_FN_NS;

	(void)arg;
	while (tool_now_ns() < end)
		;
	return 0;
}

/* The largest gap of @l that ended after @t0, counted from @t0. */
static uint64_t lost_since(struct busy_log *l, uint64_t t0)
{
	uint64_t h = atomic_load_explicit(&l->head, memory_order_acquire);
	uint64_t k, most = 0;

	for (k = h; k > 0 && h - k < RING; k--) {
		struct gap *g = &l->ring[(k - 1) % RING];
		uint64_t end = atomic_load_explicit(&g->end, memory_order_relaxed);
		uint64_t len = atomic_load_explicit(&g->len, memory_order_relaxed);
		uint64_t from = end - len > t0 ? end - len : t0;

		if (end <= t0)
			break;
		most = end - from > most ? end - from : most;
	}
	return most;
}

static double cost_run(struct op *op)
{
	struct stop_cost *s = op->state;
	uint64_t t0, t1, sum = 0;
	unsigned int i;
	int r;

	t0 = tool_now_ns();
	r = stop_machine(spin_20us, NULL, 0, NULL);
	t1 = tool_now_ns();
	if (r < 0)
		return r;
	/* each thread back on its CPU; sleeping lets ours run */
	for (i = 0; i < s->n; i++)
		while (atomic_load_explicit(&s->log[i].last,
					    memory_order_acquire) <= t1) {
			if (tool_now_ns() - t1 > RESUME_NS)
				return -ETIME;
			nanosleep(&(struct timespec){ 0, 10000 }, NULL);
		}
	for (i = 0; i < s->n; i++)
		sum += lost_since(&s->log[i], t0);
	return (double)sum / s->n;
}

size_t stop_cost_ops(struct op *ops)
{
	ops[0] = (struct op){ .name = STOP_COST_ROW, .kind = "cost",
			      .setup = cost_setup, .run = cost_run,
			      .teardown = cost_teardown,
			      .no_entries = true };
	return 1;
}
