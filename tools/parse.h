/* SPDX-License-Identifier: MIT */
/*
 * The tool's input syntax: CPU lists as taskset -c and sysfs write them
 * ("0-3,8,10-11", "all"), durations with units ("250us", "20ms", "5s", "1h").
 * Pure functions, fuzzed by tests/fuzz_parse.c.
 */
#ifndef CPUHOG_PARSE_H
#define CPUHOG_PARSE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "../src/cpulist.h"


/*
 * Parse @s into @set (setsize bytes, cleared first); "all" means
 * @all (may be NULL: then "all" is an error).  Returns the number of
 * CPUs, or -1 with a one-line reason in @err.
 */
int parse_cpulist(const char *s, size_t setsize, cpu_set_t *set,
		  const cpu_set_t *all, size_t allsize, char *err,
		  size_t errsize);

/* Parse a duration into nanoseconds: a decimal number and one of ns,
 * us, ms, s, m, h, or a bare 0.  One syntax for every option of every
 * subcommand: any other bare number is an error, never guessed (seconds
 * for oslat -D, but microseconds for its thresholds).  Returns 0 or -1
 * with @err. */
int parse_duration(const char *s, uint64_t *ns, char *err, size_t errsize);

/* Write @set as a compact list ("0-3,8") into @buf. */
void format_cpulist(size_t setsize, const cpu_set_t *set, char *buf,
		    size_t size);

/* Write @ns with a fitting unit ("250 us", "1.50 ms") into @buf. */
void format_duration(uint64_t ns, char *buf, size_t size);

#endif
