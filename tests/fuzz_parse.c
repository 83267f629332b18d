/* SPDX-License-Identifier: MIT */
/* libFuzzer: the tool's CPU-list and duration parsers, on any bytes. */
#include "../tools/parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Sets sized as the tool sizes them, for a machine of 4096 CPU ids:
 * ids past CPU_SETSIZE (1024) parse and format like the others. */
#define IDS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[IDS * 6];
	char *s = malloc(size + 1), err[128];
	size_t sz = CPU_ALLOC_SIZE(IDS);
	cpu_set_t *set = CPU_ALLOC(IDS), *all = CPU_ALLOC(IDS),
		  *back = CPU_ALLOC(IDS);
	uint64_t ns;
	int n;

	if (!s || !set || !all || !back)
		abort();
	memcpy(s, data, size);
	s[size] = 0;
	CPU_ZERO_S(sz, all);
	CPU_SET_S(0, sz, all);
	CPU_SET_S(3, sz, all);
	CPU_SET_S(2049, sz, all);
	n = parse_cpulist(s, sz, set, all, sz, err, sizeof(err));
	if (n >= 0) {
		/* what it formats, it parses back to the same set */
		if (n != CPU_COUNT_S(sz, set))
			abort();
		format_cpulist(sz, set, out, sizeof(out));
		if (n > 0 && (parse_cpulist(out, sz, back, NULL, 0, err,
					    sizeof(err)) != n ||
			      !CPU_EQUAL_S(sz, set, back)))
			abort();
	} else if (!err[0]) {
		abort(); /* an error always says why */
	}
	CPU_FREE(set);
	CPU_FREE(all);
	CPU_FREE(back);
	if (parse_duration(s, &ns, err, sizeof(err)) == 0)
		format_duration(ns, out, sizeof(out));
	else if (!err[0])
		abort();
	free(s);
	return 0;
}
