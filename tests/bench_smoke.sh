#!/bin/sh
# usage: bench_smoke.sh CPUHOG
set -eu
out=$("$1" bench --quick --json)
echo "$out" | grep -q '"operations"' || { echo "no operations in: $out"; exit 1; }
if command -v python3 >/dev/null; then
	echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
ops = d["operations"]
assert len(ops) >= 10, "too few operations"
for o in ops:
    assert ("median_ns" in o) or o.get("skipped"), "neither measured nor skipped: %r" % o
ours = [o for o in ops if o["kind"] == "ours"]
assert all("median_ns" in o for o in ours if "own CPU" in o["name"]), "ours not measured"
crowd = d["sync_crowd"]
row = [o for o in ops if o["name"] == "hog_synchronize, 4 concurrent callers"]
assert row, "no row for 4 concurrent hog_synchronize callers"
if "median_ns" in row[0]:
    # every pass is begun by a call, and one may serve several
    assert 0 < crowd["passes"] <= crowd["calls"], crowd
# what a stop costs another process: a row, and its target in time
cost = [o for o in ops if o["name"] == "stop of 20 us fn: other process loses"]
assert cost and ("median_ns" in cost[0] or cost[0].get("skipped")), cost
t = [t for t in d["targets"] if t["target"].startswith("stop of a 20 us fn")]
assert t and t[0]["limit_ns"] == 40000, t
assert ("median_ns" in cost[0]) == (t[0]["met"] is not None), (cost, t)
print("bench smoke: %d operations, %d measured" % (len(ops), sum("median_ns" in o for o in ops)))
'
fi
for bad in "--rounds 0" "--bogus" "--gap -3" "extra"; do
	rc=0
	# shellcheck disable=SC2086
	"$1" bench $bad >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || { echo "bench $bad: exit $rc, not 2"; exit 1; }
done
# A failed row of ours: its cause, no figure from it, its targets not
# measured, and a non-zero exit.
# (stdout alone: the error line on stderr, written while the table is,
# was seen in the middle of a table line under qemu-user)
rc=0
out=$(CPUHOG_BENCH_FAIL="hog_one_cpu, other CPU" "$1" bench --quick --rounds 1 2>/dev/null) || rc=$?
[ "$rc" = 1 ] || { echo "a failed row of ours: exit $rc, not 1"; exit 1; }
echo "$out" | grep -q "^hog_one_cpu, other CPU  *failed: a call failed: Connection timed out" ||
	{ echo "no failed row with its cause in: $out"; exit 1; }
echo "$out" | grep -q "hog_one_cpu within 1.1x of the sleeping limit  *not measured (hog_one_cpu, other CPU failed)" ||
	{ echo "a target fed by a failed row: $out"; exit 1; }
# the kernel entries column, counted or with the reason it is not
echo "$out" | grep -q "^operation .* entries$" &&
	echo "$out" | grep -q "^(entries: kernel entries per call" ||
	{ echo "no entries column: $out"; exit 1; }
# --model: the constants, a row per size, and the model's own shape (not
# a timing): a flat wake grows with N, so at 4,096 CPUs it is the slowest
# column; the figure measured here is printed beside the model's.
rc=0
out=$("$1" bench --model 2>&1) || rc=$?
if [ $rc != 0 ] && echo "$out" | grep -q "needs two CPUs"; then
	echo "bench smoke OK (--model skipped: one CPU here)"
	exit 0
fi
[ $rc = 0 ] || { echo "bench --model failed: $out"; exit 1; }
for n in 64 256 1024 4096; do
	echo "$out" | grep -q "^ *$n  " || { echo "--model: no row $n: $out"; exit 1; }
done
echo "$out" | grep -q "^constants (median of" &&
	echo "$out" | grep -q "^measured here (" ||
	{ echo "--model: no constants or no measured line: $out"; exit 1; }
echo "$out" | awk '$1 == 4096 && !($2 > $3 && $3 > $4 && $5 > $6) {exit 1}' ||
	{ echo "--model: at 4096 flat is not above tree: $out"; exit 1; }
if command -v python3 >/dev/null; then
	"$1" bench --model --json | python3 -c '
import json, sys
m = json.load(sys.stdin)["model"]
assert [r["cpus"] for r in m["rows"]] == [2, 64, 256, 1024, 4096], m
assert m["wake_ns"] > 0 and m["cache_line_ns"] > 0, m
' || { echo "--model --json"; exit 1; }
fi
# Without real-time priority the stop rows are skipped, with the reason.
if [ -x "$(dirname "$0")/nort.sh" ]; then
	out=$(sh "$(dirname "$0")/nort.sh" "$1" bench --quick --rounds 1 2>&1) ||
		{ echo "bench without RT failed: $out"; exit 1; }
	echo "$out" | grep -q "^stop_machine, all CPUs  *skipped: the hogs have no real-time priority" ||
		{ echo "no skip reason for stop_machine without RT: $out"; exit 1; }
fi
echo "bench smoke OK"
