/* SPDX-License-Identifier: MIT */
/*
 * Barriers with concurrent callers: while the bench times one caller's
 * calls, CROWD - 1 more threads call the same barrier back to back, on
 * any of the hogged CPUs.  In a server, concurrent callers are the normal
 * case (Seastar's membarrier() calls from every shard), and the two
 * barriers answer them differently: hog_synchronize() shares its passes
 * (a caller is served by any pass that began after its call began, so
 * four callers cost at most two passes together), membarrier()
 * PRIVATE_EXPEDITED serializes on one mutex in the kernel.  The rows give
 * the time per call of the timed caller; for hog_synchronize() the
 * passes per call of all callers (cpuhog_info.sync_passes), printed under
 * the table.
 */
#include "bench.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CROWD 4

struct crowd {
	pthread_t th[CROWD - 1];
	unsigned int n;
	_Atomic int stop;
	_Atomic uint64_t calls; /* every caller's, the timed one's too */
	int (*call)(void);
	uint64_t passes0;
};

struct crowd_result bench_crowd = { .calls = 0 };

static void *crowd_main(void *arg)
{
	struct crowd *c = arg;

	pthread_setaffinity_np(pthread_self(), sizeof(bench_place.cpus),
			       &bench_place.cpus);
	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		if (c->call() < 0)
			break;
		atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
	}
	return NULL;
}

static uint64_t passes(void)
{
	struct cpuhog_info in;

	return cpuhog_get_info(&in) == 0 ? in.sync_passes : 0;
}

static void crowd_end(struct op *op, bool count_passes);

static const char *crowd_start(struct op *op, int (*call)(void))
{
	struct crowd *c = calloc(1, sizeof(*c));

	if (!c)
		return "out of memory";
	c->call = call;
	c->passes0 = passes();
	for (c->n = 0; c->n < CROWD - 1; c->n++)
		if (pthread_create(&c->th[c->n], NULL, crowd_main, c))
			break;
	op->state = c;
	if (c->n == CROWD - 1)
		return NULL;
	crowd_end(op, false); /* the bench calls no teardown after a skip */
	return "pthread_create failed";
}

static void crowd_end(struct op *op, bool count_passes)
{
	struct crowd *c = op->state;
	unsigned int i;

	if (!c)
		return;
	atomic_store(&c->stop, 1);
	for (i = 0; i < c->n; i++)
		pthread_join(c->th[i], NULL);
	if (count_passes) {
		bench_crowd.calls += atomic_load(&c->calls);
		bench_crowd.passes += passes() - c->passes0;
	}
	free(c);
	op->state = NULL;
}

static double crowd_run(struct op *op)
{
	struct crowd *c = op->state;
	uint64_t t0 = tool_now_ns();
	int r = c->call();

	if (r < 0)
		return r;
	atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
	return (double)(tool_now_ns() - t0);
}

static int sync_call(void)
{
	return hog_synchronize();
}

static int membarrier_call(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
		       0) < 0
		       ? -errno
		       : 0;
}

static const char *sync_crowd_setup(struct op *op)
{
	return crowd_start(op, sync_call);
}

static void sync_crowd_teardown(struct op *op)
{
	crowd_end(op, true);
}

static const char *membarrier_crowd_setup(struct op *op)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		    0, 0) < 0)
		return "membarrier PRIVATE_EXPEDITED not available";
	return crowd_start(op, membarrier_call);
}

static void membarrier_crowd_teardown(struct op *op)
{
	crowd_end(op, false);
}

size_t crowd_ops(struct op *ops)
{
	ops[0] = (struct op){ .name = "hog_synchronize, 4 concurrent callers",
			      .kind = "ours", .setup = sync_crowd_setup,
			      .run = crowd_run,
			      .teardown = sync_crowd_teardown,
			      .no_entries = true };
	ops[1] = (struct op){
		.name = "membarrier PRIVATE_EXPEDITED, 4 callers",
		.kind = "peer", .setup = membarrier_crowd_setup,
		.run = crowd_run, .teardown = membarrier_crowd_teardown,
		.no_entries = true
	};
	return 2;
}
