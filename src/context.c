/* SPDX-License-Identifier: MIT */
/*
 * The context layer's state: the process's one context, the count of
 * calls using it, who the calling thread is, a hog by CPU.  Every room
 * uses these; nothing here calls a room (see context.h).
 *
 * A call counts itself in g_users before it looks at g_ctx, and
 * cpuhog_i_ctx_retire() clears g_ctx before it waits for g_users to
 * drain, both seq_cst (Dekker): a context is never freed under a call.
 * The count lives outside the context so that a call may count itself
 * before it knows whether a context exists.
 */
#include "internal.h"

#include <time.h>

_Thread_local struct hog *cpuhog_i_self;
_Thread_local volatile sig_atomic_t cpuhog_i_in_call;
_Thread_local volatile sig_atomic_t cpuhog_i_ctx_held;
_Atomic uint64_t cpuhog_i_spin_ns;
_Atomic uint32_t cpuhog_i_epoch;

static _Atomic(struct ctx *) g_ctx;
static _Atomic uint32_t g_users;

struct ctx *cpuhog_i_ctx_ref(void)
{
	struct ctx *c;

	/* seq_cst increment, then seq_cst load: Dekker with
	 * cpuhog_i_ctx_retire(): either it sees us and waits, or we see NULL */
	cpuhog_i_ctx_held++;
	atomic_signal_fence(memory_order_seq_cst); /* before the count */
	atomic_fetch_add(&g_users, 1);
	c = atomic_load(&g_ctx);
	if (!c)
		cpuhog_i_ctx_put();
	return c;
}

void cpuhog_i_ctx_put(void)
{
	/* release: our last use of the context before its retirer frees it */
	atomic_fetch_sub_explicit(&g_users, 1, memory_order_release);
	atomic_signal_fence(memory_order_seq_cst); /* after the count */
	cpuhog_i_ctx_held--;
}

void cpuhog_i_ctx_publish(struct ctx *c)
{
	/* release: the whole context before any call can see it */
	atomic_store_explicit(&g_ctx, c, memory_order_release);
}

struct ctx *cpuhog_i_ctx_current(void)
{
	/* relaxed: under the init lock, where alone it is published */
	return atomic_load_explicit(&g_ctx, memory_order_relaxed);
}

bool cpuhog_i_ctx_quiet(void)
{
	return atomic_load(&g_users) == 0;
}

/* Unpublish the context and wait until no call holds it.  Under the
 * init lock. */
struct ctx *cpuhog_i_ctx_retire(void)
{
	struct ctx *c = atomic_load(&g_ctx);

	if (!c)
		return NULL;
	atomic_store(&g_ctx, NULL); /* seq_cst: see cpuhog_i_ctx_ref() */
	store_load_fence(); /* NULL before the count's loads */
	while (atomic_load(&g_users) != 0)
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
	return c;
}

/* A forked child's: the parent's other calls are not here to give
 * their references back.  Relaxed, all: one thread, in the fork handler. */
struct ctx *cpuhog_i_ctx_forget(void)
{
	struct ctx *c = atomic_load_explicit(&g_ctx, memory_order_relaxed);

	atomic_store_explicit(&g_ctx, NULL, memory_order_relaxed);
	atomic_store_explicit(&g_users, 0, memory_order_relaxed);
	cpuhog_i_ctx_held = 0;
	atomic_fetch_add_explicit(&cpuhog_i_epoch, 1, memory_order_relaxed);
	cpuhog_i_self = NULL;
	return c;
}

struct hog *cpuhog_i_hog_of(struct ctx *c, unsigned int cpu)
{
	return cpu < c->nr_cpu_ids ? c->by_cpu[cpu] : NULL;
}
