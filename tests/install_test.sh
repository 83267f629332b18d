#!/bin/sh
# make install PREFIX=DIR, then build programs against the installed
# library with pkg-config and with CMake's find_package, and run them.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
tmp=$(mktemp -d /tmp/cpuhog-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in include/cpuhog.h lib/libcpuhog.so lib/libcpuhog.a \
         lib/pkgconfig/cpuhog.pc lib/cmake/cpuhog/cpuhogConfig.cmake; do
	[ -e "$tmp/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
cat > "$tmp/each_cpu.c" <<'C'
#include <cpuhog.h>
#include <stdio.h>
static int where(void *arg) { (void)arg; return sched_getcpu(); }
int main(void)
{
	struct cpuhog_info in;
	int cpu, bad = 0;

	if (cpuhog_get_info(&in) != 0)
		return 1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &in.cpus)) {
			int r = hog_one_cpu((unsigned)cpu, where, NULL);
			printf("hog_one_cpu(%d) ran on %d\n", cpu, r);
			bad += r != cpu;
		}
	return bad != 0;
}
C
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -Wall -Werror -o "$tmp/each_cpu" "$tmp/each_cpu.c" $(pkg-config --cflags --libs cpuhog)
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/each_cpu"
mkdir "$tmp/cm"
cp "$tmp/each_cpu.c" "$tmp/cm/"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(use_cpuhog C)
find_package(cpuhog REQUIRED)
add_executable(each_cpu each_cpu.c)
target_link_libraries(each_cpu PRIVATE cpuhog::cpuhog)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
"$tmp/cm/build/each_cpu" >/dev/null
for m in man1/cpuhog.1 man3/cpuhog.3 man3/hog_one_cpu.3 man3/stop_machine.3; do
	[ -e "$tmp/prefix/share/man/$m" ] || { echo "not installed: man/$m"; exit 1; }
done
if command -v man >/dev/null; then
	MANWIDTH=80 man -l "$tmp/prefix/share/man/man3/cpuhog.3" 2>/dev/null | grep -q "stop_machine" ||
		{ echo "man -l cannot render cpuhog(3)"; exit 1; }
	MANPATH="$tmp/prefix/share/man" man 3 hog_one_cpu 2>/dev/null | grep -q "hog_one_cpu" ||
		{ echo "man 3 hog_one_cpu does not find the page"; exit 1; }
fi
[ -x "$tmp/prefix/bin/cpuhog" ] || { echo "not installed: bin/cpuhog"; exit 1; }
echo "install OK: pkg-config and find_package(cpuhog)"
