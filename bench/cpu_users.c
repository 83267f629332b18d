/* SPDX-License-Identifier: MIT */
/*
 * What keeps a CPU busy, for a skip that a user can act on ("the pollers
 * did not start polling ... CPU 1: stress-ng (pid 4242) 97%").  Two reads
 * of every thread's /proc/PID/task/TID/stat, LOOK_MS apart: the CPU time
 * it used in between (utime + stime), on the CPU it last ran on (field
 * 39).  A thread that moved during the look counts where it was seen
 * last.  Read only when a row is skipped, never while one is measured.
 */
#include "bench.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOK_MS 200
#define TOP 3 /* tasks named per CPU */

struct task {
	int pid, tid, cpu;
	unsigned long long ticks;
	char comm[20];
};

struct tasks {
	struct task *t;
	size_t n, cap;
};

/* One stat file into @t; false if it is gone or does not parse. */
static bool read_task(int pid, int tid, struct task *t)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t len;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (!(f = fopen(path, "re")))
		return false;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!p || !strchr(buf, '('))
		return false;
	*p = '\0';
	snprintf(t->comm, sizeof(t->comm), "%s", strchr(buf, '(') + 1);
	/* after ") ": field 3 (state) on; utime 14, stime 15, processor 39 */
	for (field = 3, p += 2; field < 39 && p; field++) {
		if (field == 14 && sscanf(p, "%llu %llu", &ut, &st) != 2)
			return false;
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	if (!p || sscanf(p, "%d", &t->cpu) != 1)
		return false;
	t->pid = pid;
	t->tid = tid;
	t->ticks = ut + st;
	return true;
}

static void add_task(struct tasks *ts, const struct task *t)
{
	if (ts->n == ts->cap) {
		size_t cap = ts->cap ? ts->cap * 2 : 256;
		struct task *n = realloc(ts->t, cap * sizeof(*n));

		if (!n)
			return; /* a shorter list: only a message is at stake */
		ts->t = n;
		ts->cap = cap;
	}
	ts->t[ts->n++] = *t;
}

/* Every thread of every process, in the order /proc lists them. */
static void snapshot(struct tasks *ts)
{
	DIR *d = opendir("/proc"), *td;
	struct dirent *e, *te;
	char path[64];
	struct task t;

	ts->n = 0;
	while (d && (e = readdir(d))) {
		int pid = atoi(e->d_name);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task", pid);
		if (!(td = opendir(path)))
			continue;
		while ((te = readdir(td)))
			if (atoi(te->d_name) > 0 &&
			    read_task(pid, atoi(te->d_name), &t))
				add_task(ts, &t);
		closedir(td);
	}
	if (d)
		closedir(d);
}

static int by_tid(const void *a, const void *b)
{
	return ((const struct task *)a)->tid - ((const struct task *)b)->tid;
}

/* The ticks @t used since @before (sorted by tid) saw it. */
static unsigned long long used(const struct tasks *before, const struct task *t)
{
	const struct task *o =
		before->n ? bsearch(t, before->t, before->n, sizeof(*t), by_tid)
			  : NULL;

	return o && t->ticks >= o->ticks ? t->ticks - o->ticks : 0;
}

/* "CPU 1: name (pid N) 97%, ..." for @cpu's busiest threads, appended. */
static void describe_cpu(const struct tasks *before, struct tasks *after,
			 int cpu, char *buf, size_t size)
{
	double tick_pct = 100.0 / ((double)sysconf(_SC_CLK_TCK) * LOOK_MS / 1000);
	size_t i, len = strlen(buf);
	int k;

	snprintf(buf + len, size - len, "%sCPU %d:", len ? "; " : "", cpu);
	for (k = 0; k < TOP; k++) {
		unsigned long long best = 0;
		size_t at = 0;

		for (i = 0; i < after->n; i++)
			if (after->t[i].cpu == cpu && used(before, &after->t[i]) > best) {
				best = used(before, &after->t[i]);
				at = i;
			}
		if (!best)
			break;
		len = strlen(buf);
		snprintf(buf + len, size - len, "%s %s (pid %d) %.0f%%",
			 k ? "," : "", after->t[at].comm, after->t[at].pid,
			 (double)best * tick_pct);
		after->t[at].cpu = -1; /* taken */
	}
	if (!k) {
		len = strlen(buf);
		snprintf(buf + len, size - len, " no thread used it for a tick");
	}
}

void bench_cpu_users(size_t setsize, const cpu_set_t *cpus, char *buf,
		     size_t size)
{
	struct tasks before = { 0 }, after = { 0 };
	int cpu;

	buf[0] = '\0';
	snapshot(&before);
	if (before.n)
		qsort(before.t, before.n, sizeof(*before.t), by_tid);
	usleep(LOOK_MS * 1000);
	snapshot(&after);
	for (cpu = 0; cpu < (int)(setsize * 8); cpu++)
		if (CPU_ISSET_S(cpu, setsize, cpus))
			describe_cpu(&before, &after, cpu, buf, size);
	free(before.t);
	free(after.t);
}
