/* SPDX-License-Identifier: MIT */
/*
 * A per-CPU cache filled with rseq and drained with hog_one_cpu(): the
 * pattern of tcmalloc's per-CPU caches, whose owner empties a CPU's slot
 * with membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, CPU_FLAG, cpu)
 * and then locks.  Here the drain runs as a hog on that CPU instead.
 *
 * A thread pushes onto its own CPU's cache in an rseq critical section:
 * it reads its CPU from the rseq area, loads the count, stores the item
 * above it, and commits by storing the count + 1.  The kernel restarts
 * the section (at its abort handler) if the thread is preempted, migrated
 * or signalled before the commit, so a push either lands on the CPU it
 * read, whole, or not at all.
 *
 * hog_one_cpu(cpu, drain) runs drain on that CPU at the highest priority:
 * every thread that was on the CPU has been preempted, so every push to
 * this CPU's cache that had begun and not committed will restart, and no
 * new one can begin there until drain returns.  drain owns the cache
 * while it runs, with plain loads and stores.
 *
 * x86-64 only (the section is hand-written assembly); percpu_supported()
 * says whether it can run here.  Used by examples/percpu_cache.c and
 * tests/test_rseq.c.
 */
#ifndef PERCPU_CACHE_H
#define PERCPU_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/rseq.h>

#define PERCPU_CAP 31 /* items per CPU: the slot is 256 bytes */

struct percpu_slot {
	long n;
	long item[PERCPU_CAP];
} __attribute__((aligned(256)));

enum { PUSH_DONE, PUSH_FULL, PUSH_ABORTED };

#define PERCPU_STR_(x) #x
#define PERCPU_STR(x) PERCPU_STR_(x)

static inline struct rseq *percpu_rseq(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() +
			       __rseq_offset);
}

/* Whether glibc registered rseq for this thread (__rseq_size is 0 when
 * it did not, 20 in glibc 2.35-2.39: the fields up to flags; we use
 * cpu_id and rseq_cs) and the section is written for this machine. */
static inline bool percpu_supported(void)
{
#if defined(__x86_64__)
	return __rseq_size >= 16 && (int)percpu_rseq()->cpu_id >= 0;
#else
	return false;
#endif
}

/*
 * Push @item onto the calling thread's CPU's slot of @slots.  @spin
 * widens the section (iterations between the load and the commit), for
 * tests that want preemption inside it.  PUSH_ABORTED: the kernel
 * restarted the section; call again.
 */
static inline int percpu_push(struct percpu_slot *slots, long item,
			      unsigned int spin)
{
#if defined(__x86_64__)
	struct rseq *rs = percpu_rseq();

	__asm__ goto(
		".pushsection __rseq_cs, \"aw\"\n\t"
		".balign 32\n\t"
		"3:\n\t"
		".long 0, 0\n\t" /* version, flags */
		".quad 1f, 2f - 1f, 4f\n\t" /* start, post-commit, abort */
		".popsection\n\t"
		"leaq 3b(%%rip), %%rax\n\t"
		"movq %%rax, %[cs]\n\t" /* the last store before the section */
		"1:\n\t"
		"movl %[cpu], %%eax\n\t"
		"shlq $8, %%rax\n\t"
		"addq %[slots], %%rax\n\t" /* &slots[cpu] */
		"movq (%%rax), %%rcx\n\t" /* n */
		"cmpq $" PERCPU_STR(PERCPU_CAP) ", %%rcx\n\t"
		"jae %l[full]\n\t"
		"movq %[item], 8(%%rax, %%rcx, 8)\n\t" /* above n: unseen */
		"movl %[spin], %%edx\n\t"
		"5:\n\t"
		"testl %%edx, %%edx\n\t"
		"jz 6f\n\t"
		"decl %%edx\n\t"
		"jmp 5b\n\t"
		"6:\n\t"
		"addq $1, %%rcx\n\t"
		"movq %%rcx, (%%rax)\n\t" /* commit: n + 1 */
		"2:\n\t"
		".pushsection __rseq_failure, \"ax\"\n\t"
		/* ud1 with the signature as its displacement: the kernel
		 * checks the four bytes before the abort handler */
		".byte 0x0f, 0xb9, 0x3d\n\t"
		".long " PERCPU_STR(RSEQ_SIG) "\n\t"
		"4:\n\t"
		"jmp %l[aborted]\n\t"
		".popsection\n\t"
		:
		: [cs] "m"(rs->rseq_cs), [cpu] "m"(rs->cpu_id),
		  [slots] "r"(slots), [item] "r"(item), [spin] "r"(spin)
		: "memory", "cc", "rax", "rcx", "rdx"
		: full, aborted);
	return PUSH_DONE;
full:
	return PUSH_FULL;
aborted:
	return PUSH_ABORTED;
#else
	(void)slots, (void)item, (void)spin;
	return PUSH_FULL;
#endif
}

#endif
