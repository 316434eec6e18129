/* zmem: the command-line front end.  One subcommand per file: the user
 * commands in src/cli/, the benchmarks in src/bench/ (their table is
 * bench_commands(), bench/commands.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/codec.h>
#include <zmem/common.h>
#include <zmem/pool.h>
#include "bench/commands.h"
#include "tool/check.h"
#include "cli/cli.h"
#include "tool/opt.h"

/* the user commands; the benchmarks' are bench_commands()'s */
static const struct cli_command user_cmds[] = {
	{ "serve", cmd_serve,
	  "a compressed RAM disk over NBD (qemu, nbdcopy, fio, nbdinfo)" },
	{ "run", cmd_run,
	  "run a command with its heap in compressed memory (LD_PRELOAD)" },
	{ "stats", cmd_stats,
	  "the statistics of a running zmem serve or zmem run" },
	{ "ctl", cmd_ctl,
	  "drive a running zmem serve or run: compact, mem-limit, ..." },
	{ "stop", cmd_stop, "stop a running zmem serve or zmem run" },
	{ "list", cmd_list, "the running zmem serve and run processes, like zramctl" },
	{ "capture", cmd_capture,
	  "copy the private memory of a live process into a file of pages" },
};
#define NUSER (sizeof(user_cmds) / sizeof(user_cmds[0]))

/* Command i of all: the benchmarks', then the user commands (the order
 * of zmem help); NULL past the last. */
static const struct cli_command *cmd_at(size_t i)
{
	size_t nbench;
	const struct cli_command *bench = bench_commands(&nbench);

	if (i < nbench)
		return &bench[i];
	return i - nbench < NUSER ? &user_cmds[i - nbench] : NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: zmem COMMAND [OPTIONS]\n"
		   "       zmem help [COMMAND] | zmem COMMAND --help | zmem --version\n"
		   "       zmem help codecs | zmem help allocators   (this build's names)\n\n"
		   "Commands:\n");
	/* each line within 80 columns: a help of 65 characters at most */
	for (size_t i = 0; cmd_at(i); i++)
		if (cmd_at(i)->help)
			fprintf(f, "  %-12s %s\n", cmd_at(i)->name, cmd_at(i)->help);
	fprintf(f, "\nSizes are bytes or K, M, G, T (units of 1024).  Exit status: 0 done,\n"
		   "1 failed, 2 usage error.  Progress goes to stderr (-q: none); --json\n"
		   "prints one document {\"zmem\": VERSION, \"command\": NAME, ...} on stdout.\n");
}

/* edit distance of two short names (a transposition counts one) */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), d[24][24];

	if (la > 23 || lb > 23)
		return 99;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

/* The closest listed command: the one that name begins ("dens" ->
 * density), else one within two edits (one for names of four letters or
 * fewer: "ben" is not "gen"); NULL if none is close. */
static const char *closest(const char *name)
{
	const char *best = NULL;
	size_t len = strlen(name), bd = len <= 4 ? 2 : 3;

	for (size_t i = 0; len >= 2 && cmd_at(i); i++)
		if (cmd_at(i)->help && !strncmp(name, cmd_at(i)->name, len))
			return cmd_at(i)->name;
	for (size_t i = 0; cmd_at(i); i++) {
		size_t d;

		if (!cmd_at(i)->help)
			continue;
		d = distance(name, cmd_at(i)->name);
		if (d < bd)
			bd = d, best = cmd_at(i)->name;
	}
	return best;
}

static int unknown(const char *name)
{
	const char *best = closest(name);

	if (best)
		fprintf(stderr, "zmem: unknown command '%s'; did you mean '%s'? (zmem help)\n",
			name, best);
	else
		fprintf(stderr, "zmem: unknown command '%s' (zmem help)\n", name);
	return CLI_USAGE;
}

static const struct cli_command *find(const char *name)
{
	for (size_t i = 0; cmd_at(i); i++)
		if (!strcmp(name, cmd_at(i)->name))
			return cmd_at(i);
	return NULL;
}

int main(int argc, char **argv)
{
	const struct cli_command *c;

	/* a failed write to stdout is a failure (check.h) */
	atexit(cli_check_stdout);
	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    (!strcmp(argv[1], "help") && argc == 2)) {
		usage(stdout);
		return CLI_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") ||
	    !strcmp(argv[1], "version")) {
		printf("zmem %s\n", zm_version_string());
		return CLI_OK;
	}
	if (!strcmp(argv[1], "help")) {
		char *help_argv[] = { argv[2], "--help", NULL };

		if (argc > 3)
			return cli_usage(NULL, "help takes one command, not '%s'", argv[3]);
		if (!strcmp(argv[2], "help")) {
			usage(stdout);
			return CLI_OK;
		}
		/* the names --codec and --allocator take in this build, one a
		 * line (the bash completion offers them) */
		if (!strcmp(argv[2], "codecs") || !strcmp(argv[2], "allocators")) {
			const char *const *v = argv[2][0] == 'c' ? zm_codec_list() :
							       zm_pool_backends();

			while (*v)
				printf("%s\n", *v++);
			return CLI_OK;
		}
		c = find(argv[2]);
		if (!c || !c->help)
			return unknown(argv[2]);
		cli_cmd = c->name;
		return c->fn(2, help_argv);
	}
	if (argv[1][0] == '-')
		return cli_usage(NULL, "unknown option '%s' (zmem help)", argv[1]);
	c = find(argv[1]);
	if (!c)
		return unknown(argv[1]);
	cli_cmd = c->name;
	return c->fn(argc - 1, argv + 1);
}
