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
#include "cli/corpus.h"

#define PAGE 4096

static struct corpus *g_c;
static struct zm_codec *g_codec;
static size_t g_cap, g_target;

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

static int add_file(const char *path)
{
	uint64_t page[PAGE / 8];
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (fd < 0)
		return -1;
	while (g_c->bytes < g_target && (r = read(fd, page, PAGE)) > 0) {
		if (r < PAGE)
			memset((char *)page + r, 0, PAGE - (size_t)r);
		add_page(g_c, page);
	}
	close(fd);
	return 0;
}

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	if (type == FTW_F && S_ISREG(st->st_mode) && st->st_size >= PAGE)
		add_file(path);
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
	g_target = target;
	if (!npaths) {
		paths = dflt;
		npaths = 3;
	}
	for (int i = 0; i < npaths && c->bytes < target; i++)
		if (nftw(paths[i], walk_cb, 32, FTW_PHYS) < 0)
			fprintf(stderr, "zmem: cannot read %s\n", paths[i]);
	zm_codec_destroy(g_codec);
	g_codec = NULL;
	return c->n ? 0 : -ENOENT;
}

void corpus_free(struct corpus *c)
{
	free(c->size);
	c->size = NULL;
}
