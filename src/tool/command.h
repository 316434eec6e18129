/* One command of zmem, as the command tables list it: the user commands'
 * (src/cli/main.c) and the benchmarks' (src/bench/commands.c). */
#ifndef ZM_TOOL_COMMAND_H
#define ZM_TOOL_COMMAND_H

struct cli_command {
	const char *name;
	/* argv[0] is the command's name; returns the exit status */
	int (*fn)(int argc, char **argv);
	const char *help;       /* its line in zmem help; NULL: internal,
				   not listed */
};

#endif
