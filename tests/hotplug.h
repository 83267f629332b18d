/* SPDX-License-Identifier: MIT */
/*
 * Real CPU hotplug for the tests.  A CPU taken offline comes back on every
 * path out: atexit for a failed assertion, and a watchdog child that waits
 * for the test's end (a pipe that closes when the test dies, even by
 * SIGKILL from CTest's timeout) and then onlines it.
 */
#ifndef CPUHOG_TEST_HOTPLUG_H
#define CPUHOG_TEST_HOTPLUG_H

#include "harness.h"

#include <dirent.h>
#include <fcntl.h>

static inline int t_online_fd(unsigned int cpu)
{
	char path[64];

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/online",
		 cpu);
	return open(path, O_WRONLY | O_CLOEXEC);
}

/* Write 0 or 1 to @cpu's online file, retrying while the kernel is busy
 * (EBUSY), up to @tries times 10 ms. */
static inline bool t_set_online_tries(unsigned int cpu, int on, int tries)
{
	int fd = t_online_fd(cpu), k;
	bool ok = false;

	for (k = 0; fd >= 0 && !ok && k < tries; k++) {
		ok = write(fd, on ? "1" : "0", 1) == 1 || errno == EINVAL;
		if (!ok)
			t_sleep_ms(10); /* EBUSY: the kernel is busy, retry */
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

static inline bool t_set_online(unsigned int cpu, int on)
{
	return t_set_online_tries(cpu, on, 50);
}

static unsigned int t_victim;
static inline void t_restore_victim(void)
{
	t_set_online(t_victim, 1);
}

/* Whether @cpu can be taken offline here (root, not CPU 0, a sysfs file;
 * the watchdog forks, which TSan's threaded parent must not). */
static inline bool t_can_hotplug(unsigned int cpu)
{
	int fd = t_online_fd(cpu);

	if (fd >= 0)
		close(fd);
	return getuid() == 0 && cpu != 0 && fd >= 0 && !T_TSAN;
}

/* Guard @cpu: whatever happens to this process, it comes back online. */
static inline void t_guard_victim(unsigned int cpu)
{
	int fd[2];
	char c;

	t_victim = cpu;
	atexit(t_restore_victim);
	assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
	if (fork() == 0) {
		close(fd[1]);
		while (read(fd[0], &c, 1) < 0 && errno == EINTR)
			;
		/* a hotplug still in progress holds the lock: keep trying
		 * for two minutes */
		t_set_online_tries(cpu, 1, 12000);
		_exit(0);
	}
	close(fd[0]); /* fd[1] stays open until we are gone */
}

#endif
