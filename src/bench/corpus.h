/* A page corpus compressed with lz4: the sizes of its compressed pages,
 * for the density and churn benchmarks. */
#ifndef ZM_BENCH_CORPUS_H
#define ZM_BENCH_CORPUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CORPUS_SOURCES 16

/* Where the pages came from, so that a run can be repeated: each path
 * given (or each default directory), walked in directory order. */
struct corpus_file {
	char *path;
	size_t bytes;          /* read from it (the last file: maybe a part) */
};

struct corpus_source {
	const char *path;      /* as given, or a default directory */
	size_t files, bytes;   /* files read under it, bytes read */
	int unreadable;        /* could not be walked at all */
};

struct corpus {
	uint32_t *size;        /* compressed size of each kept page */
	size_t n, bytes;       /* pages kept, sum of sizes */
	size_t pages, same, raw; /* pages read, same-filled (skipped), raw */
	int defaults;          /* no paths were given: the system's files */
	struct corpus_source src[CORPUS_SOURCES];
	int nsrc;
	struct corpus_file *file; /* every file read, in order */
	size_t nfiles;
};

/* Read pages from paths (files or directories; none: /usr/lib, /usr/bin,
 * /usr/share) until target bytes of compressed pages.  0 or -errno
 * (-ENOENT: no pages found). */
int corpus_load(const char *const *paths, int npaths, size_t target, struct corpus *c);
/* corpus_load for command cmd: 0, or the command's exit status after a
 * one-line message (no pages, or lz4 failing), *c freed. */
int corpus_load_cmd(const char *cmd, const char *const *paths, int npaths, size_t target,
		    struct corpus *c);
void corpus_free(struct corpus *c);
/* What was read, for a report: a few lines on f ("  /usr/lib: 312 files,
 * 61 MiB", then the first and the last file read there), each starting
 * with prefix. */
void corpus_print(const struct corpus *c, FILE *f, const char *prefix);
struct json;
/* the same as "corpus": {"defaults", "sources": [...], "files": [...]} */
void corpus_json(const struct corpus *c, struct json *j);

#endif
