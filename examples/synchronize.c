/* SPDX-License-Identifier: MIT */
/*
 * hog_synchronize: an asymmetric Dekker lock.  The frequent side (the
 * reader) pays only a compiler barrier; the rare side (the writer) pays a
 * hog_synchronize(), which forces every other CPU through the scheduler
 * and so acts as the reader's missing fence (what membarrier() gives).
 * The two must never be inside at the same time.
 */
#include <cpuhog.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static _Atomic int reader_in, writer_in, done;
static _Atomic int reader_cs, writer_cs, both; /* to check exclusion */
static _Atomic long reader_entries, writer_entries;

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&done, memory_order_relaxed)) {
		atomic_store_explicit(&reader_in, 1, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst); /* compiler only */
		if (!atomic_load_explicit(&writer_in, memory_order_relaxed)) {
			atomic_store_explicit(&reader_cs, 1, memory_order_relaxed);
			if (atomic_load_explicit(&writer_cs, memory_order_relaxed))
				atomic_store(&both, 1);
			atomic_fetch_add_explicit(&reader_entries, 1,
						  memory_order_relaxed);
			atomic_store_explicit(&reader_cs, 0, memory_order_relaxed);
		}
		atomic_store_explicit(&reader_in, 0, memory_order_release);
	}
	return NULL;
}

int main(void)
{
	pthread_t th;
	int i, r = 0;

	pthread_create(&th, NULL, reader, NULL);
	for (i = 0; i < 2000 && r == 0; i++) {
		atomic_store_explicit(&writer_in, 1, memory_order_relaxed);
		r = hog_synchronize(); /* the reader's fence, on its CPU */
		if (!atomic_load_explicit(&reader_in, memory_order_acquire)) {
			atomic_store_explicit(&writer_cs, 1, memory_order_relaxed);
			if (atomic_load_explicit(&reader_cs, memory_order_relaxed))
				atomic_store(&both, 1);
			atomic_fetch_add(&writer_entries, 1);
			atomic_store_explicit(&writer_cs, 0, memory_order_relaxed);
		}
		atomic_store_explicit(&writer_in, 0, memory_order_release);
	}
	atomic_store(&done, 1);
	pthread_join(th, NULL);
	printf("hog_synchronize -> %d: writer entered %ld times, reader %ld, "
	       "together %d\n",
	       r, atomic_load(&writer_entries), atomic_load(&reader_entries),
	       atomic_load(&both));
	cpuhog_shutdown();
	return r != 0 || atomic_load(&both);
}
