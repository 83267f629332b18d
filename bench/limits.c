/* SPDX-License-Identifier: MIT */
/*
 * The physical limits, with the same placement as our calls.
 *  - spinning: a cache-line round trip between two pinned threads;
 *  - sleeping: one futex wake of a sleeping, pinned SCHED_FIFO thread on
 *    the other CPU, the caller spinning for its reply.  A hog that sleeps
 *    when idle cannot beat this.
 */
#include "bench.h"

#include <errno.h>

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

struct partner {
	pthread_t th;
	_Atomic uint32_t req, rep; /* request number, reply number */
	_Atomic int stop;
	bool sleeps;
	char pad[64];
};

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void *partner_main(void *arg)
{
	struct partner *p = arg;
	struct sched_param sp = { .sched_priority =
					  sched_get_priority_max(SCHED_FIFO) };
	uint32_t seen = 0;

	bench_pin(bench_place.there);
	if (p->sleeps)
		pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	while (!atomic_load(&p->stop)) {
		uint32_t r = atomic_load_explicit(&p->req, memory_order_acquire);

		if (r == seen) {
			if (p->sleeps)
				syscall(SYS_futex, &p->req, FUTEX_WAIT_PRIVATE,
					r, NULL, NULL, 0);
			else
				relax();
			continue;
		}
		seen = r;
		atomic_store_explicit(&p->rep, r, memory_order_release);
	}
	return NULL;
}

static const char *partner_start(struct op *op, bool sleeps)
{
	struct partner *p;

	if (bench_place.here == bench_place.there)
		return "needs two CPUs";
	p = calloc(1, sizeof(*p));
	if (!p)
		return "out of memory";
	p->sleeps = sleeps;
	if (pthread_create(&p->th, NULL, partner_main, p)) {
		free(p);
		return "pthread_create failed";
	}
	op->state = p;
	return NULL;
}

void limit_partner_end(struct op *op)
{
	struct partner *p = op->state;

	atomic_store(&p->stop, 1);
	atomic_fetch_add(&p->req, 1);
	syscall(SYS_futex, &p->req, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(p->th, NULL);
	free(p);
}

/* Spin until the partner answered request @r; false past @deadline. */
static bool await_reply(struct partner *p, uint32_t r, uint64_t deadline)
{
	while (atomic_load_explicit(&p->rep, memory_order_acquire) != r) {
		relax();
		if (tool_now_ns() > deadline)
			return false;
	}
	return true;
}

static double round_trip(struct op *op)
{
	struct partner *p = op->state;
	uint64_t t0 = tool_now_ns(), deadline = t0 + 1000000000ull;
	uint32_t r = atomic_load(&p->req) + 1;

	atomic_store_explicit(&p->req, r, memory_order_release);
	if (p->sleeps)
		syscall(SYS_futex, &p->req, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
			0);
	if (!await_reply(p, r, deadline))
		return -ETIMEDOUT; /* the partner never answered */
	return (double)(tool_now_ns() - t0);
}

/* The waker's own cost of the wake in round_trip(): the system call
 * alone (bench --model's w), the reply awaited so that the next finds
 * the partner asleep again. */
double limit_wake_cost(struct op *op)
{
	struct partner *p = op->state;
	uint32_t r = atomic_load(&p->req) + 1;
	uint64_t t0, t1;

	atomic_store_explicit(&p->req, r, memory_order_release);
	t0 = tool_now_ns();
	syscall(SYS_futex, &p->req, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	t1 = tool_now_ns();
	if (!await_reply(p, r, t1 + 1000000000ull))
		return -ETIMEDOUT;
	usleep(200); /* asleep again, as every wake here finds it */
	return (double)(t1 - t0);
}

static const char *spin_setup(struct op *op)
{
	return partner_start(op, false);
}

const char *limit_sleep_setup(struct op *op)
{
	const char *why = partner_start(op, true);

	if (!why)
		usleep(2000); /* let it fall asleep */
	return why;
}

size_t limit_ops(struct op *ops)
{
	ops[0] = (struct op){ .name = "limit: cache-line round trip",
			      .kind = "limit", .setup = spin_setup,
			      .run = round_trip, .teardown = limit_partner_end };
	ops[1] = (struct op){ .name = "limit: futex wake of a sleeping thread",
			      .kind = "limit", .setup = limit_sleep_setup,
			      .run = round_trip, .teardown = limit_partner_end };
	return 2;
}

/* ---- a busy remote CPU ---- */

struct busy {
	pthread_t th;
	_Atomic int stop;
};

static void *busy_main(void *arg)
{
	struct busy *b = arg;

	bench_pin(bench_place.there);
	while (!atomic_load_explicit(&b->stop, memory_order_relaxed))
		relax();
	return NULL;
}

const char *busy_setup(struct op *op)
{
	struct busy *b;

	if (bench_place.here == bench_place.there)
		return "needs two CPUs";
	b = calloc(1, sizeof(*b));
	if (!b || pthread_create(&b->th, NULL, busy_main, b)) {
		free(b);
		return "pthread_create failed";
	}
	op->state = b;
	usleep(1000);
	return NULL;
}

void busy_teardown(struct op *op)
{
	struct busy *b = op->state;

	atomic_store(&b->stop, 1);
	pthread_join(b->th, NULL);
	free(b);
}
