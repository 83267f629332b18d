/* SPDX-License-Identifier: MIT */
/*
 * hog_one_cpu as an rseq fence: threads push items onto their own CPU's
 * cache in an rseq critical section (percpu_cache.h), with no atomic
 * instruction and no lock; a control thread drains each CPU's cache by
 * running the drain on that CPU with hog_one_cpu().  Every item pushed is
 * drained exactly once, which the program checks.
 *
 *   percpu_cache [MS]   drain for MS milliseconds (default 1000)
 */
#include "percpu_cache.h"

#include <cpuhog.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define THREADS 4
/* Work inside each push (loop iterations before the commit): drains
 * land inside pushes and restart them, where a broken section would
 * lose items or drain them twice. */
#define SPIN 20000

static struct percpu_slot slots[CPU_SETSIZE];
static unsigned long drained_n, drained_sum; /* unsigned: sums wrap */
static atomic_int stop;

struct pusher {
	pthread_t t;
	long id;
	unsigned long n, sum;	    /* what it pushed */
	unsigned long kept, kept_sum; /* what found its cache full */
	long restarts;		    /* pushes the kernel restarted */
};

struct drained {
	int cpu;
	unsigned long n, sum;
};

/* On the slot's CPU, as its hog: no push there can be mid-way. */
static int drain(void *arg)
{
	struct drained *d = arg;
	struct percpu_slot *s = &slots[d->cpu];

	for (long i = 0; i < s->n; i++) {
		d->n++;
		d->sum += (unsigned long)s->item[i];
	}
	s->n = 0;
	return 0;
}

static void *push(void *arg)
{
	struct pusher *p = arg;

	for (long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed);
	     i++) {
		long item = i * THREADS + p->id + 1; /* each one different */
		int r;

		while ((r = percpu_push(slots, item, SPIN)) == PUSH_ABORTED)
			p->restarts++; /* preempted or moved mid-push */
		if (r == PUSH_FULL) { /* the slow path: kept elsewhere */
			p->kept++;
			p->kept_sum += (unsigned long)item;
		}
		p->n++;
		p->sum += (unsigned long)item;
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
		drained_n += d.n;
		drained_sum += d.sum;
	}
	return 0;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	struct pusher p[THREADS];
	struct cpuhog_info info;
	unsigned long want_n = 0, want_sum = 0;
	long ms = 1000, restarts = 0, end;
	int drains = 0;

	if (!percpu_supported()) {
		printf("skipped: %s\n", percpu_unsupported());
		return 0;
	}
	if (argc > 1 && (ms = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: percpu_cache [MS]\n");
		return 2;
	}
	if (cpuhog_get_info(&info) < 0)
		return 1;
	for (int i = 0; i < THREADS; i++) {
		p[i] = (struct pusher){.id = i};
		pthread_create(&p[i].t, NULL, push, &p[i]);
	}
	/* the control thread drains while they push */
	for (end = now_ms() + ms; now_ms() < end; drains++)
		if (drain_all(&info.cpus) < 0)
			return 1;
	atomic_store(&stop, 1);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(p[i].t, NULL);
		want_n += p[i].n - p[i].kept;
		want_sum += p[i].sum - p[i].kept_sum;
		restarts += p[i].restarts;
	}
	if (drain_all(&info.cpus) < 0) /* what is left */
		return 1;
	cpuhog_shutdown();
	printf("%lu items pushed to the caches, %lu drained (%d rounds "
	       "while pushing, %ld pushes restarted); sums %lu and %lu\n",
	       want_n, drained_n, drains, restarts, want_sum, drained_sum);
	return drained_n == want_n && drained_sum == want_sum ? 0 : 1;
}
