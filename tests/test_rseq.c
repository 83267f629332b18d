/* SPDX-License-Identifier: MIT */
/*
 * hog_one_cpu() as an rseq fence for one CPU (hog_one_cpu(3), "rseq"):
 * threads push onto their CPU's cache in a hand-written rseq critical
 * section (examples/percpu_cache.h), and drains run on that CPU as its
 * hog.  Every item must be drained exactly once.  The negative control
 * pushes without rseq, and the same check catches the drain that cut a
 * push in two.
 */
#include "../examples/percpu_cache.h"
#include "harness.h"

#include <pthread.h>
#include <sched.h>

#define PUSHERS 3
#define WINDOW 2000 /* iterations between a push's load and its commit */

static struct percpu_slot slots[CPU_SETSIZE];
static _Atomic int stop_pushing;

struct pusher {
	pthread_t t;
	unsigned int cpu;
	bool rseq;
	long id, n, sum, aborts, overflow_n, overflow_sum;
};

/* The negative control: the same push, without a critical section. */
static int plain_push(long item)
{
	struct percpu_slot *s = &slots[sched_getcpu()];
	long n = s->n;

	if (n >= PERCPU_CAP)
		return PUSH_FULL;
	s->item[n] = item;
	for (volatile int i = 0; i < WINDOW; i++)
		;
	s->n = n + 1;
	return PUSH_DONE;
}

static void *pusher(void *arg)
{
	struct pusher *p = arg;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(p->cpu, &one);
	sched_setaffinity(0, sizeof(one), &one);
	for (long i = 1;
	     !atomic_load_explicit(&stop_pushing, memory_order_relaxed); i++) {
		long item = p->id * 1000000000L + i;
		int r;

		do {
			r = p->rseq ? percpu_push(slots, item, WINDOW)
				    : plain_push(item);
			p->aborts += r == PUSH_ABORTED;
		} while (r == PUSH_ABORTED);
		if (r == PUSH_FULL) { /* kept by the pusher: the slow path */
			p->overflow_n++;
			p->overflow_sum += item;
		}
		p->n++;
		p->sum += item;
	}
	return NULL;
}

struct drained {
	unsigned int cpu;
	long n, sum;
};

static int drain(void *arg)
{
	struct drained *d = arg;
	struct percpu_slot *s = &slots[d->cpu];

	if (sched_getcpu() != (int)d->cpu)
		return -1;
	for (long i = 0; i < s->n; i++) {
		d->n++;
		d->sum += s->item[i];
	}
	s->n = 0;
	return 0;
}

/*
 * Pushers on @cpu, drains of @cpu from another CPU for @ms; then every
 * pusher's items against what the drains and its own overflow hold.
 * Returns how many items were counted wrong (0: exact); *aborts, the
 * sections the kernel restarted.
 */
static long push_and_drain(unsigned int cpu, bool rseq, unsigned int ms,
			   long *aborts, long *drains)
{
	struct pusher p[PUSHERS];
	struct drained d = {cpu, 0, 0};
	long n = 0, sum = 0;
	uint64_t end;

	memset(slots, 0, sizeof(slots));
	atomic_store(&stop_pushing, 0);
	for (int i = 0; i < PUSHERS; i++) {
		p[i] = (struct pusher){.cpu = cpu, .rseq = rseq, .id = i + 1};
		assert_int_equal(pthread_create(&p[i].t, NULL, pusher, &p[i]),
				 0);
	}
	*drains = 0;
	for (end = t_now() + ms * MS; t_now() < end; ++*drains) {
		uint64_t gap = t_now() + 30000; /* the pushers' turn: 30 us */

		assert_int_equal(hog_one_cpu(cpu, drain, &d), 0);
		while (t_now() < gap)
			;
	}
	atomic_store(&stop_pushing, 1);
	*aborts = 0;
	for (int i = 0; i < PUSHERS; i++) {
		assert_int_equal(pthread_join(p[i].t, NULL), 0);
		n += p[i].n - p[i].overflow_n;
		sum += p[i].sum - p[i].overflow_sum;
		*aborts += p[i].aborts;
	}
	assert_int_equal(hog_one_cpu(cpu, drain, &d), 0); /* the rest */
	print_message("%s: %ld items pushed to CPU %u's cache, %ld drained "
		      "in %ld drains; %ld sections restarted\n",
		      rseq ? "rseq" : "plain", n, cpu, d.n, *drains, *aborts);
	return labs(d.n - n) + (d.sum != sum);
}

static void need_rseq(void)
{
	if (!percpu_supported())
		t_skip(t_qemu_user() ? "qemu-user does not implement rseq"
				     : percpu_unsupported());
}

static unsigned int other_cpu(void)
{
	unsigned int mine = t_nth_cpu(0), cpu = t_nth_cpu(1);

	if (cpu == mine)
		t_skip("needs a second CPU to drain from");
	t_pin(mine);
	return cpu;
}

static void fence_drains_exactly_once(void **state)
{
	long aborts, drains;
	unsigned int cpu;

	(void)state;
	need_rseq();
	cpu = other_cpu();
	assert_int_equal(
		push_and_drain(cpu, true, 300, &aborts, &drains), 0);
	/* the count is the verdict, exercised or not; how often a drain
	 * cut a section is a figure (it skipped at 0, and a busy machine
	 * made every run judge nothing) */
	print_message("figure: %ld sections restarted by %ld drains%s\n",
		      aborts, drains,
		      aborts ? "" : " (the fence was not exercised)");
}

/*
 * Pushers moved between two CPUs while they push, both CPUs drained: a
 * push whose thread moved inside its section, or (aarch64) after it read
 * its CPU and before the section, restarts instead of landing on the CPU
 * it left, where that CPU's pushers and drains would cut it.
 */
static void moved_pushes_restart(void **state)
{
	unsigned int cpu[2];
	struct pusher p[PUSHERS];
	struct drained d[2];
	long n = 0, sum = 0, aborts = 0, moves;
	uint64_t end;

	(void)state;
	need_rseq();
	cpu[0] = t_nth_cpu(0);
	cpu[1] = t_nth_cpu(1);
	if (cpu[0] == cpu[1])
		t_skip("needs a second CPU to move the pushers to");
	memset(slots, 0, sizeof(slots));
	atomic_store(&stop_pushing, 0);
	for (int i = 0; i < PUSHERS; i++) {
		p[i] = (struct pusher){.cpu = cpu[i % 2], .rseq = true,
				       .id = i + 1};
		assert_int_equal(pthread_create(&p[i].t, NULL, pusher, &p[i]),
				 0);
	}
	for (int j = 0; j < 2; j++)
		d[j] = (struct drained){cpu[j], 0, 0};
	end = t_now() + 300 * MS;
	for (moves = 0; t_now() < end; moves++) {
		for (int i = 0; i < PUSHERS; i++) {
			cpu_set_t one;

			CPU_ZERO(&one);
			CPU_SET(cpu[(moves + i) % 2], &one);
			pthread_setaffinity_np(p[i].t, sizeof(one), &one);
		}
		for (int j = 0; j < 2; j++)
			assert_int_equal(hog_one_cpu(cpu[j], drain, &d[j]), 0);
	}
	atomic_store(&stop_pushing, 1);
	for (int i = 0; i < PUSHERS; i++) {
		assert_int_equal(pthread_join(p[i].t, NULL), 0);
		n += p[i].n - p[i].overflow_n;
		sum += p[i].sum - p[i].overflow_sum;
		aborts += p[i].aborts;
	}
	for (int j = 0; j < 2; j++) /* the rest */
		assert_int_equal(hog_one_cpu(cpu[j], drain, &d[j]), 0);
	print_message("moved: %ld items pushed to CPUs %u and %u, %ld "
		      "drained, %ld moves; %ld sections restarted\n",
		      n, cpu[0], cpu[1], d[0].n + d[1].n, moves, aborts);
	assert_int_equal(d[0].n + d[1].n, n);
	assert_int_equal(d[0].sum + d[1].sum, sum);
}

static void without_rseq_a_drain_cuts_pushes(void **state)
{
	long aborts, drains, wrong = 0;
	unsigned int cpu;

	(void)state;
	if (T_TSAN)
		t_skip("the plain push races on purpose");
	cpu = other_cpu();
	/* the control: it shows that the count can catch a fence that does
	 * not hold, a figure of this run, not a verdict of the library (it
	 * calls no fence); 5 rounds of 200 ms, each judged the same way */
	for (int i = 0; i < 5 && !wrong; i++)
		wrong = push_and_drain(cpu, false, 200, &aborts, &drains);
	print_message("figure: without rseq, %ld items were counted wrong%s\n",
		      wrong, wrong ? ": the check catches a fence that does "
				     "not hold"
				   : " (no drain landed inside a plain push)");
}

T_MAIN(((const struct CMUnitTest[]){
	cmocka_unit_test(fence_drains_exactly_once),
	cmocka_unit_test(moved_pushes_restart),
	cmocka_unit_test(without_rseq_a_drain_cuts_pushes),
}))
