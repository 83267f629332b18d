/* SPDX-License-Identifier: MIT */
/*
 * livepatch: replace a function at run time while threads call it.
 *
 * The patched site is one instruction at the function's entry: a NOP
 * exactly as long as the jump that replaces it (5 bytes on x86-64, 4 on
 * arm64).  A thread that was
 * preempted anywhere can only resume before or after that instruction,
 * never inside it, so a whole-instruction rewrite is safe once no thread
 * runs while it happens: that is what stop_machine() gives.  Each hog
 * serializes its core on the way out, so every CPU fetches the new bytes.
 * On arm64 the instruction cache does not snoop data writes: fn also
 * cleans and invalidates the bytes it wrote (__builtin___clear_cache, which
 * the hardware broadcasts to every CPU) before the hogs' isb.
 * The page is made writable beforehand, outside the stop.
 *
 *   livepatch [SECONDS [emulated]]    (default 3)
 *
 * "emulated": under qemu-user (make check-arm64), which translates code
 * into blocks, a thread the host preempted inside a block may finish the
 * copy of the instruction it translated before the patch: real arm64
 * discards it at the context switch's exception return, qemu-user does
 * not, and how many such calls there are depends on how often the host
 * preempts a thread: they are reported, not judged.  The check there is
 * that every patch took effect (the call right after each sees the new
 * version, the original restored at the end).
 */
#include <cpuhog.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
/* lp_old: nopl 0x0(%rax,%rax,1) (5 bytes); return 1.  lp_new: return 2. */
__asm__(".text\n"
	".globl lp_old\n.type lp_old,@function\n.p2align 4\n"
	"lp_old:\n\t.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"\tmovl $1, %eax\n\tret\n.size lp_old, .-lp_old\n"
	".globl lp_new\n.type lp_new,@function\n.p2align 4\n"
	"lp_new:\n\tmovl $2, %eax\n\tret\n.size lp_new, .-lp_new\n");
#define SITE 5
#elif defined(__aarch64__)
/* lp_old: nop (4 bytes, aligned: one single-copy-atomic store); return 1.
 * lp_new: return 2. */
__asm__(".text\n"
	".globl lp_old\n.type lp_old,%function\n.p2align 4\n"
	"lp_old:\n\tnop\n\tmov w0, #1\n\tret\n.size lp_old, .-lp_old\n"
	".globl lp_new\n.type lp_new,%function\n.p2align 4\n"
	"lp_new:\n\tmov w0, #2\n\tret\n.size lp_new, .-lp_new\n");
#define SITE 4
#endif

#ifdef SITE
int lp_old(void);
int lp_new(void);

static unsigned char nop_site[SITE], jmp_site[SITE];
static _Atomic unsigned long gen; /* odd: patched; changed inside the stop */
static _Atomic int done;
static _Atomic long calls, wrong;

static int (*volatile target)(void) = lp_old;

static int expected(unsigned long g)
{
	return g & 1 ? 2 : 1;
}

static void *caller(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&done, memory_order_relaxed)) {
		unsigned long g1 = atomic_load(&gen);
		int r = target();

		/* a call wholly between two patches sees that version */
		if (atomic_load(&gen) == g1 && r != expected(g1))
			atomic_fetch_add(&wrong, 1);
		atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
	}
	return NULL;
}

/* Runs with every other CPU held: nobody executes lp_old meanwhile. */
static int patch(void *arg)
{
	unsigned long g = atomic_load_explicit(&gen, memory_order_relaxed) + 1;

	(void)arg;
	memcpy((void *)lp_old, g & 1 ? jmp_site : nop_site, SITE);
	/* arm64: the new bytes to the point of unification, stale lines out
	 * of every CPU's instruction cache; the hogs' isb does the rest.  On
	 * x86 a no-op. */
	__builtin___clear_cache((char *)lp_old, (char *)lp_old + SITE);
	atomic_store_explicit(&gen, g, memory_order_relaxed);
	return 0;
}

/* The site's original bytes, and the jump to lp_new that replaces them. */
static void make_jump(void)
{
#if defined(__x86_64__)
	int32_t rel = (int32_t)((intptr_t)lp_new - ((intptr_t)lp_old + 5));

	jmp_site[0] = 0xe9; /* jmp rel32 */
	memcpy(jmp_site + 1, &rel, 4);
#else
	/* b imm26: the offset in words, within +-128 MiB (it is 16 bytes) */
	uint32_t b = 0x14000000u |
		     ((uint32_t)(((intptr_t)lp_new - (intptr_t)lp_old) / 4) &
		      0x03ffffffu);

	memcpy(jmp_site, &b, 4);
#endif
	memcpy(nop_site, (const void *)lp_old, SITE);
}

static int set_prot(int prot)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)lp_old & ~(uintptr_t)(pg - 1);
	uintptr_t end = ((uintptr_t)lp_old + SITE + (uintptr_t)pg - 1) &
			~(uintptr_t)(pg - 1);

	return mprotect((void *)start, end - start, prot);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3.0;
	int emulated = argc > 2 && !strcmp(argv[2], "emulated");
	long main_wrong = 0;
	struct timespec t0, t;
	pthread_t th[3];
	long patches = 0;
	int i, r = 0;

	make_jump();
	if (set_prot(PROT_READ | PROT_WRITE | PROT_EXEC) < 0) {
		perror("livepatch: mprotect");
		return 1;
	}
	for (i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, caller, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		r = stop_machine(patch, NULL, 0, NULL);
		patches++;
		/* this thread was in the library (a system call) during the
		 * patch: its next call sees the new version, emulated too */
		main_wrong += r == 0 && target() != expected(atomic_load(&gen));
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (r == 0 && (t.tv_sec - t0.tv_sec) +
				   (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	atomic_store(&done, 1);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	/* leave the original in place, and the page read-only again */
	if (atomic_load(&gen) & 1)
		r = r ? r : stop_machine(patch, NULL, 0, NULL);
	set_prot(PROT_READ | PROT_EXEC);
	printf("livepatch: %ld patches, %ld calls, %ld wrong (%ld after a "
	       "patch), stop_machine -> %d\n", patches, atomic_load(&calls),
	       atomic_load(&wrong), main_wrong, r);
	cpuhog_shutdown();
	if (r != 0 || main_wrong != 0 || lp_old() != 1)
		return 1;
	return !emulated && atomic_load(&wrong) != 0;
}
#else
int main(void)
{
	puts("livepatch: x86-64 and arm64 only; skipped");
	return 0;
}
#endif
