/*
 * zmem bench: the data sets, from their names on the command line.
 *
 *   zero           zero-filled pages (written, so that they are real memory)
 *   text[:R]       English-like text tuned so that pages compress to about
 *                  R (default 0.75) with the bench's codec (workload.h)
 *   random[:R]     random bytes then zeros, compressing to about R
 *                  (default 1: incompressible)
 *   file:PATH      the first SIZE bytes of a file, as pages (the last page
 *                  padded with zeros)
 *   capture:PID    the private memory of a running process (workload.h;
 *                  needs ptrace rights over it)
 *   memory         the same, from a process bench spawns for the purpose
 *                  (bench_child.c)
 *
 * Generated data uses a fixed seed: every run sees the same bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/codec.h>
#include "workload/workload.h"
#include "bench/bench.h"
#include "tool/check.h"
#include "tool/opt.h"

#define BENCH_SEED 20111 /* any constant: the same data in every run */

static int parse_ratio(const char *s, double def, double *r)
{
	char *end;

	if (!s) {
		*r = def;
		return 0;
	}
	*r = strtod(s, &end);
	return *end || end == s || !(*r > 0 && *r <= 1) ? -1 : 0;
}

static int generate(enum workload_kind kind, const char *arg, double def,
		    size_t size, size_t ps, const char *codec_name, struct bench_data *d)
{
	struct workload_stats st;
	struct zm_codec *codec = NULL;
	double ratio;
	int rc;

	if (parse_ratio(arg, def, &ratio)) {
		fprintf(stderr, "zmem %s: bad ratio in '%s' (want a number in (0, 1])\n", cli_cmd,
			d->name);
		return -1;
	}
	rc = zm_codec_create(codec_name, 0, &codec);
	if (rc) {
		fprintf(stderr, "zmem %s: codec '%s': %s\n", cli_cmd, codec_name, strerror(-rc));
		return -1;
	}
	d->len = size / ps * ps;
	d->buf = malloc(d->len);
	if (!d->buf) {
		zm_codec_destroy(codec);
		cli_no_memory(cli_cmd, d->name, d->len);
		return -1;
	}
	rc = workload_fill(kind, ratio, codec, BENCH_SEED, d->buf, d->len, ps, &st);
	if (rc) {
		fprintf(stderr, "zmem %s: generating %s: %s\n", cli_cmd, d->name, strerror(-rc));
		zm_codec_destroy(codec);
		return -1;
	}
	snprintf(d->note, sizeof(d->note), "generated, %s ratio %.4f (target %.2f)",
		 zm_codec_name(codec), st.ratio, ratio);
	zm_codec_destroy(codec);
	return 0;
}

static int from_file(const char *path, size_t size, size_t ps, struct bench_data *d)
{
	FILE *f = fopen(path, "rb");
	size_t got;

	if (!f) {
		fprintf(stderr, "zmem %s: %s: %s\n", cli_cmd, path, strerror(errno));
		return -1;
	}
	d->buf = calloc(1, size / ps * ps);
	if (!d->buf) {
		fclose(f);
		cli_no_memory(cli_cmd, path, size / ps * ps);
		return -1;
	}
	got = fread(d->buf, 1, size / ps * ps, f);
	fclose(f);
	if (!got) {
		fprintf(stderr, "zmem %s: %s: empty or unreadable\n", cli_cmd, path);
		return -1;
	}
	d->len = (got + ps - 1) / ps * ps;
	snprintf(d->note, sizeof(d->note), "%zu bytes of %s", got, path);
	return 0;
}

static int from_capture(const char *arg, size_t size, size_t ps, struct bench_data *d)
{
	struct workload_capture_stats st;
	void *buf = NULL;
	char *end;
	long pid = strtol(arg, &end, 10);
	int rc;

	if (*end || end == arg || pid <= 0) {
		fprintf(stderr, "zmem %s: '%s' is not a process id\n", cli_cmd, arg);
		return -1;
	}
	rc = workload_capture_mem((pid_t)pid, size, &buf, &d->len, &st);
	if (rc) {
		fprintf(stderr, "zmem %s: capturing PID %ld: %s%s\n", cli_cmd, pid, strerror(-rc),
			rc == -EPERM ? " (run as root, or as its user with ptrace allowed)" : "");
		return -1;
	}
	d->buf = buf;
	if (st.page_size != ps || !d->len) {
		fprintf(stderr, "zmem %s: PID %ld: %zu bytes of %zu-byte pages (need %zu-byte "
			"pages)\n", cli_cmd, pid, d->len, st.page_size, ps);
		return -1;
	}
	snprintf(d->note, sizeof(d->note), "captured from PID %ld: %zu pages of %zu mappings",
		 pid, st.pages, st.regions);
	return 0;
}

int bench_data_check(const char *spec)
{
	const char *colon = strchr(spec, ':');
	size_t klen = colon ? (size_t)(colon - spec) : strlen(spec);
	const char *arg = colon ? colon + 1 : NULL;
	double r;

	if ((klen == 4 && !strncmp(spec, "zero", 4) && !arg) || !strcmp(spec, "memory") ||
	    (klen == 4 && !strncmp(spec, "file", 4) && arg && *arg))
		return 0;
	if ((klen == 4 && !strncmp(spec, "text", 4)) || (klen == 6 && !strncmp(spec, "random", 6))) {
		if (!parse_ratio(arg, 1, &r))
			return 0;
		return cli_usage(cli_cmd, "bad ratio in --data '%s' (want a number in (0, 1])", spec);
	}
	if (klen == 7 && !strncmp(spec, "capture", 7) && arg) {
		char *end;
		long pid = strtol(arg, &end, 10);

		if (!*end && end != arg && pid > 0 && pid <= 0x7fffffff)
			return 0;
		return cli_usage(cli_cmd, "invalid --data '%s' (capture:PID)", spec);
	}
	return cli_usage(cli_cmd, "unknown data set '%s' (zero, text[:R], random[:R], "
			 "file:PATH, capture:PID, memory)", spec);
}

int bench_data_make(const char *spec, size_t size, size_t ps, const char *codec,
		    struct bench_data *d)
{
	const char *colon = strchr(spec, ':');
	size_t klen = colon ? (size_t)(colon - spec) : strlen(spec);
	const char *arg = colon ? colon + 1 : NULL;

	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", spec);
	if (klen == 4 && !strncmp(spec, "zero", 4) && !arg) {
		d->len = size / ps * ps;
		d->buf = malloc(d->len);
		if (!d->buf) {
			cli_no_memory(cli_cmd, d->name, d->len);
			return -1;
		}
		memset(d->buf, 0, d->len);
		snprintf(d->note, sizeof(d->note), "zero-filled pages");
		return 0;
	}
	if (klen == 4 && !strncmp(spec, "text", 4))
		return generate(WORKLOAD_TEXT, arg, 0.75, size, ps, codec, d);
	if (klen == 6 && !strncmp(spec, "random", 6))
		return generate(WORKLOAD_RANDOM, arg, 1.0, size, ps, codec, d);
	if (klen == 4 && !strncmp(spec, "file", 4) && arg && *arg)
		return from_file(arg, size, ps, d);
	if (klen == 7 && !strncmp(spec, "capture", 7) && arg)
		return from_capture(arg, size, ps, d);
	if (!strcmp(spec, "memory"))
		return bench_memory(size, ps, d);
	fprintf(stderr, "zmem %s: unknown data set '%s' (zero, text[:R], random[:R], "
		"file:PATH, capture:PID, memory)\n", cli_cmd, spec);
	return -1;
}

void bench_data_free(struct bench_data *d)
{
	free(d->buf);
	d->buf = NULL;
	d->len = 0;
}
