/* SPDX-License-Identifier: MIT */
/*
 * hog_one_cpu as an rseq fence: threads push items onto their own CPU's
 * cache in an rseq critical section (percpu_cache.h), with no atomic
 * instruction and no lock; a control thread drains each CPU's cache by
 * running the drain on that CPU with hog_one_cpu().  Every item pushed is
 * drained exactly once, which the program checks.
 */
#include "percpu_cache.h"

#include <cpuhog.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define PUSHES 200000

static struct percpu_slot slots[CPU_SETSIZE];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static long pool_n, pool_sum; /* what the drains and full caches gave */

struct drained {
	int cpu;
	long n, sum;
};

/* On the slot's CPU, as its hog: no push there can be mid-way. */
static int drain(void *arg)
{
	struct drained *d = arg;
	struct percpu_slot *s = &slots[d->cpu];

	for (long i = 0; i < s->n; i++) {
		d->n++;
		d->sum += s->item[i];
	}
	s->n = 0;
	return 0;
}

static void *pusher(void *arg)
{
	long base = (long)(intptr_t)arg * PUSHES;

	for (long i = 1; i <= PUSHES; i++) {
		int r;

		while ((r = percpu_push(slots, base + i, 0)) == PUSH_ABORTED)
			;	      /* preempted or moved mid-push: again */
		if (r == PUSH_FULL) { /* the slow path: a lock */
			pthread_mutex_lock(&pool_lock);
			pool_n++;
			pool_sum += base + i;
			pthread_mutex_unlock(&pool_lock);
		}
	}
	return NULL;
}

/* Drain every CPU's cache once, from this (control) thread. */
static int drain_all(const cpu_set_t *cpus)
{
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		struct drained d = {cpu, 0, 0};
		int r;

		if (!CPU_ISSET(cpu, cpus))
			continue;
		r = hog_one_cpu((unsigned int)cpu, drain, &d);
		if (r < 0 && r != -ENOENT) /* -ENOENT: it went offline */
			return r;
		pthread_mutex_lock(&pool_lock);
		pool_n += d.n;
		pool_sum += d.sum;
		pthread_mutex_unlock(&pool_lock);
	}
	return 0;
}

int main(void)
{
	pthread_t t[THREADS];
	struct cpuhog_info info;
	long want_n = (long)THREADS * PUSHES, want_sum;
	int drains = 0;

	if (!percpu_supported()) {
		printf("skipped: needs x86-64 and rseq registered by glibc\n");
		return 0;
	}
	if (cpuhog_get_info(&info) < 0)
		return 1;
	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, pusher, (void *)(intptr_t)i);
	/* the control thread drains while they push */
	for (; drains < 200; drains++)
		if (drain_all(&info.cpus) < 0)
			return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	if (drain_all(&info.cpus) < 0) /* what is left */
		return 1;
	cpuhog_shutdown();
	want_sum = want_n * (want_n + 1) / 2;
	printf("%ld items pushed, %ld drained (%d rounds while pushing); "
	       "sums %ld and %ld\n",
	       want_n, pool_n, drains, want_sum, pool_sum);
	return pool_n == want_n && pool_sum == want_sum ? 0 : 1;
}
