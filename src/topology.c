/* SPDX-License-Identifier: MIT */
/*
 * The machine's shape, read once when the hogs are made: the order in
 * which multi-CPU calls list their hogs, so that CPUs sharing a last-level
 * cache, then a package, stand next to each other.  The wake tree (wake.c)
 * cuts that list into contiguous parts, so most of its hops, those near
 * the leaves, stay inside one cache domain.
 *
 * Each CPU's key is (package, last-level cache, CPU): the cache named by
 * the lowest CPU that shares it (the highest cache/indexN listed).  Where
 * sysfs says nothing (a VM that shows no caches), the key falls back to
 * the package and then the CPU number.  Nothing here runs on a call's path.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

#define TOPO_BITS 21 /* per field: CPU numbers below two million */
#define TOPO_MAX ((1ull << TOPO_BITS) - 1)
#define CPU_DIR "/sys/devices/system/cpu/cpu%u/"

/* A small number from sysfs; -1 when missing or not a number. */
static long sysfs_long(const char *path)
{
	char buf[32], *end;
	long v;

	if (cpuhog_i_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	v = strtol(buf, &end, 10);
	return end > buf ? v : -1;
}

/* The lowest CPU sharing @cpu's last-level cache; -1 if none is listed. */
static long llc_of(struct ctx *c, unsigned int cpu)
{
	size_t sz = CPU_ALLOC_SIZE(c->nr_cpu_ids);
	char path[96];
	long best = -1, level, top = -1;
	unsigned int i, k;

	for (i = 0; i < 16; i++) {
		snprintf(path, sizeof(path), CPU_DIR "cache/index%u/level", cpu,
			 i);
		level = sysfs_long(path);
		if (level < 0)
			break;
		if (level < top)
			continue;
		snprintf(path, sizeof(path),
			 CPU_DIR "cache/index%u/shared_cpu_list", cpu, i);
		if (cpuhog_i_read_cpulist(path, sz, c->mscratch) <= 0)
			continue;
		for (k = 0; k < c->nr_cpu_ids; k++)
			if (CPU_ISSET_S(k, sz, c->mscratch))
				break;
		top = level;
		best = k;
	}
	return best;
}

static uint64_t field(long v)
{
	return v < 0 ? TOPO_MAX : (uint64_t)v & TOPO_MAX;
}

static uint64_t topo_key(struct ctx *c, unsigned int cpu)
{
	char path[96];

	snprintf(path, sizeof(path), CPU_DIR "topology/physical_package_id",
		 cpu);
	return field(sysfs_long(path)) << (2 * TOPO_BITS) |
	       field(llc_of(c, cpu)) << TOPO_BITS | field(cpu);
}

static int by_key(const void *a, const void *b)
{
	uint64_t x = (*(struct hog *const *)a)->tree.topo;
	uint64_t y = (*(struct hog *const *)b)->tree.topo;

	return x < y ? -1 : x > y;
}

/* The wake tree's shape (wake.c): each hog's key and room for its
 * children, and c->by_topo: the hogs in topology order. */
void cpuhog_i_topo_sort(struct ctx *c)
{
	unsigned int i;

	for (i = 0; i < c->nr_hogs; i++) {
		c->hogs[i].tree.kids = c->kid_store + (size_t)i * c->fanout;
		c->hogs[i].tree.topo = topo_key(c, c->hogs[i].cpu);
		c->by_topo[i] = &c->hogs[i];
	}
	qsort(c->by_topo, c->nr_hogs, sizeof(*c->by_topo), by_key);
	for (i = 0; i < c->nr_hogs; i++)
		c->by_topo[i]->tree.pos = i;
}
