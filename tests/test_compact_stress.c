/*
 * Compaction under load: threads malloc, write, read, map (every mode) and
 * free objects with a cookie-derived pattern, while one thread calls
 * zm_pool_compact() in a loop and the background compactor runs with an
 * eager policy.  Every read and map must see the object whole; the checker
 * must be clean at the end; objects must really have moved.
 *
 *   test_compact_stress [--seed N] [--steps N]
 */
#include <errno.h>

#include "pooltest.h"

#define NT 3
#define HOLD 400

static uint64_t g_seed;
static long g_steps = 150000;
static struct zm_pool *g_pool;

/* bursts of frees leave holes for the compactor */
static void *worker(void *arg)
{
	struct pt_churn c = { .pool = g_pool, .id = (long)arg, .steps = g_steps,
			      .seed = g_seed * 13 + (uint64_t)(long)arg, .hold = HOLD,
			      .max_size = 4096, .put_end = 45, .check_end = 75,
			      .drop_end = 100 };

	return (void *)pt_churn_run(&c);
}

static void test_stress(void **state)
{
	struct zm_pool_config c = { .compact = ZM_COMPACT_RATIO, .compact_ratio = 99,
				    .arena_bytes = 1u << 30 };
	struct zm_pool_stats st;

	if (*state)
		c.span = ZM_SPAN_COPY;
	assert_int_equal(zm_pool_create(&c, &g_pool), 0);
	pt_run_compacting(g_pool, NT, worker);
	zm_pool_set_compaction(g_pool, ZM_COMPACT_OFF);
	assert_int_equal(zm_pool_check(g_pool), 0);
	zm_pool_stats(g_pool, &st);
	printf("%llu objects moved, %llu pages compacted in %llu passes\n",
	       (unsigned long long)st.objects_moved, (unsigned long long)st.pages_compacted,
	       (unsigned long long)st.compactions);
	assert_true(st.objects_moved > 0);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.pool_pages, 0);
	zm_pool_destroy(g_pool);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_prestate(test_stress, NULL),
		cmocka_unit_test_prestate(test_stress, (void *)1),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("compact_stress", tests, NULL, NULL);
}
