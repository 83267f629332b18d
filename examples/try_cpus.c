/* SPDX-License-Identifier: MIT */
/* try_hog_cpus: do the multi-CPU work now if nobody else is, else later. */
#include <cpuhog.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

int main(void)
{
	struct cpuhog_info info;
	int tries = 0, r;

	if (cpuhog_get_info(&info) < 0)
		return 1;
	/* -EAGAIN: another multi-CPU call is in progress; nothing queued */
	while ((r = try_hog_cpus(sizeof(info.cpus), &info.cpus, nothing,
				 NULL)) == -EAGAIN && tries++ < 100)
		usleep(100);
	printf("try_hog_cpus -> %d after %d retries\n", r, tries);
	cpuhog_shutdown();
	return r != 0;
}
