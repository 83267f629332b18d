#!/usr/bin/env bash
# Run cross-built arm64 programs in an emulated arm64 system guest, where
# the kernel implements rseq (qemu-aarch64-static, make check-arm64's
# emulator, does not):  arm64-guest.sh BUILD-ARM64 [PROGRAM...]
#
# PROGRAMs are paths under BUILD-ARM64 (default: the rseq fence's example
# and test, examples/example_percpu_cache and tests/test_rseq).  The guest
# is qemu-system-aarch64 -M virt -cpu max with TCG (no KVM), booting
# Debian's cloud arm64 kernel directly (its vmlinuz is an uncompressed
# Image: no firmware) with an initramfs made at run time: the arm64
# busybox-static, the programs with the shared libraries they load (the
# cross toolchain's glibc, the build tree's libcpuhog at its path here),
# and an /init that runs each one and powers off.  The kernel and busybox
# are downloaded once (apt-get download; dpkg learns arm64) and unpacked
# into a cache, never installed.
#
# A program passes when it exits 0 and says nothing of a skip: in this
# guest rseq is there, so a program that skips did not run the fence.
# A test's cmocka cases are run one by one (CASE as its argument, as CTest
# does); a case that skips only because a run happened not to land a drain
# inside a push ("skipped: no drain ...") is shown, not failed.
# Prints "arm64-guest: PASS|FAIL NAME" per program (or case) and a last
# "arm64-guest: summary ..." line; exits 0 when every program passed, 1
# when one failed or the guest did not finish, 2 when it could not start.
# Environment:
#   CPUHOG_GUEST_CACHE   where the kernel is kept (/var/cache/cpuhog-guest)
#   CPUHOG_ARM64_SMP     vCPUs (default 2)
#   CPUHOG_ARM64_TIMEOUT the whole guest's limit in s (default 280)
#   CPUHOG_ARM64_TEST_TIMEOUT  one program's limit in the guest (120 s)
#   CPUHOG_ARM64_ENV     extra VAR=VALUE words set for every program
set -euo pipefail

BUILD=$(cd "${1:?usage: arm64-guest.sh BUILD-ARM64 [PROGRAM...]}" && pwd)
shift
[ $# -gt 0 ] || set -- examples/example_percpu_cache tests/test_rseq
SRC=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CPUHOG_GUEST_CACHE:-/var/cache/cpuhog-guest}/arm64
SMP=${CPUHOG_ARM64_SMP:-2}
TIMEOUT=${CPUHOG_ARM64_TIMEOUT:-280}
TEST_TIMEOUT=${CPUHOG_ARM64_TEST_TIMEOUT:-120}
SYSROOT=/usr/aarch64-linux-gnu
READELF=aarch64-linux-gnu-readelf

say() { echo "arm64-guest: $*"; }
die() { echo "arm64-guest: $*" >&2; exit 2; }

# ---- what the host needs ------------------------------------------------
# deps.sh arm64 installs them (as root): the cross binutils, QEMU, cpio
need_tools() {
	local t
	sh "$SRC/scripts/deps.sh" arm64
	for t in qemu-system-aarch64 cpio $READELF; do
		command -v "$t" >/dev/null || die "no $t (scripts/deps.sh arm64, as root)"
	done
}

# The arm64 cloud kernel and busybox-static, unpacked into the cache.
fetch() {
	local pkg d
	[ -e "$CACHE/x/bin/busybox" ] && ls "$CACHE"/x/boot/vmlinuz-* >/dev/null 2>&1 &&
		return 0
	[ "$(id -u)" = 0 ] || die "no arm64 kernel in $CACHE (run once as root)"
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		dpkg --add-architecture arm64
	fi
	apt-get update -qq >/dev/null 2>&1 || true
	pkg=$(apt-cache depends linux-image-cloud-arm64:arm64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$pkg" ] || die "no linux-image-cloud-arm64 in the package lists"
	mkdir -p "$CACHE"
	rm -rf "$CACHE/x" "$CACHE"/*.deb
	# into the cache as root: apt says it downloads unsandboxed
	(cd "$CACHE" && apt-get download "${pkg%%:*}:arm64" busybox-static:arm64 \
		>/dev/null 2>&1) || die "could not download $pkg and busybox-static:arm64"
	for d in "$CACHE"/*.deb; do dpkg-deb -x "$d" "$CACHE/x"; done
	# the initramfs is all the guest has: no modules, no documents
	rm -rf "$CACHE"/*.deb "$CACHE/x/lib/modules" "$CACHE/x/usr/share"
}

# ---- the initramfs --------------------------------------------------------
ROOT=""
copy_to() { # SRC DEST: a file into the root, links resolved
	mkdir -p "$ROOT$(dirname "$2")"
	[ -e "$ROOT$2" ] || cp -L "$1" "$ROOT$2"
}

find_lib() { # NAME RUNPATH: where the arm64 loader would find it
	local d
	for d in ${2//:/ } "$SYSROOT/lib" /usr/lib/aarch64-linux-gnu /lib/aarch64-linux-gnu; do
		[ -e "$d/$1" ] && { echo "$d/$1"; return 0; }
	done
	return 1
}

copy_needed() { # ELF: the libraries it loads, into the root
	local lib path runpath
	runpath=$($READELF -d "$1" | sed -n 's/.*(R.*PATH).*\[\(.*\)\]/\1/p')
	for lib in $($READELF -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		path=$(find_lib "$lib" "$runpath") || die "$1 needs $lib: not found"
		case $path in
		"$BUILD"/*) # libcpuhog: at its path, for the RUNPATH
			[ -e "$ROOT$path" ] && continue
			copy_to "$path" "$path" ;;
		*)
			[ -e "$ROOT/lib/$lib" ] && continue
			copy_to "$path" "/lib/$lib" ;;
		esac
		copy_needed "$path"
	done
}

make_init() {
	cat >"$ROOT/init" <<'EOF'
#!/bin/busybox sh
# The guest's PID 1: run every line of /runs, one by one, and halt.
/bin/busybox mkdir -p /proc /sys /dev /tmp /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/ TERM=dumb CPUHOG_GUEST=1 CPUHOG_TEST_SLOW=10
export LD_LIBRARY_PATH=/lib
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
echo "arm64-guest: booted, $(nproc) CPUs, kernel $(uname -r) $(uname -m)"
. /env
pass=0 fail=0 failed=""
judge() { # NAME RC: one program's or one case's verdict
	if [ "$2" != 0 ]; then
		fail=$((fail + 1)) failed="$failed $1"
		echo "arm64-guest: FAIL $1 (exit $2)"
		tail -n 30 /tmp/out | sed 's/^/arm64-out:   /'
		return
	elif grep -q 'skipped: ' /tmp/out &&
		! grep -q 'skipped: no drain' /tmp/out; then
		# rseq is there: a skip for any other reason is a fence not run
		fail=$((fail + 1)) failed="$failed $1"
		echo "arm64-guest: FAIL $1 (skipped: $(grep -m1 'skipped: ' /tmp/out | sed 's/^.*skipped: //'))"
	else
		pass=$((pass + 1))
		echo "arm64-guest: PASS $1"
		grep -m1 'skipped: ' /tmp/out | sed 's/^.*skipped: /arm64-note:   skipped: /'
	fi
	grep -E 'items pushed|counted wrong|sections restarted|moves;' /tmp/out |
		sed 's/^/arm64-out:   /'
}
# /runs: NAME PROGRAM [CASE], one a line
while read -r name prog case; do
	timeout "$TEST_TIMEOUT" "$prog" $case >/tmp/out 2>&1
	judge "$name" $?
done </runs
echo "arm64-guest: summary cpus $(nproc) passed $pass failed $fail"
[ -n "$failed" ] && echo "arm64-guest: failed:$failed"
poweroff -f
EOF
	chmod +x "$ROOT/init"
}

make_initramfs() { # OUT
	local out=$1 p c src
	shift
	ROOT=$(mktemp -d "$BUILD/arm64-root.XXXXXX")
	trap 'rm -rf "$ROOT"' EXIT
	mkdir -p "$ROOT/bin" "$ROOT/lib"
	cp "$CACHE/x/bin/busybox" "$ROOT/bin/busybox"
	copy_to "$SYSROOT/lib/ld-linux-aarch64.so.1" /lib/ld-linux-aarch64.so.1
	for p in "$@"; do
		[ -x "$BUILD/$p" ] || die "no $BUILD/$p: build it first"
		copy_to "$BUILD/$p" "$BUILD/$p"
		copy_needed "$BUILD/$p"
		case ${p##*/} in
		test_*) # cmocka: each case alone, as CTest runs them
			src="$SRC/tests/${p##*/}.c"
			sed -n 's/.*cmocka_unit_test[a-z_]*(\([a-z_0-9]*\).*/\1/p' "$src" |
				while read -r c; do
					echo "${p##*/}.$c $BUILD/$p $c"
				done
			;;
		*) echo "${p##*/} $BUILD/$p" ;;
		esac >>"$ROOT/runs"
	done
	{
		echo "TEST_TIMEOUT=$TEST_TIMEOUT"
		for e in ${CPUHOG_ARM64_ENV:-}; do echo "export $e"; done
	} >"$ROOT/env"
	make_init
	(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
	rm -rf "$ROOT"
}

need_tools
fetch
for KERNEL in "$CACHE"/x/boot/vmlinuz-*; do break; done
INITRD="$BUILD/arm64-initrd.cpio.gz"
LOG="$BUILD/arm64-guest.log"
make_initramfs "$INITRD" "$@"
say "$SMP vCPUs, kernel ${KERNEL##*/}, log $LOG"
t0=$(date +%s)
timeout -k 10 "$TIMEOUT" \
	qemu-system-aarch64 -M virt -cpu max -smp "$SMP" -m 1G \
	-accel tcg,thread=multi -display none -monitor none -nic none \
	-serial stdio -no-reboot -kernel "$KERNEL" -initrd "$INITRD" \
	-append "console=ttyAMA0 panic=-1 quiet loglevel=4" \
	</dev/null 2>&1 | sed -u 's/\r$//' | tee "$LOG" |
	grep --line-buffered -E '^arm64-|Kernel panic|BUG: |Oops|Internal error' || true
secs=$(( $(date +%s) - t0 ))
sum=$(grep '^arm64-guest: summary' "$LOG" || true)
if [ -z "$sum" ]; then
	say "the guest did not finish in ${secs} s (limit $TIMEOUT s); its console's end:"
	tail -n 20 "$LOG" | sed 's/^/arm64-console:   /'
	exit 1
fi
say "done in ${secs} s"
echo "$sum" | grep -q ' failed 0$'
