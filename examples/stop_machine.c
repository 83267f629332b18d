/* SPDX-License-Identifier: MIT */
/*
 * stop_machine: change a multi-word setting that other threads read with
 * no lock and no fence.  While the update runs no reader runs anywhere,
 * so the update is one indivisible step for every reader.  A reader can
 * still have been stopped between two of its own loads (user space cannot
 * disable preemption), so it re-reads when the generation moved: the same
 * check as a seqlock's, but neither side needs a memory barrier.
 */
#include <cpuhog.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

struct limits {
	/* atomic only so that each word is read whole (and TSan knows);
	 * relaxed everywhere: stop_machine does the ordering */
	_Atomic long gen, lo, hi; /* invariant: hi == lo + 100 */
};
static struct limits lim = { 0, 0, 100 };
static _Atomic int done;
static _Atomic long torn, reads;

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&done, memory_order_relaxed)) {
		long g = atomic_load_explicit(&lim.gen, memory_order_relaxed);
		long lo = atomic_load_explicit(&lim.lo, memory_order_relaxed);
		long hi = atomic_load_explicit(&lim.hi, memory_order_relaxed);

		atomic_signal_fence(memory_order_seq_cst); /* compiler only */
		if (atomic_load_explicit(&lim.gen, memory_order_relaxed) != g)
			continue; /* stopped in between: read again */
		if (hi != lo + 100)
			atomic_fetch_add(&torn, 1);
		atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
	}
	return NULL;
}

static int update(void *arg)
{
	long base = *(long *)arg;

	/* three stores, and no reader runs between them */
	atomic_store_explicit(&lim.gen, base, memory_order_relaxed);
	atomic_store_explicit(&lim.lo, base, memory_order_relaxed);
	atomic_store_explicit(&lim.hi, base + 100, memory_order_relaxed);
	return 0;
}

/* fn ran nowhere on -ENOENT (a CPU went away) and -ETIMEDOUT (not every
 * CPU came in time: held by someone else, or a VM running its vCPUs
 * late): the update is still to be made, so call again, a few times. */
static int update_retrying(long *i, long *retries)
{
	int r, tries = 0;

	while ((r = stop_machine(update, i, 0, NULL)) == -ETIMEDOUT ||
	       r == -ENOENT) {
		if (++tries == 10)
			break;
		(*retries)++;
	}
	return r;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void)
{
	pthread_t th[4];
	long i, retries = 0;
	int r = 0, k;
	double end = now() + 3;

	for (k = 0; k < 4; k++)
		pthread_create(&th[k], NULL, reader, NULL);
	/* 1000 updates, or as many as 3 s allow: each stop brings every CPU
	 * in, which takes longer the more CPUs there are (and much longer
	 * in an emulated guest whose vCPUs share a few host CPUs) */
	for (i = 1; i <= 1000 && r == 0 && now() < end; i++)
		r = update_retrying(&i, &retries);
	atomic_store(&done, 1);
	for (k = 0; k < 4; k++)
		pthread_join(th[k], NULL);
	printf("stop_machine -> %d: %ld updates (%ld retried), %ld lock-free "
	       "reads, %ld torn\n", r, i - 1, retries, atomic_load(&reads),
	       atomic_load(&torn));
	cpuhog_shutdown();
	return r != 0 || atomic_load(&torn) != 0;
}
