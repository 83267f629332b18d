/* SPDX-License-Identifier: MIT */
/*
 * Kernel entries per call, beside the times: one perf counter on the
 * raw_syscalls:sys_enter tracepoint, opened on the bench's only thread
 * before the hogs exist, with inherit set, so that it counts every thread
 * the process makes later (hogs, pollers, a peer's threads per call) and
 * the counts of those that exit.  A batch's count over its calls is the
 * figure; the pause between samples spins, so it adds nothing.  Pollers
 * count too (tests/test_entries.c leaves them out, and asserts the
 * library's own figures).  Peers measured in helper processes are not
 * counted ("-").
 */
#include "bench.h"

#include <dirent.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int entries_fd = -1;
const char *bench_entries_why = "not opened";

static long tracepoint_id(void)
{
	static const char *const files[] = {
		"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
		"/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id",
	};
	long id = -1;
	size_t i;

	for (i = 0; i < 2 && id < 0; i++) {
		FILE *f = fopen(files[i], "re");

		if (f) {
			if (fscanf(f, "%ld", &id) != 1)
				id = -1;
			fclose(f);
		}
	}
	return id;
}

static int threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

void bench_entries_open(void)
{
	struct perf_event_attr a;
	long id = tracepoint_id();

	if (id < 0) {
		bench_entries_why = "no raw_syscalls:sys_enter tracepoint "
				    "(tracefs not mounted)";
		return;
	}
	if (threads_now() != 1) {
		bench_entries_why = "threads existed before the counter";
		return;
	}
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_TRACEPOINT;
	a.size = sizeof(a);
	a.config = (uint64_t)id;
	a.inherit = 1;
	a.exclude_hv = 1;
	entries_fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1,
				  PERF_FLAG_FD_CLOEXEC);
	if (entries_fd < 0)
		bench_entries_why = "perf events not allowed here "
				    "(perf_event_paranoid)";
	else
		bench_entries_why = NULL;
}

/* The process's kernel entries so far; 0 without the counter. */
uint64_t bench_entries(void)
{
	uint64_t v = 0;

	if (entries_fd < 0 || read(entries_fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}
