/*
 * Tests of the packed backing file's cleaner (zm_store_compact_file):
 * after a churn of writebacks, rewrites and discards, the file's blocks
 * in use (st_blocks, and file_alloc_bytes) come to at most 1.2x the live
 * bytes on it, every page reads back as written, and zm_store_check
 * passes; the same with the cleaner running while other threads put, get,
 * discard and write back the same pages; a bound on the bytes moved per
 * call.
 *
 * Units on file are moved too.  The automatic cleaner (file_clean_rate)
 * brings a churned file to the goal by itself within the time its rate
 * allows, moving no faster than it, among threads putting (pages and
 * units), getting, discarding and writing back; at rate 0 it is off.
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

/* A store of n pages with c's settings, on a new file in TMPDIR. */
static struct zm_store *mk_store_cfg(uint64_t n, struct zm_store_config *c)
{
	int fd;

	snprintf(g_path, sizeof(g_path), "%s/zmem-clean-XXXXXX", st_direct_dir());
	fd = mkstemp(g_path);
	assert_true(fd >= 0);
	close(fd);
	c->backing_path = g_path;
	return test_store_mk(c, n);
}

static struct zm_store *mk_store(uint64_t n)
{
	struct zm_store_config c = { 0 };

	return mk_store_cfg(n, &c);
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
	zmi_store_backing_fault = count_reads;
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
	zmi_store_backing_fault = NULL;
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

/* Records counted as the cleaner reads them (the seam, 'r': once a
 * record), against the reads it makes of the file (a span of blocks a
 * read, zmi_store_backing_preads). */
static uint64_t g_read_recs;

static int count_recs(int op, uint64_t index)
{
	(void)index;
	if (op == 'r')
		g_read_recs++;
	return 0;
}

/* The records of neighbouring blocks are read together: three pages of
 * every eight kept (the blocks left a page or two each, side by side),
 * the cleaner moves them with a read for several, not one each. */
static void test_clean_batched_read(void **state)
{
	enum { N = 1024 };
	struct zm_store *s = mk_store(N);
	uint64_t w[PS / 8], reads;
	struct zm_store_stats st;

	(void)state;
	for (uint64_t i = 0; i < N; i++) {
		make_page(w, i, 1);
		assert_int_equal(zm_store_put(s, i, w), 0);
	}
	/* packed end to end in index order */
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	for (uint64_t i = 0; i < N; i++)
		if (i % 8 >= 3)
			assert_int_equal(zm_store_discard(s, i, 1), 0);
	g_read_recs = 0;
	reads = __atomic_load_n(&zmi_store_backing_preads, __ATOMIC_RELAXED);
	zmi_store_backing_fault = count_recs;
	assert_true(zm_store_compact_file(s, 0) > 0);
	zmi_store_backing_fault = NULL;
	reads = __atomic_load_n(&zmi_store_backing_preads, __ATOMIC_RELAXED) - reads;
	st = stats(s);
	printf("%llu records moved with %llu reads; %llu bytes of blocks for %llu live\n",
	       (unsigned long long)g_read_recs, (unsigned long long)reads,
	       (unsigned long long)st.file_alloc_bytes, (unsigned long long)st.file_live_bytes);
	assert_true(g_read_recs >= N / 8);
	assert_true(reads >= 1);
	/* records at most two blocks apart: a read takes several */
	assert_true(reads * 2 <= g_read_recs);
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < N; i++)
		expect_page(s, i, i % 8 >= 3 ? 0 : 1);
	zm_store_destroy(s);
}

/* A page put (or discarded) after the cleaner read its record, before it
 * points the page at the copy: the copy's room goes back, the page is
 * what the put made it (or empty), nothing leaks. */
static struct zm_store *g_change_store;
static uint64_t g_changed[2];
static int g_nchanged;

static int change_on_write(int op, uint64_t index)
{
	uint64_t w[PS / 8];

	if (op != 'w' || g_nchanged == 2 || index == g_changed[0])
		return 0;
	/* no lock held here but wb_lock, which a put below the limit and a
	 * discard do not take */
	g_changed[g_nchanged] = index;
	if (g_nchanged++ == 0) {
		make_page(w, index, 7);
		assert_int_equal(zm_store_put(g_change_store, index, w), 0);
	} else {
		assert_int_equal(zm_store_discard(g_change_store, index, 1), 0);
	}
	return 0;
}

static void test_clean_changed_after_read(void **state)
{
	enum { N = 1024 };
	struct zm_store *s = mk_store(N);
	uint64_t *ver = calloc(N, sizeof(*ver));
	struct zm_store_stats st;
	struct rng r;

	(void)state;
	assert_non_null(ver);
	rng_seed(&r, g_seed + 5);
	churn(s, N, ver, &r);
	g_change_store = s;
	g_nchanged = 0;
	g_changed[0] = UINT64_MAX;
	zmi_store_backing_fault = change_on_write;
	assert_true(zm_store_compact_file(s, 0) > 0);
	zmi_store_backing_fault = NULL;
	assert_int_equal(g_nchanged, 2);
	printf("changed pages %llu (put) and %llu (discarded) as their records moved\n",
	       (unsigned long long)g_changed[0], (unsigned long long)g_changed[1]);
	ver[g_changed[0]] = 7;
	ver[g_changed[1]] = 0;
	st = stats(s);
	/* the put page is in memory now: the file's live bytes are the
	 * records of the pages on it, no more */
	assert_int_equal(st.file_live_bytes, st.bd_bytes);
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < N; i++)
		expect_page(s, i, ver[i]);
	/* nothing leaked: with every page gone, no live byte is left on the
	 * file, and no block but the one being filled */
	assert_int_equal(zm_store_discard(s, 0, N), 0);
	st = stats(s);
	assert_int_equal(st.file_live_bytes, 0);
	assert_true(st.file_alloc_bytes <= PS);
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
	time_t t0;

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
	/* two seconds of cleaning in small steps (from now: the churn may
	 * take longer than that on a slow disk) */
	t0 = time(NULL);
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

/* ---- units on file -------------------------------------------------------- */

#define UP 4   /* unit_pages */

/* Page idx of a unit, at version v: make_page's shape, the random words
 * shared by its aligned group (so that the group compresses to about one
 * page's bytes) and the cookie its own. */
static void unit_page(uint64_t *w, uint64_t idx, uint64_t v)
{
	uint64_t c = mix64(idx / UP * 0x100000001ull + v + g_seed), k = 64 + c % 320;

	w[0] = c ^ idx;
	for (size_t i = 1; i < PS / 8; i++)
		w[i] = i < k ? mix64(c + i) : c;
}

static void expect_unit_page(struct zm_store *s, uint64_t idx, uint64_t v)
{
	uint64_t want[PS / 8], got[PS / 8];

	unit_page(want, idx, v);
	assert_int_equal(zm_store_get(s, idx, got), 0);
	if (memcmp(want, got, PS)) {
		printf("unit page %llu differs from version %llu\n", (unsigned long long)idx,
		       (unsigned long long)v);
		fail();
	}
}

/* Units written back among single pages, the single pages discarded:
 * the units' chunks are all that is left in their blocks, and the cleaner
 * moves them, every page of them as it was. */
static void test_clean_units(void **state)
{
	enum { N = 4096 };
	struct zm_store_config c = { .unit_pages = UP };
	struct zm_store *s = mk_store_cfg(N, &c);
	static uint64_t buf[UP][PS / 8];
	struct zm_store_stats st;
	bool punch = punch_frees();

	(void)state;
	for (uint64_t g = 0; g < N / UP; g++) {
		uint64_t i = g * UP;

		if (g % 2 == 0) {
			for (unsigned k = 0; k < UP; k++)
				unit_page(buf[k], i + k, 1);
			assert_int_equal(zm_store_put_range(s, i, UP, buf), 0);
		} else {
			for (unsigned k = 0; k < UP; k++) {
				make_page(buf[0], i + k, 1);
				assert_int_equal(zm_store_put(s, i + k, buf[0]), 0);
			}
		}
	}
	assert_int_equal(stats(s).units, N / UP / 2);
	assert_int_equal(zm_store_writeback(s, 0, ALL), (long)N);
	for (uint64_t g = 1; g < N / UP; g += 2)
		assert_int_equal(zm_store_discard(s, g * UP, UP), 0);
	st = stats(s);
	printf("units alone on file: %llu bytes of blocks for %llu live: %.3fx\n",
	       (unsigned long long)st.file_alloc_bytes, (unsigned long long)st.file_live_bytes,
	       (double)st.file_alloc_bytes / (double)st.file_live_bytes);
	assert_true(st.file_alloc_bytes * 10 > st.file_live_bytes * 13);
	assert_true(zm_store_compact_file(s, 0) > 0);
	st = stats(s);
	assert_int_equal(st.units, N / UP / 2);
	assert_int_equal(st.bd_count, N / 2);       /* still on file, all of them */
	assert_int_equal(st.file_live_bytes, st.bd_bytes);
	expect_compact(s, punch);
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < N; i++) {
		if (i / UP % 2 == 0) {
			expect_unit_page(s, i, 1);
		} else {
			memset(buf[0], 0, PS);
			assert_int_equal(zm_store_get(s, i, buf[1]), 0);
			assert_memory_equal(buf[0], buf[1], PS);
		}
	}
	zm_store_destroy(s);
}

/* ---- automatic cleaning ------------------------------------------------- */

static double secs_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static bool at_goal(struct zm_store *s)
{
	struct zm_store_stats st = stats(s);

	return st.file_alloc_bytes * 10 <= st.file_live_bytes * 12;
}

/* Wait up to max_s seconds for the automatic cleaner to bring the file
 * to the goal and finish (its moved bytes still for 300 ms); the seconds
 * it took to reach the goal. */
static double wait_goal(struct zm_store *s, double max_s)
{
	struct timespec t0;
	double t = -1;
	uint64_t last = UINT64_MAX;
	int quiet = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (secs_since(&t0) < max_s && (t < 0 || quiet < 15)) {
		uint64_t now = stats(s).file_clean_bytes;

		if (t < 0 && at_goal(s))
			t = secs_since(&t0);
		quiet = now == last ? quiet + 1 : 0;
		last = now;
		usleep(20000);
	}
	assert_true(t >= 0);
	assert_true(at_goal(s));
	return t;
}

/* At file_clean_rate R, a churned file comes to the goal by itself, in
 * about the bytes to move / R, and never moves faster than R (a second's
 * worth of burst). */
static void test_clean_auto(void **state)
{
	enum { N = 4096, RATE = 4 << 20 };
	struct zm_store_config c = { .file_clean_rate = RATE };
	struct zm_store *s = mk_store_cfg(N, &c);
	uint64_t *ver = calloc(N, sizeof(*ver));
	struct zm_store_stats st;
	struct timespec t0;
	struct rng r;
	double t, bound;

	(void)state;
	assert_non_null(ver);
	assert_non_null(s->cleaner);
	rng_seed(&r, g_seed + 3);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	churn(s, N, ver, &r);
	t = secs_since(&t0);         /* from the churn's start */
	t += wait_goal(s, 30);
	st = stats(s);
	/* what moving the bytes takes at the rate, four times over and ten
	 * seconds more: the churn itself, and a slow or busy machine (the
	 * cleaner reads each page it moves from the file: on a slow disk it
	 * moves below the rate, and a debug build is slower still) */
	bound = 4.0 * (double)st.file_clean_bytes / RATE + 10.0;
	printf("automatic: %.3fx after %.2f s (bound %.2f s), %llu runs moved %llu bytes\n",
	       (double)st.file_alloc_bytes / (double)st.file_live_bytes, t, bound,
	       (unsigned long long)st.file_clean_runs, (unsigned long long)st.file_clean_bytes);
	assert_true(st.file_clean_runs > 0);
	assert_true(t <= bound);
	assert_true((double)st.file_clean_bytes <= secs_since(&t0) * RATE + RATE + 64 * PS);
	expect_compact(s, punch_frees());
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < N; i++)
		expect_page(s, i, ver[i]);
	zm_store_destroy(s);
	free(ver);
}

/* Rate 0: no cleaner; the churned file stays as it is. */
static void test_clean_auto_off(void **state)
{
	enum { N = 2048 };
	struct zm_store *s = mk_store(N);
	uint64_t *ver = calloc(N, sizeof(*ver));
	struct zm_store_stats a, b;
	struct rng r;

	(void)state;
	assert_non_null(ver);
	assert_null(s->cleaner);
	rng_seed(&r, g_seed + 4);
	churn(s, N, ver, &r);
	a = stats(s);
	usleep(400000);   /* four of the cleaner's ticks, were it on */
	b = stats(s);
	assert_int_equal(b.file_clean_runs, 0);
	assert_int_equal(b.file_clean_bytes, 0);
	assert_int_equal(a.file_alloc_bytes, b.file_alloc_bytes);
	assert_true(b.file_alloc_bytes * 10 > b.file_live_bytes * 13);
	zm_store_destroy(s);
	free(ver);
}

/* The automatic cleaner among threads putting pages and units, getting
 * (every page compared) and discarding, and one writing back. */
struct uworker {
	struct zm_store *s;
	uint64_t lo, hi;      /* its pages, whole groups */
	uint64_t *ver;        /* theirs: versions (0 discarded) */
	uint8_t *unit;        /* theirs: put as a unit's page */
	uint64_t seed;
	int *stop;
	long ops, bad;
};

static void *uwork(void *arg)
{
	struct uworker *w = arg;
	static __thread uint64_t page[UP][PS / 8];
	uint64_t want[PS / 8];
	struct rng r;

	rng_seed(&r, w->seed);
	while (!__atomic_load_n(w->stop, __ATOMIC_ACQUIRE)) {
		uint64_t i = w->lo + rng_below(&r, w->hi - w->lo), g = i / UP * UP;
		unsigned op = (unsigned)rng_below(&r, 20);

		w->ops++;
		if (op < 4) {
			make_page(page[0], i, ++w->ver[i]);
			w->unit[i] = 0;
			w->bad += zm_store_put(w->s, i, page[0]) != 0;
		} else if (op < 6) {
			uint64_t v = 0;

			for (unsigned k = 0; k < UP; k++)
				v = w->ver[g + k] > v ? w->ver[g + k] : v;
			for (unsigned k = 0; k < UP; k++) {
				w->ver[g + k] = v + 1;
				w->unit[g + k] = 1;
				unit_page(page[k], g + k, v + 1);
			}
			w->bad += zm_store_put_range(w->s, g, UP, page) != 0;
		} else if (op < 8) {
			w->ver[i] = 0;
			w->bad += zm_store_discard(w->s, i, 1) != 0;
		} else {
			if (!w->ver[i])
				memset(want, 0, sizeof(want));
			else if (w->unit[i])
				unit_page(want, i, w->ver[i]);
			else
				make_page(want, i, w->ver[i]);
			if (zm_store_get(w->s, i, page[0]) || memcmp(page[0], want, PS)) {
				printf("page %llu: not version %llu (seed %llu)\n",
				       (unsigned long long)i, (unsigned long long)w->ver[i],
				       (unsigned long long)g_seed);
				w->bad++;
			}
		}
	}
	return NULL;
}

static void *uwriter_back(void *arg)
{
	struct uworker *w = arg;

	while (!__atomic_load_n(w->stop, __ATOMIC_ACQUIRE)) {
		long n = zm_store_writeback(w->s, 0, 256);

		if (n < 0 && n != -ENOENT)
			w->bad += n != -ENOSPC;
		w->ops++;
		usleep(1000);   /* churn: the workers rewrite between writebacks */
	}
	return NULL;
}

static void test_clean_auto_concurrent(void **state)
{
	struct zm_store_config c = { .unit_pages = UP, .file_clean_rate = 32 << 20 };
	struct zm_store *s = mk_store_cfg(CN, &c);
	uint64_t *ver = calloc(CN, sizeof(*ver));
	uint8_t *unit = calloc(CN, 1);
	struct uworker wk[CT + 1];
	pthread_t th[CT + 1];
	struct zm_store_stats st;
	struct rng r;
	int stop = 0;

	(void)state;
	assert_true(ver && unit);
	rng_seed(&r, g_seed + 5);
	churn(s, CN, ver, &r);
	for (int t = 0; t <= CT; t++) {
		wk[t] = (struct uworker){ .s = s, .lo = (uint64_t)t * CN / CT,
					  .hi = (uint64_t)(t + 1) * CN / CT, .ver = ver,
					  .unit = unit, .seed = g_seed * 37 + (uint64_t)t,
					  .stop = &stop };
		assert_int_equal(pthread_create(&th[t], NULL, t < CT ? uwork : uwriter_back,
						&wk[t]), 0);
	}
	sleep(2);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int t = 0; t <= CT; t++) {
		assert_int_equal(pthread_join(th[t], NULL), 0);
		printf("thread %d: %ld operations, %ld bad\n", t, wk[t].ops, wk[t].bad);
		assert_int_equal(wk[t].bad, 0);
	}
	st = stats(s);
	printf("automatic among them: %llu runs moved %llu bytes; %llu units\n",
	       (unsigned long long)st.file_clean_runs, (unsigned long long)st.file_clean_bytes,
	       (unsigned long long)st.units);
	assert_true(st.file_clean_runs > 0);
	assert_int_equal(zm_store_check(s), 0);
	/* all on file, then discards: sparse again, and cleaned by itself */
	assert_true(zm_store_writeback(s, 0, ALL) >= 0);
	for (uint64_t i = 0; i < CN; i += 1 + rng_below(&r, 2)) {
		ver[i] = 0;
		assert_int_equal(zm_store_discard(s, i, 1), 0);
	}
	printf("cleaned to the goal in %.2f s\n", wait_goal(s, 10));
	expect_compact(s, punch_frees());
	assert_int_equal(zm_store_check(s), 0);
	for (uint64_t i = 0; i < CN; i++) {
		if (ver[i] && unit[i])
			expect_unit_page(s, i, ver[i]);
		else
			expect_page(s, i, ver[i]);
	}
	zm_store_destroy(s);
	free(ver);
	free(unit);
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
		cmocka_unit_test_teardown(test_clean_batched_read, teardown),
		cmocka_unit_test_teardown(test_clean_changed_after_read, teardown),
		cmocka_unit_test_teardown(test_clean_concurrent, teardown),
		cmocka_unit_test_teardown(test_clean_units, teardown),
		cmocka_unit_test_teardown(test_clean_auto, teardown),
		cmocka_unit_test_teardown(test_clean_auto_off, teardown),
		cmocka_unit_test_teardown(test_clean_auto_concurrent, teardown),
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
	zmi_store_backing_direct_fail = 1;
	failed += test_run_selected("store_clean buffered", again);
	zmi_store_backing_direct_fail = 0;
	return failed;
}
