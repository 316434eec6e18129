/*
 * Compaction: contents identical after it, checker clean, memory really
 * returned (to the pages layer and to the OS), mapped objects left alone,
 * each automatic trigger firing when it should and not otherwise, and the
 * background thread stopping cleanly at destruction.
 */
#define ZMEM_ADVANCED  /* tests reach the advanced tier too */
#include <errno.h>

#include "pooltest.h"
#include <zmem/pages.h>

#define N 20000

static struct pt_obj objs[N];
static uint64_t g_seed;

static struct zm_pool *mk(enum zm_compact_policy pol, unsigned wm, unsigned ratio)
{
	struct zm_pool_config c = { .compact = pol, .compact_watermark = wm,
				    .compact_ratio = ratio, .arena_bytes = 1u << 30 };
	struct zm_pool *p;

	assert_int_equal(zm_pool_create(&c, &p), 0);
	return p;
}

/* The same without mixed zspages: tests of class zspages' layout. */
static struct zm_pool *mk_classes(enum zm_compact_policy pol, unsigned wm, unsigned ratio)
{
	struct zm_pool_config c = { .compact = pol, .compact_watermark = wm,
				    .compact_ratio = ratio, .arena_bytes = 1u << 30,
				    .mixed_zspages = -1 };
	struct zm_pool *p;

	assert_int_equal(zm_pool_create(&c, &p), 0);
	return p;
}

/* fill n objects of realistic sizes; returns bytes */
static uint64_t fill(struct zm_pool *p, size_t n, struct rng *r)
{
	uint8_t buf[4096];
	uint64_t bytes = 0;

	for (size_t i = 0; i < n; i++) {
		objs[i].size = pt_size(r, 4096);
		objs[i].cookie = rng_next(r);
		assert_int_equal(pt_put(p, &objs[i], buf), 0);
		bytes += objs[i].size;
	}
	return bytes;
}

/* free a random fraction (per mille); returns live bytes left */
static uint64_t free_some(struct zm_pool *p, size_t n, unsigned permille, struct rng *r)
{
	uint64_t live = 0;

	for (size_t i = 0; i < n; i++) {
		if (objs[i].h && rng_below(r, 1000) < permille) {
			assert_int_equal(zm_pool_free(p, objs[i].h), 0);
			objs[i].h = 0;
		} else if (objs[i].h) {
			live += objs[i].size;
		}
	}
	return live;
}

static void verify_all(struct zm_pool *p, size_t n)
{
	uint8_t buf[4096];

	for (size_t i = 0; i < n; i++) {
		if (!objs[i].h)
			continue;
		assert_int_equal(zm_pool_read(p, objs[i].h, buf, objs[i].size), 0);
		assert_int_equal(pt_check(buf, objs[i].size, objs[i].cookie), 0);
	}
}

static void free_all(struct zm_pool *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (objs[i].h) {
			assert_int_equal(zm_pool_free(p, objs[i].h), 0);
			objs[i].h = 0;
		}
}

static double overhead(struct zm_pool *p, uint64_t live)
{
	struct zm_pool_stats st;

	zm_pool_stats(p, &st);
	return (double)(st.pool_bytes + st.meta_bytes) / (double)live;
}

/* zm_pool_create and zm_pool_set_compaction refuse the same policies,
 * with the same errors, on every backend; create also refuses settings
 * out of range. */
static void test_settings_refused(void **state)
{
	const char *const *be = zm_pool_backends();
	const int policies[] = { ZM_COMPACT_DEFAULT, ZM_COMPACT_OFF, ZM_COMPACT_WATERMARK,
				 ZM_COMPACT_RATIO, 4, 99, -1 };

	(void)state;
	for (int b = 0; be[b]; b++) {
		struct zm_pool_config c = { .allocator = be[b], .compact = ZM_COMPACT_OFF };
		struct zm_pool *p, *q;

		assert_int_equal(zm_pool_create(&c, &p), 0);
		for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
			struct zm_pool_config d = { .allocator = be[b],
						    .compact = (enum zm_compact_policy)policies[i] };
			int set = zm_pool_set_compaction(p, (enum zm_compact_policy)policies[i]);
			int made = zm_pool_create(&d, &q);

			printf("%s policy %d: set %d, create %d\n", be[b], policies[i], set, made);
			assert_int_equal(made, set);
			assert_true(set == 0 || set == -EINVAL || set == -EOPNOTSUPP);
			if (policies[i] > ZM_COMPACT_RATIO || policies[i] < 0)
				assert_int_equal(set, -EINVAL);
			if (!made)
				zm_pool_destroy(q);
		}
		assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_OFF), 0);
		zm_pool_destroy(p);
		for (int k = 0; k < 5; k++) {
			struct zm_pool_config d = { .allocator = be[b] };

			if (k == 0) d.mixed_zspages = 5;
			if (k == 1) d.mixed_zspages = -2;
			if (k == 2) d.compact_watermark = 101;
			if (k == 3) d.compact_ratio = 200;
			if (k == 4) d.compact_target = 101, d.compact = ZM_COMPACT_OFF;
			q = NULL;
			assert_int_equal(zm_pool_create(&d, &q), -EINVAL);
			assert_null(q);
		}
	}
}

static void test_explicit(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_OFF, 0, 0);
	struct zm_pool_stats st;
	struct rng r;
	uint64_t live;
	double before, after;
	long freed;

	rng_seed(&r, g_seed);
	fill(p, N, &r);
	live = free_some(p, N, 750, &r);
	before = overhead(p, live);
	freed = zm_pool_compact(p);
	after = overhead(p, live);
	zm_pool_stats(p, &st);
	printf("explicit: overhead %.3f -> %.3f, %ld pages freed, %llu objects moved\n",
	       before, after, freed, (unsigned long long)st.objects_moved);
	assert_true(freed > 0);
	assert_true(st.objects_moved > 0);
	assert_int_equal(st.pages_compacted, (uint64_t)freed);
	assert_true(before > 2.0);     /* a random 75% freed leaves holes */
	assert_true(after < 1.10);
	assert_int_equal(zm_pool_check(p), 0);
	verify_all(p, N);
	/* a second pass finds little to do */
	assert_true(zm_pool_compact(p) <= freed / 10);
	free_all(p, N);
	zm_pool_destroy(p);
}

static void test_rss_falls(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_OFF, 0, 0);
	struct rng r;
	size_t full, after;

	rng_seed(&r, g_seed + 1);
	fill(p, N, &r);
	full = test_rss_bytes();
	free_some(p, N, 750, &r);
	zm_pool_compact(p);
	after = test_rss_bytes();
	printf("rss: %zu MiB full, %zu MiB after freeing 75%% and compacting\n",
	       full >> 20, after >> 20);
	/* ~30 MB of objects: most of three quarters of it must be gone */
	assert_true(after + (12u << 20) < full);
	verify_all(p, N);
	free_all(p, N);
	zm_pool_destroy(p);
}

static void test_mapped_not_moved(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_OFF, 0, 0);
	struct rng r;
	size_t keep = N;
	char *m;
	uint8_t copy[4096];

	rng_seed(&r, g_seed + 2);
	fill(p, 2000, &r);
	free_some(p, 2000, 900, &r);
	for (size_t i = 0; i < 2000; i++)
		if (objs[i].h) {
			keep = i;
			break;
		}
	assert_true(keep < 2000);
	m = zm_pool_map(p, objs[keep].h, ZM_MAP_RO);
	assert_non_null(m);
	memcpy(copy, m, objs[keep].size);
	zm_pool_compact(p);
	/* still readable where it was, and unchanged */
	assert_memory_equal(m, copy, objs[keep].size);
	assert_int_equal(pt_check(m, objs[keep].size, objs[keep].cookie), 0);
	zm_pool_unmap(p, objs[keep].h);
	verify_all(p, 2000);
	assert_int_equal(zm_pool_check(p), 0);
	free_all(p, 2000);
	zm_pool_destroy(p);
}

/* The sweep: a class left with less than a page of objects gives its page
 * back, its objects moving up into free slots of a larger class -- but not
 * an object that is mapped. */
static void test_sweep(void **state)
{
	struct zm_pool *p = mk_classes(ZM_COMPACT_OFF, 0, 0);
	struct zm_pool_stats st;
	zm_handle_t big[5], small[3];
	uint8_t buf[4096];
	uint64_t moved;
	void *m;

	for (int i = 0; i < 5; i++) {       /* 4 to a page: 3 slots free */
		big[i] = zm_pool_alloc(p, 1000);
		assert_true(big[i]);
		pt_fill(buf, 1000, 1000 + (uint64_t)i);
		assert_int_equal(zm_pool_write(p, big[i], buf, 1000), 0);
	}
	for (int i = 0; i < 3; i++) {       /* 2400 bytes in a page of their own */
		small[i] = zm_pool_alloc(p, 800);
		assert_true(small[i]);
		pt_fill(buf, 800, 800 + (uint64_t)i);
		assert_int_equal(zm_pool_write(p, small[i], buf, 800), 0);
	}
	zm_pool_stats(p, &st);
	assert_int_equal(st.pool_pages, 3);
	/* a mapped object stays: the page stays */
	m = zm_pool_map(p, small[1], ZM_MAP_RO);
	assert_non_null(m);
	zm_pool_compact(p);
	assert_int_equal(pt_check(m, 800, 801), 0);
	zm_pool_unmap(p, small[1]);
	zm_pool_stats(p, &st);
	assert_int_equal(st.pool_pages, 3);   /* nothing to add pages, one kept */
	moved = st.objects_moved;
	assert_int_equal(zm_pool_check(p), 0);
	/* unmapped, they all go up and the page is freed */
	assert_true(zm_pool_compact(p) >= 1);
	zm_pool_stats(p, &st);
	assert_int_equal(st.pool_pages, 2);
	assert_true(st.objects_moved >= moved + 1);
	assert_int_equal(zm_pool_check(p), 0);
	for (int i = 0; i < 3; i++) {
		assert_true(zm_pool_obj_size(p, small[i]) > 800);
		assert_int_equal(zm_pool_read(p, small[i], buf, 800), 0);
		assert_int_equal(pt_check(buf, 800, 800 + (uint64_t)i), 0);
		assert_int_equal(zm_pool_free(p, small[i]), 0);
	}
	for (int i = 0; i < 5; i++) {
		assert_int_equal(zm_pool_read(p, big[i], buf, 1000), 0);
		assert_int_equal(pt_check(buf, 1000, 1000 + (uint64_t)i), 0);
		assert_int_equal(zm_pool_free(p, big[i]), 0);
	}
	zm_pool_stats(p, &st);
	assert_int_equal(st.pool_pages, 0);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
}

static double used_ratio(struct zm_pool *p)
{
	struct zm_pool_stats st;

	zm_pool_stats(p, &st);
	return st.pool_bytes ? (double)st.slot_bytes / (double)st.pool_bytes : 1;
}

/* wait up to ms for the overhead to fall below limit; returns it */
static double wait_overhead(struct zm_pool *p, uint64_t live, double limit, int ms)
{
	double o = overhead(p, live);

	for (int t = 0; t < ms && o >= limit; t += 10) {
		usleep(10000);
		o = overhead(p, live);
	}
	return o;
}

/* wait up to ms for compactions to reach at least n */
static uint64_t wait_compactions(struct zm_pool *p, uint64_t n, int ms)
{
	struct zm_pool_stats st;

	for (int t = 0; t < ms; t += 10) {
		zm_pool_stats(p, &st);
		if (st.compactions >= n)
			return st.compactions;
		usleep(10000);
	}
	zm_pool_stats(p, &st);
	return st.compactions;
}

static void test_trigger_ratio(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_RATIO, 0, 90);
	struct rng r;
	uint64_t live;

	rng_seed(&r, g_seed + 3);
	fill(p, N, &r);
	/* 3% freed: used/allocated stays above 90%: no compaction */
	free_some(p, N, 30, &r);
	assert_int_equal(wait_compactions(p, 1, 300), 0);
	/* 75% freed: it must run, and bring the overhead down in 1 s */
	live = free_some(p, N, 750, &r);
	assert_true(wait_compactions(p, 1, 5000) >= 1);
	/* the time it takes is the benchmark's business; here: it gets where
	 * the policy promises, used/allocated >= 90% */
	for (int t = 0; t < 1000 && used_ratio(p) < 0.90; t++)
		usleep(10000);
	printf("ratio trigger: used/allocated %.3f, overhead %.3f\n", used_ratio(p),
	       overhead(p, live));
	assert_true(used_ratio(p) >= 0.90);
	verify_all(p, N);
	free_all(p, N);
	zm_pool_destroy(p);
}

static void test_trigger_watermark(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_WATERMARK, 40, 0);
	struct rng r;
	uint64_t live;

	rng_seed(&r, g_seed + 4);
	fill(p, N, &r);
	free_some(p, N, 30, &r);            /* ~3% per class: under 40% */
	assert_int_equal(wait_compactions(p, 1, 300), 0);
	live = free_some(p, N, 750, &r);   /* crosses 40% in most classes */
	assert_true(wait_compactions(p, 1, 5000) >= 1);
	/* the policy's promise: no class keeps 40% of its pages freeable,
	 * so the pool is at most 1 / (1 - 0.4) of its objects, plus metadata;
	 * the frees that follow a class's compaction may stay under the mark */
	printf("watermark trigger: overhead %.3f\n", wait_overhead(p, live, 1.3, 10000));
	assert_true(overhead(p, live) < 1.0 / 0.6 + 0.15);
	verify_all(p, N);
	free_all(p, N);
	zm_pool_destroy(p);
}

/* The watermark seen even when no free moves a zspage to another fullness
 * group: every zspage of the 128-byte class (32 objects, one page) loses
 * 6 of its 32 objects, 19% freeable, each staying in the same group. */
static void test_trigger_watermark_same_group(void **state)
{
	struct zm_pool *p = mk_classes(ZM_COMPACT_WATERMARK, 15, 0);
	static zm_handle_t h[3200];
	struct zm_pool_stats st;

	for (int i = 0; i < 3200; i++)
		assert_true((h[i] = zm_pool_alloc(p, 128)) != 0);
	for (int i = 0; i < 3200; i++)
		if (i % 32 < 6)
			assert_int_equal(zm_pool_free(p, h[i]), 0);
	assert_true(wait_compactions(p, 1, 5000) >= 1);
	zm_pool_set_compaction(p, ZM_COMPACT_OFF);
	zm_pool_stats(p, &st);
	assert_true(st.pool_pages <= 95);   /* under the 15% watermark */
	for (int i = 0; i < 3200; i++)
		if (i % 32 >= 6)
			assert_int_equal(zm_pool_free(p, h[i]), 0);
	zm_pool_destroy(p);
}

static void test_off_and_switch(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_OFF, 0, 0);
	struct rng r;
	uint64_t live;

	rng_seed(&r, g_seed + 5);
	fill(p, N, &r);
	live = free_some(p, N, 750, &r);
	assert_int_equal(wait_compactions(p, 1, 300), 0);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_RATIO), 0);
	/* the thread looks by itself within its period */
	assert_true(wait_compactions(p, 1, 5000) >= 1);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_OFF), 0);
	printf("switched on: overhead %.3f\n", overhead(p, live));
	verify_all(p, N);
	free_all(p, N);
	zm_pool_destroy(p);
}

static void test_shrink_and_malloc(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_OFF, 0, 0);
	struct zm_pool_config mc = { .allocator = "malloc" };
	struct zm_pool *m;
	struct rng r;
	long got;

	rng_seed(&r, g_seed + 6);
	fill(p, N, &r);
	free_some(p, N, 750, &r);
	got = zm_pool_shrink(p, 1 << 20);
	printf("shrink 1 MiB: %ld bytes freed\n", got);
	assert_true(got >= 1 << 20);
	verify_all(p, N);
	free_all(p, N);
	zm_pool_destroy(p);

	assert_int_equal(zm_pool_create(&mc, &m), 0);
	assert_int_equal(zm_pool_compact(m), -EOPNOTSUPP);
	assert_int_equal(zm_pool_shrink(m, 4096), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(m, ZM_COMPACT_RATIO), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(m, ZM_COMPACT_OFF), 0);
	assert_int_equal(zm_pool_set_compaction(m, ZM_COMPACT_DEFAULT), 0);
	zm_pool_destroy(m);
}

/* Compaction that cannot finish (no page for a destination) leaves a
 * consistent pool; a later pass, with pages, finishes the job. */
static void test_stops_partway(void **state)
{
	struct zm_pool_config c = { .compact = ZM_COMPACT_OFF, .limit_bytes = 8u << 20 };
	struct zm_pool *p;
	zm_handle_t filler[4096];
	size_t nf = 0, n = 0;
	struct rng r;

	assert_int_equal(zm_pool_create(&c, &p), 0);
	rng_seed(&r, g_seed + 9);
	/* fill to the limit */
	for (uint8_t buf[4096]; n < N; n++) {
		objs[n].size = pt_size(&r, 4096);
		objs[n].cookie = rng_next(&r);
		if (pt_put(p, &objs[n], buf) && !objs[n].h)
			break;
	}
	free_some(p, n, 600, &r);
	/* take every page left, so destinations cannot grow */
	while (nf < 4096 && (filler[nf] = zm_pool_alloc(p, 4096)))
		nf++;
	zm_pool_compact(p);
	assert_int_equal(zm_pool_check(p), 0);
	verify_all(p, n);
	while (nf)
		zm_pool_free(p, filler[--nf]);
	zm_pool_compact(p);
	assert_int_equal(zm_pool_check(p), 0);
	verify_all(p, n);
	zm_pool_compact(p);
	verify_all(p, n);
	free_all(p, n);
	zm_pool_destroy(p);
}

static void test_destroy_while_busy(void **state)
{
	for (int k = 0; k < 3; k++) {
		struct zm_pool *p = mk(ZM_COMPACT_RATIO, 0, 99);
		struct rng r;

		rng_seed(&r, g_seed + 7 + (uint64_t)k);
		fill(p, 5000, &r);
		free_some(p, 5000, 800, &r);
		/* destroy at once, the thread probably mid-pass */
		free_all(p, 5000);
		zm_pool_destroy(p);
	}
}

/* The work lower bound: objects starting on the pages with the fewest;
 * a compaction that frees F pages moves at least the bound for F. */
static void test_min_moves(void **st)
{
	struct zm_pool *p = mk_classes(ZM_COMPACT_OFF, 0, 0);
	struct zm_pool_config mc = { .allocator = "malloc" };
	struct zm_pool_stats s0, s1;
	struct zm_pool *m;
	zm_handle_t h[40];
	long freed;

	/* 1000 bytes: the 1024-byte class, four to a one-page zspage */
	for (int i = 0; i < 40; i++)
		assert_true((h[i] = zm_pool_alloc(p, 1000)) != 0);
	assert_int_equal(zm_pool_min_moves(p, 0), 0);
	assert_int_equal(zm_pool_min_moves(p, 1), 4);
	/* the first page keeps one object, the second two, the rest four */
	for (int i = 1; i < 4; i++)
		assert_int_equal(zm_pool_free(p, h[i]), 0);
	assert_int_equal(zm_pool_free(p, h[5]), 0);
	assert_int_equal(zm_pool_free(p, h[6]), 0);
	assert_int_equal(zm_pool_min_moves(p, 1), 1);
	assert_int_equal(zm_pool_min_moves(p, 2), 3);
	assert_int_equal(zm_pool_min_moves(p, 3), 7);
	assert_int_equal(zm_pool_min_moves(p, 1000), 35);  /* every page */
	zm_pool_stats(p, &s0);
	freed = zm_pool_compact(p);
	zm_pool_stats(p, &s1);
	assert_int_equal(freed, 1);   /* 35 objects need 9 pages of the 10 */
	assert_true((long)(s1.objects_moved - s0.objects_moved) >= 1);
	assert_int_equal(zm_pool_check(p), 0);
	for (int i = 0; i < 40; i++)
		if (i == 0 || (i >= 4 && i != 5 && i != 6))
			assert_int_equal(zm_pool_free(p, h[i]), 0);
	zm_pool_destroy(p);

	assert_int_equal(zm_pool_create(&mc, &m), 0);
	assert_int_equal(zm_pool_min_moves(m, 1), -EOPNOTSUPP);
	zm_pool_destroy(m);
}

/*
 * The compactor turns the pages layer's prefault off for its passes
 * (pages made resident inside a class-lock hold were most of a long hold,
 * docs/compaction.md) and gives the calling thread its own setting back,
 * on or off, from zm_pool_compact and zm_pool_shrink alike.
 *
 * Catches: a compactor that leaves the caller's prefault off, or turns it
 * on.
 */
static void test_compactor_prefault(void **state)
{
	struct zm_pool *p = mk(ZM_COMPACT_OFF, 0, 0);
	struct rng r;

	(void)state;
	rng_seed(&r, g_seed + 7);
	fill(p, N, &r);
	free_some(p, N, 750, &r);
	assert_int_equal(zm_pages_thread_prefault(1), 1);
	assert_true(zm_pool_compact(p) > 0);
	assert_int_equal(zm_pages_thread_prefault(0), 1);   /* given back on */
	free_some(p, N, 750, &r);
	zm_pool_shrink(p, SIZE_MAX);
	assert_int_equal(zm_pages_thread_prefault(1), 0);   /* given back off */
	assert_int_equal(zm_pool_check(p), 0);
	verify_all(p, N);
	free_all(p, N);
	zm_pool_destroy(p);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_settings_refused),
		cmocka_unit_test(test_explicit),
		cmocka_unit_test(test_rss_falls),
		cmocka_unit_test(test_mapped_not_moved),
		cmocka_unit_test(test_sweep),
		cmocka_unit_test(test_min_moves),
		cmocka_unit_test(test_trigger_ratio),
		cmocka_unit_test(test_trigger_watermark),
		cmocka_unit_test(test_trigger_watermark_same_group),
		cmocka_unit_test(test_off_and_switch),
		cmocka_unit_test(test_shrink_and_malloc),
		cmocka_unit_test(test_stops_partway),
		cmocka_unit_test(test_destroy_while_busy),
		cmocka_unit_test(test_compactor_prefault),
	};

	test_args(argc, argv, &g_seed, NULL);
	return cmocka_run_group_tests_name("compact", tests, NULL, NULL);
}
