/* zmem: the command-line front end.  One subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{ "bench", cmd_bench,
	  "the main job: every allocator on the same pages, density and speed" },
	{ "pagebench", cmd_pagebench,
	  "time the page allocator: bulk vs single pages, fast path, threads, peers" },
	{ "mapbench", cmd_mapbench,
	  "time map+unmap of zsmalloc objects: copy vs in place, per mode" },
	{ "churn", cmd_churn,
	  "free a random part of the objects: memory after, per allocator" },
	{ "churn-child", cmd_churn_child, "(internal: one allocator's churn run)" },
	{ "density", cmd_density,
	  "how densely each backend holds real lz4-compressed pages" },
	{ "allocbench", cmd_allocbench,
	  "the same allocations through every pool backend: ns per op, threads" },
	{ "worstcase", cmd_worstcase,
	  "sequences built to hurt each allocator, on every backend, by pool size" },
	{ "tierbench", cmd_tierbench,
	  "cold data against a memory limit: recompression, writeback, a hot set" },
	{ "cachebench", cmd_cachebench,
	  "tmem under memory pressure: frontswap, cleancache, tmem against the store" },
	{ "gen", cmd_gen,
	  "write zero, random or English-like text pages at a compression ratio" },
	{ "serve", cmd_serve,
	  "a compressed RAM disk over NBD (qemu, nbdcopy, fio, nbdinfo)" },
	{ "stats", cmd_stats,
	  "the statistics of a running zmem serve" },
	{ "ctl", cmd_ctl,
	  "drive a running zmem serve: compact, mem-limit, idle, writeback, ..." },
	{ "stop", cmd_stop, "stop a running zmem serve" },
	{ "list", cmd_list, "the running zmem serve processes, like zramctl" },
	{ "capture", cmd_capture,
	  "copy the private memory of a live process into a file of pages" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: zmem COMMAND [OPTIONS]   (zmem COMMAND --help for more)\n\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-12s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "zmem: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
