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

/* Ops 90..94 hand an object to the exchange queue, the rest take one
 * from it (checked, then kept). */
static int exchange(struct pt_churn *c, unsigned op)
{
	if (op < 95 && c->n) {
		size_t i = rng_below(&c->r, c->n);

		pthread_mutex_lock(&xlock);
		if (xn < 512) {
			xq[xn++] = c->held[i];
			c->held[i] = c->held[--c->n];
		}
		pthread_mutex_unlock(&xlock);
	} else {
		struct pt_obj o;
		int got = 0;

		pthread_mutex_lock(&xlock);
		if (xn && c->n < c->hold) {
			o = xq[--xn];
			got = 1;
		}
		pthread_mutex_unlock(&xlock);
		if (got) {
			if (pt_check_obj(c->pool, &o, c->buf, &c->r))
				c->errors++;
			c->held[c->n++] = o;
		}
	}
	return 1;
}

static void *worker(void *arg)
{
	struct pt_churn c = { .pool = g_pool, .id = (long)arg, .steps = g_steps,
			      .seed = g_seed * 31 + (uint64_t)(long)arg, .hold = HOLD,
			      .max_size = g_page, .put_end = 40, .check_end = 70,
			      .drop_end = 90, .other = exchange };

	return (void *)pt_churn_run(&c);
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
