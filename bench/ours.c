/* SPDX-License-Identifier: MIT */
/* Our calls, and the same calls with the caller's brief spin turned off. */
#include "bench.h"

#include <errno.h>
#include <string.h>

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

static double timed(int r, uint64_t t0)
{
	uint64_t t1 = tool_now_ns();

	return r < 0 ? r : (double)(t1 - t0); /* -errno: failed */
}

double ours_one_remote(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(hog_one_cpu(bench_place.there, nothing, NULL), t0);
}

static double one_local(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(hog_one_cpu(bench_place.here, nothing, NULL), t0);
}

static double nowait_remote(struct op *op)
{
	struct cpuhog_work w = CPUHOG_WORK_INIT;
	uint64_t t0 = tool_now_ns();

	(void)op;
	if (!hog_one_cpu_nowait(bench_place.there, nothing, NULL, &w))
		return -EAGAIN;
	return timed(hog_work_wait(&w), t0);
}

double ours_cpus_all(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(hog_cpus(sizeof(bench_place.cpus), &bench_place.cpus,
			      nothing, NULL),
		     t0);
}

double ours_stop_all(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(stop_machine(nothing, NULL, 0, NULL), t0);
}

double ours_synchronize(struct op *op)
{
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(hog_synchronize(), t0);
}

/* The same calls with a report asked for, beside the plain rows in the
 * same rounds: what a report costs, and that the plain calls pay
 * nothing for it. */
static struct cpuhog_report_cpu report_cpus[CPU_SETSIZE];
static struct cpuhog_report report;

static struct cpuhog_report *fresh_report(void)
{
	cpuhog_report_init(&report);
	report.cpu = report_cpus;
	report.cpu_len = CPU_SETSIZE;
	return &report;
}

static double cpus_report(struct op *op)
{
	struct cpuhog_report *rep = fresh_report();
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(hog_cpus_report(sizeof(bench_place.cpus),
				     &bench_place.cpus, nothing, NULL, rep),
		     t0);
}

static double stop_report(struct op *op)
{
	struct cpuhog_report *rep = fresh_report();
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(stop_machine_report(nothing, NULL, 0, NULL, rep), t0);
}

static double synchronize_report(struct op *op)
{
	struct cpuhog_report *rep = fresh_report();
	uint64_t t0 = tool_now_ns();

	(void)op;
	return timed(hog_synchronize_report(rep), t0);
}

static const char *need_two(struct op *op)
{
	(void)op;
	return bench_place.here == bench_place.there ? "needs two CPUs" : NULL;
}

/* stop_machine() refuses (-EPERM) without real-time hogs: not a failure
 * of the call, a fact of the machine. */
const char *ours_need_rt(struct op *op)
{
	struct cpuhog_info in;

	(void)op;
	if (cpuhog_get_info(&in) < 0 || in.policy != SCHED_FIFO)
		return "the hogs have no real-time priority (stop_machine "
		       "needs it)";
	return NULL;
}

static const char *stop_busy_setup(struct op *op)
{
	const char *why = ours_need_rt(op);

	return why ? why : busy_setup(op);
}

/* The no-spin variants run on a library initialised without the spin. */
static const char *nospin_setup(struct op *op)
{
	struct cpuhog_attr a;
	const char *why = need_two(op);

	if (!why && op->run == ours_stop_all)
		why = ours_need_rt(op);
	if (why)
		return why;
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.spin_ns = CPUHOG_NO_SPIN;
	return cpuhog_init(&a) == 0 ? NULL : "cpuhog_init failed";
}

/* The flat-wake variants: the caller wakes every hog itself (src/wake.c).
 * Below 5 CPUs the tree is flat too, and the rows measure the same. */
static const char *flat_setup(struct op *op)
{
	struct cpuhog_attr a;
	const char *why = op->run == ours_stop_all ? ours_need_rt(op) : NULL;

	if (why)
		return why;
	cpuhog_shutdown();
	cpuhog_attr_init(&a);
	a.wake_fanout = CPUHOG_WAKE_FLAT;
	return cpuhog_init(&a) == 0 ? NULL : "cpuhog_init failed";
}

static void default_teardown(struct op *op)
{
	(void)op;
	cpuhog_shutdown();
	cpuhog_init(NULL);
}

size_t ours_ops(struct op *ops)
{
	const struct op list[] = {
		{ .name = "hog_one_cpu, other CPU", .setup = need_two,
		  .run = ours_one_remote },
		{ .name = "hog_one_cpu, own CPU", .run = one_local },
		{ .name = "hog_one_cpu_nowait + hog_work_wait",
		  .setup = need_two, .run = nowait_remote },
		{ .name = "hog_cpus, all CPUs", .run = ours_cpus_all },
		{ .name = "hog_cpus_report, all CPUs", .run = cpus_report },
		{ .name = "stop_machine, all CPUs", .setup = ours_need_rt,
		  .run = ours_stop_all },
		{ .name = "stop_machine_report, all CPUs",
		  .setup = ours_need_rt, .run = stop_report },
		{ .name = "stop_machine, all CPUs, remote busy",
		  .setup = stop_busy_setup, .run = ours_stop_all,
		  .teardown = busy_teardown },
		{ .name = "hog_synchronize", .run = ours_synchronize },
		{ .name = "hog_synchronize_report", .run = synchronize_report },
		{ .name = "hog_synchronize, remote CPU busy",
		  .setup = busy_setup, .run = ours_synchronize,
		  .teardown = busy_teardown },
		{ .name = "hog_one_cpu, other CPU, no spin",
		  .setup = nospin_setup, .run = ours_one_remote,
		  .teardown = default_teardown },
		{ .name = "stop_machine, all CPUs, no spin",
		  .setup = nospin_setup, .run = ours_stop_all,
		  .teardown = default_teardown },
		{ .name = "hog_cpus, all CPUs, flat wake", .setup = flat_setup,
		  .run = ours_cpus_all, .teardown = default_teardown },
		{ .name = "stop_machine, all CPUs, flat wake",
		  .setup = flat_setup, .run = ours_stop_all,
		  .teardown = default_teardown },
	};
	size_t i, n = sizeof(list) / sizeof(list[0]);

	for (i = 0; i < n; i++) {
		ops[i] = list[i];
		ops[i].kind = "ours";
	}
	return n;
}
