/*
 * Unit tests of the compressed page store: round trips over every codec
 * and backend, same-filled pages, huge pages, the zcache policy knobs, the
 * memory limit, discard, corrupted data, statistics and bad input.
 * zm_store_check() runs after each step.
 */
#include <errno.h>
#include <sys/resource.h>

#include "testutil.h"
#include <zmem/codec.h>
#include <zmem/pool.h>
#include <zmem/store.h>
#include "workload/workload.h"

#define PS 4096

/* n pages of text compressing to about ratio (lz4), page size PS */
static uint8_t *text_pages(size_t n, double ratio, uint64_t seed)
{
	uint8_t *b = malloc(n * PS);

	assert_non_null(b);
	assert_int_equal(workload_fill(WORKLOAD_TEXT, ratio, NULL, seed, b,
				       n * PS, PS, NULL), 0);
	return b;
}

static uint8_t *random_pages(size_t n, uint64_t seed)
{
	uint8_t *b = malloc(n * PS);
	struct rng r;

	assert_non_null(b);
	rng_seed(&r, seed);
	for (size_t i = 0; i < n * PS / 8; i++)
		((uint64_t *)b)[i] = rng_next(&r);
	return b;
}

static void expect_page(struct zm_store *s, uint64_t idx, const void *want)
{
	uint8_t out[PS];

	assert_int_equal(zm_store_get(s, idx, out), 0);
	assert_memory_equal(out, want, PS);
}

static void expect_zero(struct zm_store *s, uint64_t idx)
{
	static const uint8_t zero[PS];

	expect_page(s, idx, zero);
}

static void test_create_bad(void **st)
{
	struct zm_store_config c = { .nr_pages = 16 };
	struct zm_store *s = (void *)1;
	uint8_t page[PS] = { 0 };

	assert_int_equal(zm_store_create(NULL, &s), -EINVAL);
	assert_null(s);
	assert_int_equal(zm_store_create(&c, NULL), -EINVAL);
	c.nr_pages = 0;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.nr_pages = ZM_STORE_MAX_PAGES + 1;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.nr_pages = 16;
	c.page_size = 5000;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.page_size = 2048;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.page_size = 0;
	c.codec = "nonesuch";
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.codec = NULL;
	c.allocator = "nonesuch";
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	c.allocator = NULL;
	c.huge_size = PS + 1;
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	assert_null(s);
	c.huge_size = 0;
	assert_int_equal(zm_store_create(&c, &s), 0);
	assert_int_equal(zm_store_page_size(s), PS);
	assert_int_equal(zm_store_nr_pages(s), 16);
	assert_string_equal(zm_pool_backend(zm_store_pool(s)), "zsmalloc");
	assert_string_equal(zm_codec_name(zm_store_codec(s)), "lz4");

	/* bad arguments are refused, nothing changes */
	assert_int_equal(zm_store_put(s, 16, page), -EINVAL);
	assert_int_equal(zm_store_put(s, 0, NULL), -EINVAL);
	assert_int_equal(zm_store_put(NULL, 0, page), -EINVAL);
	assert_int_equal(zm_store_get(s, 16, page), -EINVAL);
	assert_int_equal(zm_store_get(s, 0, NULL), -EINVAL);
	assert_int_equal(zm_store_discard(s, 10, 7), -EINVAL);
	assert_int_equal(zm_store_discard(s, 17, 0), -EINVAL);
	assert_int_equal(zm_store_discard(s, 16, 0), 0);
	assert_int_equal(zm_store_discard(s, 3, UINT64_MAX), -EINVAL);
	assert_int_equal(zm_store_slot_info(s, 16, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
	zm_store_destroy(NULL);

	/* a huge store costs nothing until written, nor do its checker and
	 * destroy read the slots never written (its slots are the pool's
	 * owner words: a walk over all of them touched 2 GiB here) */
	{
		struct rusage ru0, ru1;
		uint8_t *rnd = random_pages(1, 77);

		getrusage(RUSAGE_SELF, &ru0);
		c.nr_pages = (uint64_t)1 << 28; /* 1 TiB of 4 KiB pages */
		assert_int_equal(zm_store_create(&c, &s), 0);
		assert_int_equal(zm_store_put(s, ((uint64_t)1 << 28) - 1, page), 0);
		assert_int_equal(zm_store_put(s, 5, rnd), 0);   /* a huge page */
		expect_zero(s, 12345);
		assert_int_equal(zm_store_check(s), 0);
		zm_store_destroy(s);
		getrusage(RUSAGE_SELF, &ru1);
		assert_true(ru1.ru_maxrss - ru0.ru_maxrss < 256 * 1024);  /* KiB */
		free(rnd);
	}
}

/* Every codec x every backend: a mix of pages goes in and comes back. */
static void test_round_trip(void **st)
{
	const char *const *codecs = zm_codec_list();
	const char *const *backends = zm_pool_backends();
	enum { N = 96 };
	uint8_t *text = text_pages(N, 0.5, 1), *rnd = random_pages(N, 2);
	uint8_t *mix = malloc(N * PS);

	for (size_t i = 0; i < N; i++) {
		uint8_t *p = mix + i * PS;

		switch (i % 4) {
		case 0: memcpy(p, text + i * PS, PS); break;
		case 1: memcpy(p, rnd + i * PS, PS); break;
		case 2: memset(p, i % 8 ? 0 : 0x5c, PS); break;
		default: /* half text, half zero */
			memcpy(p, text + i * PS, PS / 2);
			memset(p + PS / 2, 0, PS / 2);
		}
	}
	for (int c = 0; codecs[c]; c++)
		for (int b = 0; backends[b]; b++) {
			struct zm_store_config cfg = { .codec = codecs[c],
						       .allocator = backends[b] };
			struct zm_store *s = test_store_mk(&cfg, N + 8);
			struct zm_store_stats ss;

			for (size_t i = 0; i < N; i++)
				assert_int_equal(zm_store_put(s, i, mix + i * PS), 0);
			assert_int_equal(zm_store_check(s), 0);
			for (size_t i = 0; i < N; i++)
				expect_page(s, i, mix + i * PS);
			for (size_t i = N; i < N + 8; i++)
				expect_zero(s, i);
			/* overwrite in another order, then read again */
			for (size_t i = 0; i < N; i++)
				assert_int_equal(zm_store_put(s, i, mix + ((i * 7 + 3) % N) * PS), 0);
			for (size_t i = 0; i < N; i++)
				expect_page(s, i, mix + ((i * 7 + 3) % N) * PS);
			assert_int_equal(zm_store_check(s), 0);
			zm_store_stats(s, &ss);
			assert_int_equal(ss.pages_stored, N);
			assert_int_equal(ss.same_pages, N / 4);
			assert_int_equal(ss.failed_reads + ss.failed_writes, 0);
			assert_int_equal(ss.puts, 2 * N);
			assert_true(ss.gets >= 2 * N);
			/* the random quarter cannot compress */
			assert_true(ss.huge_pages >= N / 4);
			if (!strcmp(codecs[c], "none"))
				assert_int_equal(ss.huge_pages, N - N / 4);
			printf("%-5s %-9s compr %7llu pool %7llu huge %3llu\n", codecs[c],
			       backends[b], (unsigned long long)ss.compr_data_size,
			       (unsigned long long)ss.mem_used_total,
			       (unsigned long long)ss.huge_pages);
			zm_store_destroy(s);
		}
	free(text), free(rnd), free(mix);
}

static void fill_words(uint8_t *p, uint64_t w)
{
	for (size_t i = 0; i < PS / 8; i++)
		memcpy(p + i * 8, &w, 8);
}

static void test_same_filled(void **st)
{
	for (int off = 0; off < 2; off++) {
		struct zm_store_config cfg = { .no_same_filled = off };
		struct zm_store *s = test_store_mk(&cfg, 16);
		struct zm_store_stats ss;
		uint8_t p[6][PS];
		unsigned kind;
		zm_handle_t h;

		memset(p[0], 0, PS);
		memset(p[1], 0xAB, PS);
		fill_words(p[2], 0x0123456789abcdefull);
		/* almost same: one byte differs near the end / in the middle */
		memset(p[3], 0, PS);
		p[3][PS - 20] = 1;
		memset(p[4], 0xAB, PS);
		p[4][PS / 2 + 3] = 0;
		fill_words(p[5], 0xffffffff00000000ull);
		p[5][PS - 1] = 0;
		for (int i = 0; i < 6; i++)
			assert_int_equal(zm_store_put(s, (uint64_t)i, p[i]), 0);
		for (int i = 0; i < 6; i++)
			expect_page(s, (uint64_t)i, p[i]);
		assert_int_equal(zm_store_check(s), 0);
		zm_store_stats(s, &ss);
		assert_int_equal(ss.same_pages, off ? 0 : 3);
		assert_int_equal(ss.pages_stored, 6);
		assert_int_equal(ss.pool_objects, off ? 6 : 3);
		assert_int_equal(zm_store_slot_info(s, 1, &kind, &h, NULL), 0);
		assert_int_equal(kind, off ? ZM_STORE_SLOT_POOL : ZM_STORE_SLOT_SAME);
		if (off) {
			assert_true(h != 0);
		} else {  /* a same-filled slot reports its word */
			uint64_t w;

			memcpy(&w, p[1], sizeof(w));
			assert_int_equal(h, w);
		}
		/* a same-filled page replaces a pool page and back */
		assert_int_equal(zm_store_put(s, 3, p[1]), 0);
		expect_page(s, 3, p[1]);
		assert_int_equal(zm_store_put(s, 1, p[3]), 0);
		expect_page(s, 1, p[3]);
		assert_int_equal(zm_store_check(s), 0);
		zm_store_destroy(s);
	}
}

static void test_huge(void **st)
{
	enum { N = 32 };
	uint8_t *rnd = random_pages(N, 5), *text = text_pages(N, 0.75, 6);
	struct zm_store_config cfg = { 0 };
	struct zm_store *s = test_store_mk(&cfg, 2 * N);
	struct zm_store_stats ss;
	unsigned kind;
	size_t len;

	for (size_t i = 0; i < N; i++) {
		assert_int_equal(zm_store_put(s, i, rnd + i * PS), 0);
		assert_int_equal(zm_store_put(s, N + i, text + i * PS), 0);
	}
	zm_store_stats(s, &ss);
	assert_int_equal(ss.huge_pages, N);
	assert_int_equal(ss.huge_pages_since, N);
	assert_int_equal(ss.hist[ZM_STORE_HIST_BUCKETS - 1], N);
	assert_true(ss.compr_data_size > (uint64_t)N * PS + N * PS / 2);
	assert_int_equal(zm_store_slot_info(s, 0, &kind, NULL, &len), 0);
	assert_int_equal(kind, ZM_STORE_SLOT_HUGE);
	assert_int_equal(len, PS);
	assert_int_equal(zm_store_slot_info(s, N, &kind, NULL, &len), 0);
	assert_int_equal(kind, ZM_STORE_SLOT_POOL);
	assert_true(len > PS / 2 && len < PS);
	for (size_t i = 0; i < N; i++)
		expect_page(s, i, rnd + i * PS);
	/* huge pages leave: counted down, the "since" count stays */
	assert_int_equal(zm_store_discard(s, 0, N / 2), 0);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.huge_pages, N / 2);
	assert_int_equal(ss.huge_pages_since, N);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);

	/* a lower threshold: text compressing to 75% is stored raw */
	cfg.huge_size = PS / 2;
	s = test_store_mk(&cfg, N);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, i, text + i * PS), 0);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.huge_pages, N);
	for (size_t i = 0; i < N; i++)
		expect_page(s, i, text + i * PS);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
	free(rnd), free(text);
}

static void test_policy(void **st)
{
	uint8_t *t75 = text_pages(8, 0.75, 7), *t10 = text_pages(8, 0.10, 8);
	uint8_t *t50 = text_pages(8, 0.5, 9), *rnd = random_pages(2, 10);
	struct zm_store_config cfg = { .max_zsize = PS / 2 };
	struct zm_store *s = test_store_mk(&cfg, 16);
	struct zm_store_stats ss;

	/* max_zsize: pages compressing worse than half a page are refused,
	 * and the slot keeps what it had */
	assert_int_equal(zm_store_put(s, 0, t10), 0);
	assert_int_equal(zm_store_put(s, 0, t75), -E2BIG);
	assert_int_equal(zm_store_put(s, 1, rnd), -E2BIG);
	assert_int_equal(zm_store_put(s, 2, t50 + PS), -E2BIG); /* ~2048 + slack */
	expect_page(s, 0, t10);
	expect_zero(s, 1);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.reject_zsize, 3);
	assert_int_equal(ss.failed_writes, 3);
	assert_int_equal(ss.pages_stored, 1);
	assert_int_equal(ss.huge_pages, 0);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);

	/* max_mean_zsize: a poor page is refused only while the mean is high */
	cfg = (struct zm_store_config){ .max_mean_zsize = PS / 4 };
	s = test_store_mk(&cfg, 16);
	assert_int_equal(zm_store_put(s, 0, t10), 0);        /* ~410 */
	assert_int_equal(zm_store_put(s, 1, t50), 0);        /* mean 410: ok */
	assert_int_equal(zm_store_put(s, 2, t50 + PS), -E2BIG); /* mean ~1230 */
	assert_int_equal(zm_store_put(s, 2, t10 + PS), 0);   /* good pages pass */
	assert_int_equal(zm_store_put(s, 3, t10 + 2 * PS), 0);
	assert_int_equal(zm_store_put(s, 4, t10 + 3 * PS), 0);
	assert_int_equal(zm_store_put(s, 5, t50 + 2 * PS), 0); /* mean back to ~740 */
	zm_store_stats(s, &ss);
	assert_int_equal(ss.reject_mean, 1);
	assert_int_equal(ss.reject_zsize, 0);
	expect_page(s, 1, t50);
	expect_page(s, 2, t10 + PS);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);

	/* max_zsize above huge_size: the band between is stored raw */
	cfg = (struct zm_store_config){ .max_zsize = PS, .huge_size = PS / 2 };
	s = test_store_mk(&cfg, 16);
	assert_int_equal(zm_store_put(s, 0, t75), 0);
	assert_int_equal(zm_store_put(s, 1, rnd), -E2BIG);
	assert_int_equal(zm_store_put(s, 2, t10), 0);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.huge_pages, 1);
	assert_int_equal(ss.reject_zsize, 1);
	expect_page(s, 0, t75);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
	free(t75), free(t10), free(t50), free(rnd);
}

/* Fill to the limit with each backend: the failing put changes nothing. */
static void test_limit(void **st)
{
	const char *const *backends = zm_pool_backends();
	enum { N = 256, LIMIT_PAGES = 48 };
	uint8_t *rnd = random_pages(N, 11), *text = text_pages(N, 0.5, 12);

	for (int b = 0; backends[b]; b++)
		for (int kind = 0; kind < 2; kind++) {
			uint8_t *src = kind ? text : rnd;
			struct zm_store_config cfg = { .allocator = backends[b],
						       .limit_bytes = LIMIT_PAGES * PS };
			struct zm_store *s = test_store_mk(&cfg, N);
			struct zm_store_stats ss;
			uint8_t zero[PS] = { 0 };
			size_t n = 0;
			int rc;

			while ((rc = zm_store_put(s, n, src + n * PS)) == 0)
				assert_true(++n < N);
			assert_int_equal(rc, -ENOSPC);
			/* (the pages layer counts pages in its per-thread
			 * caches against the limit: not all of it is usable) */
			assert_true(n >= LIMIT_PAGES / 2);
			/* the failed slot is still empty, the others intact */
			expect_zero(s, n);
			for (size_t i = 0; i < n; i++)
				expect_page(s, i, src + i * PS);
			/* an overwrite that does not fit keeps the old page */
			rc = zm_store_put(s, 0, src + (N - 1) * PS);
			if (rc) {
				assert_int_equal(rc, -ENOSPC);
				expect_page(s, 0, src);
			} else {
				expect_page(s, 0, src + (N - 1) * PS);
				assert_int_equal(zm_store_put(s, 0, src), 0);
			}
			/* same-filled pages need no memory: still accepted */
			assert_int_equal(zm_store_put(s, n, zero), 0);
			zm_store_stats(s, &ss);
			assert_true(ss.limit_fails >= 1);
			assert_int_equal(ss.mem_limit, LIMIT_PAGES * PS);
			assert_true(ss.compr_data_size <= LIMIT_PAGES * PS);
			assert_true(ss.mem_used_total <= LIMIT_PAGES * PS ||
				    !strcmp(backends[b], "malloc"));
			assert_true(ss.mem_used_max >= ss.mem_used_total);
			assert_int_equal(zm_store_check(s), 0);
			/* discarding makes room again */
			assert_int_equal(zm_store_discard(s, 0, n / 2), 0);
			assert_int_equal(zm_store_put(s, n + 1, src + (n + 1) * PS), 0);
			expect_page(s, n + 1, src + (n + 1) * PS);
			assert_int_equal(zm_store_check(s), 0);
			printf("%-9s %s: %zu pages fit in %d pages\n", backends[b],
			       kind ? "text 0.5" : "random", n, LIMIT_PAGES);
			zm_store_destroy(s);
		}
	free(rnd), free(text);
}

/* The limit changed at run time (zram's mem_limit), and mem_used_max
 * started over (zram's reset). */
/* A store with a limit compacts by itself after a mass discard: its pool
 * (zsmalloc, the default RATIO policy) makes no mixed zspages under a
 * limit, the path of the automatic pass that must still say what it
 * emptied (make check-memcheck runs this under valgrind). */
static void test_limit_auto_compact(void **st)
{
	enum { N = 2048 };
	uint8_t *text = text_pages(N, 0.5, 21);
	struct zm_store_config cfg = { .limit_bytes = 6u << 20 };  /* below the arena */
	struct zm_store *s = test_store_mk(&cfg, N);
	struct zm_store_stats ss;

	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, i, text + i * PS), 0);
	for (uint64_t i = 0; i < N; i++)
		if (i % 4)
			assert_int_equal(zm_store_discard(s, i, 1), 0);
	/* the worker looks every 50 ms; valgrind makes that slow */
	for (int t = 0; t < 2000; t++) {
		zm_store_stats(s, &ss);
		if (ss.pages_compacted)
			break;
		usleep(5000);
	}
	assert_true(ss.pages_compacted > 0);
	for (uint64_t i = 0; i < N; i += 4)
		expect_page(s, i, text + i * PS);
	zm_store_destroy(s);
	free(text);
}

static void test_limit_runtime(void **st)
{
	enum { N = 256 };
	uint8_t *text = text_pages(N, 0.5, 21);
	struct zm_store_config cfg = { 0 };
	struct zm_store *s = test_store_mk(&cfg, N);
	struct zm_store_stats ss;
	size_t n = 0, limit;
	int rc;

	for (; n < 64; n++)
		assert_int_equal(zm_store_put(s, n, text + n * PS), 0);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.mem_limit, 0);
	limit = ss.compr_data_size + 8 * PS;
	assert_int_equal(zm_store_set_limit(s, limit), 0);
	while ((rc = zm_store_put(s, n, text + n * PS)) == 0)
		assert_true(++n < N);
	assert_int_equal(rc, -ENOSPC);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.mem_limit, limit);
	assert_true(ss.compr_data_size <= limit);
	assert_true(n > 64 && n < 64 + 24);  /* 8 pages of room, half-size pages */
	assert_int_equal(zm_store_set_limit(s, 0), 0);  /* no limit: room again */
	assert_int_equal(zm_store_put(s, n, text + n * PS), 0);
	assert_int_equal(zm_store_check(s), 0);
	/* mem_used_max starts over from what is used now */
	assert_int_equal(zm_store_discard(s, 0, N), 0);
	assert_int_equal(zm_store_compact(s) >= 0, 1);
	zm_store_stats(s, &ss);
	assert_true(ss.mem_used_max > ss.mem_used_total);
	assert_int_equal(zm_store_reset_max(s), 0);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.mem_used_max, ss.mem_used_total);
	zm_store_destroy(s);

	/* created with a limit: lowered or raised back to it, not beyond */
	cfg.limit_bytes = 32 * PS;
	s = test_store_mk(&cfg, N);
	assert_int_equal(zm_store_set_limit(s, 64 * PS), -EINVAL);
	assert_int_equal(zm_store_set_limit(s, 0), -EINVAL);
	assert_int_equal(zm_store_set_limit(s, 16 * PS), 0);
	assert_int_equal(zm_store_set_limit(s, 32 * PS), 0);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.mem_limit, 32 * PS);
	zm_store_destroy(s);
	free(text);
}

static void test_discard(void **st)
{
	enum { N = 64 };
	uint8_t *text = text_pages(N, 0.3, 13);
	struct zm_store_config cfg = { 0 };
	struct zm_store *s = test_store_mk(&cfg, N);
	struct zm_store_stats ss;
	uint8_t ab[PS];

	memset(ab, 0xAB, PS);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, i, i % 5 ? text + i * PS : ab), 0);
	assert_int_equal(zm_store_discard(s, 10, 20), 0);
	assert_int_equal(zm_store_discard(s, 0, 0), 0);
	assert_int_equal(zm_store_discard(s, 20, 5), 0); /* already empty */
	assert_int_equal(zm_store_discard(s, N - 1, 2), -EINVAL);
	for (size_t i = 0; i < N; i++)
		if (i >= 10 && i < 30)
			expect_zero(s, i);
		else
			expect_page(s, i, i % 5 ? text + i * PS : ab);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.pages_stored, N - 20);
	assert_int_equal(ss.same_pages, N / 5 + 1 - 4);
	assert_int_equal(ss.discards, 25);
	assert_int_equal(zm_store_check(s), 0);
	/* everything: the pool is empty again */
	assert_int_equal(zm_store_discard(s, 0, N), 0);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.pages_stored, 0);
	assert_int_equal(ss.compr_data_size, 0);
	assert_int_equal(ss.pool_objects, 0);
	assert_int_equal(ss.mem_used_total, 0);
	for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++)
		assert_int_equal(ss.hist[b], 0);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
	free(text);
}

/* zm_store_next_used against a reference model: random puts (data, zero
 * and same-filled pages) and discards over a store whose slots span many
 * OS pages, then random ranges asked of both. */
static void test_next_used(void **st)
{
	enum { N = 1u << 16 };  /* 128 OS pages of slots */
	uint8_t *text = text_pages(1, 0.3, 17), zero[PS] = { 0 };
	bool *used = calloc(N, sizeof(bool));
	struct zm_store_config cfg = { 0 };
	struct zm_store *s = test_store_mk(&cfg, N);
	uint64_t seed = 0x5eed5eedull, next;
	struct rng r;

	assert_non_null(used);
	rng_seed(&r, seed);
	printf("next_used: seed %llu\n", (unsigned long long)seed);
	assert_int_equal(zm_store_next_used(s, 0, N, &next), 0);
	assert_int_equal(next, N);  /* empty: nothing anywhere */
	assert_int_equal(zm_store_next_used(s, 0, 1ull << 40, &next), 0);
	assert_int_equal(next, N);  /* end is capped */
	assert_int_equal(zm_store_next_used(s, 0, N, NULL), -EINVAL);
	for (int round = 0; round < 40; round++) {
		for (int k = 0; k < 50; k++) {  /* clustered puts, like a disk's */
			uint64_t at = rng_below(&r, N), n = 1 + rng_below(&r, 8);

			for (uint64_t i = at; i < at + n && i < N; i++) {
				assert_int_equal(zm_store_put(s, i, i % 3 ? text : zero), 0);
				used[i] = true;
			}
		}
		for (int k = 0; k < 10; k++) {
			uint64_t at = rng_below(&r, N), n = rng_below(&r, 4096);

			n = at + n > N ? N - at : n;
			assert_int_equal(zm_store_discard(s, at, n), 0);
			memset(used + at, 0, n);
		}
		for (int q = 0; q < 200; q++) {
			uint64_t from = rng_below(&r, N), end = from + rng_below(&r, N), want = from;

			end = end > N ? N : end;
			while (want < end && !used[want])
				want++;
			assert_int_equal(zm_store_next_used(s, from, end, &next), 0);
			assert_int_equal(next, want < end ? want : end);
		}
	}
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
	free(used);
	free(text);
}

/* Damage a slot's compressed object in the pool. */
static void corrupt(struct zm_store *s, uint64_t idx, int how, struct rng *r)
{
	zm_handle_t h;
	unsigned kind;
	size_t len;
	uint8_t *m;

	assert_int_equal(zm_store_slot_info(s, idx, &kind, &h, &len), 0);
	assert_int_equal(kind, ZM_STORE_SLOT_POOL);
	m = zm_pool_map(zm_store_pool(s), h, ZM_MAP_RW);
	assert_non_null(m);
	if (how == 0) {
		memset(m, 0xFF, len);          /* garbage throughout */
	} else {
		for (int k = 0; k < 8; k++)    /* a few flipped bytes */
			m[rng_below(r, len)] ^= (uint8_t)(1 + rng_below(r, 255));
	}
	zm_pool_unmap(zm_store_pool(s), h);
}

static void test_corrupt(void **st)
{
	const char *const *codecs = zm_codec_list();
	const char *const *backends = zm_pool_backends();
	enum { N = 16 };
	uint8_t *text = text_pages(N, 0.4, 14);
	struct rng r;

	rng_seed(&r, 15);
	for (int c = 0; codecs[c]; c++) {
		if (!strcmp(codecs[c], "none"))
			continue; /* stores raw: nothing to decode, nothing to detect */
		for (int b = 0; backends[b]; b++) {
			struct zm_store_config cfg = { .codec = codecs[c],
						       .allocator = backends[b] };
			struct zm_store *s = test_store_mk(&cfg, N);
			struct zm_store_stats ss;
			uint8_t out[PS];
			int rc;

			for (size_t i = 0; i < N; i++)
				assert_int_equal(zm_store_put(s, i, text + i * PS), 0);
			corrupt(s, 3, 0, &r);
			assert_int_equal(zm_store_get(s, 3, out), -EIO);
			assert_int_equal(zm_store_get(s, 3, out), -EIO);
			/* flipped bytes: an error or wrong data, never a crash */
			for (uint64_t i = 8; i < N; i++) {
				corrupt(s, i, 1, &r);
				rc = zm_store_get(s, i, out);
				assert_true(rc == 0 || rc == -EIO);
			}
			for (size_t i = 0; i < 8; i++)
				if (i != 3)
					expect_page(s, i, text + i * PS);
			zm_store_stats(s, &ss);
			assert_true(ss.failed_reads >= 2);
			/* a new page heals the slot */
			assert_int_equal(zm_store_put(s, 3, text + 3 * PS), 0);
			expect_page(s, 3, text + 3 * PS);
			assert_int_equal(zm_store_check(s), 0);
			zm_store_destroy(s);
		}
	}
	free(text);
}

static void test_stats(void **st)
{
	enum { N = 40 };
	uint8_t *text = text_pages(N, 0.6, 16), *rnd = random_pages(4, 17);
	struct zm_store_config cfg = { 0 };
	struct zm_store *s = test_store_mk(&cfg, N + 8);
	struct zm_store_stats ss;
	uint64_t compr = 0, hist[ZM_STORE_HIST_BUCKETS] = { 0 }, v[9];
	uint8_t zero[PS] = { 0 };
	char line[256];
	long rc;
	FILE *f;

	for (size_t i = 0; i < N; i++) {
		size_t len;

		assert_int_equal(zm_store_put(s, i, text + i * PS), 0);
		assert_int_equal(zm_store_slot_info(s, i, NULL, NULL, &len), 0);
		compr += len;
		hist[(len - 1) * ZM_STORE_HIST_BUCKETS / PS]++;
	}
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(zm_store_put(s, N + i, rnd + i * PS), 0);
	assert_int_equal(zm_store_put(s, N + 4, zero), 0);
	hist[ZM_STORE_HIST_BUCKETS - 1] += 4;
	compr += 4 * PS;
	zm_store_stats(s, &ss);
	assert_int_equal(ss.orig_data_size, (N + 5) * PS);
	assert_int_equal(ss.compr_data_size, compr);
	assert_true(ss.mem_used_total >= compr);
	assert_true(ss.mem_used_total < compr * 2);
	assert_int_equal(ss.mem_limit, 0);
	assert_true(ss.mem_used_max >= ss.mem_used_total);
	assert_int_equal(ss.same_pages, 1);
	assert_int_equal(ss.huge_pages, 4);
	assert_int_equal(ss.pool_objects, N + 4);
	assert_true(ss.pool_meta_bytes > 0);
	assert_true(ss.store_meta_bytes >= (N + 8) * 12);
	assert_int_equal(ss.nr_pages, N + 8);
	assert_int_equal(ss.page_size, PS);
	assert_memory_equal(ss.hist, hist, sizeof(hist));

	/* mm_stat: one line of nine numbers, in zram's order */
	f = tmpfile();
	zm_store_print_mm_stat(&ss, f);
	rewind(f);
	assert_non_null(fgets(line, sizeof(line), f));
	assert_int_equal(sscanf(line, "%lu %lu %lu %lu %lu %lu %lu %lu %lu", &v[0], &v[1],
				&v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]), 9);
	assert_int_equal(v[0], ss.orig_data_size);
	assert_int_equal(v[1], ss.compr_data_size);
	assert_int_equal(v[2], ss.mem_used_total);
	assert_int_equal(v[5], 1);
	assert_int_equal(v[7], 4);
	fclose(f);
	f = tmpfile();
	zm_store_print_stats(&ss, f);
	assert_true(ftell(f) > 500);
	fclose(f);
	zm_store_print_stats(&ss, stdout);
	zm_store_print_mm_stat(&ss, stdout);

	/* compaction: supported by zsmalloc, counted */
	assert_int_equal(zm_store_discard(s, 0, N / 2), 0);
	rc = zm_store_compact(s);
	assert_true(rc >= 0 || rc == -EOPNOTSUPP);
	zm_store_stats(s, &ss);
	assert_int_equal(ss.pages_stored, N / 2 + 5);
	assert_int_equal(zm_store_check(s), 0);
	zm_store_destroy(s);
	free(text), free(rnd);
}

/* Larger pages: 16 KiB and 64 KiB, a same-filled page of each. */
static void test_page_sizes(void **st)
{
	static const size_t sizes[] = { 16384, 65536 };

	for (size_t k = 0; k < 2; k++) {
		size_t ps = sizes[k];
		struct zm_store_config cfg = { .page_size = ps };
		struct zm_store *s = test_store_mk(&cfg, 8);
		uint8_t *in = malloc(4 * ps), *out = malloc(ps);
		struct zm_store_stats ss;

		assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.5, NULL, 3, in, ps,
					       ps, NULL), 0);
		memset(in + ps, 0x11, ps);
		for (size_t i = 0; i < ps; i++)
			in[2 * ps + i] = (uint8_t)((i * 2654435761u) >> 13);
		memset(in + 3 * ps, 0, ps);
		in[3 * ps + ps - 1] = 9;
		for (uint64_t i = 0; i < 4; i++)
			assert_int_equal(zm_store_put(s, i, in + i * ps), 0);
		for (uint64_t i = 0; i < 4; i++) {
			assert_int_equal(zm_store_get(s, i, out), 0);
			assert_memory_equal(out, in + i * ps, ps);
		}
		zm_store_stats(s, &ss);
		assert_int_equal(ss.same_pages, 1);
		assert_int_equal(ss.orig_data_size, 4 * ps);
		assert_int_equal(zm_store_check(s), 0);
		zm_store_destroy(s);
		free(in), free(out);
	}
}

int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_bad),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_same_filled),
		cmocka_unit_test(test_huge),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_limit_runtime),
		cmocka_unit_test(test_limit_auto_compact),
		cmocka_unit_test(test_discard),
		cmocka_unit_test(test_next_used),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_page_sizes),
	};

	return test_run_selected("store", tests);
}
