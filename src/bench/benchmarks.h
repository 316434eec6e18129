/* The benchmark commands of zmem (one a file here, listed in commands.c)
 * and what more than one of them uses.  Their options, JSON, plots,
 * checks, progress and timing helpers are those of every zmem command
 * (src/tool/). */
#ifndef ZM_BENCH_BENCHMARKS_H
#define ZM_BENCH_BENCHMARKS_H

#include <stddef.h>
#include <stdint.h>

#include "base/rand.h"
#include "tool/util.h"

/* subcommands: return the process exit status */
int cmd_bench(int argc, char **argv);
int cmd_pagebench(int argc, char **argv);
int cmd_mapbench(int argc, char **argv);
int cmd_allocbench(int argc, char **argv);
int cmd_density(int argc, char **argv);
int cmd_worstcase(int argc, char **argv);
int cmd_churn(int argc, char **argv);
int cmd_churn_child(int argc, char **argv);
int cmd_tierbench(int argc, char **argv);
int cmd_cachebench(int argc, char **argv);
int cmd_regionbench(int argc, char **argv);
int cmd_runbench(int argc, char **argv);
int cmd_gen(int argc, char **argv);

/* churn.c, for zmem bench --churn */
struct churn_summary {
	char name[32];          /* zsmalloc, zsmalloc-off, glibc, jemalloc, mimalloc,
				   xvmalloc, xcfmalloc, zbud */
	double fraction;
	double after_free, at_100ms, at_1s;  /* (pool + meta) / live, or RSS based */
	double rss_1s;
};
int churn_summary(double fraction, size_t target, const char *corpus,
		  struct churn_summary *out, int max);

/* A realistic compressed size of a 4 KiB page (see tests/pooltest.h):
 * allocbench's mixed sizes, and its --latency mode's. */
static inline size_t bench_comp_size(uint64_t *s)
{
	unsigned k = (unsigned)(zmi_rand(s) % 100);

	if (k < 25)
		return 16 + zmi_rand(s) % 410;
	if (k < 80)
		return 410 + zmi_rand(s) % 2048;
	if (k < 95)
		return 2458 + zmi_rand(s) % 1228;
	return 4096 - zmi_rand(s) % 204;
}

/* allocbench.c's --latency mode (latency.c) */
int allocbench_latency(int argc, char **argv);

/* bench_2011.c: the effective compression reported with xcfmalloc (2011) for
 * allocator (percent), of zero pages or (text) text compressing to 75%;
 * 0 if it has none. */
double bench_2011_reported(const char *allocator, int text);
/* zcache's codec, lzo1x, in builds with it; else lz4. */
const char *bench_zcache_codec(void);

#endif
