/*
 * Seeded randomized test of the pages layer against a reference model.
 *
 * The model knows which pages the test owns (a byte per pfn) and every
 * allocation (single page or run).  Random steps: alloc single, alloc run,
 * bulk alloc of random counts, frees in random order (single, bulk subsets,
 * runs), bad frees of pages the model says are not ours, flushes and trims.
 * After every step the whole-structure checker runs and the stats are
 * compared with the model; every page carries a cookie checked on free.
 *
 *   test_pages_model [--seed N] [--steps N]
 */
#define ZMEM_ADVANCED  /* tests reach the advanced tier too */
#include <errno.h>

#include "testutil.h"
#include <zmem/pages.h>

#define NPAGES 2048
#define LIMIT  1500

struct alloc {
	zm_pfn_t pfn;
	unsigned order;
};

static uint64_t g_seed;
static long g_steps = 20000;

static struct zm_pages *p;
static struct alloc allocs[NPAGES];
static size_t nallocs, owned_pages;
static uint8_t owned[NPAGES];
static zm_pfn_t grow_next, grow_end;   /* the run being grown */
static size_t grown_cached, grown_at;  /* pages it took each way */

static uint64_t cookie(zm_pfn_t pfn) { return 0x5EED000000000000ull ^ (pfn * 2654435761u); }

static void take(zm_pfn_t pfn, unsigned order)
{
	for (uint32_t i = 0; i < (1u << order); i++) {
		assert_true(pfn + i < NPAGES);
		assert_int_equal(owned[pfn + i], 0); /* never handed out twice */
		owned[pfn + i] = 1;
		*(uint64_t *)zm_pages_addr(p, pfn + i) = cookie(pfn + i);
	}
	allocs[nallocs++] = (struct alloc){ pfn, order };
	owned_pages += 1u << order;
}

static struct alloc drop(size_t i)
{
	struct alloc a = allocs[i];

	for (uint32_t j = 0; j < (1u << a.order); j++) {
		assert_int_equal(*(uint64_t *)zm_pages_addr(p, a.pfn + j), cookie(a.pfn + j));
		owned[a.pfn + j] = 0;
	}
	allocs[i] = allocs[--nallocs];
	owned_pages -= 1u << a.order;
	return a;
}

static void verify(void)
{
	struct zm_pages_stats s;

	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.in_use, owned_pages);
	assert_int_equal(s.in_use + s.cached + s.free, NPAGES);
	assert_true(s.in_use + s.cached <= LIMIT);
}

static void step(struct rng *r)
{
	struct zm_pages_stats s;
	zm_pfn_t v[128], pfn;
	size_t n, got;
	unsigned op = (unsigned)rng_below(r, 110);

	zm_pages_stats(p, &s);
	if (op >= 100 && (op < 104 || grow_next == grow_end)) {  /* a new run */
		unsigned len = 1 + (unsigned)rng_below(r, ZM_PAGES_RUN_MAX);
		int rc = zm_pages_alloc_run(p, len, &pfn);

		if (rc == 0) {
			take(pfn, 0);
			grow_next = pfn + 1;
			grow_end = pfn + len < NPAGES ? pfn + len : NPAGES;
		} else {
			assert_int_equal(rc, -ENOMEM);
		}
	} else if (op >= 100) {                          /* grow it by one */
		int rc = zm_pages_take_cached(p, grow_next);

		if (rc == 0) {
			take(grow_next, 0);
			grown_cached++;
		} else {
			assert_int_equal(rc, -ENOENT);
			rc = zm_pages_alloc_at(p, grow_next);
			if (rc == 0) {
				take(grow_next, 0);
				grown_at++;
			}
			else
				assert_true(rc == -EBUSY || rc == -ENOMEM);
		}
		grow_next++;
	} else if (op < 30) {                                  /* single */
		int rc = zm_pages_alloc(p, &pfn);

		if (rc == 0)
			take(pfn, 0);
		else
			assert_true(rc == -ENOMEM &&
				    (s.in_use + s.cached >= LIMIT || s.free + s.cached == 0));
	} else if (op < 40) {                           /* run */
		unsigned order = (unsigned)rng_below(r, 6);

		if (zm_pages_alloc_order(p, order, &pfn) == 0) {
			assert_int_equal(pfn % (1u << order), 0);
			take(pfn, order);
		}
	} else if (op < 55) {                           /* bulk */
		n = 1 + rng_below(r, 128);
		got = zm_pages_alloc_bulk(p, n, v);
		if (got < n)
			assert_true(s.in_use + s.cached + n > LIMIT || s.free < n);
		for (size_t i = 0; i < got; i++)
			take(v[i], 0);
	} else if (op < 70 && nallocs) {                /* free one */
		struct alloc a = drop(rng_below(r, nallocs));

		if (a.order)
			assert_int_equal(zm_pages_free_order(p, a.pfn, a.order), 0);
		else
			assert_int_equal(zm_pages_free(p, a.pfn), 0);
	} else if (op < 85 && nallocs) {                /* free a bulk subset */
		n = 0;
		for (size_t tries = 0; tries < 64 && nallocs && n < 128; tries++) {
			size_t i = rng_below(r, nallocs);

			if (allocs[i].order == 0)
				v[n++] = drop(i).pfn;
		}
		assert_int_equal(zm_pages_free_bulk(p, n, v), 0);
	} else if (op < 95) {                           /* bad free */
		pfn = (zm_pfn_t)rng_below(r, NPAGES + 16);
		if (pfn >= NPAGES || !owned[pfn]) {
			assert_int_equal(zm_pages_free(p, pfn), -EINVAL);
		} else {
			/* ours: only a run's tail or head as single is bad */
			for (size_t i = 0; i < nallocs; i++)
				if (allocs[i].order && pfn >= allocs[i].pfn &&
				    pfn < allocs[i].pfn + (1u << allocs[i].order))
					assert_int_equal(zm_pages_free(p, pfn), -EINVAL);
		}
	} else if (op < 98) {
		zm_pages_flush_thread(p);
	} else {
		zm_pages_trim(p);
	}
}

static void model(unsigned zones)
{
	struct zm_pages_config c = { .arena_bytes = NPAGES * 4096, .limit_pages = LIMIT,
				     .reserve_pages = 64, .cache_pages = 16, .zones = zones };
	struct zm_pages_stats s;
	struct rng r;

	rng_seed(&r, g_seed);
	grown_cached = grown_at = 0;
	assert_int_equal(zm_pages_create(&c, &p), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.zones, zones);
	for (long i = 0; i < g_steps; i++) {
		step(&r);
		verify();
	}
	while (nallocs) {
		struct alloc a = drop(nallocs - 1);

		assert_int_equal(a.order ? zm_pages_free_order(p, a.pfn, a.order)
					 : zm_pages_free(p, a.pfn), 0);
	}
	verify();
	zm_pages_destroy(p);
	printf("runs grown: %zu pages set aside, %zu taken free\n", grown_cached, grown_at);
	if (g_steps >= 10000)
		assert_true(grown_cached > 0 && grown_at > 0);
}

/* One zone; and two of 1024 pages, where the limit (1500) makes the
 * thread's allocations spill from its home zone into the other. */
static void test_model(void **st) { model(1); }
static void test_model_zones(void **st) { model(2); }

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_model),
					    cmocka_unit_test(test_model_zones) };

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("pages_model", tests, NULL, NULL);
}
