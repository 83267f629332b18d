#!/bin/sh
# The libraries export the header's API and nothing else: the shared
# library exactly the API; the static archive the API plus names with
# the reserved prefix cpuhog_i_ (a program linking it statically may
# define any other name, now_ns() say, without a clash).
# usage: symbols_test.sh INCLUDE_DIR SHARED_LIB STATIC_LIB
set -eu
hdr=$1/cpuhog.h so=$2 ar=$3
api=$(grep '^CPUHOG_API ' "$hdr" | sed -E 's/\(.*//; s/.*[ *]//' | sort -u)
[ -n "$api" ] || { echo "no API found in $hdr"; exit 1; }
so_syms=$("${NM:-nm}" -D --defined-only "$so" | awk 'NF==3 && $2 ~ /[TDBRVW]/ {print $3}' | sort -u)
# _.stapsdt.base: <sys/sdt.h>'s anchor of the USDT probes (a hidden
# weak COMDAT), no API and nobody's to clash with
ar_syms=$("${NM:-nm}" -g --defined-only "$ar" | awk 'NF==3 && $3 != "_.stapsdt.base" {print $3}' | sort -u)
bad=0
if [ "$so_syms" != "$api" ]; then
	echo "shared library exports differ from the header's API:"
	printf '%s\n' "$so_syms" >/tmp/cpuhog-sym.$$.so
	printf '%s\n' "$api" | diff - /tmp/cpuhog-sym.$$.so || true
	rm -f /tmp/cpuhog-sym.$$.so
	bad=1
fi
extra=$(printf '%s\n' "$ar_syms" | grep -v '^cpuhog_i_' | grep -vxF "$api" || true)
if [ -n "$extra" ]; then
	echo "static archive exports names outside the API and cpuhog_i_*:"
	echo "$extra"
	bad=1
fi
for f in $api; do
	printf '%s\n' "$ar_syms" | grep -qx "$f" || { echo "archive lacks $f"; bad=1; }
done
[ $bad = 0 ] && echo "symbols OK: $(echo $api | wc -w) API names, nothing else"
exit $bad
