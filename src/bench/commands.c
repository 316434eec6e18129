/* The table of the benchmark commands (commands.h). */
#include <stddef.h>

#include "bench/benchmarks.h"
#include "bench/commands.h"

static const struct cli_command cmds[] = {
	{ "bench", cmd_bench,
	  "the main job: every allocator on the same pages: density, speed" },
	{ "pagebench", cmd_pagebench,
	  "the page allocator: bulk vs single pages, fast path, threads" },
	{ "mapbench", cmd_mapbench,
	  "time map+unmap of zsmalloc objects: copy vs in place, per mode" },
	{ "churn", cmd_churn,
	  "free a random part of the objects: memory after, per allocator" },
	{ "churn-child", cmd_churn_child, NULL },
	{ "density", cmd_density,
	  "how densely each backend holds real lz4-compressed pages" },
	{ "allocbench", cmd_allocbench,
	  "the same allocations through every pool backend: ns per op" },
	{ "worstcase", cmd_worstcase,
	  "sequences built to hurt each allocator, by pool size" },
	{ "tierbench", cmd_tierbench,
	  "cold data against a memory limit: recompression, writeback" },
	{ "regionbench", cmd_regionbench,
	  "compressed regions against plain memory, the kernel's zram, zswap" },
	{ "runbench", cmd_runbench,
	  "programs under zmem run against the kernel's zram and zswap" },
	{ "cachebench", cmd_cachebench,
	  "tmem under memory pressure: frontswap, cleancache, the store" },
	{ "gen", cmd_gen,
	  "write zero, random or text pages at a compression ratio" },
};

const struct cli_command *bench_commands(size_t *n)
{
	*n = sizeof(cmds) / sizeof(cmds[0]);
	return cmds;
}
