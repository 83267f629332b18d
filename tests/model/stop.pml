/*
 * The stop (src/stop_machine.c), as a Promela model for spin, checked
 * exhaustively by tests/model_check.sh in make check.
 *
 * Each hog runs stop_cpu(): it reads the word, acts on the phase once,
 * acknowledges it, and waits for the next (await() and rules[]); the
 * last acknowledgement moves the word on.  One atomic block here is one
 * CAS on the C word (gen:32 | phase:8 | count:24); a wait is a guard on
 * the word.  Faults happen at any step the C code allows, FAULTS of them
 * in a run at most (so that the search stays exhaustive in seconds): a
 * hog off its CPU when it acts on PREPARE or CHECK (NOCPU), or at the
 * last look before fn (leaves fn alone); the deadline passing in any wait
 * before RUN, the hog's or the caller's (TIMEDOUT); a lost hold while
 * HOLD or CHECK is waited out (NOCPU), or in RUN, where the hog sleeps
 * until fn returns, as for an overrun.
 *
 * PROCS 1: one process, two calls in a row, as multi_lock makes them:
 * call 1 on hogs 0, 1 and 2 with fn on all three, then call 2 on hogs 0
 * and 1 with fn on hog 0 (stop_two_cpus()).  Call 2 begins once hogs 0
 * and 1 are done with call 1 (multi_reserve() waits for their slots), so
 * hog 2 of an abandoned call 1 may run, late, during call 2: the stale
 * hog.  (A call that ended NOCPU is begun again by the C code: that is
 * the next call, of a new generation, as here.)
 *
 * PROCS 2: two processes, each with a hog on CPUs 0 and 1 and one stop
 * of both, and the machine-wide lock (serialize.c) between them.  A hog
 * runs only while no other process's hog spins on its CPU (SCHED_FIFO at
 * one priority does not preempt), and a hog spins from HOLD on, until it
 * sleeps or leaves; in PREPARE it sleeps.  With NOLOCK the two stops can
 * wedge each other: each holds a CPU the other's last hog needs, until
 * the deadline (run it with TIMEOUTS 0 to see spin find the deadlock).
 * A caller wakes its hogs before it takes the lock, and acknowledges
 * PREPARE (n + 1 acknowledgements) only once it holds it.
 *
 * Checked: fn runs only in RUN of its own call, while every CPU of the
 * call is held by it or the hold was released; an outcome of 0 only if fn
 * ran on every CPU asked, -EINTR only if on some, any other error only if
 * nowhere, even by a hog that runs after the call returned; without
 * faults every call returns 0; every run ends (no invalid end state:
 * nobody left waiting, no deadlock).
 */
#ifndef PROCS
#define PROCS 1
#endif
#ifndef FAULTS
#define FAULTS 1
#endif
#ifndef TIMEOUTS
#define TIMEOUTS 1
#endif
#if PROCS == 1
#define N 3
#define CALLS 2
#else
#define N 2
#define CALLS 1
#endif

#define PREPARE 1
#define HOLD 2
#define CHECK 3
#define RUN 4
#define EXIT 5
#define TIMEDOUT 6
#define NOCPU 7

byte w_gen[PROCS], w_ph[PROCS], w_cnt[PROCS]; /* each process's word */
byte n_of[PROCS];                   /* the current call's hogs */
byte fn_runs[PROCS];
bool released[PROCS];               /* the current call's hold ended */
byte owner[N];                      /* who spins on CPU i: process + 1 */
byte lock;                          /* serialize.c: holder process + 1 */
byte faults;
bool want[PROCS * CALLS * N], ran[PROCS * CALLS * N], done[PROCS * CALLS * N];
short ret[PROCS * CALLS];

#define R(p, g, i) (((p) * CALLS + (g) - 1) * N + (i))
#define FAULT (faults < FAULTS)
#define RUNS(p, i) (PROCS == 1 || owner[i] == 0 || owner[i] == (p) + 1)

/* abandon(): give call g up as why, unless it is past CHECK */
inline abandon(p, g, why)
{
	atomic {
		if
		:: w_gen[p] == g && w_ph[p] < RUN -> w_ph[p] = why; w_cnt[p] = 0
		:: else -> skip
		fi
	}
}

/* ack(): the last acknowledgement of a phase moves the word on */
inline ack(p, g, ph)
{
	atomic {
		if
		:: w_gen[p] == g && w_ph[p] == ph && w_cnt[p] > 1 -> w_cnt[p]--
		:: w_gen[p] == g && w_ph[p] == ph && w_cnt[p] == 1 && ph < RUN ->
			w_ph[p] = ph + 1; w_cnt[p] = n_of[p]
		:: w_gen[p] == g && w_ph[p] == ph && w_cnt[p] == 1 && ph == RUN ->
			w_ph[p] = EXIT; w_cnt[p] = 0
		:: else -> skip
		fi
	}
}

/* The hold: every CPU of the call spins for it, or the hold ended. */
inline held(p, yes)
{
	yes = true;
	k = 0;
	do
	:: k < n_of[p] -> yes = yes && owner[k] == p + 1; k++
	:: else -> break
	od;
	yes = yes || released[p]
}

proctype hog(byte p; byte i; byte g)
{
	byte ph = 0, k;
	bool asleep, yes, go;

	do
	:: RUNS(p, i); /* queued behind whatever spins on its CPU */
		atomic {
			go = w_gen[p] == g && w_ph[p] > ph && w_ph[p] < EXIT;
			ph = (go -> w_ph[p] : ph)
		};
		if
		:: !go -> break
		:: else -> skip
		fi;
		/* act(): the set is fixed (its CPU gone: abort) */
		if
		:: (ph == PREPARE || ph == CHECK) && FAULT ->
			faults++; abandon(p, g, NOCPU); break
		:: ph == RUN && want[R(p, g, i)] && FAULT ->
			faults++ /* moved at the last look: fn left alone */
		:: ph == RUN && want[R(p, g, i)] ->
			atomic {
				held(p, yes);
				assert(w_gen[p] == g && w_ph[p] == RUN && yes);
				ran[R(p, g, i)] = true; fn_runs[p]++
			}
		:: else -> skip
		fi;
		ack(p, g, ph);
		/* from HOLD on it spins on its CPU: SCHED_FIFO, nobody else
		 * at its priority runs there until it sleeps or leaves */
		if
		:: ph == PREPARE -> skip
		:: else -> atomic { RUNS(p, i); owner[i] = p + 1 }
		fi;
		/* await(): rules[ph] at each event */
		asleep = false;
		do
		:: w_gen[p] != g || w_ph[p] != ph -> break
		:: TIMEOUTS && ph < RUN && FAULT && w_gen[p] == g &&
		   w_ph[p] == ph -> faults++; abandon(p, g, TIMEDOUT)
		:: (ph == HOLD || ph == CHECK) && FAULT && w_gen[p] == g &&
		   w_ph[p] == ph -> faults++; abandon(p, g, NOCPU)
		:: ph == RUN && !asleep && FAULT && w_gen[p] == g &&
		   w_ph[p] == RUN ->
			faults++;
			atomic { released[p] = true; asleep = true;
				 owner[i] = 0 }
		od;
		if
		:: asleep -> atomic { RUNS(p, i); owner[i] = p + 1 }
		:: else -> skip
		fi
	od;
	atomic {
		if
		:: owner[i] == p + 1 -> owner[i] = 0
		:: else -> skip
		fi;
		done[R(p, g, i)] = true
	}
}

/* stop_once(): call g of process p on its first n hogs, which it wakes
 * before it takes the machine-wide lock (once per process here); its own
 * acknowledgement of PREPARE (the count is n + 1) comes after */
inline call(p, g, n, fn_want)
{
	fn_runs[p] = 0;
	released[p] = false;
	n_of[p] = n;
	atomic { w_gen[p] = g; w_ph[p] = PREPARE; w_cnt[p] = n + 1 };
	k = 0;
	do
	:: k < n -> run hog(p, k, g); k++
	:: else -> break
	od;
#if PROCS == 2 && !defined(NOLOCK)
	atomic { lock == 0 -> lock = p + 1 };
#endif
	ack(p, g, PREPARE);
	/* multi_wait() with stop_poll(): all done, or abandoned */
	do
	:: w_ph[p] == EXIT && (n < 1 || done[R(p, g, 0)]) &&
	   (n < 2 || done[R(p, g, 1)]) && (n < 3 || done[R(p, g, 2)]) -> break
	:: w_ph[p] > EXIT -> break
	:: TIMEOUTS && FAULT && w_ph[p] < RUN ->
		faults++; abandon(p, g, TIMEDOUT)
	od;
	atomic {
		if
		:: w_ph[p] == EXIT && fn_runs[p] == fn_want -> ret[p * CALLS + g - 1] = 0
		:: w_ph[p] == EXIT && fn_runs[p] != fn_want && fn_runs[p] > 0 ->
			ret[p * CALLS + g - 1] = -4 /* -EINTR */
		:: w_ph[p] == EXIT && fn_runs[p] == 0 ->
			ret[p * CALLS + g - 1] = -2 /* -ENOENT, begun again */
		:: w_ph[p] == NOCPU -> ret[p * CALLS + g - 1] = -2
		:: w_ph[p] == TIMEDOUT -> ret[p * CALLS + g - 1] = -110
		fi
	}
}

/* What each outcome promises, once every hog has finished. */
inline judge(p, g, n)
{
	k = 0;
	any = false;
	all = true;
	do
	:: k < n ->
		any = any || ran[R(p, g, k)];
		all = all && (ran[R(p, g, k)] || !want[R(p, g, k)]);
		k++
	:: else -> break
	od;
	assert(ret[p * CALLS + g - 1] != 0 || all);
	assert(ret[p * CALLS + g - 1] != -4 || (any && !all));
	assert(ret[p * CALLS + g - 1] == 0 || ret[p * CALLS + g - 1] == -4 ||
	       !any);
	assert(FAULTS > 0 || ret[p * CALLS + g - 1] == 0)
}

#if PROCS == 2
proctype caller(byte p)
{
	byte k;
	bool any, all;

	want[R(p, 1, 0)] = true;
	call(p, 1, 2, 1);
	lock = 0;
	done[R(p, 1, 0)] && done[R(p, 1, 1)];
	judge(p, 1, 2)
}

init
{
	atomic { run caller(0); run caller(1) }
}
#else
init
{
	byte k;
	bool any, all;

	want[R(0, 1, 0)] = true; want[R(0, 1, 1)] = true;
	want[R(0, 1, 2)] = true; want[R(0, 2, 0)] = true;
	call(0, 1, 3, 3);
	/* multi_reserve(): hogs 0 and 1 are done with call 1's slots */
	done[R(0, 1, 0)] && done[R(0, 1, 1)];
	call(0, 2, 2, 1);
	done[R(0, 1, 2)] && done[R(0, 2, 0)] && done[R(0, 2, 1)];
	judge(0, 1, 3);
	judge(0, 2, 2)
}
#endif
