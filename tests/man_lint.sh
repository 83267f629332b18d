#!/bin/sh
# The man pages: every API function of the header has a page of its own
# with the sections a C programmer looks for, and groff (man --warnings)
# and, where installed, mandoc -T lint find nothing to say.
# usage: man_lint.sh SOURCE_DIR
set -u
src=$1 fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
command -v man >/dev/null || { echo "skipped: man (man-db) not installed"; exit 77; }
api=$(grep '^CPUHOG_API ' "$src/include/cpuhog.h" | sed -E 's/\(.*//; s/.*[ *]//')
for f in $api; do
	p=$src/man/man3/$f.3
	[ -f "$p" ] || { fail "no page for $f"; continue; }
	grep -q '^\.so ' "$p" && fail "$f.3 is an alias, not a page"
	for sec in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" ERRORS ATTRIBUTES CONTEXT EXAMPLE "SEE ALSO"; do
		grep -q "^\.SH $sec\$" "$p" || fail "$f.3 has no $sec"
	done
done
for p in "$src"/man/man1/*.1 "$src"/man/man3/*.3 "$src"/man/man7/*.7; do
	out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=all -l "$p" 2>&1 >/dev/null)
	[ -z "$out" ] || fail "$(basename "$p"): $out"
	if command -v mandoc >/dev/null; then
		out=$(mandoc -T lint -W warning "$p" 2>&1)
		[ -z "$out" ] || fail "$(basename "$p"): $out"
	fi
done
[ $fails = 0 ] && echo "man pages OK: $(echo $api | wc -w) functions, each its own page"
[ $fails = 0 ]
