/* SPDX-License-Identifier: MIT */
/* cpuhog - the command-line tool over libcpuhog. */
#include "tool.h"

#include <cpuhog.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *what;
} cmds[] = {
	{ "info", cmd_info, "what the library gets on this machine" },
	{ "stall", cmd_stall, "monopolize CPUs for a while: a fault injector" },
	{ "noise", cmd_noise, "operating-system noise on each CPU" },
	{ "bench", cmd_bench, "measure every call against the limits and peers" },
	{ "tour", cmd_tour, "run each call on every CPU and time it" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: cpuhog COMMAND [OPTIONS]\n\ncommands:\n");
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].what);
	fprintf(f, "\n'cpuhog COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("cpuhog %s\n", cpuhog_version());
		return EXIT_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			/* getopt's own messages then start "cpuhog stall:",
			 * as ours do */
			char name[32];

			snprintf(name, sizeof(name), "cpuhog %s", cmds[i].name);
			argv[1] = name;
			return cmds[i].run(argc - 1, argv + 1);
		}
	fprintf(stderr, "cpuhog: unknown command '%s' (try --help)\n", argv[1]);
	return EXIT_USAGE;
}
