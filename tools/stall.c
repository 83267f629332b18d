/* SPDX-License-Identifier: MIT */
/*
 * cpuhog stall --cpus LIST --for DURATION [--every PERIOD] [--count N]
 *              [--force] [--json]
 *
 * A fault injector: monopolize CPUs for DURATION, once or periodically,
 * to reproduce a stop-the-world pause or a hypervisor stall and test the
 * heartbeats, timeouts and latency budgets of other software.  Every
 * hogged CPU at once: stop_machine (all held in one rendezvous); a subset:
 * hog_cpus.  Refuses a stall over 500 ms, and stalls that would hold
 * their CPUs more than half the time (back to back, or --for over half of
 * --every), unless --force.  Ctrl-C ends it between stalls.
 *
 * A stop_machine stall says how long the stop took to hold every CPU and
 * how long it held them (stop_machine_report()); one that failed, which
 * CPUs never came and what ran there.  --json: one object per stall, a
 * line each (JSON Lines), the report in it.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t interrupted;

static void on_int(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct stall {
	uint64_t ns;
	char policy[64];
	_Atomic uint64_t *held; /* measured, per CPU: nr_cpu_ids */
	int json;
	struct cpuhog_report rep; /* stop_machine's */
	struct cpuhog_report_cpu *rc; /* its per-CPU part: nr_cpu_ids */
};

/* Runs on every stalled CPU: spin, reading the clock, for the length. */
static int spin(void *arg)
{
	struct stall *s = arg;
	uint64_t t0 = tool_now_ns(), t;

	do
		t = tool_now_ns();
	while (t - t0 < s->ns);
	atomic_store_explicit(&s->held[sched_getcpu()], t - t0,
			      memory_order_relaxed);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cpuhog stall -c LIST -D DURATION [-i PERIOD] [-l N] [--force] [--json]\n"
		"  monopolize CPUs for DURATION (e.g. 20ms), once or every PERIOD\n"
		"  -c, --cpus LIST       CPUs as for taskset -c (0-3,8, 0-7:2) or 'all'\n"
		"  -D, --for DURATION    how long each stall holds them\n"
		"  -i, --every PERIOD    start a stall every PERIOD\n"
		"  -l, --count N         how many stalls (default 1; with --every:\n"
		"                        until Ctrl-C)\n"
		"  -F, --force           allow a stall over 500 ms, or stalls that\n"
		"                        hold their CPUs more than half the time\n"
		"  -j, --json            each stall as a line of JSON, with the\n"
		"                        stop's report\n"
		"  -h, --help            this text\n");
}

struct stall_opts {
	const char *cpus;
	uint64_t len, every;
	long count;
	int force, json;
};

static int parse_opts(int argc, char **argv, struct stall_opts *o)
{
	static const struct option lo[] = {
		{ "cpus", required_argument, 0, 'c' },
		{ "for", required_argument, 0, 'D' },
		{ "duration", required_argument, 0, 'D' }, /* as noise's */
		{ "every", required_argument, 0, 'i' },
		{ "count", required_argument, 0, 'l' },
		{ "force", no_argument, 0, 'F' },
		{ "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->count = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:D:i:l:Fjh", lo, NULL)) != -1) {
		switch (c) {
		case 'c': o->cpus = optarg; break;
		case 'D':
			if (tool_duration("stall", "--for", optarg, &o->len))
				return EXIT_USAGE;
			break;
		case 'i':
			if (tool_duration("stall", "--every", optarg, &o->every))
				return EXIT_USAGE;
			if (!o->every) {
				fprintf(stderr, "cpuhog stall: --every needs a "
						"period above 0\n");
				return EXIT_USAGE;
			}
			break;
		case 'l':
			errno = 0;
			o->count = strtol(optarg, &end, 10);
			if (*end || errno || o->count < 1) {
				fprintf(stderr, "cpuhog stall: --count takes a "
						"positive number, not '%s'\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'F': o->force = 1; break;
		case 'j': o->json = 1; break;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cpuhog stall: unexpected argument '%s'\n",
			argv[optind]);
		return EXIT_USAGE;
	}
	if (!o->cpus || !o->len) {
		fprintf(stderr, "cpuhog stall: %s\n",
			!o->cpus ? "needs --cpus LIST (-c)"
				 : "needs --for DURATION (-D), above 0");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/*
 * The safety rules, about what the run would really do, on every CPU set
 * alike: no single stall over 500 ms, and over any stretch of the run its
 * CPUs are held at most half the time.  Back-to-back stalls (--count
 * without --every) hold them all the time.  A message and EXIT_USAGE when
 * broken.
 */
static int check_safe(const struct stall_opts *o)
{
	bool repeated = o->count > 1 || (o->every && o->count < 0);

	if (o->every && o->len > o->every) {
		fprintf(stderr, "cpuhog stall: --for is longer than --every\n");
		return EXIT_USAGE;
	}
	if (o->force)
		return EXIT_OK;
	if (o->len > TOOL_MAX_HOLD_NS) {
		fprintf(stderr, "cpuhog stall: a stall over 500 ms freezes "
				"those CPUs; add --force if you mean it\n");
		return EXIT_USAGE;
	}
	if (repeated && !o->every) {
		fprintf(stderr, "cpuhog stall: %ld stalls back to back hold the "
				"CPUs all the time; give --every at least twice "
				"--for, or add --force\n",
			o->count);
		return EXIT_USAGE;
	}
	if (repeated && o->len * 2 > o->every) {
		fprintf(stderr, "cpuhog stall: stalls of --for every --every "
				"hold the CPUs more than half the time; add "
				"--force if you mean it\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const char *policy_name(int policy)
{
	switch (policy) {
	case SCHED_OTHER: return "SCHED_OTHER";
	case SCHED_FIFO: return "SCHED_FIFO";
	case SCHED_RR: return "SCHED_RR";
	case SCHED_BATCH: return "SCHED_BATCH";
	case SCHED_IDLE: return "SCHED_IDLE";
	case 6: return "SCHED_DEADLINE";
	default: return "?";
	}
}

static unsigned int report_len(const struct cpuhog_report *rep)
{
	return rep->nr_cpu < rep->cpu_len ? rep->nr_cpu : rep->cpu_len;
}

/* The CPUs whose hog never came, and what ran there: one line each. */
static void say_missing(const struct cpuhog_report *rep)
{
	unsigned int i;

	if (rep->ended == CPUHOG_END_LOCKED_OUT)
		fprintf(stderr, "cpuhog stall: another process's stop kept the "
				"machine-wide stop lock past its bound: this "
				"one went on unserialized\n");
	for (i = 0; i < report_len(rep); i++) {
		const struct cpuhog_report_cpu *c = &rep->cpu[i];

		if (!(c->flags & CPUHOG_RC_MISSING))
			continue;
		if (c->pid)
			fprintf(stderr,
				"cpuhog stall: CPU %u never came: pid %d tid %d "
				"(%s) at %s %d ran there (%u runnable)\n",
				c->cpu, (int)c->pid, (int)c->tid, c->comm,
				policy_name(c->policy), c->priority,
				c->nr_running);
		else
			fprintf(stderr, "cpuhog stall: CPU %u never came: "
					"nothing runnable found there\n",
				c->cpu);
	}
}

static const char *ended_name(unsigned int e)
{
	static const char *const names[] = { "none", "ran", "timedout",
					     "nocpu", "locked-out" };

	return e < sizeof(names) / sizeof(names[0]) ? names[e] : "?";
}

/* The report of a stop_machine stall, as JSON. */
static void print_json_report(const struct cpuhog_report *rep)
{
	static const char *const why[] = { "none", "lost", "overrun" };
	unsigned int i;

	printf("{\"ended\": \"%s\", \"tries\": %u, \"fn_runs\": %u, "
	       "\"all_held_ns\": %llu, \"hold_ns\": %llu, \"total_ns\": %llu, "
	       "\"released\": \"%s\", \"serialized\": %s, "
	       "\"lock_waited\": %s, \"missing\": %u, \"per_cpu\": [",
	       ended_name(rep->ended), rep->tries, rep->fn_runs,
	       (unsigned long long)rep->all_held_ns,
	       (unsigned long long)rep->hold_ns,
	       (unsigned long long)rep->total_ns,
	       rep->released < 3 ? why[rep->released] : "?",
	       rep->serialized ? "true" : "false",
	       rep->lock_waited ? "true" : "false", rep->nr_missing);
	for (i = 0; i < report_len(rep); i++) {
		const struct cpuhog_report_cpu *c = &rep->cpu[i];

		printf("%s{\"cpu\": %u, \"arrived_ns\": %llu, "
		       "\"held_ns\": %llu, \"released_ns\": %llu, "
		       "\"ran\": %s, \"missing\": %s",
		       i ? ", " : "", c->cpu,
		       (unsigned long long)c->arrived_ns,
		       (unsigned long long)c->held_ns,
		       (unsigned long long)c->released_ns,
		       c->flags & CPUHOG_RC_RAN ? "true" : "false",
		       c->flags & CPUHOG_RC_MISSING ? "true" : "false");
		if ((c->flags & CPUHOG_RC_MISSING) && c->pid) {
			printf(", \"pid\": %d, \"tid\": %d, \"comm\": ",
			       (int)c->pid, (int)c->tid);
			json_string(stdout, c->comm);
			printf(", \"policy\": \"%s\", \"priority\": %d, "
			       "\"runnable\": %u",
			       policy_name(c->policy), c->priority,
			       c->nr_running);
		}
		printf("}");
	}
	printf("]}");
}

/* One stall as a line of JSON (the report: stop_machine's only). */
static void print_json(long k, const struct tool_set *cpus, int all,
		       const struct stall *s, int r, uint64_t total,
		       uint64_t most)
{
	char list[4096];

	format_cpulist(cpus->size, cpus->set, list, sizeof(list));
	printf("{\"stall\": %ld, \"call\": \"%s\", \"cpus\": ", k,
	       all ? "stop_machine" : "hog_cpus");
	json_string(stdout, list);
	printf(", \"policy\": ");
	json_string(stdout, s->policy);
	printf(", \"ret\": %d, \"error\": ", r < 0 ? r : 0);
	if (r < 0)
		json_string(stdout, strerror(-r));
	else
		printf("null");
	printf(", \"for_ns\": %llu, \"held_ns\": %llu, \"call_ns\": %llu, "
	       "\"report\": ",
	       (unsigned long long)s->ns, (unsigned long long)most,
	       (unsigned long long)total);
	if (all)
		print_json_report(&s->rep);
	else
		printf("null");
	printf("}\n");
	fflush(stdout);
}

static const char *released_note(unsigned int released)
{
	return released == CPUHOG_RELEASED_OVERRUN ? " (released: overrun)"
	       : released == CPUHOG_RELEASED_LOST
		       ? " (released: a CPU went away)"
		       : "";
}

static int stall_once(const struct tool_set *cpus, int all, struct stall *s,
		      long k)
{
	uint64_t t0 = tool_now_ns(), total, most = 0;
	char list[4096], took[32], held[32], reach[32], hold[32];
	int r, cpu;

	unsigned int i;

	for (i = 0; i < cpus->ids; i++)
		atomic_store(&s->held[i], 0);
	if (all) {
		cpuhog_report_init(&s->rep);
		s->rep.cpu = s->rc;
		s->rep.cpu_len = cpus->ids;
	}
	r = all ? stop_machine_report(spin, s, cpus->size, cpus->set, &s->rep)
		: hog_cpus(cpus->size, cpus->set, spin, s);
	total = tool_now_ns() - t0;
	for (cpu = 0; cpu < (int)cpus->ids; cpu++)
		if (atomic_load(&s->held[cpu]) > most)
			most = atomic_load(&s->held[cpu]);
	if (s->json)
		print_json(k, cpus, all, s, r, total, most);
	if (r < 0) {
		fprintf(stderr, "cpuhog stall: %s failed: %s\n",
			all ? "stop_machine" : "hog_cpus", strerror(-r));
		if (all)
			say_missing(&s->rep);
		return EXIT_RUNTIME;
	}
	if (s->json)
		return EXIT_OK;
	format_cpulist(cpus->size, cpus->set, list, sizeof(list));
	format_duration(most, held, sizeof(held));
	format_duration(total, took, sizeof(took));
	if (all) {
		format_duration(s->rep.all_held_ns, reach, sizeof(reach));
		format_duration(s->rep.hold_ns, hold, sizeof(hold));
		printf("stall %ld: CPUs %s held %s (stop_machine, hogs at %s): "
		       "all held after %s, for %s%s; call took %s\n",
		       k, list, held, s->policy, reach, hold,
		       released_note(s->rep.released), took);
	} else {
		printf("stall %ld: CPUs %s held %s (hog_cpus, hogs at %s), "
		       "call took %s\n",
		       k, list, held, s->policy, took);
	}
	fflush(stdout);
	return EXIT_OK;
}

static void sleep_until(uint64_t t)
{
	uint64_t n = tool_now_ns();
	struct timespec ts;

	if (t <= n)
		return;
	ts.tv_sec = (time_t)((t - n) / 1000000000ull);
	ts.tv_nsec = (long)((t - n) % 1000000000ull);
	nanosleep(&ts, NULL); /* Ctrl-C cuts it short */
}

int cmd_stall(int argc, char **argv)
{
	struct stall_opts o;
	struct cpuhog_attr a;
	struct sigaction sa;
	static struct stall s;
	struct tool_set set;
	uint64_t next;
	int all = 0, r;
	long k;

	r = parse_opts(argc, argv, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	/* no hog before the input is known good: bad input hogs nothing */
	r = check_safe(&o);
	if (r)
		return r;
	cpuhog_attr_init(&a);
	/* without real time a stall of some CPUs is still a load (said
	 * below); a stop of all is refused before it runs */
	a.flags = CPUHOG_F_WEAK;
	/* long on purpose: no report; the stop timeout is the library's
	 * default, 200 ms or the operator's CPUHOG_STOP_TIMEOUT_MS */
	a.overrun_ns = o.len + 1000000000ull;
	if (tool_start(&a) < 0) {
		fprintf(stderr, "cpuhog stall: cannot start the hogs\n");
		return EXIT_RUNTIME;
	}
	r = tool_cpus("stall", o.cpus, &set, &all);
	if (r < 0)
		return -r;
	if (!tool_say_priority("stall", all ? "stop_machine cannot hold every "
					      "CPU, so this stall cannot run"
					    : "other threads share the stalled "
					      "CPUs: a load, not a stall"))
		if (all) {
			cpuhog_shutdown();
			CPU_FREE(set.set);
			return EXIT_RUNTIME;
		}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_int;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	s.ns = o.len;
	tool_policy(s.policy, sizeof(s.policy));
	s.json = o.json;
	s.held = calloc(set.ids, sizeof(*s.held));
	s.rc = calloc(set.ids, sizeof(*s.rc));
	if (!s.held || !s.rc) {
		fprintf(stderr, "cpuhog stall: out of memory\n");
		return EXIT_RUNTIME;
	}
	if (o.count < 0)
		o.count = o.every ? 0 : 1; /* 0: until interrupted */
	next = tool_now_ns();
	/* a failed stall ends a single one; a periodic run reports it and
	 * goes on (a CPU taken offline is part of the weather), exiting
	 * with the failure's status at the end */
	for (k = 1, r = EXIT_OK; !interrupted && (!o.count || k <= o.count);
	     k++) {
		int once = stall_once(&set, all, &s, k);

		r = once ? once : r;
		if (once && !o.every)
			break;
		next += o.every;
		/* a stall that failed late (the stop's timeout) must not
		 * make the next ones run back to back */
		if (next < tool_now_ns())
			next = tool_now_ns();
		if (o.every && (!o.count || k < o.count))
			sleep_until(next);
	}
	if (interrupted)
		printf("interrupted after %ld stalls\n", k - 1);
	cpuhog_shutdown();
	free(s.held);
	free(s.rc);
	CPU_FREE(set.set);
	return r;
}
