/*
 * How long locks are held: the records of the longest holds that debug
 * builds keep (zm_lock_hold, common.h; src/base/lock.h), and the bound on
 * the compactor's work under one hold of a class lock (ZS_STEP_OBJS
 * objects moved, ZS_STEP_BYTES copied: zsmalloc/zsmalloc.h, zsmalloc/compact.c).
 *
 * Nothing here asserts that anything was fast: a hold made to last at
 * least some time must be recorded as at least that long, and the
 * function that took the lock must be named; the machine adds only to
 * such figures.  The compactor's bound is counted, not timed: the objects
 * it moved under each hold, in debug builds.
 */
#define ZMEM_ADVANCED  /* zm_lock_hold */
#include <errno.h>

#include "testutil.h"
#include "base/lock.h"
#include "pool/zsmalloc/zsmalloc.h"
#include <zmem/common.h>
#include <zmem/pool.h>

#if ZM_DEBUG >= 1
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Hold l for at least ns. */
static void hold_for(zmi_lock_t *l, uint64_t ns)
{
	uint64_t t0;

	zmi_lock(l);
	t0 = now_ns();
	while (now_ns() - t0 < ns)
		;
	zmi_unlock(l);
}
#endif

static void test_lock_hold_recorded(void **st)
{
	struct zm_lock_hold h;
	zmi_lock_t a, b;

	(void)st;
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, NULL), -EINVAL);
	assert_int_equal(zm_lock_hold(ZM_LOCK_KINDS, &h), -EINVAL);
#if ZM_DEBUG >= 1
	zmi_lock_init(&a);
	zmi_lock_init_kind(&b, ZMI_LOCK_ZONE);
	zm_lock_hold_reset();
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_true(h.max_ns == 0 && h.site == NULL && h.over_10us == 0 && h.over_100us == 0 &&
		    h.holds == 0);
	hold_for(&a, 300000);
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_true(h.max_ns >= 250000);
	assert_string_equal(h.site, "hold_for");
	assert_true(h.over_10us >= 1 && h.over_100us >= 1);
	/* a kind of its own: the other's record is not this one's */
	assert_int_equal(zm_lock_hold(ZM_LOCK_ZONE, &h), 0);
	assert_true(h.over_100us == 0 || h.max_ns >= 100000);
	hold_for(&b, 150000);
	assert_int_equal(zm_lock_hold(ZM_LOCK_ZONE, &h), 0);
	assert_true(h.max_ns >= 120000 && h.over_100us >= 1);
	/* trylock names its caller too */
	zm_lock_hold_reset();
	assert_true(zmi_trylock(&a));
	{
		uint64_t t0 = now_ns();

		while (now_ns() - t0 < 200000)
			;
	}
	zmi_unlock(&a);
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_string_equal(h.site, "test_lock_hold_recorded");
	assert_true(h.max_ns >= 150000);
	zm_lock_hold_reset();
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), 0);
	assert_true(h.max_ns == 0 && h.site == NULL);
	zmi_lock_destroy(&a);
	zmi_lock_destroy(&b);
#else
	(void)a, (void)b;
	assert_int_equal(zm_lock_hold(ZM_LOCK_OTHER, &h), -EOPNOTSUPP);
#endif
}

/* ---- the compactor's steps ------------------------------------------- */

#if ZM_DEBUG >= 1
static struct zm_pool *mk_off(void)
{
	struct zm_pool_config c = { .compact = ZM_COMPACT_OFF, .arena_bytes = 1u << 30 };
	struct zm_pool *p;

	assert_int_equal(zm_pool_create(&c, &p), 0);
	return p;
}

/* A class of at least min_objs objects a zspage over 2 pages or more
 * (pages > 1) or over one page (pages == 1); its slot size, and the shape
 * in *objs and *pages. */
static unsigned find_class(struct zm_pool *p, unsigned min_objs, bool multi,
			   unsigned *objs, unsigned *pages)
{
	struct zm_pool_class_stats cs;

	for (unsigned i = 0; i < zm_pool_nr_classes(p); i++) {
		memset(&cs, 0, sizeof(cs));
		assert_int_equal(zm_pool_class_stats(p, i, &cs), 0);
		if (cs.objs_per_zspage >= min_objs && cs.objs_per_zspage <= 1024 &&
		    (multi ? cs.pages_per_zspage > 1 : cs.pages_per_zspage == 1)) {
			*objs = cs.objs_per_zspage;
			*pages = cs.pages_per_zspage;
			return cs.size;
		}
	}
	fail_msg("no class of %u objects over %s", min_objs, multi ? "2 pages or more" : "a page");
	return 0;
}

static zm_handle_t alloc_cookie(struct zm_pool *p, size_t size, uint64_t i)
{
	zm_handle_t h = zm_pool_alloc(p, size);
	uint64_t v = mix64(i);

	assert_true(h != 0);
	assert_int_equal(zm_pool_write(p, h, &v, sizeof(v)), 0);
	return h;
}

static void check_cookies(struct zm_pool *p, const zm_handle_t *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v;

		if (!h[i])
			continue;
		assert_int_equal(zm_pool_read(p, h[i], &v, sizeof(v)), 0);
		assert_true(v == mix64(i));
	}
}

static void reset_steps(struct zm_pool *p)
{
	zs_of(p)->step_objs_max = 0;
	zs_of(p)->step_bytes_max = 0;
}

/* The most objects one hold moved must be the bound exactly: the work
 * needed more (so the steps were cut) and no hold did more. */
static void assert_steps(struct zm_pool *p, unsigned size, const char *what)
{
	struct zs_pool *zp = zs_of(p);
	size_t bytes = (size_t)ZS_STEP_BYTES > size ? ZS_STEP_BYTES : size;

	if (zp->step_objs_max != ZS_STEP_OBJS || zp->step_bytes_max > bytes)
		fail_msg("%s: %u objects and %u bytes moved under one class lock hold at "
			 "most; the bound is %u objects and %zu bytes, and the work needed more",
			 what, zp->step_objs_max, zp->step_bytes_max, ZS_STEP_OBJS, bytes);
}

/*
 * Packing: one zspage of a class over 3 pages or more, filled, then its
 * lowest objects freed but 43: those move down, more objects than a step
 * may move.  Evacuating: two zspages, one keeping 60% and one 40 objects
 * (more than a step), compacted into one.  Each is done in steps
 * of at most ZS_STEP_OBJS objects; contents and the checker are right
 * after.
 *
 * Catches: a step bound ignored in pack() or evacuate() (43 or 40 objects
 * under one hold), hold_room() letting one more in.
 */
static void test_compact_steps_bounded(void **st)
{
	struct zm_pool *p = mk_off();
	unsigned objs, pages, size = find_class(p, 3 * ZS_STEP_OBJS, true, &objs, &pages);
	zm_handle_t *h = calloc(2 * (size_t)objs, sizeof(*h));
	struct zm_pool_stats s0, s1;
	struct zm_lock_hold lh;
	unsigned keep;

	(void)st;
	assert_non_null(h);
	/* pack */
	for (unsigned i = 0; i < objs; i++)
		h[i] = alloc_cookie(p, size, i);
	keep = ZS_STEP_OBJS + 11;
	for (unsigned i = 0; i < objs - keep; i++) {
		assert_int_equal(zm_pool_free(p, h[i]), 0);
		h[i] = 0;
	}
	reset_steps(p);
	zm_lock_hold_reset();
	zm_pool_stats(p, &s0);
	assert_true(zm_pool_compact(p) > 0);
	zm_pool_stats(p, &s1);
	printf("pack: class %u (%u objects, %u pages): %llu objects moved, at most %u and "
	       "%u bytes a hold\n", size, objs, pages,
	       (unsigned long long)(s1.objects_moved - s0.objects_moved),
	       zs_of(p)->step_objs_max, zs_of(p)->step_bytes_max);
	assert_true(s1.objects_moved - s0.objects_moved >= keep);
	assert_steps(p, size, "pack");
	/* the compactor's own records name its steps */
	assert_int_equal(zm_lock_hold(ZM_LOCK_COMPACT, &lh), 0);
	assert_true(lh.max_ns > 0 && lh.site != NULL && lh.holds >= 2);
	check_cookies(p, h, objs);
	assert_int_equal(zm_pool_check(p), 0);
	for (unsigned i = 0; i < objs; i++)
		if (h[i])
			assert_int_equal(zm_pool_free(p, h[i]), 0), h[i] = 0;
	/* evacuate */
	for (unsigned i = 0; i < 2 * objs; i++)
		h[i] = alloc_cookie(p, size, i);
	for (unsigned i = 0; i < objs; i++)
		if (i % 5 >= 3) {
			assert_int_equal(zm_pool_free(p, h[i]), 0);
			h[i] = 0;
		}
	for (unsigned i = objs + 40; i < 2 * objs; i++) {
		assert_int_equal(zm_pool_free(p, h[i]), 0);
		h[i] = 0;
	}
	reset_steps(p);
	zm_pool_stats(p, &s0);
	assert_true(zm_pool_compact(p) > 0);
	zm_pool_stats(p, &s1);
	printf("evacuate: %llu objects moved, at most %u and %u bytes a hold\n",
	       (unsigned long long)(s1.objects_moved - s0.objects_moved),
	       zs_of(p)->step_objs_max, zs_of(p)->step_bytes_max);
	assert_true(s1.objects_moved - s0.objects_moved >= 40);
	assert_steps(p, size, "evacuate");
	check_cookies(p, h, 2 * (size_t)objs);
	assert_int_equal(zm_pool_check(p), 0);
	for (unsigned i = 0; i < 2 * objs; i++)
		if (h[i])
			assert_int_equal(zm_pool_free(p, h[i]), 0);
	free(h);
	zm_pool_destroy(p);
}

/*
 * Sweeping: a sparse class (one zspage of a page, under a page of
 * objects: 100 of 32 bytes) moves up into a larger class's free slots
 * (four zspages of 128 bytes keeping one object each), more objects than
 * a step: in steps, the sparse class's page freed, contents right.
 *
 * Catches: the step bound ignored in sweep_class().
 */
static void test_sweep_steps_bounded(void **st)
{
	struct zm_pool *p = mk_off();
	unsigned objs, pages, small = find_class(p, 100, false, &objs, &pages);
	enum { NSMALL = 100 };
	zm_handle_t hs[NSMALL], hb[4 * 64];
	unsigned big = 0, bobjs = 0, nb;
	struct zm_pool_stats s0, s1;
	struct zs_pool *zp = zs_of(p);

	(void)st;
	/* the larger class: 1-page zspages, 4 of them keep one object each */
	for (unsigned i = 0; i < zm_pool_nr_classes(p) && !big; i++) {
		struct zm_pool_class_stats cs;

		memset(&cs, 0, sizeof(cs));
		assert_int_equal(zm_pool_class_stats(p, i, &cs), 0);
		if (cs.size > small && cs.size <= small + 8 * 32 && cs.pages_per_zspage == 1 &&
		    cs.objs_per_zspage >= 16 && cs.objs_per_zspage <= 64)
			big = cs.size, bobjs = cs.objs_per_zspage;
	}
	if (!big)
		fail_msg("no 1-page class within 8 classes above %u", small);
	nb = 4 * bobjs;
	for (unsigned i = 0; i < nb; i++)
		hb[i] = alloc_cookie(p, big, 1000 + i);
	for (unsigned i = 0; i < nb; i++)
		if (i % bobjs) {
			assert_int_equal(zm_pool_free(p, hb[i]), 0);
			hb[i] = 0;
		}
	for (unsigned i = 0; i < NSMALL; i++)
		hs[i] = alloc_cookie(p, small, i);
	assert_true((uint64_t)NSMALL * small < 4096 && NSMALL <= objs);
	reset_steps(p);
	zm_pool_stats(p, &s0);
	pthread_mutex_lock(&zp->compact_lock);
	assert_true(zs_sweep(zp) >= 1);
	pthread_mutex_unlock(&zp->compact_lock);
	zm_pool_stats(p, &s1);
	printf("sweep: class %u into %u: %llu objects moved, at most %u a hold\n", small, big,
	       (unsigned long long)(s1.objects_moved - s0.objects_moved), zp->step_objs_max);
	assert_true(s1.objects_moved - s0.objects_moved == NSMALL);
	assert_steps(p, small, "sweep");
	check_cookies(p, hs, NSMALL);
	for (unsigned i = 0; i < nb; i++) {
		uint64_t v;

		if (!hb[i])
			continue;
		assert_int_equal(zm_pool_read(p, hb[i], &v, sizeof(v)), 0);
		assert_true(v == mix64(1000 + i));
	}
	assert_int_equal(zm_pool_check(p), 0);
	for (unsigned i = 0; i < NSMALL; i++)
		assert_int_equal(zm_pool_free(p, hs[i]), 0);
	for (unsigned i = 0; i < nb; i++)
		if (hb[i])
			assert_int_equal(zm_pool_free(p, hb[i]), 0);
	zm_pool_destroy(p);
}
#else
static void test_compact_steps_bounded(void **st)
{
	(void)st;
	skip();  /* the steps are counted in debug builds only */
}

static void test_sweep_steps_bounded(void **st)
{
	(void)st;
	skip();
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_hold_recorded),
		cmocka_unit_test(test_compact_steps_bounded),
		cmocka_unit_test(test_sweep_steps_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
