/* SPDX-License-Identifier: MIT */
/*
 * Measurements in other processes: the peer helpers (bench/peer.h: one
 * small program per peer library, so that the tool needs none of them),
 * and our own resident-memory child.
 */
#include "bench.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * Where the peer helpers are: ../libexec/cpuhog beside the running
 * binary, installed or in the build tree.  Returns the path in @buf.
 */
const char *bench_helper(const char *name, char *buf, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	exe[n > 0 ? n : 0] = 0;
	slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(buf, size, "%s/%s/cpuhog-bench-%s", exe, CPUHOG_HELPER_DIR,
		 name);
	return buf;
}

/* Why the helper @name cannot run (a static string), or NULL. */
const char *bench_helper_missing(const char *name)
{
	static char why[8][PATH_MAX + 64];
	static int next;
	char path[PATH_MAX];
	char *w;

	bench_helper(name, path, sizeof(path));
	if (access(path, X_OK) == 0)
		return NULL;
	w = why[next++ % 8];
	snprintf(w, sizeof(why[0]), "helper not installed (its library was "
				    "not found at build): %s", path);
	return w;
}

int bench_child(const char *tag, double budget_ms)
{
	(void)budget_ms;
	bench_pin(bench_place.here);
	if (!strcmp(tag, "rss"))
		return bench_rss_child();
	printf("skip unknown child %s\n", tag);
	return 2;
}
