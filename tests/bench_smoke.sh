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
echo "$out" | grep -q "hog_one_cpu within 1.3x of the sleeping limit  *not measured (hog_one_cpu, other CPU failed)" ||
	{ echo "a target fed by a failed row: $out"; exit 1; }
# the kernel entries column, counted or with the reason it is not
echo "$out" | grep -q "^operation .* entries$" &&
	echo "$out" | grep -q "^(entries: kernel entries per call" ||
	{ echo "no entries column: $out"; exit 1; }
# Without real-time priority the stop rows are skipped, with the reason.
if [ -x "$(dirname "$0")/nort.sh" ]; then
	out=$(sh "$(dirname "$0")/nort.sh" "$1" bench --quick --rounds 1 2>&1) ||
		{ echo "bench without RT failed: $out"; exit 1; }
	echo "$out" | grep -q "^stop_machine, all CPUs  *skipped: the hogs have no real-time priority" ||
		{ echo "no skip reason for stop_machine without RT: $out"; exit 1; }
fi
echo "bench smoke OK"
