/*
 * Tests of the packed backing file's cleaner (zm_store_compact_file):
 * after a churn of writebacks, rewrites and discards, the file's blocks
 * in use (st_blocks, and file_alloc_bytes) come to at most 1.2x the live
 * bytes on it, every page reads back as written, and zm_store_check
 * passes; the same with the cleaner running while other threads put, get,
 * discard and write back the same pages; a bound on the bytes moved per
 * call.
 *
 *   test_store_clean [--seed N]     (or ZM_TEST_SEED=N)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "store/store_internal.h"  /* first: the advanced tier of the headers */
#include "storetest.h"
#include "testutil.h"

#define PS 4096
#define ALL UINT64_MAX

static uint64_t g_seed;

/* Page idx at version v: a cookie, then a seeded number of random words
 * (so that pages compress to 0.5 .. 3 KiB), then the cookie repeated. */
static void make_page(uint64_t *w, uint64_t idx, uint64_t v)
{
	uint64_t c = mix64(idx * 0x100000001ull + v + g_seed), k = 64 + c % 320;

	w[0] = c;
	for (size_t i = 1; i < PS / 8; i++)
		w[i] = i < k ? mix64(c + i) : c;
}

static void expect_page(struct zm_store *s, uint64_t idx, uint64_t v)
{
	uint64_t want[PS / 8], got[PS / 8];

	if (v)
		make_page(want, idx, v);
	else
		memset(want, 0, sizeof(want));
	assert_int_equal(zm_store_get(s, idx, got), 0);
	if (memcmp(want, got, PS)) {
		printf("page %llu differs from version %llu\n", (unsigned long long)idx,
		       (unsigned long long)v);
		fail();
	}
}

static char g_path[256];

static int teardown(void **state)
{
	(void)state;
	if (*g_path)
		unlink(g_path);
	*g_path = 0;
	return 0;
}

static struct zm_store *mk_store(uint64_t n)
{
	struct zm_store_config c = { .backing_path = g_path };
	int fd;

	snprintf(g_path, sizeof(g_path), "%s/zmem-clean-XXXXXX", st_direct_dir());
	fd = mkstemp(g_path);
	assert_true(fd >= 0);
	close(fd);
	return test_store_mk(&c, n);
}

/* The file's blocks in use, as the file system counts them. */
static uint64_t file_bytes(void)
{
	struct stat sb;

	assert_int_equal(stat(g_path, &sb), 0);
	return (uint64_t)sb.st_blocks * 512;
}

/* Does the file system free punched holes (st_blocks falls)? */
static bool punch_frees(void)
{
	static uint8_t buf[65536];
	struct stat a, b;
	char path[300];
	bool ok;
	int fd;

	snprintf(path, sizeof(path), "%s.punch", g_path);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	fsync(fd);
	fstat(fd, &a);
	ok = !fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, sizeof(buf));
	fstat(fd, &b);
	ok = ok && b.st_blocks < a.st_blocks;
	close(fd);
	unlink(path);
	if (!ok)
		printf("note: the file system keeps punched blocks: st_blocks not checked\n");
	return ok;
}

/* A churn over n pages: all written back, then rounds of rewriting a
 * random half and writing it back, then a random 60% discarded: blocks
 * left with a page or two among dead bytes.  ver[] the versions (0:
 * discarded). */
static void churn(struct zm_store *s, uint64_t n, uint64_t *ver, struct rng *r)
{
	uint64_t w[PS / 8];

	for (uint64_t i = 0; i < n; i++) {
		ver[i] = 1;
		make_page(w, i, 1);
		assert_int_equal(zm_store_put(s, i, w), 0);
	}
	assert_int_equal(zm_store_writeback(s, 0, ALL), (long)n);
	for (int round = 0; round < 4; round++) {
		for (uint64_t i = 0; i < n; i++) {
			if (rng_below(r, 2))
				continue;
			make_page(w, i, ++ver[i]);
			assert_int_equal(zm_store_put(s, i, w), 0);
		}
		assert_true(zm_store_writeback(s, 0, ALL) > 0);
	}
	for (uint64_t i = 0; i < n; i++) {
		if (rng_below(r, 10) < 6) {
			ver[i] = 0;
			assert_int_equal(zm_store_discard(s, i, 1), 0);
		}
	}
}

static void expect_compact(struct zm_store *s, bool punch)
{
	struct zm_store_stats st = stats(s);

	printf("file: %llu bytes of blocks (st_blocks: %llu) for %llu live: %.3fx\n",
	       (unsigned long long)st.file_alloc_bytes, (unsigned long long)file_bytes(),
	       (unsigned long long)st.file_live_bytes,
	       (double)st.file_alloc_bytes / (double)st.file_live_bytes);
	assert_true(st.file_live_bytes > 0);
	assert_int_equal(st.file_live_bytes, st.bd_bytes);   /* no units here */
	assert_true(st.file_alloc_bytes * 10 <= st.file_live_bytes * 12);
	if (punch)
		assert_true(file_bytes() * 10 <= st.file_live_bytes * 12);
}

/* The churn leaves the file at more than 1.2x its live bytes; the cleaner
 * brings it to at most that, every page as it was. */
static void test_clean_churn(void **state)
{
	enum { N = 4096 };
	struct zm_store *s = mk_store(N);
	uint64_t *ver = calloc(N, sizeof(*ver));
	struct zm_store_stats st;
	struct rng r;
	bool punch = punch_frees();
	struct timespec t0, t1;
	long freed;

	(void)state;
	assert_non_null(ver);
	rng_seed(&r, g_seed);
	churn(s, N, ver, &r);
	assert_int_equal(zm_store_check(s), 0);
	st = stats(s);
	printf("after the churn: %llu bytes of blocks (st_blocks: %llu) for %llu live: %.3fx\n",
	       (unsigned long long)st.file_alloc_bytes, (unsigned long long)file_bytes(),
	       (unsigned long long)st.file_live_bytes,
	       (double)st.file_alloc_bytes / (double)st.file_live_bytes);
	assert_true(st.file_alloc_bytes * 10 > st.file_live_bytes * 13);
	if (punch)
		assert_true(file_bytes() * 10 > st.file_live_bytes * 13);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	freed = zm_store_compact_file(s, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("compact_file freed %ld bytes in %.1f ms\n", freed,
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	assert_true(freed > 0);
	assert_int_equal((uint64_t)freed, st.file_alloc_bytes - stats(s).file_alloc_bytes);
	expect_compact(s, punch);
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < N; i++)
		expect_page(s, i, ver[i]);
	/* at the goal, a second run keeps it there */
	assert_true(zm_store_compact_file(s, 0) >= 0);
	expect_compact(s, punch);
	zm_store_destroy(s);
	free(ver);
}

/* The bytes the cleaner reads (through the backing file's seam): what it
 * moves. */
static struct zm_store *g_seam_store;
static uint64_t g_read_bytes;

static int count_reads(int op, uint64_t index)
{
	size_t len = 0;

	if (op == 'r' && !zm_store_slot_info(g_seam_store, index, NULL, NULL, &len))
		g_read_bytes += len;
	return 0;
}

/* max_bytes bounds each call; calls in a row get there all the same. */
static void test_clean_bounded(void **state)
{
	enum { N = 2048, STEP = 64 * 1024 };
	struct zm_store *s = mk_store(N);
	uint64_t *ver = calloc(N, sizeof(*ver));
	struct rng r;
	int calls = 0;
	long freed;

	(void)state;
	assert_non_null(ver);
	rng_seed(&r, g_seed + 1);
	churn(s, N, ver, &r);
	g_seam_store = s;
	zmi_backing_fault = count_reads;
	for (;;) {
		g_read_bytes = 0;
		freed = zm_store_compact_file(s, STEP);
		/* a call moves at most STEP bytes, and one page more */
		assert_true(g_read_bytes <= STEP + PS);
		if (freed <= 0)
			break;
		calls++;
		assert_true(calls < 1000);
	}
	zmi_backing_fault = NULL;
	assert_int_equal(freed, 0);
	printf("%d calls of at most %d bytes moved\n", calls, STEP);
	assert_true(calls > 1);
	expect_compact(s, punch_frees());
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < N; i++)
		expect_page(s, i, ver[i]);
	zm_store_destroy(s);
	free(ver);
}

/* ---- the cleaner among puts, gets, discards and writebacks -------------- */

enum { CN = 2048, CT = 2 };

struct worker {
	struct zm_store *s;
	uint64_t lo, hi;      /* its pages */
	uint64_t *ver;        /* theirs: versions (0 discarded) */
	uint64_t seed;
	int *stop;
	long ops, bad;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t page[PS / 8], want[PS / 8];
	struct rng r;

	rng_seed(&r, w->seed);
	while (!__atomic_load_n(w->stop, __ATOMIC_ACQUIRE)) {
		uint64_t i = w->lo + rng_below(&r, w->hi - w->lo);
		unsigned op = (unsigned)rng_below(&r, 10);

		w->ops++;
		if (op < 3) {
			make_page(page, i, ++w->ver[i]);
			if (zm_store_put(w->s, i, page))
				w->bad++;
		} else if (op < 4) {
			w->ver[i] = 0;
			if (zm_store_discard(w->s, i, 1))
				w->bad++;
		} else {
			if (w->ver[i])
				make_page(want, i, w->ver[i]);
			else
				memset(want, 0, sizeof(want));
			if (zm_store_get(w->s, i, page) || memcmp(page, want, PS)) {
				printf("page %llu: not version %llu\n", (unsigned long long)i,
				       (unsigned long long)w->ver[i]);
				w->bad++;
			}
		}
	}
	return NULL;
}

static void *writer_back(void *arg)
{
	struct worker *w = arg;

	while (!__atomic_load_n(w->stop, __ATOMIC_ACQUIRE)) {
		long n = zm_store_writeback(w->s, 0, 256);

		if (n < 0 && n != -ENOENT)
			w->bad += n != -ENOSPC;
		w->ops++;
	}
	return NULL;
}

static void test_clean_concurrent(void **state)
{
	struct zm_store *s = mk_store(CN);
	uint64_t *ver = calloc(CN, sizeof(*ver));
	struct worker wk[CT + 1];
	pthread_t th[CT + 1];
	struct rng r;
	int stop = 0;
	long cleaned = 0, calls = 0;
	time_t t0 = time(NULL);

	(void)state;
	assert_non_null(ver);
	rng_seed(&r, g_seed + 2);
	churn(s, CN, ver, &r);
	for (int t = 0; t <= CT; t++) {
		wk[t] = (struct worker){ .s = s, .lo = (uint64_t)t * CN / CT,
					 .hi = (uint64_t)(t + 1) * CN / CT, .ver = ver,
					 .seed = g_seed * 31 + (uint64_t)t, .stop = &stop };
		assert_int_equal(pthread_create(&th[t], NULL, t < CT ? work : writer_back,
						&wk[t]), 0);
	}
	/* two seconds of cleaning in small steps */
	while (time(NULL) - t0 < 2) {
		long n = zm_store_compact_file(s, 32 * 1024);

		assert_true(n >= 0);
		cleaned += n;
		calls++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int t = 0; t <= CT; t++) {
		assert_int_equal(pthread_join(th[t], NULL), 0);
		printf("thread %d: %ld operations, %ld bad\n", t, wk[t].ops, wk[t].bad);
		assert_int_equal(wk[t].bad, 0);
	}
	printf("%ld cleaner calls freed %ld bytes\n", calls, cleaned);
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < CN; i++)
		expect_page(s, i, ver[i]);
	/* all on file, then discards: sparse again, and cleaned again */
	assert_true(zm_store_writeback(s, 0, ALL) >= 0);
	for (uint64_t i = 0; i < CN; i += 1 + rng_below(&r, 2)) {
		ver[i] = 0;
		assert_int_equal(zm_store_discard(s, i, 1), 0);
	}
	assert_true(zm_store_compact_file(s, 0) >= 0);
	expect_compact(s, punch_frees());
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < CN; i++)
		expect_page(s, i, ver[i]);
	zm_store_destroy(s);
	free(ver);
}

/* No backing file: -EOPNOTSUPP; no store: -EINVAL. */
static void test_clean_args(void **state)
{
	struct zm_store_config c = { 0 };
	struct zm_store *s = test_store_mk(&c, 16);

	(void)state;
	assert_int_equal(zm_store_compact_file(s, 0), -EOPNOTSUPP);
	assert_int_equal(zm_store_compact_file(NULL, 0), -EINVAL);
	assert_int_equal(stats(s).file_alloc_bytes, 0);
	zm_store_destroy(s);
}

int main(int argc, char **argv)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_clean_args, teardown),
		cmocka_unit_test_teardown(test_clean_churn, teardown),
		cmocka_unit_test_teardown(test_clean_bounded, teardown),
		cmocka_unit_test_teardown(test_clean_concurrent, teardown),
	};
	struct CMUnitTest again[sizeof(tests) / sizeof(tests[0])];
	const char *env = getenv("ZM_TEST_SEED");
	int failed;

	test_args(argc, argv, &g_seed, NULL);
	if (env)
		g_seed = strtoull(env, NULL, 0);
	memcpy(again, tests, sizeof(tests));
	/* the file opened O_DIRECT where the file system takes it, then
	 * through the page cache, flushed and dropped (the seam) */
	failed = test_run_selected("store_clean", tests);
	zmi_backing_direct_fail = 1;
	failed += test_run_selected("store_clean buffered", again);
	zmi_backing_direct_fail = 0;
	return failed;
}
