/* SPDX-License-Identifier: MIT */
/*
 * stop_machine: change a multi-word setting that other threads read with
 * no lock at all.  While the update runs, no reader runs anywhere, so no
 * reader can ever see half of it.
 */
#include <cpuhog.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

struct limits {
	volatile long lo, hi; /* invariant: hi == lo + 100 */
};
static struct limits lim = { 0, 100 };
static _Atomic int done;
static _Atomic long torn, reads;

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&done, memory_order_relaxed)) {
		long lo = lim.lo, hi = lim.hi;

		if (hi != lo + 100)
			atomic_fetch_add(&torn, 1);
		atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
	}
	return NULL;
}

static int update(void *arg)
{
	long base = *(long *)arg;

	lim.lo = base; /* two stores, no reader between them */
	lim.hi = base + 100;
	return 0;
}

int main(void)
{
	pthread_t th[4];
	long i;
	int r = 0, k;

	for (k = 0; k < 4; k++)
		pthread_create(&th[k], NULL, reader, NULL);
	for (i = 1; i <= 2000 && r == 0; i++)
		r = stop_machine(update, &i, 0, NULL);
	atomic_store(&done, 1);
	for (k = 0; k < 4; k++)
		pthread_join(th[k], NULL);
	printf("stop_machine -> %d: %ld updates, %ld lock-free reads, %ld torn\n",
	       r, i - 1, atomic_load(&reads), atomic_load(&torn));
	cpuhog_shutdown();
	return r != 0 || atomic_load(&torn) != 0;
}
