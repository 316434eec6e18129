/*
 * Tests of the xvmalloc backend's own design: the size -> free list
 * mapping, the O(1) bitmap search, where objects land (good fit, merging
 * with neighbours, page return), the waste above half a page that the
 * 2011 zcache discussion describes, objects close to a page, bad handles, the checker, and
 * a seeded randomized run against a model that also checks that objects
 * stay inside one page and never overlap.
 *
 *   test_xvmalloc [--seed N] [--steps N]      (or ZM_TEST_SEED=N in the environment)
 */
#include <errno.h>

#include "pooltest.h"
#include "pool/xvmalloc/xvmalloc.h"
#include <zmem/pages.h>

#define PS 4096

static uint64_t g_seed;
static long g_steps = 20000;

/* A pool over pages the test can see, so that handles can be turned into
 * addresses. */
static struct zm_pool *mk(struct zm_pages **pg, size_t page_size)
{
	struct zm_pages_config pc = { .page_size = page_size, .arena_bytes = 256 << 20 };
	struct zm_pool_config c = { .allocator = "xvmalloc" };
	struct zm_pool *p;

	assert_int_equal(zm_pages_create(&pc, pg), 0);
	c.pages = *pg;
	assert_int_equal(zm_pool_create(&c, &p), 0);
	return p;
}

static void done(struct zm_pool *p, struct zm_pages *pg)
{
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
	assert_int_equal(zm_pages_check(pg), 0);
	zm_pages_destroy(pg);
}

static uint64_t pages_of(struct zm_pool *p)
{
	struct zm_pool_stats s;

	zm_pool_stats(p, &s);
	return s.pool_pages;
}

static zm_handle_t get(struct zm_pool *p, size_t size)
{
	zm_handle_t h = zm_pool_alloc(p, size);

	assert_true(h != 0);
	assert_int_equal(zm_pool_check(p), 0);
	return h;
}

static void put(struct zm_pool *p, zm_handle_t h)
{
	assert_int_equal(zm_pool_free(p, h), 0);
	assert_int_equal(zm_pool_check(p), 0);
}

/* ---- the mapping ---- */

static void test_index_mapping(void **st)
{
	static unsigned lo[XV_NLISTS + 1];   /* smallest size of each list */
	unsigned prev = 0;

	for (unsigned i = 0; i <= XV_NLISTS; i++)
		lo[i] = UINT32_MAX;
	/* fixed points of the documented mapping */
	assert_int_equal(xv_list_of(16), 2);
	assert_int_equal(xv_list_of(248), 31);
	assert_int_equal(xv_list_of(256), 32);
	assert_int_equal(xv_list_of(264), 33);
	assert_int_equal(xv_list_of(511), 63);
	assert_int_equal(xv_list_of(512), 64);
	assert_int_equal(xv_list_of(2048), 4 * 32);
	assert_int_equal(xv_list_of(2048 + 64), 4 * 32 + 1);
	assert_int_equal(xv_list_of(4088), 4 * 32 + 31);
	assert_int_equal(xv_list_of(65528), XV_NLISTS - 1);
	for (unsigned s = XV_MIN_PAYLOAD; s <= 65536 - XV_HDR; s += XV_ALIGN) {
		unsigned i = xv_list_of(s);

		assert_true(i < XV_NLISTS);
		assert_true(i >= prev && i <= prev + 1 + (prev == 0 ? 2 : 0));
		if (s < XV_LINEAR_MAX)
			assert_int_equal(i, s / XV_ALIGN);
		if (lo[i] == UINT32_MAX)
			lo[i] = s;
		prev = i;
	}
	/* list widths: 8 bytes below 512, then 2^(l-5) */
	for (unsigned i = XV_LINEAR_MAX / XV_ALIGN; i + 1 < XV_NLISTS; i++) {
		unsigned l = 31u - (unsigned)__builtin_clz(lo[i]);

		assert_int_equal(lo[i + 1] - lo[i], 1u << (l - XV_SL_LOG2));
	}
	/* the search list is the first one whose every block fits */
	for (unsigned s = XV_MIN_PAYLOAD; s <= 65536 - XV_HDR; s += XV_ALIGN) {
		unsigned i = xv_list_search(s);

		if (i >= XV_NLISTS)
			continue;
		assert_true(lo[i] >= s);
		assert_true(i == XV_MIN_PAYLOAD / XV_ALIGN || lo[i - 1] < s);
	}
}

/* ---- O(1) find over the bitmaps, against a linear scan ---- */

static void test_find_bitmaps(void **st)
{
	struct xv_lists l;
	struct rng r;

	rng_seed(&r, 3);
	for (int round = 0; round < 300; round++) {
		unsigned nbits = (unsigned)rng_below(&r, 12);

		xv_lists_init(&l);
		for (unsigned k = 0; k < nbits; k++) {
			unsigned i = (unsigned)rng_below(&r, XV_NLISTS);

			l.sl_map[i / XV_SL] |= 1u << (i % XV_SL);
			l.fl_map |= 1u << (i / XV_SL);
		}
		for (unsigned idx = 0; idx <= XV_NLISTS; idx++) {
			int want = -1;

			for (unsigned j = idx; j < XV_NLISTS; j++)
				if (l.sl_map[j / XV_SL] >> (j % XV_SL) & 1) {
					want = (int)j;
					break;
				}
			assert_int_equal(xv_lists_find(&l, idx), want);
		}
	}
}

/* Good fit: the smallest list that surely fits, not the big tail. */
static void test_good_fit(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS);
	zm_handle_t a = get(p, 200), b = get(p, 40), c = get(p, 1000), d = get(p, 40);
	zm_handle_t e = get(p, 500), f = get(p, 40), x, y;

	assert_int_equal(pages_of(p), 1);
	put(p, a), put(p, c), put(p, e);
	x = get(p, 900);        /* C's 1000-byte block, not E's, not the tail */
	assert_int_equal(xv_handle_pfn(x), xv_handle_pfn(c));
	assert_int_equal(xv_handle_off(x), xv_handle_off(c));
	y = get(p, 150);        /* A's block */
	assert_int_equal(xv_handle_off(y), xv_handle_off(a));
	put(p, x), put(p, y), put(p, b), put(p, d), put(p, f);
	assert_int_equal(pages_of(p), 0);
	done(p, pg);
}

/* The rounded search skips a fitting block in the request's own list;
 * the head of that list is tried before a new page is taken. */
static void test_own_list_fallback(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS);
	zm_handle_t x = get(p, 2600), rest = get(p, PS - 2 * XV_HDR - 2600), y;

	assert_int_equal(pages_of(p), 1);
	assert_int_equal(xv_list_of(2600), xv_list_of(2584));
	put(p, x);
	y = get(p, 2580);
	assert_int_equal(pages_of(p), 1);
	assert_int_equal(xv_handle_off(y), XV_HDR);
	put(p, y), put(p, rest);
	done(p, pg);
}

/* ---- merging and page return ---- */

static void test_merge(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS);
	zm_handle_t a = get(p, 100), b = get(p, 100), c = get(p, 100), d = get(p, 100), x;

	assert_int_equal(xv_handle_off(b) - xv_handle_off(a), 104 + XV_HDR);
	put(p, a);
	put(p, c);
	put(p, b);              /* merges with A before it and C after it */
	x = get(p, 3 * 104 + 2 * XV_HDR);   /* exactly the merged block */
	assert_int_equal(xv_handle_pfn(x), xv_handle_pfn(a));
	assert_int_equal(xv_handle_off(x), xv_handle_off(a));
	assert_int_equal(zm_pool_obj_size(p, x), 3 * 104 + 2 * XV_HDR);
	put(p, x);
	/* D merges with the page's tail and with A..C: the page goes back */
	assert_int_equal(pages_of(p), 1);
	put(p, d);
	assert_int_equal(pages_of(p), 0);
	done(p, pg);
}

static void test_page_return(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS);
	struct zm_pages_stats ps;
	zm_handle_t h[30];
	struct zm_pool_stats s;

	for (int i = 0; i < 30; i++)   /* three per page: 1300 * 3 + 24 <= 4096 */
		h[i] = get(p, 1300);
	assert_int_equal(pages_of(p), 10);
	for (int i = 0; i < 30; i += 3) {
		assert_int_equal(xv_handle_pfn(h[i]), xv_handle_pfn(h[i + 2]));
		put(p, h[i + 1]);
		put(p, h[i]);
		assert_int_equal(pages_of(p), 10 - i / 3);
		put(p, h[i + 2]);
		assert_int_equal(pages_of(p), 9 - i / 3);
	}
	zm_pool_stats(p, &s);
	assert_int_equal(s.pages_max, 10);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.pool_bytes, 0);
	zm_pages_stats(pg, &ps);
	assert_int_equal(ps.in_use, 0);
	done(p, pg);
}

/* ---- zcache's complaint (2011): objects above half a page ---- */

static void test_half_page_waste(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS);
	zm_handle_t a = get(p, 2100), b = get(p, 2100), c, d, t[16];
	struct zm_pool_stats s;

	assert_int_equal(pages_of(p), 2);          /* 2 x 2100 > 4096 - 16 */
	assert_true(xv_handle_pfn(a) != xv_handle_pfn(b));
	c = get(p, 1900);                          /* the rest of a page: small only */
	assert_int_equal(pages_of(p), 2);
	d = get(p, PS - 2 * XV_HDR - 2104 + 8);    /* 8 bytes too many for a page's rest */
	assert_int_equal(pages_of(p), 3);
	put(p, a), put(p, b), put(p, c), put(p, d);
	/* text that compresses to 75%: one object per page, nothing gained */
	for (int i = 0; i < 16; i++)
		t[i] = get(p, PS * 3 / 4);
	zm_pool_stats(p, &s);
	assert_int_equal(s.pool_pages, 16);
	printf("16 objects of 75%% of a page: %.2f%% of the pages (seeds: 99.95%%), "
	       "%.2f%% with metadata\n", 100.0 * (double)s.pool_pages / 16.0,
	       100.0 * (double)(s.pool_bytes + s.meta_bytes) / (16.0 * PS));
	for (int i = 0; i < 16; i++)
		put(p, t[i]);
	done(p, pg);
}

/* ---- objects close to a page ---- */

static void test_near_page(void **st)
{
	for (size_t P = 4096; P <= 65536; P *= 4) {
		struct zm_pages *pg;
		struct zm_pool *p = mk(&pg, P);
		uint8_t *buf = malloc(P);
		struct zm_pool_stats s;

		for (size_t sz = P - 24; sz <= P; sz++) {
			zm_handle_t h = get(p, sz);
			uint8_t *m;

			assert_int_equal(pages_of(p), 1);
			zm_pool_stats(p, &s);
			assert_int_equal(s.huge_objects, sz > P - XV_HDR);
			assert_true(zm_pool_obj_size(p, h) >= sz);
			assert_int_equal(xv_handle_off(h) == 0, sz > P - XV_HDR);
			pt_fill(buf, sz, h);
			assert_int_equal(zm_pool_write(p, h, buf, sz), 0);
			m = zm_pool_map(p, h, ZM_MAP_RO);
			assert_non_null(m);
			assert_int_equal(pt_check(m, sz, h), 0);
			assert_ptr_equal(m, (uint8_t *)zm_pages_addr(pg, xv_handle_pfn(h)) +
					    xv_handle_off(h));
			zm_pool_unmap(p, h);
			put(p, h);
			assert_int_equal(pages_of(p), 0);
		}
		free(buf);
		done(p, pg);
	}
}

/* ---- bad handles ---- */

/* Handles as the pool hands them out (pool_internal.h): the pool's id
 * from bit ZMI_POOL_ID_SHIFT up, the backend's own handle (xvmalloc/xvmalloc.h) below. */
static zm_handle_t id_of(zm_handle_t h) { return h & ~(ZMI_HANDLE_LIMIT - 1); }
static zm_handle_t raw_of(zm_handle_t h) { return h & (ZMI_HANDLE_LIMIT - 1); }

static size_t arena_pages(struct zm_pages *pg)
{
	struct zm_pages_stats ps;

	assert_int_equal(zm_pages_stats(pg, &ps), 0);
	return ps.total_pages;
}

static void test_bad_handles(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS), *q;
	struct zm_pool_config qc = { .allocator = "xvmalloc", .pages = pg };
	zm_handle_t a = get(p, 100), b = get(p, 100), r = get(p, PS), foreign, h2;
	zm_handle_t id = id_of(a);
	zm_handle_t pfn_all = (zm_handle_t)((1u << XV_H_PFN_BITS) - 1) << XV_H_PFN_SHIFT;
	zm_handle_t tag_top = (zm_handle_t)1 << (XV_H_OFF_BITS + XV_TAG_BITS - 1);
	struct xv_hdr forged;
	char buf[PS];

	assert_int_equal(zm_pool_create(&qc, &q), 0);
	foreign = get(q, 100);
	/* q's first object is where p's is in another page, with the same
	 * tag: only the page (and the pool id) tell them apart */
	assert_int_equal(raw_of(foreign) & ((1ull << XV_H_PFN_SHIFT) - 1),
			 raw_of(a) & ((1ull << XV_H_PFN_SHIFT) - 1));
	assert_true(xv_handle_pfn(foreign) != xv_handle_pfn(a));
	/* a page no pool of this arena has */
	assert_true(xv_handle_pfn(pfn_all) >= arena_pages(pg));
	/* not handles at all */
	assert_int_equal(zm_pool_free(p, 0), -EINVAL);
	assert_int_equal(zm_pool_free(p, raw_of(a)), -EINVAL);        /* no pool id */
	/* another pool's: its own handle, this pool's with its id, and its
	 * own with this pool's id (a page of q's) */
	assert_int_equal(zm_pool_free(p, foreign), -EINVAL);
	assert_int_equal(zm_pool_free(p, id_of(foreign) | raw_of(a)), -EINVAL);
	assert_int_equal(zm_pool_free(p, id | raw_of(foreign)), -EINVAL);
	/* this pool's id, a bad backend handle */
	assert_int_equal(zm_pool_free(p, a | pfn_all), -EINVAL);      /* wild page */
	assert_int_equal(zm_pool_free(p, b ^ 1), -EINVAL);            /* inside a payload */
	assert_int_equal(zm_pool_free(p, a ^ tag_top), -EINVAL);      /* tag */
	assert_int_equal(zm_pool_free(p, a & ~((zm_handle_t)XV_TAG_MASK << XV_H_OFF_BITS)),
			 -EINVAL);                               /* tag 0 */
	assert_int_equal(zm_pool_free(p, r ^ tag_top), -EINVAL);      /* raw page, tag */
	assert_int_equal(zm_pool_free(p, a & ~(zm_handle_t)XV_H_OFF_MASK), -EINVAL); /* as raw */
	/* a raw page named as a block, its data a perfect block header */
	forged.size = PS - XV_HDR;
	forged.prev = XV_NO_PREV;
	forged.word = xv_word(0, (unsigned)(r >> XV_H_OFF_BITS) & XV_TAG_MASK);
	assert_int_equal(zm_pool_write(p, r, &forged, sizeof(forged)), 0);
	assert_int_equal(zm_pool_free(p, r | 1), -EINVAL);
	assert_int_equal(zm_pool_read(p, a, buf, 105), -EINVAL); /* past the slot */
	assert_int_equal(zm_pool_read(p, a, buf, 104), 0);
	errno = 0;
	assert_null(zm_pool_map(p, a + 2, ZM_MAP_RO));
	assert_int_equal(errno, EINVAL);
	zm_pool_unmap(p, a);                                     /* not mapped: ignored */
	assert_int_equal(zm_pool_obj_size(p, a ^ 1), 0);
	put(p, a);
	assert_int_equal(zm_pool_free(p, a), -EINVAL);                /* double */
	assert_int_equal(zm_pool_write(p, a, buf, 10), -EINVAL);
	h2 = get(p, 100);                                        /* same place, new tag */
	assert_int_equal(xv_handle_off(h2), xv_handle_off(a));
	assert_true(h2 != a);
	assert_int_equal(zm_pool_free(p, a), -EINVAL);                /* stale */
	put(p, r);
	assert_int_equal(zm_pool_free(p, r), -EINVAL);                /* stale raw page */
	put(p, b), put(p, h2);
	assert_int_equal(zm_pool_check(q), 0);
	assert_int_equal(zm_pool_free(q, foreign), 0);
	zm_pool_destroy(q);
	done(p, pg);
}

/* ---- what the backend does not do, and the checker ---- */

static void test_no_compaction(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS);
	struct zm_pool_class_stats cs;

	assert_int_equal(zm_pool_compact(p), -EOPNOTSUPP);
	assert_int_equal(zm_pool_shrink(p, 4096), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_OFF), 0);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_DEFAULT), 0);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_WATERMARK), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_RATIO), -EOPNOTSUPP);
	assert_int_equal(zm_pool_nr_classes(p), 0);
	assert_int_equal(zm_pool_class_stats(p, 0, &cs), -EINVAL);
	done(p, pg);
}

static void test_check_finds_damage(void **st)
{
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, PS);
	zm_handle_t a = get(p, 100), b = get(p, 100);
	uint8_t *m = zm_pool_map(p, a, ZM_MAP_RW);
	struct xv_hdr save, *hb = (struct xv_hdr *)(m + 104);

	zm_pool_unmap(p, a);
	save = *hb;
	hb->size += 8;                          /* an overrun into B's header */
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	assert_int_equal(zm_pool_free(p, b), -EINVAL);
	*hb = save;
	hb->word ^= XV_PREV_FREE;
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	*hb = save;
	put(p, a), put(p, b);
	done(p, pg);
}

/* ---- seeded randomized run against a model ---- */

struct mobj {
	struct pt_obj o;
	uintptr_t addr;
};

static void run_model(size_t P)
{
	enum { MAXO = 2000 };
	static struct mobj o[MAXO];
	uint8_t *buf = malloc(P);
	struct zm_pages *pg;
	struct zm_pool *p = mk(&pg, P);
	struct zm_pool_stats s;
	uint64_t slot = 0;
	size_t n = 0;
	struct rng r;

	rng_seed(&r, g_seed + P);
	for (long step = 0; step < g_steps; step++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (op < 45 && n < MAXO) {
			struct mobj *x = &o[n];
			size_t sz = op & 1 ? 1 + rng_below(&r, P) : pt_size(&r, P);
			uint8_t *m;

			x->o.h = zm_pool_alloc(p, sz);
			assert_true(x->o.h);
			x->o.size = sz;
			x->o.cookie = rng_next(&r);
			m = zm_pool_map(p, x->o.h, ZM_MAP_WO);
			assert_non_null(m);
			pt_fill(m, sz, x->o.cookie);
			zm_pool_unmap(p, x->o.h);
			x->addr = (uintptr_t)m;
			/* inside its page, overlapping nothing */
			assert_ptr_equal(m, (uint8_t *)zm_pages_addr(pg, xv_handle_pfn(x->o.h)) +
					    xv_handle_off(x->o.h));
			assert_true(xv_handle_off(x->o.h) + zm_pool_obj_size(p, x->o.h) <= P);
			for (size_t i = 0; i < n; i++)
				assert_true(o[i].addr + o[i].o.size <= x->addr ||
					    x->addr + sz <= o[i].addr);
			slot += zm_pool_obj_size(p, x->o.h);
			n++;
		} else if (op < 80 && n) {
			size_t i = rng_below(&r, n);

			assert_int_equal(zm_pool_read(p, o[i].o.h, buf, o[i].o.size), 0);
			assert_int_equal(pt_check(buf, o[i].o.size, o[i].o.cookie), 0);
			slot -= zm_pool_obj_size(p, o[i].o.h);
			assert_int_equal(zm_pool_free(p, o[i].o.h), 0);
			assert_int_equal(zm_pool_free(p, o[i].o.h), -EINVAL);
			o[i] = o[--n];
		} else if (n) {
			size_t i = rng_below(&r, n);

			assert_int_equal(pt_check_obj(p, &o[i].o, buf, &r), 0);
		}
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_stats(p, &s);
		assert_int_equal(s.objects, n);
		assert_int_equal(s.slot_bytes, slot);
		assert_true(s.pool_bytes <= s.pool_pages * P);
		assert_true(s.pool_bytes + s.meta_bytes >= s.pool_pages * P);
	}
	while (n--)
		assert_int_equal(zm_pool_free(p, o[n].o.h), 0);
	zm_pool_stats(p, &s);
	assert_int_equal(s.pool_pages, 0);
	free(buf);
	done(p, pg);
}

static void test_model(void **st)
{
	run_model(4096);
	run_model(16384);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_mapping),
		cmocka_unit_test(test_find_bitmaps),
		cmocka_unit_test(test_good_fit),
		cmocka_unit_test(test_own_list_fallback),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_page_return),
		cmocka_unit_test(test_half_page_waste),
		cmocka_unit_test(test_near_page),
		cmocka_unit_test(test_bad_handles),
		cmocka_unit_test(test_no_compaction),
		cmocka_unit_test(test_check_finds_damage),
		cmocka_unit_test(test_model),
	};
	const char *env = getenv("ZM_TEST_SEED");

	test_args(argc, argv, &g_seed, &g_steps);
	if (env) {
		g_seed = strtoull(env, NULL, 0);
		printf("seed %llu from ZM_TEST_SEED\n", (unsigned long long)g_seed);
	}
	return cmocka_run_group_tests_name("xv", tests, NULL, NULL);
}
