/*
 * The library's promises at its boundary, on every backend: handles of
 * another pool, stale handles (also after their slot is reused) and
 * garbage are refused without touching any live object; NULL is refused
 * by every public call (one table); structs passed with their size grow
 * safely; the version and the log sink.  Seeded: --seed N replays the
 * garbage handles.
 */
#define ZMEM_ADVANCED  /* tests reach the advanced tier too */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pooltest.h"
#include <zmem/zmem.h>
#include "workload/workload.h"  /* not libzmem's, but held to its rules */

static uint64_t seed;

static struct zm_pool *mk(const struct zm_pool_config *c)
{
	struct zm_pool *p = NULL;

	assert_int_equal(zm_pool_create(c, &p), 0);
	return p;
}

/* n objects with cookies in p */
static void fill(struct zm_pool *p, struct pt_obj *o, size_t n, uint64_t tag)
{
	uint8_t buf[512];

	for (size_t i = 0; i < n; i++) {
		o[i].size = 50 + i * 37 % 400;
		o[i].cookie = tag * 1000 + i;
		o[i].h = zm_pool_alloc(p, o[i].size);
		assert_true(o[i].h);
		pt_fill(buf, o[i].size, o[i].cookie);
		assert_int_equal(zm_pool_write(p, o[i].h, buf, o[i].size), 0);
	}
}

static void expect_intact(struct zm_pool *p, const struct pt_obj *o, size_t n)
{
	uint8_t buf[512];

	for (size_t i = 0; i < n; i++) {
		assert_int_equal(zm_pool_read(p, o[i].h, buf, o[i].size), 0);
		assert_int_equal(pt_check(buf, o[i].size, o[i].cookie), 0);
	}
	assert_int_equal(zm_pool_check(p), 0);
}

/* Every call that takes a handle refuses h on p. */
static void expect_refused(struct zm_pool *p, zm_handle_t h)
{
	uint8_t buf[64] = { 0 };

	assert_int_equal(zm_pool_free(p, h), -EINVAL);
	assert_int_equal(zm_pool_read(p, h, buf, 8), -EINVAL);
	assert_int_equal(zm_pool_write(p, h, buf, 8), -EINVAL);
	errno = 0;
	assert_null(zm_pool_map(p, h, ZM_MAP_RW));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(zm_pool_obj_size(p, h), 0);
	zm_pool_unmap(p, h);    /* not mapped: nothing happens */
}

enum { N = 40 };

/* Two pools of every pair of configurations, alive together: each
 * refuses the other's handles, which look alike inside their backends. */
static void test_foreign(void **st)
{
	for (size_t i = 0; i < PT_NCONFIGS; i++)
		for (size_t j = 0; j < PT_NCONFIGS; j++) {
			struct zm_pool *a = mk(&pt_configs[i]), *b = mk(&pt_configs[j]);
			struct pt_obj oa[N], ob[N];

			fill(a, oa, N, 1);
			fill(b, ob, N, 2);
			for (size_t k = 0; k < N; k++) {
				expect_refused(a, ob[k].h);
				expect_refused(b, oa[k].h);
			}
			expect_intact(a, oa, N);
			expect_intact(b, ob, N);
			for (size_t k = 0; k < N; k++) {
				assert_int_equal(zm_pool_free(a, oa[k].h), 0);
				assert_int_equal(zm_pool_free(b, ob[k].h), 0);
			}
			zm_pool_destroy(a);
			zm_pool_destroy(b);
		}
}

/* A destroyed pool's handles are refused by the pool created next. */
static void test_foreign_after_destroy(void **st)
{
	for (size_t i = 0; i < PT_NCONFIGS; i++) {
		struct zm_pool *a = mk(&pt_configs[i]), *b;
		struct pt_obj oa[N], ob[N];

		fill(a, oa, N, 1);
		zm_pool_destroy(a);             /* with live objects */
		b = mk(&pt_configs[i]);
		fill(b, ob, N, 2);
		for (size_t k = 0; k < N; k++)
			expect_refused(b, oa[k].h);
		expect_intact(b, ob, N);
		for (size_t k = 0; k < N; k++)
			assert_int_equal(zm_pool_free(b, ob[k].h), 0);
		zm_pool_destroy(b);
	}
}

/* Stale handles: freed, freed twice, and after their slot, page or
 * address has been handed out again (many times). */
static void test_stale_and_reused(void **st)
{
	for (size_t i = 0; i < PT_NCONFIGS; i++) {
		struct zm_pool *p = mk(&pt_configs[i]);
		struct pt_obj o[N];
		zm_handle_t stale[64];
		size_t ns = 0;

		fill(p, o, N, 3);
		for (int round = 0; round < 2000; round++) {
			zm_handle_t h = zm_pool_alloc(p, 100);

			assert_true(h);
			for (size_t k = 0; k < ns; k++)
				assert_true(h != stale[k]);
			assert_int_equal(zm_pool_free(p, h), 0);
			if (ns < 64 && round % 31 == 0)
				stale[ns++] = h;
		}
		for (size_t k = 0; k < ns; k++)
			expect_refused(p, stale[k]);
		expect_intact(p, o, N);
		for (size_t k = 0; k < N; k++)
			assert_int_equal(zm_pool_free(p, o[k].h), 0);
		zm_pool_destroy(p);
	}
}

/* Garbage: fixed values, and live handles with bits flipped (seeded). */
static void test_garbage(void **st)
{
	static const zm_handle_t fixed[] = {
		0, 1, 2, 3, 0x12345678, 0xdeadbeef00001ull, ~0ull, 1ull << 63,
		0x2000001, 0xfff0000000000001ull,
	};
	struct rng r;

	rng_seed(&r, seed);
	for (size_t i = 0; i < PT_NCONFIGS; i++) {
		struct zm_pool *p = mk(&pt_configs[i]);
		struct pt_obj o[N];

		fill(p, o, N, 4);
		for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++) {
			int live = 0;

			for (size_t m = 0; m < N; m++)
				live |= fixed[k] == o[m].h;
			if (!live)
				expect_refused(p, fixed[k]);
		}
		for (int k = 0; k < 2000; k++) {
			/* a live handle with one of its high (pool id) bits
			 * flipped: another pool's id, never this one's */
			zm_handle_t h = o[rng_below(&r, N)].h ^ (1ull << (52 + rng_below(&r, 12)));

			expect_refused(p, h);
		}
		expect_intact(p, o, N);
		for (size_t k = 0; k < N; k++)
			assert_int_equal(zm_pool_free(p, o[k].h), 0);
		zm_pool_destroy(p);
	}
}

/* Handles freed on another thread are handed out again: the malloc
 * backend's table must not grow when one thread allocates and another
 * frees. */
struct cross { struct zm_pool *p; zm_handle_t *h; size_t n; };

static void *free_all(void *arg)
{
	struct cross *c = arg;

	for (size_t i = 0; i < c->n; i++)
		assert_int_equal(zm_pool_free(c->p, c->h[i]), 0);
	return NULL;
}

static void test_cross_thread_reuse(void **st)
{
	struct zm_pool_config cfg = { .allocator = "malloc" };
	struct cross c = { mk(&cfg), calloc(20000, sizeof(zm_handle_t)), 20000 };
	struct zm_pool_stats s1, s2;

	for (int round = 0; round < 5; round++) {
		pthread_t t;

		for (size_t i = 0; i < c.n; i++)
			assert_true(c.h[i] = zm_pool_alloc(c.p, 64));
		assert_int_equal(pthread_create(&t, NULL, free_all, &c), 0);
		pthread_join(t, NULL);
		zm_pool_stats(c.p, round == 0 ? &s1 : &s2);
	}
	assert_int_equal(s2.objects, 0);
	assert_true(s2.meta_bytes <= s1.meta_bytes);
	zm_pool_destroy(c.p);
	free(c.h);
}

/* ---- NULL, one table for every public call ---------------------------- */

static zm_pfn_t pfn;
static uint8_t page[4096];
static zm_handle_t null_h;
static size_t null_n;

/* The region's wrappers pass the call through: a bad fd is EBADF, or
 * EFAULT where the system looks at the buffer first (qemu-user does). */
#define BADF_OR_FAULT (errno == EBADF || errno == EFAULT)

/* X(call, expression true when the call refused NULL as zmem.h says) */
#define NULL_CASES(X) \
	X("zm_pages_create(out NULL)", zm_pages_create(NULL, NULL) == -EINVAL) \
	X("zm_pages_destroy(NULL)", (zm_pages_destroy(NULL), 1)) \
	X("zm_pages_alloc(NULL)", zm_pages_alloc(NULL, &pfn) == -EINVAL) \
	X("zm_pages_free(NULL)", zm_pages_free(NULL, 1) == -EINVAL) \
	X("zm_pages_alloc_at(NULL)", zm_pages_alloc_at(NULL, 1) == -EINVAL) \
	X("zm_pages_take_cached(NULL)", zm_pages_take_cached(NULL, 1) == -EINVAL) \
	X("zm_pages_alloc_run(NULL)", zm_pages_alloc_run(NULL, 2, &pfn) == -EINVAL) \
	X("zm_pages_alloc_order(NULL)", zm_pages_alloc_order(NULL, 1, &pfn) == -EINVAL) \
	X("zm_pages_free_order(NULL)", zm_pages_free_order(NULL, 1, 0) == -EINVAL) \
	X("zm_pages_alloc_bulk(NULL)", zm_pages_alloc_bulk(NULL, 4, &pfn) == 0) \
	X("zm_pages_free_bulk(NULL)", zm_pages_free_bulk(NULL, 1, &pfn) == -EINVAL) \
	X("zm_pages_addr(NULL)", zm_pages_addr(NULL, 0) == NULL) \
	X("zm_pages_pfn(NULL)", zm_pages_pfn(NULL, page) == UINT32_MAX) \
	X("zm_pages_meta(NULL)", zm_pages_meta(NULL, 0) == NULL) \
	X("zm_pages_page_size(NULL)", zm_pages_page_size(NULL) == 0) \
	X("zm_pages_flush_thread(NULL)", (zm_pages_flush_thread(NULL), 1)) \
	X("zm_pages_trim(NULL)", zm_pages_trim(NULL) == 0) \
	X("zm_pages_stats(NULL)", zm_pages_stats(NULL, &(struct zm_pages_stats){ 0 }) == -EINVAL) \
	X("zm_pages_check(NULL)", zm_pages_check(NULL) == -EINVAL) \
	X("zm_pool_create(out NULL)", zm_pool_create(NULL, NULL) == -EINVAL) \
	X("zm_pool_destroy(NULL)", (zm_pool_destroy(NULL), 1)) \
	X("zm_pool_alloc(NULL)", zm_pool_alloc(NULL, 10) == 0 && errno == EINVAL) \
	X("zm_pool_free(NULL)", zm_pool_free(NULL, 1) == -EINVAL) \
	X("zm_pool_write(NULL)", zm_pool_write(NULL, 1, page, 1) == -EINVAL) \
	X("zm_pool_read(NULL)", zm_pool_read(NULL, 1, page, 1) == -EINVAL) \
	X("zm_pool_map(NULL)", zm_pool_map(NULL, 1, ZM_MAP_RO) == NULL && errno == EINVAL) \
	X("zm_pool_unmap(NULL)", (zm_pool_unmap(NULL, 1), 1)) \
	X("zm_pool_obj_size(NULL)", zm_pool_obj_size(NULL, 1) == 0) \
	X("zm_pool_bind(NULL)", zm_pool_bind(NULL, 1, 0) == -EINVAL) \
	X("zm_pool_key_handle(NULL)", zm_pool_key_handle(NULL, 0) == 0) \
	X("zm_pool_free_key(NULL)", zm_pool_free_key(NULL, 0) == -EINVAL) \
	X("zm_pool_compact(NULL)", zm_pool_compact(NULL) == -EINVAL) \
	X("zm_pool_shrink(NULL)", zm_pool_shrink(NULL, 1) == -EINVAL) \
	X("zm_pool_min_moves(NULL)", zm_pool_min_moves(NULL, 1) == -EINVAL) \
	X("zm_pool_set_compaction(NULL)", zm_pool_set_compaction(NULL, ZM_COMPACT_OFF) == -EINVAL) \
	X("zm_pool_stats(NULL)", zm_pool_stats(NULL, &(struct zm_pool_stats){ 0 }) == -EINVAL) \
	X("zm_pool_nr_classes(NULL)", zm_pool_nr_classes(NULL) == 0) \
	X("zm_pool_class_stats(NULL)", \
	     zm_pool_class_stats(NULL, 0, &(struct zm_pool_class_stats){ 0 }) == -EINVAL) \
	X("zm_pool_print_classes(NULL)", (zm_pool_print_classes(NULL, stdout), 1)) \
	X("zm_pool_check(NULL)", zm_pool_check(NULL) == -EINVAL) \
	X("zm_pool_unit(NULL)", zm_pool_unit(NULL, 1, &null_h, 1, &null_n) == -EINVAL) \
	X("zm_pool_backend(NULL)", zm_pool_backend(NULL) == NULL) \
	X("zm_codec_create(NULL)", zm_codec_create(NULL, 0, NULL) == -EINVAL) \
	X("zm_codec_destroy(NULL)", (zm_codec_destroy(NULL), 1)) \
	X("zm_codec_compress(NULL)", zm_codec_compress(NULL, page, 1, page, 1) == -EINVAL) \
	X("zm_codec_decompress(NULL)", zm_codec_decompress(NULL, page, 1, page, 1) == -EINVAL) \
	X("zm_codec_bound(NULL)", zm_codec_bound(NULL, 1) == 0) \
	X("zm_codec_name(NULL)", zm_codec_name(NULL) == NULL) \
	X("zm_codec_level(NULL)", zm_codec_level(NULL) == -EINVAL) \
	X("zm_store_create(NULL)", zm_store_create(NULL, NULL) == -EINVAL) \
	X("zm_store_destroy(NULL)", (zm_store_destroy(NULL), 1)) \
	X("zm_store_put(NULL)", zm_store_put(NULL, 0, page) == -EINVAL) \
	X("zm_store_get(NULL)", zm_store_get(NULL, 0, page) == -EINVAL) \
	X("zm_store_discard(NULL)", zm_store_discard(NULL, 0, 1) == -EINVAL) \
	X("zm_store_compact(NULL)", zm_store_compact(NULL) == -EINVAL) \
	X("zm_store_stats(NULL)", zm_store_stats(NULL, &(struct zm_store_stats){ 0 }) == -EINVAL) \
	X("zm_store_print_mm_stat(NULL)", (zm_store_print_mm_stat(NULL, stdout), 1)) \
	X("zm_store_print_stats(NULL)", (zm_store_print_stats(NULL, stdout), 1)) \
	X("zm_store_pool(NULL)", zm_store_pool(NULL) == NULL) \
	X("zm_store_codec(NULL)", zm_store_codec(NULL) == NULL) \
	X("zm_store_page_size(NULL)", zm_store_page_size(NULL) == 0) \
	X("zm_store_nr_pages(NULL)", zm_store_nr_pages(NULL) == 0) \
	X("zm_store_check(NULL)", zm_store_check(NULL) == -EINVAL) \
	X("zm_store_set_limit(NULL)", zm_store_set_limit(NULL, 0) == -EINVAL) \
	X("zm_store_reset_max(NULL)", zm_store_reset_max(NULL) == -EINVAL) \
	X("zm_store_next_used(NULL)", zm_store_next_used(NULL, 0, 1, &(uint64_t){ 0 }) == -EINVAL) \
	X("zm_tmem_create(out NULL)", zm_tmem_create(NULL, NULL) == -EINVAL) \
	X("zm_tmem_destroy(NULL)", (zm_tmem_destroy(NULL), 1)) \
	X("zm_tmem_pool_create(NULL)", \
	  zm_tmem_pool_create(NULL, &(struct zm_tmem_pool_config){ .kind = 1 }) == -EINVAL) \
	X("zm_tmem_pool_destroy(NULL)", zm_tmem_pool_destroy(NULL, 1) == -EINVAL) \
	X("zm_tmem_put(NULL)", zm_tmem_put(NULL, 1, 0, 0, page, 1) == -EINVAL) \
	X("zm_tmem_get(NULL)", zm_tmem_get(NULL, 1, 0, 0, page, 1) == -EINVAL) \
	X("zm_tmem_flush_page(NULL)", zm_tmem_flush_page(NULL, 1, 0, 0) == -EINVAL) \
	X("zm_tmem_flush_object(NULL)", zm_tmem_flush_object(NULL, 1, 0) == -EINVAL) \
	X("zm_tmem_flush_pool(NULL)", zm_tmem_flush_pool(NULL, 1) == -EINVAL) \
	X("zm_tmem_stats(NULL)", zm_tmem_stats(NULL, 0, &(struct zm_tmem_stats){ 0 }) == -EINVAL) \
	X("zm_tmem_check(NULL)", zm_tmem_check(NULL) == -EINVAL) \
	X("zm_region_create(NULL)", zm_region_create(NULL, NULL) == -EINVAL) \
	X("zm_region_create(cfg NULL)", \
	  zm_region_create(NULL, &(struct zm_region *){ NULL }) == -EINVAL) \
	X("zm_region_destroy(NULL)", (zm_region_destroy(NULL), 1)) \
	X("zm_region_base(NULL)", zm_region_base(NULL) == NULL) \
	X("zm_region_size(NULL)", zm_region_size(NULL) == 0) \
	X("zm_region_page_size(NULL)", zm_region_page_size(NULL) == 0) \
	X("zm_region_store(NULL)", zm_region_store(NULL) == NULL) \
	X("zm_region_reclaim(NULL)", zm_region_reclaim(NULL, 4096) == -EINVAL) \
	X("zm_region_discard(NULL)", zm_region_discard(NULL, 0, 4096) == -EINVAL) \
	X("zm_region_set_limit(NULL)", zm_region_set_limit(NULL, 0) == -EINVAL) \
	X("zm_region_stats(NULL)", \
	  zm_region_stats(NULL, &(struct zm_region_stats){ 0 }) == -EINVAL) \
	X("zm_region_print_stats(NULL)", (zm_region_print_stats(NULL, stdout), 1)) \
	X("zm_region_pin(NULL, 0)", zm_region_pin(NULL, 0, 0) == 0) \
	X("zm_region_unpin(NULL)", (zm_region_unpin(NULL, 0), 1)) \
	X("zm_region_read(buf NULL)", zm_region_read(-1, NULL, 1) == -1 && BADF_OR_FAULT) \
	X("zm_region_write(buf NULL)", zm_region_write(-1, NULL, 1) == -1 && BADF_OR_FAULT) \
	X("zm_region_pread(buf NULL)", zm_region_pread(-1, NULL, 1, 0) == -1 && BADF_OR_FAULT) \
	X("zm_region_pwrite(buf NULL)", zm_region_pwrite(-1, NULL, 1, 0) == -1 && BADF_OR_FAULT) \
	X("zm_region_readv(iov NULL)", zm_region_readv(-1, NULL, 1) == -1 && errno == EINVAL) \
	X("zm_region_writev(iov NULL)", zm_region_writev(-1, NULL, 1) == -1 && errno == EINVAL) \
	X("zm_region_recv(buf NULL)", zm_region_recv(-1, NULL, 1, 0) == -1 && BADF_OR_FAULT) \
	X("zm_region_send(buf NULL)", zm_region_send(-1, NULL, 1, 0) == -1 && BADF_OR_FAULT) \
	X("workload_create(out NULL)", workload_create(NULL, NULL) == -EINVAL) \
	X("workload_destroy(NULL)", (workload_destroy(NULL), 1)) \
	X("workload_next(NULL)", workload_next(NULL, page, 4096) == -EINVAL) \
	X("workload_kind_parse(NULL)", workload_kind_parse(NULL, NULL) == -EINVAL) \
	X("workload_stats(NULL)", \
	  workload_stats(NULL, &(struct workload_stats){ 0 }) == -EINVAL) \
	X("workload_capture(fn NULL)", workload_capture(1, 0, NULL, NULL, NULL) == -EINVAL) \
	X("workload_capture_mem(buf NULL)", \
	  workload_capture_mem(1, 0, NULL, NULL, NULL) == -EINVAL)

static const char *const null_calls[] = {
#define NAME(call, ok) call,
	NULL_CASES(NAME)
#undef NAME
};
#define NCASES (sizeof(null_calls) / sizeof(null_calls[0]))

/* Run case i: 1 if the call refused NULL as documented. */
static int run_case(size_t i)
{
	size_t k = 0;

#define RUN(call, ok) if (i == k++) return (ok);
	NULL_CASES(RUN)
#undef RUN
	return 0;
}

static void test_null_everywhere(void **st)
{
	size_t bad = 0;

	for (size_t i = 0; i < NCASES; i++) {
		errno = 0;
		if (!run_case(i)) {
			printf("not refused: %s\n", null_calls[i]);
			bad++;
		}
	}
	printf("%zu calls given NULL\n", NCASES);
	assert_int_equal(bad, 0);
}

/* NULL buffers with a live object and a real store. */
static void test_null_buffers(void **st)
{
	struct zm_store_config sc = { .nr_pages = 16 };
	struct zm_pool *p = mk(NULL);
	struct zm_store *s = NULL;
	zm_handle_t h = zm_pool_alloc(p, 100);

	assert_int_equal(zm_pool_write(p, h, NULL, 10), -EINVAL);
	assert_int_equal(zm_pool_read(p, h, NULL, 10), -EINVAL);
	assert_int_equal(zm_pool_stats(p, NULL), -EINVAL);
	assert_int_equal(zm_pool_class_stats(p, 0, NULL), -EINVAL);
	assert_int_equal(zm_pool_free(p, h), 0);
	zm_pool_destroy(p);
	assert_int_equal(zm_store_create(&sc, &s), 0);
	assert_int_equal(zm_store_put(s, 0, NULL), -EINVAL);
	assert_int_equal(zm_store_get(s, 0, NULL), -EINVAL);
	assert_int_equal(zm_store_stats(s, NULL), -EINVAL);
	zm_store_destroy(s);
}

/* ---- structs that grow ------------------------------------------------- */

static void test_sized_structs(void **st)
{
	struct {
		struct zm_pool_config c;
		uint64_t newer[4];
	} big = { { .allocator = "zbud" }, { 0 } };
	struct {
		struct zm_pool_stats s;
		uint64_t newer[4];
	} out;
	struct zm_pool *p = NULL;

	/* smaller than the first published layout */
	assert_int_equal(zm_pool_create_sized(&big.c, 8, &p), -EINVAL);
	assert_null(p);
	/* a newer caller's larger struct, its new fields unset: accepted */
	assert_int_equal(zm_pool_create_sized(&big.c, sizeof(big), &p), 0);
	assert_string_equal(zm_pool_backend(p), "zbud");
	/* stats into a larger struct: the tail is zeroed */
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(zm_pool_stats_sized(p, &out.s, sizeof(out)), 0);
	assert_int_equal(out.s.objects, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(out.newer[i], 0);
	assert_int_equal(zm_pool_stats_sized(p, &out.s, 4), -EINVAL);
	zm_pool_destroy(p);
	/* a newer field set that this library does not know: refused */
	big.newer[1] = 7;
	p = NULL;
	assert_int_equal(zm_pool_create_sized(&big.c, sizeof(big), &p), -E2BIG);
	assert_null(p);
}

/* ---- version and log --------------------------------------------------- */

static char logged[256];
static int nlogged;

static void catch_log(void *arg, enum zm_log_level level, const char *msg)
{
	assert_ptr_equal(arg, &nlogged);
	nlogged++;
	snprintf(logged, sizeof(logged), "%s", msg);
}

static void test_version_and_log(void **st)
{
	char v[32];
	struct zm_pool *p;

	assert_int_equal(zm_version(), ZMEM_VERSION_NUMBER);
	snprintf(v, sizeof(v), "%d.%d.%d", ZMEM_VERSION_MAJOR, ZMEM_VERSION_MINOR,
		 ZMEM_VERSION_PATCH);
	assert_string_equal(zm_version_string(), v);

	zm_set_log(catch_log, &nlogged);
	p = mk(NULL);
	assert_true(zm_pool_alloc(p, 10));
	zm_pool_destroy(p);    /* one live object: said, and released */
	assert_int_equal(nlogged, 1);
	assert_non_null(strstr(logged, "released"));
	assert_null(strstr(logged, "leak"));

	zm_set_log(NULL, NULL); /* silence */
	p = mk(NULL);
	assert_true(zm_pool_alloc(p, 10));
	zm_pool_destroy(p);
	assert_int_equal(nlogged, 1);
	zm_set_log(NULL, NULL);
}

/* ---- destroying twice ---------------------------------------------------
 * Undefined (pool.h, store.h, tmem.h); ZM_DEBUG builds name it in a message
 * and leave the memory alone, which ASan would flag if it were read. */

#if ZM_DEBUG >= 1
static void expect_named(const char *call, const char *kind)
{
	assert_int_equal(nlogged, 1);
	if (!strstr(logged, call) || !strstr(logged, kind) || !strstr(logged, "not live"))
		fail_msg("message '%s' does not name %s of a %s", logged, call, kind);
	nlogged = 0;
}
#endif

static void test_double_destroy(void **st)
{
#if ZM_DEBUG >= 1
	struct zm_store_config sc = { .nr_pages = 16 };
	struct zm_tmem_config tc = { .budget_bytes = 1 << 20 };
	struct zm_pool *p = mk(NULL), *q;
	struct zm_store *s = NULL;
	struct zm_tmem *t = NULL;
	_Alignas(64) char never[256] = { 0 };
	static char pagebuf[4096];
	zm_handle_t h;

	nlogged = 0;
	zm_set_log(catch_log, &nlogged);
	zm_pool_destroy(p);
	assert_int_equal(nlogged, 0);
	zm_pool_destroy(p);
	expect_named("zm_pool_destroy", "pool");
	/* a pool made since does not take the destroyed one's address, so a
	 * late second destroy cannot reach it */
	q = mk(NULL);
	assert_ptr_not_equal(q, p);
	h = zm_pool_alloc(q, 100);
	zm_pool_destroy(p);
	expect_named("zm_pool_destroy", "pool");
	assert_int_equal(zm_pool_free(q, h), 0);
	zm_pool_destroy(q);
	assert_int_equal(nlogged, 0);

	assert_int_equal(zm_store_create(&sc, &s), 0);
	assert_int_equal(zm_store_put(s, 1, pagebuf), 0);
	zm_store_destroy(s);
	assert_int_equal(nlogged, 0);
	zm_store_destroy(s);
	expect_named("zm_store_destroy", "store");

	assert_int_equal(zm_tmem_create(&tc, &t), 0);
	zm_tmem_destroy(t);
	assert_int_equal(nlogged, 0);
	zm_tmem_destroy(t);
	expect_named("zm_tmem_destroy", "tmem");

	/* never created at all */
	zm_pool_destroy((struct zm_pool *)(void *)never);
	expect_named("zm_pool_destroy", "pool");
	zm_set_log(NULL, NULL);
#else
	skip();   /* release builds do not look: undefined behaviour */
#endif
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_foreign),
		cmocka_unit_test(test_foreign_after_destroy),
		cmocka_unit_test(test_stale_and_reused),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_cross_thread_reuse),
		cmocka_unit_test(test_null_everywhere),
		cmocka_unit_test(test_null_buffers),
		cmocka_unit_test(test_sized_structs),
		cmocka_unit_test(test_version_and_log),
		cmocka_unit_test(test_double_destroy),
	};

	test_args(argc, argv, &seed, NULL);
	/* thousands of bad calls each get a message in ZM_DEBUG builds */
	zm_set_log(NULL, NULL);
	return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
