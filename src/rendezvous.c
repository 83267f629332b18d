/* SPDX-License-Identifier: MIT */
/*
 * The combining tree of a stop's rendezvous (used by stop_machine.c).
 *
 * A flat rendezvous counts each phase on the stop's one word, which every
 * hog also spins on: each arrival invalidates that line under N spinners,
 * and N CPUs queue for it in turn.  Here the hogs of a call, in topology
 * order (msel, the wake tree's order), are cut into leaves of at most k;
 * the leaves into nodes of at most k; and so on until at most k nodes are
 * left, which the word counts.  Each node is one 64-bit word in its own
 * cache line, so per phase a node is written by at most k CPUs and read
 * by the same, and the stop's word is written once, by the hog that
 * empties the last top node: it is read-mostly.
 *
 * A node is gen:32 | phase:8 | left:24, as the stop's word is.  A hog
 * passes phase P of call G at its leaf: it decrements the node if the
 * node is (G, P); otherwise this is the first pass of P there, and it
 * sets the node to (G, P, children - 1).  Nobody resets the nodes between
 * calls or phases: the tag does.  The hog whose pass leaves 0 goes on to
 * the parent, and the one that empties a top node passes the stop's word
 * (stop_machine.c), with its CAS on gen and phase.
 *
 * Only the monotone passes go through the tree: each hog's arrival, its
 * first acknowledgement of HOLD, its check and its return from RUN, each
 * once per call.  A hog backing off in HOLD withdraws and acknowledges
 * again on the word itself (stop_machine.c, back_off()), so that the
 * move to CHECK and a withdrawal are ordered by one word, as in the flat
 * rendezvous; a tree that carried withdrawals would let the root fill
 * while a hog steps aside (docs/SCALING.md).  Withdrawals are rare, and
 * slow anyway: a yield.
 *
 * Stale hogs.  A call with a tree has more hogs than k, so it is a
 * stop_machine() on every hog, and multi_reserve() waits for every hog's
 * slot: no hog of an earlier call runs while a tree is in use.  Should
 * one all the same, a node of another generation is taken over only
 * while the stop's word is of the hog's own call; else it leaves the
 * tree alone, and its pass of the word fails on the generation.  Equality
 * of tags, not their order, decides: a node untouched for 2^31 calls (a
 * long run of stop_two_cpus()) is not "newer".
 *
 * Orders: each node's CAS is acq_rel, so what every hog did before its
 * pass (the tally, fn's effects, its count of fn_runs) happens before
 * the pass of the hog that empties the node, and so up the tree to the
 * word's seq_cst CAS, which the next phase's hogs acquire.
 *
 * tests/model/tree.pml checks this protocol with spin; its header states
 * the correspondence, inline by inline.
 */
#include "internal.h"

#define N_GEN(v) ((uint32_t)((v) >> 32))
#define N_PHASE(v) ((unsigned int)((v) >> 24) & 0xff)
#define N_LEFT(v) ((uint32_t)(v)&0xffffff)
#define N_WORD(gen, ph, n) \
	((uint64_t)(gen) << 32 | (uint64_t)(ph) << 24 | (n))

unsigned int rdv_top(unsigned int n, unsigned int k)
{
	while (n > k)
		n = (n + k - 1) / k;
	return n;
}

unsigned int rdv_nodes(unsigned int n, unsigned int k)
{
	unsigned int t = 0;

	while (n > k) {
		n = (n + k - 1) / k;
		t += n;
	}
	return t;
}

/* Pass (@gen, @ph) at @node, which has @kids children this call: true if
 * this pass emptied it.  @word: the stop's word (gen in its top half). */
static bool node_pass(_Atomic uint64_t *node, const _Atomic uint64_t *word,
		      uint32_t gen, unsigned int ph, unsigned int kids)
{
	/* relaxed: the CAS below is the access that orders */
	uint64_t v = atomic_load_explicit(node, memory_order_relaxed), nv;

	do {
		bool mine = N_GEN(v) == gen;

		/* relaxed: a stale hog's look; its word CAS checks again */
		if (!mine && N_GEN(atomic_load_explicit(
				     word, memory_order_relaxed)) != gen)
			return false;
		if (mine && N_PHASE(v) > ph)
			return false; /* cannot be: a later phase is ours */
		if (mine && N_PHASE(v) == ph && N_LEFT(v) == 0)
			return false; /* cannot be: every child passed */
		nv = mine && N_PHASE(v) == ph ? v - 1
					      : N_WORD(gen, ph, kids - 1);
		/* acq_rel: see the note on top */
	} while (!atomic_compare_exchange_weak_explicit(
		node, &v, nv, memory_order_acq_rel, memory_order_relaxed));
	return N_LEFT(nv) == 0;
}

bool rdv_climb(struct rdv *r, unsigned int pos, uint32_t gen, unsigned int ph)
{
	unsigned int m = r->n, off = 0;

	while (m > r->k) {
		unsigned int here = (m + r->k - 1) / r->k, j = pos / r->k;
		unsigned int kids = m - j * r->k < r->k ? m - j * r->k : r->k;

		if (!node_pass(r->nodes + (size_t)(off + j) * RDV_STRIDE,
			       r->word, gen, ph, kids))
			return false;
		pos = j;
		off += here;
		m = here;
	}
	return true;
}
