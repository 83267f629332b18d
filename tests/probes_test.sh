#!/bin/sh
# The USDT probes (src/probes.h): every probe that cpuhog-probes(7)
# documents is in the built library, and every probe in it is
# documented; and where perf can attach (root, perf, uprobes), one fires
# in a stop.  Exit 77 (skipped) for a library built without
# <sys/sdt.h>.
# usage: probes_test.sh SOURCE_DIR LIBRARY TOOL
set -u
src=$1 lib=$2 tool=$3
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
page=$src/man/man7/cpuhog-probes.7
notes=$(readelf -n "$lib" 2>/dev/null | grep -A3 'stapsdt' | sed -n 's/^ *Provider: *//p;s/^ *Name: *//p' | paste - - | awk '{print $1":"$2}' | sort -u)
if [ -z "$notes" ]; then
	echo "skipped: $lib has no USDT probes (built without sys/sdt.h: apt-get install systemtap-sdt-dev)"
	exit 77
fi
documented=$(grep -E '^\.BI? [a-z_]+\(' "$page" | sed -E 's/^\.BI? ([a-z_]+)\(.*/\1/' | sort -u)
[ -n "$documented" ] || { echo "no probes found in $page"; exit 1; }
for p in $documented; do
	echo "$notes" | grep -qx "cpuhog:$p" || fail "cpuhog:$p is documented but not in $lib"
done
for n in $notes; do
	echo "$documented" | grep -qx "${n#cpuhog:}" || fail "$n is in $lib but not in cpuhog-probes(7)"
done
echo "$(echo "$documented" | wc -l) probes documented, $(echo "$notes" | wc -l) in the library"

# one fires: perf probe on the library, perf record around a stop
if [ "$(id -u)" != 0 ] || ! command -v perf >/dev/null 2>&1 || ! perf --version >/dev/null 2>&1; then
	echo "skipped: perf attach (needs root and perf)"
elif [ ! -d /sys/kernel/tracing ] && [ ! -d /sys/kernel/debug/tracing ]; then
	echo "skipped: perf attach (no tracefs for uprobes)"
else
	tmp=$(mktemp -d)
	ev=sdt_cpuhog:stop_return
	added=0
	if perf --buildid-dir "$tmp/bid" buildid-cache --add "$lib" >"$tmp/log" 2>&1 &&
		perf --buildid-dir "$tmp/bid" probe -x "$lib" -a "%$ev" >>"$tmp/log" 2>&1; then
		added=1
	fi
	if [ $added = 0 ]; then
		echo "skipped: perf cannot attach here: $(tail -1 "$tmp/log")"
	else
		perf record -q -o "$tmp/perf.data" -e "$ev" -- "$tool" stall -c all -D 1ms \
			>"$tmp/out" 2>&1
		n=$(perf script -i "$tmp/perf.data" 2>/dev/null | grep -c "$ev")
		[ "$n" -ge 1 ] || fail "perf record -e $ev: no event in a stop: $(cat "$tmp/out")"
		echo "perf: $ev fired $n times"
		perf probe -d "$ev" >/dev/null 2>&1
	fi
	rm -rf "$tmp"
fi
[ $fails = 0 ] && echo "probes OK"
[ $fails = 0 ]
