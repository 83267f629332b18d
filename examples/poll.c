/* SPDX-License-Identifier: MIT */
/*
 * Poll mode and cpuhog_get_polling: the same hog_one_cpu() to another,
 * idle CPU, timed in sleep mode and in poll mode, and which CPUs poll.
 * Poll mode answers from a SCHED_IDLE poller already running there, so
 * it skips the remote wake-up; the CPU shows 100% busy meanwhile.
 */
#include <cpuhog.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median of 2000 calls from CPU 0 to CPU 1, 100 us apart. */
static double median_us(unsigned int flags, int *polling)
{
	static uint64_t t[2000];
	struct cpuhog_attr a;
	cpu_set_t set;
	int i;

	cpuhog_attr_init(&a);
	a.flags = flags;
	if (cpuhog_init(&a) != 0)
		return -1;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof(set), &set);
	/* a new poller looks at its idle CPU for 100 ms before it polls */
	for (i = 0; i < 500 && (flags & CPUHOG_F_POLL); i++) {
		if (cpuhog_get_polling(sizeof(set), &set) > 0)
			break;
		usleep(1000);
	}
	*polling = cpuhog_get_polling(sizeof(set), &set);
	for (i = 0; i < 2000; i++) {
		uint64_t t0 = now_ns();

		if (hog_one_cpu(1, nothing, NULL) != 0)
			return -1;
		t[i] = now_ns() - t0;
		usleep(100);
	}
	cpuhog_shutdown();
	qsort(t, 2000, sizeof(t[0]), cmp);
	return t[1000] / 1e3;
}

int main(void)
{
	int in_sleep, in_poll;
	double sleep_us = median_us(0, &in_sleep);
	double poll_us = median_us(CPUHOG_F_POLL, &in_poll);

	if (sleep_us < 0 || poll_us < 0) {
		printf("needs CPUs 0 and 1\n");
		return 0;
	}
	printf("hog_one_cpu to CPU 1: %.2f us sleeping, %.2f us polling "
	       "(%d CPUs polled)\n",
	       sleep_us, poll_us, in_poll);
	return in_sleep != 0; /* nothing polls in sleep mode */
}
