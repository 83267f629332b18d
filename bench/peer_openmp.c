/* SPDX-License-Identifier: MIT */
/*
 * Peer helper: an OpenMP parallel region with an empty barrier, one
 * thread per CPU taking part, each pinned as our hogs are.  Its own
 * process: the wait policy (OMP_WAIT_POLICY) is read once, at start.
 */
#include "peer.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

static int omp_child(double budget_ms)
{
	uint64_t end = peer_now_ns() + (uint64_t)(budget_ms * 1e6);
	int nthreads = (int)peer_place.ncpus;

	omp_set_num_threads(nthreads);
#pragma omp parallel
	{
		/* pin each OpenMP thread to one CPU, as our hogs are */
		peer_pin(peer_place.cpu[omp_get_thread_num()]);
	}
	do {
		uint64_t t0 = peer_now_ns();

#pragma omp parallel
		{
#pragma omp barrier
		}
		printf("%llu\n", (unsigned long long)(peer_now_ns() - t0));
		peer_gap();
	} while (peer_now_ns() < end);
	return 0;
}
int peer_run(const char *tag, double budget_ms)
{
	if (strcmp(tag, "omp")) {
		printf("skip unknown tag %s\n", tag);
		return 2;
	}
	return omp_child(budget_ms);
}
