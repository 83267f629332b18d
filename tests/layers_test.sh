#!/bin/sh
# The library's files call down a fixed order and never back up: the
# context layer (context.c, topology.c) under every room, lifecycle.c
# (the entry of every call, which starts the hogs) under the calls.  A
# call from a file to one later in the order is a loop in the making,
# as hog.c and lifecycle.c once were (each called the other).  Checked
# on the static archive: each member's undefined names, and which member
# defines them.
# usage: layers_test.sh STATIC_LIB
set -eu
ar=$1
order="platform symbols context topology serialize switches report poll wake hog lifecycle call_report
single multi stop_machine sched"
rank() {
	i=0
	for f in $order; do
		[ "$f" = "$1" ] && { echo $i; return; }
		i=$((i + 1))
	done
	echo -1
}
nm=${NM:-nm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# member name (hog.c.o, or hog.o) -> file stem
"$nm" -A --defined-only "$ar" 2>/dev/null |
	awk -F'[: ]+' 'NF>=4 && $(NF-1) ~ /^[TDBRVW]$/ {m=$2; sub(/\.c\.o$|\.o$/, "", m); print $NF, m}' \
	>"$tmp/defs"
bad=0
members=$(cut -d' ' -f2 "$tmp/defs" | sort -u)
[ -n "$members" ] || { echo "no members read from $ar"; exit 1; }
for m in $members; do
	r=$(rank "$m")
	if [ "$r" -lt 0 ]; then
		echo "src/$m.c is not in the order of layers_test.sh: place it"
		bad=1
		continue
	fi
	"$nm" -A --undefined-only "$ar" 2>/dev/null |
		awk -F'[: ]+' -v m="$m" '{x=$2; sub(/\.c\.o$|\.o$/, "", x); if (x == m) print $NF}' |
		sort -u >"$tmp/undef"
	while read -r sym; do
		d=$(awk -v s="$sym" '$1 == s {print $2; exit}' "$tmp/defs")
		[ -n "$d" ] && [ "$d" != "$m" ] || continue
		if [ "$(rank "$d")" -ge "$r" ]; then
			echo "src/$m.c calls up: $sym is src/$d.c's"
			bad=1
		fi
	done <"$tmp/undef"
done
[ $bad = 0 ] && echo "layers OK: $(echo $members | wc -w) files, each calling down only"
exit $bad
