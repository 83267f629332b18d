/* SPDX-License-Identifier: MIT */
/*
 * The per-call reports (struct cpuhog_report, "who held the stop up") of
 * stop_machine_report(), stop_two_cpus_report(), hog_cpus_report() and
 * hog_synchronize_report(): the hogs' times, which they take only while
 * a call asks (a stop's timing, or a timed work: W_F_TIMED, hog.c),
 * turned into the caller's report.  When a call failed, the task that
 * ran on each CPU whose hog never came is named from /proc: the runnable
 * tasks last there, and of those the one whose run time grew while
 * watched.  Only that part allocates, and only after the CPUs are let go.
 */
#include "internal.h"
#include "outcome.h"

#include <dirent.h>
#include <errno.h>
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
	memset(o, 0, sizeof(*o));
	if (!rep)
		return 0;
	if (rep->size < REPORT_V1 || (rep->cpu_len && !rep->cpu))
		return -EINVAL;
	o->rep = rep;
	o->t0 = cpuhog_i_now_ns();
	/* what the call fills: the caller's array (cpu, cpu_len) stays */
	memset(&rep->nr_cpu, 0,
	       REPORT_V1 - offsetof(struct cpuhog_report, nr_cpu));
	return 0;
}

/* The hogs of @s start their times anew (a stop's, or a timed work's). */
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
	/* relaxed: cpuhog_i_multi_push()'s seq_cst pushes publish it */
	SET(&c->stop->timing, on);
}

static uint64_t since(const struct stop_outcome *o, uint64_t t)
{
	return t > o->t0 ? t - o->t0 : (t ? 1 : 0);
}

/* CPU @cpu into the sets, and into entry @k where the array has room:
 * flags @f, its hog's times (0: never). */
static void put_cpu(struct stop_outcome *o, unsigned int k, unsigned int cpu,
		    unsigned int f, uint64_t arrived, uint64_t held,
		    uint64_t released)
{
	struct cpuhog_report *rep = o->rep;

	rep->nr_missing += !!(f & CPUHOG_RC_MISSING);
	if (cpu < CPU_SETSIZE) {
		if (f & CPUHOG_RC_HELD)
			CPU_SET(cpu, &rep->held);
		if (f & CPUHOG_RC_MISSING)
			CPU_SET(cpu, &rep->missing);
	}
	if (k < rep->cpu_len) /* the rest of the entry zeroed */
		rep->cpu[k] = (struct cpuhog_report_cpu){
			.cpu = cpu,
			.flags = f,
			.arrived_ns = since(o, arrived),
			.held_ns = since(o, held),
			.released_ns = since(o, released),
		};
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
			a = hd = out = 0;
			f = cpuhog_i_slot_queued(h) ? CPUHOG_RC_MISSING : 0;
		}
		f |= hd ? CPUHOG_RC_HELD : 0;
		all_held = all_held && hd;
		if (hd && (!first_held || hd < first_held))
			first_held = hd;
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

/* hog_cpus_report(), hog_synchronize_report(): one CPU more, its work
 * started at @start and done at @end (0: never); every CPU had at the
 * last start. */
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

/* The hogs of @s after such a call's wait (@pushed: works queued): a
 * work still queued never came; one that refused it (off its CPU) gets
 * no flags. */
void cpuhog_i_call_report_hogs(const struct sel *s, bool pushed,
			       struct stop_outcome *o)
{
	unsigned int i, f;

	for (i = 0; i < s->n; i++) {
		struct hog *h = s->hog[i];

		if (cpuhog_i_slot_queued(h))
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

bool cpuhog_i_is_hog(const struct ctx *c, pid_t tid)
{
	unsigned int i;

	for (i = 0; i < c->nr_hogs; i++)
		if (c->hogs[i].tid == tid)
			return true;
	return false;
}

#define SUSPECTS 64 /* runnable tasks on the missing CPUs, at most */
/* Looks 1 ms apart, at most: a task's time in /proc grows only at the
 * scheduler's tick (10 ms at HZ=100), so two ticks. */
#define WATCH_LOOKS 25

struct suspect {
	pid_t pid, tid;
	unsigned int cpu;
	int prio, policy;
	char comm[16];
	uint64_t ran0; /* time on CPU at the first look */
	uint64_t ran;  /* how much it grew since */
};

/* @x's /proc/PID/task/TID/@name, whole, into @buf; false: gone. */
static bool read_proc(const struct suspect *x, const char *name, char *buf,
		      size_t size)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)x->pid,
		 (int)x->tid, name);
	return cpuhog_i_read_file(path, buf, size) > 0;
}

/* @x's stat where it is runnable (state R): its comm, and fields 39-41
 * (the CPU it last ran on, rt_priority, policy). */
static bool read_task(struct suspect *x)
{
	char buf[1024];
	const char *p, *q;

	if (!read_proc(x, "stat", buf, sizeof(buf)))
		return false;
	p = strchr(buf, '(');
	q = strrchr(buf, ')'); /* comm may hold anything, ')' too */
	if (!p || !q || q < p || strncmp(q, ") R ", 4))
		return false;
	snprintf(x->comm, sizeof(x->comm), "%.*s", (int)(q - p - 1), p + 1);
	p = cpuhog_i_stat_field(buf, 39);
	return p && sscanf(p, "%u %d %d", &x->cpu, &x->prio, &x->policy) == 3;
}

/* @x's time on CPU so far (schedstat, ns); 0: unknown. */
static uint64_t run_time(const struct suspect *x)
{
	char buf[128];

	return read_proc(x, "schedstat", buf, sizeof(buf))
		       ? strtoull(buf, NULL, 10)
		       : 0;
}

/* Whether @cpu is missing in the first @m entries of @rep. */
static bool missing(const struct cpuhog_report *rep, unsigned int m,
		    unsigned int cpu)
{
	unsigned int i;

	for (i = 0; i < m; i++)
		if (rep->cpu[i].cpu == cpu &&
		    (rep->cpu[i].flags & CPUHOG_RC_MISSING))
			return true;
	return false;
}

/* The runnable tasks last on those CPUs, ours aside, into @sus. */
static unsigned int suspects(struct ctx *c, const struct cpuhog_report *rep,
			     unsigned int m, struct suspect *sus)
{
	DIR *proc = opendir("/proc"), *tasks;
	struct dirent *pe, *te;
	unsigned int ns = 0;
	char path[64];

	while (proc && ns < SUSPECTS && (pe = readdir(proc))) {
		struct suspect x = { .pid = (pid_t)atoi(pe->d_name) };

		if (x.pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task", (int)x.pid);
		if (!(tasks = opendir(path)))
			continue;
		while (ns < SUSPECTS && (te = readdir(tasks))) {
			x.tid = (pid_t)atoi(te->d_name);
			/* ours aside: a hog waits on its CPU too, and the
			 * caller may run on a CPU its holder has since left */
			if (x.tid <= 0 || x.tid == gettid() ||
			    cpuhog_i_is_hog(c, x.tid) || !read_task(&x) ||
			    !missing(rep, m, x.cpu))
				continue;
			x.ran0 = run_time(&x);
			sus[ns++] = x;
		}
		closedir(tasks);
	}
	if (proc)
		closedir(proc);
	return ns;
}

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

/* The suspect of the @ns in @sus that holds @cpu (NULL: none there), and
 * how many are there. */
static struct suspect *holder(struct suspect *sus, unsigned int ns,
			      unsigned int cpu, unsigned int *nr)
{
	struct suspect *best = NULL;
	unsigned int k;

	for (*nr = k = 0; k < ns; k++) {
		if (sus[k].cpu != cpu)
			continue;
		++*nr;
		if (!best || before(&sus[k], best))
			best = &sus[k];
	}
	return best;
}

/* Whether each CPU with a suspect has one that ran (before() ranks it
 * first): its holder found. */
static bool holders_seen(struct suspect *sus, unsigned int ns)
{
	unsigned int k, nr;

	for (k = 0; k < ns; k++)
		if (!holder(sus, ns, sus[k].cpu, &nr)->ran)
			return false;
	return true;
}

/* Who runs on the missing CPUs of the report's array.  The suspects are
 * watched until each such CPU's holder has run, or for WATCH_LOOKS: of
 * two runnable at one priority (a spinner and another process's hog
 * queued behind it) only the run time tells which is on the CPU. */
static void who_ran(struct ctx *c, struct cpuhog_report *rep)
{
	unsigned int i, k, ns, look,
		m = rep->nr_cpu < rep->cpu_len ? rep->nr_cpu : rep->cpu_len;
	struct timespec nap = { 0, 1000000 };
	struct suspect *sus = calloc(SUSPECTS, sizeof(*sus)), *best;

	if (!sus)
		return;
	ns = suspects(c, rep, m, sus);
	for (look = 0; look < WATCH_LOOKS && !holders_seen(sus, ns);
	     look++) {
		nanosleep(&nap, NULL);
		for (k = 0; k < ns; k++) {
			uint64_t t = run_time(&sus[k]);

			sus[k].ran = t > sus[k].ran0 ? t - sus[k].ran0 : 0;
		}
	}
	for (i = 0; i < m; i++) {
		struct cpuhog_report_cpu *rc = &rep->cpu[i];

		/* nr_running: 0 as put_cpu() left it, hence = */
		if (!(rc->flags & CPUHOG_RC_MISSING) ||
		    !(best = holder(sus, ns, rc->cpu, &rc->nr_running)))
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
	if (o->absent)
		rep->all_held_ns = 0;
	if (o->ended == STOP_RAN) { /* else 0, as begun */
		rep->fn_runs = o->fn_runs;
		rep->ran = o->ran;
	} else if (c && rep->nr_missing) {
		who_ran(c, rep);
	}
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
