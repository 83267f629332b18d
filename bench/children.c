/* SPDX-License-Identifier: MIT */
/*
 * Peers that take over threads of their own run in a child process, one
 * per round: OpenMP (its wait policy is read once, at start) and DPDK
 * (its EAL owns the lcores).  The child prints "NS" per sample.
 */
#include "bench.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_OPENMP
#include <omp.h>

static int omp_child(double budget_ms)
{
	uint64_t end = tool_now_ns() + (uint64_t)(budget_ms * 1e6);
	int nthreads = (int)bench_place.ncpus;

	omp_set_num_threads(nthreads);
#pragma omp parallel
	{
		/* pin each OpenMP thread to one CPU, as our hogs are */
		bench_pin(bench_nth_cpu((unsigned int)omp_get_thread_num()));
	}
	do {
		uint64_t t0 = tool_now_ns();

#pragma omp parallel
		{
#pragma omp barrier
		}
		printf("%llu\n", (unsigned long long)(tool_now_ns() - t0));
		bench_gap();
	} while (tool_now_ns() < end);
	return 0;
}
#else
static int omp_child(double budget_ms)
{
	(void)budget_ms;
	printf("skip OpenMP (libgomp) not available at build\n");
	return 0;
}
#endif

#ifdef HAVE_DPDK
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>

static int lcore_nothing(void *arg)
{
	(void)arg;
	return 0;
}

static int dpdk_child(bool mp, double budget_ms)
{
	char lcores[32], prefix[48];
	char *argv[] = { "cpuhog-bench", "-l", lcores, "--no-huge", "--no-pci",
			 "-m", "64", "--no-shconf", "--file-prefix", prefix,
			 "--no-telemetry", "--log-level", "1", NULL };
	unsigned int worker;
	uint64_t end;

	snprintf(lcores, sizeof(lcores), "%u,%u", bench_place.here,
		 bench_place.there);
	snprintf(prefix, sizeof(prefix), "cpuhog-bench-%d", (int)getpid());
	fflush(stdout);
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		printf("skip rte_eal_init failed\n");
		return 0;
	}
	worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
	end = tool_now_ns() + (uint64_t)(budget_ms * 1e6);
	do {
		uint64_t t0 = tool_now_ns();

		if (mp) {
			rte_eal_mp_remote_launch(lcore_nothing, NULL, SKIP_MAIN);
			rte_eal_mp_wait_lcore();
		} else {
			rte_eal_remote_launch(lcore_nothing, NULL, worker);
			rte_eal_wait_lcore(worker);
		}
		printf("%llu\n", (unsigned long long)(tool_now_ns() - t0));
		bench_gap();
	} while (tool_now_ns() < end);
	rte_eal_cleanup();
	return 0;
}
#else
static int dpdk_child(bool mp, double budget_ms)
{
	(void)mp;
	(void)budget_ms;
	printf("skip libdpdk-dev not installed at build\n");
	return 0;
}
#endif

int bench_child(const char *tag, double budget_ms)
{
	bench_pin(bench_place.here);
	if (!strcmp(tag, "rss"))
		return bench_rss_child();
	if (!strcmp(tag, "omp"))
		return omp_child(budget_ms);
	if (!strcmp(tag, "dpdk-remote"))
		return dpdk_child(false, budget_ms);
	if (!strcmp(tag, "dpdk-mp"))
		return dpdk_child(true, budget_ms);
	printf("skip unknown child %s\n", tag);
	return 2;
}
