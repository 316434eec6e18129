/* The zmem command: shared helpers of its subcommands.  Besides the
 * public headers of the library, the command uses the small helpers of
 * src/base that the library and the tests share: base/os.h (resident
 * memory, the clock), base/rand.h (the one random generator) and
 * base/units.h (sizes). */
#ifndef ZM_CLI_H
#define ZM_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "base/os.h"
#include "base/rand.h"

/* subcommands: return the process exit status */
int cmd_bench(int argc, char **argv);
int cmd_pagebench(int argc, char **argv);
int cmd_mapbench(int argc, char **argv);
int cmd_allocbench(int argc, char **argv);
int cmd_density(int argc, char **argv);
int cmd_worstcase(int argc, char **argv);
int cmd_churn(int argc, char **argv);
int cmd_churn_child(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_tierbench(int argc, char **argv);
int cmd_cachebench(int argc, char **argv);

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
int cmd_gen(int argc, char **argv);
int cmd_capture(int argc, char **argv);

/* A realistic compressed size of a 4 KiB page (see tests/pooltest.h):
 * allocbench's mixed sizes, and its --latency mode's. */
static inline size_t cli_comp_size(uint64_t *s)
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

/* monotonic nanoseconds */
static inline uint64_t cli_now_ns(void)
{
	return zmi_os_now_ns();
}
/* a decimal count into *v: 0, or -1 (no digits first, junk after, too
 * large) */
int cli_parse_u64(const char *s, uint64_t *v);
/* The xcfmalloc seed's effective compression for allocator (percent),
 * of zero pages or (text) text compressing to 75%; 0 if it has none. */
double cli_seed_reported(const char *allocator, int text);
/* zcache's codec, lzo1x, in builds with it; else lz4. */
const char *cli_zcache_codec(void);
/* median of n values (sorts v) */
double cli_median(double *v, size_t n);
int cli_ncpus(void);

#endif
