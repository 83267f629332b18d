/* SPDX-License-Identifier: MIT */
/*
 * hang-probe TID...: where each thread is in user space, for the guest
 * runner's report of a hung test (scripts/smp-guest.sh).  Interrupts the
 * thread with ptrace, prints its instruction pointer and every word of
 * its stack's top 4 KiB that points into an executable mapping (return
 * addresses, mostly), each as FILE+OFFSET for addr2line; then lets go.
 * x86-64 only, like the guest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>

struct map {
	unsigned long lo, hi, off;
	char path[256];
};

static int load_maps(int tid, struct map *m, int max)
{
	char path[64], line[512], perm[8];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		m[n].path[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %255s", &m[n].lo,
			   &m[n].hi, perm, &m[n].off, m[n].path) >= 4 &&
		    perm[2] == 'x' && m[n].path[0] == '/')
			n++;
	}
	fclose(f);
	return n;
}

static const struct map *find(const struct map *m, int n, unsigned long a)
{
	for (int i = 0; i < n; i++)
		if (a >= m[i].lo && a < m[i].hi)
			return &m[i];
	return NULL;
}

static void where(int tid)
{
	static struct map m[512];
	struct user_regs_struct r;
	int n = load_maps(tid, m, 512), st, shown = 0;
	const struct map *x;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0 ||
	    ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 ||
	    waitpid(tid, &st, __WALL) < 0 ||
	    ptrace(PTRACE_GETREGS, tid, 0, &r) < 0) {
		printf("tid %d: cannot trace: %s\n", tid, strerror(errno));
		return;
	}
	x = find(m, n, r.rip);
	printf("tid %d: ip %s+0x%lx\n", tid, x ? x->path : "?",
	       (unsigned long)(x ? r.rip - x->lo + x->off : r.rip));
	for (unsigned long sp = r.rsp; sp < r.rsp + 4096 && shown < 12; sp += 8) {
		long w;

		errno = 0;
		w = ptrace(PTRACE_PEEKDATA, tid, sp, 0);
		if (errno)
			break;
		x = find(m, n, (unsigned long)w);
		if (x) {
			printf("tid %d:   %s+0x%lx\n", tid, x->path,
			       (unsigned long)w - x->lo + x->off);
			shown++;
		}
	}
	ptrace(PTRACE_DETACH, tid, 0, 0);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		where(atoi(argv[i]));
	return 0;
}
