/* The checks made before any work, and the check of standard output at
 * exit (check.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/pool.h>
#include "tool/check.h"
#include "tool/opt.h"
#include "tool/plot.h"

static int fail_path(const char *cmd, const char *opt, const char *path, int err)
{
	return cli_fail(cmd, "%s %s: %s", opt, path, strerror(err));
}

int cli_check_output(const char *cmd, const char *opt, const char *path)
{
	char dir[4096];
	const char *slash;
	struct stat st;

	if (!path || !strcmp(path, "-"))
		return 0;
	if (!*path)
		return fail_path(cmd, opt, "''", ENOENT);
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return fail_path(cmd, opt, path, EISDIR);
		return access(path, W_OK) ? fail_path(cmd, opt, path, errno) : 0;
	}
	if (errno != ENOENT)
		return fail_path(cmd, opt, path, errno);
	/* a new file: its folder must be one we may write into */
	slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st))
		return fail_path(cmd, opt, path, errno);
	if (!S_ISDIR(st.st_mode))
		return fail_path(cmd, opt, path, ENOTDIR);
	return access(dir, W_OK | X_OK) ? fail_path(cmd, opt, path, errno) : 0;
}

int cli_check_plot(const char *cmd, const char *path, bool json)
{
	size_t n = path ? strlen(path) : 0;
	int rc;

	if (!path)
		return 0;
	if (!strcmp(path, "-")) {
		if (json)
			return cli_usage(cmd, "--plot - and --json: both write to standard "
					 "output");
		rc = plot_take_stdout();
		return rc ? cli_fail(cmd, "--plot -: %s", strerror(-rc)) : 0;
	}
	if ((rc = cli_check_output(cmd, "--plot", path)))
		return rc;
	/* an SVG document under another name (p.png) misleads whoever opens it */
	if (n < 4 || strcmp(path + n - 4, ".svg"))
		return cli_fail(cmd, "--plot %s: not an SVG file name (FILE.svg, or - for "
				"standard output)", path);
	return 0;
}

int cli_check_input(const char *cmd, const char *opt, const char *path)
{
	struct stat st;

	if (!path || !strcmp(path, "-"))
		return 0;
	if (stat(path, &st))
		return fail_path(cmd, opt, path, errno);
	if (access(path, S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK))
		return fail_path(cmd, opt, path, errno);
	return 0;
}

int cli_check_dir(const char *cmd, const char *opt, const char *path)
{
	struct stat st;

	if (!path)
		return 0;
	if (stat(path, &st))
		return fail_path(cmd, opt, path, errno);
	if (!S_ISDIR(st.st_mode))
		return fail_path(cmd, opt, path, ENOTDIR);
	return access(path, W_OK | X_OK) ? fail_path(cmd, opt, path, errno) : 0;
}

int cli_check_data(const char *cmd, const char *spec)
{
	if (!spec || strncmp(spec, "file:", 5))
		return 0;
	return cli_check_input(cmd, "--data file:", spec + 5);
}

int cli_check_binary_stdout(const char *cmd, const char *path)
{
	if (!path || strcmp(path, "-") || !isatty(STDOUT_FILENO))
		return 0;
	return cli_fail(cmd, "binary pages are not written to a terminal "
			"(-o FILE, or redirect standard output)");
}

/* The codec and allocator are tried before any work (and before zmem
 * serve forks or zmem run starts its command), so that a bad name is told
 * with the choices. */
static void list_names(char *buf, size_t n, const char *const *names)
{
	*buf = 0;
	for (int i = 0; names[i]; i++)
		snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? ", " : "", names[i]);
}

int cli_check_codec(const char *cmd, const char *opt, const char *name)
{
	struct zm_codec *c;
	int rc = zm_codec_create(name, 0, &c);
	char list[256];

	if (!rc) {
		zm_codec_destroy(c);
		return 0;
	}
	list_names(list, sizeof(list), zm_codec_list());
	return cli_usage(cmd, "%s %s: %s; choices: %s (a level follows a colon: zstd:3)",
			 opt, name, rc == -EOPNOTSUPP ? "not in this build"
			 : "unknown codec or bad level", list);
}

int cli_check_allocator(const char *cmd, const char *opt, const char *name)
{
	const char *const *b = zm_pool_backends();
	char list[256];

	for (int i = 0; b[i]; i++)
		if (!strcmp(b[i], name))
			return 0;
	list_names(list, sizeof(list), b);
	return cli_usage(cmd, "%s %s: unknown; choices: %s", opt, name, list);
}

/* the machine's memory and the part of it available now (MemAvailable;
 * 0 if /proc/meminfo does not say) */
static void memory(uint64_t *total, uint64_t *avail)
{
	long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kb;

	*total = pages > 0 && ps > 0 ? (uint64_t)pages * (uint64_t)ps : 0;
	*avail = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			*avail = (uint64_t)kb << 10;
	if (f)
		fclose(f);
}

int cli_check_memory(const char *cmd, const char *opt, uint64_t bytes, unsigned copies)
{
	uint64_t total, avail, need = bytes * (copies ? copies : 1);
	char a[32], b[32], c[32], d[32];

	memory(&total, &avail);
	if (!total || (need / (copies ? copies : 1) == bytes && need <= total))
		return 0;
	cli_size_text(bytes, a, sizeof(a));
	zmi_human_bytes(total, c, sizeof(c));
	zmi_human_bytes(avail, d, sizeof(d));
	if (copies <= 1)
		return cli_fail(cmd, "%s %s does not fit in memory: this machine has %s "
				"(%s available)", opt, a, c, d);
	return cli_fail(cmd, "%s %s needs %s of memory (%u copies); this machine has %s "
			"(%s available)", opt, a, zmi_human_bytes(need, b, sizeof(b)), copies, c,
			d);
}

int cli_no_memory(const char *cmd, const char *what, uint64_t bytes)
{
	uint64_t total, avail;
	char a[32], b[32], c[32];

	memory(&total, &avail);
	return cli_fail(cmd, "cannot allocate %s for %s (memory: %s, %s available)",
			zmi_human_bytes(bytes, a, sizeof(a)), what,
			zmi_human_bytes(total, b, sizeof(b)), zmi_human_bytes(avail, c, sizeof(c)));
}

static int stdout_err;  /* the first error of an earlier flush of stdout */

void cli_write_failed(FILE *f, int err)
{
	if (f == stdout && !stdout_err)
		stdout_err = err;
}

void cli_check_stdout(void)
{
	const char *sp = cli_cmd && *cli_cmd ? " " : "", *name = cli_cmd ? cli_cmd : "";
	int was_bad = ferror(stdout), err;

	/* what fails at the last flush or the close sets errno; an error
	 * met before leaves its own (flushing again meets it again) */
	errno = 0;
	if (fflush(stdout) == 0 && !was_bad && fclose(stdout) == 0)
		return;
	err = errno ? errno : stdout_err;
	/* stdout closed from the start (>&-) with nothing written: fine */
	if (err == EBADF && !was_bad)
		return;
	if (err)
		fprintf(stderr, "zmem%s%s: write error: %s\n", sp, name, strerror(err));
	else
		fprintf(stderr, "zmem%s%s: write error\n", sp, name);
	_exit(CLI_FAIL);
}
