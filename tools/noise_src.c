/* SPDX-License-Identifier: MIT */
/*
 * Where a CPU's noise came from, for `cpuhog noise`: the counters the
 * kernel keeps per CPU (/proc/interrupts, /proc/softirqs), read before
 * and after the run and subtracted, as sysjitter does and as rtla osnoise
 * does from its tracer (which not every kernel has).  These are counts,
 * not times: a delta says what ran on the CPU while it was measured (a
 * timer tick, a network softirq, a TLB shootdown), and the gaps of the
 * histogram say how long the CPU was away.  The measuring hog's own
 * involuntary context switches (a thread that outranked it) are counted
 * by noise.c and shown beside these.
 *
 * A CPU that is not listed in a file (offline when it was read) has no
 * counts there; a source that appears between the two reads (a device's
 * interrupt registered during the run) counts from zero.
 */
#include "noise_src.h"
#include "tool.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The row of @label, added (zeroed) if new; NULL without memory. */
static uint64_t *row(struct noise_src *s, const char *label)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->label[i], label))
			return &s->v[(size_t)i * s->ncpu];
	if (s->n == s->cap) {
		unsigned int cap = s->cap ? s->cap * 2 : 64;
		char(*l)[NOISE_SRC_LABEL] = realloc(s->label, cap * sizeof(*l));
		uint64_t *v;

		if (!l)
			return NULL;
		s->label = l;
		v = realloc(s->v, (size_t)cap * s->ncpu * sizeof(*v));
		if (!v)
			return NULL;
		s->v = v;
		s->cap = cap;
	}
	snprintf(s->label[s->n], NOISE_SRC_LABEL, "%s", label);
	memset(&s->v[(size_t)s->n * s->ncpu], 0, s->ncpu * sizeof(*s->v));
	return &s->v[(size_t)s->n++ * s->ncpu];
}

/* The header's "CPU0 CPU1 ..." into @col (column -> CPU id); columns. */
static unsigned int header(char *line, int *col, unsigned int max)
{
	unsigned int n = 0;
	char *p = line;

	while (n < max && (p = strstr(p, "CPU")) != NULL) {
		col[n++] = atoi(p + 3);
		p += 3;
	}
	return n;
}

/* "name (device)": a numbered interrupt is named by the last word of its
 * description, which names the device ("24: ... ACPI:Ged" -> "24 ACPI:Ged") */
static void label_of(const char *prefix, const char *name, char *rest,
		     char *out)
{
	char *end = rest + strlen(rest), *w;

	while (end > rest && isspace((unsigned char)end[-1]))
		*--end = '\0';
	w = end;
	while (w > rest && !isspace((unsigned char)w[-1]))
		w--;
	if (isdigit((unsigned char)name[0]) && *w)
		snprintf(out, NOISE_SRC_LABEL, "%s %s %s", prefix, name, w);
	else
		snprintf(out, NOISE_SRC_LABEL, "%s %s", prefix, name);
}

/* One line "NAME: c0 c1 ... [description]" into the rows; @vals has
 * room for @ncol counts. */
static int parse_line(struct noise_src *s, const char *prefix, char *line,
		      const int *col, unsigned int ncol, uint64_t *vals)
{
	char *p = line, *colon, *end, label[NOISE_SRC_LABEL];
	unsigned int i;
	uint64_t *r;

	while (isspace((unsigned char)*p))
		p++;
	colon = strchr(p, ':');
	if (!colon)
		return 0;
	*colon = '\0';
	for (i = 0, end = colon + 1; i < ncol; i++) {
		char *q = end;

		vals[i] = strtoull(q, &end, 10);
		if (end == q)
			return 0; /* ERR:, MIS: a single total, not per CPU */
	}
	label_of(prefix, p, end, label);
	r = row(s, label);
	if (!r)
		return -1;
	for (i = 0; i < ncol; i++)
		if (col[i] >= 0 && (unsigned int)col[i] < s->ncpu)
			r[col[i]] = vals[i];
	return 0;
}

/* The files list the online CPUs, at most nr_cpu_ids (@s->ncpu) columns. */
static int read_file(struct noise_src *s, const char *path, const char *prefix)
{
	int *col = calloc(s->ncpu, sizeof(*col)), r = -1;
	uint64_t *vals = calloc(s->ncpu, sizeof(*vals));
	unsigned int ncol = 0;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = col && vals ? fopen(path, "re") : NULL;

	if (f) {
		r = 0;
		if (getline(&line, &cap, f) > 0)
			ncol = header(line, col, s->ncpu);
		while (r == 0 && ncol && getline(&line, &cap, f) > 0)
			r = parse_line(s, prefix, line, col, ncol, vals);
		free(line);
		fclose(f);
	}
	free(col);
	free(vals);
	return r;
}

int noise_src_read(struct noise_src *s, unsigned int ncpu)
{
	memset(s, 0, sizeof(*s));
	s->ncpu = ncpu;
	if (read_file(s, "/proc/interrupts", "irq") < 0 ||
	    read_file(s, "/proc/softirqs", "softirq") < 0) {
		noise_src_free(s);
		return -1;
	}
	return 0;
}

void noise_src_delta(struct noise_src *after, const struct noise_src *before)
{
	unsigned int i, j, cpu;

	for (i = 0; i < after->n; i++) {
		uint64_t *a = &after->v[(size_t)i * after->ncpu];

		for (j = 0; j < before->n; j++)
			if (!strcmp(after->label[i], before->label[j]))
				break;
		if (j == before->n)
			continue; /* new during the run: counts from zero */
		for (cpu = 0; cpu < after->ncpu; cpu++) {
			uint64_t b = before->v[(size_t)j * before->ncpu + cpu];

			a[cpu] = a[cpu] >= b ? a[cpu] - b : 0;
		}
	}
}

/* The index of the largest count of @cpu not yet taken (@taken), or -1. */
static int next_largest(const struct noise_src *d, unsigned int cpu,
			const unsigned char *taken)
{
	uint64_t best = 0;
	unsigned int i;
	int at = -1;

	for (i = 0; i < d->n; i++) {
		uint64_t v = d->v[(size_t)i * d->ncpu + cpu];

		if (!taken[i] && v > best) {
			best = v;
			at = (int)i;
		}
	}
	return at;
}

void noise_src_text(const struct noise_src *d, unsigned int cpu,
		    unsigned int top)
{
	unsigned char *taken = d->n ? calloc(d->n, 1) : NULL;
	unsigned int k;
	int i;

	if (!taken || cpu >= d->ncpu)
		goto out;
	for (k = 0; k < top && (i = next_largest(d, cpu, taken)) >= 0; k++) {
		taken[i] = 1;
		printf(", %s %llu", d->label[i],
		       (unsigned long long)d->v[(size_t)i * d->ncpu + cpu]);
	}
out:
	free(taken);
}

void noise_src_json(const struct noise_src *d, unsigned int cpu, FILE *f)
{
	unsigned int i, sep = 0;

	fputc('{', f);
	for (i = 0; cpu < d->ncpu && i < d->n; i++) {
		uint64_t v = d->v[(size_t)i * d->ncpu + cpu];

		if (!v)
			continue;
		fputs(sep++ ? ", " : "", f);
		json_string(f, d->label[i]);
		fprintf(f, ": %llu", (unsigned long long)v);
	}
	fputc('}', f);
}

void noise_src_free(struct noise_src *s)
{
	free(s->label);
	free(s->v);
	memset(s, 0, sizeof(*s));
}
