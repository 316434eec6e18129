/*
 * Unit tests of tmem (include/zmem/tmem.h): bad input to every call,
 * round trips of short and whole values on every backend, replacing a
 * key, failed puts removing the old page, exclusive gets, the flushes and
 * their counts, the policy (max_zsize, max_mean_zsize, the persistent
 * share), eviction under a small budget (persistent pages never evicted,
 * ephemeral ones evicted for persistent puts, gets never wrong), the
 * statistics, and zm_pool_unit (pool.h), which eviction is built on.
 * zm_tmem_check() runs after every phase.
 *
 *   test_tmem [--seed N]
 */
#define ZMEM_ADVANCED  /* tests reach the advanced tier too */
#include <errno.h>
#include <limits.h>

#include "tmem/tmem_internal.h"  /* test_corrupt reaches a page's object */
#include "tmemtest.h"
#include <zmem/pool.h>
#include <zmem/tmem.h>

#define PS 4096
#define MIB (1u << 20)

static uint64_t g_seed;
static uint8_t g_buf[65536];

static const char *const want_backends[] = { "zsmalloc", "zbud", "xvmalloc", "xcfmalloc",
					     "malloc" };
#define NBACKENDS (sizeof(want_backends) / sizeof(want_backends[0]))

static struct zm_tmem *mk(const char *alloc, size_t budget, unsigned pct, size_t ps)
{
	struct zm_tmem_config c = { .budget_bytes = budget, .allocator = alloc,
				    .persistent_pct = pct, .page_size = ps };
	struct zm_tmem *t = NULL;
	int rc = zm_tmem_create(&c, &t);

	if (rc || !t)
		fail_msg("zm_tmem_create(%s, budget %zu, pct %u, page %zu): %d", alloc, budget,
			 pct, ps, rc);
	return t;
}

static int mkpool_sized(struct zm_tmem *t, enum zm_tmem_kind kind, int excl, size_t ps)
{
	struct zm_tmem_pool_config c = { .kind = kind, .exclusive_gets = excl, .page_size = ps };
	int id = zm_tmem_pool_create(t, &c);

	if (id <= 0)
		fail_msg("zm_tmem_pool_create(kind %d, excl %d, page %zu): %d", kind, excl, ps, id);
	return id;
}

static int mkpool(struct zm_tmem *t, enum zm_tmem_kind kind, int excl)
{
	return mkpool_sized(t, kind, excl, 0);
}

static void done(struct zm_tmem *t)
{
	assert_int_equal(zm_tmem_check(t), 0);
	zm_tmem_destroy(t);
}

static int put(struct zm_tmem *t, int pool, uint64_t oid, uint32_t idx, uint64_t cookie,
	       size_t len)
{
	/* a length above the buffer is for a put that must be refused */
	tt_fill(g_buf, len < sizeof(g_buf) ? len : sizeof(g_buf), cookie);
	return zm_tmem_put(t, pool, oid, idx, g_buf, len);
}

static void put_ok(struct zm_tmem *t, int pool, uint64_t oid, uint32_t idx, uint64_t cookie,
		   size_t len)
{
	int rc = put(t, pool, oid, idx, cookie, len);

	if (rc)
		fail_msg("put(pool %d, %llu, %u, noise %u, len %zu): %d", pool,
			 (unsigned long long)oid, idx, TT_NOISE(cookie), len, rc);
}

static void expect(struct zm_tmem *t, int pool, uint64_t oid, uint32_t idx, uint64_t cookie,
		   size_t len)
{
	int rc;
	size_t d;

	memset(g_buf, 0xee, len < sizeof(g_buf) ? len + 1 : len);
	rc = zm_tmem_get(t, pool, oid, idx, g_buf, sizeof(g_buf));
	if (rc != (int)len)
		fail_msg("get(pool %d, %llu, %u): %d, want %zu", pool, (unsigned long long)oid, idx,
			 rc, len);
	d = tt_diff(g_buf, len, cookie);
	if (d)
		fail_msg("get(pool %d, %llu, %u): wrong byte %zu of %zu", pool,
			 (unsigned long long)oid, idx, d - 1, len);
}

static void expect_miss(struct zm_tmem *t, int pool, uint64_t oid, uint32_t idx)
{
	int rc = zm_tmem_get(t, pool, oid, idx, g_buf, sizeof(g_buf));

	if (rc != -ENOENT)
		fail_msg("get(pool %d, %llu, %u): %d, want -ENOENT", pool,
			 (unsigned long long)oid, idx, rc);
}

/* zm_pool_backends() lists the five the tests run over. */
static void test_backends(void **state)
{
	for (size_t i = 0; i < NBACKENDS; i++) {
		const char *const *b = zm_pool_backends();

		while (*b && strcmp(*b, want_backends[i]))
			b++;
		assert_non_null(*b);
	}
}

/* ---- bad input ------------------------------------------------------------ */

static void test_create_bad(void **state)
{
	struct zm_tmem_config c;
	struct zm_tmem_stats st;
	struct zm_tmem *t = NULL;
	struct {
		struct zm_tmem_config c;
		uint64_t extra[4];
	} big;
	static const size_t bad_ps[] = { 1, 2048, 3000, 4097, 6144, 131072 };

	assert_int_equal(zm_tmem_create(NULL, NULL), -EINVAL);
	c = (struct zm_tmem_config){ 0 };
	assert_int_equal(zm_tmem_create(&c, NULL), -EINVAL);
	c = (struct zm_tmem_config){ .allocator = "no-such-allocator" };
	assert_int_equal(zm_tmem_create(&c, &t), -EINVAL);
	c = (struct zm_tmem_config){ .codec = "no-such-codec" };
	assert_int_equal(zm_tmem_create(&c, &t), -EINVAL);
	for (size_t i = 0; i < sizeof(bad_ps) / sizeof(bad_ps[0]); i++) {
		c = (struct zm_tmem_config){ .page_size = bad_ps[i] };
		if (zm_tmem_create(&c, &t) != -EINVAL)
			fail_msg("page size %zu accepted", bad_ps[i]);
	}
	c = (struct zm_tmem_config){ .persistent_pct = 101 };
	assert_int_equal(zm_tmem_create(&c, &t), -EINVAL);
	c = (struct zm_tmem_config){ 0 };
	assert_int_equal(zm_tmem_create_sized(&c, 4, &t), -EINVAL);
	memset(&big, 0, sizeof(big));
	big.extra[1] = 1;
	assert_int_equal(zm_tmem_create_sized(&big.c, sizeof(big), &t), -E2BIG);
	big.extra[1] = 0;
	t = NULL;
	assert_int_equal(zm_tmem_create_sized(&big.c, sizeof(big), &t), 0);
	assert_non_null(t);
	zm_tmem_destroy(t);

	/* NULL: the defaults */
	t = NULL;
	assert_int_equal(zm_tmem_create(NULL, &t), 0);
	assert_non_null(t);
	tt_stats(t, 0, &st);
	assert_int_equal(st.budget_bytes, 64u << 20);
	assert_string_equal(st.allocator, "zsmalloc");
	assert_string_equal(st.evicts, "zspage");
	assert_int_equal(st.ephemeral_pages + st.persistent_pages, 0);
	done(t);
	zm_tmem_destroy(NULL);

	/* every page size of the range, and the codecs by name and level */
	for (size_t ps = ZM_PAGE_SIZE_MIN; ps <= ZM_PAGE_SIZE_MAX; ps *= 2) {
		t = mk("zsmalloc", 0, 0, ps);
		done(t);
	}
	c = (struct zm_tmem_config){ .codec = "zstd:3" };
	assert_int_equal(zm_tmem_create(&c, &t), 0);
	zm_tmem_destroy(t);
	c = (struct zm_tmem_config){ .codec = "zstd", .codec_level = 5, .persistent_pct = 100 };
	assert_int_equal(zm_tmem_create(&c, &t), 0);
	zm_tmem_destroy(t);
}

static void test_pool_create_bad(void **state)
{
	struct zm_tmem *t = mk("zsmalloc", 0, 0, 2 * PS);
	struct zm_tmem_pool_config c;
	static const int bad_kinds[] = { 0, 3, -1, 100, INT_MIN };
	struct {
		struct zm_tmem_pool_config c;
		uint64_t extra[4];
	} big;
	int id;

	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_EPHEMERAL };
	assert_int_equal(zm_tmem_pool_create(NULL, &c), -EINVAL);
	assert_int_equal(zm_tmem_pool_create(t, NULL), -EINVAL);  /* kind is required */
	for (size_t i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++) {
		c = (struct zm_tmem_pool_config){ .kind = (enum zm_tmem_kind)bad_kinds[i] };
		if (zm_tmem_pool_create(t, &c) != -EINVAL)
			fail_msg("kind %d accepted", bad_kinds[i]);
	}
	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_PERSISTENT, .exclusive_gets = 1 };
	assert_int_equal(zm_tmem_pool_create(t, &c), -EINVAL);
	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_EPHEMERAL, .page_size = 4 * PS };
	assert_int_equal(zm_tmem_pool_create(t, &c), -EINVAL);
	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_PERSISTENT, .page_size = 4 * PS };
	assert_int_equal(zm_tmem_pool_create(t, &c), -EINVAL);
	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_EPHEMERAL };
	assert_int_equal(zm_tmem_pool_create_sized(t, &c, 4), -EINVAL);
	memset(&big, 0, sizeof(big));
	big.c.kind = ZM_TMEM_PERSISTENT;
	big.extra[2] = 7;
	assert_int_equal(zm_tmem_pool_create_sized(t, &big.c, sizeof(big)), -E2BIG);
	big.extra[2] = 0;
	id = zm_tmem_pool_create_sized(t, &big.c, sizeof(big));
	assert_true(id > 0);
	assert_int_equal(zm_tmem_pool_destroy(t, id), 0);

	/* a pool smaller than the instance's page: puts up to its size */
	id = mkpool_sized(t, ZM_TMEM_PERSISTENT, 0, PS);
	assert_int_equal(put(t, id, 1, 1, tt_cookie(1, 0), PS + 1), -EINVAL);
	assert_int_equal(put(t, id, 1, 1, tt_cookie(1, 0), 2 * PS), -EINVAL);
	put_ok(t, id, 1, 1, tt_cookie(2, 1), PS);
	expect(t, id, 1, 1, tt_cookie(2, 1), PS);
	/* the instance's own page size is the default and the largest */
	id = mkpool_sized(t, ZM_TMEM_EPHEMERAL, 1, 2 * PS);
	put_ok(t, id, 1, 1, tt_cookie(3, 2), 2 * PS);
	expect(t, id, 1, 1, tt_cookie(3, 2), 2 * PS);
	id = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	put_ok(t, id, 1, 1, tt_cookie(4, 2), 2 * PS);
	assert_int_equal(put(t, id, 1, 1, tt_cookie(4, 2), 2 * PS + 1), -EINVAL);
	expect(t, id, 1, 1, tt_cookie(4, 2), 2 * PS);
	done(t);
}

/* Pools with pages smaller than the instance's: values up to their page,
 * the policy's defaults of their page. */
static void test_small_pool_pages(void **state)
{
	struct zm_tmem *t = mk("zsmalloc", 0, 0, 0);

	for (size_t ps = 1024; ps <= PS; ps *= 2) {
		for (int k = 0; k < 2; k++) {
			int id = mkpool_sized(t, k ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL, 0, ps);
			struct zm_tmem_stats st;

			put_ok(t, id, 1, 1, tt_cookie(ps, 0), ps);
			put_ok(t, id, 1, 2, tt_cookie(ps + 1, 8), ps / 2);
			put_ok(t, id, 1, 3, tt_cookie(ps + 2, 5), ps - 1);
			assert_int_equal(put(t, id, 1, 4, tt_cookie(ps, 0), ps + 1), -EINVAL);
			/* 7/8 of this pool's page, not of the instance's */
			assert_int_equal(put(t, id, 1, 5, tt_cookie(ps + 3, 8), ps), -E2BIG);
			expect(t, id, 1, 1, tt_cookie(ps, 0), ps);
			expect(t, id, 1, 2, tt_cookie(ps + 1, 8), ps / 2);
			expect(t, id, 1, 3, tt_cookie(ps + 2, 5), ps - 1);
			expect_miss(t, id, 1, 5);
			tt_stats(t, id, &st);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 3);
			assert_int_equal(st.refused_zsize, 1);
		}
	}
	done(t);
}

/* ZM_TMEM_MAX_POOLS pools, then -EMFILE; a destroyed pool's id stays
 * refused and its place can be taken by a new pool. */
static void test_too_many_pools(void **state)
{
	struct zm_tmem *t = mk("zbud", 0, 0, 0);
	struct zm_tmem_pool_config c = { .kind = ZM_TMEM_EPHEMERAL };
	int ids[ZM_TMEM_MAX_POOLS], id;

	for (int i = 0; i < ZM_TMEM_MAX_POOLS; i++) {
		ids[i] = mkpool(t, i & 1 ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL, i % 4 == 2);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(ids[i], ids[j]);
		put_ok(t, ids[i], 7, (uint32_t)i, tt_cookie((uint64_t)i, 1), 100 + (size_t)i);
	}
	assert_int_equal(zm_tmem_pool_create(t, &c), -EMFILE);
	c.kind = ZM_TMEM_PERSISTENT;
	assert_int_equal(zm_tmem_pool_create(t, &c), -EMFILE);
	assert_int_equal(zm_tmem_check(t), 0);
	assert_int_equal(zm_tmem_pool_destroy(t, ids[5]), 0);
	id = zm_tmem_pool_create(t, &c);
	assert_true(id > 0);
	for (int i = 0; i < ZM_TMEM_MAX_POOLS; i++)
		assert_int_not_equal(id, ids[i]);
	assert_int_equal(zm_tmem_pool_create(t, &c), -EMFILE);
	/* the destroyed id is refused by every call */
	assert_int_equal(put(t, ids[5], 7, 5, tt_cookie(5, 1), 105), -EINVAL);
	assert_int_equal(zm_tmem_get(t, ids[5], 7, 5, g_buf, PS), -EINVAL);
	assert_int_equal(zm_tmem_pool_destroy(t, ids[5]), -EINVAL);
	/* the others kept their pages */
	for (int i = 0; i < ZM_TMEM_MAX_POOLS; i++) {
		if (i == 5)
			continue;
		expect(t, ids[i], 7, (uint32_t)i, tt_cookie((uint64_t)i, 1), 100 + (size_t)i);
	}
	done(t);
}

/* Every call with a NULL instance or buffer, a bad pool id, a bad length:
 * -EINVAL and nothing else happens. */
static void test_bad_calls(void **state)
{
	struct zm_tmem *t = mk("zsmalloc", 0, 0, 0);
	struct zm_tmem_stats st;
	int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	int gone = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	int bad[] = { 0, -1, -1000, INT_MIN, INT_MAX, ZM_TMEM_MAX_POOLS, ZM_TMEM_MAX_POOLS + 1,
		      1000, 0 };
	const size_t nbad = sizeof(bad) / sizeof(bad[0]);
	uint8_t small[8];

	bad[nbad - 1] = gone;
	put_ok(t, gone, 1, 1, tt_cookie(9, 1), 10);
	assert_int_equal(zm_tmem_pool_destroy(t, gone), 0);
	put_ok(t, e, 1, 2, tt_cookie(1, 1), 1000);
	put_ok(t, p, 1, 2, tt_cookie(2, 1), 1000);

	/* NULL instance */
	assert_int_equal(zm_tmem_put(NULL, e, 1, 2, g_buf, 10), -EINVAL);
	assert_int_equal(zm_tmem_get(NULL, e, 1, 2, g_buf, PS), -EINVAL);
	assert_int_equal(zm_tmem_flush_page(NULL, e, 1, 2), -EINVAL);
	assert_int_equal(zm_tmem_flush_object(NULL, e, 1), -EINVAL);
	assert_int_equal(zm_tmem_flush_pool(NULL, e), -EINVAL);
	assert_int_equal(zm_tmem_pool_destroy(NULL, e), -EINVAL);
	assert_int_equal(zm_tmem_stats(NULL, 0, &st), -EINVAL);
	assert_int_equal(zm_tmem_check(NULL), -EINVAL);

	/* bad pool ids: 0 (the instance, for stats only), negative, never
	 * made, beyond the table, destroyed */
	for (size_t i = 0; i < nbad; i++) {
		int id = bad[i];

		if (id == e || id == p)
			continue;
		tt_fill(g_buf, 10, 1);
		if (zm_tmem_put(t, id, 1, 2, g_buf, 10) != -EINVAL)
			fail_msg("put to pool %d not refused", id);
		if (zm_tmem_get(t, id, 1, 2, g_buf, PS) != -EINVAL)
			fail_msg("get from pool %d not refused", id);
		if (zm_tmem_flush_page(t, id, 1, 2) != -EINVAL)
			fail_msg("flush_page of pool %d not refused", id);
		if (zm_tmem_flush_object(t, id, 1) != -EINVAL)
			fail_msg("flush_object of pool %d not refused", id);
		if (zm_tmem_flush_pool(t, id) != -EINVAL)
			fail_msg("flush_pool of pool %d not refused", id);
		if (zm_tmem_pool_destroy(t, id) != -EINVAL)
			fail_msg("pool_destroy of pool %d not refused", id);
		if (id && zm_tmem_stats(t, id, &st) != -EINVAL)
			fail_msg("stats of pool %d not refused", id);
	}

	/* NULL buffers, lengths 0 and above the page size */
	for (int k = 0; k < 2; k++) {
		int id = k ? p : e;

		assert_int_equal(zm_tmem_put(t, id, 1, 3, NULL, 10), -EINVAL);
		assert_int_equal(zm_tmem_put(t, id, 1, 3, g_buf, 0), -EINVAL);
		assert_int_equal(zm_tmem_put(t, id, 1, 3, g_buf, PS + 1), -EINVAL);
		assert_int_equal(zm_tmem_put(t, id, 1, 3, g_buf, SIZE_MAX), -EINVAL);
		assert_int_equal(zm_tmem_get(t, id, 1, 2, NULL, PS), -EINVAL);
		expect_miss(t, id, 1, 3);
		/* a bad put to a key that holds a page: the old page, or
		 * nothing (a failed put removes it), never other bytes */
		for (int j = 0; j < 3; j++) {
			static const size_t blen[] = { 10, 0, PS + 1 };
			int rc;

			assert_int_equal(zm_tmem_put(t, id, 1, 2, j ? g_buf : NULL, blen[j]),
					 -EINVAL);
			rc = zm_tmem_get(t, id, 1, 2, g_buf, PS);
			if (rc == -ENOENT)
				put_ok(t, id, 1, 2, tt_cookie((uint64_t)k + 1, 1), 1000);
			else
				expect(t, id, 1, 2, tt_cookie((uint64_t)k + 1, 1), 1000);
		}
		/* cap 0 and too small: the page stays */
		{
			int rc = zm_tmem_get(t, id, 1, 2, small, 0);

			if (rc != -EINVAL && rc != -ENOSPC)
				fail_msg("get with cap 0: %d", rc);
		}
		assert_int_equal(zm_tmem_get(t, id, 1, 2, small, sizeof(small)), -ENOSPC);
		assert_int_equal(zm_tmem_get(t, id, 1, 2, g_buf, 999), -ENOSPC);
		/* a cap above the page size is fine */
		expect(t, id, 1, 2, tt_cookie((uint64_t)k + 1, 1), 1000);
	}
	assert_int_equal(zm_tmem_stats(t, 0, NULL), -EINVAL);
	assert_int_equal(zm_tmem_stats(t, e, NULL), -EINVAL);
	assert_int_equal(zm_tmem_stats_sized(t, 0, &st, 4), -EINVAL);
	assert_int_equal(zm_tmem_flush_page(t, e, 1, 3), -ENOENT);
	assert_int_equal(zm_tmem_flush_page(t, p, 1, 3), -ENOENT);
	assert_int_equal(zm_tmem_flush_object(t, e, 99), 0);
	assert_int_equal(zm_tmem_flush_object(t, p, 99), 0);
	tt_stats(t, 0, &st);
	assert_int_equal(st.ephemeral_pages, 1);
	assert_int_equal(st.persistent_pages, 1);
	assert_int_equal(st.orig_bytes, 2000);
	done(t);
}

/* A stats struct larger than the library's: the tail comes back zeroed. */
static void test_stats_sized(void **state)
{
	struct zm_tmem *t = mk("zbud", 0, 0, 0);
	struct {
		struct zm_tmem_stats st;
		uint64_t extra[8];
	} big;
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);

	put_ok(t, p, 3, 4, tt_cookie(1, 2), 3000);
	memset(&big, 0xa5, sizeof(big));
	assert_int_equal(zm_tmem_stats_sized(t, p, &big.st, sizeof(big)), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(big.extra[i], 0);
	assert_int_equal(big.st.persistent_pages, 1);
	assert_int_equal(big.st.orig_bytes, 3000);
	assert_int_equal(big.st.puts, 1);
	assert_int_equal(big.st.puts_stored, 1);
	assert_string_equal(big.st.allocator, "zbud");
	assert_string_equal(big.st.evicts, "page");
	done(t);
}

/* ---- round trips ---------------------------------------------------------- */

static const size_t g_lens[] = { 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 63, 100, 255, 511,
				 1000, 1023, 1025, 2047, 2049, 3001, 4000, 4095, 4096 };
#define NLENS (sizeof(g_lens) / sizeof(g_lens[0]))

struct rec {
	uint64_t oid;
	uint32_t idx;
	uint64_t cookie;
	size_t len;
};

static void roundtrip(const char *backend, size_t ps)
{
	struct zm_tmem *t = mk(backend, 0, 0, ps);
	struct zm_tmem_stats st, all;
	static struct rec r[2][4 * NLENS + 8];
	size_t n[2] = { 0, 0 };
	uint64_t bytes[2] = { 0, 0 };
	int ids[2];
	static const unsigned noises[] = { 0, 3, 8 };

	ids[0] = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	ids[1] = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	tt_stats(t, 0, &all);
	assert_string_equal(all.allocator, backend);
	assert_string_equal(all.evicts, !strcmp(backend, "zbud") ? "page" :
					!strcmp(backend, "zsmalloc") ? "zspage" : "object");
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < NLENS + 2; i++) {
			size_t len = i < NLENS ? g_lens[i] : i == NLENS ? ps - 1 : ps;

			for (size_t j = 0; j < 3; j++) {
				struct rec *x = &r[k][n[k]];

				/* random data must fit under max_zsize (7/8) */
				if (noises[j] == 8 && len + 64 > ps * 7 / 8)
					continue;
				*x = (struct rec){ 100 + j, (uint32_t)(i * 300), 0, len };
				x->cookie = tt_cookie(i * 16 + j + (uint64_t)k * 1000, noises[j]);
				put_ok(t, ids[k], x->oid, x->idx, x->cookie, len);
				bytes[k] += len;
				n[k]++;
			}
		}
	}
	assert_int_equal(zm_tmem_check(t), 0);
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < n[k]; i++) {
			struct rec *x = &r[k][i];

			expect(t, ids[k], x->oid, x->idx, x->cookie, x->len);
			/* exactly the length fits; one byte less does not */
			assert_int_equal(zm_tmem_get(t, ids[k], x->oid, x->idx, g_buf, x->len),
					 (int)x->len);
			assert_int_equal(tt_diff(g_buf, x->len, x->cookie), 0);
			if (x->len > 1)
				assert_int_equal(zm_tmem_get(t, ids[k], x->oid, x->idx, g_buf,
							     x->len - 1), -ENOSPC);
			expect(t, ids[k], x->oid, x->idx, x->cookie, x->len);
		}
		tt_stats(t, ids[k], &st);
		assert_int_equal(k ? st.persistent_pages : st.ephemeral_pages, n[k]);
		assert_int_equal(k ? st.ephemeral_pages : st.persistent_pages, 0);
		assert_int_equal(st.orig_bytes, bytes[k]);
		assert_int_equal(st.puts, n[k]);
		assert_int_equal(st.puts_stored, n[k]);
		assert_int_equal(st.hits, 3 * n[k]);
		assert_int_equal(st.evicted_objects, 0);
		assert_int_equal(st.dropped, 0);
		assert_true(st.compr_bytes > 0 && st.compr_bytes < bytes[k]);
	}
	tt_stats(t, 0, &all);
	assert_int_equal(all.ephemeral_pages, n[0]);
	assert_int_equal(all.persistent_pages, n[1]);
	assert_int_equal(all.orig_bytes, bytes[0] + bytes[1]);
	assert_true(all.pool_pages > 0 && all.pool_bytes > 0 && all.meta_bytes > 0);
	/* a record each outside the budget, at least */
	assert_true(all.meta_bytes >= 40 * (n[0] + n[1]));
	assert_int_equal(zm_tmem_check(t), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(zm_tmem_flush_pool(t, ids[k]), (long)n[k]);
	tt_stats(t, 0, &all);
	assert_int_equal(all.ephemeral_pages + all.persistent_pages, 0);
	assert_int_equal(all.orig_bytes, 0);
	assert_int_equal(all.compr_bytes, 0);
	for (int k = 0; k < 2; k++)
		expect_miss(t, ids[k], 100, 0);
	done(t);
}

static void test_roundtrip(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		roundtrip(want_backends[b], PS);
		roundtrip(want_backends[b], 4 * PS);
	}
}

/* Other codecs than the default lz4 give the same bytes back. */
static void test_codecs(void **state)
{
	static const char *const codecs[] = { "zstd", "zstd:1", "none", "lz4", "lzo" };

	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++) {
		struct zm_tmem_config c = { .codec = codecs[i] };
		struct zm_tmem *t = NULL;
		int p, e, rc;

		rc = zm_tmem_create(&c, &t);
		if (rc && !strcmp(codecs[i], "lzo"))
			continue;   /* a build without liblzo2 */
		assert_int_equal(rc, 0);
		p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
		e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
		for (size_t j = 0; j < NLENS; j++) {
			/* "none" stores pages at their length: at most 7/8 */
			if (g_lens[j] > PS * 7 / 8)
				continue;
			put_ok(t, p, 1, (uint32_t)j, tt_cookie(j, j % 9), g_lens[j]);
			put_ok(t, e, 1, (uint32_t)j, tt_cookie(j + 50, j % 9), g_lens[j]);
		}
		for (size_t j = 0; j < NLENS; j++) {
			if (g_lens[j] > PS * 7 / 8)
				continue;
			expect(t, p, 1, (uint32_t)j, tt_cookie(j, j % 9), g_lens[j]);
			expect(t, e, 1, (uint32_t)j, tt_cookie(j + 50, j % 9), g_lens[j]);
		}
		if (!strcmp(codecs[i], "none"))
			assert_int_equal(put(t, p, 1, 1000, tt_cookie(1, 0), PS), -E2BIG);
		done(t);
	}
}

/* ---- replacing, failed puts, exclusive gets ------------------------------ */

static void test_replace(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		struct zm_tmem *t = mk(want_backends[b], 0, 0, 0);
		struct zm_tmem_stats st;

		for (int k = 0; k < 2; k++) {
			int id = mkpool(t, k ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL, 0);

			put_ok(t, id, 5, 6, tt_cookie(1, 4), 3000);
			put_ok(t, id, 5, 7, tt_cookie(9, 4), 333);
			put_ok(t, id, 5, 6, tt_cookie(2, 1), 10);
			expect(t, id, 5, 6, tt_cookie(2, 1), 10);
			tt_stats(t, id, &st);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 2);
			assert_int_equal(st.orig_bytes, 343);
			put_ok(t, id, 5, 6, tt_cookie(3, 2), PS);
			put_ok(t, id, 5, 6, tt_cookie(4, 0), PS);
			expect(t, id, 5, 6, tt_cookie(4, 0), PS);
			expect(t, id, 5, 7, tt_cookie(9, 4), 333);
			tt_stats(t, id, &st);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 2);
			assert_int_equal(st.orig_bytes, PS + 333);
			assert_int_equal(st.puts, 5);
			assert_int_equal(st.puts_stored, 5);
			assert_int_equal(zm_tmem_check(t), 0);
		}
		done(t);
	}
}

/* A put that fails removes the page its key held; the other keys keep
 * theirs. */
static void test_failed_put(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		struct zm_tmem *t = mk(want_backends[b], 0, 0, 0);
		struct zm_tmem_stats st;

		for (int k = 0; k < 2; k++) {
			int id = mkpool(t, k ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL, 0);

			put_ok(t, id, 1, 1, tt_cookie(1, 0), PS);
			put_ok(t, id, 1, 2, tt_cookie(2, 0), PS);
			/* an incompressible page: above max_zsize */
			assert_int_equal(put(t, id, 1, 1, tt_cookie(3, 8), PS), -E2BIG);
			expect_miss(t, id, 1, 1);
			assert_int_equal(zm_tmem_flush_page(t, id, 1, 1), -ENOENT);
			expect(t, id, 1, 2, tt_cookie(2, 0), PS);
			/* and one to a key that held nothing */
			assert_int_equal(put(t, id, 1, 3, tt_cookie(4, 8), PS), -E2BIG);
			expect_miss(t, id, 1, 3);
			tt_stats(t, id, &st);
			assert_int_equal(st.refused_zsize, 2);
			assert_int_equal(st.puts, 4);
			assert_int_equal(st.puts_stored, 2);
			assert_int_equal(st.dropped, k ? 0 : 2);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 1);
			assert_int_equal(st.orig_bytes, PS);
			assert_int_equal(zm_tmem_check(t), 0);
		}
		done(t);
	}
}

/* max_zsize and max_mean_zsize as set by the pool's config. */
static void test_policy(void **state)
{
	struct zm_tmem *t = mk("zsmalloc", 0, 0, 0);
	struct zm_tmem_pool_config c = { .kind = ZM_TMEM_PERSISTENT, .max_zsize = 300 };
	struct zm_tmem_stats st;
	int id = zm_tmem_pool_create(t, &c);
	int rc;

	assert_true(id > 0);
	put_ok(t, id, 1, 1, tt_cookie(1, 0), PS);           /* compresses to little */
	assert_int_equal(put(t, id, 1, 2, tt_cookie(2, 1), PS), -E2BIG);  /* 500 random */
	put_ok(t, id, 1, 2, tt_cookie(3, 8), 200);          /* random, but short */
	expect(t, id, 1, 2, tt_cookie(3, 8), 200);
	tt_stats(t, id, &st);
	assert_int_equal(st.refused_zsize, 1);
	assert_int_equal(st.refused_mean, 0);

	/* the mean: refused while the pool's mean is above max_mean_zsize */
	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_EPHEMERAL, .max_mean_zsize = 512 };
	id = zm_tmem_pool_create(t, &c);
	assert_true(id > 0);
	put_ok(t, id, 2, 0, tt_cookie(10, 4), PS);          /* ~2 KiB: the mean is above */
	put_ok(t, id, 2, 1, tt_cookie(11, 0), 100);
	rc = put(t, id, 2, 1, tt_cookie(12, 4), PS);
	assert_int_equal(rc, -E2BIG);
	expect_miss(t, id, 2, 1);                           /* the old page went */
	tt_stats(t, id, &st);
	assert_int_equal(st.refused_mean, 1);
	assert_int_equal(st.refused_zsize, 0);
	assert_int_equal(st.dropped, 1);
	/* a small page is taken while the mean is high */
	put_ok(t, id, 2, 2, tt_cookie(13, 0), PS);
	/* enough small ones bring the mean under: a large one goes in */
	for (uint32_t i = 0; i < 16; i++)
		put_ok(t, id, 3, i, tt_cookie(20 + i, 0), PS);
	put_ok(t, id, 2, 1, tt_cookie(14, 4), PS);
	expect(t, id, 2, 1, tt_cookie(14, 4), PS);
	expect(t, id, 2, 0, tt_cookie(10, 4), PS);

	/* SIZE_MAX: no mean check */
	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_PERSISTENT, .max_mean_zsize = SIZE_MAX };
	id = zm_tmem_pool_create(t, &c);
	assert_true(id > 0);
	for (uint32_t i = 0; i < 8; i++)
		put_ok(t, id, 4, i, tt_cookie(40 + i, 6), PS);  /* ~3 KiB each */
	for (uint32_t i = 0; i < 8; i++)
		expect(t, id, 4, i, tt_cookie(40 + i, 6), PS);
	/* the default mean (5/8) does refuse them */
	id = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	put_ok(t, id, 5, 0, tt_cookie(50, 6), PS);
	assert_int_equal(put(t, id, 5, 1, tt_cookie(51, 6), PS), -E2BIG);
	tt_stats(t, id, &st);
	assert_int_equal(st.refused_mean, 1);

	/* max_zsize up to the page: persistent pools keep incompressible
	 * pages as they are; an ephemeral object also carries its key */
	c = (struct zm_tmem_pool_config){ .kind = ZM_TMEM_PERSISTENT, .max_zsize = PS,
					  .max_mean_zsize = SIZE_MAX };
	id = zm_tmem_pool_create(t, &c);
	assert_true(id > 0);
	put_ok(t, id, 6, 0, tt_cookie(60, 8), PS);
	expect(t, id, 6, 0, tt_cookie(60, 8), PS);
	c.kind = ZM_TMEM_EPHEMERAL;
	assert_int_equal(zm_tmem_pool_create(t, &c), -EINVAL);
	c.max_zsize = PS - 16;
	assert_true(zm_tmem_pool_create(t, &c) > 0);
	done(t);
}

static void test_exclusive(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		struct zm_tmem *t = mk(want_backends[b], 0, 0, 0);
		struct zm_tmem_stats st;
		int id = mkpool(t, ZM_TMEM_EPHEMERAL, 1);
		int plain = mkpool(t, ZM_TMEM_EPHEMERAL, 0);

		for (uint32_t i = 0; i < 10; i++) {
			put_ok(t, id, 1, i, tt_cookie(i, i % 9), 500 + i);
			put_ok(t, plain, 1, i, tt_cookie(i, i % 9), 500 + i);
		}
		/* too small a buffer: nothing is removed */
		assert_int_equal(zm_tmem_get(t, id, 1, 3, g_buf, 100), -ENOSPC);
		tt_stats(t, id, &st);
		assert_int_equal(st.ephemeral_pages, 10);
		for (uint32_t i = 0; i < 10; i++) {
			expect(t, id, 1, i, tt_cookie(i, i % 9), 500 + i);
			expect_miss(t, id, 1, i);
			expect(t, plain, 1, i, tt_cookie(i, i % 9), 500 + i);
			expect(t, plain, 1, i, tt_cookie(i, i % 9), 500 + i);
		}
		tt_stats(t, id, &st);
		assert_int_equal(st.ephemeral_pages, 0);
		assert_int_equal(st.orig_bytes, 0);
		assert_int_equal(st.gets, 21);
		/* the get with too small a buffer is a hit or a miss */
		assert_true(st.hits == 10 || st.hits == 11);
		tt_stats(t, plain, &st);
		assert_int_equal(st.ephemeral_pages, 10);
		assert_int_equal(st.hits, 20);
		/* put back after the get: there again */
		put_ok(t, id, 1, 4, tt_cookie(99, 2), 4096);
		expect(t, id, 1, 4, tt_cookie(99, 2), 4096);
		expect_miss(t, id, 1, 4);
		done(t);
	}
}

/* A stored page whose compressed bytes are damaged: the get says -EIO
 * and removes the page; the others are unharmed. */
static void test_corrupt(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		struct zm_tmem *t = mk(want_backends[b], 0, 0, 0);

		for (int k = 0; k < 2; k++) {
			int id = mkpool(t, k ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL, 0);
			struct zmi_tmem_pool *p = zmi_tmem_pool_of(t, id, NULL);
			struct zmi_tmem_shard *sh = zmi_tmem_shard_of(p, 4, 5);
			struct zmi_tmem_page *pg;
			struct zm_tmem_stats st;
			uint8_t *m;
			size_t hl = k ? 0 : TM_HDR;

			put_ok(t, id, 4, 5, tt_cookie(1, 1), PS);
			put_ok(t, id, 4, 6, tt_cookie(2, 1), PS);
			pg = zmi_tmem_page_find(zmi_tmem_obj_find(sh, 4), 5);
			assert_non_null(pg);
			assert_false(pg->raw);
			m = zm_pool_map(p->zp, pg->h, ZM_MAP_RW);
			assert_non_null(m);
			memset(m + hl, 0xff, pg->zlen);
			zm_pool_unmap(p->zp, pg->h);
			assert_int_equal(zm_tmem_get(t, id, 4, 5, g_buf, PS), -EIO);
			expect_miss(t, id, 4, 5);
			expect(t, id, 4, 6, tt_cookie(2, 1), PS);
			tt_stats(t, id, &st);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 1);
			assert_int_equal(st.orig_bytes, PS);
			assert_int_equal(zm_tmem_check(t), 0);
		}
		done(t);
	}
}

/* ---- flushes --------------------------------------------------------------- */

static void test_flush(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		struct zm_tmem *t = mk(want_backends[b], 0, 0, 0);
		struct zm_tmem_stats st, all;

		for (int k = 0; k < 2; k++) {
			int id = mkpool(t, k ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL, 0);
			uint64_t big = UINT64_MAX - 1;

			/* object 7 over three shards' ranges of index; object 8 and
			 * one with the largest id and index */
			for (uint32_t i = 0; i < 600; i++)
				put_ok(t, id, 7, i, tt_cookie(i, i % 3), 64 + i);
			for (uint32_t i = 0; i < 10; i++)
				put_ok(t, id, 8, i * 1000, tt_cookie(i + 1000, 1), 700);
			put_ok(t, id, big, UINT32_MAX, tt_cookie(5, 5), PS);
			put_ok(t, id, 0, 0, tt_cookie(6, 5), 1);
			assert_int_equal(zm_tmem_check(t), 0);

			assert_int_equal(zm_tmem_flush_page(t, id, 7, 300), 0);
			assert_int_equal(zm_tmem_flush_page(t, id, 7, 300), -ENOENT);
			assert_int_equal(zm_tmem_flush_page(t, id, 7, 600), -ENOENT);
			assert_int_equal(zm_tmem_flush_page(t, id, 9, 0), -ENOENT);
			expect_miss(t, id, 7, 300);
			expect(t, id, 7, 299, tt_cookie(299, 299 % 3), 64 + 299);
			expect(t, id, 7, 301, tt_cookie(301, 301 % 3), 64 + 301);
			expect(t, id, big, UINT32_MAX, tt_cookie(5, 5), PS);
			expect(t, id, 0, 0, tt_cookie(6, 5), 1);
			assert_int_equal(zm_tmem_flush_object(t, id, 7), 599);
			assert_int_equal(zm_tmem_flush_object(t, id, 7), 0);
			assert_int_equal(zm_tmem_flush_object(t, id, 12345), 0);
			expect_miss(t, id, 7, 0);
			expect_miss(t, id, 7, 599);
			expect(t, id, 8, 9000, tt_cookie(1009, 1), 700);
			tt_stats(t, id, &st);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 12);
			assert_int_equal(st.flush_pages, 1);
			assert_int_equal(st.flush_objects, 1);
			assert_int_equal(st.flushed_pages, 600);
			assert_int_equal(zm_tmem_check(t), 0);
			assert_int_equal(zm_tmem_flush_page(t, id, big, UINT32_MAX), 0);
			assert_int_equal(zm_tmem_flush_pool(t, id), 11);
			assert_int_equal(zm_tmem_flush_pool(t, id), 0);
			tt_stats(t, id, &st);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 0);
			assert_int_equal(st.flush_pages, 2);
			assert_int_equal(st.flush_objects, 1);
			assert_int_equal(st.flushed_pages, 612);
			assert_int_equal(st.orig_bytes, 0);
			assert_int_equal(st.compr_bytes, 0);
			/* the pool is still there after a flush */
			put_ok(t, id, 8, 1, tt_cookie(77, 1), 77);
			expect(t, id, 8, 1, tt_cookie(77, 1), 77);
			/* a pool destroyed with pages in it */
			for (uint32_t i = 0; i < 50; i++)
				put_ok(t, id, i, i, tt_cookie(i, 2), 2000);
			assert_int_equal(zm_tmem_pool_destroy(t, id), 0);
			assert_int_equal(zm_tmem_check(t), 0);
		}
		tt_stats(t, 0, &all);
		assert_int_equal(all.ephemeral_pages + all.persistent_pages, 0);
		assert_int_equal(all.orig_bytes, 0);
		done(t);
	}
}

/* ---- the budget ------------------------------------------------------------ */

/* Ephemeral puts filling the budget many times over evict ephemeral
 * pages only. */
static void persistent_kept(const char *backend)
{
	struct zm_tmem *t = mk(backend, MIB, 50, 0);
	struct zm_tmem_stats st, es;
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	const uint32_t np = 150;
	long dropped = 0;

	/* ~600 B compressed each: 75 pages of zbud's, well inside the
	 * persistent share of 128 */
	for (uint32_t i = 0; i < np; i++)
		put_ok(t, p, i % 5, i, tt_cookie(i, 1), PS);
	for (uint32_t i = 0; i < 3000; i++) {
		int rc = put(t, e, i % 7, i, tt_cookie(i + 7777, 1 + i % 2), PS);

		if (rc == -ENOSPC)
			dropped++;
		else if (rc)
			fail_msg("%s: ephemeral put %u: %d", backend, i, rc);
	}
	assert_int_equal(zm_tmem_check(t), 0);
	for (uint32_t i = 0; i < np; i++)
		expect(t, p, i % 5, i, tt_cookie(i, 1), PS);
	tt_stats(t, p, &st);
	assert_int_equal(st.persistent_pages, np);
	assert_int_equal(st.evicted_objects, 0);
	tt_stats(t, e, &es);
	if (es.evicted_objects == 0)
		fail_msg("%s: 3000 ephemeral pages in a 1 MiB budget and none evicted", backend);
	assert_true(es.ephemeral_pages < 3000);
	assert_true(es.ephemeral_pages > 0);
	tt_stats(t, 0, &st);
	assert_true(st.pool_bytes <= MIB);
	assert_int_equal(st.persistent_pages, np);
	printf("%s: %llu ephemeral pages kept, %llu evicted in %llu steps freeing %llu pages, "
	       "%ld dropped\n", backend, (unsigned long long)es.ephemeral_pages,
	       (unsigned long long)es.evicted_objects, (unsigned long long)es.evictions,
	       (unsigned long long)es.evicted_pages, dropped);
	done(t);
}

static void test_persistent_kept(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++)
		persistent_kept(want_backends[b]);
}

/* A budget full of ephemeral pages: persistent puts take their room. */
static void ephemeral_yield(const char *backend)
{
	struct zm_tmem *t = mk(backend, MIB, 75, 0);
	struct zm_tmem_stats st, before;
	int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	const uint32_t np = 250;   /* 125 pages of zbud's: the share is 192 */

	for (uint32_t i = 0; i < 4000; i++) {
		int rc = put(t, e, 1, i, tt_cookie(i, 1), PS);

		assert_true(rc == 0 || rc == -ENOSPC);
	}
	tt_stats(t, e, &before);
	assert_true(before.evicted_objects > 0);
	for (uint32_t i = 0; i < np; i++) {
		int rc = put(t, p, 2, i, tt_cookie(i + 5000, 1), PS);

		if (rc)
			fail_msg("%s: persistent put %u into a budget of ephemeral pages: %d",
				 backend, i, rc);
	}
	assert_int_equal(zm_tmem_check(t), 0);
	for (uint32_t i = 0; i < np; i++)
		expect(t, p, 2, i, tt_cookie(i + 5000, 1), PS);
	tt_stats(t, e, &st);
	assert_true(st.evicted_objects > before.evicted_objects);
	assert_true(st.ephemeral_pages < before.ephemeral_pages);
	/* what is left of the ephemeral pages is right */
	for (uint32_t i = 0; i < 4000; i++) {
		int rc = zm_tmem_get(t, e, 1, i, g_buf, PS);

		if (rc == -ENOENT)
			continue;
		assert_int_equal(rc, PS);
		assert_int_equal(tt_diff(g_buf, PS, tt_cookie(i, 1)), 0);
	}
	tt_stats(t, p, &st);
	assert_int_equal(st.persistent_pages, np);
	tt_stats(t, 0, &st);
	assert_true(st.pool_bytes <= MIB);
	done(t);
}

static void test_ephemeral_yield(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++)
		ephemeral_yield(want_backends[b]);
}

/* A small budget and many more ephemeral pages than fit: puts succeed or
 * are dropped, gets miss or give the last value put. */
static void pressure(const char *backend)
{
	enum { NK = 1500, NOPS = 8000 };
	struct zm_tmem *t = mk(backend, MIB, 0, 0);
	struct zm_tmem_stats st, all;
	static uint64_t cookie[2][NK];
	static uint16_t len[2][NK];
	int ids[2];
	struct rng r;
	uint64_t gets = 0, hits = 0, wrong = 0;

	ids[0] = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	ids[1] = mkpool(t, ZM_TMEM_EPHEMERAL, 1);
	memset(cookie, 0, sizeof(cookie));
	rng_seed(&r, g_seed);
	for (long s = 0; s < NOPS; s++) {
		int k = (int)rng_below(&r, 2);
		uint32_t key = (uint32_t)rng_below(&r, NK);

		if (rng_below(&r, 3)) {
			uint64_t c = tt_cookie(rng_next(&r), (unsigned)rng_below(&r, 6));
			size_t l = 1 + rng_below(&r, PS);
			int rc;

			if (rng_below(&r, 2))
				l = PS;
			rc = put(t, ids[k], key / 100, key, c, l);
			if (rc == 0) {
				cookie[k][key] = c;
				len[k][key] = (uint16_t)l;
			} else {
				if (rc != -ENOSPC && rc != -E2BIG)
					fail_msg("%s: put: %d", backend, rc);
				cookie[k][key] = 0;
				expect_miss(t, ids[k], key / 100, key);
				gets++;
			}
		} else {
			int rc = zm_tmem_get(t, ids[k], key / 100, key, g_buf, PS);

			gets++;
			if (rc == -ENOENT) {
				cookie[k][key] = 0;
				continue;
			}
			hits++;
			if (!cookie[k][key] || rc != len[k][key] ||
			    tt_diff(g_buf, (size_t)rc, cookie[k][key])) {
				if (wrong++ < 5)
					printf("%s: pool %d key %u: get %d, want %s%u bytes\n", backend,
					       ids[k], key, rc, cookie[k][key] ? "" : "a miss, not ",
					       len[k][key]);
				continue;
			}
			if (k)
				cookie[k][key] = 0;
		}
		if (s % 2000 == 1999)
			assert_int_equal(zm_tmem_check(t), 0);
	}
	assert_int_equal(wrong, 0);
	tt_stats(t, 0, &all);
	assert_int_equal(all.gets, gets);
	assert_int_equal(all.hits, hits);
	assert_true(all.evicted_objects > 0);
	if (!strcmp(backend, "zbud") || !strcmp(backend, "zsmalloc")) {
		assert_true(all.evicted_pages > 0);
		assert_true(all.evictions > 0);
	}
	/* a step evicts one object at least */
	assert_true(all.evictions <= all.evicted_objects);
	assert_true(all.pool_bytes <= MIB);
	assert_int_equal(all.persistent_pages, 0);
	/* the counts of the two pools add up to the instance's */
	{
		uint64_t pages = 0, ev = 0, puts = 0;

		for (int k = 0; k < 2; k++) {
			uint64_t have = 0;

			tt_stats(t, ids[k], &st);
			pages += st.ephemeral_pages;
			ev += st.evicted_objects;
			puts += st.puts;
			assert_int_equal(st.puts - st.puts_stored, st.dropped);
			for (int i = 0; i < NK; i++)
				have += cookie[k][i] != 0;
			/* the model knows of every page stored, and more */
			assert_true(st.ephemeral_pages <= have);
		}
		assert_int_equal(pages, all.ephemeral_pages);
		assert_int_equal(ev, all.evicted_objects);
		assert_int_equal(puts, all.puts);
	}
	printf("%s: %llu puts, %llu stored, %llu gets, %llu hits, %llu evicted in %llu steps "
	       "freeing %llu pages\n", backend, (unsigned long long)all.puts,
	       (unsigned long long)all.puts_stored, (unsigned long long)all.gets,
	       (unsigned long long)all.hits, (unsigned long long)all.evicted_objects,
	       (unsigned long long)all.evictions, (unsigned long long)all.evicted_pages);
	/* a non-exclusive pool: after reading every key the model knows of,
	 * the counts are exact */
	{
		uint64_t have = 0, bytes = 0;

		for (uint32_t i = 0; i < NK; i++) {
			int rc;

			if (!cookie[0][i])
				continue;
			rc = zm_tmem_get(t, ids[0], i / 100, i, g_buf, PS);
			if (rc == -ENOENT)
				continue;
			assert_int_equal(rc, len[0][i]);
			assert_int_equal(tt_diff(g_buf, (size_t)rc, cookie[0][i]), 0);
			have++;
			bytes += (uint64_t)rc;
		}
		tt_stats(t, ids[0], &st);
		assert_int_equal(st.ephemeral_pages, have);
		assert_int_equal(st.orig_bytes, bytes);
	}
	done(t);
}

static void test_pressure(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++)
		pressure(want_backends[b]);
}

/* Fill pool p of t with ~1 KiB pages (noise 2) under object oid until a
 * put is refused; returns how many were stored, and the refused put's rc
 * in *rc. */
static uint32_t fill_persistent(struct zm_tmem *t, int p, uint64_t oid, int *rc)
{
	uint32_t i;

	for (i = 0; i < 4000; i++) {
		*rc = put(t, p, oid, i, tt_cookie(i, 2), PS);
		if (*rc)
			break;
	}
	expect_miss(t, p, oid, i);
	return i;
}

/* persistent_pct caps the persistent pool's pages. */
static void share(const char *backend)
{
	struct zm_tmem *t = mk(backend, MIB, 10, 0);
	struct zm_tmem_stats st;
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	uint32_t stored;
	int rc = 0;

	put_ok(t, p, 2, 0, tt_cookie(0, 0), 100);
	stored = fill_persistent(t, p, 1, &rc);
	assert_int_equal(rc, -ENOSPC);
	/* 10% of 1 MiB is 25 pages: 50 of them (zbud) to 100 (zsmalloc),
	 * and a few pages more (the pages are counted every 32 puts) */
	if (stored <= 40 || stored >= 150)
		fail_msg("%s: %u pages of 1 KiB in a share of 25 pages", backend, stored);
	/* the key that held a page and failed loses it */
	assert_int_equal(put(t, p, 2, 0, tt_cookie(0, 2), PS), -ENOSPC);
	expect_miss(t, p, 2, 0);
	tt_stats(t, p, &st);
	assert_int_equal(st.refused_share, 2);
	assert_int_equal(st.refused_full, 0);
	assert_int_equal(st.persistent_pages, stored);
	assert_true(st.compr_bytes <= MIB / 10);
	/* ephemeral puts still have the rest of the budget */
	for (uint32_t j = 0; j < 200; j++)
		put_ok(t, e, 2, j, tt_cookie(j, 2), PS);
	for (uint32_t j = 0; j < stored; j++)
		expect(t, p, 1, j, tt_cookie(j, 2), PS);
	done(t);
}

static void test_share(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++)
		share(want_backends[b]);
}

/* A share spent, then the persistent pages flushed (the pool at once, or
 * page by page): persistent puts are taken again right away. */
static void share_flushed(const char *backend, int by_page)
{
	struct zm_tmem *t = mk(backend, MIB, 10, 0);
	struct zm_tmem_stats st;
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	uint32_t stored;
	int rc;

	stored = fill_persistent(t, p, 1, &rc);
	assert_int_equal(rc, -ENOSPC);
	if (by_page) {
		for (uint32_t j = 0; j < stored; j++)
			assert_int_equal(zm_tmem_flush_page(t, p, 1, j), 0);
	} else {
		assert_int_equal(zm_tmem_flush_pool(t, p), (long)stored);
	}
	tt_stats(t, p, &st);
	assert_int_equal(st.persistent_pages, 0);
	rc = put(t, p, 1, 1, tt_cookie(1, 2), PS);
	if (rc)
		fail_msg("%s: the share spent by %u pages, all of them flushed (%s): a put "
			 "into the empty pool gives %d", backend, stored,
			 by_page ? "page by page" : "flush_pool", rc);
	expect(t, p, 1, 1, tt_cookie(1, 2), PS);
	/* and as many as before fit again */
	assert_int_equal(zm_tmem_flush_pool(t, p), 1);
	assert_true(fill_persistent(t, p, 3, &rc) + 8 >= stored);
	done(t);
}

static void test_share_flushed(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		share_flushed(want_backends[b], 0);
		share_flushed(want_backends[b], 1);
	}
}

/* No cap (100%): the budget fills up with persistent pages, and then
 * nothing is left to evict. */
static void share_full(const char *backend)
{
	struct zm_tmem *t = mk(backend, MIB / 4, 100, 0);
	struct zm_tmem_stats st;
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
	int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	uint32_t stored;
	int rc;

	stored = fill_persistent(t, p, 1, &rc);
	assert_int_equal(rc, -ENOSPC);
	tt_stats(t, p, &st);
	assert_int_equal(st.refused_share, 0);
	assert_true(st.refused_full > 0);
	assert_true(st.pool_bytes <= MIB / 4);
	assert_true(stored > 50);
	/* an ephemeral page finds no room, or a little */
	rc = put(t, e, 1, 1, tt_cookie(1, 4), PS);
	assert_true(rc == 0 || rc == -ENOSPC);
	if (rc == 0) {
		rc = zm_tmem_get(t, e, 1, 1, g_buf, PS);
		assert_true(rc == -ENOENT || (rc == PS && !tt_diff(g_buf, PS, tt_cookie(1, 4))));
	} else {
		tt_stats(t, e, &st);
		assert_int_equal(st.dropped, 1);
		assert_int_equal(st.refused_full, 1);
	}
	for (uint32_t j = 0; j < stored; j++)
		expect(t, p, 1, j, tt_cookie(j, 2), PS);
	assert_int_equal(zm_tmem_check(t), 0);
	assert_int_equal(zm_tmem_flush_pool(t, p), (long)stored);
	put_ok(t, e, 1, 1, tt_cookie(1, 4), PS);
	expect(t, e, 1, 1, tt_cookie(1, 4), PS);
	done(t);
}

static void test_share_full(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++)
		share_full(want_backends[b]);
}

/* Many short values (stored as they are, with their key) in a small
 * budget: the pool's memory, as it counts it, stays inside the budget. */
static void test_budget_short_values(void **state)
{
	for (size_t b = 0; b < NBACKENDS; b++) {
		struct zm_tmem *t = mk(want_backends[b], MIB / 4, 0, 0);
		struct zm_tmem_stats st;
		int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
		int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);

		for (uint32_t i = 0; i < 12000; i++) {
			size_t len = 1 + i % 64;
			int rc = put(t, i % 3 ? e : p, i % 5, i, tt_cookie(i, 8), len);

			assert_true(rc == 0 || rc == -ENOSPC);
			if (i % 1000 == 999) {
				tt_stats(t, 0, &st);   /* fails when pool_bytes > budget */
			}
		}
		tt_stats(t, 0, &st);
		assert_true(st.evicted_objects > 0);
		done(t);
	}
}

/* The histogram: one page per pool, in the bucket of its compressed
 * size (compr_bytes) relative to its pool's page size. */
static void test_hist(void **state)
{
	struct zm_tmem *t = mk("zsmalloc", 0, 0, 2 * PS);
	static const struct {
		size_t len;
		unsigned noise;
		size_t ps;
	} v[] = {
		{ 1, 8, PS }, { 64, 8, PS }, { 65, 8, PS }, { 1000, 8, PS }, { PS, 0, PS },
		{ PS, 4, PS }, { PS, 6, PS }, { PS, 6, 2 * PS }, { 2 * PS, 6, 2 * PS },
		{ 2 * PS, 1, 2 * PS }, { 3000, 8, 2 * PS },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		for (int k = 0; k < 2; k++) {
			int id = mkpool_sized(t, k ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL, 0, v[i].ps);
			struct zm_tmem_stats st;
			size_t want;

			put_ok(t, id, 1, 2, tt_cookie(i, v[i].noise), v[i].len);
			tt_stats(t, id, &st);
			assert_int_equal(st.ephemeral_pages + st.persistent_pages, 1);
			assert_true(st.compr_bytes > 0 && st.compr_bytes <= v[i].ps * 7 / 8);
			want = (size_t)(st.compr_bytes - 1) * ZM_TMEM_HIST_BUCKETS / v[i].ps;
			if (st.hist[want] != 1)
				fail_msg("len %zu noise %u in a pool of %zu: %llu bytes compressed, "
					 "not in bucket %zu", v[i].len, v[i].noise, v[i].ps,
					 (unsigned long long)st.compr_bytes, want);
			assert_int_equal(zm_tmem_pool_destroy(t, id), 0);
		}
	}
	done(t);
}

/* The largest pages: a 64 KiB instance, values up to 64 KiB. */
static void test_big_pages(void **state)
{
	static const char *const b[] = { "zsmalloc", "zbud", "xvmalloc" };

	for (size_t i = 0; i < 3; i++) {
		struct zm_tmem *t = mk(b[i], 8u << 20, 0, ZM_PAGE_SIZE_MAX);
		int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
		int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);
		static const size_t lens[] = { 1, 4097, 32768, 65535, 65536 };

		for (size_t j = 0; j < 5; j++) {
			put_ok(t, e, 9, (uint32_t)j, tt_cookie(j, 3), lens[j]);
			put_ok(t, p, 9, (uint32_t)j, tt_cookie(j + 9, 5), lens[j]);
		}
		assert_int_equal(put(t, p, 9, 9, tt_cookie(1, 8), ZM_PAGE_SIZE_MAX), -E2BIG);
		assert_int_equal(put(t, p, 9, 9, tt_cookie(1, 0), ZM_PAGE_SIZE_MAX + 1), -EINVAL);
		for (size_t j = 0; j < 5; j++) {
			expect(t, e, 9, (uint32_t)j, tt_cookie(j, 3), lens[j]);
			expect(t, p, 9, (uint32_t)j, tt_cookie(j + 9, 5), lens[j]);
		}
		done(t);
	}
	/* a whole 64 KiB page that does not compress, kept raw in a pool
	 * whose max_zsize is the page: its length and the counters must
	 * not wrap (they did, 16-bit, and the instance drifted until it
	 * refused every put) */
	for (size_t i = 0; i < 2; i++) {
		struct zm_tmem *t = mk(b[i], 1u << 20, 100, ZM_PAGE_SIZE_MAX);
		struct zm_tmem_pool_config c = { .kind = ZM_TMEM_PERSISTENT,
						 .max_zsize = ZM_PAGE_SIZE_MAX,
						 .max_mean_zsize = SIZE_MAX };
		struct zm_tmem_stats st;
		int p = zm_tmem_pool_create(t, &c);

		assert_true(p > 0);
		for (int round = 0; round < 20; round++) {
			put_ok(t, p, 1, 1, tt_cookie(round, 8), ZM_PAGE_SIZE_MAX);
			expect(t, p, 1, 1, tt_cookie(round, 8), ZM_PAGE_SIZE_MAX);
			tt_stats(t, p, &st);
			assert_int_equal(st.compr_bytes, ZM_PAGE_SIZE_MAX);
			assert_int_equal(st.hist[ZM_TMEM_HIST_BUCKETS - 1], 1);
			assert_int_equal(zm_tmem_check(t), 0);
			assert_int_equal(zm_tmem_flush_page(t, p, 1, 1), 0);
		}
		tt_stats(t, p, &st);
		assert_int_equal(st.compr_bytes, 0);
		done(t);
	}
}

/* Exact counters over a known sequence. */
static void test_counters(void **state)
{
	struct zm_tmem *t = mk("xvmalloc", 0, 0, 0);
	struct zm_tmem_stats st;
	int e = mkpool(t, ZM_TMEM_EPHEMERAL, 0);
	int p = mkpool(t, ZM_TMEM_PERSISTENT, 0);

	for (uint32_t i = 0; i < 20; i++) {
		put_ok(t, e, i / 10, i, tt_cookie(i, 3), 1000);
		put_ok(t, p, i / 10, i, tt_cookie(i, 3), 2000);
	}
	for (uint32_t i = 0; i < 30; i++) {
		int rc = zm_tmem_get(t, e, i / 10, i, g_buf, PS);

		assert_int_equal(rc, i < 20 ? 1000 : -ENOENT);
	}
	assert_int_equal(zm_tmem_flush_page(t, e, 0, 0), 0);
	assert_int_equal(zm_tmem_flush_page(t, e, 0, 0), -ENOENT);
	assert_int_equal(zm_tmem_flush_object(t, e, 0), 9);
	assert_int_equal(zm_tmem_flush_object(t, e, 0), 0);
	assert_int_equal(zm_tmem_flush_object(t, p, 1), 10);
	tt_stats(t, e, &st);
	assert_int_equal(st.puts, 20);
	assert_int_equal(st.puts_stored, 20);
	assert_int_equal(st.gets, 30);
	assert_int_equal(st.hits, 20);
	assert_int_equal(st.misses, 10);
	assert_int_equal(st.flush_pages, 1);
	assert_int_equal(st.flush_objects, 1);
	assert_int_equal(st.flushed_pages, 10);
	assert_int_equal(st.ephemeral_pages, 10);
	assert_int_equal(st.persistent_pages, 0);
	assert_int_equal(st.orig_bytes, 10000);
	tt_stats(t, p, &st);
	assert_int_equal(st.puts, 20);
	assert_int_equal(st.gets, 0);
	assert_int_equal(st.flush_objects, 1);
	assert_int_equal(st.flushed_pages, 10);
	assert_int_equal(st.persistent_pages, 10);
	assert_int_equal(st.ephemeral_pages, 0);
	assert_int_equal(st.orig_bytes, 20000);
	tt_stats(t, 0, &st);
	assert_int_equal(st.puts, 40);
	assert_int_equal(st.gets, 30);
	assert_int_equal(st.flushed_pages, 20);
	assert_int_equal(st.flush_objects, 2);
	assert_int_equal(st.ephemeral_pages, 10);
	assert_int_equal(st.persistent_pages, 10);
	assert_int_equal(st.orig_bytes, 30000);
	assert_int_equal(st.budget_bytes, 64u << 20);
	assert_string_equal(st.evicts, "object");
	done(t);
}

/* ---- zm_pool_unit ---------------------------------------------------------- */

static int has(const zm_handle_t *v, long n, zm_handle_t h)
{
	for (long i = 0; i < n; i++)
		if (v[i] == h)
			return 1;
	return 0;
}

static void test_unit_zbud(void **state)
{
	struct zm_pool_config c = { .allocator = "zbud" };
	struct zm_pool *p, *q;
	zm_handle_t out[4], a, b, lone, other;
	size_t pages = 99;

	assert_int_equal(zm_pool_create(&c, &p), 0);
	assert_int_equal(zm_pool_create(&c, &q), 0);
	a = zm_pool_alloc(p, 1500);
	b = zm_pool_alloc(p, 1500);
	assert_true(a && b);
	assert_int_equal(zm_pool_unit(p, a, out, 4, &pages), 2);
	assert_true(has(out, 2, a) && has(out, 2, b));
	assert_int_equal(pages, 1);
	pages = 99;
	assert_int_equal(zm_pool_unit(p, b, out, 4, &pages), 2);
	assert_true(has(out, 2, a) && has(out, 2, b));
	assert_int_equal(pages, 1);
	/* too small an out: the count, and only max written */
	out[0] = out[1] = 0;
	assert_int_equal(zm_pool_unit(p, a, out, 1, &pages), 2);
	assert_true(out[0] == a || out[0] == b);
	assert_int_equal(out[1], 0);
	assert_int_equal(zm_pool_unit(p, a, NULL, 0, &pages), 2);
	/* an object alone in its page */
	lone = zm_pool_alloc(p, 3000);
	assert_true(lone);
	assert_int_equal(zm_pool_unit(p, lone, out, 4, &pages), 1);
	assert_int_equal(out[0], lone);
	assert_int_equal(pages, 1);
	/* a page-sized object */
	other = zm_pool_alloc(p, 4096);
	assert_true(other);
	assert_int_equal(zm_pool_unit(p, other, out, 4, &pages), 1);
	assert_int_equal(out[0], other);
	/* the buddy gone: one left */
	assert_int_equal(zm_pool_free(p, b), 0);
	assert_int_equal(zm_pool_unit(p, a, out, 4, &pages), 1);
	assert_int_equal(out[0], a);
	assert_int_equal(pages, 1);
	/* bad handles and arguments */
	assert_int_equal(zm_pool_unit(p, b, out, 4, &pages), -EINVAL);   /* freed */
	assert_int_equal(zm_pool_unit(p, 0, out, 4, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, 0x123456789abcdefull, out, 4, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, ~0ull, out, 4, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(NULL, a, out, 4, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, a, NULL, 4, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, a, out, 4, NULL), -EINVAL);
	{
		zm_handle_t x = zm_pool_alloc(q, 100);

		assert_true(x);
		assert_int_equal(zm_pool_unit(p, x, out, 4, &pages), -EINVAL);  /* foreign */
		assert_int_equal(zm_pool_unit(q, x, out, 4, &pages), 1);
		assert_int_equal(zm_pool_free(q, x), 0);
	}
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
	zm_pool_destroy(q);
}

static void unit_zs(const struct zm_pool_config *base)
{
	struct zm_pool_config c = *base;
	struct zm_pool *p, *q;
	struct zm_pool_class_stats cs;
	zm_handle_t *h, out[256], huge, extra;
	unsigned nc, ci = 0, objs, ppz;
	size_t pages = 0, ps = c.page_size ? c.page_size : PS;
	long n;

	c.allocator = "zsmalloc";
	c.class_borrow = -1;
	c.compact = ZM_COMPACT_OFF;
	assert_int_equal(zm_pool_create(&c, &p), 0);
	assert_int_equal(zm_pool_create(&c, &q), 0);
	/* a class of a few-page zspage with several objects */
	nc = zm_pool_nr_classes(p);
	assert_true(nc > 0);
	for (unsigned i = 0; i < nc; i++) {
		assert_int_equal(zm_pool_class_stats(p, i, &cs), 0);
		if (cs.size >= ps / 4 && cs.objs_per_zspage > 2 && cs.pages_per_zspage > 1 &&
		    cs.objs_per_zspage <= 256) {
			ci = i;
			break;
		}
	}
	assert_int_equal(zm_pool_class_stats(p, ci, &cs), 0);
	objs = cs.objs_per_zspage;
	ppz = cs.pages_per_zspage;
	assert_true(objs > 2 && objs <= 256);
	h = calloc(objs + 1, sizeof(*h));
	for (unsigned i = 0; i < objs; i++) {
		h[i] = zm_pool_alloc(p, cs.size);
		assert_true(h[i]);
	}
	for (unsigned i = 0; i < objs; i++) {
		memset(out, 0, sizeof(out));
		n = zm_pool_unit(p, h[i], out, 256, &pages);
		if (n != (long)objs)
			fail_msg("class %u (size %u, %u objects in %u pages): unit of object %u: %ld",
				 ci, cs.size, objs, ppz, i, n);
		for (unsigned j = 0; j < objs; j++)
			assert_true(has(out, n, h[j]));
		assert_int_equal(pages, ppz);
	}
	/* too small an out */
	memset(out, 0, sizeof(out));
	assert_int_equal(zm_pool_unit(p, h[0], out, 2, &pages), (long)objs);
	assert_true(has(h, objs, out[0]) && has(h, objs, out[1]));
	assert_int_equal(out[2], 0);
	assert_int_equal(zm_pool_unit(p, h[0], NULL, 0, &pages), (long)objs);
	/* the next object opens a zspage of its own */
	extra = zm_pool_alloc(p, cs.size);
	assert_true(extra);
	assert_int_equal(zm_pool_unit(p, extra, out, 256, &pages), 1);
	assert_int_equal(out[0], extra);
	/* zspages are populated as they fill: the pages it holds so far */
	assert_int_equal(pages, (cs.size + ps - 1) / ps);
	/* one freed: the others stay */
	assert_int_equal(zm_pool_free(p, h[1]), 0);
	n = zm_pool_unit(p, h[0], out, 256, &pages);
	assert_int_equal(n, (long)objs - 1);
	assert_false(has(out, n, h[1]));
	for (unsigned j = 0; j < objs; j++)
		if (j != 1)
			assert_true(has(out, n, h[j]));
	assert_int_equal(zm_pool_unit(p, h[1], out, 256, &pages), -EINVAL);
	/* a huge object is its own unit */
	huge = zm_pool_alloc(p, ps);
	assert_true(huge);
	pages = 0;
	assert_int_equal(zm_pool_unit(p, huge, out, 256, &pages), 1);
	assert_int_equal(out[0], huge);
	assert_int_equal(pages, 1);
	assert_int_equal(zm_pool_unit(p, huge, NULL, 0, &pages), 1);
	/* bad handles */
	assert_int_equal(zm_pool_unit(p, 0, out, 256, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, 0x123456789abcdefull, out, 256, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, ~0ull, out, 256, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, h[0] ^ 1, out, 256, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, h[0], NULL, 4, &pages), -EINVAL);
	assert_int_equal(zm_pool_unit(p, h[0], out, 4, NULL), -EINVAL);
	{
		zm_handle_t x = zm_pool_alloc(q, 100), y = zm_pool_alloc(q, ps);

		assert_true(x && y);
		assert_int_equal(zm_pool_unit(p, x, out, 4, &pages), -EINVAL);  /* foreign */
		assert_int_equal(zm_pool_unit(p, y, out, 4, &pages), -EINVAL);  /* foreign, huge */
		assert_int_equal(zm_pool_unit(q, x, out, 4, &pages), 1);
		assert_int_equal(zm_pool_free(q, y), 0);
		assert_int_equal(zm_pool_unit(q, y, out, 4, &pages), -EINVAL);  /* freed huge */
		assert_int_equal(zm_pool_free(q, x), 0);
	}
	assert_int_equal(zm_pool_free(p, huge), 0);
	assert_int_equal(zm_pool_unit(p, huge, out, 4, &pages), -EINVAL);
	for (unsigned i = 0; i < objs; i++)
		if (i != 1)
			assert_int_equal(zm_pool_free(p, h[i]), 0);
	assert_int_equal(zm_pool_free(p, extra), 0);
	free(h);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
	zm_pool_destroy(q);
}

static void test_unit_zsmalloc(void **state)
{
	static const struct zm_pool_config cfgs[] = {
		{ .allocator = "zsmalloc" },
		{ .allocator = "zsmalloc", .span = ZM_SPAN_COPY },
		{ .allocator = "zsmalloc", .page_size = 16384 },
	};

	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++)
		unit_zs(&cfgs[i]);
}

/* Owner keys' handles: a huge object's unit is itself (the key handle
 * carries no huge bit: its word says so), a small one's lists the key
 * handle among its zspage's objects. */
static void test_unit_keys(void **state)
{
	static uint64_t words[16];
	struct zm_pool_config c = { .allocator = "zsmalloc", .words = words, .nwords = 16 };
	struct zm_pool *p = NULL;
	zm_handle_t h, out[64], kh;
	size_t pages = 0;
	long n;
	int found = 0;

	memset(words, 0, sizeof(words));
	assert_int_equal(zm_pool_create(&c, &p), 0);
	h = zm_pool_alloc(p, 4096);
	assert_true(h);
	assert_int_equal(zm_pool_bind(p, h, 5), 0);
	kh = zm_pool_key_handle(p, 5);
	assert_int_equal(zm_pool_unit(p, kh, out, 64, &pages), 1);
	assert_true(out[0] == kh && pages == 1);
	h = zm_pool_alloc(p, 100);
	assert_true(h);
	assert_int_equal(zm_pool_bind(p, h, 6), 0);
	kh = zm_pool_key_handle(p, 6);
	n = zm_pool_unit(p, kh, out, 64, &pages);
	assert_true(n >= 1 && pages >= 1);
	for (long i = 0; i < n; i++)
		found += out[i] == kh;
	assert_int_equal(found, 1);
	assert_int_equal(zm_pool_unit(p, zm_pool_key_handle(p, 7), out, 64, &pages), -EINVAL);
	assert_int_equal(zm_pool_free_key(p, 5), 0);
	assert_int_equal(zm_pool_free_key(p, 6), 0);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
}

static void test_unit_unsupported(void **state)
{
	static const char *const names[] = { "xvmalloc", "xcfmalloc", "malloc" };

	for (size_t i = 0; i < 3; i++) {
		struct zm_pool_config c = { .allocator = names[i] };
		struct zm_pool *p;
		zm_handle_t h, out[4];
		size_t pages;

		assert_int_equal(zm_pool_create(&c, &p), 0);
		h = zm_pool_alloc(p, 1000);
		assert_true(h);
		assert_int_equal(zm_pool_unit(p, h, out, 4, &pages), -EOPNOTSUPP);
		assert_int_equal(zm_pool_unit(p, h, NULL, 0, &pages), -EOPNOTSUPP);
		assert_int_equal(zm_pool_unit(NULL, h, out, 4, &pages), -EINVAL);
		assert_int_equal(zm_pool_free(p, h), 0);
		zm_pool_destroy(p);
	}
}

int main(int argc, char **argv)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backends),
		cmocka_unit_test(test_create_bad),
		cmocka_unit_test(test_pool_create_bad),
		cmocka_unit_test(test_small_pool_pages),
		cmocka_unit_test(test_too_many_pools),
		cmocka_unit_test(test_bad_calls),
		cmocka_unit_test(test_stats_sized),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_codecs),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_failed_put),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_exclusive),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_flush),
		cmocka_unit_test(test_persistent_kept),
		cmocka_unit_test(test_ephemeral_yield),
		cmocka_unit_test(test_pressure),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_share_flushed),
		cmocka_unit_test(test_share_full),
		cmocka_unit_test(test_budget_short_values),
		cmocka_unit_test(test_hist),
		cmocka_unit_test(test_big_pages),
		cmocka_unit_test(test_counters),
		cmocka_unit_test(test_unit_zbud),
		cmocka_unit_test(test_unit_zsmalloc),
		cmocka_unit_test(test_unit_keys),
		cmocka_unit_test(test_unit_unsupported),
	};

	test_args(argc, argv, &g_seed, NULL);
	return test_run_selected("tmem", tests);
}
