#!/bin/sh
# Run a test without real-time privilege: no CAP_SYS_NICE (root drops it
# from its bounding and inheritable sets) and RLIMIT_RTPRIO 0.
if [ "$(id -u)" = 0 ]; then
	exec setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice -- \
		prlimit --rtprio=0:0 -- "$@"
fi
exec prlimit --rtprio=0:0 -- "$@"
