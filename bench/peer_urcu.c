/* SPDX-License-Identifier: MIT */
/*
 * Peer helper: liburcu's synchronize_rcu(), memb flavour (membarrier
 * based), with the calling thread registered as a reader.
 */
#include "peer.h"

#include <stdio.h>
#include <string.h>
#include <urcu/urcu-memb.h>

int peer_run(const char *tag, double budget_ms)
{
	uint64_t end;

	if (strcmp(tag, "urcu")) {
		printf("skip unknown tag %s\n", tag);
		return 2;
	}
	urcu_memb_register_thread();
	end = peer_now_ns() + (uint64_t)(budget_ms * 1e6);
	do {
		uint64_t t0 = peer_now_ns();

		urcu_memb_synchronize_rcu();
		printf("%llu\n", (unsigned long long)(peer_now_ns() - t0));
		peer_gap();
	} while (peer_now_ns() < end);
	urcu_memb_unregister_thread();
	return 0;
}
