/*
 * Multi-threaded stress of every pool configuration: threads malloc
 * objects of realistic sizes, fill each with a pattern derived from a
 * cookie (thread, serial), verify it through read and through each map
 * mode, rewrite it, hand objects to other threads, and free them there.
 * One shared pool, no other synchronisation than the exchange queue.
 *
 *   test_pool_stress [--seed N] [--steps N]
 */
#include <errno.h>
#include <pthread.h>

#include "pooltest.h"

#define NT 4
#define HOLD 200

static uint64_t g_seed;
static long g_steps = 20000;
static struct zm_pool *g_pool;
static size_t g_page;

static pthread_mutex_t xlock = PTHREAD_MUTEX_INITIALIZER;
static struct pt_obj xq[512];
static size_t xn;

static void *worker(void *arg)
{
	long id = (long)arg, errors = 0;
	struct pt_obj hold[HOLD];
	uint8_t *buf = malloc(g_page);
	size_t n = 0;
	uint64_t serial = 0;
	struct rng r;

	rng_seed(&r, g_seed * 31 + (uint64_t)id);
	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (op < 40 && n < HOLD) {
			struct pt_obj o = { 0, pt_size(&r, g_page),
					  ((uint64_t)id << 48) | ++serial };

			if (pt_put(g_pool, &o, buf))
				errors++;
			if (o.h)
				hold[n++] = o;
		} else if (op < 70 && n) {
			size_t i = rng_below(&r, n);

			if (pt_check_obj(g_pool, &hold[i], buf, &r))
				errors++;
		} else if (op < 90 && n) {
			size_t i = rng_below(&r, n);

			if (pt_drop(g_pool, &hold[i], buf, &r))
				errors++;
			hold[i] = hold[--n];
		} else if (op < 95 && n) {
			size_t i = rng_below(&r, n);

			pthread_mutex_lock(&xlock);
			if (xn < 512) {
				xq[xn++] = hold[i];
				hold[i] = hold[--n];
			}
			pthread_mutex_unlock(&xlock);
		} else {
			struct pt_obj o;
			int got = 0;

			pthread_mutex_lock(&xlock);
			if (xn && n < HOLD) {
				o = xq[--xn];
				got = 1;
			}
			pthread_mutex_unlock(&xlock);
			if (got) {
				if (pt_check_obj(g_pool, &o, buf, &r))
					errors++;
				hold[n++] = o;
			}
		}
	}
	while (n) {
		n--;
		if (pt_drop(g_pool, &hold[n], buf, &r))
			errors++;
	}
	free(buf);
	return (void *)errors;
}

static void test_stress(void **state)
{
	struct zm_pool_config c = *(const struct zm_pool_config *)*state;
	struct zm_pool_stats st;
	pthread_t t[NT];
	void *ret;

	c.arena_bytes = 512 << 20;
	assert_int_equal(zm_pool_create(&c, &g_pool), 0);
	g_page = c.page_size ? c.page_size : 4096;
	xn = 0;
	for (long i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < NT; i++) {
		pthread_join(t[i], &ret);
		assert_int_equal((long)ret, 0);
	}
	while (xn) {
		xn--;
		assert_int_equal(zm_pool_free(g_pool, xq[xn].h), 0);
	}
	assert_int_equal(zm_pool_check(g_pool), 0);
	zm_pool_stats(g_pool, &st);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.pool_pages, 0);
	zm_pool_destroy(g_pool);
}

int main(int argc, char **argv)
{
	test_args(argc, argv, &g_seed, &g_steps);
	return pt_run_configs("pool_stress", test_stress);
}
