/* SPDX-License-Identifier: MIT */
/*
 * USDT probes, provider "cpuhog" (man/man7/cpuhog-probes.7 lists them):
 * a nop each, until perf, bpftrace or SystemTap attaches to it.  From
 * <sys/sdt.h> (Debian's systemtap-sdt-dev), a header only: no run-time
 * dependency.  Built without it (CMake's check), every probe is nothing;
 * its arguments are still evaluated for their type, so that a variable
 * used only by a probe is used in both builds.
 */
#ifndef CPUHOG_PROBES_H
#define CPUHOG_PROBES_H

#ifdef CPUHOG_HAVE_SDT
#include <sys/sdt.h>
#define PROBE0(n) DTRACE_PROBE(cpuhog, n)
#define PROBE1(n, a) DTRACE_PROBE1(cpuhog, n, a)
#define PROBE2(n, a, b) DTRACE_PROBE2(cpuhog, n, a, b)
#define PROBE3(n, a, b, c) DTRACE_PROBE3(cpuhog, n, a, b, c)
#else
#define PROBE0(n) ((void)0)
#define PROBE1(n, a) ((void)(a))
#define PROBE2(n, a, b) ((void)(a), (void)(b))
#define PROBE3(n, a, b, c) ((void)(a), (void)(b), (void)(c))
#endif

#endif
