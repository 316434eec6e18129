/* The zmem command: its user commands, and the helpers they share with
 * the benchmark commands (src/bench/).  Besides the public headers of
 * the library, the command uses the small helpers of src/base that the
 * library and the tests share: base/os.h (resident memory, the clock),
 * base/rand.h (the one random generator), base/units.h (sizes). */
#ifndef ZM_CLI_H
#define ZM_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "base/os.h"
#include "base/rand.h"

/* subcommands: return the process exit status */
int cmd_serve(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_capture(int argc, char **argv);

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
