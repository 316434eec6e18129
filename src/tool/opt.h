/* The zmem command's options: one table per subcommand gives each option's
 * name, kind, limits, default and help; opt_parse() parses argv against it
 * with one message per fault, and opt_help() prints the --help generated
 * from the same table, so the two cannot drift.
 *
 * Conventions (the ones of coreutils):
 *   --name VALUE, --name=VALUE, -x VALUE; "--" ends the options;
 *   every command takes -h/--help and -q/--quiet (no progress);
 *   sizes are bytes or K/M/G/T (units of 1024, an optional B or iB), never
 *   signed; counts are decimal; both refuse overflow and junk;
 *   durations are a number and ms, s, m or h (500ms, 30s, 10m, 1h), a bare
 *   number in the option's own unit, which its --help names;
 *   a usage error prints one line, "zmem CMD: ...", and the exit status is
 *   2 (CLI_USAGE); a failure while running is 1 (CLI_FAIL). */
#ifndef ZM_TOOL_OPT_H
#define ZM_TOOL_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/units.h"  /* zmi_human_bytes(): "64 MiB", "1.5 GiB", "512 B" */

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

enum opt_kind {
	OPT_FLAG,    /* int *: set to 1 */
	OPT_SIZE,    /* size_t *: a size, lo..hi */
	OPT_INT,     /* int *: a count, lo..hi (hi at most INT_MAX) */
	OPT_U64,     /* uint64_t *: a count, lo..hi (hi 0: any) */
	OPT_DOUBLE,  /* double *: a finite number, lo..hi (open: excluded) */
	OPT_STRING,  /* const char **: any text (choices: one of them) */
	OPT_LIST,    /* const char **: repeatable, into an array of cap */
	OPT_DURATION,/* int *: a duration in units of .unit_ms, lo..hi of them */
};

#define OPEN_LO 1
#define OPEN_HI 2
#define OPEN (OPEN_LO | OPEN_HI)

struct opt {
	const char *name;        /* long name, without "--" */
	char short_name;         /* 0: none */
	enum opt_kind kind;
	void *dst;
	const char *arg;         /* the value's name in --help ("SIZE") */
	const char *help;        /* may hold '\n' */
	const char *def;         /* default, as --help shows it (NULL: none) */
	double lo, hi;           /* limits, inclusive; hi 0: none (lo 0 refuses
				    negative numbers too) */
	int open;                /* OPT_DOUBLE: OPEN_LO, OPEN_HI: lo, hi excluded */
	const char *const *choices; /* OPT_STRING: the accepted values */
	size_t *count, cap;      /* OPT_LIST: how many so far, how many at most */
	int *seen;               /* if set: 1 once the option is given */
	int hidden;              /* not in --help (internal) */
	unsigned unit_ms;        /* OPT_DURATION: its unit, 1 (ms) or 1000 (s) */
};

/* Table entries; extra fields (.seen, .open, .choices, .hidden) may
 * follow as designated initializers. */
#define O_FLAG(n, s, d, h, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_FLAG, .dst = (d), .help = (h), __VA_ARGS__ }
#define O_SIZE(n, s, d, a, h, df, l, u, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_SIZE, .dst = (d), .arg = (a), .help = (h), \
	  .def = (df), .lo = (l), .hi = (u), __VA_ARGS__ }
#define O_INT(n, s, d, a, h, df, l, u, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_INT, .dst = (d), .arg = (a), .help = (h), \
	  .def = (df), .lo = (l), .hi = (u), __VA_ARGS__ }
#define O_U64(n, s, d, a, h, df, l, u, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_U64, .dst = (d), .arg = (a), .help = (h), \
	  .def = (df), .lo = (l), .hi = (u), __VA_ARGS__ }
#define O_DOUBLE(n, s, d, a, h, df, l, u, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_DOUBLE, .dst = (d), .arg = (a), \
	  .help = (h), .def = (df), .lo = (l), .hi = (u), __VA_ARGS__ }
#define O_STR(n, s, d, a, h, df, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_STRING, .dst = (d), .arg = (a), \
	  .help = (h), .def = (df), __VA_ARGS__ }
#define O_LIST(n, s, d, a, h, df, cnt, cp, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_LIST, .dst = (d), .arg = (a), .help = (h), \
	  .def = (df), .count = (cnt), .cap = (cp), __VA_ARGS__ }
/* a duration: 500ms, 30s, 10m, 1h, or a bare number of the unit (U ms) */
#define O_DUR(n, s, d, a, h, df, U, l, u, ...) \
	{ .name = (n), .short_name = (s), .kind = OPT_DURATION, .dst = (d), .arg = (a), \
	  .help = (h), .def = (df), .unit_ms = (U), .lo = (l), .hi = (u), __VA_ARGS__ }
#define O_END { .name = NULL }

struct opt_cmd {
	const char *name;        /* "bench" */
	const char *args;        /* after the name in the usage line: "[OPTIONS]" */
	const char *summary;     /* what it does, one or more lines */
	const struct opt *opts;  /* ended by an entry whose name is NULL */
	const char *more;        /* printed after the options (NULL: nothing) */
};

/* Parse argv[1..argc-1].  Operands (not options) are moved to argv[1..]
 * in order and their number is put in *nargs; with nargs NULL, an operand
 * is a usage error.  Returns CLI_OK; or -1 after --help was printed on
 * stdout (exit 0); or CLI_USAGE after a one-line message on stderr. */
int opt_parse(const struct opt_cmd *c, int argc, char **argv, int *nargs);
void opt_help(const struct opt_cmd *c, FILE *f);

/* "zmem CMD: MESSAGE\n" on stderr; returns CLI_USAGE, for
 * `return cli_usage(...)` */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the same message, for failures; returns CLI_FAIL */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A size: "4096", "128K", "64M", "1G", "2T", "4KiB", "1MB" (units of 1024).
 * 0 and *v, or -1: empty, a sign, junk, or more than UINT64_MAX. */
int cli_size(const char *s, uint64_t *v);
/* A duration: "500ms", "1.5s", "10m", "1h", or a bare number of units of
 * unit_ms; into *ms.  0, or -1: junk, a sign, or not finite. */
int cli_duration(const char *s, unsigned unit_ms, double *ms);
/* a finite decimal number, nothing after it: 0, or -1 */
int cli_double(const char *s, double *v);
/* the short form of a size for --help and tables: "64M", "4K", "1000" */
char *cli_size_text(uint64_t bytes, char *buf, size_t len);

/* ---- progress ------------------------------------------------------- */
/* Progress of long runs, "zmem CMD: ...", on stderr only: on a terminal
 * one line that rewrites itself (\r), which cli_progress_done() clears
 * (call it before printing on stdout); otherwise plain lines, at most one
 * a second.  cli_note() prints a line that stays, a step's result, under
 * the same limit: within a second of the last line it is a progress line
 * (on a terminal it is rewritten, otherwise dropped).  cli_notice()
 * always prints its line (something skipped, a file written).
 * cli_quiet(1) (--quiet) silences all three; errors are never silenced.
 * CMD is cli_cmd, the running subcommand's name (main.c sets it). */
extern const char *cli_cmd;
void cli_quiet(int on);
int cli_is_quiet(void);
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_done(void);
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
