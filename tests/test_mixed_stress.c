/*
 * Mixed zspages under load: threads allocate, write, read, map (every
 * mode) and free objects with a cookie-derived pattern in a pool that
 * puts objects into mixed zspages whenever their class has no zspage,
 * while one thread compacts in a loop, evacuating the mixed zspages that
 * frees leave sparse into the classes, or, after a thread's mass free
 * (three quarters of what it holds, now and then), packing them into new
 * mixed zspages.  Every read and map must see the object whole, the
 * checker must be clean at the end, and objects must really have moved
 * out of mixed zspages, some packed into others.
 *
 *   test_mixed_stress [--seed N] [--steps N]
 */
#define ZMEM_ADVANCED  /* the pool's internals below need the advanced tier */

#include <pthread.h>

#include "pooltest.h"
#include "pool/pool_internal.h"
#include "pool/zsmalloc/zsmalloc.h"   /* objects_repacked */

#define NT 3
#define HOLD 300

static uint64_t g_seed;
static long g_steps = 100000;
static struct zm_pool *g_pool;

static void *worker(void *arg)
{
	long id = (long)arg, errors = 0;
	struct pt_obj hold[HOLD];
	uint8_t buf[4096];
	size_t n = 0;
	uint64_t serial = 0;
	struct rng r;

	rng_seed(&r, g_seed * 17 + (uint64_t)id);
	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (op == 99 && rng_below(&r, 20) == 0) {
			/* now and then a mass free: three quarters of what the
			 * thread holds, which the compactor packs */
			for (size_t k = n; k-- > 0;)
				if (rng_below(&r, 4)) {
					if (pt_drop(g_pool, &hold[k], buf, &r))
						errors++;
					hold[k] = hold[--n];
				}
		} else if (op < 45 && n < HOLD) {
			struct pt_obj o = { 0, pt_size(&r, 4000), ((uint64_t)id << 48) | ++serial };

			int rc = pt_put(g_pool, &o, buf);

			if (rc)
				errors++;
			if (o.h)
				hold[n++] = o;
		} else if (op < 75 && n) {
			struct pt_obj *o = &hold[rng_below(&r, n)];

			if (pt_check_obj(g_pool, o, buf, &r) || zm_pool_obj_size(g_pool, o->h) < o->size)
				errors++;
		} else if (n) {
			size_t i = rng_below(&r, n);

			if (pt_drop(g_pool, &hold[i], buf, &r))
				errors++;
			hold[i] = hold[--n];
		}
	}
	while (n) {
		n--;
		if (pt_drop(g_pool, &hold[n], buf, &r))
			errors++;
	}
	return (void *)errors;
}

/* state: NULL, explicit compaction only; 1, the same with the copy span
 * method (objects across pages copied); 2, the background compactor
 * (RATIO, eager) as well */
static void test_stress(void **state)
{
	long mode = (long)*state;
	struct zm_pool_config c = { .mixed_zspages = 1, .arena_bytes = 1u << 30,
				    .compact = mode == 2 ? ZM_COMPACT_RATIO : ZM_COMPACT_OFF,
				    .compact_ratio = 99,
				    .span = mode == 1 ? ZM_SPAN_COPY : ZM_SPAN_DEFAULT };
	struct zm_pool_stats st;
	uint64_t repacked;

	assert_int_equal(zm_pool_create(&c, &g_pool), 0);
	pt_run_compacting(g_pool, NT, worker);
	zm_pool_set_compaction(g_pool, ZM_COMPACT_OFF);
	assert_int_equal(zm_pool_check(g_pool), 0);
	zm_pool_stats(g_pool, &st);
	repacked = __atomic_load_n(&zs_of(g_pool)->objects_repacked, __ATOMIC_RELAXED);
	printf("%llu objects moved (%llu packed into mixed zspages), %llu pages compacted in "
	       "%llu passes\n",
	       (unsigned long long)st.objects_moved, (unsigned long long)repacked,
	       (unsigned long long)st.pages_compacted, (unsigned long long)st.compactions);
	assert_true(st.objects_moved > 0);
	assert_true(repacked > 0);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.pool_pages, 0);
	zm_pool_destroy(g_pool);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_prestate(test_stress, (void *)0),
		cmocka_unit_test_prestate(test_stress, (void *)1),
		cmocka_unit_test_prestate(test_stress, (void *)2),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("mixed_stress", tests, NULL, NULL);
}
