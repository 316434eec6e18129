/*
 * Seeded randomized test of every pool configuration against a reference
 * model: a table of live objects with their size and a copy of their
 * contents.  Random steps: malloc (sizes from a realistic distribution),
 * free, write (whole or part), read and compare, map in each mode and
 * compare/modify, bad frees; and on owner keys, puts (zm_pool_prefetch_key
 * first half the time, then zm_pool_put_key,
 * replacing what the key held), gets through a callback (zm_pool_get_key)
 * and frees; the whole-structure checker after every step
 * (in the sanitizer builds after every 16th and the last: test_check_step).
 *
 *   test_pool_model [--seed N] [--steps N]
 */
#define ZMEM_ADVANCED  /* owner keys */
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

/* Owner keys and the model of what each holds (size 0: nothing). */
#define NKEYS 64
static uint64_t g_words[NKEYS];
static struct obj g_key[NKEYS];

struct get_ctx {
	const struct obj *o;
	int calls;
};

static int get_cmp(void *arg, const void *obj, size_t len)
{
	struct get_ctx *g = arg;

	g->calls++;
	if (len < g->o->size || memcmp(obj, g->o->data, g->o->size))
		return -EBADMSG;
	return 7;   /* handed back as is */
}

/* One step on a random key: put, get or free, against the model. */
static void key_step(struct zm_pool *p, struct rng *r, size_t P)
{
	uint64_t k = rng_below(r, NKEYS);
	struct obj *o = &g_key[k];
	unsigned op = (unsigned)rng_below(r, 3);

	assert_int_equal(zm_pool_key_handle(p, k) != 0, o->size != 0);
	if (op == 0) {
		size_t sz = pt_size(r, P);
		uint8_t *d = malloc(sz);

		for (size_t i = 0; i < sz; i++)
			d[i] = (uint8_t)rng_next(r);
		if (rng_below(r, 2))
			zm_pool_prefetch_key(p, k);   /* as the store does */
		assert_int_equal(zm_pool_put_key(p, k, d, sz), 0);
		free(o->data);
		*o = (struct obj){ 0, sz, d };
	} else if (op == 1) {
		struct get_ctx g = { o, 0 };

		assert_int_equal(zm_pool_get_key(p, k, get_cmp, &g), o->size ? 7 : -EINVAL);
		assert_int_equal(g.calls, o->size != 0);
	} else {
		assert_int_equal(zm_pool_free_key(p, k), o->size ? 0 : -EINVAL);
		free(o->data);
		*o = (struct obj){ 0 };
	}
}

static uint64_t keys_held(void)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < NKEYS; k++)
		n += g_key[k].size != 0;
	return n;
}

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
	memset(g_words, 0, sizeof(g_words));
	memset(g_key, 0, sizeof(g_key));
	c.words = g_words;
	c.nwords = NKEYS;
	rng_seed(&r, g_seed);
	assert_int_equal(zm_pool_create(&c, &p), 0);
	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (rng_below(&r, 4) == 0) {
			key_step(p, &r, P);
		} else if (op < 35 && n < MAXOBJ) {
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
	assert_int_equal(st.objects, n + keys_held());
	for (unsigned k = 0; k < NKEYS; k++) {
		struct get_ctx g = { &g_key[k], 0 };

		if (!g_key[k].size)
			continue;
		assert_int_equal(zm_pool_get_key(p, k, get_cmp, &g), 7);
		assert_int_equal(zm_pool_free_key(p, k), 0);
		free(g_key[k].data);
		g_key[k] = (struct obj){ 0 };
	}
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
