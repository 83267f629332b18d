/* SPDX-License-Identifier: MIT */
/*
 * cpuhog bench [--quick] [--json] [--rounds N]
 *
 * Rounds of short batches, every operation once per round, so that the
 * machine's moods fall on all of them alike; warm-up first; the caller
 * pinned to one CPU and the remote side to another throughout.  Reports
 * the median and p99 of each, the ratios to the limits and peers, and
 * whether each speed target of the project is met.
 */
#include "bench.h"

#include <limits.h>
#include "../tools/tool.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXOPS 48

#define MAX_HELPER_CPUS 256

struct placement bench_place;
uint64_t bench_gap_ns = 100000;

void bench_gap(void)
{
	uint64_t end = tool_now_ns() + bench_gap_ns;

	while (tool_now_ns() < end)
		;
}

unsigned int bench_nth_cpu(unsigned int n)
{
	unsigned int cpu, k = 0;

	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &bench_place.cpus) && k++ == n)
			return cpu;
	return bench_place.here;
}

void bench_pin(unsigned int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

int bench_add_sample(struct op *op, double ns)
{
	if (op->n == op->cap) {
		size_t cap = op->cap ? op->cap * 2 : 1024;
		double *p = realloc(op->ns, cap * sizeof(*p));

		if (!p)
			return -1;
		op->ns = p;
		op->cap = cap;
	}
	op->ns[op->n++] = ns;
	return 0;
}

int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(struct op *op, double p)
{
	size_t i;

	if (!op->n)
		return NAN;
	i = (size_t)(p * (double)(op->n - 1) + 0.5);
	return op->ns[i];
}

/* ---- running ---- */

/*
 * CPUHOG_BENCH_FAIL=NAME makes operation NAME fail (-ETIMEDOUT) after a
 * few samples: the test of how a failed row is reported.
 */
static bool injected_failure(const struct op *op, unsigned int k)
{
	const char *name = getenv("CPUHOG_BENCH_FAIL");

	return name && k == 3 && !strcmp(name, op->name);
}

static void run_batch(struct op *op, double budget_ms, bool record)
{
	uint64_t end = tool_now_ns() + (uint64_t)(budget_ms * 1e6);
	const char *why = op->setup ? op->setup(op) : NULL;
	unsigned int k = 0;

	uint64_t e0;

	if (why) {
		op->skip = why;
		return;
	}
	e0 = bench_entries();
	do {
		double ns = injected_failure(op, k) ? -ETIMEDOUT : op->run(op);

		if (ns < 0) {
			/* what failed, and why (every op returns -errno); its
			 * samples go: a failed row feeds no figure */
			snprintf(op->why, sizeof(op->why), "a call failed: %s",
				 strerror((int)-ns));
			op->error = op->why;
			op->n = 0;
			break;
		}
		if (record && k >= 2) /* the first two of a batch: warm-up */
			bench_add_sample(op, ns);
		k++;
		bench_gap();
	} while (tool_now_ns() < end || k < 5);
	if (record && !op->error && !bench_entries_why && !op->no_entries) {
		/* less the second read's own entry */
		op->entries += bench_entries() - e0 - 1;
		op->calls += k;
	}
	if (op->teardown)
		op->teardown(op);
}

/* Run a peer's helper (bench/peer.h) and read its samples. */
static void exec_helper(const struct op *op, const char *budget)
{
	char path[PATH_MAX], gap[32], here[16], there[16];
	char cpus[MAX_HELPER_CPUS][12];
	char *argv[8 + MAX_HELPER_CPUS];
	unsigned int i, n = 0;

	snprintf(gap, sizeof(gap), "%llu",
		 (unsigned long long)(bench_gap_ns / 1000));
	snprintf(here, sizeof(here), "%u", bench_place.here);
	snprintf(there, sizeof(there), "%u", bench_place.there);
	bench_helper(op->helper, path, sizeof(path));
	argv[n++] = path;
	argv[n++] = (char *)op->child;
	argv[n++] = (char *)budget;
	argv[n++] = gap;
	argv[n++] = here;
	argv[n++] = there;
	for (i = 0; i < bench_place.ncpus && i < MAX_HELPER_CPUS; i++) {
		snprintf(cpus[i], sizeof(cpus[i]), "%u", bench_nth_cpu(i));
		argv[n++] = cpus[i];
	}
	argv[n] = NULL;
	execv(path, argv);
	/* a helper this machine cannot run (an emulated tool whose exec has
	 * no binfmt: ENOEXEC) is a skip with its reason, as a missing one is */
	printf("skip the helper cannot be run here (%s: %s)\n", path,
	       strerror(errno));
	fflush(stdout);
	_exit(0);
}

static void run_child(struct op *op, double budget_ms, bool record)
{
	char budget[32], line[256];
	int fd[2], status;
	FILE *f;
	pid_t pid;

	snprintf(budget, sizeof(budget), "%.0f", budget_ms);
	if (pipe(fd) < 0)
		return;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		if (op->child_env)
			putenv((char *)op->child_env);
		cpuhog_shutdown(); /* the child needs no hogs */
		exec_helper(op, budget);
		_exit(127);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "skip ", 5)) {
			line[strcspn(line, "\n")] = 0;
			op->skip = strdup(line + 5);
		} else if (record) {
			bench_add_sample(op, atof(line));
		}
	}
	if (f)
		fclose(f);
	waitpid(pid, &status, 0);
	if (!op->skip && (!WIFEXITED(status) || WEXITSTATUS(status)))
		op->error = "the helper failed";
}

static void run_rounds(struct op *ops, size_t n, const struct bench_opts *o)
{
	unsigned int r;
	size_t i;

	size_t order[MAXOPS], j, t;
	unsigned int seed = 1;

	bool progress = isatty(2) && !o->json;

	for (i = 0; i < n; i++)
		order[i] = i;
	for (r = 0; r <= o->rounds; r++) { /* round 0 warms up */
		if (progress)
			fprintf(stderr, "\rcpuhog bench: round %u of %u ", r,
				o->rounds);
		/* A new order each round: the cpuidle governor (haltpoll
		 * adapts its polling to recent wake-ups) and the caches
		 * then favour no operation over another. */
		for (i = n - 1; r > 0 && i > 0; i--) {
			j = (size_t)rand_r(&seed) % (i + 1);
			t = order[i], order[i] = order[j], order[j] = t;
		}
		for (j = 0; j < n; j++) {
			struct op *op = &ops[order[j]];

			if (op->skip || op->error)
				continue;
			if (op->child)
				run_child(op, o->budget_ms, r > 0);
			else
				run_batch(op, r ? o->budget_ms : 2, r > 0);
		}
	}
	if (progress)
		fprintf(stderr, "\r%40s\r", "");
	for (i = 0; i < n; i++)
		if (ops[i].n)
			qsort(ops[i].ns, ops[i].n, sizeof(double),
			      bench_cmp_double);
}

/* ---- what the machine and the library are ---- */

struct machine {
	char model[128], kernel[256], idle[64], policy[96];
	long rt_runtime, rt_period;
	int rcu_expedited; /* /sys/kernel/rcu_expedited; -1 unknown */
	unsigned int online;
};

static void first_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");

	snprintf(buf, size, "unknown");
	if (f) {
		if (fgets(buf, (int)size, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
	}
}

static void describe(struct machine *m, const struct cpuhog_info *in)
{
	char line[256], buf[64];
	struct utsname u;
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(m->model, sizeof(m->model), "unknown");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
			snprintf(m->model, sizeof(m->model), "%s",
				 strchr(line, ':') + 2);
			m->model[strcspn(m->model, "\n")] = 0;
			break;
		}
	if (f)
		fclose(f);
	uname(&u);
	snprintf(m->kernel, sizeof(m->kernel), "%s %s", u.sysname, u.release);
	first_line("/sys/devices/system/cpu/cpuidle/current_driver", m->idle,
		   sizeof(m->idle));
	first_line("/proc/sys/kernel/sched_rt_runtime_us", buf, sizeof(buf));
	m->rt_runtime = atol(buf);
	first_line("/proc/sys/kernel/sched_rt_period_us", buf, sizeof(buf));
	m->rt_period = atol(buf);
	/* 1: every synchronize_rcu() is expedited, membarrier GLOBAL's too
	 * (7,926 us became 3.5 us on such a kernel) */
	first_line("/sys/kernel/rcu_expedited", buf, sizeof(buf));
	m->rcu_expedited = strcmp(buf, "unknown") ? atoi(buf) : -1;
	m->online = (unsigned int)sysconf(_SC_NPROCESSORS_ONLN);
	if (in->policy == SCHED_FIFO)
		snprintf(m->policy, sizeof(m->policy), "SCHED_FIFO %d",
			 in->priority);
	else
		snprintf(m->policy, sizeof(m->policy), "SCHED_OTHER nice %d (%s)",
			 in->nice, strerror(in->rt_errno));
}

/* ---- idle cost ---- */

struct idle {
	double seconds;
	unsigned long long hog_ns; /* CPU time of all hogs while idle */
	long rss_kib_per_cpu;	   /* resident memory the hogs added */
	size_t stack;		   /* reserved stack per hog */
	struct poll_cost poll;
};

unsigned long long bench_threads_runtime(const char *prefix)
{
	char path[300], comm[32], stat[128];
	unsigned long long sum = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		first_line(path, comm, sizeof(comm));
		if (strncmp(comm, prefix, strlen(prefix)))
			continue;
		/* schedstat's first field: time spent on a CPU, in ns */
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat",
			 e->d_name);
		first_line(path, stat, sizeof(stat));
		sum += strtoull(stat, NULL, 10);
	}
	if (d)
		closedir(d);
	return sum;
}

static long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = atol(line + 6);
	if (f)
		fclose(f);
	return kib;
}

static int touch(void *arg)
{
	(void)arg;
	return 0;
}

/* Resident memory the hogs add, per CPU, in a fresh process. */
static long rss_child(void)
{
	char line[64], exe[4096], cmd[4200];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	long kib = -1;
	FILE *f;

	if (len <= 0)
		return -1;
	exe[len] = 0;
	snprintf(cmd, sizeof(cmd), "'%s' bench --child rss 2>/dev/null", exe);
	fflush(NULL);
	f = popen(cmd, "r");
	if (f && fgets(line, sizeof(line), f))
		kib = atol(line);
	if (f)
		pclose(f);
	return kib;
}

int bench_rss_child(void)
{
	struct cpuhog_info in;
	long rss0;
	unsigned int cpu;

	cpuhog_shutdown();
	rss0 = rss_kib();
	if (cpuhog_init(NULL) < 0 || cpuhog_get_info(&in) < 0)
		return 1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &in.cpus))
			hog_one_cpu(cpu, touch, NULL);
	printf("%ld\n", (rss_kib() - rss0 + (long)in.nr_hogs - 1) /
				(long)in.nr_hogs);
	return 0;
}

static void measure_idle(struct idle *id, double seconds)
{
	struct cpuhog_info in;
	unsigned long long before;

	cpuhog_get_info(&in);
	id->stack = in.stack_size;
	id->rss_kib_per_cpu = rss_child();
	usleep(20000);
	before = bench_threads_runtime("cpuhog/");
	usleep((useconds_t)(seconds * 1e6));
	id->hog_ns = bench_threads_runtime("cpuhog/") - before;
	id->seconds = seconds;
}

/* ---- targets ---- */

struct target {
	const char *what, *a, *b; /* ratio = median(a) / median(b) */
	bool at_most;		  /* ratio <= limit, else >= */
	double limit;
};

static const struct target targets[] = {
	{ "hog_one_cpu within 1.1x of the sleeping limit",
	  "hog_one_cpu, other CPU", "limit: futex wake of a sleeping thread",
	  true, 1.1 },
	{ "hog_cpus within 1.2x of the sleeping limit",
	  "hog_cpus, all CPUs", "limit: futex wake of a sleeping thread",
	  true, 1.2 },
	{ "stop_machine within 1.3x of the sleeping limit",
	  "stop_machine, all CPUs", "limit: futex wake of a sleeping thread",
	  true, 1.3 },
	{ "hog_one_cpu at least 2x faster than a thread per call",
	  "thread per call, other CPU", "hog_one_cpu, other CPU", false, 2.0 },
	{ "stop_machine at least 2.5x faster than threads per call",
	  "thread per CPU per call, stop", "stop_machine, all CPUs", false,
	  2.5 },
	{ "  the same, with a thread of ours running on the remote CPU",
	  "thread per CPU per call, stop, remote busy",
	  "stop_machine, all CPUs, remote busy", false, 2.5 },
	{ "stop_machine no slower than a signal stop-the-world",
	  "signal stop-the-world (Boehm GC)", "stop_machine, all CPUs", false,
	  1.0 },
	{ "hog_cpus no slower than OpenMP with passive waiting",
	  "OpenMP parallel region, passive", "hog_cpus, all CPUs", false, 1.0 },
	{ "hog_cpus' tree wake no slower than the flat wake (1.2x: noise)",
	  "hog_cpus, all CPUs", "hog_cpus, all CPUs, flat wake", true, 1.2 },
	{ "stop_machine's tree wake no slower than the flat wake",
	  "stop_machine, all CPUs", "stop_machine, all CPUs, flat wake", true,
	  1.2 },
	{ "hog_synchronize no slower than 2x membarrier PRIVATE_EXPEDITED",
	  "hog_synchronize", "membarrier PRIVATE_EXPEDITED", true, 2.0 },
	{ "  the same, with a thread of ours running on the remote CPU",
	  "hog_synchronize, remote CPU busy",
	  "membarrier PRIVATE_EXPEDITED, remote busy", true, 2.0 },
	{ "hog_synchronize, ours busy on every CPU, at most 1.5x membarrier",
	  BUSY_SYNC_OURS, BUSY_MB_OURS, true, 1.5 },
	{ "hog_synchronize at least 100x faster than membarrier GLOBAL",
	  "membarrier GLOBAL", "hog_synchronize", false, 100.0 },
	{ "poll: hog_one_cpu within 10x the cache-line round trip",
	  "hog_one_cpu, other CPU, poll", "limit: cache-line round trip",
	  true, 10.0 },
	{ "poll: hog_one_cpu at most 0.1x sleep mode",
	  "hog_one_cpu, other CPU, poll", "hog_one_cpu, other CPU", true,
	  0.1 },
	{ "poll: stop_machine within 15x the cache-line round trip",
	  "stop_machine, all CPUs, poll", "limit: cache-line round trip",
	  true, 15.0 },
	{ "poll: hog_synchronize no slower than 2x membarrier PRIVATE_EXP.",
	  "hog_synchronize, poll", "membarrier PRIVATE_EXPEDITED", true,
	  2.0 },
	{ "poll: remote CPU busy, hog_one_cpu no slower than 1.2x sleep",
	  "hog_one_cpu, other CPU, remote busy, poll",
	  "hog_one_cpu, other CPU, remote busy", true, 1.2 },
};

struct op *bench_op_named(struct op *ops, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(ops[i].name, name))
			return &ops[i];
	return NULL;
}

/* The op named @name if it was measured, else NULL. */
static struct op *find(struct op *ops, size_t n, const char *name)
{
	struct op *op = bench_op_named(ops, n, name);

	return op && op->n && !op->error && !op->skip ? op : NULL;
}

/* Why a target's ratio says nothing on this machine, or NULL. */
static const char *moot(const struct target *t, const struct machine *m)
{
	if (m->rcu_expedited == 1 &&
	    (strstr(t->a, "membarrier GLOBAL") || strstr(t->b, "membarrier GLOBAL")))
		return "not meaningful here: /sys/kernel/rcu_expedited is 1, "
		       "so GLOBAL's grace period is an expedited one";
	return NULL;
}

static double ratio_of(struct op *ops, size_t n, const struct target *t)
{
	struct op *a = find(ops, n, t->a), *b = find(ops, n, t->b);

	return a && b ? pct(a, 0.5) / pct(b, 0.5) : NAN;
}

/* Why a target has no figure: the first of its sides that failed or was
 * skipped. */
static const char *unmeasured_rows(struct op *ops, size_t n, const char *a,
				   const char *b)
{
	static char why[160];
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(ops[i].name, a) || !strcmp(ops[i].name, b)) {
			if (!ops[i].error && !ops[i].skip && ops[i].n)
				continue;
			snprintf(why, sizeof(why), "%s %s", ops[i].name,
				 ops[i].skip ? "was skipped" : "failed");
			return why;
		}
	return "a side was not measured";
}

static const char *unmeasured(struct op *ops, size_t n, const struct target *t)
{
	return unmeasured_rows(ops, n, t->a, t->b);
}

/* Whether a row of ours failed: the run then exits non-zero. */
static bool ours_failed(const struct op *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ops[i].error && !strcmp(ops[i].kind, "ours"))
			return true;
	return false;
}

/* ---- output ---- */

/* The stop's cost to another process against fn + 20 us: a target of
 * its own, in time, not a ratio; a line of the table or a JSON element. */
static void stop_cost_line(struct op *ops, size_t n, bool json)
{
	static const char what[] = "stop of a 20 us fn costs another process "
				   "at most fn + 20 us";
	struct op *op = find(ops, n, STOP_COST_ROW);
	double lost = op ? pct(op, 0.5) : NAN;

	if (json) {
		printf("  {\"target\": \"%s\", \"fn_ns\": %.0f, \"limit_ns\": %.0f, ",
		       what, STOP_COST_FN_NS, STOP_COST_TARGET_NS);
		if (op)
			printf("\"lost_ns\": %.0f, \"met\": %s},\n", lost,
			       lost <= STOP_COST_TARGET_NS ? "true" : "false");
		else
			printf("\"lost_ns\": null, \"met\": null},\n");
		return;
	}
	if (!op)
		printf("  %-64s not measured (%s)\n", what,
		       unmeasured_rows(ops, n, STOP_COST_ROW, STOP_COST_ROW));
	else
		printf("  %-64s %6.1f us  %s\n", what, lost / 1e3,
		       lost <= STOP_COST_TARGET_NS ? "met" : "MISSED");
}

static void print_table(struct op *ops, size_t n, const struct machine *m,
			const struct idle *id, const struct bench_opts *o)
{
	struct op *sleep = find(ops, n, "limit: futex wake of a sleeping thread");
	struct op *spin = find(ops, n, "limit: cache-line round trip");
	size_t i;

	printf("cpuhog bench%s: %u rounds, %.0f ms per operation per round, "
	       "%llu us between samples\n",
	       o->quick ? " --quick" : "", o->rounds, o->budget_ms,
	       (unsigned long long)(bench_gap_ns / 1000));
	printf("machine: %s; %u CPUs online, %u hogged (caller on CPU %u, "
	       "remote CPU %u)\n",
	       m->model, m->online, bench_place.ncpus, bench_place.here,
	       bench_place.there);
	printf("kernel: %s; cpuidle: %s; hogs: %s; RT throttling %ld/%ld us; "
	       "rcu_expedited %s\n\n",
	       m->kernel, m->idle, m->policy, m->rt_runtime, m->rt_period,
	       m->rcu_expedited < 0 ? "unknown" : m->rcu_expedited ? "1" : "0");
	printf("%-40s %10s %10s %9s %9s %8s\n", "operation", "median us",
	       "p99 us", "x sleep", "x spin", "entries");
	for (i = 0; i < n; i++) {
		struct op *op = &ops[i];

		if (op->skip || op->error || !op->n) {
			printf("%-40s %s: %s\n", op->name,
			       op->skip ? "skipped" : "failed",
			       op->skip ? op->skip
					: op->error ? op->error : "no samples");
			continue;
		}
		printf("%-40s %10.2f %10.2f", op->name, pct(op, 0.5) / 1e3,
		       pct(op, 0.99) / 1e3);
		if (sleep)
			printf(" %9.2f", pct(op, 0.5) / pct(sleep, 0.5));
		else
			printf(" %9s", "-");
		if (spin)
			printf(" %9.1f", pct(op, 0.5) / pct(spin, 0.5));
		else
			printf(" %9s", "-");
		if (op->calls)
			printf(" %8.1f", (double)op->entries / op->calls);
		else
			printf(" %8s", "-");
		printf("\n");
	}
	if (bench_crowd.calls)
		printf("(hog_synchronize, 4 concurrent callers: %.2f passes per "
		       "call, %llu passes for %llu calls of all four)\n",
		       (double)bench_crowd.passes / bench_crowd.calls,
		       (unsigned long long)bench_crowd.passes,
		       (unsigned long long)bench_crowd.calls);
	printf("(entries: kernel entries per call, every thread of the process "
	       "counted, pollers included; %s)\n",
	       bench_entries_why ? bench_entries_why
				 : "'-': measured in a helper process");
	printf("\ntargets (ratios of medians, this run):\n");
	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		const struct target *t = &targets[i];
		double r = ratio_of(ops, n, t);

		if (isnan(r))
			printf("  %-64s not measured (%s)\n", t->what,
			       unmeasured(ops, n, t));
		else if (moot(t, m))
			printf("  %-64s %8.2fx  %s\n", t->what, r, moot(t, m));
		else
			printf("  %-64s %8.2fx  %s\n", t->what, r,
			       (t->at_most ? r <= t->limit : r >= t->limit)
				       ? "met"
				       : "MISSED");
	}
	stop_cost_line(ops, n, false);
	printf("  %-64s %8.0f ns  %s\n", "idle: hogs' CPU time while idle",
	       (double)id->hog_ns, id->hog_ns == 0 ? "met" : "MISSED");
	printf("  %-64s %5zu KiB + %ld KiB resident  %s\n",
	       "memory per CPU: stack reserved, resident added", id->stack >> 10,
	       id->rss_kib_per_cpu,
	       id->stack + 4096 <= 64 * 1024 ? "met" : "MISSED");
	if (id->poll.skip) {
		printf("  %-64s not measured (%s)\n",
		       "poll: a CPU-bound process keeps 99% of its throughput",
		       id->poll.skip);
		return;
	}
	printf("  %-64s %8.2f%%  %s\n",
	       "poll: a CPU-bound process keeps 99% of its throughput",
	       100 * id->poll.kept, id->poll.kept >= 0.99 ? "met" : "MISSED");
	printf("  %-64s %8.1f%%  (a fact, not a target)\n",
	       "poll: the pollers' use of each polled CPU, idle machine",
	       100 * id->poll.poller_share);
}

static void json_str(const char *k, const char *v, bool comma)
{
	printf("\"%s\": \"", k);
	for (; *v; v++)
		if (*v == '"' || *v == '\\')
			printf("\\%c", *v);
		else if ((unsigned char)*v >= 0x20)
			putchar(*v);
	printf("\"%s", comma ? ", " : "");
}

static void print_json(struct op *ops, size_t n, const struct machine *m,
		       const struct idle *id, const struct bench_opts *o)
{
	size_t i;

	printf("{\"quick\": %s, \"rounds\": %u, \"budget_ms\": %.1f, "
	       "\"gap_us\": %llu, ",
	       o->quick ? "true" : "false", o->rounds, o->budget_ms,
	       (unsigned long long)(bench_gap_ns / 1000));
	printf("\"machine\": {");
	json_str("cpu_model", m->model, true);
	json_str("kernel", m->kernel, true);
	json_str("cpuidle", m->idle, true);
	json_str("hog_policy", m->policy, true);
	printf("\"cpus_online\": %u, \"cpus_hogged\": %u, \"caller_cpu\": %u, "
	       "\"remote_cpu\": %u, \"rt_runtime_us\": %ld, \"rt_period_us\": %ld, "
	       "\"rcu_expedited\": %d},\n",
	       m->online, bench_place.ncpus, bench_place.here,
	       bench_place.there, m->rt_runtime, m->rt_period,
	       m->rcu_expedited);
	printf(" \"operations\": [\n");
	for (i = 0; i < n; i++) {
		struct op *op = &ops[i];

		printf("  {");
		json_str("name", op->name, true);
		json_str("kind", op->kind, true);
		if (op->skip || op->error || !op->n)
			json_str(op->skip ? "skipped" : "failed",
				 op->skip ? op->skip
					  : op->error ? op->error : "no samples",
				 false);
		else
			printf("\"samples\": %zu, \"median_ns\": %.0f, "
			       "\"p99_ns\": %.0f, \"min_ns\": %.0f",
			       op->n, pct(op, 0.5), pct(op, 0.99), op->ns[0]);
		if (op->n && op->calls)
			printf(", \"entries_per_call\": %.2f",
			       (double)op->entries / op->calls);
		printf("}%s\n", i + 1 < n ? "," : "");
	}
	printf(" ],\n \"sync_crowd\": {\"callers\": 4, \"calls\": %llu, "
	       "\"passes\": %llu},\n",
	       (unsigned long long)bench_crowd.calls,
	       (unsigned long long)bench_crowd.passes);
	printf(" \"targets\": [\n");
	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		const struct target *t = &targets[i];
		double r = ratio_of(ops, n, t);

		printf("  {");
		json_str("target", t->what, true);
		json_str("numerator", t->a, true);
		json_str("denominator", t->b, true);
		printf("\"limit\": %.2f, \"at_most\": %s, ", t->limit,
		       t->at_most ? "true" : "false");
		if (isnan(r)) {
			printf("\"ratio\": null, \"met\": null, ");
			json_str("not_measured", unmeasured(ops, n, t), false);
			printf("},\n");
		} else if (moot(t, m)) {
			printf("\"ratio\": %.3f, \"met\": null, ", r);
			json_str("not_meaningful", moot(t, m), false);
			printf("},\n");
		} else
			printf("\"ratio\": %.3f, \"met\": %s},\n", r,
			       (t->at_most ? r <= t->limit : r >= t->limit)
				       ? "true"
				       : "false");
	}
	stop_cost_line(ops, n, true);
	printf("  {\"target\": \"idle CPU time\", \"seconds\": %.1f, "
	       "\"hog_ns\": %llu, \"met\": %s},\n",
	       id->seconds, id->hog_ns, id->hog_ns ? "false" : "true");
	printf("  {\"target\": \"memory per CPU\", \"stack_bytes\": %zu, "
	       "\"resident_kib\": %ld, \"met\": %s},\n",
	       id->stack, id->rss_kib_per_cpu,
	       id->stack + 4096 <= 64 * 1024 ? "true" : "false");
	printf("  {\"target\": \"poll: throughput kept\", ");
	if (id->poll.skip) {
		printf("\"ratio\": null, \"met\": null, ");
		json_str("not_measured", id->poll.skip, false);
		printf("}\n ]}\n");
		return;
	}
	printf("\"ratio\": %.4f, \"limit\": 0.99, \"met\": %s, "
	       "\"poller_cpu_share_idle\": %.4f}\n ]}\n",
	       id->poll.kept, id->poll.kept >= 0.99 ? "true" : "false",
	       id->poll.poller_share);
}

/* ---- the command ---- */

static int place(void)
{
	struct cpuhog_info in;
	unsigned int cpu, k = 0;

	if (cpuhog_get_info(&in) < 0)
		return -1;
	bench_place.cpus = in.cpus;
	bench_place.ncpus = in.nr_hogs;
	for (cpu = 0; cpu < CPU_SETSIZE && k < 2; cpu++)
		if (CPU_ISSET(cpu, &in.cpus)) {
			if (k++ == 0)
				bench_place.here = bench_place.there = cpu;
			else
				bench_place.there = cpu;
		}
	bench_pin(bench_place.here);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: cpuhog bench [-q] [-j] [-r N] [-g GAP] [-m]\n"
		   "  every call of libcpuhog against the limits and the "
		   "peers, in one run\n"
		   "  -q, --quick     a short run (under 20 s)\n"
		   "  -j, --json      every figure as JSON instead of the table\n"
		   "  -r, --rounds N  rounds of batches (default 12, quick 4)\n"
		   "  -g, --gap GAP   pause between samples, so that each call\n"
		   "                  finds the other CPUs idle (default 100us;\n"
		   "                  0: back to back)\n"
		   "  -m, --model     stop_machine and hog_synchronize at 64 to\n"
		   "                  4096 CPUs, flat and tree, predicted from\n"
		   "                  constants measured here (docs/SCALING.md)\n"
		   "  -h, --help      this text\n");
}

int cmd_bench(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "quick", no_argument, 0, 'q' },
		{ "json", no_argument, 0, 'j' },
		{ "rounds", required_argument, 0, 'r' },
		{ "child", required_argument, 0, 'c' },
		{ "budget", required_argument, 0, 'b' },
		{ "gap", required_argument, 0, 'g' },
		{ "model", no_argument, 0, 'm' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct bench_opts o = { .rounds = 0, .budget_ms = 0 };
	struct op ops[MAXOPS];
	struct machine m;
	struct idle id;
	struct cpuhog_info in;
	const char *child = NULL;
	bool model = false;
	size_t n = 0;
	char *end;
	int c;

	/* without real time the rows measure weak mode, and say so; the
	 * stops' rows skip (need_rt()) */
	setenv("CPUHOG_WEAK", "1", 0);
	optind = 1;
	while ((c = getopt_long(argc, argv, "qjr:g:mh", lo, NULL)) != -1) {
		switch (c) {
		case 'q': o.quick = true; break;
		case 'j': o.json = true; break;
		case 'r':
			o.rounds = (unsigned int)strtoul(optarg, &end, 10);
			if (*end || o.rounds < 1 || o.rounds > 1000) {
				fprintf(stderr, "cpuhog bench: --rounds takes 1 to 1000\n");
				return EXIT_USAGE;
			}
			break;
		case 'c': child = optarg; break;
		case 'b': o.budget_ms = atof(optarg); break;
		case 'g':
			/* a duration like every other; the helpers get us */
			if (tool_duration("bench", "--gap", optarg, &bench_gap_ns))
				return EXIT_USAGE;
			if (bench_gap_ns > 100000000ull) {
				fprintf(stderr, "cpuhog bench: --gap takes 0 to 100ms\n");
				return EXIT_USAGE;
			}
			break;
		case 'm': model = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cpuhog bench: unexpected argument '%s'\n",
			argv[optind]);
		return EXIT_USAGE;
	}
	if (!child)
		bench_entries_open(); /* before place() makes the hogs */
	if (place() < 0) {
		fprintf(stderr, "cpuhog bench: cannot start the hogs\n");
		return EXIT_RUNTIME;
	}
	if (child)
		return bench_child(child, o.budget_ms > 0 ? o.budget_ms : 10);
	if (model)
		return bench_model(o.json);
	if (!o.rounds)
		o.rounds = o.quick ? 4 : 12;
	o.budget_ms = o.quick ? 12 : 50;
	memset(ops, 0, sizeof(ops));
	n += ours_ops(ops + n);
	n += limit_ops(ops + n);
	n += peer_ops(ops + n);
	n += poll_ops(ops + n);
	n += crowd_ops(ops + n);
	n += stop_cost_ops(ops + n);
	n += busy_all_ops(ops + n);
	if (!o.json) {
		tool_say_priority("bench", "our rows are those of ordinary "
					   "threads, and the stop rows are "
					   "skipped");
		fprintf(stderr, "cpuhog bench: measuring %zu operations...\n", n);
	}
	run_rounds(ops, n, &o);
	cpuhog_get_info(&in);
	describe(&m, &in);
	measure_idle(&id, o.quick ? 1.0 : 3.0);
	poll_costs(&id.poll, o.quick ? 7 : 11, o.quick ? 0.5 : 2.0);
	if (o.json)
		print_json(ops, n, &m, &id, &o);
	else
		print_table(ops, n, &m, &id, &o);
	cpuhog_shutdown();
	if (ours_failed(ops, n)) {
		fprintf(stderr, "cpuhog bench: a call of the library failed "
				"(see the failed rows)\n");
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}
