/* SPDX-License-Identifier: MIT */
/* The helpers' shared entry: the protocol of peer.h. */
#include "peer.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct peer_place peer_place;
static uint64_t gap_ns;

uint64_t peer_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void peer_gap(void)
{
	uint64_t end = peer_now_ns() + gap_ns;

	while (peer_now_ns() < end)
		;
}

void peer_pin(unsigned int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	if (cpu < CPU_SETSIZE)
		CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

int main(int argc, char **argv)
{
	int i;

	if (argc < 7 || argc - 6 > PEER_MAX_CPUS) {
		fprintf(stderr, "usage: %s TAG BUDGET_MS GAP_US HERE THERE CPU...\n"
				"(run by cpuhog bench)\n",
			argv[0]);
		return 2;
	}
	gap_ns = strtoull(argv[3], NULL, 10) * 1000;
	peer_place.here = (unsigned int)atoi(argv[4]);
	peer_place.there = (unsigned int)atoi(argv[5]);
	for (i = 6; i < argc; i++)
		peer_place.cpu[peer_place.ncpus++] = (unsigned int)atoi(argv[i]);
	peer_pin(peer_place.here);
	return peer_run(argv[1], atof(argv[2]));
}
