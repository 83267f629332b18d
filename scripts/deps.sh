#!/bin/sh
# Install the Debian packages the build, the tests and the benchmark use,
# when run as root and they are missing.  The library itself needs none.
set -u
need=""
for p in cmake make gcc pkg-config libcmocka-dev clang libclang-rt-14-dev \
         util-linux liburcu-dev rt-tests libdpdk-dev man-db mandoc; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		need="$need $p"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages:$need (run as root to install)" >&2
	exit 0
fi
echo "deps: installing$need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $need >/dev/null ||
	echo "deps: could not install all of:$need" >&2
exit 0
