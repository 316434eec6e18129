/* Page corpora for the benchmarks: pages read from files, compressed with
 * lz4, same-filled ones skipped (the store keeps them in the slot), those
 * that do not compress kept at page size (stored raw). */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmem/codec.h>
#include "bench/corpus.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"

#define PAGE 4096

static struct corpus *g_c;
static struct corpus_source *g_src;
static struct zm_codec *g_codec;
static size_t g_cap, g_target, g_fcap;
static int g_err;               /* the first file that could not be read */
static char g_errpath[4096];

static int same_filled(const uint64_t *w)
{
	for (size_t i = 1; i < PAGE / 8; i++)
		if (w[i] != w[0])
			return 0;
	return 1;
}

static void add_page(struct corpus *c, const void *page)
{
	static char out[PAGE];
	int r;

	c->pages++;
	if (same_filled(page)) {
		c->same++;
		return;
	}
	r = zm_codec_compress(g_codec, page, PAGE, out, PAGE);
	if (r <= 0) {
		r = PAGE;  /* incompressible: stored raw */
		c->raw++;
	}
	if (c->n == g_cap) {
		g_cap = g_cap ? g_cap * 2 : 4096;
		c->size = realloc(c->size, g_cap * sizeof(*c->size));
		if (!c->size)
			exit(1);
	}
	c->size[c->n++] = (uint32_t)r;
	c->bytes += (size_t)r;
}

/* 0, or -errno if the file cannot be opened or read */
static int add_file(const char *path)
{
	uint64_t page[PAGE / 8];
	int fd = open(path, O_RDONLY);
	ssize_t r = 0;

	size_t got = 0;

	if (fd < 0)
		return -errno;
	while (g_c->bytes < g_target && (r = read(fd, page, PAGE)) > 0) {
		if (r < PAGE)
			memset((char *)page + r, 0, PAGE - (size_t)r);
		add_page(g_c, page);
		got += (size_t)r;
	}
	if (r < 0)
		r = -errno;
	close(fd);
	if (r < 0)
		return (int)r;
	if (!got)
		return 0;
	if (g_c->nfiles == g_fcap) {
		g_fcap = g_fcap ? g_fcap * 2 : 256;
		g_c->file = realloc(g_c->file, g_fcap * sizeof(*g_c->file));
		if (!g_c->file)
			exit(1);
	}
	g_c->file[g_c->nfiles].path = strdup(path);
	if (!g_c->file[g_c->nfiles].path)
		exit(1);
	g_c->file[g_c->nfiles++].bytes = got;
	g_src->files++;
	g_src->bytes += got;
	return 0;
}

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	if (type == FTW_F && S_ISREG(st->st_mode) && st->st_size >= PAGE) {
		char a[32], b[32];

		cli_progress("reading pages: %s of %s compressed, from %s",
			     zmi_human_bytes(g_c->bytes, a, 32), zmi_human_bytes(g_target, b, 32),
			     g_src->path);
		/* the system's files: those we may not read are not ours;
		 * a file the user named, or one in a tree they named, is
		 * read or the run fails with its error */
		int rc = add_file(path);

		if (rc && !g_c->defaults) {
			g_err = rc;
			snprintf(g_errpath, sizeof(g_errpath), "%s", path);
			return 1;
		}
	}
	return g_c->bytes >= g_target;
}

int corpus_load(const char *const *paths, int npaths, size_t target, struct corpus *c)
{
	static const char *const dflt[] = { "/usr/lib", "/usr/bin", "/usr/share" };
	int rc;

	memset(c, 0, sizeof(*c));
	rc = zm_codec_create("lz4", 0, &g_codec);
	if (rc)
		return rc;
	g_c = c;
	g_cap = 0;
	g_fcap = 0;
	g_target = target;
	g_err = 0;
	if (!npaths) {
		paths = dflt;
		npaths = 3;
		c->defaults = 1;
	}
	for (int i = 0; i < npaths && i < CORPUS_SOURCES && c->bytes < target && !g_err; i++) {
		g_src = &c->src[c->nsrc++];
		g_src->path = paths[i];
		if (nftw(paths[i], walk_cb, 32, FTW_PHYS) < 0) {
			g_src->unreadable = 1;
			fprintf(stderr, "zmem %s: cannot read %s: %s\n", cli_cmd, paths[i],
				strerror(errno));
		}
	}
	cli_progress_done();
	zm_codec_destroy(g_codec);
	g_codec = NULL;
	if (g_err)
		return g_err;
	return c->n ? 0 : -ENOENT;
}

int corpus_load_cmd(const char *cmd, const char *const *paths, int npaths, size_t target,
		    struct corpus *c)
{
	int rc;

	/* every path given is there and readable before any work */
	for (int i = 0; i < npaths; i++)
		if (cli_check_input(cmd, "--corpus", paths[i]))
			return CLI_FAIL;
	rc = corpus_load(paths, npaths, target, c);
	if (!rc)
		return 0;
	corpus_free(c);
	if (g_err)
		return cli_fail(cmd, "--corpus: %s: %s", g_errpath, strerror(-g_err));
	return rc == -ENOENT ? cli_fail(cmd, "no pages of 4096 bytes or more in %s",
					npaths ? "the --corpus paths" :
					"/usr/lib, /usr/bin, /usr/share") :
			       cli_fail(cmd, "lz4: %s", strerror(-rc));
}

void corpus_free(struct corpus *c)
{
	free(c->size);
	c->size = NULL;
	for (size_t i = 0; i < c->nfiles; i++)
		free(c->file[i].path);
	free(c->file);
	c->file = NULL;
	c->nfiles = 0;
}

void corpus_print(const struct corpus *c, FILE *f, const char *prefix)
{
	size_t first = 0;
	char h[32];

	fprintf(f, "%spages from %s, in directory order (lz4; the files: --json):\n", prefix,
		c->defaults ? "the system's files" : "--corpus");
	for (int i = 0; i < c->nsrc; i++) {
		const struct corpus_source *s = &c->src[i];

		fprintf(f, "%s  %s: %zu file%s, %s", prefix, s->path, s->files,
			s->files == 1 ? "" : "s", zmi_human_bytes(s->bytes, h, sizeof(h)));
		if (s->unreadable)
			fprintf(f, " (unreadable)");
		fputc('\n', f);
		if (s->files > 1)
			fprintf(f, "%s    first %s\n%s    last  %s\n", prefix, c->file[first].path,
				prefix, c->file[first + s->files - 1].path);
		first += s->files;
	}
}

void corpus_json(const struct corpus *c, struct json *j)
{
	json_object(j, "corpus");
	json_bool(j, "defaults", c->defaults);
	json_array(j, "sources");
	for (int i = 0; i < c->nsrc; i++) {
		json_object(j, NULL);
		json_str(j, "path", c->src[i].path);
		json_uint(j, "files", c->src[i].files);
		json_uint(j, "bytes", c->src[i].bytes);
		json_bool(j, "readable", !c->src[i].unreadable);
		json_object_end(j);
	}
	json_array_end(j);
	json_array(j, "files");
	for (size_t i = 0; i < c->nfiles; i++) {
		json_object(j, NULL);
		json_str(j, "path", c->file[i].path);
		json_uint(j, "bytes", c->file[i].bytes);
		json_object_end(j);
	}
	json_array_end(j);
	json_object_end(j);
}
