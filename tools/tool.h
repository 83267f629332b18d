/* SPDX-License-Identifier: MIT */
#ifndef CPUHOG_TOOL_H
#define CPUHOG_TOOL_H

/* Exit statuses of every subcommand. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

int cmd_tour(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
