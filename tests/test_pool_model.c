/*
 * Seeded randomized test of every pool configuration against a reference
 * model: a table of live objects with their size and a copy of their
 * contents.  Random steps: malloc (sizes from a realistic distribution),
 * free, write (whole or part), read and compare, map in each mode and
 * compare/modify, bad frees; the whole-structure checker after every step
 * (in the sanitizer builds after every 16th and the last: test_check_step).
 *
 *   test_pool_model [--seed N] [--steps N]
 */
#include <errno.h>

#include "pooltest.h"

#define MAXOBJ 3000

struct obj {
	zm_handle_t h;
	size_t size;
	uint8_t *data;
};

static uint64_t g_seed;
static long g_steps = 20000;

static void run(const struct zm_pool_config *cfg)
{
	struct zm_pool_config c = *cfg;
	size_t P = c.page_size ? c.page_size : 4096;
	static struct obj o[MAXOBJ];
	size_t n = 0, nfreed = 0;
	zm_handle_t freed[64];
	uint8_t *buf = malloc(P);
	struct zm_pool *p;
	struct zm_pool_stats st;
	struct rng r;

	c.arena_bytes = 512 << 20;
	rng_seed(&r, g_seed);
	assert_int_equal(zm_pool_create(&c, &p), 0);
	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (op < 35 && n < MAXOBJ) {
			size_t sz = pt_size(&r, P);
			zm_handle_t h = zm_pool_alloc(p, sz);

			assert_true(h);
			o[n] = (struct obj){ h, sz, malloc(sz) };
			for (size_t i = 0; i < sz; i++)
				o[n].data[i] = (uint8_t)rng_next(&r);
			assert_int_equal(zm_pool_write(p, h, o[n].data, sz), 0);
			n++;
		} else if (op < 55 && n) {
			size_t i = rng_below(&r, n);

			assert_int_equal(zm_pool_free(p, o[i].h), 0);
			freed[nfreed < 64 ? nfreed++ : rng_below(&r, 64)] = o[i].h;
			free(o[i].data);
			o[i] = o[--n];
		} else if (op < 65 && n) {              /* partial write */
			size_t i = rng_below(&r, n), len = 1 + rng_below(&r, o[i].size);

			for (size_t k = 0; k < len; k++)
				o[i].data[k] = (uint8_t)rng_next(&r);
			assert_int_equal(zm_pool_write(p, o[i].h, o[i].data, len), 0);
		} else if (op < 80 && n) {              /* read */
			size_t i = rng_below(&r, n);

			assert_int_equal(zm_pool_read(p, o[i].h, buf, o[i].size), 0);
			assert_memory_equal(buf, o[i].data, o[i].size);
		} else if (op < 95 && n) {              /* map */
			size_t i = rng_below(&r, n);

			pt_model_map(p, o[i].h, o[i].data, o[i].size, &r);
		} else {                                /* bad handles */
			/* a freed handle (its slot's generation moved on) and a
			 * live one with a wrong generation are both refused */
			if (nfreed)
				assert_int_equal(zm_pool_free(p, freed[rng_below(&r, nfreed)]),
						 -EINVAL);
			if (n)
				assert_int_equal(zm_pool_free(p, o[rng_below(&r, n)].h ^ 2),
						 -EINVAL);
		}
		if (test_check_step(s, g_steps))
			assert_int_equal(zm_pool_check(p), 0);
	}
	zm_pool_stats(p, &st);
	assert_int_equal(st.objects, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(zm_pool_read(p, o[i].h, buf, o[i].size), 0);
		assert_memory_equal(buf, o[i].data, o[i].size);
		assert_int_equal(zm_pool_free(p, o[i].h), 0);
		free(o[i].data);
	}
	zm_pool_stats(p, &st);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.pool_pages, 0);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
	free(buf);
}

static void test_model(void **state)
{
	run(*state);
}

int main(int argc, char **argv)
{
	test_args(argc, argv, &g_seed, &g_steps);
	return pt_run_configs("pool_model", test_model);
}
