/* SPDX-License-Identifier: MIT */
/*
 * livepatch: replace a function at run time while threads call it.
 *
 * The patched site is one instruction, a 5-byte NOP at the function's
 * entry, exactly as long as the jump that replaces it.  A thread that was
 * preempted anywhere can only resume before or after that instruction,
 * never inside it, so a whole-instruction rewrite is safe once no thread
 * runs while it happens: that is what stop_machine() gives.  Each hog
 * serializes its core on the way out, so every CPU fetches the new bytes.
 * The page is made writable beforehand, outside the stop.
 *
 *   livepatch [SECONDS]    (default 3)
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
/* old_version: nopl 0x0(%rax,%rax,1) (5 bytes); return 1.  new_version:
 * return 2. */
__asm__(".text\n"
	".globl lp_old\n.type lp_old,@function\n.p2align 4\n"
	"lp_old:\n\t.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"\tmovl $1, %eax\n\tret\n.size lp_old, .-lp_old\n"
	".globl lp_new\n.type lp_new,@function\n.p2align 4\n"
	"lp_new:\n\tmovl $2, %eax\n\tret\n.size lp_new, .-lp_new\n");
int lp_old(void);
int lp_new(void);

static const unsigned char nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
static unsigned char jmp5[5];
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
	memcpy((void *)lp_old, g & 1 ? jmp5 : nop5, 5);
	atomic_store_explicit(&gen, g, memory_order_relaxed);
	return 0;
}

static int set_prot(int prot)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)lp_old & ~(uintptr_t)(pg - 1);
	uintptr_t end = ((uintptr_t)lp_old + 5 + (uintptr_t)pg - 1) &
			~(uintptr_t)(pg - 1);

	return mprotect((void *)start, end - start, prot);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3.0;
	int32_t rel = (int32_t)((intptr_t)lp_new - ((intptr_t)lp_old + 5));
	struct timespec t0, t;
	pthread_t th[3];
	long patches = 0;
	int i, r = 0;

	jmp5[0] = 0xe9;
	memcpy(jmp5 + 1, &rel, 4);
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
	printf("livepatch: %ld patches, %ld calls, %ld wrong, stop_machine -> %d\n",
	       patches, atomic_load(&calls), atomic_load(&wrong), r);
	cpuhog_shutdown();
	return r != 0 || atomic_load(&wrong) != 0 || lp_old() != 1;
}
#else
int main(void)
{
	puts("livepatch: x86-64 only; skipped");
	return 0;
}
#endif
