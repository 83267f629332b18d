/* SPDX-License-Identifier: MIT */
/*
 * cpuhog noise --cpus LIST --duration D [--threshold T] [--json]
 *
 * Operating-system noise, measured from inside a hog: on each CPU a hog
 * reads the clock in a tight loop and records every gap above the
 * threshold (an interrupt, a kernel thread, the hypervisor: whatever
 * outranks a SCHED_FIFO 99 thread).  The run is cut into 100 ms hogs with
 * 20 ms between them, so that no hog comes near the RT throttling budget
 * and the rest of the machine keeps running.  The peer is rt-tests'
 * oslat on the same CPUs for the same time.
 */
#include "tool.h"

#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLICE_NS 100000000ull
#define REST_NS 20000000ull
#define NBUCKETS 40 /* log2 of the gap in ns: up to ~18 minutes */

struct cpu_noise {
	uint64_t measured, noise, max, gaps;
	uint64_t hist[NBUCKETS];
};

struct noise_run {
	uint64_t slice, threshold;
	char policy[64]; /* of the hogs that measured */
	struct cpu_noise *cpu; /* nr_cpu_ids, each written by its own hog */
};

static unsigned int bucket(uint64_t ns)
{
	unsigned int b = 63u - (unsigned int)__builtin_clzll(ns | 1);

	return b < NBUCKETS ? b : NBUCKETS - 1;
}

/* One slice on this CPU: every gap between two clock reads above the
 * threshold is time something else had the CPU. */
static int sample(void *arg)
{
	struct noise_run *run = arg;
	struct cpu_noise *c = &run->cpu[sched_getcpu()];
	uint64_t t0 = tool_now_ns(), prev = t0, t = t0;

	while (t - t0 < run->slice) {
		uint64_t gap;

		t = tool_now_ns();
		gap = t - prev;
		if (gap > run->threshold) {
			c->noise += gap;
			c->gaps++;
			c->hist[bucket(gap)]++;
			if (gap > c->max)
				c->max = gap;
		}
		prev = t;
	}
	c->measured += t - t0;
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
		most = c->hist[b] > most ? c->hist[b] : most;
	for (b = 0; b < NBUCKETS; b++) {
		if (!c->hist[b])
			continue;
		format_duration(bucket_from(run, b), lo, sizeof(lo));
		format_duration(2ull << b, hi, sizeof(hi));
		printf("    [%9s, %9s) %10llu", lo, hi,
		       (unsigned long long)c->hist[b]);
		w = (int)((c->hist[b] * 40 + most - 1) / most);
		if (bars)
			printf("  %.*s", w,
			       "########################################");
		printf("\n");
	}
}

/* Ctrl-C or a service manager's stop: end the run, and report what was
 * measured (oslat prints its summary and exits 0 too). */
static volatile sig_atomic_t interrupted;

static void print_text(const struct noise_run *run, const struct tool_set *set,
		       uint64_t wall)
{
	char noise[32], max[32], th[32];
	bool bars = isatty(1);
	int cpu;

	format_duration(run->threshold, th, sizeof(th));
	printf("%-5s %10s %12s %11s %11s %8s\n", "CPU", "measured", "noise",
	       "available", "max gap", "gaps");
	for (cpu = 0; cpu < (int)set->ids; cpu++) {
		const struct cpu_noise *c = &run->cpu[cpu];

		if (!CPU_ISSET_S(cpu, set->size, set->set))
			continue;
		format_duration(c->noise, noise, sizeof(noise));
		format_duration(c->max, max, sizeof(max));
		printf("%-5d %8.3f s %12s %10.4f%% %11s %8llu\n", cpu,
		       c->measured / 1e9, noise,
		       c->measured ? 100.0 * (double)(c->measured - c->noise) /
					     (double)c->measured
				   : 0.0,
		       max, (unsigned long long)c->gaps);
		show_hist(run, c, bars);
	}
	printf("(gaps above %s between two clock reads in a hog at %s)\n", th,
	       run->policy);
	/* the rests between slices are not measured: say how much was */
	for (cpu = 0; cpu < (int)set->ids; cpu++)
		if (CPU_ISSET_S(cpu, set->size, set->set) && wall) {
			printf("(measured %.3f s of %.3f s wall time, %.1f%%%s)\n",
			       run->cpu[cpu].measured / 1e9, wall / 1e9,
			       100.0 * (double)run->cpu[cpu].measured /
				       (double)wall,
			       interrupted ? "; ended early by a signal" : "");
			break;
		}
}

static void print_json(const struct noise_run *run, const struct tool_set *set,
		       uint64_t duration)
{
	int cpu, first = 1, sep;
	unsigned int b;

	printf("{\"duration_ns\": %llu, \"threshold_ns\": %llu, \"policy\": ",
	       (unsigned long long)duration,
	       (unsigned long long)run->threshold);
	json_string(stdout, run->policy);
	printf(", \"cpus\": [");
	for (cpu = 0; cpu < (int)set->ids; cpu++) {
		const struct cpu_noise *c = &run->cpu[cpu];

		if (!CPU_ISSET_S(cpu, set->size, set->set))
			continue;
		printf("%s\n  {\"cpu\": %d, \"measured_ns\": %llu, "
		       "\"noise_ns\": %llu, \"available_pct\": %.4f, "
		       "\"max_gap_ns\": %llu, \"gaps\": %llu, \"histogram\": [",
		       first ? "" : ",", cpu, (unsigned long long)c->measured,
		       (unsigned long long)c->noise,
		       c->measured ? 100.0 * (double)(c->measured - c->noise) /
					     (double)c->measured
				   : 0.0,
		       (unsigned long long)c->max, (unsigned long long)c->gaps);
		first = 0;
		for (b = 0, sep = 0; b < NBUCKETS; b++)
			if (c->hist[b]) {
				printf("%s{\"from_ns\": %llu, \"to_ns\": %llu, "
				       "\"count\": %llu}",
				       sep++ ? ", " : "",
				       (unsigned long long)bucket_from(run, b),
				       2ull << b,
				       (unsigned long long)c->hist[b]);
			}
		printf("]}");
	}
	printf("\n]}\n");
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cpuhog noise -c LIST -D DURATION [-T THRESHOLD] [-j]\n"
		"  OS noise on each CPU, from inside a hog\n"
		"  -c, --cpus LIST        CPUs as for taskset -c, or 'all'\n"
		"  -D, --duration D       how long to measure (10s, 1m, 2h; a bare\n"
		"                         number is seconds); Ctrl-C ends it early\n"
		"  -T, --threshold T      count gaps above T (default 1us)\n"
		"  -j, --json             the figures as JSON\n"
		"  -h, --help             this text\n");
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

int cmd_noise(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "cpus", required_argument, 0, 'c' },
		{ "duration", required_argument, 0, 'D' },
		{ "threshold", required_argument, 0, 'T' },
		{ "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	static struct noise_run run;
	const char *cpus = NULL;
	uint64_t duration = 0, done = 0, t0;
	struct cpuhog_attr a;
	struct tool_set set;
	int json = 0, all, c, r, progress;

	run.threshold = 1000;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:D:T:jh", lo, NULL)) != -1) {
		switch (c) {
		case 'c': cpus = optarg; break;
		case 'D':
			if (tool_duration("noise", "--duration", optarg, &duration))
				return EXIT_USAGE;
			break;
		case 'T':
			if (tool_duration("noise", "--threshold", optarg,
					  &run.threshold))
				return EXIT_USAGE;
			break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind < argc || !cpus || !duration || !run.threshold) {
		if (optind < argc)
			fprintf(stderr, "cpuhog noise: unexpected argument '%s'\n",
				argv[optind]);
		else
			fprintf(stderr, "cpuhog noise: %s\n",
				!cpus	    ? "needs --cpus LIST (-c)"
				: !duration ? "needs --duration D (-D), above 0"
					    : "needs a --threshold above 0");
		return EXIT_USAGE;
	}
	cpuhog_attr_init(&a);
	a.overrun_ns = SLICE_NS * 2; /* a slice is long on purpose */
	if (cpuhog_init(&a) < 0) {
		fprintf(stderr, "cpuhog noise: cannot start the hogs\n");
		return EXIT_RUNTIME;
	}
	r = tool_cpus("noise", cpus, &set, &all);
	if (r < 0)
		return -r;
	tool_say_priority("noise", "other threads share the measured CPUs, so "
				   "the gaps are the scheduler's sharing, not the "
				   "machine's noise");
	tool_policy(run.policy, sizeof(run.policy));
	run.cpu = calloc(set.ids, sizeof(*run.cpu));
	if (!run.cpu) {
		fprintf(stderr, "cpuhog noise: out of memory\n");
		return EXIT_RUNTIME;
	}
	progress = isatty(2) && duration > 2000000000ull && !json;
	catch_stops();
	t0 = tool_now_ns();
	while (done < duration && !interrupted) {
		run.slice = duration - done < SLICE_NS ? duration - done
						       : SLICE_NS;
		r = hog_cpus(set.size, set.set, sample, &run);
		if (r < 0) {
			fprintf(stderr, "cpuhog noise: hog_cpus: %s\n",
				strerror(-r));
			return EXIT_RUNTIME;
		}
		done += run.slice;
		if (progress)
			fprintf(stderr, "\rnoise: %.1f of %.1f s", done / 1e9,
				duration / 1e9);
		if (done < duration && !interrupted)
			usleep(REST_NS / 1000); /* let the machine breathe */
	}
	if (progress)
		fprintf(stderr, "\r%40s\r", "");
	if (json)
		print_json(&run, &set, tool_now_ns() - t0);
	else
		print_text(&run, &set, tool_now_ns() - t0);
	cpuhog_shutdown();
	free(run.cpu);
	CPU_FREE(set.set);
	return EXIT_OK;
}
