/*
 * zmem capture: copy the private writable memory of a live process into a
 * file, page by page (workload_capture, see workload.h), for
 * benchmarks on realistic data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workload/workload.h"
#include "tool/check.h"
#include "cli/cli.h"
#include "tool/opt.h"

static int write_page(void *arg, const void *page, size_t ps)
{
	return fwrite(page, 1, ps, arg) == ps ? 0 : -(errno ? errno : EIO);
}

int cmd_capture(int argc, char **argv)
{
	struct workload_capture_stats st;
	const char *out = NULL;
	size_t max = 0;
	char *end;
	long pid;
	FILE *f;
	int rc, nargs;
	const struct opt table[] = {
		O_STR("output", 'o', &out, "FILE",
		      "output file of raw pages ('-': standard\noutput); required", NULL),
		O_SIZE("max-size", 'm', &max, "SIZE", "stop after this much", "everything", 4096,
		       0),
		O_END,
	};
	const struct opt_cmd cmd = {
		"capture", "PID -o FILE [OPTIONS]",
		"Copy the private writable memory of a live process PID into a file, page\n"
		"by page (needs root, or ptrace rights over it), for benchmarks on\n"
		"realistic data: zmem bench --data file:FILE, zmem density --corpus FILE.",
		table, NULL,
	};

	rc = opt_parse(&cmd, argc, argv, &nargs);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (nargs != 1 || !out)
		return cli_usage("capture", "a PID and -o FILE are required (zmem capture --help)");
	pid = strtol(argv[1], &end, 10);
	if (*end || end == argv[1] || pid <= 0 || pid > 0x7fffffff)
		return cli_usage("capture", "'%s' is not a process id", argv[1]);
	if (cli_check_output("capture", "-o", out) || cli_check_binary_stdout("capture", out))
		return CLI_FAIL;
	f = strcmp(out, "-") ? fopen(out, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "zmem capture: %s: %s\n", out, strerror(errno));
		return 1;
	}
	rc = workload_capture((pid_t)pid, max, write_page, f, &st);
	if (!rc && fflush(f))
		rc = -errno;
	if (f != stdout && fclose(f) && !rc)
		rc = -errno;
	if (rc) {
		if (rc == -ESRCH)
			fprintf(stderr, "zmem capture: no process with PID %ld\n", pid);
		else if (rc == -EPERM || rc == -EACCES)
			fprintf(stderr, "zmem capture: permission denied reading the memory of PID %ld:\n"
				"  run as root, or as its user with ptrace allowed "
				"(kernel.yama.ptrace_scope = 0, or CAP_SYS_PTRACE)\n", pid);
		else
			fprintf(stderr, "zmem capture: PID %ld: %s\n", pid, strerror(-rc));
		if (f != stdout)
			unlink(out);
		return 1;
	}
	cli_notice("PID %ld: %zu pages of %zu bytes (%.1f MiB) from %zu mappings to %s%s", pid, st.pages, st.page_size,
		(double)st.pages * (double)st.page_size / 1048576.0, st.regions, out,
		st.limited ? " (stopped at --max-size)" : "");
	cli_notice("%zu pages unreadable (skipped), %zu never touched, %zu reservations skipped",
		 st.unreadable, st.unpopulated, st.regions_skipped);
	return 0;
}
