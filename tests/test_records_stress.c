/*
 * zspage records moving under load (zsmalloc/record.c): threads free,
 * allocate, read and map (every mode) objects with a cookie-derived
 * pattern in a pool of 20,000 objects, whose records live in record
 * pages, while another thread calls zm_pool_compact() in a loop, which
 * moves objects and then the records of sparse record pages.  Every read
 * and map must see its object whole, the checker must be clean, and
 * records must really have moved.  Also under ThreadSanitizer.
 *
 *   test_records_stress [--seed N] [--steps N]
 */
#define ZMEM_ADVANCED  /* the pool's internals below need the advanced tier */

#include "pooltest.h"
#include "pool/pool_internal.h"
#include "pool/zsmalloc/zsmalloc.h"   /* records_moved */

#define NT 2
#define NOBJ 20000

static uint64_t g_seed;
static long g_steps = 200000;
static struct zm_pool *g_pool;
static struct pt_obj g_obj[NOBJ];

static int put(struct pt_obj *o, struct rng *r, uint64_t cookie)
{
	uint8_t buf[4096];

	o->size = pt_size(r, 4096);
	o->cookie = cookie;
	return pt_put(g_pool, o, buf);
}

/* Thread id owns the objects i with i % NT == id. */
static void *worker(void *arg)
{
	long id = (long)arg, errors = 0;
	uint8_t buf[4096];
	uint64_t serial = 0;
	struct rng r;

	rng_seed(&r, g_seed * 31 + (uint64_t)id);
	for (long s = 0; s < g_steps; s++) {
		size_t i = (size_t)rng_below(&r, NOBJ / NT) * NT + (size_t)id;
		struct pt_obj *o = &g_obj[i];
		unsigned op = (unsigned)rng_below(&r, 100);

		zm_handle_t h = o->h;
		const char *bad = NULL;

		if (!o->h) {
			if (op < 50 && put(o, &r, ((uint64_t)id << 48) | ++serial))
				bad = "put";
		} else if (op < 60) {
			if (pt_check_obj(g_pool, o, buf, &r))
				bad = "check";
		} else {
			if (pt_drop(g_pool, o, buf, &r))
				bad = "drop";
			o->h = 0;
		}
		if (bad) {
			fprintf(stderr, "thread %ld step %ld: %s of object %zu (%zu bytes, handle %#llx) failed\n",
				id, s, bad, i, o->size, (unsigned long long)(h ? h : o->h));
			errors++;
		}
	}
	return (void *)errors;
}

static void test_stress(void **state)
{
	struct zm_pool_config c = { .compact = ZM_COMPACT_OFF, .arena_bytes = 1u << 30 };
	uint64_t moved;
	struct rng r;
	uint8_t buf[4096];

	assert_int_equal(zm_pool_create(&c, &g_pool), 0);
	rng_seed(&r, g_seed);
	for (size_t i = 0; i < NOBJ; i++)
		assert_int_equal(put(&g_obj[i], &r, i + 1), 0);
	pt_run_compacting(g_pool, NT, worker);
	assert_int_equal(zm_pool_check(g_pool), 0);
	moved = __atomic_load_n(&zs_of(g_pool)->records_moved, __ATOMIC_RELAXED);
	printf("%llu records moved\n", (unsigned long long)moved);
	assert_true(moved > 0);
	for (size_t i = 0; i < NOBJ; i++)
		if (g_obj[i].h) {
			assert_int_equal(pt_check_obj(g_pool, &g_obj[i], buf, &r), 0);
			assert_int_equal(zm_pool_free(g_pool, g_obj[i].h), 0);
			g_obj[i].h = 0;
		}
	zm_pool_destroy(g_pool);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("records_stress", tests, NULL, NULL);
}
