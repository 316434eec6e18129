/*
 * Fixed costs: what an empty pool, pages instance, store and tmem
 * instance cost in resident memory, and what many small pools cost in
 * threads and memory.
 *
 *   an empty default pool, an empty pages instance, an empty store of
 *   2^20 pages (4 GiB), an empty default tmem instance: at most 64 KiB
 *   resident each;
 *   1000 default pools holding one 100-byte object each: at most 2 more
 *   threads and 64 MiB more resident in all, and the memory and threads
 *   back once they are destroyed;
 *   100 pools made and destroyed over and over: the worker never leaks
 *   a thread.
 *
 * Resident memory is read from /proc/self/statm as a difference around
 * many instances, after the same was done once (libc's first-use costs:
 * its heap, the first thread's stack, are not the library's).  Under
 * AddressSanitizer (and ThreadSanitizer) the figures mean nothing
 * (shadow memory, quarantine): the RSS assertions are skipped there, the
 * thread counts are not.  (ThreadSanitizer cannot reserve 1000 pools'
 * address space at all; the file is not among the threaded tests it
 * runs.)
 */
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <zmem/pages.h>
#include <zmem/store.h>
#include <zmem/tmem.h>

#include "testutil.h"
#include <zmem/pool.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_MEANINGFUL 0
#else
#define RSS_MEANINGFUL 1
#endif

#define EMPTY_MAX      ((size_t)64 << 10)
#define NPOOLS         1000
#define NPOOLS_RSS_MAX ((size_t)64 << 20)
#define NPOOLS_THREADS 2
/* what may stay resident after everything is destroyed (libc's heap
 * trimmed): the registries' shells, page tables */
#define GIVEN_BACK_SLACK ((size_t)2 << 20)

static unsigned threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The worker ends itself once nothing is registered: wait for it. */
static unsigned threads_settled(unsigned want, int ms)
{
	unsigned n = threads();

	for (int t = 0; t < ms && n > want; t += 10) {
		usleep(10000);
		n = threads();
	}
	return n;
}

static void check_rss(const char *what, size_t before, size_t after, size_t max)
{
	long d = (long)after - (long)before;

	print_message("%s: %+ld KiB resident\n", what, d / 1024);
	if (RSS_MEANINGFUL && d > (long)max)
		fail_msg("%s costs %ld KiB resident, more than %zu KiB", what, d / 1024,
			 max / 1024);
}

/*
 * The kernel counts a thread's resident pages lazily (a few dozen page
 * faults may sit in a per-thread or per-CPU counter before statm sees
 * them): one instance's difference read anywhere from 0 to 200 KiB.  So
 * each figure is the difference around EMPTY_N live instances, divided
 * by EMPTY_N, after the same was done once for libc's first-use costs
 * and the worker thread's.
 */
#define EMPTY_N 32

enum kind { POOL, PAGES, STORE, TMEM };

static void *create(enum kind k)
{
	struct zm_store_config sc = { .nr_pages = (uint64_t)1 << 20 };
	struct zm_pool *pool = NULL;
	struct zm_pages *pages = NULL;
	struct zm_store *store = NULL;
	struct zm_tmem *tmem = NULL;

	switch (k) {
	case POOL:
		assert_int_equal(zm_pool_create(NULL, &pool), 0);
		return pool;
	case PAGES:
		assert_int_equal(zm_pages_create(NULL, &pages), 0);
		return pages;
	case STORE:
		assert_int_equal(zm_store_create(&sc, &store), 0);
		return store;
	case TMEM:
		assert_int_equal(zm_tmem_create(NULL, &tmem), 0);
		return tmem;
	}
	return NULL;
}

static void destroy(enum kind k, void *o)
{
	if (k == POOL)
		zm_pool_destroy(o);
	else if (k == PAGES)
		zm_pages_destroy(o);
	else if (k == TMEM)
		zm_tmem_destroy(o);
	else
		zm_store_destroy(o);
}

/* Resident bytes each of EMPTY_N live instances costs. */
static size_t empty_cost(enum kind k)
{
	void *o[EMPTY_N];
	size_t r0, r1;

	for (int round = 0; round < 2; round++) {
		r0 = test_rss_bytes();
		for (int i = 0; i < EMPTY_N; i++)
			o[i] = create(k);
		r1 = test_rss_bytes();
		for (int i = 0; i < EMPTY_N; i++)
			destroy(k, o[i]);
	}
	return r1 > r0 ? (r1 - r0) / EMPTY_N : 0;
}

static void test_empty_pool(void **state)
{
	check_rss("empty pool", 0, empty_cost(POOL), EMPTY_MAX);
}

static void test_empty_pages(void **state)
{
	check_rss("empty pages instance", 0, empty_cost(PAGES), EMPTY_MAX);
}

static void test_empty_store(void **state)
{
	check_rss("empty store of 2^20 pages", 0, empty_cost(STORE), EMPTY_MAX);
}

/* tmem.h: an empty instance with the default configuration */
static void test_empty_tmem(void **state)
{
	check_rss("empty tmem instance", 0, empty_cost(TMEM), EMPTY_MAX);
}

static void test_thousand_pools(void **state)
{
	struct zm_pool **p = calloc(NPOOLS, sizeof(*p));
	zm_handle_t *h = calloc(NPOOLS, sizeof(*h));
	unsigned t0, t1;
	size_t r0, r1;

	assert_non_null(p);
	assert_non_null(h);
	/* the warm-up: one pool with one object, then gone */
	assert_int_equal(zm_pool_create(NULL, &p[0]), 0);
	h[0] = zm_pool_alloc(p[0], 100);
	assert_true(h[0] != 0);
	assert_int_equal(zm_pool_free(p[0], h[0]), 0);
	zm_pool_destroy(p[0]);
	malloc_trim(0);
	t0 = threads_settled(1, 2000);
	r0 = test_rss_bytes();
	for (int i = 0; i < NPOOLS; i++) {
		assert_int_equal(zm_pool_create(NULL, &p[i]), 0);
		h[i] = zm_pool_alloc(p[i], 100);
		assert_true(h[i] != 0);
	}
	r1 = test_rss_bytes();
	t1 = threads();
	print_message("%d pools with an object each: %+d threads\n", NPOOLS, (int)(t1 - t0));
	assert_true(t1 <= t0 + NPOOLS_THREADS);
	check_rss("1000 pools with an object each", r0, r1, NPOOLS_RSS_MAX);
	for (int i = 0; i < NPOOLS; i++) {
		assert_int_equal(zm_pool_free(p[i], h[i]), 0);
		zm_pool_destroy(p[i]);
	}
	/* libc keeps freed heap memory until trimmed: that is not ours */
	malloc_trim(0);
	check_rss("after destroying them", r0, test_rss_bytes(), GIVEN_BACK_SLACK);
	assert_true(threads_settled(t0, 2000) <= t0);
	free(p);
	free(h);
}

static void test_no_thread_leak(void **state)
{
	struct zm_pool *p[100];
	unsigned t0 = threads_settled(1, 2000), most = t0;

	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 100; i++) {
			assert_int_equal(zm_pool_create(NULL, &p[i]), 0);
			if (i % 3 == 0)  /* some switched off and on again */
				assert_int_equal(zm_pool_set_compaction(p[i], ZM_COMPACT_OFF), 0);
			if (i % 6 == 0)
				assert_int_equal(zm_pool_set_compaction(p[i], ZM_COMPACT_RATIO), 0);
		}
		if (threads() > most)
			most = threads();
		for (int i = 0; i < 100; i++)
			zm_pool_destroy(p[i]);
		if (threads() > most)
			most = threads();
	}
	print_message("100 pools x 20: at most %+d threads\n", (int)(most - t0));
	assert_true(most <= t0 + NPOOLS_THREADS);
	assert_true(threads_settled(t0, 2000) <= t0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_pool),
		cmocka_unit_test(test_empty_pages),
		cmocka_unit_test(test_empty_store),
		cmocka_unit_test(test_empty_tmem),
		cmocka_unit_test(test_thousand_pools),
		cmocka_unit_test(test_no_thread_leak),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
