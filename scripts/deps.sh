#!/bin/sh
# Install the Debian packages the build, the tests and the benchmark use,
# when run as root and they are missing.  The library itself needs none.
#   deps.sh          make check, make run
#   deps.sh arm64    make check-arm64: the cross compiler, qemu-user-static
#                    and cmocka for arm64 (multiarch: dpkg learns arm64),
#                    qemu-system-arm and cpio for scripts/arm64-guest.sh
set -u
mode=${1:-host}
if [ "$mode" = arm64 ]; then
	pkgs="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
	      qemu-user-static libcmocka-dev:arm64 qemu-system-arm cpio"
else
	pkgs="cmake make gcc pkg-config libcmocka-dev clang libclang-rt-14-dev
	      util-linux liburcu-dev rt-tests libdpdk-dev man-db mandoc spin
	      systemtap-sdt-dev"
fi
# A package counts as there only for the architecture asked for: with
# arm64 added, libcmocka-dev:arm64 alone must not pass for the host's.
native=$(dpkg --print-architecture)
need=""
for p in $pkgs; do
	case $p in
	*:*) want=${p#*:} ;;
	*) want="$native all" ;;
	esac
	dpkg-query -W -f='${Status} ${Architecture}\n' "${p%%:*}" 2>/dev/null |
		awk -v want="$want" 'BEGIN { split(want, w, " ") }
		     /ok installed/ { for (i in w) if ($4 == w[i]) ok = 1 }
		     END { exit !ok }' || need="$need $p"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages:$need (run as root to install)" >&2
	exit 0
fi
echo "deps: installing$need"
export DEBIAN_FRONTEND=noninteractive
if [ "$mode" = arm64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	dpkg --add-architecture arm64
fi
apt-get update -qq >/dev/null 2>&1 || true
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $need >/dev/null ||
	echo "deps: could not install all of:$need" >&2
exit 0
