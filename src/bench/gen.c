/*
 * zmem gen: write generated pages to a file (workload, see workload.h):
 * zero pages, random pages, or English-like text tuned to a compression
 * ratio with a given codec.  The file is raw pages, --size bytes, ready for
 * a benchmark or a RAM disk to read.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmem/codec.h>
#include "workload/workload.h"
#include "bench/bench.h"
#include "bench/benchmarks.h"
#include "tool/check.h"
#include "tool/opt.h"

/* Pages generated per write. */
#define GEN_CHUNK_PAGES 256
/* Warn when the mean ratio misses the target by more than this. */
#define GEN_WARN_DELTA 0.02

struct gen_opts {
	struct workload_config cfg;
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
		fprintf(stderr, "zmem gen: %s: %s\n", o->out, strerror(errno));
		status = 1;
	}
	if (f && f != stdout && fclose(f))
		status = 1;
	if (!status)
		cli_notice("wrote %zu pages of captured process memory to %s (%s)",
			 d.len / o->cfg.page_size, o->out, d.note);
	bench_data_free(&d);
	return status;
}

static int parse(int argc, char **argv, struct gen_opts *o)
{
	static const char *const kinds[] = { "zero", "random", "text", "memory", NULL };
	const char *kind = NULL;
	int size_set = 0, rc;
	uint64_t seed = 1;
	const struct opt table[] = {
		O_STR("kind", 'k', &kind, "KIND",
		      "zero, random (random bytes then zeros), text\n(English-like), or memory: "
		      "the private memory\nof a program zmem starts for it (hash tables,\n"
		      "strings, ..., as zmem bench's \"memory\" data\nset), captured; required",
		      NULL, .choices = kinds),
		O_DOUBLE("ratio", 'r', &o->cfg.ratio, "R",
			 "target compressed/original per page",
			 "text 0.75, random 1", 0, 1, .open = OPEN_LO),
		O_SIZE("size", 's', &o->size, "SIZE",
		       "bytes to write, a multiple of the page size;\nrequired", NULL, 1,
		       (double)((uint64_t)1 << 40), .seen = &size_set),
		O_STR("codec", 'c', &o->codec, "NAME",
		      "the codec that measures the ratio: lz4,\nzstd[:LEVEL], lzo, none", "lz4"),
		O_SIZE("page-size", 'p', &o->cfg.page_size, "SIZE", "a multiple of 64", "4096",
		       WORKLOAD_MIN_PAGE, WORKLOAD_MAX_PAGE),
		O_U64("seed", 'S', &seed, "N", "same seed, same bytes", "1", 0, 0),
		O_STR("output", 'o', &o->out, "FILE", "output file ('-': standard output); required",
		      NULL),
		O_END,
	};
	const struct opt_cmd cmd = {
		"gen", "--kind KIND --size SIZE -o FILE [OPTIONS]",
		"Write generated pages to a file: zero pages, random pages, English-like\n"
		"text tuned to a compression ratio with a codec, or a process's memory.\n"
		"The file is raw pages, --size bytes, ready for zmem bench --data file:,\n"
		"zmem density --corpus or a RAM disk.",
		table, NULL,
	};

	memset(o, 0, sizeof(*o));
	o->cfg.page_size = 4096;
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	o->cfg.seed = seed;
	if (!kind || !size_set || !o->out)
		return cli_usage("gen", "--kind, --size and -o are required (zmem gen --help)");
	if (!strcmp(kind, "memory")) {
		o->memory = 1;
		o->cfg.kind = WORKLOAD_ZERO;
	} else if (workload_kind_parse(kind, &o->cfg.kind)) {
		return cli_usage("gen", "unknown --kind '%s'", kind);
	}
	if (o->cfg.page_size % 64)
		return cli_usage("gen", "--page-size must be a multiple of 64, not %zu",
				 o->cfg.page_size);
	if (o->size % o->cfg.page_size)
		return cli_usage("gen", "--size %zu is not a multiple of the page size %zu",
				 o->size, o->cfg.page_size);
	return 0;
}

int cmd_gen(int argc, char **argv)
{
	struct workload_stats st;
	struct workload *w = NULL;
	struct zm_codec *codec = NULL;
	struct gen_opts o;
	unsigned char *buf = NULL;
	FILE *f = NULL;
	int rc, status = 1;

	rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (cli_check_output("gen", "-o", o.out) || cli_check_binary_stdout("gen", o.out))
		return CLI_FAIL;
	if (o.memory)
		return gen_memory(&o);
	rc = zm_codec_create(o.codec, 0, &codec);
	if (rc) {
		const char *const *l = zm_codec_list();

		fprintf(stderr, "zmem gen: codec '%s': %s (available:", o.codec ? o.codec : "lz4",
			rc == -EOPNOTSUPP ? "not in this build" :
			rc == -EINVAL ? "unknown name or level" : strerror(-rc));
		for (size_t i = 0; l[i]; i++)
			fprintf(stderr, " %s", l[i]);
		fprintf(stderr, ")\n");
		return CLI_USAGE;
	}
	o.cfg.codec = codec;
	rc = workload_create(&o.cfg, &w);
	buf = malloc(GEN_CHUNK_PAGES * o.cfg.page_size);
	if (rc || !buf) {
		fprintf(stderr, "zmem gen: %s\n", strerror(rc ? -rc : ENOMEM));
		goto out;
	}
	f = strcmp(o.out, "-") ? fopen(o.out, "wb") : stdout;
	if (!f) {
		fprintf(stderr, "zmem gen: %s: %s\n", o.out, strerror(errno));
		goto out;
	}
	for (size_t done = 0; done < o.size;) {
		size_t n = o.size - done;
		char hd[32], hs[32];

		if (n > GEN_CHUNK_PAGES * o.cfg.page_size)
			n = GEN_CHUNK_PAGES * o.cfg.page_size;
		cli_progress("%s of %s", zmi_human_bytes(done, hd, sizeof(hd)),
			     zmi_human_bytes(o.size, hs, sizeof(hs)));
		rc = workload_next(w, buf, n);
		if (rc) {
			fprintf(stderr, "zmem gen: generating: %s\n", strerror(-rc));
			goto out;
		}
		if (fwrite(buf, 1, n, f) != n) {
			fprintf(stderr, "zmem gen: %s: %s\n", o.out, strerror(errno));
			goto out;
		}
		done += n;
	}
	if (fflush(f)) {
		fprintf(stderr, "zmem gen: %s: %s\n", o.out, strerror(errno));
		goto out;
	}
	cli_progress_done();
	workload_stats(w, &st);
	if (cli_is_quiet())
		goto quiet;
	fprintf(stderr, "zmem gen: wrote %zu pages of %zu bytes of %s to %s: %s ratio %.4f",
		st.pages, o.cfg.page_size, workload_kind_name(o.cfg.kind), o.out,
		zm_codec_name(codec), st.ratio);
	if (o.cfg.kind != WORKLOAD_ZERO)
		fprintf(stderr, " (target %.4f, %.1f compressions/page)",
			o.cfg.ratio ? o.cfg.ratio :
			o.cfg.kind == WORKLOAD_TEXT ? 0.75 : 1.0,
			(double)st.compress_calls / (double)st.pages);
	fprintf(stderr, ", %zu incompressible\n", st.huge_pages);
	if (o.cfg.kind != WORKLOAD_ZERO && o.cfg.ratio &&
	    fabs(st.ratio - o.cfg.ratio) > GEN_WARN_DELTA)
		fprintf(stderr, "zmem gen: warning: ratio %.3f is out of reach for %s pages with %s\n",
			o.cfg.ratio, workload_kind_name(o.cfg.kind), zm_codec_name(codec));
quiet:
	status = 0;
out:
	if (f && f != stdout && fclose(f) && !status) {
		fprintf(stderr, "zmem gen: %s: %s\n", o.out, strerror(errno));
		status = 1;
	}
	if (status && f && f != stdout)
		unlink(o.out);
	free(buf);
	workload_destroy(w);
	zm_codec_destroy(codec);
	return status;
}
