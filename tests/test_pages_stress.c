/*
 * Multi-threaded stress of the pages layer: 2..8 threads allocate single
 * pages, runs and bulk batches, write a cookie (owner thread, pfn, serial)
 * into every page they hold, check it before freeing, and hand some pages
 * to other threads to free (cross-thread frees).  One more thread keeps
 * trimming (which takes back the caches of workers between calls) and
 * reading stats.  At the end: checker clean, nothing in use.
 *
 *   test_pages_stress [--seed N] [--steps N]
 */
#include <errno.h>
#include <pthread.h>

#include "testutil.h"
#include <zmem/pages.h>

#define MAXT 8
#define HOLD 256

static uint64_t g_seed;
static long g_steps = 40000;
static struct zm_pages *p;
static volatile int g_stop;

struct held {
	zm_pfn_t pfn;
	unsigned order;
	uint64_t cookie;
};

/* exchange: pages handed between threads, with their cookies */
static pthread_mutex_t xlock = PTHREAD_MUTEX_INITIALIZER;
static struct held xq[1024];
static size_t xn;

static void stamp(const struct held *h)
{
	for (uint32_t i = 0; i < (1u << h->order); i++) {
		uint64_t *m = zm_pages_addr(p, h->pfn + i);

		m[0] = h->cookie + i;
		m[511] = ~(h->cookie + i);
	}
}

static int verify_and_free(const struct held *h)
{
	for (uint32_t i = 0; i < (1u << h->order); i++) {
		uint64_t *m = zm_pages_addr(p, h->pfn + i);

		if (m[0] != h->cookie + i || m[511] != ~(h->cookie + i))
			return -1;
	}
	return h->order ? zm_pages_free_order(p, h->pfn, h->order)
			: zm_pages_free(p, h->pfn);
}

struct targ {
	int id;
	int failures;
};

static void *worker(void *arg)
{
	struct targ *t = arg;
	struct held hold[HOLD];
	size_t n = 0;
	uint64_t serial = 0;
	struct rng r;

	rng_seed(&r, g_seed + (uint64_t)t->id * 7919);
	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (op < 45 && n < HOLD - 32) {
			zm_pfn_t v[32];
			size_t k = 1, got;

			if (op < 25) {
				got = zm_pages_alloc(p, &v[0]) == 0;
			} else if (op < 35) {
				unsigned order = (unsigned)rng_below(&r, 4);

				if (zm_pages_alloc_order(p, order, &v[0]) == 0) {
					hold[n] = (struct held){ v[0], order,
						((uint64_t)t->id << 56) | (serial++ << 8) };
					stamp(&hold[n++]);
				}
				continue;
			} else {
				k = 1 + rng_below(&r, 32);
				got = zm_pages_alloc_bulk(p, k, v);
			}
			for (size_t i = 0; i < got; i++) {
				hold[n] = (struct held){ v[i], 0,
					((uint64_t)t->id << 56) | (serial++ << 8) };
				stamp(&hold[n++]);
			}
		} else if (op < 85 && n) {
			size_t i = rng_below(&r, n);

			if (verify_and_free(&hold[i]))
				t->failures++;
			hold[i] = hold[--n];
		} else if (op < 95 && n) {              /* hand one to another thread */
			size_t i = rng_below(&r, n);

			pthread_mutex_lock(&xlock);
			if (xn < 1024) {
				xq[xn++] = hold[i];
				hold[i] = hold[--n];
			}
			pthread_mutex_unlock(&xlock);
		} else {                                /* free one handed to us */
			struct held h;
			int got = 0;

			pthread_mutex_lock(&xlock);
			if (xn) {
				h = xq[--xn];
				got = 1;
			}
			pthread_mutex_unlock(&xlock);
			if (got && verify_and_free(&h))
				t->failures++;
		}
	}
	while (n)
		if (verify_and_free(&hold[--n]))
			t->failures++;
	return NULL;
}

static void *trimmer(void *arg)
{
	struct zm_pages_stats s;

	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		zm_pages_trim(p);
		zm_pages_stats(p, &s);
		if (s.in_use + s.cached + s.free != s.total_pages)
			(*(int *)arg)++;
		usleep(200);
	}
	return NULL;
}

static void run(int nthreads, unsigned zones)
{
	struct zm_pages_config c = { .arena_bytes = 32 << 20, .reserve_pages = 128,
				     .zones = zones };
	pthread_t tid[MAXT], tt;
	struct targ ta[MAXT];
	struct zm_pages_stats s;
	int trim_bad = 0;

	assert_int_equal(zm_pages_create(&c, &p), 0);
	g_stop = 0;
	pthread_create(&tt, NULL, trimmer, &trim_bad);
	for (int i = 0; i < nthreads; i++) {
		ta[i] = (struct targ){ i, 0 };
		pthread_create(&tid[i], NULL, worker, &ta[i]);
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		assert_int_equal(ta[i].failures, 0);
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	pthread_join(tt, NULL);
	assert_int_equal(trim_bad, 0);
	while (xn) {
		xn--;
		assert_int_equal(verify_and_free(&xq[xn]), 0);
	}
	zm_pages_flush_thread(p);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_stats(p, &s);
	printf("%d threads, %u zones: %llu pages taken back from caches by the trims\n",
	       nthreads, zones, (unsigned long long)s.stolen_pages);
	assert_int_equal(s.in_use, 0);
	assert_int_equal(s.cached, 0);   /* worker threads gave theirs back at exit */
	zm_pages_destroy(p);
}

/* one zone, and zones of 2048 pages each (the threads' homes differ, and
 * pages handed between threads go back to zones not their freer's) */
static void test_2(void **st) { run(2, 1); }
static void test_4(void **st) { run(4, 1); }
static void test_8(void **st) { run(8, 1); }
static void test_2_zones(void **st) { run(2, 2); }
static void test_8_zones(void **st) { run(8, 4); }

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_2),
		cmocka_unit_test(test_4),
		cmocka_unit_test(test_8),
		cmocka_unit_test(test_2_zones),
		cmocka_unit_test(test_8_zones),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("pages_stress", tests, NULL, NULL);
}
