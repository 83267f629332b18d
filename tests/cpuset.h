/* SPDX-License-Identifier: MIT */
/*
 * A cpuset of the test's own: a cgroup made for one test, v1 or v2,
 * whichever the machine has, and removed on the way out.
 *
 * v1: a directory under the cpuset hierarchy, its mems copied from the
 * root, each thread moved through "tasks".  v2: a directory under the
 * unified hierarchy with the cpuset controller enabled below the root,
 * the whole process moved through "cgroup.procs".  A directory left by a
 * test that was killed is empty once its processes are gone; the next
 * t_cpuset_make() removes such leftovers (their pid no longer exists).
 */
#ifndef CPUHOG_TEST_CPUSET_H
#define CPUHOG_TEST_CPUSET_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct t_cpuset {
	char root[128];
	char dir[256];
	bool v2;
};

static inline bool t_cg_write(const char *dir, const char *file,
			      const char *val)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val);
}

static inline bool t_cg_read(const char *dir, const char *file, char *buf,
			     size_t size)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0;
}

/* Remove "cpuhog-cs-PID" directories whose process is gone. */
static inline void t_cpuset_sweep(const char *root)
{
	DIR *d = opendir(root);
	struct dirent *e;
	char path[512];
	int pid;

	while (d && (e = readdir(d))) {
		if (sscanf(e->d_name, "cpuhog-cs-%d", &pid) != 1 ||
		    kill(pid, 0) == 0 || errno != ESRCH)
			continue; /* not ours, or its test still runs */
		snprintf(path, sizeof(path), "%s/%s", root, e->d_name);
		rmdir(path);
	}
	if (d)
		closedir(d);
}

/* Make a cpuset holding @cpus.  false: the machine has none we may use
 * (not root, no cpuset controller); skip. */
static inline bool t_cpuset_make(struct t_cpuset *cs, const char *cpus)
{
	char buf[256];
	struct stat st;

	memset(cs, 0, sizeof(*cs));
	if (getuid() != 0)
		return false;
	if (stat("/sys/fs/cgroup/cpuset/cpuset.cpus", &st) == 0) {
		snprintf(cs->root, sizeof(cs->root), "/sys/fs/cgroup/cpuset");
	} else if (t_cg_read("/sys/fs/cgroup", "cgroup.controllers", buf,
			     sizeof(buf)) &&
		   strstr(buf, "cpuset")) {
		snprintf(cs->root, sizeof(cs->root), "/sys/fs/cgroup");
		cs->v2 = true;
		t_cg_write(cs->root, "cgroup.subtree_control", "+cpuset");
	} else {
		return false;
	}
	t_cpuset_sweep(cs->root);
	snprintf(cs->dir, sizeof(cs->dir), "%s/cpuhog-cs-%d", cs->root,
		 (int)getpid());
	if (mkdir(cs->dir, 0755) != 0 && errno != EEXIST)
		return false;
	if (!cs->v2 && (!t_cg_read(cs->root, "cpuset.mems", buf, sizeof(buf)) ||
			!t_cg_write(cs->dir, "cpuset.mems", buf))) {
		rmdir(cs->dir);
		return false;
	}
	if (!t_cg_write(cs->dir, "cpuset.cpus", cpus)) {
		rmdir(cs->dir);
		return false;
	}
	return true;
}

static inline bool t_cpuset_cpus(const struct t_cpuset *cs, const char *cpus)
{
	return t_cg_write(cs->dir, "cpuset.cpus", cpus);
}

/* Move every thread of this process into the cpuset (threads made later
 * start there too). */
static inline bool t_cpuset_join(const struct t_cpuset *cs)
{
	DIR *d;
	struct dirent *e;
	char pid[32];
	bool ok;

	if (cs->v2) {
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		return t_cg_write(cs->dir, "cgroup.procs", pid);
	}
	d = opendir("/proc/self/task");
	ok = d != NULL;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			ok = t_cg_write(cs->dir, "tasks", e->d_name) && ok;
	if (d)
		closedir(d);
	return ok;
}

/* Once every process in it is gone. */
static inline void t_cpuset_remove(const struct t_cpuset *cs)
{
	if (cs->dir[0])
		rmdir(cs->dir);
}

#endif
