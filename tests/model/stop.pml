/*
 * The stop's rendezvous (src/stop_machine.c), as a Promela model for
 * spin, checked exhaustively by tests/model_check.sh in make check.
 *
 * Two calls in a row, as the C code makes them under the multi-CPU lock:
 * call 1 on hogs 0, 1 and 2 with fn on all three, then call 2 on hogs 0
 * and 1 with fn on hog 0 alone (stop_two_cpus()).  Call 2 begins once the
 * works of hogs 0 and 1 of call 1 are finished (multi_reserve() waits
 * for their slots), so hog 2 of call 1 may still be running, late, while
 * call 2 runs: the stale hog.  Anything may happen at any step the C code
 * allows it: a hog finds its CPU gone at arrival (declines), is moved
 * before CHECK or before fn (skips fn), backs off in HOLD, sees the
 * deadline pass (TIMEOUTS), or finds the hold lost (NOCPU).
 *
 * Checked: an outcome of 0 only if fn ran on every CPU asked; -EINTR
 * only if it ran on some; any other error only if it ran nowhere, even
 * by a hog that runs after the call returned; every hog's run ends (no
 * invalid end state: nobody left waiting, no deadlock).
 *
 * The correspondence, each C function to the inline of the same name:
 * one CAS on the 64-bit word (gen:32 | phase:8 | count:24) is one atomic
 * block here on w_gen, w_ph and w_cnt; one CAS on the tally (gen, held,
 * gone) likewise.  A CAS loop that retries is a block that runs once on
 * the value it finds.  Sleeping and spinning are a guard that waits for
 * the word to change; a timed-out wait is the TIMEOUTS choice.
 */
#define N 3
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

byte w_gen, w_ph, w_cnt;	/* the word */
byte t_gen, t_held;		/* the tally */
bool t_gone;
byte fn_runs;
bool ran[2 * N];		/* fn ran on hog i in call g: ran[(g-1)*N + i] */
bool done[2 * N];		/* hog i's work of call g finished */
bool want[2 * N];		/* fn asked of hog i in call g */
short ret[2];			/* the calls' outcomes, 1 until known */

#define R(g, i) ((g) - 1) * N + (i)

/* pass(): count this hog through phase ph; the last moves everyone on */
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
				:: ph == PREPARE && (t_gone || t_held == 0) ->
					w_ph = NOCPU; w_cnt = 0
				:: ph == PREPARE && !(t_gone || t_held == 0) ->
					w_ph = HOLD; w_cnt = t_held
				:: ph == HOLD || ph == CHECK ->
					w_ph = ph + 1; w_cnt = t_held
				:: ph == RUN -> w_ph = EXIT; w_cnt = 0
				fi
			fi;
			ok = (w_ph < TIMEDOUT)
		fi
	}
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

/* back_off(): withdraw the acknowledgement, step aside, give it again */
inline back_off()
{
	atomic {
		if
		:: w_gen == g && w_ph == HOLD -> w_cnt++; withdrawn = true
		:: else -> withdrawn = false
		fi
	};
	if
	:: withdrawn -> pass(HOLD, ok)
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
	:: TIMEOUTS && ph < RUN && w_gen == g && w_ph == ph ->
		abandon(TIMEDOUT)
	:: MOVES && ph < RUN && w_gen == g && w_ph == ph ->
		abandon(NOCPU)
	:: BACKOFFS && ph == HOLD && backoffs < 1 && w_gen == g &&
	   w_ph == HOLD ->
		backoffs++; back_off()
	od
}

proctype hog(byte i; byte g; bool needed)
{
	bool hold, ok, withdrawn, moved;
	byte backoffs = 0;

	/* arrival: on its CPU, or its CPU went away (declines) */
	if
	:: hold = true
	:: MOVES -> hold = false
	fi;
	/* tally() */
	atomic {
		if
		:: t_gen != g -> goto out
		:: else -> t_held = t_held + hold; t_gone = t_gone || (!hold && needed)
		fi
	};
	pass(PREPARE, ok);
	if :: !ok || !hold -> goto out :: else -> skip fi;
	/* await_arrivals() */
	do
	:: w_gen != g || w_ph >= TIMEDOUT -> goto out
	:: w_gen == g && w_ph > PREPARE && w_ph < TIMEDOUT -> break
	:: TIMEOUTS && w_gen == g && w_ph == PREPARE -> abandon(TIMEDOUT)
	od;
	pass(HOLD, ok);
	if :: !ok -> goto out :: else -> skip fi;
	await_phase(HOLD, ok);
	if :: !ok -> goto out :: else -> skip fi;
	/* check_in(): on its own CPU, or the stop gives up.  (The choice is
	 * made first: an inline whose if has an else, as a guard, takes
	 * that else for the outer choice's, and the pass is never chosen.) */
	if
	:: MOVES -> moved = true
	:: moved = false
	fi;
	if
	:: moved -> abandon(NOCPU); goto out
	:: else -> pass(CHECK, ok)
	fi;
	if :: !ok -> goto out :: else -> skip fi;
	await_phase(CHECK, ok);
	if :: !ok -> goto out :: else -> skip fi;
	/* call_fn(): moved since CHECK, it leaves fn alone */
	if
	:: want[R(g, i)] ->
		if
		:: MOVES -> skip
		:: atomic { ran[R(g, i)] = true; fn_runs++ }
		fi
	:: else -> skip
	fi;
	pass(RUN, ok);
	await_phase(RUN, ok);
out:
	done[R(g, i)] = true
}

/* stop_run() and stop_outcome() for call g on its first n hogs */
inline call(g, n, fn_want)
{
	/* the caller's stores, one by one (relaxed, published by the push) */
	fn_runs = 0;
	atomic { t_gen = g; t_held = 0; t_gone = false };
	atomic { w_gen = g; w_ph = PREPARE; w_cnt = n };
	k = 0;
	do
	:: k < n -> run hog(k, g, want[R(g, k)]); k++
	:: else -> break
	od;
	/* multi_wait() with stop_poll() */
	do
	:: w_ph >= EXIT -> break
	:: TIMEOUTS && w_ph >= PREPARE && w_ph <= CHECK -> abandon(TIMEDOUT)
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

	want[R(1, 0)] = true; want[R(1, 1)] = true; want[R(1, 2)] = true;
	want[R(2, 0)] = true;
	ret[0] = 1; ret[1] = 1;
	g = 1;
	call(1, 3, 3);
	/* multi_reserve(): hogs 0 and 1 are done with call 1's slots */
	done[R(1, 0)] && done[R(1, 1)];
	g = 2;
	call(2, 2, 1);
	done[R(1, 2)] && done[R(2, 0)] && done[R(2, 1)];
	judge(1, 3);
	judge(2, 2)
}
