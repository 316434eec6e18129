/*
 * zmem capture: copy the private writable memory of a live process into a
 * file, page by page (zm_workload_capture, see workload.h), for
 * benchmarks on realistic data.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmem/workload.h>
#include "cli/cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zmem capture PID -o FILE [--max-size SIZE]\n"
		"  PID               the process (needs root, or ptrace rights over it)\n"
		"  -o FILE           output file of raw pages ('-' for standard output)\n"
		"  --max-size SIZE   stop after this much (default: everything)\n");
}

static int write_page(void *arg, const void *page, size_t ps)
{
	return fwrite(page, 1, ps, arg) == ps ? 0 : -(errno ? errno : EIO);
}

int cmd_capture(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "output", required_argument, 0, 'o' },
		{ "max-size", required_argument, 0, 'm' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct zm_capture_stats st;
	const char *out = NULL;
	size_t max = 0;
	char *end;
	long pid;
	FILE *f;
	int c, rc;

	while ((c = getopt_long(argc, argv, "o:m:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'm':
			max = cli_parse_size(optarg);
			if (!max) {
				fprintf(stderr, "capture: bad --max-size '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc || !out) {
		usage(stderr);
		return 2;
	}
	pid = strtol(argv[optind], &end, 10);
	if (*end || end == argv[optind] || pid <= 0 || pid > 0x7fffffff) {
		fprintf(stderr, "capture: '%s' is not a process id\n", argv[optind]);
		return 2;
	}
	f = strcmp(out, "-") ? fopen(out, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "capture: %s: %s\n", out, strerror(errno));
		return 1;
	}
	rc = zm_workload_capture((pid_t)pid, max, write_page, f, &st);
	if (!rc && fflush(f))
		rc = -errno;
	if (f != stdout && fclose(f) && !rc)
		rc = -errno;
	if (rc) {
		if (rc == -ESRCH)
			fprintf(stderr, "capture: no process with PID %ld\n", pid);
		else if (rc == -EPERM || rc == -EACCES)
			fprintf(stderr, "capture: permission denied reading the memory of PID %ld:\n"
				"  run as root, or as its user with ptrace allowed "
				"(kernel.yama.ptrace_scope = 0, or CAP_SYS_PTRACE)\n", pid);
		else
			fprintf(stderr, "capture: PID %ld: %s\n", pid, strerror(-rc));
		if (f != stdout)
			unlink(out);
		return 1;
	}
	fprintf(stderr, "capture: PID %ld: %zu pages of %zu bytes (%.1f MiB) from %zu mappings "
		"to %s%s\n", pid, st.pages, st.page_size,
		(double)st.pages * (double)st.page_size / 1048576.0, st.regions, out,
		st.limited ? " (stopped at --max-size)" : "");
	fprintf(stderr, "capture: %zu pages unreadable (skipped), %zu never touched, "
		"%zu reservations skipped\n", st.unreadable, st.unpopulated, st.regions_skipped);
	return 0;
}
