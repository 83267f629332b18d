/* SPDX-License-Identifier: MIT */
/*
 * Peer helper: DPDK's rte_eal_remote_launch() and
 * rte_eal_mp_remote_launch() of an empty function, with the EAL on the
 * caller's and the remote CPU (no hugepages, no PCI).  Its own process:
 * the EAL owns the lcores.
 */
#include "peer.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

	snprintf(lcores, sizeof(lcores), "%u,%u", peer_place.here,
		 peer_place.there);
	snprintf(prefix, sizeof(prefix), "cpuhog-bench-%d", (int)getpid());
	fflush(stdout);
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0) {
		printf("skip rte_eal_init failed\n");
		return 0;
	}
	worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
	end = peer_now_ns() + (uint64_t)(budget_ms * 1e6);
	do {
		uint64_t t0 = peer_now_ns();

		if (mp) {
			rte_eal_mp_remote_launch(lcore_nothing, NULL, SKIP_MAIN);
			rte_eal_mp_wait_lcore();
		} else {
			rte_eal_remote_launch(lcore_nothing, NULL, worker);
			rte_eal_wait_lcore(worker);
		}
		printf("%llu\n", (unsigned long long)(peer_now_ns() - t0));
		peer_gap();
	} while (peer_now_ns() < end);
	rte_eal_cleanup();
	return 0;
}
int peer_run(const char *tag, double budget_ms)
{
	if (!strcmp(tag, "dpdk-remote"))
		return dpdk_child(false, budget_ms);
	if (!strcmp(tag, "dpdk-mp"))
		return dpdk_child(true, budget_ms);
	printf("skip unknown tag %s\n", tag);
	return 2;
}
