/*
 * The stop's rendezvous with the combining tree (src/stop_machine.c,
 * src/rendezvous.c), as a Promela model for spin, checked exhaustively
 * by tests/model_check.sh in make check.  tests/model/stop.pml models the
 * same rendezvous where the call has no more hogs than the fan-in (no
 * tree: every hog counts on the word); this one adds the tree.
 *
 * Fan-in K = 2.  Call 1 (stop_machine()) runs on hogs 0 to 3: two
 * leaves, {0, 1} and {2, 3}, under the word, which is the root (HOGS=3:
 * hogs 0 to 2, leaves {0, 1} and {2}).  Call 2
 * (stop_two_cpus()) runs on hogs 0 and 1, on the word alone (2 <= K),
 * once they are done with call 1 (multi_reserve()), so hogs 2 and 3 of
 * call 1 may still run, late, on leaf 1 and on the word of call 2: the
 * stale hogs.  (A call with a tree has more hogs than K, so it is a
 * stop_machine() on every hog, and multi_reserve() waits for all their
 * slots: no stale hog ever meets a tree in use.  The tags are kept all
 * the same; the model lets the stale hogs run on leaf 1 and the word.)  Anything may happen at any step
 * the C code allows: a hog declines at arrival (its CPU went away), is
 * moved before CHECK or before fn, backs off in HOLD, sees the deadline
 * pass (TIMEOUTS), or finds the hold lost (NOCPU).
 *
 * Checked: an outcome of 0 only if fn ran on every CPU asked; -EINTR
 * only if it ran on some; any other error only if it ran nowhere, even
 * by a hog that runs after its call returned; when the word leaves HOLD
 * for CHECK, every hog that holds is present (acknowledged, and not
 * stepped aside: "every CPU is held"); every hog's run ends (no invalid
 * end state: nobody left waiting, no deadlock).
 *
 * The correspondence to the C code, inline by inline:
 * - a node is one 64-bit word (gen:32 | phase:8 | left:24), one cache
 *   line; one CAS on it is one atomic block on n_gen, n_ph, n_left.
 *   climb() is rdv_climb(): a hog passes its leaf; the one whose pass
 *   empties a node goes on to the parent, and the one that empties a
 *   top node passes the word (pass()).  A node whose tag is older than
 *   (call, phase) is the first pass of that phase there: it is set to
 *   (call, phase, children - 1).  A tag of another call, while the word
 *   is of another call too: the hog is stale, and leaves the node alone
 *   (node_pass()).
 * - the word is the root: in the tree's phases its count is the top
 *   nodes still to empty, plus the hogs stepped aside in HOLD.
 * - back_off() withdraws on the word itself, not in the tree (+1 while
 *   HOLD, one CAS), and acknowledges again on the word (pass()): so a
 *   withdrawal and the move to CHECK are ordered by the one word, as in
 *   the flat rendezvous, and the word cannot reach 0 while a hog is
 *   away.  The tree counts only first acknowledgements, which are
 *   monotone.
 *   The stale check is a defence only: without it (a mutant) every
 *   configuration still passes, because no stale hog meets a tree in
 *   use and a stale pass of the word fails on the generation.
 * - the tally counts declines only (a holder reads it, to see its call
 *   is current); after PREPARE a call with a decline counts its later
 *   phases on the word, flat (held = n - declined).
 * - a CAS loop that retries is a block that runs once on the value it
 *   finds; sleeping and spinning are a guard that waits for the word.
 */
#ifndef HOGS
#define HOGS 4		/* call 1's hogs: 4, or 3 (leaves {0, 1} and {2}) */
#endif
#define N 4
#define K 2
#define PREPARE 1
#define HOLD 2
#define CHECK 3
#define RUN 4
#define EXIT 5
#define TIMEDOUT 6
#define NOCPU 7

#ifndef TIMEOUTS
#define TIMEOUTS 1
#endif
#ifndef MOVES
#define MOVES 1
#endif
#ifndef BACKOFFS
#define BACKOFFS 1
#endif
#ifndef FAULTS
#define FAULTS 2	/* declines, moves, timeouts, lost holds: how many */
#endif

byte w_gen, w_ph, w_cnt;	/* the word */
byte t_gen, t_decl;		/* the tally: declines */
bool t_gone;
byte c_n;			/* the call's hogs (the caller's store) */
byte n_gen[2], n_ph[2], n_left[2];	/* the leaves */
byte fn_runs;
byte faults;			/* spent of FAULTS */
bool ran[2 * N];		/* fn ran on hog i in call g: ran[(g-1)*N + i] */
bool done[2 * N];		/* hog i's work of call g finished */
bool want[2 * N];		/* fn asked of hog i in call g */
bool holds[2 * N];		/* hog i holds in call g (did not decline) */
bool here[2 * N];		/* hog i of call g acknowledged and not away */
short ret[2];			/* the calls' outcomes, 1 until known */

#define R(g, i) ((g) - 1) * N + (i)
/* the later phases go up the tree: more hogs than K, and none declined */
#define TREE (c_n > K && t_decl == 0)
#define TOP ((c_n + K - 1) / K)
#define KIDS(j) (c_n - (j) * K < K -> c_n - (j) * K : K)

/* every hog that holds in call g is here */
inline all_here()
{
	assert((!holds[R(g, 0)] || here[R(g, 0)]) &&
	       (!holds[R(g, 1)] || here[R(g, 1)]) &&
	       (!holds[R(g, 2)] || here[R(g, 2)]) &&
	       (!holds[R(g, 3)] || here[R(g, 3)]))
}

/* pass(): count this hog through phase ph on the word; the last moves
 * everyone on (after_prepare(), next_count()) */
inline pass(ph, ok)
{
	atomic {
		if
		:: w_gen != g || w_ph != ph -> ok = false
		:: else ->
			if
			:: w_cnt > 1 -> w_cnt--
			:: else ->
				if
				:: ph == PREPARE && (t_gone || t_decl == c_n) ->
					w_ph = NOCPU; w_cnt = 0
				:: ph == PREPARE && !(t_gone || t_decl == c_n) ->
					w_ph = HOLD;
					w_cnt = (TREE -> TOP : c_n - t_decl)
				:: ph == HOLD || ph == CHECK ->
					if
					:: ph == HOLD -> all_here()
					:: else -> skip
					fi;
					w_ph = ph + 1;
					w_cnt = (TREE -> TOP : c_n - t_decl)
				:: ph == RUN -> w_ph = EXIT; w_cnt = 0
				fi
			fi;
			ok = (w_ph < TIMEDOUT)
		fi
	}
}

/* rdv_climb(): pass phase ph at this hog's leaf; the hog that empties
 * it passes the word */
inline climb(ph, ok)
{
	atomic {
		j = i / K;
		if
		:: (n_gen[j] != g && w_gen != g) ||
		   (n_gen[j] == g && n_ph[j] > ph) ||
		   (n_gen[j] == g && n_ph[j] == ph && n_left[j] == 0) ->
			last = false; ok = false	/* stale */
		:: n_gen[j] == g && n_ph[j] == ph && n_left[j] > 0 ->
			n_left[j]--; last = (n_left[j] == 0); ok = true
		:: else ->
			n_gen[j] = g; n_ph[j] = ph; n_left[j] = KIDS(j) - 1;
			last = (n_left[j] == 0); ok = true
		fi
	};
	if
	:: last -> pass(ph, ok)
	:: else -> skip
	fi
}

/* a phase's pass: up the tree, or on the word */
inline arrive(ph, ok)
{
	if
	:: (ph == PREPARE && c_n > K) || (ph != PREPARE && TREE) ->
		climb(ph, ok)
	:: else -> pass(ph, ok)
	fi
}

/* abandon(): give call g up, unless fn was already let run */
inline abandon(why)
{
	atomic {
		if
		:: w_gen == g && w_ph >= PREPARE && w_ph <= CHECK ->
			w_ph = why; w_cnt = 0
		:: else -> skip
		fi
	}
}

/* back_off(): withdraw the acknowledgement on the word, step aside,
 * come back and acknowledge again on the word */
inline back_off()
{
	atomic {
		if
		:: w_gen == g && w_ph == HOLD -> w_cnt++; withdrawn = true
		:: else -> withdrawn = false
		fi
	};
	if
	:: withdrawn ->
		here[R(g, i)] = false;	/* the yield */
		here[R(g, i)] = true;
		pass(HOLD, ok)
	:: else -> skip
	fi
}

/* await_phase(): wait until the phase passes ph; before RUN, give up at
 * the deadline or when the hold is lost, and back off now and then */
inline await_phase(ph, ok)
{
	do
	:: w_gen != g || w_ph >= TIMEDOUT -> ok = false; break
	:: w_gen == g && w_ph > ph && w_ph < TIMEDOUT -> ok = true; break
	:: TIMEOUTS && ph < RUN && w_gen == g && w_ph == ph &&
	   faults < FAULTS -> faults++; abandon(TIMEDOUT)
	:: MOVES && ph < RUN && w_gen == g && w_ph == ph &&
	   faults < FAULTS -> faults++; abandon(NOCPU)
	:: BACKOFFS && ph == HOLD && backoffs < 1 && w_gen == g &&
	   w_ph == HOLD ->
		backoffs++; back_off()
	od
}

proctype hog(byte i; byte g; bool needed)
{
	bool hold, ok, withdrawn, moved, last;
	byte backoffs = 0, j;

	/* arrival: on its CPU, or its CPU went away (declines) */
	if
	:: hold = true
	:: MOVES && faults < FAULTS -> faults++; hold = false
	fi;
	/* tally(): a decline is counted; a holder only reads the tag */
	atomic {
		if
		:: t_gen != g -> goto out
		:: else ->
			t_decl = t_decl + !hold;
			t_gone = t_gone || (!hold && needed);
			holds[R(g, i)] = hold
		fi
	};
	arrive(PREPARE, ok);
	if :: !ok || !hold -> goto out :: else -> skip fi;
	/* await_arrivals() */
	do
	:: w_gen != g || w_ph >= TIMEDOUT -> goto out
	:: w_gen == g && w_ph > PREPARE && w_ph < TIMEDOUT -> break
	:: TIMEOUTS && w_gen == g && w_ph == PREPARE && faults < FAULTS ->
		faults++; abandon(TIMEDOUT)
	od;
	here[R(g, i)] = true;	/* spinning on its CPU from here on */
	arrive(HOLD, ok);
	if :: !ok -> goto out :: else -> skip fi;
	await_phase(HOLD, ok);
	if :: !ok -> goto out :: else -> skip fi;
	/* check_in() (the choice first: see stop.pml) */
	if
	:: MOVES && faults < FAULTS -> faults++; moved = true
	:: moved = false
	fi;
	if
	:: moved -> abandon(NOCPU); goto out
	:: else -> arrive(CHECK, ok)
	fi;
	if :: !ok -> goto out :: else -> skip fi;
	await_phase(CHECK, ok);
	if :: !ok -> goto out :: else -> skip fi;
	/* call_fn(): moved since CHECK, it leaves fn alone */
	if
	:: want[R(g, i)] ->
		if
		:: MOVES && faults < FAULTS -> faults++
		:: atomic { ran[R(g, i)] = true; fn_runs++ }
		fi
	:: else -> skip
	fi;
	arrive(RUN, ok);
	await_phase(RUN, ok);
out:
	done[R(g, i)] = true
}

/* stop_run() and stop_outcome() for call g on its first n hogs */
inline call(g, n, fn_want)
{
	/* the caller's stores, one by one (relaxed, published by the push) */
	fn_runs = 0;
	c_n = n;
	atomic { t_gen = g; t_decl = 0; t_gone = false };
	atomic { w_gen = g; w_ph = PREPARE; w_cnt = (n > K -> TOP : n) };
	k = 0;
	do
	:: k < n -> run hog(k, g, want[R(g, k)]); k++
	:: else -> break
	od;
	/* multi_wait() with stop_poll() */
	do
	:: w_ph >= EXIT -> break
	:: TIMEOUTS && w_ph >= PREPARE && w_ph <= CHECK && faults < FAULTS ->
		faults++; abandon(TIMEDOUT)
	od;
	atomic {
		if
		:: w_ph == EXIT && fn_runs == fn_want -> ret[g - 1] = 0
		:: w_ph == EXIT && fn_runs != fn_want && fn_runs > 0 ->
			ret[g - 1] = -4 /* -EINTR */
		:: w_ph == EXIT && fn_runs == 0 && fn_want > 0 ->
			ret[g - 1] = -2 /* -ENOENT */
		:: w_ph > EXIT -> ret[g - 1] = -110
		fi
	}
}

/* What each outcome promises, checked once every hog has finished. */
inline judge(g, n)
{
	k = 0;
	any = false;
	all = true;
	do
	:: k < n ->
		any = any || ran[R(g, k)];
		all = all && (ran[R(g, k)] || !want[R(g, k)]);
		k++
	:: else -> break
	od;
	assert(ret[g - 1] != 0 || all);
	assert(ret[g - 1] != -4 || (any && !all));
	assert(ret[g - 1] == 0 || ret[g - 1] == -4 || !any);
#if !TIMEOUTS && !MOVES
	assert(ret[g - 1] == 0) /* back-offs alone never stop a call */
#endif
}

init
{
	byte k, g;
	bool any, all;

	/* call 1: fn on hogs 0 and 1; hogs 2 and 3 may decline without
	 * ending the call, which then counts flat after PREPARE */
	want[R(1, 0)] = true; want[R(1, 1)] = true;
	want[R(2, 0)] = true;
	ret[0] = 1; ret[1] = 1;
	g = 1;
	call(1, HOGS, 2);
	/* multi_reserve(): hogs 0 and 1 are done with call 1's slots */
	done[R(1, 0)] && done[R(1, 1)];
	g = 2;
	call(2, 2, 1);
	done[R(1, 2)] && (HOGS < 4 || done[R(1, 3)]) && done[R(2, 0)] &&
	done[R(2, 1)];
	judge(1, HOGS);
	judge(2, 2)
}
