/* Small helpers of the zmem command's commands, the user commands
 * (src/cli) and the benchmarks (src/bench) alike: the clock, a median,
 * the CPU count, a decimal count (util.c). */
#ifndef ZM_TOOL_UTIL_H
#define ZM_TOOL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "base/os.h"

/* monotonic nanoseconds */
static inline uint64_t cli_now_ns(void)
{
	return zmi_os_now_ns();
}
/* a decimal count into *v: 0, or -1 (no digits first, junk after, too
 * large) */
int cli_parse_u64(const char *s, uint64_t *v);
/* median of n values (sorts v) */
double cli_median(double *v, size_t n);
int cli_ncpus(void);

#endif
