/* SPDX-License-Identifier: MIT */
/*
 * stop_machine_report()'s report: the hogs' times, taken by stop_cpu()
 * only while the stop's timing is on (cpuhog_i_stop_report_arm()), turned into
 * the caller's struct cpuhog_report.  hog_cpus_report()'s and
 * hog_synchronize_report()'s the same way, from the times the hogs take
 * around a timed work (W_F_TIMED, hog.c).  And, when a call failed, who ran
 * on the CPUs whose hog never came, from /proc: every task's
 * /proc/PID/task/TID/stat, field 3 (state R), 39 (the CPU it last ran
 * on), 40 and 41 (rt_priority, policy).  Only that last part allocates
 * (opendir()), and only after the CPUs are let go.
 */
#include "internal.h"
#include "outcome.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RELAXED(p) atomic_load_explicit(p, memory_order_relaxed)
#define SET(p, x) atomic_store_explicit(p, x, memory_order_relaxed)

/* The first version's size: what a caller must have at least. */
#define REPORT_V1 (offsetof(struct cpuhog_report, reserved_))

/* @o for a call that reports into @rep (NULL: none); -EINVAL for a
 * report the caller did not make with cpuhog_report_init(). */
int cpuhog_i_stop_report_begin(struct stop_outcome *o,
			       struct cpuhog_report *rep)
{
	struct cpuhog_report_cpu *cpu;
	unsigned int len;

	memset(o, 0, sizeof(*o));
	if (!rep)
		return 0;
	o->rep = rep;
	o->t0 = cpuhog_i_now_ns();
	if (rep->size < REPORT_V1 || (rep->cpu_len && !rep->cpu))
		return -EINVAL;
	cpu = rep->cpu;
	len = rep->cpu_len;
	memset((char *)rep + offsetof(struct cpuhog_report, nr_cpu), 0,
	       REPORT_V1 - offsetof(struct cpuhog_report, nr_cpu));
	rep->cpu = cpu;
	rep->cpu_len = len;
	return 0;
}

/* The hogs of @s start their times anew: a stop's, or a timed work's
 * (W_F_TIMED). */
void cpuhog_i_call_report_arm(const struct sel *s)
{
	unsigned int i;

	for (i = 0; i < s->n; i++) {
		SET(&s->hog[i]->t.arrived, 0);
		SET(&s->hog[i]->t.held, 0);
		SET(&s->hog[i]->t.released, 0);
	}
}

/* The hogs of @s take their times from now (@on), or (none) stop. */
void cpuhog_i_stop_report_arm(struct ctx *c, const struct sel *s, bool on)
{
	if (s)
		cpuhog_i_call_report_arm(s);
	/* published to the hogs by cpuhog_i_multi_push()'s seq_cst pushes */
	SET(&c->stop->timing, on);
}

static uint64_t since(const struct stop_outcome *o, uint64_t t)
{
	return t > o->t0 ? t - o->t0 : (t ? 1 : 0);
}

/* CPU @cpu into the report, with flags @f and its hog's times (0:
 * never): the sets, and the @k-th entry where the caller's array has
 * room for it. */
static void put_cpu(struct stop_outcome *o, unsigned int k, unsigned int cpu,
		    unsigned int f, uint64_t arrived, uint64_t held,
		    uint64_t released)
{
	struct cpuhog_report *rep = o->rep;
	struct cpuhog_report_cpu *rc;

	rep->nr_missing += !!(f & CPUHOG_RC_MISSING);
	if (cpu < CPU_SETSIZE) {
		if (f & CPUHOG_RC_HELD)
			CPU_SET(cpu, &rep->held);
		if (f & CPUHOG_RC_MISSING)
			CPU_SET(cpu, &rep->missing);
	}
	if (k >= rep->cpu_len)
		return;
	rc = &rep->cpu[k];
	memset(rc, 0, sizeof(*rc));
	rc->cpu = cpu;
	rc->flags = f;
	rc->arrived_ns = since(o, arrived);
	rc->held_ns = since(o, held);
	rc->released_ns = since(o, released);
}

/* Whether @h's multi-CPU slot is still queued (acquire: the work's
 * times and ran, before its DONE). */
static bool slot_queued(struct hog *h)
{
	return (atomic_load_explicit(&h->slot.state, memory_order_acquire) &
		W_STATE) == W_QUEUED;
}

/* A try's times, from the hogs of @s (the last try's stand). */
void cpuhog_i_stop_report_try(const struct sel *s, struct stop_outcome *o)
{
	struct cpuhog_report *rep = o->rep;
	uint64_t first_held = 0, first_out = 0;
	bool all_held = true;
	unsigned int i;

	rep->nr_cpu = s->n;
	rep->nr_missing = 0;
	CPU_ZERO(&rep->held);
	CPU_ZERO(&rep->missing);
	for (i = 0; i < s->n; i++) {
		struct hog *h = s->hog[i];
		uint64_t a = RELAXED(&h->t.arrived), hd = RELAXED(&h->t.held),
			 out = RELAXED(&h->t.released);
		unsigned int f = a ? CPUHOG_RC_ARRIVED : CPUHOG_RC_MISSING;

		if (!o->pushed) { /* the reserve timed out: no times */
			f = slot_queued(h) ? CPUHOG_RC_MISSING : 0;
			put_cpu(o, i, h->cpu, f, 0, 0, 0);
			all_held = false;
			continue;
		}

		if (hd) {
			f |= CPUHOG_RC_HELD;
			if (!first_held || hd < first_held)
				first_held = hd;
		} else {
			all_held = false;
		}
		if (out && (!first_out || out < first_out))
			first_out = out;
		if (hd && o->ended == STOP_RAN &&
		    RELAXED(&h->st.ran_gen) == RELAXED(&h->st.held_gen))
			f |= CPUHOG_RC_RAN;
		put_cpu(o, i, h->cpu, f, a, hd, out);
	}
	rep->all_held_ns = all_held ? since(o, first_held) : 0;
	rep->hold_ns = all_held && first_out > first_held
			       ? first_out - first_held
			       : 0;
}

/*
 * The calls that hold nothing (hog_cpus_report(),
 * hog_synchronize_report()): one CPU more, its work started at @start
 * and done at @end (0: never).  Every CPU had is the last start; fn_runs
 * and ran count CPUHOG_RC_RAN.
 */
void cpuhog_i_call_report_cpu(struct stop_outcome *o, unsigned int cpu,
			      unsigned int flags, uint64_t start, uint64_t end)
{
	struct cpuhog_report *rep = o->rep;

	if (flags & CPUHOG_RC_RAN) {
		o->fn_runs++;
		if (cpu < CPU_SETSIZE)
			CPU_SET(cpu, &o->ran);
	}
	if (!(flags & CPUHOG_RC_ARRIVED))
		o->absent++;
	else if (since(o, start) > rep->all_held_ns)
		rep->all_held_ns = since(o, start);
	put_cpu(o, rep->nr_cpu++, cpu, flags, start, 0, end);
}

/*
 * The hogs of @s, after such a call's wait (@pushed: its works
 * were queued): a hog whose work is still queued never came; one that
 * ran it came, and ran fn if the call succeeded (@o->ended); one that
 * refused it (off its CPU) is reported with no flags.
 */
void cpuhog_i_call_report_hogs(const struct sel *s, bool pushed,
			       struct stop_outcome *o)
{
	unsigned int i, f;

	for (i = 0; i < s->n; i++) {
		struct hog *h = s->hog[i];

		if (slot_queued(h))
			f = CPUHOG_RC_MISSING;
		else if (!pushed || !h->slot.ran)
			f = 0;
		else
			f = CPUHOG_RC_ARRIVED |
			    (o->ended == STOP_RAN ? CPUHOG_RC_RAN : 0);
		cpuhog_i_call_report_cpu(
			o, h->cpu, f,
			f & CPUHOG_RC_ARRIVED ? RELAXED(&h->t.arrived) : 0,
			f & CPUHOG_RC_ARRIVED ? RELAXED(&h->t.released) : 0);
	}
}

/* Whether @tid is ours to leave out: a hog (it waits on its CPU too),
 * or the caller, which runs while it reads /proc, perhaps on a missing
 * CPU its holder has since left. */
static bool is_ours(struct ctx *c, pid_t tid)
{
	unsigned int i;

	if (tid == gettid())
		return true;
	for (i = 0; c && i < c->nr_hogs; i++)
		if (c->hogs[i].tid == tid)
			return true;
	return false;
}

/* One task's stat: runnable and last on @cpu; 0 or -1. */
static int read_task(int dfd, const char *path, unsigned int *cpu, int *prio,
		     int *policy, char comm[16])
{
	char buf[1024], *p, *q, *tok[40];
	int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC), k = 0;
	ssize_t len;

	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	p = strchr(buf, '(');
	q = strrchr(buf, ')');
	if (!p || !q || q < p)
		return -1;
	len = q - p - 1 < 15 ? q - p - 1 : 15;
	memcpy(comm, p + 1, (size_t)len);
	comm[len] = 0;
	for (p = strtok_r(q + 1, " \n", &q); p && k < 40;
	     p = strtok_r(NULL, " \n", &q))
		tok[k++] = p;
	/* tok[0] is field 3 (state), tok[36] field 39 (processor) */
	if (k < 39 || tok[0][0] != 'R')
		return -1;
	*cpu = (unsigned int)strtoul(tok[36], NULL, 10);
	*prio = (int)strtol(tok[37], NULL, 10);
	*policy = (int)strtol(tok[38], NULL, 10);
	return 0;
}

/* A task's time on CPU so far (/proc/.../schedstat, ns); 0: unknown. */
static uint64_t run_time(pid_t pid, pid_t tid)
{
	char path[64], buf[128];
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid,
		 (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = 0;
	return strtoull(buf, NULL, 10);
}

#define SUSPECTS 64 /* runnable tasks on the missing CPUs, at most */
/* How long the suspects are watched, at most, in looks 1 ms apart: a
 * running task's time in /proc grows only at the scheduler's tick (every
 * 10 ms at HZ=100), so two ticks, where the holder has not shown itself
 * sooner. */
#define WATCH_LOOKS 25

struct suspect {
	pid_t pid, tid;
	unsigned int cpu;
	int prio, policy;
	char comm[16];
	uint64_t ran0; /* time on CPU at the first look */
	uint64_t ran;  /* how much it grew since */
};

/* Whether @x holds its CPU rather than @y: it ran meanwhile (the
 * holder spins, the others wait behind it), then the higher priority. */
static bool before(const struct suspect *x, const struct suspect *y)
{
	if ((x->ran > 0) != (y->ran > 0))
		return x->ran > 0;
	if (x->prio != y->prio)
		return x->prio > y->prio;
	return x->ran > y->ran;
}

/* Whether each missing CPU of @rep (its first @m) with a suspect has
 * one whose time grew: its holder found. */
static bool holders_seen(const struct cpuhog_report *rep, unsigned int m,
			 const struct suspect *sus, unsigned int ns)
{
	unsigned int i, k;

	for (i = 0; i < m; i++) {
		bool any = false, grew = false;

		if (!(rep->cpu[i].flags & CPUHOG_RC_MISSING))
			continue;
		for (k = 0; k < ns; k++)
			if (sus[k].cpu == rep->cpu[i].cpu) {
				any = true;
				grew = grew || sus[k].ran > 0;
			}
		if (any && !grew)
			return false;
	}
	return true;
}

/* The suspects watched until each missing CPU's holder has run, or for
 * WATCH_LOOKS: a queue of runnable tasks has one on the CPU, and two at
 * one priority (a spinner and another process's hog queued behind it)
 * tell apart only by which of them ran. */
static void watch(const struct cpuhog_report *rep, unsigned int m,
		  struct suspect *sus, unsigned int ns)
{
	struct timespec nap = { 0, 1000000 };
	unsigned int look, k;

	for (look = 0; look < WATCH_LOOKS && !holders_seen(rep, m, sus, ns);
	     look++) {
		nanosleep(&nap, NULL);
		for (k = 0; k < ns; k++) {
			uint64_t t = run_time(sus[k].pid, sus[k].tid);

			sus[k].ran = t > sus[k].ran0 ? t - sus[k].ran0 : 0;
		}
	}
}

/* Who runs on the missing CPUs of the report's array: the runnable
 * tasks last there (hogs of ours and the caller aside), and of those the
 * one that ran while watched, as schedstat tells (the highest priority
 * breaks a tie). */
static void who_ran(struct ctx *c, struct cpuhog_report *rep)
{
	unsigned int i, k, ns = 0,
			m = rep->nr_cpu < rep->cpu_len ? rep->nr_cpu
						       : rep->cpu_len;
	DIR *proc = opendir("/proc"), *tasks;
	struct suspect *sus;
	struct dirent *pe, *te;
	char path[64];

	if (!proc)
		return;
	sus = calloc(SUSPECTS, sizeof(*sus));
	while (sus && ns < SUSPECTS && (pe = readdir(proc))) {
		pid_t pid = (pid_t)atoi(pe->d_name);
		int fd;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || !(tasks = fdopendir(fd))) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while (ns < SUSPECTS && (te = readdir(tasks))) {
			struct suspect *x = &sus[ns];

			x->pid = pid;
			x->tid = (pid_t)atoi(te->d_name);
			if (x->tid <= 0 || is_ours(c, x->tid))
				continue;
			snprintf(path, sizeof(path), "%d/stat", (int)x->tid);
			if (read_task(dirfd(tasks), path, &x->cpu, &x->prio,
				      &x->policy, x->comm) < 0)
				continue;
			for (i = 0; i < m; i++)
				if (rep->cpu[i].cpu == x->cpu &&
				    (rep->cpu[i].flags & CPUHOG_RC_MISSING))
					break;
			if (i < m) {
				x->ran0 = run_time(pid, x->tid);
				ns++;
			}
		}
		closedir(tasks);
	}
	closedir(proc);
	if (!sus)
		return;
	watch(rep, m, sus, ns);
	for (i = 0; i < m; i++) {
		struct cpuhog_report_cpu *rc = &rep->cpu[i];
		struct suspect *best = NULL;

		if (!(rc->flags & CPUHOG_RC_MISSING))
			continue;
		for (k = 0; k < ns; k++) {
			if (sus[k].cpu != rc->cpu)
				continue;
			rc->nr_running++;
			if (!best || before(&sus[k], best))
				best = &sus[k];
		}
		if (!best)
			continue;
		rc->pid = best->pid;
		rc->tid = best->tid;
		rc->priority = best->prio;
		rc->policy = best->policy;
		memcpy(rc->comm, best->comm, sizeof(rc->comm));
	}
	free(sus);
}

/* The call's end: its outcome, and who held it up where it failed. */
int cpuhog_i_stop_report_end(struct ctx *c, struct stop_outcome *o, int ret)
{
	struct cpuhog_report *rep = o->rep;

	if (!rep)
		return ret;
	rep->ret = ret;
	rep->tries = o->tries;
	/* a stop that waited out the lock went on unserialized: where it
	 * then timed out, another process's stop likely kept the CPUs */
	rep->ended = o->ended == STOP_TIMEDOUT && o->lock_waited_out
			     ? CPUHOG_END_LOCKED_OUT
			     : o->ended;
	rep->released = o->released;
	rep->serialized = o->serialized;
	rep->lock_waited = o->lock_waited;
	rep->fn_runs = o->fn_runs;
	rep->ran = o->ran;
	if (o->ended != STOP_RAN) {
		rep->fn_runs = 0;
		CPU_ZERO(&rep->ran);
	}
	if (o->absent)
		rep->all_held_ns = 0;
	if (c && rep->nr_missing && o->ended != STOP_RAN)
		who_ran(c, rep);
	rep->total_ns = since(o, cpuhog_i_now_ns());
	return ret;
}

void cpuhog_report_init(struct cpuhog_report *rep)
{
	if (!rep)
		return;
	memset(rep, 0, sizeof(*rep));
	rep->size = sizeof(*rep);
}
