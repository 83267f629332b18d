#!/bin/sh
# After `make check`: each test CTest skipped, with the reason the test
# printed ("skipped: WHY", as t_skip() and the shell tests write it), so
# that a skip is never silent.  Reads the JUnit file of ctest
# --output-junit.   usage: skips.sh JUNIT_XML
set -u
f=$1
[ -f "$f" ] || { echo "skips: no $f (ctest before 3.21 writes none): ctest -V shows why a test skipped"; exit 0; }
awk '
function unxml(s) {
	gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s)
	gsub(/&apos;/, "\047", s); gsub(/&amp;/, "\\&", s)
	return s
}
function flush() {
	if (name != "" && skipped) {
		if (why == "")
			why = "(no reason printed; " code ")"
		list = list "  " name ": " why "\n"
		n++
	}
	name = ""; skipped = 0; why = ""; code = ""
}
/<testcase / {
	flush()
	s = $0; sub(/.*<testcase name="/, "", s); sub(/".*/, "", s); name = unxml(s)
}
/<skipped message="/ {
	skipped = 1
	s = $0; sub(/.*<skipped message="/, "", s); sub(/".*/, "", s); code = unxml(s)
}
tolower($0) ~ /skipped: / && name != "" {
	s = $0; sub(/.*[Ss][Kk][Ii][Pp][Pp][Ee][Dd]: */, "", s)
	why = why (why != "" ? "; " : "") unxml(s)
}
END {
	flush()
	if (n)
		printf "%d test%s skipped, with the reason each printed:\n%s", n, (n > 1 ? "s" : ""), list
	else
		print "no test skipped"
}' "$f"
