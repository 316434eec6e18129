/*
 * zmem gen: write generated pages to a file (zm_workload, see workload.h):
 * zero pages, random pages, or English-like text tuned to a compression
 * ratio with a given codec.  The file is raw pages, --size bytes, ready for
 * a benchmark or a RAM disk to read.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/workload.h>
#include "cli/bench.h"
#include "cli/cli.h"

/* Pages generated per write. */
#define GEN_CHUNK_PAGES 256
/* Warn when the mean ratio misses the target by more than this. */
#define GEN_WARN_DELTA 0.02

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zmem gen --kind zero|random|text|memory --size SIZE -o FILE [options]\n"
		"  --kind KIND       zero, random (random bytes then zeros), text\n"
		"                    (English-like), or memory: the private memory of a\n"
		"                    program zmem starts for it (hash tables, strings, ...,\n"
		"                    as zmem bench's \"memory\" data set), captured\n"
		"  --ratio R         target compressed/original per page, in (0, 1]\n"
		"                    (default: text 0.75, random 1)\n"
		"  --size SIZE       bytes to write: 64M, 1G, ...; a multiple of the page size\n"
		"  --codec NAME      codec that measures the ratio: lz4 (default), zstd[:LEVEL],\n"
		"                    lzo, none\n"
		"  --page-size N     page size (default 4096)\n"
		"  --seed N          same seed, same bytes (default 1)\n"
		"  -o FILE           output file ('-' for standard output)\n");
}

struct gen_opts {
	struct zm_workload_config cfg;
	const char *codec, *out;
	size_t size;
	int memory;  /* --kind memory */
};

/* --kind memory: bench's realistic process, captured, written out */
static int gen_memory(const struct gen_opts *o)
{
	struct bench_data d = { 0 };
	FILE *f;
	int status = 0;

	if (bench_memory(o->size, o->cfg.page_size, &d))
		return 1;
	f = strcmp(o->out, "-") ? fopen(o->out, "wb") : stdout;
	if (!f || fwrite(d.buf, 1, d.len, f) != d.len) {
		fprintf(stderr, "gen: %s: %s\n", o->out, strerror(errno));
		status = 1;
	}
	if (f && f != stdout && fclose(f))
		status = 1;
	if (!status)
		fprintf(stderr, "gen: wrote %zu pages of captured process memory to %s (%s)\n",
			d.len / o->cfg.page_size, o->out, d.note);
	bench_data_free(&d);
	return status;
}

static int parse(int argc, char **argv, struct gen_opts *o)
{
	static const struct option lo[] = {
		{ "kind", required_argument, 0, 'k' },
		{ "ratio", required_argument, 0, 'r' },
		{ "size", required_argument, 0, 's' },
		{ "codec", required_argument, 0, 'c' },
		{ "page-size", required_argument, 0, 'p' },
		{ "seed", required_argument, 0, 'S' },
		{ "output", required_argument, 0, 'o' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	char *end;
	int c, kind_set = 0;

	memset(o, 0, sizeof(*o));
	o->cfg.seed = 1;
	o->cfg.page_size = 4096;
	while ((c = getopt_long(argc, argv, "k:r:s:c:p:S:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'k':
			if (!strcmp(optarg, "memory")) {
				o->memory = 1;
				o->cfg.kind = ZM_WORKLOAD_ZERO;
			} else if (zm_workload_kind_parse(optarg, &o->cfg.kind)) {
				fprintf(stderr, "gen: unknown kind '%s' (zero, random, text, "
					"memory)\n", optarg);
				return -1;
			}
			kind_set = 1;
			break;
		case 'r':
			o->cfg.ratio = strtod(optarg, &end);
			if (*end || end == optarg || !(o->cfg.ratio > 0 && o->cfg.ratio <= 1)) {
				fprintf(stderr, "gen: --ratio must be in (0, 1], got '%s'\n", optarg);
				return -1;
			}
			break;
		case 's': o->size = cli_parse_size(optarg); break;
		case 'c': o->codec = optarg; break;
		case 'p': o->cfg.page_size = cli_parse_size(optarg); break;
		case 'S': o->cfg.seed = strtoull(optarg, NULL, 0); break;
		case 'o': o->out = optarg; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc || !kind_set || !o->out || !o->size) {
		fprintf(stderr, "gen: --kind, --size and -o are required\n");
		usage(stderr);
		return -1;
	}
	if (o->cfg.page_size < ZM_WORKLOAD_MIN_PAGE || o->cfg.page_size > ZM_WORKLOAD_MAX_PAGE ||
	    o->cfg.page_size % 64) {
		fprintf(stderr, "gen: --page-size must be a multiple of 64 in %u..%u\n",
			ZM_WORKLOAD_MIN_PAGE, ZM_WORKLOAD_MAX_PAGE);
		return -1;
	}
	if (o->size % o->cfg.page_size) {
		fprintf(stderr, "gen: --size %zu is not a multiple of the page size %zu\n",
			o->size, o->cfg.page_size);
		return -1;
	}
	return 0;
}

int cmd_gen(int argc, char **argv)
{
	struct zm_workload_stats st;
	struct zm_workload *w = NULL;
	struct zm_codec *codec = NULL;
	struct gen_opts o;
	unsigned char *buf = NULL;
	FILE *f = NULL;
	int rc, status = 1;

	if (parse(argc, argv, &o))
		return 2;
	if (o.memory)
		return gen_memory(&o);
	rc = zm_codec_create(o.codec, 0, &codec);
	if (rc) {
		const char *const *l = zm_codec_list();

		fprintf(stderr, "gen: codec '%s': %s (available:", o.codec ? o.codec : "lz4",
			rc == -EOPNOTSUPP ? "not in this build" :
			rc == -EINVAL ? "unknown name or level" : strerror(-rc));
		for (size_t i = 0; l[i]; i++)
			fprintf(stderr, " %s", l[i]);
		fprintf(stderr, ")\n");
		return 2;
	}
	o.cfg.codec = codec;
	rc = zm_workload_create(&o.cfg, &w);
	buf = malloc(GEN_CHUNK_PAGES * o.cfg.page_size);
	if (rc || !buf) {
		fprintf(stderr, "gen: %s\n", strerror(rc ? -rc : ENOMEM));
		goto out;
	}
	f = strcmp(o.out, "-") ? fopen(o.out, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "gen: %s: %s\n", o.out, strerror(errno));
		goto out;
	}
	for (size_t done = 0; done < o.size;) {
		size_t n = o.size - done;

		if (n > GEN_CHUNK_PAGES * o.cfg.page_size)
			n = GEN_CHUNK_PAGES * o.cfg.page_size;
		rc = zm_workload_next(w, buf, n);
		if (rc) {
			fprintf(stderr, "gen: generating: %s\n", strerror(-rc));
			goto out;
		}
		if (fwrite(buf, 1, n, f) != n) {
			fprintf(stderr, "gen: %s: %s\n", o.out, strerror(errno));
			goto out;
		}
		done += n;
	}
	if (fflush(f)) {
		fprintf(stderr, "gen: %s: %s\n", o.out, strerror(errno));
		goto out;
	}
	zm_workload_stats(w, &st);
	fprintf(stderr, "gen: wrote %zu pages of %zu bytes of %s to %s: %s ratio %.4f",
		st.pages, o.cfg.page_size, zm_workload_kind_name(o.cfg.kind), o.out,
		zm_codec_name(codec), st.ratio);
	if (o.cfg.kind != ZM_WORKLOAD_ZERO)
		fprintf(stderr, " (target %.4f, %.1f compressions/page)",
			o.cfg.ratio ? o.cfg.ratio :
			o.cfg.kind == ZM_WORKLOAD_TEXT ? 0.75 : 1.0,
			(double)st.compress_calls / (double)st.pages);
	fprintf(stderr, ", %zu incompressible\n", st.huge_pages);
	if (o.cfg.kind != ZM_WORKLOAD_ZERO && o.cfg.ratio &&
	    fabs(st.ratio - o.cfg.ratio) > GEN_WARN_DELTA)
		fprintf(stderr, "gen: warning: ratio %.3f is out of reach for %s pages with %s\n",
			o.cfg.ratio, zm_workload_kind_name(o.cfg.kind), zm_codec_name(codec));
	status = 0;
out:
	if (f && f != stdout && fclose(f) && !status) {
		fprintf(stderr, "gen: %s: %s\n", o.out, strerror(errno));
		status = 1;
	}
	if (status && f && f != stdout)
		unlink(o.out);
	free(buf);
	zm_workload_destroy(w);
	zm_codec_destroy(codec);
	return status;
}
