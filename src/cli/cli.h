/* The zmem command's user commands (src/cli/); what they share with the
 * benchmark commands (src/bench/) is in src/tool/.  Besides the public
 * headers of the library, the command uses the small helpers of src/base
 * that the library and the tests share: base/os.h (resident memory, the
 * clock), base/rand.h (the one random generator), base/units.h (sizes). */
#ifndef ZM_CLI_H
#define ZM_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/os.h"
#include "base/rand.h"
#include "tool/util.h"

/* subcommands: return the process exit status */
int cmd_serve(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_ctl(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_capture(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* cli_check_codec() and cli_check_allocator(): tool/check.h */
/* a duration (500ms, 30s, 10m, 1h; bare: seconds) into *ms */
int cli_check_duration(const char *cmd, const char *opt, const char *a, unsigned *ms);
/* a file that may be read and written (or created) now: 0, or CLI_FAIL
 * after the message */
int cli_check_backing(const char *cmd, const char *path);

/* --timeout of the commands that ask a server (an entry of their
 * option table, opt.h): how long to wait for it; cli_client_timeout()
 * makes it *ms, CONTROL_CLIENT_TIMEOUT_MS unless given (0, or CLI_USAGE
 * after the message). */
#define O_TIMEOUT(str) \
	O_STR("timeout", 0, (str), "DURATION", \
	      "how long to wait for the server: to\nconnect, then for each piece of its\n" \
	      "answer (500ms, 30s, ...)", "10s")
int cli_client_timeout(const char *cmd, const char *arg, unsigned *ms);

/* run.c: the control socket of a run named as a target of zmem stats,
 * ctl and stop: "run" (the only one running) or "run:PID" (the pid zmem
 * list shows).  Its path into buf: 0; or -1 after a line on stderr. */
int run_target(const char *cmd, const char *arg, char *buf, size_t n);
/* zmem ctl's request line for a run's VERB and its one ARG (NULL: none),
 * sizes made bytes: 0, or CLI_USAGE after the message. */
int run_ctl_line(const char *verb, const char *arg, char *line, size_t n);
static inline int run_is_target(const char *arg)
{
	return arg && (!strcmp(arg, "run") || !strncmp(arg, "run:", 4));
}

#endif
