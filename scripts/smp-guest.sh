#!/usr/bin/env bash
# Run the test suite inside a software-emulated QEMU guest with N vCPUs
# (no KVM needed), for each N given:  smp-guest.sh BUILD N [N...]
#
# The guest boots Debian's cloud kernel (downloaded once into a cache,
# unpacked there, never installed) with an initramfs made at run time
# from what this machine has: busybox-static, dash as /bin/sh, the few
# util-linux tools the tests use, and the build tree's binaries with the
# shared libraries they need, at the same paths as here.  The test list
# is CTest's own (ctest --show-only=json-v1), less what needs the host
# (install, man pages, the exported-symbols and layers checks, the bench,
# the fuzzer).
#
# Each test runs in its own session with its CTest timeout (capped by
# CPUHOG_SMP_TEST_TIMEOUT, default 90 s, and more past 8 vCPUs per host
# CPU, in proportion); a test that runs past it has
# its threads listed (state, CPU, policy, priority, wait channel) before
# it is killed.  The guest kernel's log is searched for RCU stalls,
# lockups, hung tasks and warnings; any of them fails the run, like a
# failed test.  Environment:
#   CPUHOG_GUEST_CACHE   where the kernel is kept (/var/cache/cpuhog-guest)
#   CPUHOG_SMP_FILTER    a grep -E pattern: run only the tests it matches
#   CPUHOG_SMP_EXCLUDE   a grep -E pattern: leave those out as well
#   CPUHOG_SMP_TIMEOUT   the whole guest's limit in s (default 3000)
#   CPUHOG_SMP_MEM       guest memory (default 3G)
#   CPUHOG_SMP_ENV       extra VAR=VALUE words set for every test
#   CPUHOG_SMP_SILENCE   stop a guest that printed nothing for this long
#                        (s; default twice the test cap plus 2 min)
#   CPUHOG_SMP_BOOT      a guest whose console stays empty this long did
#                        not boot: it is stopped and started once more
#                        (s; default 300; a 64-vCPU guest boots in 90)
#   CPUHOG_SMP_HOST_CPUS the host CPUs the guests may have (default: those
#                        idle over a second before the first guest, at
#                        least 1); every slowness bound of the guest
#                        scales with vCPUs per such CPU
# A guest that does not finish has the end of its console and what the
# host was running printed, so that a CI log says what happened.
set -euo pipefail

BUILD=$(cd "${1:?usage: smp-guest.sh BUILD N [N...]}" && pwd)
shift
[ $# -gt 0 ] || set -- 8
SRC=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CPUHOG_GUEST_CACHE:-/var/cache/cpuhog-guest}
TEST_TIMEOUT=${CPUHOG_SMP_TEST_TIMEOUT:-90}
GUEST_TIMEOUT=${CPUHOG_SMP_TIMEOUT:-3000}
MEM=${CPUHOG_SMP_MEM:-3G}
SILENCE=${CPUHOG_SMP_SILENCE:-$((TEST_TIMEOUT * 2 + 120))}
BOOT=${CPUHOG_SMP_BOOT:-300}
# console lines shown as they come: the runner's, and the kernel's worst
SHOW='^(smp|smp-[a-z]+):|Kernel panic|BUG: |Oops|soft lockup|hard LOCKUP|rcu: INFO'
HOST_ONLY='^(symbols|layers|man_lint|install|bench_quick|fuzz_parse|model_check)$'

say() { echo "smp: $*"; }
die() { echo "smp: $*" >&2; exit 2; }

# The host CPUs a guest gets: this machine's idle share over a second
# (at least 1).  Beside other work the vCPUs share fewer host CPUs than
# nproc says, and the guest's bounds must grow as they would on a smaller
# host.
cpu_ticks() { # idle (with iowait), then all, of /proc/stat's cpu line
	awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' \
		/proc/stat
}
host_cpus_free() {
	local a b
	if [ -n "${CPUHOG_SMP_HOST_CPUS:-}" ]; then
		echo "$CPUHOG_SMP_HOST_CPUS"
		return
	fi
	a=$(cpu_ticks)
	sleep 1
	b=$(cpu_ticks)
	echo "$a $b" | awk -v n="$(nproc)" '{
		t = $4 - $2; f = t > 0 ? int(n * ($3 - $1) / t + 0.5) : n
		print f < 1 ? 1 : f }'
}

# ---- what the host needs ------------------------------------------------
need_pkgs() {
	local need="" p
	for p in qemu-system-x86 busybox-static dash util-linux cpio python3; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q "ok installed" || need="$need $p"
	done
	[ -z "$need" ] && return 0
	[ "$(id -u)" = 0 ] || die "missing Debian packages:$need (run as root)"
	say "installing$need"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null 2>&1 || true
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $need >/dev/null
}

# The cloud kernel, unpacked into the cache; prints the vmlinuz path.
fetch_kernel() {
	local k pkg
	k=$(ls "$CACHE"/x/boot/vmlinuz-* 2>/dev/null | head -1 || true)
	if [ -z "$k" ]; then
		mkdir -p "$CACHE"
		apt-get update -qq >/dev/null 2>&1 || true
		pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
			awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
		[ -n "$pkg" ] || die "no linux-image-cloud-amd64 in the package lists"
		(cd "$CACHE" && rm -f ./*.deb &&
			apt-get download "$pkg" >/dev/null 2>&1) ||
			die "could not download $pkg"
		dpkg-deb -x "$CACHE"/*.deb "$CACHE/x"
		k=$(ls "$CACHE"/x/boot/vmlinuz-* | head -1)
	fi
	echo "$k"
}

# ---- the initramfs --------------------------------------------------------
ROOT=""
copy_file() { # PATH: into the root at the same path, links resolved
	local f=$1
	[ -e "$ROOT$f" ] && return 0
	mkdir -p "$ROOT$(dirname "$f")"
	cp -L "$f" "$ROOT$f"
}

copy_elf() { # PATH: the file and every shared library it loads
	local f=$1 lib
	copy_file "$f"
	for lib in $(ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }'); do
		copy_file "$lib"
	done
}

# CTest's list, as lines of the guest's runner: t NAME TIMEOUT SKIPRC
# SKIPRE DIR ENV... -- COMMAND...  (SKIPRE 1: the test has CTest's skip
# regex, cmocka's "[  SKIPPED ]"; without it, as on the host, a run with
# skipped cases inside passes)
test_list() {
	ctest --test-dir "$BUILD" --show-only=json-v1 | python3 -c '
import json, shlex, sys, re
host_only = re.compile(sys.argv[1]); cap = int(sys.argv[2])
filt = re.compile(sys.argv[3]) if sys.argv[3] else None
excl = re.compile(sys.argv[4]) if sys.argv[4] else None
extra = sys.argv[5].split()
for t in json.load(sys.stdin)["tests"]:
    name = t["name"]
    if host_only.search(name) or (filt and not filt.search(name)) \
       or (excl and excl.search(name)):
        continue
    p = {x["name"]: x["value"] for x in t.get("properties", [])}
    # timing tests are for make check-timing, not make check: a filter
    # (make soak-smp) names them itself
    if not filt and "timing" in (p.get("LABELS") or []):
        continue
    timeout = min(int(p.get("TIMEOUT", 60)), cap)
    skiprc = int(p.get("SKIP_RETURN_CODE", -1))
    skipre = 1 if p.get("SKIP_REGULAR_EXPRESSION") else 0
    env = p.get("ENVIRONMENT", []) + extra
    wd = p.get("WORKING_DIRECTORY", "/")
    print("t", shlex.quote(name), timeout, skiprc, skipre, shlex.quote(wd),
          " ".join(shlex.quote(e) for e in env), "--",
          " ".join(shlex.quote(c) for c in t["command"]))
' "$HOST_ONLY" "$TEST_TIMEOUT" "${CPUHOG_SMP_FILTER:-}" "${CPUHOG_SMP_EXCLUDE:-}" \
	"${CPUHOG_SMP_ENV:-}"
}

make_init() {
	cat >"$ROOT/init" <<'EOF'
#!/bin/sh
# The guest's PID 1: mount, run every test of /tests.list, report, halt.
PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
export PATH HOME=/root TERM=dumb CPUHOG_GUEST=1
mount -t proc proc /proc
mount -t sysfs sys /sys
# vCPUs per host CPU: how overcommitted the guest is (tests that wait for
# every CPU to come scale their bound by it: CPUHOG_TEST_SLOW below).
host=$(cat /host_cpus 2>/dev/null || echo 1)
CPUHOG_GUEST_LOAD=$(( ($(nproc) + host - 1) / host ))
export CPUHOG_GUEST_LOAD
# what an overcommitted VM's operator sets (README): the default stop
# timeout, 200 ms per vCPU sharing a host CPU (at 32 vCPUs on 2 host CPUs
# one went unrun for over 200 ms while its peers ran)
CPUHOG_STOP_TIMEOUT_MS=$((200 * CPUHOG_GUEST_LOAD))
export CPUHOG_STOP_TIMEOUT_MS
# the tests' one slowness knob (tests/harness.h, t_slow()): 10 for an
# emulated guest's late vCPUs, times the vCPUs per host CPU past 8 (at
# least CPUHOG_GUEST_LOAD, which the stop timeouts scale by); every
# timeout and hang-catcher of the tests is multiplied by it
CPUHOG_TEST_SLOW=10
[ "$CPUHOG_GUEST_LOAD" -gt 8 ] && CPUHOG_TEST_SLOW=$((10 * CPUHOG_GUEST_LOAD / 8))
export CPUHOG_TEST_SLOW
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /tmp /root /sys/fs/cgroup /run/lock
# the lock that serializes stops between processes (src/serialize.c)
chmod 1777 /run/lock
# no tmpfs over /tmp: the initramfs is in memory already, and a build
# tree under /tmp (a clone there) would be hidden by it
chmod 1777 /tmp
mount -t tmpfs shm /dev/shm
mount -t tmpfs cg /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/cpuset /sys/fs/cgroup/unified
mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ulimit -c 0
echo "smp-guest: booted, $(nproc) CPUs, kernel $(uname -r)"

# A hung test: list its threads, as the report needs them.
threads() {
	for t in /proc/$1/task/*; do
		[ -r "$t/stat" ] || continue
		set -- $(sed 's/^.*) //' "$t/stat")
		# after the comm: state=1 ... processor=37 rt_priority=38 policy=39
		eval "cpu=\${37} prio=\${38} pol=\${39}"
		echo "smp-hang:   $(cat "$t/comm") tid ${t##*/} state $1 cpu $cpu policy $pol prio $prio wchan $(cat "$t/wchan" 2>/dev/null) allowed $(sed -n 's/^Cpus_allowed_list://p' "$t/status" | tr -d '\t') syscall $(cut -d' ' -f1,8,9 "$t/syscall" 2>/dev/null)"
	done
}

# one read of the stat file: a process that exits between two reads was
# taken for a hung one (the file gone for the second read counted as
# "not a zombie")
alive() {
	st=$(cat /proc/$1/stat 2>/dev/null) || return 1
	case "$st" in *") Z "* | "") return 1 ;; esac
	return 0
}

pass=0 fail=0 skip=0 failed=""
t() {
	name=$1 limit=$2 skiprc=$3 skipre=$4 dir=$5
	shift 5
	# past 8 vCPUs per host CPU a test's calls reach more CPUs, each run
	# later: its cut grows with them (x2 at 32 vCPUs on 2, x4 at 64)
	[ "$CPUHOG_GUEST_LOAD" -gt 8 ] && limit=$((limit * CPUHOG_GUEST_LOAD / 8))
	envs=""
	while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
	shift
	start=$(date +%s)
	(cd "$dir" && exec env $envs setsid "$@") >/tmp/out 2>&1 </dev/null &
	pid=$!
	ticks=0
	while alive $pid && [ $ticks -lt $((limit * 5)) ]; do
		sleep 0.2
		ticks=$((ticks + 1))
	done
	hung=0
	if alive $pid; then
		hung=1
		echo "smp-hang: $name ran past ${limit} s; its threads:"
		# setsid made the test its session's leader
		for s in $(pgrep -s $pid 2>/dev/null || echo $pid); do threads $s; done
		# where the running ones are (for addr2line on the host)
		for s in $(pgrep -s $pid 2>/dev/null || echo $pid); do
			for t in /proc/$s/task/*; do
				grep -q '^[^)]*) R' $t/stat 2>/dev/null &&
					/bin/hang-probe ${t##*/} | sed 's/^/smp-hang:   /'
			done
		done
		grep -m3 -E 'libcpuhog|/tests/|/examples/' /proc/$pid/maps | sed 's/^/smp-hang:   map /'
		cat /sys/kernel/debug/sched/debug 2>/dev/null | grep -E '^cpu#|rt_time|rt_throttled' | tr '\n' ' ' | sed 's/^/smp-hang:   rt: /'; echo
		kill -9 -- -$pid 2>/dev/null
		kill -9 $pid 2>/dev/null
	fi
	wait $pid
	rc=$?
	secs=$(( $(date +%s) - start ))
	if [ $hung = 0 ] && { [ "$rc" = "$skiprc" ] || { [ $rc = 0 ] && [ $skipre = 1 ] && grep -q '\[  SKIPPED \]' /tmp/out; }; }; then
		skip=$((skip + 1))
		echo "smp: SKIP $name (${secs} s): $(grep -m1 'skipped:' /tmp/out | sed 's/^.*skipped: //')"
		# what led to it: a skip must be for the reason it names
		grep -v -e '^\[' -e 'skipped:' /tmp/out | tail -n 6 | sed 's/^/smp-out:   /'
	elif [ $hung = 0 ] && [ $rc = 0 ]; then
		pass=$((pass + 1))
		echo "smp: PASS $name (${secs} s)"
		# what a test prints for the record (test_entries' counts)
		grep '^figure: ' /tmp/out | sed 's/^figure: /smp-figure: /'
	else
		fail=$((fail + 1))
		failed="$failed $name"
		echo "smp: FAIL $name (${secs} s, exit $rc)"
		tail -n 40 /tmp/out | sed 's/^/smp-out:   /'
	fi
	# every CPU back online, whatever the test did
	for f in /sys/devices/system/cpu/cpu[0-9]*/online; do
		[ "$(cat $f)" = 0 ] && echo 1 >$f 2>/dev/null
	done
}
. /tests.list
warn=$(dmesg | grep -E 'rcu: INFO|rcu_(sched|preempt) (self-detected|detected) stall|rcu_.*kthread starved|BUG: workqueue lockup|soft lockup|hard LOCKUP|blocked for more than|WARNING: |BUG: |Oops' | head -40)
if [ -n "$warn" ]; then
	echo "$warn" | sed 's/^/smp-kernel: /'
	nwarn=$(echo "$warn" | wc -l)
else
	nwarn=0
fi
echo "smp-summary: cpus $(nproc) passed $pass failed $fail skipped $skip kernel_warnings $nwarn"
[ -n "$failed" ] && echo "smp-failed:$failed"
echo "smp-guest: done"
sync
poweroff -f
EOF
	chmod +x "$ROOT/init"
}

make_initramfs() { # OUT
	local out=$1 f tool
	ROOT=$(mktemp -d "$BUILD/smp-root.XXXXXX")
	mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,root,etc}
	cp /bin/busybox "$ROOT/bin/busybox"
	for a in $(/bin/busybox --list); do
		[ -e "$ROOT/bin/$a" ] || ln -s busybox "$ROOT/bin/$a"
	done
	# dash is /bin/sh; util-linux's tools over busybox's (its setpriv
	# lacks what tests/nort.sh uses)
	rm -f "$ROOT/bin/sh"
	copy_elf /bin/dash
	ln -sf /bin/dash "$ROOT/bin/sh"
	mkdir -p "$ROOT/usr/bin"
	ln -sf /bin/dash "$ROOT/usr/bin/sh" # CTest's shell scripts name it
	for tool in chrt taskset prlimit setpriv setsid env; do
		f=$(command -v "$tool" || true)
		[ -n "$f" ] || continue
		rm -f "$ROOT/bin/$tool"
		copy_elf "$(readlink -f "$f")"
		[ "$(readlink -f "$f")" = /bin/$tool ] || ln -sf "$(readlink -f "$f")" "$ROOT/bin/$tool"
	done
	for f in $(command -v oslat 2>/dev/null || true); do copy_elf "$f"; done
	cc -O1 -Wall -o "$ROOT/bin/hang-probe" "$SRC/scripts/hang-probe.c"
	echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
	echo "root:x:0:" >"$ROOT/etc/group"
	# the build tree's programs and libraries, the source's test scripts
	while IFS= read -r f; do
		if [ "$(head -c4 "$f" | tail -c3)" = ELF ]; then copy_elf "$f"; else copy_file "$f"; fi
	done < <(find "$BUILD/src" "$BUILD/tests" "$BUILD/examples" "$BUILD/tools" \
		-maxdepth 1 -type f \( -perm -u+x -o -name '*.so*' \) 2>/dev/null)
	for f in "$SRC"/tests/*.sh; do copy_file "$f"; done
	test_list >"$ROOT/tests.list"
	echo "$HOST_CPUS" >"$ROOT/host_cpus"
	make_init
	(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
	rm -rf "$ROOT"
}

# ---- one guest ----------------------------------------------------------
run_guest() { # N KERNEL INITRD LOG
	local n=$1 kernel=$2 initrd=$3 log=$4 machine=pc raw=$4.raw qpid wpid
	[ "$n" -gt 8 ] && machine=q35
	: >"$raw"
	rm -f "$raw.noboot"
	# the console into a file, not a pipe: the watchdog below sees it
	# grow, and QEMU never blocks on a reader
	timeout -k 10 "$GUEST_TIMEOUT" \
		qemu-system-x86_64 -machine "$machine" -accel tcg,thread=multi \
		-cpu max -smp "$n" -m "$MEM" -display none -monitor none \
		-serial "file:$raw" -no-reboot \
		-kernel "$kernel" -initrd "$initrd" -nic none \
		-append "console=ttyS0 tsc=reliable panic=-1 quiet loglevel=4 nokaslr" \
		</dev/null >"$log.qemu" 2>&1 &
	qpid=$!
	# the guest's own cuts grow past 8 vCPUs per host CPU (make_init):
	# so does the silence that counts as wedged
	local load=$(( (n + HOST_CPUS - 1) / HOST_CPUS )) quiet=$SILENCE
	[ "$load" -gt 8 ] && quiet=$((SILENCE * load / 8))
	watch_silence "$qpid" "$raw" "$quiet" "$BOOT" &
	wpid=$!
	tail -n +1 -F --pid="$qpid" "$raw" 2>/dev/null | sed -u 's/\r$//' |
		tee "$log" | grep --line-buffered -E "$SHOW" || true
	kill "$wpid" 2>/dev/null || true
	wait "$qpid" 2>/dev/null || true
	[ -s "$log.qemu" ] && sed 's/^/smp: qemu: /' "$log.qemu" | head -20
	return 0
}

# Stop guest @1 once its console @2 has not grown for @3 s: every test
# has a cut of its own, so a silent guest is a wedged one.  A console
# still empty after @4 s is a guest that did not boot (once, a 64-vCPU
# guest printed nothing for 11 min, and the next one booted in 90 s): it
# is stopped sooner, with @2.noboot left for the caller to start another.
watch_silence() {
	local size last=-1 quiet=0 up=0
	while kill -0 "$1" 2>/dev/null; do
		sleep 5
		up=$((up + 5))
		size=$(stat -c %s "$2" 2>/dev/null || echo 0)
		if [ "$size" = 0 ] && [ "$up" -ge "$4" ]; then
			say "the guest printed nothing in ${up} s: it did not boot"
			: >"$2.noboot"
			kill "$1" 2>/dev/null
			return 0
		fi
		if [ "$size" = "$last" ]; then
			quiet=$((quiet + 5))
		else
			quiet=0 last=$size
		fi
		if [ "$quiet" -ge "$3" ]; then
			say "the guest printed nothing for ${quiet} s: stopping it"
			kill "$1" 2>/dev/null
			return 0
		fi
	done
}

# What a guest that did not finish left: its console's end, the host.
report_unfinished() { # LOG
	say "the end of its console:"
	tail -n 30 "$1" | sed 's/^/smp-console:   /'
	say "the host: $(uptime)"
	# top's second frame: the CPU of the last 2 s, not of a lifetime
	top -b -d 2 -n 2 | awk '/^top -/ { f++ } f == 2' | sed -n '7,14p' |
		sed 's/^/smp-host:   /'
	free -m | sed 's/^/smp-host:   /'
}

need_pkgs
HOST_CPUS=$(host_cpus_free)
say "host CPUs for the guests: $HOST_CPUS of $(nproc)"
KERNEL=$(fetch_kernel)
INITRD="$BUILD/smp-initrd.cpio.gz"
say "kernel $KERNEL; building the initramfs from $BUILD"
make_initramfs "$INITRD"
status=0
for n in "$@"; do
	log="$BUILD/smp-$n.log"
	t0=$(date +%s)
	say "guest with $n vCPUs (log: $log)"
	run_guest "$n" "$KERNEL" "$INITRD" "$log"
	if [ -e "$log.raw.noboot" ]; then
		say "starting the $n-vCPU guest once more"
		run_guest "$n" "$KERNEL" "$INITRD" "$log"
	fi
	secs=$(( $(date +%s) - t0 ))
	sum=$(grep '^smp-summary:' "$log" || true)
	if [ -z "$sum" ]; then
		say "$n vCPUs: the guest did not finish (${secs} s); see $log"
		report_unfinished "$log"
		status=1
		continue
	fi
	say "$n vCPUs: ${sum#smp-summary: } in ${secs} s"
	echo "$sum" | grep -q 'failed 0 skipped [0-9]* kernel_warnings 0$' || status=1
done
exit $status
