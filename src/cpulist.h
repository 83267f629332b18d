/* SPDX-License-Identifier: MIT */
/*
 * The one CPU-list parser: "0-3,8" as sysfs writes them, and taskset's
 * strides ("0-7:2" is 0,2,4,6), ending at a NUL or a newline; for the
 * library's kernel lists and the tool's users'.  Static functions in a
 * header: the tool may use only the library's API, so both compile it.
 */
#ifndef CPUHOG_CPULIST_H
#define CPUHOG_CPULIST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#define CPULIST_MAX_CPU 4194303ul /* the kernel's NR_CPUS goes no higher */

enum cpulist_fault {
	CPULIST_OK,
	CPULIST_NUMBER,	   /* a CPU number was expected at @at */
	CPULIST_RANGE_END, /* a range's end was expected at @at */
	CPULIST_BACKWARDS, /* the range lo-hi runs backwards */
	CPULIST_STRIDE,	   /* a stride of at least 1 was expected at @at */
	CPULIST_UNEXPECTED /* @at is neither ',' nor the end */
};

struct cpulist_scan {
	enum cpulist_fault fault;
	const char *at;		 /* where the fault is */
	unsigned long lo, hi;	 /* the range last read */
	unsigned long highest;	 /* the highest range end named */
	int count;		 /* distinct CPUs set (those in the set) */
};

/* A CPU number at @p: decimal digits, at most CPULIST_MAX_CPU. */
static inline const char *cpulist_number(const char *p, unsigned long *out)
{
	unsigned long v = 0;

	if (*p < '0' || *p > '9')
		return NULL;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (unsigned long)(*p++ - '0');
		if (v > CPULIST_MAX_CPU)
			return NULL;
	}
	*out = v;
	return p;
}

/* One item, "lo", "lo-hi" or "lo-hi:stride", at @p; NULL on a fault. */
static inline const char *cpulist_item(const char *p, unsigned long *stride,
				       struct cpulist_scan *sc)
{
	const char *q = cpulist_number(p, &sc->lo);

	sc->fault = CPULIST_NUMBER;
	sc->at = p;
	if (!q)
		return NULL;
	sc->hi = sc->lo;
	*stride = 1;
	if (*q != '-')
		return q;
	sc->fault = CPULIST_RANGE_END;
	sc->at = ++q;
	if (!(q = cpulist_number(q, &sc->hi)))
		return NULL;
	sc->fault = CPULIST_BACKWARDS;
	if (sc->hi < sc->lo)
		return NULL;
	if (*q != ':')
		return q;
	sc->fault = CPULIST_STRIDE;
	sc->at = ++q;
	if (!(q = cpulist_number(q, stride)) || !*stride)
		return NULL;
	return q;
}

/* @s into @set (@setsize bytes, cleared first; CPUs past its end only
 * in @sc->highest); empty: no CPU.  false: @sc->fault at @sc->at. */
static inline bool cpulist_scan(const char *s, size_t setsize, cpu_set_t *set,
				struct cpulist_scan *sc)
{
	unsigned long cpu, stride;
	const char *p = s;

	*sc = (struct cpulist_scan){ .at = s };
	CPU_ZERO_S(setsize, set);
	if (!*p || *p == '\n')
		return true;
	for (;;) {
		if (!(p = cpulist_item(p, &stride, sc)))
			return false;
		if (sc->hi > sc->highest)
			sc->highest = sc->hi;
		for (cpu = sc->lo; cpu <= sc->hi && cpu < setsize * 8;
		     cpu += stride)
			if (!CPU_ISSET_S(cpu, setsize, set)) {
				CPU_SET_S(cpu, setsize, set);
				sc->count++;
			}
		sc->fault = CPULIST_UNEXPECTED;
		sc->at = p;
		if (!*p || *p == '\n')
			break;
		if (*p++ != ',')
			return false;
	}
	sc->fault = CPULIST_OK;
	return true;
}

#endif
