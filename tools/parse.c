/* SPDX-License-Identifier: MIT */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (err && size)
		vsnprintf(err, size, fmt, ap);
	va_end(ap);
	return -1;
}

static int cpulist_fail(const char *s, const struct cpulist_scan *sc,
			char *err, size_t errsize)
{
	switch (sc->fault) {
	case CPULIST_RANGE_END:
		return fail(err, errsize, "bad CPU list '%s': bad range end at '%s'",
			    s, sc->at);
	case CPULIST_BACKWARDS:
		return fail(err, errsize,
			    "bad CPU list '%s': range %lu-%lu runs backwards", s,
			    sc->lo, sc->hi);
	case CPULIST_STRIDE:
		return fail(err, errsize, "bad CPU list '%s': bad stride at '%s'",
			    s, sc->at);
	case CPULIST_UNEXPECTED:
		return fail(err, errsize, "bad CPU list '%s': unexpected '%c'", s,
			    *sc->at);
	default:
		return fail(err, errsize,
			    "bad CPU list '%s': expected a CPU number (0-%lu) at '%s'",
			    s, CPULIST_MAX_CPU, sc->at);
	}
}

int parse_cpulist(const char *s, size_t setsize, cpu_set_t *set,
		  const cpu_set_t *all, size_t allsize, char *err,
		  size_t errsize)
{
	struct cpulist_scan sc;
	char list[256];

	CPU_ZERO_S(setsize, set);
	if (!s || !*s)
		return fail(err, errsize, "empty CPU list");
	if (!strcmp(s, "all")) {
		if (!all)
			return fail(err, errsize, "'all' is not allowed here");
		memcpy(set, all, allsize < setsize ? allsize : setsize);
		return CPU_COUNT_S(setsize, set);
	}
	if (cpulist_scan(s, setsize, set, &sc) && *sc.at)
		sc.fault = CPULIST_UNEXPECTED; /* a newline, which ends sysfs's */
	if (sc.fault != CPULIST_OK)
		return cpulist_fail(s, &sc, err, errsize);
	if (sc.highest < setsize * 8)
		return sc.count;
	CPU_ZERO_S(setsize, set);
	if (!all)
		return fail(err, errsize,
			    "CPU %lu has no hog (CPU ids here end at %zu)",
			    sc.highest, setsize * 8 - 1);
	/* the set's size rounds up to 64 bits: name the CPUs there are,
	 * not the ids the size could hold */
	format_cpulist(allsize, all, list, sizeof(list));
	return fail(err, errsize, "CPU %lu has no hog; allowed: %s", sc.highest,
		    list);
}

int parse_duration(const char *s, uint64_t *ns, char *err, size_t errsize)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = { { "ns", 1 },   { "us", 1e3 },   { "ms", 1e6 },
		      { "s", 1e9 },  { "m", 60e9 },   { "h", 3600e9 } };
	const char *p = s;
	double v;
	char *end;
	size_t i;

	if (!s || !*s)
		return fail(err, errsize, "empty duration");
	if (*p == '-')
		return fail(err, errsize, "duration '%s' is negative", s);
	if (!isdigit((unsigned char)*p) && *p != '.')
		return fail(err, errsize, "bad duration '%s': expected a number",
			    s);
	errno = 0;
	v = strtod(p, &end);
	if (end == p || errno)
		return fail(err, errsize, "bad duration '%s'", s);
	if (!*end && v == 0) { /* nothing needs no unit */
		*ns = 0;
		return 0;
	}
	if (!*end)
		return fail(err, errsize,
			    "duration '%s' needs a unit: ns, us, ms, s, m or h",
			    s);
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit)) {
			double t = v * units[i].ns;

			if (!(t >= 0) || t > 1e18) /* NaN fails too */
				return fail(err, errsize,
					    "duration '%s' is out of range", s);
			*ns = (uint64_t)(t + 0.5);
			return 0;
		}
	return fail(err, errsize,
		    "bad duration '%s': unknown unit '%s' (ns, us, ms, s, m, h)", s,
		    end);
}

void format_cpulist(size_t setsize, const cpu_set_t *set, char *buf,
		    size_t size)
{
	size_t bits = setsize * 8, cpu = 0, used = 0;

	buf[0] = 0;
	while (cpu < bits && used + 1 < size) {
		size_t end;

		if (!CPU_ISSET_S(cpu, setsize, set)) {
			cpu++;
			continue;
		}
		for (end = cpu; end + 1 < bits && CPU_ISSET_S(end + 1, setsize, set);
		     end++)
			;
		int w = end > cpu ? snprintf(buf + used, size - used,
					     "%s%zu-%zu", used ? "," : "", cpu,
					     end)
				  : snprintf(buf + used, size - used, "%s%zu",
					     used ? "," : "", cpu);

		if (w < 0 || (size_t)w >= size - used)
			break; /* truncated: keep what fits */
		used += (size_t)w;
		cpu = end + 1;
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

void format_duration(uint64_t ns, char *buf, size_t size)
{
	if (ns < 1000)
		snprintf(buf, size, "%llu ns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, size, "%.2f us", ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, size, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, size, "%.3f s", ns / 1e9);
}
