/* Helpers for the store's stress tests: 4 KiB pages that name themselves.
 * A page's first word is a cookie (writer, slot, version, kind) and every
 * other word is derived from it, so that a reader holding only the bytes
 * can tell which write it sees, and whether the page is whole. */
#ifndef ZM_STORETEST_H
#define ZM_STORETEST_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include <zmem/store.h>

#define ST_PS 4096
#define ST_WORDS (ST_PS / 8)

/* writer+1 in bits 56..63, slot in 32..55, version in 2..31, kind in 0..1 */
static inline uint64_t st_cookie(unsigned tid, uint64_t idx, uint64_t version, unsigned kind)
{
	return ((uint64_t)(tid + 1) << 56) | (idx << 32) | ((version & 0x3FFFFFFF) << 2) | kind;
}

/* Kinds 0..2 are compressible, incompressible (huge) and same-filled;
 * the fourth is each suite's own. */
enum st_kind3 {
	ST_QUARTER_RANDOM,  /* one word in four random, the rest patterned */
	ST_LZ4_HUGE,        /* bytes of 32 values: huge for lz4, not for zstd */
};

/* Word i of the page of cookie c. */
static inline uint64_t st_word(uint64_t c, size_t i, enum st_kind3 k3)
{
	if (i == 0)
		return c;
	switch (c & 3) {
	case 0: return c ^ ((i % 13) * 0x0101010101010101ull);
	case 1: return mix64(c + i);
	case 2: return c;
	default:
		return k3 == ST_QUARTER_RANDOM ? (i % 4 ? c + (i & 0xF0) : mix64(c ^ i)) :
		       mix64(c ^ (i << 20)) & 0x1F1F1F1F1F1F1F1Full;
	}
}

/* The page of cookie c. */
static inline void st_page(uint64_t *w, uint64_t c, enum st_kind3 k3)
{
	for (size_t i = 0; i < ST_WORDS; i++)
		w[i] = st_word(c, i, k3);
}

/* 1 if w is the whole page of its own cookie. */
static inline int st_page_whole(const uint64_t *w, enum st_kind3 k3)
{
	for (size_t i = 1; i < ST_WORDS; i++)
		if (w[i] != st_word(w[0], i, k3))
			return 0;
	return 1;
}

/* The cookie's part of checking a page read from slot idx: 0 if the page
 * is zeros; 1 if its cookie names slot idx and a writer below nt that
 * began that version (published[writer], read atomically); else -1 (not
 * zeros, yet no cookie), -2 (another slot, or no such writer), -3 (a
 * version its writer never began). */
static inline int st_check_cookie(const uint64_t *w, uint64_t idx, unsigned nt,
				  const uint64_t *published)
{
	uint64_t c = w[0];
	unsigned tid;

	if (c == 0) {
		for (size_t i = 0; i < ST_WORDS; i++)
			if (w[i])
				return -1;
		return 0;
	}
	tid = (unsigned)(c >> 56) - 1;
	if (tid >= nt || ((c >> 32) & 0xFFFFFF) != idx)
		return -2;
	if (((c & 0xFFFFFFFF) >> 2) > __atomic_load_n(&published[tid], __ATOMIC_ACQUIRE))
		return -3;
	return 1;
}

/* The store's statistics (asserting the call succeeds). */
static inline struct zm_store_stats stats(struct zm_store *s)
{
	struct zm_store_stats st;

	assert_int_equal(zm_store_stats(s, &st), 0);
	return st;
}

/* What slot idx holds now (ZM_STORE_SLOT_*). */
static inline unsigned kind_of(struct zm_store *s, uint64_t idx)
{
	unsigned kind = 99;

	assert_int_equal(zm_store_slot_info(s, idx, &kind, NULL, NULL), 0);
	return kind;
}

/* A directory for backing files where O_DIRECT works (the store opens its
 * file so there): TMPDIR, else /var/tmp, else /tmp; TMPDIR (or /tmp) with
 * a note printed once when none takes it, the store then falling back
 * (*works false). */
static inline const char *st_direct_probe(bool *works)
{
	static const char *dir;
	static bool ok;
	const char *env = getenv("TMPDIR");
	const char *cand[] = { env && *env ? env : "/tmp", "/var/tmp", "/tmp" };
	char path[300];
	void *buf;

	*works = ok;
	if (dir)
		return dir;
	if (posix_memalign(&buf, 4096, 4096))
		return cand[0];
	memset(buf, 0, 4096);
	for (size_t k = 0; k < sizeof(cand) / sizeof(cand[0]) && !dir; k++) {
		int fd;

		snprintf(path, sizeof(path), "%s/zmem-odirect-XXXXXX", cand[k]);
		fd = mkstemp(path);
		if (fd < 0)
			continue;
		unlink(path);
		if (!fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT) &&
		    pwrite(fd, buf, 4096, 0) == 4096)
			dir = cand[k];
		close(fd);
	}
	free(buf);
	*works = ok = dir != NULL;
	if (!dir) {
		dir = cand[0];
		printf("note: no directory takes O_DIRECT: backing files in %s, buffered\n", dir);
	}
	return dir;
}

static inline const char *st_direct_dir(void)
{
	bool works;

	return st_direct_probe(&works);
}

#endif
