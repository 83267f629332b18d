#!/bin/sh
# What a user meets after `make install PREFIX=DIR`, DIR outside the
# system paths: the tool starts and benchmarks with no LD_LIBRARY_PATH,
# needs only libcpuhog, and finds the peer helpers; programs build with
# pkg-config and with CMake, shared and static, with <stdio.h> included
# before <cpuhog.h>, in C and C++; a static one may define its own
# now_ns(); the .pc file is right for a multiarch libdir; `make
# uninstall` leaves nothing behind; README's first.c builds with
# README's own commands, without a warning, and runs.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
# Under the build tree, not /tmp: a run killed at its timeout leaves
# nothing outside it, and the next run clears what it left.
rm -rf "$build"/install-test.*
tmp=$(mktemp -d "$build/install-test.XXXXXX")
# The build tree's install_manifest.txt is what `make uninstall` reads:
# the test's own install must not replace the record of a user's
# `make install` (make uninstall after make check removed nothing).
m=$build/install_manifest.txt
if [ -f "$m" ]; then cp "$m" "$tmp/manifest.user"; fi
restore_manifest() {
	if [ -f "$tmp/manifest.user" ]; then cp "$tmp/manifest.user" "$m"; else rm -f "$m"; fi
}
trap 'restore_manifest; rm -rf "$tmp"' EXIT INT TERM HUP
fail() { echo "FAIL: $*"; exit 1; }
unset LD_LIBRARY_PATH
p=$tmp/prefix
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -n "$libdir" ] || libdir=lib
cmake --install "$build" --prefix "$p" >"$tmp/install.out"
# outside ld.so's folders the install names the run path a program needs
grep -q -- "-Wl,-rpath,$p/$libdir" "$tmp/install.out" ||
	fail "the install says nothing of the run path: $(tail -3 "$tmp/install.out")"
for f in include/cpuhog.h "$libdir/libcpuhog.so" "$libdir/libcpuhog.a" \
	"$libdir/pkgconfig/cpuhog.pc" "$libdir/cmake/cpuhog/cpuhogConfig.cmake" \
	bin/cpuhog share/man/man1/cpuhog.1 share/man/man3/stop_machine.3; do
	[ -e "$p/$f" ] || fail "not installed: $f"
done

# The tool: runs from the prefix alone, needs only libcpuhog and libc.
"$p/bin/cpuhog" info >"$tmp/info.out" 2>&1 || fail "bin/cpuhog info: $(cat "$tmp/info.out")"
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }
for n in $(needed "$p/bin/cpuhog"); do
	case $n in libcpuhog.so.*|libc.so.*|libm.so.*) ;;
	*) fail "bin/cpuhog needs $n (all: $(needed "$p/bin/cpuhog"))" ;; esac
done
for n in $(needed "$p/$libdir/libcpuhog.so"); do
	case $n in libc.so.*|libpthread.so.*|ld-linux*) ;;
	*) fail "libcpuhog.so needs $n" ;; esac
done
echo "NEEDED bin/cpuhog: $(needed "$p/bin/cpuhog")"
echo "NEEDED libcpuhog.so: $(needed "$p/$libdir/libcpuhog.so")"
"$p/bin/cpuhog" bench --quick >"$tmp/bench.out" 2>&1 || fail "bench: $(tail -5 "$tmp/bench.out")"
for h in openmp:OpenMP dpdk:DPDK urcu:liburcu; do
	name=${h%%:*} row=${h#*:}
	if [ -x "$build/libexec/cpuhog/cpuhog-bench-$name" ]; then
		[ -x "$p/libexec/cpuhog/cpuhog-bench-$name" ] || fail "helper $name not installed"
		grep "^$row" "$tmp/bench.out" | grep -q "skipped\|failed" &&
			fail "installed bench skipped $row: $(grep "^$row" "$tmp/bench.out")"
	else
		grep "^$row" "$tmp/bench.out" | grep -q "skipped: helper not installed" ||
			fail "no skip reason for $row"
	fi
done

# Programs against the installed library (a run path, as a user's own
# build outside the system paths would have).  stdio.h first, on purpose.
cat >"$tmp/each_cpu.c" <<'C'
#include <stdio.h>
#include <cpuhog.h>
static int where(void *arg) { (void)arg; return sched_getcpu(); }
#ifdef OWN_NOW_NS
/* a name the library uses inside: a static link must not clash */
unsigned long now_ns(void);
unsigned long now_ns(void) { return 42; }
#endif
int main(void)
{
	struct cpuhog_info in;
	int cpu, bad = 0;

	if (cpuhog_get_info(&in) != 0)
		return 1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &in.cpus))
			bad += hog_one_cpu((unsigned)cpu, where, NULL) != cpu;
#ifdef OWN_NOW_NS
	bad += now_ns() != 42;
#endif
	printf("%s\n", bad ? "wrong CPU" : "ok");
	return bad != 0;
}
C
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
flags=$(pkg-config --cflags cpuhog)
# shellcheck disable=SC2086
cc -Wall -Wextra -Werror -o "$tmp/pc_shared" "$tmp/each_cpu.c" $flags \
	$(pkg-config --libs cpuhog) -Wl,-rpath,"$p/$libdir"
"$tmp/pc_shared" >/dev/null || fail "pkg-config, shared"
# shellcheck disable=SC2086
cc -Wall -Wextra -Werror -DOWN_NOW_NS -o "$tmp/pc_static" "$tmp/each_cpu.c" \
	$flags -static $(pkg-config --static --libs cpuhog) 2>"$tmp/cc.err" ||
	fail "pkg-config, static: $(cat "$tmp/cc.err")"
"$tmp/pc_static" >/dev/null || fail "pkg-config, static run"
cp "$tmp/each_cpu.c" "$tmp/each_cpu.cpp"
# shellcheck disable=SC2086
c++ -Wall -Werror -o "$tmp/pc_cxx" "$tmp/each_cpu.cpp" $flags \
	$(pkg-config --libs cpuhog) -Wl,-rpath,"$p/$libdir" || fail "C++, stdio first"
"$tmp/pc_cxx" >/dev/null || fail "C++ run"
# Without the flag the header says what to do, in either order.
printf '#include <stdio.h>\n#include <cpuhog.h>\nint main(void){return 0;}\n' >"$tmp/noflag.c"
if cc -I"$p/include" -c -o "$tmp/noflag.o" "$tmp/noflag.c" 2>"$tmp/noflag.err"; then
	fail "cpuhog.h compiled without _GNU_SOURCE"
fi
grep -q "compile with -D_GNU_SOURCE" "$tmp/noflag.err" || fail "no clear error: $(cat "$tmp/noflag.err")"

mkdir "$tmp/cm"
cp "$tmp/each_cpu.c" "$tmp/cm/"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(use_cpuhog C)
find_package(cpuhog REQUIRED)
add_executable(each_shared each_cpu.c)
target_link_libraries(each_shared PRIVATE cpuhog::cpuhog)
add_executable(each_static each_cpu.c)
target_compile_definitions(each_static PRIVATE OWN_NOW_NS)
target_link_libraries(each_static PRIVATE cpuhog::cpuhog_static)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$p" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null 2>"$tmp/cm.err" || fail "CMake build: $(cat "$tmp/cm.err")"
"$tmp/cm/build/each_shared" >/dev/null || fail "CMake, shared"
"$tmp/cm/build/each_static" >/dev/null || fail "CMake, static"

# README's first program, built with README's own commands against the
# prefix (-Werror added), and with CMake: no warning, and it runs.
sed -n '/^A first program/,/^```$/p' "$src/README.md" | sed '1,/^```c$/d;$d' >"$tmp/first.c"
grep -q "stop_machine(bump_all" "$tmp/first.c" || fail "README: no first.c found"
sed -n '/^Build it against the prefix/,/^```$/p' "$src/README.md" |
	sed -n '/^```sh$/,/^```$/p' | sed '1d;$d;/^\.\/first/d' |
	sed "s|/opt/cpuhog|$p|g; s|^cc |cc -Werror |" >"$tmp/first.sh"
grep -q "^cc -Werror" "$tmp/first.sh" || fail "README: no build command for first.c"
(cd "$tmp" && sh ./first.sh) >"$tmp/first.err" 2>&1 ||
	fail "README's first.c does not build as written: $(cat "$tmp/first.err")"
[ -s "$tmp/first.err" ] && fail "README's first.c builds with output: $(cat "$tmp/first.err")"
"$tmp/first" >"$tmp/first.out" 2>&1 || fail "README's first: $(cat "$tmp/first.out")"
if grep -q "SCHED_FIFO" "$tmp/info.out"; then want_stop=0; else want_stop=-1; fi
grep -q "^stop_machine: $want_stop\$" "$tmp/first.out" ||
	fail "README's first printed: $(cat "$tmp/first.out") (want stop_machine: $want_stop)"
mkdir "$tmp/cmf"
cp "$tmp/first.c" "$tmp/cmf/"
cat >"$tmp/cmf/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(first C)
find_package(cpuhog REQUIRED)
add_executable(first first.c)
target_compile_options(first PRIVATE -Wall -Wextra -Werror)
target_link_libraries(first PRIVATE cpuhog::cpuhog)
CM
cmake -S "$tmp/cmf" -B "$tmp/cmf/build" -DCMAKE_PREFIX_PATH="$p" >/dev/null
cmake --build "$tmp/cmf/build" >"$tmp/cmf.out" 2>&1 || fail "CMake, README's first.c: $(cat "$tmp/cmf.out")"
grep -qi "warning" "$tmp/cmf.out" && fail "CMake, README's first.c warns: $(cat "$tmp/cmf.out")"
"$tmp/cmf/build/first" | grep -q "^stop_machine: $want_stop\$" || fail "CMake, README's first"

if command -v man >/dev/null; then
	# as README says: MANPATH with a trailing colon, man 3 cpuhog
	MANPATH="$p/share/man:" man 3 hog_one_cpu 2>/dev/null | grep -q "hog_one_cpu" ||
		fail "man 3 hog_one_cpu does not find the page"
	MANPATH="$p/share/man:" man 3 cpuhog 2>/dev/null | grep -q "^CPUHOG(3)" ||
		fail "man 3 cpuhog does not open cpuhog(3)"
fi

# A multiarch libdir, as PREFIX=/usr gives on Debian: the .pc file finds
# its prefix three folders up.
cmake -S "$src" -B "$tmp/ma" -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu \
	-DCPUHOG_TESTS=OFF >/dev/null
mkdir -p "$tmp/usr/lib/x86_64-linux-gnu/pkgconfig"
cp "$tmp/ma/cpuhog.pc" "$tmp/usr/lib/x86_64-linux-gnu/pkgconfig/"
mkdir -p "$tmp/usr/include"
got=""
for w in $(PKG_CONFIG_PATH="$tmp/usr/lib/x86_64-linux-gnu/pkgconfig" pkg-config --cflags --libs cpuhog); do
	case $w in -I*|-L*) w=$(printf '%s' "$w" | cut -c1-2)$(realpath "${w#-?}") ;; esac
	got="$got${got:+ }$w"
done
want="-I$tmp/usr/include -D_GNU_SOURCE -L$tmp/usr/lib/x86_64-linux-gnu -lcpuhog"
[ "$got" = "$want" ] || fail "multiarch .pc: '$got', want '$want'"

# make uninstall takes out every file the install wrote.
cmake --build "$build" --target uninstall >/dev/null
left=$(find "$p" -type f | head -5)
[ -z "$left" ] || fail "left after uninstall: $left"
# the user's record is back (checked here: the trap runs it again)
restore_manifest
if [ -f "$tmp/manifest.user" ]; then
	cmp -s "$tmp/manifest.user" "$m" || fail "install_manifest.txt not restored"
elif [ -e "$m" ]; then
	fail "the test left an install_manifest.txt of its own"
fi
echo "install OK: tool, helpers, pkg-config and CMake (shared and static), multiarch .pc, uninstall"
