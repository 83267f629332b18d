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
echo "bench smoke OK"
