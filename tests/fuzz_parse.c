/* SPDX-License-Identifier: MIT */
/* libFuzzer: the tool's CPU-list and duration parsers, on any bytes. */
#include "../tools/parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), err[128], out[4096];
	cpu_set_t set, all, back;
	uint64_t ns;
	int n;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	CPU_ZERO(&all);
	CPU_SET(0, &all);
	CPU_SET(3, &all);
	n = parse_cpulist(s, sizeof(set), &set, &all, sizeof(all), err,
			  sizeof(err));
	if (n >= 0) {
		/* what it formats, it parses back to the same set */
		if (n != CPU_COUNT(&set))
			abort();
		format_cpulist(sizeof(set), &set, out, sizeof(out));
		if (n > 0 && (parse_cpulist(out, sizeof(back), &back, NULL, 0,
					    err, sizeof(err)) != n ||
			      !CPU_EQUAL(&set, &back)))
			abort();
	} else if (!err[0]) {
		abort(); /* an error always says why */
	}
	if (parse_duration(s, &ns, err, sizeof(err)) == 0)
		format_duration(ns, out, sizeof(out));
	else if (!err[0])
		abort();
	free(s);
	return 0;
}
