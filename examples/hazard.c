/* SPDX-License-Identifier: MIT */
/*
 * hog_synchronize: hazard pointers whose readers pay no fence.
 *
 * A reader publishes the node it is about to use in its hazard slot and
 * checks that the node is still current; the writer swaps in a new node
 * and reclaims the old one only once no slot holds it.  Normally the
 * reader needs a full fence between its publish and its check (a store
 * then a load).  Here it has only a compiler barrier, and the writer's
 * hog_synchronize() is that fence on every reader's CPU: after it, a
 * reader that published before the barrier is visible in its slot, and
 * one that checks after it sees the new node and retries.
 *
 * The barrier orders; it does not wait for readers.  So the writer must
 * scan the slots after it and free only what no slot holds; what is held
 * waits for a later round.  `store(&retired, p); hog_synchronize();
 * free(p)` without the scan frees nodes that readers still use.
 *
 * To catch a use after free without crashing, reclaimed nodes go to a
 * pool, poisoned, and are reused; a reader that finds a poisoned node, or
 * one whose two halves disagree, counts it.  Pass "noscan" to see the
 * scan's absence caught.
 */
#include <cpuhog.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define READERS 2
#define NODES 16
#define LIVE 0x11ee11eeu
#define DEAD 0xdeaddeadu

struct node {
	_Atomic unsigned int magic;
	_Atomic long a, b; /* a == b while the node is live */
};

static struct node pool[NODES];
static _Atomic(struct node *) cur;
static _Atomic(struct node *) hazard[READERS];
static _Atomic int done;
static _Atomic long reads, bad;

static void *reader(void *arg)
{
	_Atomic(struct node *) *slot = &hazard[(long)arg];

	while (!atomic_load_explicit(&done, memory_order_relaxed)) {
		struct node *p = atomic_load_explicit(&cur, memory_order_relaxed);

		atomic_store_explicit(slot, p, memory_order_relaxed);
		/* compiler only: the writer's hog_synchronize() is the fence */
		atomic_signal_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&cur, memory_order_relaxed) != p)
			continue; /* replaced meanwhile: look again */
		/* use it for a while, as a reader does */
		for (int i = 0; i < 500; i++)
			if (atomic_load_explicit(&p->magic,
						 memory_order_relaxed) != LIVE ||
			    atomic_load_explicit(&p->a, memory_order_relaxed) !=
				    atomic_load_explicit(&p->b,
							 memory_order_relaxed)) {
				atomic_fetch_add(&bad, 1); /* used after reclaim */
				break;
			}
		atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
		/* release: our reads of p before the slot is cleared */
		atomic_store_explicit(slot, NULL, memory_order_release);
	}
	return NULL;
}

static bool held(struct node *p)
{
	for (int i = 0; i < READERS; i++)
		/* acquire: a cleared slot's reads are done */
		if (atomic_load_explicit(&hazard[i], memory_order_acquire) == p)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	bool scan = !(argc > 1 && strcmp(argv[1], "noscan") == 0);
	struct node *retired[NODES], *free_list[NODES];
	int nretired = 0, nfree = 0, i, r = 0;
	pthread_t th[READERS];
	long kept = 0, k;

	for (i = 1; i < NODES; i++)
		free_list[nfree++] = &pool[i];
	atomic_store(&pool[0].magic, LIVE);
	atomic_store(&cur, &pool[0]);
	for (i = 0; i < READERS; i++)
		pthread_create(&th[i], NULL, reader, (void *)(long)i);
	for (k = 1; k <= 3000 && r == 0 && nfree > 0; k++) {
		struct node *n = free_list[--nfree], *old;

		atomic_store_explicit(&n->a, k, memory_order_relaxed);
		atomic_store_explicit(&n->b, k, memory_order_relaxed);
		atomic_store_explicit(&n->magic, LIVE, memory_order_relaxed);
		/* publish: the node's fields before the pointer */
		old = atomic_exchange_explicit(&cur, n, memory_order_acq_rel);
		retired[nretired++] = old;
		r = hog_synchronize(); /* every reader's missing fence */
		/* reclaim what no slot holds; keep the rest for later */
		for (i = 0; i < nretired;) {
			struct node *p = retired[i];

			if (scan && held(p)) {
				i++;
				kept++;
				continue;
			}
			atomic_store_explicit(&p->magic, DEAD,
					      memory_order_relaxed);
			atomic_store_explicit(&p->a, -1, memory_order_relaxed);
			free_list[nfree++] = p;
			retired[i] = retired[--nretired];
		}
	}
	atomic_store(&done, 1);
	for (i = 0; i < READERS; i++)
		pthread_join(th[i], NULL);
	printf("hog_synchronize -> %d: %ld replacements, %ld reclaims "
	       "deferred, %ld reads, %ld uses after reclaim%s\n",
	       r, k - 1, kept, atomic_load(&reads), atomic_load(&bad),
	       scan ? "" : " (no scan)");
	cpuhog_shutdown();
	if (!scan)
		return 0; /* the negative control only reports */
	return r != 0 || atomic_load(&bad) != 0;
}
