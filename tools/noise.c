/* SPDX-License-Identifier: MIT */
/*
 * cpuhog noise --cpus LIST --duration D [--threshold T] [--json]
 *              [--rest R] [--priority N] [--force]
 *              [--samples FILE] [--trace-above T]
 *
 * Operating-system noise, measured from inside a hog: on each CPU a hog
 * reads the clock in a tight loop and records every gap above the
 * threshold (an interrupt, a kernel thread, the hypervisor: whatever
 * outranks a SCHED_FIFO 99 thread).  By default each CPU measures
 * continuously, as oslat does: one hog_cpus() call, one callback per CPU
 * for the whole run, so no gap falls between two measurements.  A run
 * longer than the kernel's RT budget (sched_rt_runtime_us) meets RT
 * throttling, which holds a real-time thread off its CPU for the rest of
 * each period: those gaps are real for such a thread and are counted,
 * and the tool says so before it starts.  --rest R measures in 100 ms
 * slices with R between them instead, so that the rest of the machine
 * keeps running on the measured CPUs; the output says what share of the
 * wall time was measured.  The peer is rt-tests' oslat on the same CPUs
 * for the same time.
 *
 * Per CPU it reports what sysjitter and rtla osnoise do: the noise as a
 * share of the time measured, the longest gap, the gaps' percentiles (from
 * a histogram of 16 steps per power of two: a percentile is the upper
 * edge of its step, within 6.25%), and the sources the kernel counted on
 * the CPU meanwhile (noise_src.c) with the hog's involuntary switches.
 *
 * --priority N measures at SCHED_FIFO N (the hogs' priority) to compare
 * with oslat -f N or rtla -P f:N; --priority other at SCHED_OTHER, in
 * pinned threads of the tool's own, since the library's hogs are real
 * time wherever the process may be.  A continuous run on every hogged
 * CPU at a real-time priority leaves nothing else of the machine running:
 * over 500 ms (stall's limit), or with rests shorter than the 100 ms
 * slices, it needs --force.
 * --samples keeps each gap (CPU, time, length) for a file; --trace-above
 * writes a marker into the kernel's trace buffer at the first gap above
 * it, stops tracing and ends the run, as oslat's and rtla's -T do.
 */
#include "noise_src.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define SLICE_NS 100000000ull /* --rest: the measured slices */
#define NBUCKETS 40 /* log2 of the gap in ns: up to ~18 minutes */
#define SUB 16      /* steps per power of two, for the percentiles */
#define SAMPLES_PER_CPU 65536u /* --samples: kept per CPU, the rest counted */

struct gap_sample {
	uint64_t at, gap; /* CLOCK_MONOTONIC ns at the gap's end; its length */
};

struct cpu_noise {
	uint64_t measured, noise, max, gaps, preempted;
	uint64_t hist[NBUCKETS * SUB];
	struct gap_sample *samples; /* --samples only */
	uint64_t nsamples, dropped;
};

struct noise_run {
	uint64_t slice, threshold, trace_above;
	uint64_t rest; /* --rest: between slices; 0: continuous */
	int marker_fd; /* the trace buffer's marker file, or -1 */
	_Atomic int tripped; /* a gap above trace_above was seen */
	_Atomic int trip_cpu;
	_Atomic uint64_t trip_gap;
	char policy[64]; /* of the threads that measured */
	bool other; /* --priority other: the tool's own SCHED_OTHER threads */
	struct cpu_noise *cpu; /* nr_cpu_ids, each written by its own hog */
};

/* Ctrl-C or a service manager's stop: end the run, and report what was
 * measured (oslat prints its summary and exits 0 too).  Atomic, not
 * volatile sig_atomic_t: the hogs read it while they measure (a
 * lock-free atomic store is async-signal-safe). */
static _Atomic int interrupted;

static const double pct[] = { 50, 90, 99, 99.9, 99.99 };
#define NPCT (sizeof(pct) / sizeof(pct[0]))

/* The step of @ns: its power of two, then the next 4 bits below it. */
static unsigned int step(uint64_t ns)
{
	unsigned int b = 63u - (unsigned int)__builtin_clzll(ns | 1), sub;

	if (b >= NBUCKETS)
		return NBUCKETS * SUB - 1;
	sub = b >= 4 ? (unsigned int)(ns >> (b - 4)) & (SUB - 1)
		     : (unsigned int)(ns << (4 - b)) & (SUB - 1);
	return b * SUB + sub;
}

/* The upper edge of step @i (exclusive), in ns. */
static uint64_t step_end(unsigned int i)
{
	unsigned int b = i / SUB, sub = i % SUB;

	if (b >= 4)
		return (uint64_t)(SUB + 1 + sub) << (b - 4);
	return ((uint64_t)(SUB + sub) >> (4 - b)) + 1;
}

/* The @p-th percentile of @c's gaps: the upper edge of the step that
 * holds it, no more than the longest gap. */
static uint64_t percentile(const struct cpu_noise *c, double p)
{
	uint64_t rank = (uint64_t)((double)c->gaps * p / 100.0 + 0.999999), seen = 0;
	unsigned int i;

	if (!c->gaps)
		return 0;
	rank = rank ? rank : 1;
	for (i = 0; i < NBUCKETS * SUB; i++) {
		seen += c->hist[i];
		if (seen >= rank)
			return step_end(i) < c->max ? step_end(i) : c->max;
	}
	return c->max;
}

/* Power-of-two bucket @b of the display: the sum of its steps. */
static uint64_t bucket_count(const struct cpu_noise *c, unsigned int b)
{
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i < SUB; i++)
		n += c->hist[b * SUB + i];
	return n;
}

/* Recorded by the hog of the CPU: a gap above the threshold. */
static void record(struct noise_run *run, struct cpu_noise *c, uint64_t t,
		   uint64_t gap)
{
	c->noise += gap;
	c->gaps++;
	c->hist[step(gap)]++;
	if (gap > c->max)
		c->max = gap;
	if (c->samples) {
		if (c->nsamples < SAMPLES_PER_CPU)
			c->samples[c->nsamples++] = (struct gap_sample){ t, gap };
		else
			c->dropped++;
	}
	if (run->marker_fd >= 0 && gap > run->trace_above &&
	    !atomic_exchange(&run->tripped, 1)) {
		char m[128];
		int n = snprintf(m, sizeof(m),
				 "cpuhog noise: CPU %d gap %llu ns above %llu ns\n",
				 sched_getcpu(), (unsigned long long)gap,
				 (unsigned long long)run->trace_above);

		/* the marker, written where the gap was seen: the trace
		 * shows it right after what caused the gap (a write to the
		 * marker takes no lock that sleeps) */
		(void)!write(run->marker_fd, m, (size_t)n);
		atomic_store(&run->trip_cpu, sched_getcpu());
		atomic_store(&run->trip_gap, gap);
	}
}

static long involuntary_switches(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? 0 : ru.ru_nivcsw;
}

/* One slice on this CPU: every gap between two clock reads above the
 * threshold is time something else had the CPU.  The slice ends early
 * once any CPU saw a gap above --trace-above. */
static int sample(void *arg)
{
	struct noise_run *run = arg;
	struct cpu_noise *c = &run->cpu[sched_getcpu()];
	long switches = involuntary_switches();
	uint64_t t0 = tool_now_ns(), prev = t0, t = t0;
	unsigned int k = 0;

	while (t - t0 < run->slice) {
		uint64_t gap;

		t = tool_now_ns();
		gap = t - prev;
		if (gap > run->threshold) {
			record(run, c, t, gap);
			/* relaxed: only ends the slice sooner */
			if (atomic_load_explicit(&run->tripped,
						 memory_order_relaxed))
				break;
		}
		/* a signal, or a trip on another CPU, ends a continuous run
		 * too; relaxed, and only every 4096 reads */
		if ((++k & 4095) == 0 &&
		    (atomic_load_explicit(&interrupted, memory_order_relaxed) ||
		     atomic_load_explicit(&run->tripped, memory_order_relaxed)))
			break;
		prev = t;
	}
	c->measured += t - t0;
	c->preempted += (uint64_t)(involuntary_switches() - switches);
	return 0;
}

/* Bucket @b holds gaps in [2^b, 2^(b+1)), and only those above the
 * threshold: its first bucket starts there. */
static uint64_t bucket_from(const struct noise_run *run, unsigned int b)
{
	return (1ull << b) > run->threshold ? 1ull << b : run->threshold;
}

/* The histogram, one line a bucket; on a terminal with a bar of up to
 * 40 '#' (the fullest bucket), the way latency histograms are read. */
static void show_hist(const struct noise_run *run, const struct cpu_noise *c,
		      bool bars)
{
	char lo[32], hi[32];
	uint64_t most = 0;
	unsigned int b;
	int w;

	for (b = 0; b < NBUCKETS; b++)
		most = bucket_count(c, b) > most ? bucket_count(c, b) : most;
	for (b = 0; b < NBUCKETS; b++) {
		uint64_t n = bucket_count(c, b);

		if (!n)
			continue;
		format_duration(bucket_from(run, b), lo, sizeof(lo));
		format_duration(2ull << b, hi, sizeof(hi));
		printf("    [%9s, %9s) %10llu", lo, hi, (unsigned long long)n);
		w = (int)((n * 40 + most - 1) / most);
		if (bars)
			printf("  %.*s", w,
			       "########################################");
		printf("\n");
	}
}

/* "p50 1.2 us  p90 ..." of @c's gaps. */
static void show_percentiles(const struct cpu_noise *c)
{
	char v[32];
	size_t i;

	printf("    gaps");
	for (i = 0; i < NPCT; i++) {
		format_duration(percentile(c, pct[i]), v, sizeof(v));
		printf("  p%g %s", pct[i], v);
	}
	printf("\n");
}

static double pct_of(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_text(const struct noise_run *run, const struct tool_set *set,
		       const struct noise_src *src, uint64_t wall)
{
	char noise[32], max[32], th[32];
	bool bars = isatty(1);
	int cpu;

	format_duration(run->threshold, th, sizeof(th));
	printf("%-5s %10s %12s %8s %11s %11s %8s\n", "CPU", "measured",
	       "noise", "noise%", "available", "max gap", "gaps");
	for (cpu = 0; cpu < (int)set->ids; cpu++) {
		const struct cpu_noise *c = &run->cpu[cpu];

		if (!CPU_ISSET_S(cpu, set->size, set->set))
			continue;
		format_duration(c->noise, noise, sizeof(noise));
		format_duration(c->max, max, sizeof(max));
		printf("%-5d %8.3f s %12s %7.4f%% %10.4f%% %11s %8llu\n", cpu,
		       c->measured / 1e9, noise, pct_of(c->noise, c->measured),
		       c->measured ? 100.0 - pct_of(c->noise, c->measured) : 0.0,
		       max, (unsigned long long)c->gaps);
		if (c->gaps)
			show_percentiles(c);
		printf("    sources: preempted %llu",
		       (unsigned long long)c->preempted);
		if (src)
			noise_src_text(src, (unsigned int)cpu, 6);
		printf("\n");
		show_hist(run, c, bars);
	}
	printf("(gaps above %s between two clock reads in %s at %s, %s; "
	       "sources: the kernel's counts on the CPU over the run%s)\n",
	       th, run->other ? "a pinned thread" : "a hog", run->policy,
	       run->rest ? "in 100 ms slices" : "continuously",
	       src ? "" : ", which could not be read");
	/* the rests between slices are not measured: say how much was */
	for (cpu = 0; cpu < (int)set->ids; cpu++)
		if (CPU_ISSET_S(cpu, set->size, set->set) && wall) {
			printf("(measured %.3f s of %.3f s wall time, %.1f%%%s)\n",
			       run->cpu[cpu].measured / 1e9, wall / 1e9,
			       pct_of(run->cpu[cpu].measured, wall),
			       atomic_load(&run->tripped)
				       ? "; ended by a gap above --trace-above"
			       : interrupted ? "; ended early by a signal"
					     : "");
			break;
		}
}

static void print_json_cpu(const struct noise_run *run,
			   const struct cpu_noise *c, int cpu,
			   const struct noise_src *src)
{
	unsigned int b;
	size_t i;
	int sep;

	printf("{\"cpu\": %d, \"measured_ns\": %llu, \"noise_ns\": %llu, "
	       "\"noise_pct\": %.4f, \"available_pct\": %.4f, "
	       "\"max_gap_ns\": %llu, \"gaps\": %llu, \"preempted\": %llu, "
	       "\"percentiles_ns\": {",
	       cpu, (unsigned long long)c->measured,
	       (unsigned long long)c->noise, pct_of(c->noise, c->measured),
	       c->measured ? 100.0 - pct_of(c->noise, c->measured) : 0.0,
	       (unsigned long long)c->max, (unsigned long long)c->gaps,
	       (unsigned long long)c->preempted);
	for (i = 0; i < NPCT; i++)
		printf("%s\"%g\": %llu", i ? ", " : "", pct[i],
		       (unsigned long long)percentile(c, pct[i]));
	printf("}, \"sources\": ");
	if (src)
		noise_src_json(src, (unsigned int)cpu, stdout);
	else
		printf("null");
	printf(", \"histogram\": [");
	for (b = 0, sep = 0; b < NBUCKETS; b++)
		if (bucket_count(c, b))
			printf("%s{\"from_ns\": %llu, \"to_ns\": %llu, "
			       "\"count\": %llu}",
			       sep++ ? ", " : "",
			       (unsigned long long)bucket_from(run, b),
			       2ull << b,
			       (unsigned long long)bucket_count(c, b));
	printf("]");
	if (c->samples)
		printf(", \"samples\": %llu, \"samples_dropped\": %llu",
		       (unsigned long long)c->nsamples,
		       (unsigned long long)c->dropped);
	printf("}");
}

static void print_json(const struct noise_run *run, const struct tool_set *set,
		       const struct noise_src *src, uint64_t duration)
{
	int cpu, first = 1;

	printf("{\"duration_ns\": %llu, \"threshold_ns\": %llu, "
	       "\"rest_ns\": %llu, \"ended_by\": \"%s\", \"policy\": ",
	       (unsigned long long)duration,
	       (unsigned long long)run->threshold,
	       (unsigned long long)run->rest,
	       atomic_load(&run->tripped) ? "trace-above"
	       : interrupted		  ? "signal"
					  : "duration");
	json_string(stdout, run->policy);
	if (atomic_load(&run->tripped))
		printf(", \"trace_cpu\": %d, \"trace_gap_ns\": %llu",
		       atomic_load(&run->trip_cpu),
		       (unsigned long long)atomic_load(&run->trip_gap));
	printf(", \"cpus\": [");
	for (cpu = 0; cpu < (int)set->ids; cpu++) {
		if (!CPU_ISSET_S(cpu, set->size, set->set))
			continue;
		printf("%s\n  ", first ? "" : ",");
		first = 0;
		print_json_cpu(run, &run->cpu[cpu], cpu, src);
	}
	printf("\n]}\n");
}

/* --samples: every gap kept, as CSV, oldest first per CPU. */
static int write_samples(FILE *f, const struct noise_run *run,
			 const struct tool_set *set)
{
	uint64_t i;
	int cpu;

	fprintf(f, "cpu,monotonic_ns,gap_ns\n");
	for (cpu = 0; cpu < (int)set->ids; cpu++) {
		const struct cpu_noise *c = &run->cpu[cpu];

		if (!CPU_ISSET_S(cpu, set->size, set->set) || !c->samples)
			continue;
		for (i = 0; i < c->nsamples; i++)
			fprintf(f, "%d,%llu,%llu\n", cpu,
				(unsigned long long)c->samples[i].at,
				(unsigned long long)c->samples[i].gap);
		if (c->dropped)
			fprintf(f, "# CPU %d: %llu more gaps not kept (%u per CPU)\n",
				cpu, (unsigned long long)c->dropped,
				SAMPLES_PER_CPU);
	}
	return fclose(f) ? -errno : 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cpuhog noise -c LIST -D DURATION [-T THRESHOLD] [-j]\n"
		"                    [--rest R] [-P PRIORITY] [--force]\n"
		"                    [--samples FILE] [--trace-above T]\n"
		"  OS noise on each CPU, measured continuously from inside a hog\n"
		"  -c, --cpus LIST        CPUs as for taskset -c, or 'all'\n"
		"  -D, --duration D       how long to measure (10s, 1m, 2h);\n"
		"                         Ctrl-C ends it early\n"
		"  -T, --threshold T      count gaps above T (default 1us)\n"
		"  -j, --json             the figures as JSON\n"
		"      --rest R           measure in 100 ms slices with R between\n"
		"                         them (the rests, not measured, leave the\n"
		"                         CPUs to the rest of the machine)\n"
		"  -P, --priority N       measure at SCHED_FIFO N (1-99, default 99),\n"
		"                         or 0 / 'other': SCHED_OTHER, in pinned\n"
		"                         threads of the tool's own\n"
		"  -F, --force            on every CPU at a real-time priority: allow\n"
		"                         a continuous run over 500 ms, or rests\n"
		"                         shorter than the 100 ms slices\n"
		"      --samples FILE     every gap (CPU, CLOCK_MONOTONIC ns, length)\n"
		"                         as CSV, up to %u per CPU\n"
		"      --trace-above T    at the first gap above T: a marker into the\n"
		"                         kernel's trace buffer, tracing stopped, the\n"
		"                         run ended (as oslat's and rtla's -T)\n"
		"  -h, --help             this text\n",
		SAMPLES_PER_CPU);
}

/* The kernel's trace files, wherever tracefs is mounted. */
static int open_trace(const char *name, char *path, size_t size)
{
	static const char *const dirs[] = { "/sys/kernel/tracing",
					    "/sys/kernel/debug/tracing" };
	size_t i;
	int fd = -1;

	for (i = 0; i < 2 && fd < 0; i++) {
		snprintf(path, size, "%s/%s", dirs[i], name);
		fd = open(path, O_WRONLY | O_CLOEXEC);
	}
	return fd;
}

/* A marker written while tracing is off goes nowhere: say so. */
static void warn_if_off(const char *on_path)
{
	char c = '1';
	int fd = open(on_path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && read(fd, &c, 1) == 1 && c == '0')
		fprintf(stderr, "cpuhog noise: tracing is off (%s is 0): the "
				"marker will not be recorded\n",
			on_path);
	if (fd >= 0)
		close(fd);
}

/* After the run: tracing off where a gap tripped it, and say so. */
static void trace_tripped(const struct noise_run *run, int on_fd,
			  const char *dir)
{
	char gap[32];

	if (!atomic_load(&run->tripped))
		return;
	(void)!write(on_fd, "0", 1);
	format_duration(atomic_load(&run->trip_gap), gap, sizeof(gap));
	fprintf(stderr,
		"cpuhog noise: a gap of %s on CPU %d: tracing stopped; the "
		"marker \"cpuhog noise: CPU %d gap ...\" is in %s/trace\n",
		gap, atomic_load(&run->trip_cpu), atomic_load(&run->trip_cpu),
		dir);
}

static void on_stop(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void catch_stops(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* The options into @run and the rest; EXIT_OK to go on, else the exit. */
struct noise_opts {
	const char *cpus, *samples;
	uint64_t duration;
	int json, trace, force;
	int priority; /* SCHED_FIFO 1-99; 0: SCHED_OTHER (run->other) */
};

/* --priority: 1-99 (SCHED_FIFO), or 0 / "other" (SCHED_OTHER). */
static int parse_priority(const char *s, int *prio)
{
	char *end;
	long v;

	if (!strcmp(s, "other")) {
		*prio = 0;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < 0 || v > 99) {
		fprintf(stderr, "cpuhog noise: --priority takes 1 to 99 "
				"(SCHED_FIFO), or 0 or 'other' (SCHED_OTHER), "
				"not '%s'\n",
			s);
		return -1;
	}
	*prio = (int)v;
	return 0;
}

static int noise_options(int argc, char **argv, struct noise_run *run,
			 struct noise_opts *o)
{
	enum { OPT_SAMPLES = 256, OPT_TRACE, OPT_REST };
	static const struct option lo[] = {
		{ "cpus", required_argument, 0, 'c' },
		{ "duration", required_argument, 0, 'D' },
		{ "threshold", required_argument, 0, 'T' },
		{ "json", no_argument, 0, 'j' },
		{ "samples", required_argument, 0, OPT_SAMPLES },
		{ "trace-above", required_argument, 0, OPT_TRACE },
		{ "rest", required_argument, 0, OPT_REST },
		{ "priority", required_argument, 0, 'P' },
		{ "force", no_argument, 0, 'F' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;

	optind = 1;
	o->priority = 99;
	while ((c = getopt_long(argc, argv, "c:D:T:jP:Fh", lo, NULL)) != -1) {
		switch (c) {
		case 'c': o->cpus = optarg; break;
		case 'D':
			if (tool_duration("noise", "--duration", optarg,
					  &o->duration))
				return EXIT_USAGE;
			break;
		case 'T':
			if (tool_duration("noise", "--threshold", optarg,
					  &run->threshold))
				return EXIT_USAGE;
			break;
		case 'j': o->json = 1; break;
		case OPT_SAMPLES: o->samples = optarg; break;
		case OPT_TRACE:
			if (tool_duration("noise", "--trace-above", optarg,
					  &run->trace_above))
				return EXIT_USAGE;
			o->trace = 1;
			break;
		case OPT_REST:
			if (tool_duration("noise", "--rest", optarg,
					  &run->rest))
				return EXIT_USAGE;
			break;
		case 'P':
			if (parse_priority(optarg, &o->priority))
				return EXIT_USAGE;
			run->other = !o->priority;
			break;
		case 'F': o->force = 1; break;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cpuhog noise: unexpected argument '%s'\n",
			argv[optind]);
		return EXIT_USAGE;
	}
	if (!o->cpus || !o->duration || !run->threshold) {
		fprintf(stderr, "cpuhog noise: %s\n",
			!o->cpus      ? "needs --cpus LIST (-c)"
			: !o->duration ? "needs --duration D (-D), above 0"
				       : "needs a --threshold above 0");
		return EXIT_USAGE;
	}
	if (o->trace && run->trace_above < run->threshold) {
		fprintf(stderr, "cpuhog noise: --trace-above must be at least "
				"the --threshold\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/*
 * A continuous run at a real-time policy longer than the kernel's RT
 * budget: say before it starts that RT throttling (from Linux 6.12 the
 * fair server, which runs waiting SCHED_OTHER tasks only as long as they
 * need) will hold each hog off its CPU for up to the rest of every
 * period, and that those gaps will count.
 */
static void say_throttling(uint64_t duration)
{
	long runtime = -1, period = 0;
	struct cpuhog_info in;
	FILE *f;

	if (cpuhog_get_info(&in) < 0 ||
	    (in.policy != SCHED_FIFO && in.policy != SCHED_RR))
		return;
	if ((f = fopen("/proc/sys/kernel/sched_rt_runtime_us", "re"))) {
		if (fscanf(f, "%ld", &runtime) != 1)
			runtime = -1;
		fclose(f);
	}
	if ((f = fopen("/proc/sys/kernel/sched_rt_period_us", "re"))) {
		if (fscanf(f, "%ld", &period) != 1)
			period = 0;
		fclose(f);
	}
	if (runtime < 0 || period <= 0 || runtime >= period ||
	    duration <= (uint64_t)runtime * 1000)
		return;
	fprintf(stderr,
		"cpuhog noise: RT throttling lets a real-time thread run %ld "
		"ms of every %ld ms: past that, SCHED_OTHER tasks waiting for "
		"the CPU get up to %ld ms a period (from Linux 6.12 through "
		"the fair server, as long as they need), and those gaps count "
		"as noise (sched_rt_runtime_us -1 lifts RT throttling; from "
		"6.12 the fair server stays unless its runtime in "
		"/sys/kernel/debug/sched/fair_server/ is 0; --rest 20ms "
		"measures in 100 ms slices instead)\n",
		runtime / 1000, period / 1000, (period - runtime) / 1000);
}

/*
 * Every hogged CPU at a real-time priority: the run stops the machine for
 * as long as it measures (throttling aside).  As stall's rules, without
 * --force: at most 500 ms at a stretch, and at most half the time (rests
 * at least as long as the slices).  EXIT_USAGE after a message.
 */
static int holds_all(const struct noise_opts *o, const struct noise_run *run,
		     int all)
{
	struct cpuhog_info in;

	if (o->force || !all || run->other || cpuhog_get_info(&in) < 0 ||
	    (in.policy != SCHED_FIFO && in.policy != SCHED_RR))
		return EXIT_OK;
	if (!run->rest && o->duration > TOOL_MAX_HOLD_NS) {
		fprintf(stderr, "cpuhog noise: a continuous run over 500 ms on "
				"every CPU at a real-time priority freezes the "
				"machine; measure fewer CPUs, add --rest 100ms, "
				"or add --force\n");
		return EXIT_USAGE;
	}
	if (run->rest && run->rest < SLICE_NS && o->duration > SLICE_NS) {
		fprintf(stderr, "cpuhog noise: 100 ms slices on every CPU with "
				"rests under 100 ms hold the machine more than "
				"half the time; add --force if you mean it\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Each measured CPU's sample buffer, for --samples. */
static int alloc_samples(struct noise_run *run, const struct tool_set *set)
{
	int cpu;

	for (cpu = 0; cpu < (int)set->ids; cpu++)
		if (CPU_ISSET_S(cpu, set->size, set->set) &&
		    !(run->cpu[cpu].samples = calloc(SAMPLES_PER_CPU,
						     sizeof(struct gap_sample))))
			return -1;
	return 0;
}

static void *other_main(void *arg)
{
	sample(arg);
	return NULL;
}

/* --priority other: one slice on every CPU of @set, in a thread of ours
 * per CPU, pinned before it starts, at SCHED_OTHER.  0 or -errno. */
static int other_cpus(const struct tool_set *set, struct noise_run *run)
{
	pthread_t *t = calloc(set->ids, sizeof(*t));
	bool *made = calloc(set->ids, sizeof(*made));
	cpu_set_t *one = CPU_ALLOC(set->ids);
	pthread_attr_t attr;
	unsigned int cpu;
	int r = 0;

	if (!t || !made || !one || pthread_attr_init(&attr)) {
		r = -ENOMEM;
		goto out;
	}
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	for (cpu = 0; cpu < set->ids && !r; cpu++) {
		if (!CPU_ISSET_S(cpu, set->size, set->set))
			continue;
		CPU_ZERO_S(set->size, one);
		CPU_SET_S(cpu, set->size, one);
		r = -pthread_attr_setaffinity_np(&attr, set->size, one);
		if (!r)
			r = -pthread_create(&t[cpu], &attr, other_main, run);
		made[cpu] = !r;
	}
	for (cpu = 0; cpu < set->ids; cpu++)
		if (made[cpu])
			pthread_join(t[cpu], NULL);
	pthread_attr_destroy(&attr);
out:
	CPU_FREE(one);
	free(made);
	free(t);
	return r;
}

/* Until the duration, a signal or a trace trip: in one slice (continuous)
 * or, with --rest, in slices with rests between; 0 or the exit. */
static int measure(struct noise_run *run, const struct tool_set *set,
		   uint64_t duration, bool progress)
{
	uint64_t done = 0, most = run->rest ? SLICE_NS : duration;
	int r;

	progress = progress && run->rest; /* a continuous run has no steps */
	while (done < duration && !interrupted && !atomic_load(&run->tripped)) {
		run->slice = duration - done < most ? duration - done : most;
		r = run->other ? other_cpus(set, run)
			       : hog_cpus(set->size, set->set, sample, run);
		if (r < 0) {
			fprintf(stderr, "cpuhog noise: %s: %s\n",
				run->other ? "a measuring thread" : "hog_cpus",
				strerror(-r));
			return EXIT_RUNTIME;
		}
		done += run->slice;
		if (progress)
			fprintf(stderr, "\rnoise: %.1f of %.1f s", done / 1e9,
				duration / 1e9);
		if (done < duration && !interrupted && !atomic_load(&run->tripped))
			nanosleep(&(struct timespec){
					  (time_t)(run->rest / 1000000000ull),
					  (long)(run->rest % 1000000000ull) },
				  NULL); /* the rest; a signal cuts it short */
	}
	if (progress)
		fprintf(stderr, "\r%40s\r", "");
	return 0;
}

static void free_run(struct noise_run *run, const struct tool_set *set)
{
	unsigned int cpu;

	for (cpu = 0; run->cpu && cpu < set->ids; cpu++)
		free(run->cpu[cpu].samples);
	free(run->cpu);
	if (run->marker_fd >= 0)
		close(run->marker_fd);
}

int cmd_noise(int argc, char **argv)
{
	static struct noise_run run;
	struct noise_opts o = { 0 };
	struct noise_src before, after, *src = NULL;
	char trace_path[128] = "";
	FILE *samples = NULL;
	struct cpuhog_attr a;
	struct tool_set set;
	int all, r, on_fd = -1;
	uint64_t t0;

	run.threshold = 1000;
	run.marker_fd = -1;
	r = noise_options(argc, argv, &run, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	/* what can fail on the user's input, before anything is measured */
	if (o.samples && !(samples = fopen(o.samples, "we"))) {
		fprintf(stderr, "cpuhog noise: cannot write %s: %s\n",
			o.samples, strerror(errno));
		return EXIT_USAGE;
	}
	if (o.trace) {
		run.marker_fd = open_trace("trace_marker", trace_path,
					   sizeof(trace_path));
		on_fd = open_trace("tracing_on", trace_path,
				   sizeof(trace_path));
		if (run.marker_fd < 0 || on_fd < 0) {
			fprintf(stderr, "cpuhog noise: --trace-above needs the "
					"kernel's trace files (tracefs mounted, "
					"root): %s: %s\n",
				trace_path, strerror(errno));
			return EXIT_RUNTIME;
		}
		warn_if_off(trace_path);
		*strrchr(trace_path, '/') = '\0';
	}
	catch_stops(); /* from here a signal ends the run with its summary */
	cpuhog_attr_init(&a);
	/* without real time it measures all the same, and says so */
	a.flags = CPUHOG_F_WEAK;
	a.priority = o.priority ? o.priority : 0;
	/* a slice is long on purpose: no overrun report for it */
	a.overrun_ns = (run.rest ? SLICE_NS : o.duration) + 1000000000ull;
	if (tool_start(&a) < 0) {
		fprintf(stderr, "cpuhog noise: cannot start the hogs\n");
		return EXIT_RUNTIME;
	}
	r = tool_cpus("noise", o.cpus, &set, &all);
	if (r < 0)
		return -r;
	r = holds_all(&o, &run, all);
	if (r) { /* refused (--force): nothing measured */
		CPU_FREE(set.set);
		return r;
	}
	if (run.other) {
		snprintf(run.policy, sizeof(run.policy), "SCHED_OTHER nice %d",
			 getpriority(PRIO_PROCESS, 0));
		fprintf(stderr, "cpuhog noise: pinned threads at %s: other "
				"threads share the measured CPUs, so the gaps "
				"include the scheduler's sharing\n",
			run.policy);
	} else {
		tool_say_priority("noise", "other threads share the measured "
					   "CPUs, so the gaps are the "
					   "scheduler's sharing, not the "
					   "machine's noise");
		tool_policy(run.policy, sizeof(run.policy));
		if (!run.rest)
			say_throttling(o.duration);
	}
	run.cpu = calloc(set.ids, sizeof(*run.cpu));
	if (!run.cpu || (samples && alloc_samples(&run, &set))) {
		fprintf(stderr, "cpuhog noise: out of memory\n");
		return EXIT_RUNTIME;
	}
	if (noise_src_read(&before, set.ids) == 0)
		src = &after;
	t0 = tool_now_ns();
	r = measure(&run, &set, o.duration,
		    isatty(2) && o.duration > 2000000000ull && !o.json);
	if (r)
		return r;
	trace_tripped(&run, on_fd, trace_path);
	if (src && noise_src_read(&after, set.ids) == 0)
		noise_src_delta(&after, &before);
	else
		src = NULL;
	if (o.json)
		print_json(&run, &set, src, tool_now_ns() - t0);
	else
		print_text(&run, &set, src, tool_now_ns() - t0);
	if (samples && (r = write_samples(samples, &run, &set)) < 0) {
		fprintf(stderr, "cpuhog noise: %s: %s\n", o.samples,
			strerror(-r));
		return EXIT_RUNTIME;
	}
	cpuhog_shutdown();
	noise_src_free(&before);
	noise_src_free(&after);
	free_run(&run, &set);
	if (on_fd >= 0)
		close(on_fd);
	CPU_FREE(set.set);
	return EXIT_OK;
}
