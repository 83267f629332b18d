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
 * x86-64 and aarch64 (the section is hand-written assembly, one for
 * each); percpu_supported() says whether it can run here.  Used by
 * examples/percpu_cache.c and tests/test_rseq.c.
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
#if defined(__x86_64__) || defined(__aarch64__)
	return __rseq_size >= 16 && (int)percpu_rseq()->cpu_id >= 0;
#else
	return false;
#endif
}

/* Why percpu_supported() is false: for a skip message. */
static inline const char *percpu_unsupported(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return "glibc registered no rseq area for this thread (qemu-user, "
	       "glibc.pthread.rseq=0, glibc before 2.35)";
#else
	return "the rseq section is written for x86-64 and aarch64 only";
#endif
}

/* The section's descriptor, at label 3: it starts at label 1, ends
 * (past the commit) at 2, and restarts at the abort handler at 4. */
#define PERCPU_CS                                                       \
	".pushsection __rseq_cs, \"aw\"\n\t"                            \
	".balign 32\n\t"                                                \
	"3:\n\t"                                                        \
	".long 0, 0\n\t" /* version, flags */                           \
	".quad 1f, 2f - 1f, 4f\n\t" /* start, post-commit, abort */     \
	".popsection\n\t"

/*
 * Push @item onto the calling thread's CPU's slot of @slots.  @spin
 * widens the section (iterations between the load and the commit), for
 * tests that want preemption inside it; on aarch64 also the gap between
 * the read of the CPU and the section, which the section's compare
 * covers (a thread moved there must not push onto the CPU it left).
 * PUSH_ABORTED: the kernel restarted the section, or the thread moved
 * before it; call again.
 */
static inline int percpu_push(struct percpu_slot *slots, long item,
			      unsigned int spin)
{
#if defined(__x86_64__) || defined(__aarch64__)
	struct rseq *rs = percpu_rseq();
#endif
#if defined(__x86_64__)
	__asm__ goto(
		PERCPU_CS
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
#elif defined(__aarch64__)
	/* the CPU read before the section, its slot chosen from it; the
	 * section checks that it still runs there (cpu_id_start is the
	 * field for this read: never negative) */
	uint32_t cpu = __atomic_load_n(&rs->cpu_id_start, __ATOMIC_RELAXED);
	struct percpu_slot *s = &slots[cpu];

	for (volatile unsigned int i = 0; i < spin; i++)
		;
	__asm__ goto(
		PERCPU_CS
		"adrp x9, 3b\n\t"
		"add x9, x9, :lo12:3b\n\t"
		"str x9, %[cs]\n\t" /* the last store before the section */
		"1:\n\t"
		"ldr w9, %[cur]\n\t"
		"cmp w9, %w[cpu]\n\t"
		"b.ne 4f\n\t" /* moved since the read: again */
		"ldr x10, [%[s]]\n\t" /* n */
		"cmp x10, #" PERCPU_STR(PERCPU_CAP) "\n\t"
		"b.hs %l[full]\n\t"
		"add x11, %[s], x10, lsl #3\n\t"
		"str %[item], [x11, #8]\n\t" /* above n: unseen */
		"mov w12, %w[spin]\n\t"
		"5:\n\t"
		"cbz w12, 6f\n\t"
		"sub w12, w12, #1\n\t"
		"b 5b\n\t"
		"6:\n\t"
		"add x10, x10, #1\n\t"
		"str x10, [%[s]]\n\t" /* commit: n + 1 */
		"2:\n\t"
		"b 7f\n\t"
		/* brk #0x45e0, the signature: the kernel checks the four
		 * bytes before the abort handler (inline, not in a section
		 * of its own: b.ne reaches 1 MiB) */
		".inst " PERCPU_STR(RSEQ_SIG_CODE) "\n\t"
		"4:\n\t"
		"b %l[aborted]\n\t"
		"7:\n\t"
		:
		: [cs] "Q"(rs->rseq_cs), [cur] "Q"(rs->cpu_id),
		  [cpu] "r"(cpu), [s] "r"(s), [item] "r"(item),
		  [spin] "r"(spin)
		: "memory", "cc", "x9", "x10", "x11", "x12"
		: full, aborted);
#endif
#if defined(__x86_64__) || defined(__aarch64__)
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
