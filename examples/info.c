/* SPDX-License-Identifier: MIT */
/* cpuhog_init with options, then cpuhog_get_info: what did we get? */
#include <cpuhog.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	struct cpuhog_attr attr;
	struct cpuhog_info info;
	int r;

	cpuhog_attr_init(&attr);
	attr.overrun_ns = 20 * 1000 * 1000; /* report callbacks over 20 ms */
	r = cpuhog_init(&attr);
	if (r < 0) {
		fprintf(stderr, "cpuhog_init: %s\n", strerror(-r));
		return 1;
	}
	cpuhog_get_info(&info);
	printf("%u hogs, policy %s, priority %d, nice %d%s%s\n", info.nr_hogs,
	       info.policy == SCHED_FIFO ? "SCHED_FIFO" : "SCHED_OTHER",
	       info.priority, info.nice, info.rt_errno ? "; RT refused: " : "",
	       info.rt_errno ? strerror(info.rt_errno) : "");
	cpuhog_shutdown();
	return 0;
}
