#!/bin/sh
# The cpuhog command, end to end: each subcommand with short durations,
# its output and exit status, and bad input (a clear error, status 2,
# nothing hogged).   usage: tool_test.sh CPUHOG
set -u
B=$1
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS PATTERN ARGS...: exit status and a pattern in the output
expect() {
	want=$1 pat=$2
	shift 2
	out=$($B "$@" 2>&1)
	rc=$?
	[ "$rc" = "$want" ] || { bad "cpuhog $*: exit $rc, want $want: $out"; return; }
	echo "$out" | grep -q -- "$pat" || { bad "cpuhog $*: no '$pat' in: $out"; return; }
	ok
}
# refused CMD 'ARGS' (as typed, quotes and all): bad input, so status 2, a
# one-line error, and nothing stalled or measured
refused() {
	out=$(eval "$B $1 $2" 2>&1)
	rc=$?
	lines=$(echo "$out" | wc -l)
	if [ "$rc" != 2 ] || [ "$lines" != 1 ] || echo "$out" | grep -q "^stall \|max gap"; then
		bad "$1 $2: exit $rc, $lines lines: $out"
	else
		ok
	fi
}

expect 0 "^cpuhog [0-9]" --version
expect 0 "commands:" --help
expect 2 "unknown command" frobnicate
expect 2 "usage" 
for c in info stall noise bench; do expect 0 "usage: cpuhog $c" "$c" --help; done

expect 0 "CPUs hogged:" info
expect 0 '"nr_hogs"' info --json
expect 0 "^mode: *sleep on" info
CPUHOG_POLL=1 expect 0 "^mode: *poll: polling on" info
CPUHOG_POLL=1 expect 0 '"mode": "poll"' info --json
expect 2 "unexpected argument" info extra
expect 2 "usage" info --bogus

expect 0 "stall 1: CPUs 0 held" stall --cpus 0 --for 5ms
expect 0 "stall 3:" stall --cpus 0 --for 2ms --every 20ms --count 3
# a stop of every CPU may time out where a guest has more than 8 vCPUs
# per host CPU (the header allows it, and the tool says so with exit 1:
# once in three runs at 64 vCPUs on 2 host CPUs, with the runner's 6.4 s
# timeout); there it is tried up to three times, as the C tests retry
tries=1
[ "${CPUHOG_GUEST_LOAD:-1}" -gt 8 ] && tries=3
while out=$($B stall --cpus all --for 5ms 2>&1); rc=$?; [ "$rc" = 1 ] &&
	[ "$tries" -gt 1 ] && echo "$out" | grep -q "timed out"; do
	tries=$((tries - 1))
done
[ "$rc" = 0 ] && echo "$out" | grep -q "stop_machine" && ok ||
	bad "cpuhog stall --cpus all --for 5ms: exit $rc: $out"

# stall's report: the time to hold every CPU and the hold, in words and
# in --json; and, with another process's FIFO 99 spinner on the second
# CPU, a failed stop names that CPU and that process.  The spinner is
# bounded by the kernel (RLIMIT_RTTIME, 700 ms of real-time CPU without
# a sleep: SIGKILL), not by a timer process, which at its priority on its
# CPU would never run; and by timeout on the first CPU as well.
expect 0 "all held after .*, for " stall -c all -D 2ms
expect 0 '"all_held_ns": [1-9]' stall -c all -D 2ms --json
expect 0 '"report": null' stall -c 0 -D 2ms --json
cpus=$($B info 2>/dev/null | sed -n 's/^CPUs hogged: *//p')
if [ "$(id -u)" = 0 ] && command -v chrt >/dev/null && command -v prlimit >/dev/null &&
	$B info 2>/dev/null | grep -q "SCHED_FIFO" && [ "$($B info --json | grep -c '"nr_hogs": [2-9]')" -gt 0 ]; then
	c0=$(echo "$cpus" | sed 's/[-,].*//') c1=$(echo "$cpus" | sed -E 's/^[0-9]+[-,]([0-9]+).*/\1/')
	# the hogs must be up before the spinner spins (cpuhog_init() waits
	# for each): the spinner waits on a FIFO until the first stall has
	# succeeded, a later one meets it, and the run goes on to the sixth
	# (it ends with the failure's status).  Started beforehand, so that
	# its fork and four execs (slow in a guest) are done by then.
	# Beside another process's stops, a stall may first wait for the
	# machine-wide lock, up to one of theirs (it waits for the spinner
	# too): 100 ms apart, the spinner's 700 ms covers that wait and the
	# stall's own 200 ms timeout; a guest's longer stop timeout (the
	# stall honours CPUHOG_STOP_TIMEOUT_MS) makes it spin three of those.
	stop_ms=${CPUHOG_STOP_TIMEOUT_MS:-200}
	spin_us=$((stop_ms * 3500))
	f=/tmp/cpuhog-stall-held.$$ go=/tmp/cpuhog-stall-go.$$
	# held open read-write here: the spinner's open never waits for a
	# writer, and the release's write never waits for a reader
	rm -f "$go" && mkfifo "$go" && exec 3<>"$go"
	taskset -c "$c0" timeout -s KILL $((30 + spin_us / 100000)) chrt -f 99 taskset -c "$c1" \
		prlimit --rttime=$spin_us:$spin_us sh -c "read x <$go; while :; do :; done" &
	spinner=$!
	# its execs at FIFO 99 over, asleep in its read, before the stall
	# (in a guest they outlast a stop's timeout): timeout's child
	# (chrt, taskset, prlimit exec on to sh), from /proc, where /proc
	# tells it (the guests have no pgrep), else 3 s
	n=0
	while [ $n -lt 300 ]; do
		holder=$(cat /proc/"$spinner"/task/*/children 2>/dev/null | awk '{ print $1; exit }')
		[ -n "$holder" ] && [ "$(cat /proc/"$holder"/comm 2>/dev/null)" = sh ] &&
			grep -q '^State:.*S' /proc/"$holder"/status 2>/dev/null && break
		sleep 0.01
		n=$((n + 1))
	done
	# 100 ms apart, or a guest's stall (seconds at 64 vCPUs) would run
	# the next back to back, its hog on $c1 before the spinner spins
	"$B" stall -c all -D 5ms -i $((100 * ${CPUHOG_TEST_SLOW:-1}))ms -l 6 >"$f" 2>&1 &
	stall=$!
	n=0
	while ! grep -qsE "^stall 1:|stop_machine failed" "$f" && [ $n -lt 1000 ]; do sleep 0.01; n=$((n + 1)); done
	echo go >&3
	wait "$stall"
	rc=$?
	out=$(cat "$f")
	exec 3>&-
	rm -f "$f" "$go"
	wait "$spinner" 2>/dev/null
	# the spinner's pid where /proc told it (a guest's may not: any pid,
	# still a shell at FIFO 99 on that CPU)
	tries=$(echo "$out" | grep -cE "^stall [0-9]+:|stop_machine failed")
	if [ "$rc" = 1 ] && [ "$tries" = 6 ] &&
		echo "$out" | grep -q "CPU $c1 never came: pid ${holder:-[0-9]*} tid [0-9]* (sh) at SCHED_FIFO 99"; then
		ok
	elif [ "$rc" = 1 ] && echo "$out" | grep -q "kept the machine-wide stop lock"; then
		# other processes' stops, waiting for the held CPU themselves
		echo "skipped: stall against a spinner: other processes' stops kept the stop lock"
	else
		bad "stall against a FIFO 99 spinner on CPU $c1: exit $rc: $out"
	fi
else
	echo "skipped: stall against a spinner (needs root, chrt, prlimit, two FIFO hogs)"
fi

# bad input: status 2, a one-line error, no stall at all
for args in "--cpus 99999 --for 5ms" "--cpus 3-1 --for 5ms" \
	"--cpus 0 --for -5ms" "--cpus 0 --for 10parsecs" "--cpus 0 --for 5" \
	"--cpus 0 --for 600ms" "--cpus all --for 60ms --every 100ms" \
	"--cpus 0" "--for 5ms" "--cpus 0, --for 5ms" "--cpus x --for 5ms" \
	"--cpus 0 --for 5ms --count 0" "--cpus 0 --for 50ms --every 10ms" \
	"--cpus all --for 20ms --count 4" "--cpus 0 --for 500ms --count 100" \
	"--cpus 0 --for 20ms --every 30ms --count 3" "-c 0-1:0 -D 5ms"; do
	refused stall "$args"
done

# the safety rule names what it refuses; what it allows still runs
expect 2 "back to back" stall --cpus all --for 20ms --count 4
expect 2 "more than half the time" stall -c 0 -D 20ms -i 30ms -l 3
expect 0 "stall 2:" stall -c 0 -D 5ms -i 20ms -l 2
# short options as oslat and cyclictest users type them; which is missing
expect 0 "usage: cpuhog stall" stall -h
expect 0 "usage: cpuhog noise" noise -h
expect 0 "usage: cpuhog tour" tour --help
expect 2 "cpuhog tour: unexpected argument" tour extra
expect 2 "needs --for" stall -c 0
expect 2 "needs --cpus" stall -D 5ms
expect 2 "^cpuhog info: unrecognized option" info --bogus
expect 0 "stall 1: CPUs 0 held" stall -c 0-1:2 -D 2ms
expect 0 "hogs at SCHED_FIFO" stall -c 0 -D 2ms
expect 2 "needs a unit" bench --gap 50
expect 2 "bad duration" bench --gap 5parsecs
# without real time every subcommand says so, and the figures say which
# policy measured them
N=$(dirname "$0")/nort.sh
if [ -x "$N" ] || [ -f "$N" ]; then
	B0=$B; B="sh $N $B0"
	expect 0 "not real time" noise -c 1 -D 50ms
	expect 0 "in a hog at SCHED_OTHER" noise -c 1 -D 50ms
	expect 0 '"policy": "SCHED_OTHER' noise -c 1 -D 50ms -j
	expect 0 "hogs at SCHED_OTHER.*a load, not a stall" stall -c 1 -D 2ms
	expect 1 "stop_machine cannot hold every CPU" stall -c all -D 2ms
	B=$B0
fi
# noise: the histogram starts at the threshold; bars on a terminal
out=$($B noise -c 1 -D 50ms -T 100ns 2>&1)
echo "$out" | grep -q "\[ *64 ns," && bad "a bucket below the threshold: $out" || ok
if command -v script >/dev/null; then
	script -qec "$B noise -c 1 -D 50ms" /dev/null | grep -q '#' && ok ||
		bad "no histogram bars on a terminal"
fi

# Ctrl-C ends a periodic stall cleanly between stalls
"$B" stall --cpus 0 --for 1ms --every 50ms >/tmp/cpuhog-stall.$$ 2>&1 &
pid=$!
sleep 0.5
kill -INT $pid
wait $pid
rc=$?
grep -q "interrupted after" /tmp/cpuhog-stall.$$ && [ "$rc" = 0 ] && ok ||
	bad "stall interrupted: exit $rc: $(cat /tmp/cpuhog-stall.$$)"
rm -f /tmp/cpuhog-stall.$$

expect 0 "max gap" noise --cpus 0 --duration 200ms --rest 20ms
expect 0 '"max_gap_ns"' noise --cpus all --duration 60ms --json --threshold 2us
expect 2 "needs --cpus" noise --duration 1s
# one duration syntax for every option of every subcommand: a number and
# a unit (ns, us, ms, s, m, h); a bare number is refused, not guessed
# (the figure may pass the duration by the run's last gap: 0.084 s of 80 ms
# in an 8-vCPU guest, where a gap can last milliseconds)
expect 0 "measured 0\.05[0-9] s of " noise --cpus 0 --duration 0.05s
expect 2 "needs a unit: ns, us, ms, s, m or h" noise --cpus 0 --duration 0.05
expect 2 "needs --duration D (-D), above 0" noise --cpus 0 --duration 0
expect 2 "period above 0" stall -c 0 -D 1ms -i 0
expect 2 "needs a unit" noise -c 0 -D 1s -T 5
expect 2 "needs a unit" noise -c 0 -D 1s --rest 20
# continuous by default: the whole run measured, in one hog call; --rest
# measures in 100 ms slices with rests (not measured) between them
expect 0 "measured 0\.0[89][0-9] s of " noise -c 0 -D 80ms
expect 0 ", continuously;" noise -c 0 -D 20ms
expect 0 '"rest_ns": 0,' noise -c 0 -D 20ms -j
expect 0 "in 100 ms slices;" noise -c 0 -D 150ms --rest 30ms
expect 0 '"rest_ns": 30000000,' noise -c 0 -D 150ms --rest 30ms -j
expect 2 "bad duration" noise -c 0 -D 20ms --rest 3parsecs
expect 2 "needs a unit" stall -c 0 -D 1
expect 2 "needs a unit" stall -c 0 -D 1ms -i 1
expect 2 "over 500 ms" stall -c 0 -D 1m
expect 2 "unknown unit 'x' (ns, us, ms, s, m, h)" noise -c 0 -D 1x
# Ctrl-C (or a service manager's SIGTERM) ends a run with its summary:
# a continuous run (INT) and one in slices with rests (TERM).  The signal
# comes once the hogs are up (their priority said), so that the hog of a
# continuous run spins for milliseconds, not the run's 10 s.
for sig in INT TERM; do
	rest=""; [ $sig = TERM ] && rest="--rest 20ms"
	$B noise -c 0 -D 10s $rest >/tmp/cpuhog-noise-$$ 2>&1 &
	p=$!
	i=0
	while ! grep -q "hogs at" /tmp/cpuhog-noise-$$ && [ $i -lt 500 ]; do
		sleep 0.01; i=$((i + 1))
	done
	sleep 0.02
	kill -$sig $p
	wait $p
	rc=$?
	if [ $rc = 0 ] && grep -q "ended early by a signal" /tmp/cpuhog-noise-$$; then
		ok
	else
		bad "noise after SIG$sig: exit $rc: $(cat /tmp/cpuhog-noise-$$)"
	fi
	rm -f /tmp/cpuhog-noise-$$
done
expect 2 "bad duration" noise --cpus 0 --duration 3parsecs
# --priority: the hogs at SCHED_FIFO N, as oslat -f N and rtla -P f:N;
# 0 or other: the tool's own pinned threads at SCHED_OTHER
expect 0 "hogs at SCHED_FIFO 50" noise -c 1 -D 20ms --priority 50
expect 0 '"policy": "SCHED_FIFO 7"' noise -c 1 -D 20ms -P 7 -j
expect 0 "in a pinned thread at SCHED_OTHER nice" noise -c 1 -D 20ms -P other
expect 0 '"policy": "SCHED_OTHER nice' noise -c 0 -D 20ms -P 0 -j
expect 0 "measured 0\.0[45][0-9] s of " noise -c 0 -D 40ms -P other
expect 0 "in 100 ms slices" noise -c 0 -D 150ms --rest 20ms -P other
# --force: every CPU at a real-time priority, continuously over 500 ms or
# with rests shorter than the slices, is refused (stall's rules); at
# SCHED_OTHER it holds nothing and needs none
expect 2 "add --force" noise -c all -D 1h
expect 2 "add --force" noise -c all -D 1s --rest 20ms
expect 0 "in 100 ms slices" noise -c all -D 150ms --rest 20ms --force
expect 0 "max gap" noise -c all -D 600ms -P other
for args in "-c 0 -D 10ms -P 100" "-c 0 -D 10ms -P -1" "-c 0 -D 10ms -P x" \
	"-c 0 -D 10ms --priority ''" "-c all -D 1h" "-c all -D 2s --rest 50ms" \
	"-c 0 -D 5"; do
	refused noise "$args"
done
expect 2 "has no hog" noise --cpus 4000 --duration 10ms
# past the last CPU id: the CPUs there are, not the set's rounded size
expect 2 "CPU 99 has no hog; allowed: " stall -c 99 -D 1ms
expect 2 "period above 0" stall -c 0 -D 1ms -i 0s
# started under taskset: hogs on those CPUs only, others refused
if command -v taskset >/dev/null; then
	B0=$B; B="taskset -c 1 $B0"
	expect 0 "CPUs hogged:     1 (1 hog)" info
	expect 2 "allowed: 1$" stall --cpus 0 --for 1ms
	# a CPU the machine has, outside the process (not a number past
	# the CPUs: at 64 CPUs, CPU 60 was there and hogged)
	expect 2 "outside this process" noise --cpus 0 --duration 10ms
	B=$B0
fi
if command -v python3 >/dev/null; then
	"$B" noise --cpus all --duration 60ms --json --threshold 100ns | python3 -c '
import json, sys
d = json.load(sys.stdin)
for c in d["cpus"]:
    for b in c["histogram"]:
        assert b is not None and b["from_ns"] >= d["threshold_ns"], b
' && ok || bad "noise --json: nulls, or buckets below the threshold"
	"$B" info --json | python3 -m json.tool >/dev/null && ok || bad "info --json does not parse"
	# per CPU as sysjitter and rtla give it: percentiles in order, no
	# more than the longest gap, noise and available adding up, the
	# kernel's counts; --samples keeps every gap counted
	f=/tmp/cpuhog-samples.$$
	"$B" noise --cpus all --duration 60ms --json --threshold 200ns \
		--samples $f 2>/dev/null | python3 -c '
import csv, json, sys
d = json.load(sys.stdin)
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
assert rows[0] == ["cpu", "monotonic_ns", "gap_ns"], rows[0]
for c in d["cpus"]:
    p = [c["percentiles_ns"][k] for k in ("50", "90", "99", "99.9", "99.99")]
    assert p == sorted(p) and p[-1] <= c["max_gap_ns"], c
    assert c["gaps"] == 0 or p[0] > d["threshold_ns"], c
    assert abs(c["noise_pct"] + c["available_pct"] - 100) < 0.01, c
    assert isinstance(c["sources"], dict) and c["preempted"] >= 0, c
    mine = [int(r[2]) for r in rows[1:] if int(r[0]) == c["cpu"]]
    assert len(mine) == c["samples"] == min(c["gaps"], 65536), (len(mine), c)
    assert all(g > d["threshold_ns"] for g in mine), c
    assert len(mine) < 65536 or c["samples_dropped"] == c["gaps"] - 65536, c
' $f && ok || bad "noise --json --samples: percentiles, sources or samples wrong"
	rm -f $f
fi
expect 0 "p99.99" noise -c 0 -D 60ms -T 200ns
expect 0 "sources: preempted [0-9]*" noise -c 0 -D 60ms
expect 2 "cannot write /nonexistent/x" noise -c 0 -D 10ms --samples /nonexistent/x
expect 2 "at least the --threshold" noise -c 0 -D 10ms -T 5us --trace-above 1us
# --trace-above: the marker in the trace buffer, tracing stopped, the run
# ended (where the kernel's trace files are ours to write)
T=/sys/kernel/tracing
if [ -w $T/trace_marker ] && [ -w $T/tracing_on ]; then
	was=$(cat $T/tracing_on)
	echo 1 >$T/tracing_on
	out=$($B noise -c 0 -D 10s -T 100ns --trace-above 100ns -j 2>&1)
	rc=$? on=$(cat $T/tracing_on)
	if [ $rc = 0 ] && [ "$on" = 0 ] && echo "$out" | grep -q '"ended_by": "trace-above"' &&
		grep -q "cpuhog noise: CPU 0 gap" $T/trace; then
		ok
	else
		bad "noise --trace-above: exit $rc, tracing_on $on: $out"
	fi
	echo "$was" >$T/tracing_on
else
	echo "skipped: noise --trace-above (no writable $T: needs root and tracefs)"
fi

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
