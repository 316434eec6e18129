/* Checks every command makes before any work, so that a run that cannot
 * end well fails at once, with one line and status 1 (CLI_FAIL), and not
 * after minutes of measuring:
 *
 *   cli_check_output()  a file the command will write (--plot, -o,
 *                       --pidfile): its folder exists and may be written;
 *   cli_check_plot()    the same for --plot, whose name ends in
 *                       ".svg"; "-" keeps standard output for the plot;
 *   cli_check_input()   a file or tree it will read (--corpus, --files,
 *                       --data file:): it exists and may be read;
 *   cli_check_dir()     a folder it will write into (--dir);
 *   cli_check_memory()  a size it will hold in memory (--size): at most
 *                       the machine's memory;
 *   cli_no_memory()     the message when an allocation fails anyway.
 *
 * Each returns 0, or CLI_FAIL after one line on stderr,
 * "zmem CMD: --OPT PATH: REASON", for `if ((rc = ...)) return rc;`.
 * A NULL path or "-" (standard input or output) passes.
 *
 * cli_check_stdout() is registered by main() with atexit(): the last
 * thing the command does is to flush and close standard output, and a
 * write that failed there ("zmem bench > /dev/full") turns the exit status
 * into 1 with "zmem CMD: write error: REASON", as coreutils' close_stdout
 * does. */
#ifndef ZM_TOOL_CHECK_H
#define ZM_TOOL_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

int cli_check_output(const char *cmd, const char *opt, const char *path);
/* --plot PATH: a name ending in ".svg" (status 1 otherwise) that
 * cli_check_output() accepts, or "-": standard output, then kept for the
 * plot alone (plot_take_stdout(): the table goes to standard error);
 * with json set, "-" is a usage error (CLI_USAGE): both would be on
 * standard output. */
int cli_check_plot(const char *cmd, const char *path, bool json);
int cli_check_input(const char *cmd, const char *opt, const char *path);
int cli_check_dir(const char *cmd, const char *opt, const char *path);
/* a codec (zstd:3) or a pool backend this build has: 0, or CLI_USAGE
 * after "zmem CMD: OPT NAME: ...; choices: ..." */
int cli_check_codec(const char *cmd, const char *opt, const char *name);
int cli_check_allocator(const char *cmd, const char *opt, const char *name);
/* the data spec of --data: only "file:PATH" names a path */
int cli_check_data(const char *cmd, const char *spec);
/* bytes (given as opt) times copies must fit in the machine's memory */
int cli_check_memory(const char *cmd, const char *opt, uint64_t bytes, unsigned copies);
/* "zmem CMD: cannot allocate SIZE for WHAT (memory: TOTAL, AVAIL
 * available)"; returns CLI_FAIL */
int cli_no_memory(const char *cmd, const char *what, uint64_t bytes);

/* Binary output ("-o -": pages) is not written to a terminal, as zstd
 * refuses: 0, or CLI_FAIL after the message, when path is "-" and
 * standard output is a terminal. */
int cli_check_binary_stdout(const char *cmd, const char *path);

void cli_check_stdout(void);
/* A flush of f that failed with err before the end: if f is stdout, the
 * error cli_check_stdout() reports (the flush at exit no longer sees
 * it). */
void cli_write_failed(FILE *f, int err);

#endif
