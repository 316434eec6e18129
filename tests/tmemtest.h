/* Helpers for the tmem tests: values made from a cookie at a chosen
 * compressibility, so that a test (or a model) keeps only the cookie and
 * the length of each value, and any wrong byte is found; and the checks
 * every statistics snapshot must pass. */
#ifndef ZM_TMEMTEST_H
#define ZM_TMEMTEST_H

#include "testutil.h"
#include <zmem/tmem.h>

/*
 * A value of len bytes from a cookie.  The cookie's low 4 bits are the
 * noise, 0..8: that many eighths of the value after its header are
 * random bytes (lz4 cannot shrink them), the rest an 8-byte pattern
 * (nearly free to compress).  Bytes 0..7 are the cookie, 8..15 the length
 * (as far as len reaches), so a reader that only has the bytes can tell
 * which value it holds.
 */
#define TT_NOISE(c) ((unsigned)((c) & 15) > 8 ? 8u : (unsigned)((c) & 15))

static inline uint8_t tt_byte(uint64_t cookie, size_t len, size_t i)
{
	size_t noisy = 16 + (len > 16 ? (len - 16) * TT_NOISE(cookie) / 8 : 0);

	if (i < 8)
		return (uint8_t)(cookie >> (i * 8));
	if (i < 16)
		return (uint8_t)((uint64_t)len >> ((i - 8) * 8));
	if (i < noisy)
		return (uint8_t)(mix64(cookie ^ (i / 8 * 0x9E3779B97F4A7C15ull)) >> (i % 8 * 8));
	return (uint8_t)((cookie >> ((i & 7) * 8)) ^ 0x5a);
}

static inline void tt_fill(void *buf, size_t len, uint64_t cookie)
{
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = tt_byte(cookie, len, i);
}

/* 0 if buf holds exactly the value of (cookie, len); else the index of
 * the first wrong byte + 1. */
static inline size_t tt_diff(const void *buf, size_t len, uint64_t cookie)
{
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != tt_byte(cookie, len, i))
			return i + 1;
	return 0;
}

/* A cookie with the given noise. */
static inline uint64_t tt_cookie(uint64_t x, unsigned noise)
{
	return (mix64(x) & ~(uint64_t)15) | (noise > 8 ? 8 : noise);
}

static inline uint64_t tt_hist_sum(const struct zm_tmem_stats *st)
{
	uint64_t n = 0;

	for (int i = 0; i < ZM_TMEM_HIST_BUCKETS; i++)
		n += st->hist[i];
	return n;
}

/* The snapshot of one pool (or the instance, pool 0); fails the test
 * unless its counters agree with each other. */
static inline void tt_stats(struct zm_tmem *t, int pool, struct zm_tmem_stats *st)
{
	memset(st, 0xa5, sizeof(*st));
	assert_int_equal(zm_tmem_stats(t, pool, st), 0);
	assert_true(st->hits + st->misses == st->gets);
	assert_true(st->puts_stored <= st->puts);
	assert_true(st->dropped <= st->puts - st->puts_stored);
	assert_true(st->refused_zsize + st->refused_mean + st->refused_share + st->refused_full <=
		    st->puts - st->puts_stored);
	assert_true(tt_hist_sum(st) == st->ephemeral_pages + st->persistent_pages);
	assert_true(st->orig_bytes >= st->ephemeral_pages + st->persistent_pages);
	assert_true((st->ephemeral_pages + st->persistent_pages == 0) == (st->orig_bytes == 0));
	if (st->pool_bytes > st->budget_bytes)
		fail_msg("%s: pool_bytes %llu above the budget, %llu (%llu pages stored)",
			 st->allocator, (unsigned long long)st->pool_bytes,
			 (unsigned long long)st->budget_bytes,
			 (unsigned long long)(st->ephemeral_pages + st->persistent_pages));
	assert_non_null(st->allocator);
	assert_non_null(st->evicts);
}

#endif
