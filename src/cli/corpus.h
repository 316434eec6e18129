/* A page corpus compressed with lz4: the sizes of its compressed pages,
 * for the density and churn benchmarks. */
#ifndef ZM_CLI_CORPUS_H
#define ZM_CLI_CORPUS_H

#include <stddef.h>
#include <stdint.h>

struct corpus {
	uint32_t *size;        /* compressed size of each kept page */
	size_t n, bytes;       /* pages kept, sum of sizes */
	size_t pages, same, raw; /* pages read, same-filled (skipped), raw */
};

/* Read pages from paths (files or directories; none: /usr/lib, /usr/bin,
 * /usr/share) until target bytes of compressed pages.  0 or -errno. */
int corpus_load(const char *const *paths, int npaths, size_t target, struct corpus *c);
void corpus_free(struct corpus *c);

#endif
