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

/* Now and then a mass free: three quarters of what the thread holds,
 * which the compactor packs. */
static int mass_free(struct pt_churn *c, unsigned op)
{
	if (op != 99 || rng_below(&c->r, 20))
		return 0;
	for (size_t k = c->n; k-- > 0;)
		if (rng_below(&c->r, 4)) {
			if (pt_drop(c->pool, &c->held[k], c->buf, &c->r))
				c->errors++;
			c->held[k] = c->held[--c->n];
		}
	return 1;
}

static void *worker(void *arg)
{
	struct pt_churn c = { .pool = g_pool, .id = (long)arg, .steps = g_steps,
			      .seed = g_seed * 17 + (uint64_t)(long)arg, .hold = HOLD,
			      .max_size = 4000, .put_end = 45, .check_end = 75,
			      .drop_end = 100, .check_size = true, .first = mass_free };

	return (void *)pt_churn_run(&c);
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
