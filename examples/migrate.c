/* SPDX-License-Identifier: MIT */
/* hog_migrate: move a busy worker thread from CPU to CPU. */
#include <cpuhog.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static _Atomic pid_t worker_tid;
static _Atomic int asked, answered, worker_cpu = -1, done;

/* Answers "where are you?" questions: question k is read before the CPU
 * is, so an answer to k was measured after k was asked (an answer read
 * before a migration and stored after it would say the old CPU). */
static void *worker(void *arg)
{
	(void)arg;
	atomic_store(&worker_tid, gettid());
	while (!atomic_load(&done)) {
		int k = atomic_load(&asked);

		atomic_store(&worker_cpu, sched_getcpu());
		atomic_store(&answered, k);
	}
	return NULL;
}

int main(void)
{
	struct cpuhog_info info;
	pthread_t th;
	int cpu, bad = 0;

	if (cpuhog_get_info(&info) < 0)
		return 1;
	pthread_create(&th, NULL, worker, NULL);
	while (!atomic_load(&worker_tid))
		usleep(100);
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &info.cpus))
			continue;
		int r = hog_migrate(atomic_load(&worker_tid), (unsigned int)cpu);

		int k = atomic_fetch_add(&asked, 1) + 1;

		for (int i = 0; i < 100000 && atomic_load(&answered) != k; i++)
			usleep(10);
		printf("hog_migrate(worker, %d) -> %d; worker now on CPU %d\n",
		       cpu, r, atomic_load(&worker_cpu));
		bad += r != 0 || atomic_load(&worker_cpu) != cpu;
	}
	atomic_store(&done, 1);
	pthread_join(th, NULL);
	cpuhog_shutdown();
	return bad != 0;
}
