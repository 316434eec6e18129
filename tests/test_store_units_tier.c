/*
 * Tests of multi-page units on the store's cold-data side: idle marks on
 * the pages of units, units written back whole (by hand, by pick, and by
 * reclaim at the memory limit) and read back from the backing file,
 * pages of units on file discarded and rewritten, units re-encoded with
 * the secondary codec, idle single pages re-encoded together into units,
 * and a forked child, detached from the file, reading a unit on file.
 * Every page must read back as its last put, and zm_store_check() must
 * pass after every phase.  The threaded test is randomized:
 *
 *   test_store_units_tier [--seed N] [--steps N]     (or ZM_TEST_SEED=N)
 */
#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>

#include "store/store_internal.h"  /* first: the advanced tier of the headers */
#include "storetest.h"
#include "testutil.h"

#define PS 4096
#define UP 4                /* unit_pages */
#define ALL UINT64_MAX

#define CHECK(s) assert_int_equal(zm_store_check(s), 0)

static char g_path[256];
static uint8_t *g_ref;      /* the reference: every page's last put */

/* Page i of version v: half a block shared by its aligned group (random:
 * incompressible alone, a repeat across the group), half "text" of
 * 8-byte words from a vocabulary of 64 (to about a third with lz4).  So
 * a unit pays by far, and a page alone still compresses (to about 2/3).
 * Thread-safe (the threaded test's writers fill their own pages). */
static void fill(uint8_t *p, uint64_t i, uint64_t v)
{
	uint64_t g = i / UP, *w = (uint64_t *)p;

	for (size_t k = 0; k < PS / 2 / 8; k++)
		w[k] = mix64(g * 1000003 + v * 7919 + k);
	for (size_t k = PS / 2 / 8; k < PS / 8; k++)
		w[k] = mix64(mix64(i * 31 + v * 17 + k) % 64) & 0x5F5F5F5F5F5F5F5Full;
}

static uint8_t *ref(uint64_t i)
{
	return g_ref + i * PS;
}

static struct zm_store *mk(uint64_t n, size_t limit, const char *codec2, bool file)
{
	struct zm_store_config c = {
		.unit_pages = UP,
		.limit_bytes = limit,
		.recompress_codec = codec2,
	};
	struct zm_store *s;
	int fd;

	if (file) {
		snprintf(g_path, sizeof(g_path), "%s/zmem-units-XXXXXX", st_direct_dir());
		fd = mkstemp(g_path);
		assert_true(fd >= 0);
		close(fd);
		c.backing_path = g_path;
	}
	free(g_ref);
	g_ref = calloc(n, PS);
	assert_non_null(g_ref);
	s = test_store_mk(&c, n);
	if (file && zmi_store_backing_direct_fail)
		assert_int_not_equal(stats(s).backing_cache_mode, ZM_STORE_CACHE_DIRECT);
	return s;
}

static int teardown(void **state)
{
	(void)state;
	if (g_path[0])
		unlink(g_path);
	g_path[0] = 0;
	free(g_ref);
	g_ref = NULL;
	return 0;
}

static unsigned kind(struct zm_store *s, uint64_t i)
{
	unsigned k;

	assert_int_equal(zm_store_slot_info(s, i, &k, NULL, NULL), 0);
	return k;
}

/* Put pages [a, a + n) of version v as ranges (units where they pay). */
static void put_range(struct zm_store *s, uint64_t a, uint64_t n, uint64_t v)
{
	for (uint64_t i = a; i < a + n; i++)
		fill(ref(i), i, v);
	assert_int_equal(zm_store_put_range(s, a, n, ref(a)), 0);
}

static void put_one(struct zm_store *s, uint64_t i, uint64_t v)
{
	fill(ref(i), i, v);
	assert_int_equal(zm_store_put(s, i, ref(i)), 0);
}

static void verify(struct zm_store *s, uint64_t n)
{
	static uint8_t buf[PS];

	for (uint64_t i = 0; i < n; i++) {
		assert_int_equal(zm_store_get(s, i, buf), 0);
		if (memcmp(buf, ref(i), PS))
			fail_msg("page %llu differs", (unsigned long long)i);
	}
	CHECK(s);
}

/* ---- idle marks and writeback ------------------------------------------ */

static void test_idle_writeback(void **state)
{
	enum { N = 64 };
	struct zm_store *s = mk(N, 0, NULL, true);
	struct zm_store_stats st;
	uint8_t buf[PS];

	put_range(s, 0, N, 1);
	st = stats(s);
	assert_int_equal(st.units, N / UP);
	assert_int_equal(st.unit_pages, N);
	CHECK(s);

	/* idle: every page of every unit is marked, and counts */
	assert_int_equal(zm_store_mark_idle(s, 0), N);
	assert_int_equal(stats(s).idle_pages, N);
	CHECK(s);
	/* a get clears its page's mark: its unit is not idle whole */
	assert_int_equal(zm_store_get(s, 5, buf), 0);
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_IDLE, ALL), N - UP);
	st = stats(s);
	assert_int_equal(st.bd_count, N - UP);
	assert_true(st.bd_bytes > 0);
	assert_int_equal(st.compr_data_size, st.unit_bytes - st.bd_bytes);
	assert_int_equal(st.pages_stored, N);
	assert_int_equal(st.units, N / UP);
	assert_int_equal(kind(s, 4), ZM_STORE_SLOT_UNIT);
	verify(s, N);
	/* a unit on file is not idle any more */
	assert_int_equal(zm_store_mark_idle(s, 0), UP);

	/* by page: the page's unit, whole */
	assert_int_equal(zm_store_writeback_page(s, 6), 0);
	st = stats(s);
	assert_int_equal(st.bd_count, N);
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.bd_writes, N);
	verify(s, N);
	assert_true(stats(s).bd_reads > 0);
	zm_store_destroy(s);
}

/* ---- readback ------------------------------------------------------------ */

static void test_readback(void **state)
{
	enum { N = 32 };
	struct zm_store_config c = { .unit_pages = UP, .backing_readback = true };
	struct zm_store *s;
	struct zm_store_stats a, b;
	uint8_t buf[PS];

	/* mk's file, with readback */
	s = mk(N, 0, NULL, true);
	zm_store_destroy(s);
	c.backing_path = g_path;
	s = test_store_mk(&c, N);
	put_range(s, 0, N, 1);
	a = stats(s);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	/* a get of one page brings its unit back, whole */
	assert_int_equal(zm_store_get(s, 5, buf), 0);
	assert_memory_equal(buf, ref(5), PS);
	b = stats(s);
	assert_int_equal(b.bd_count, N - UP);
	assert_int_equal(b.bd_reads, 1);
	assert_int_equal(b.units, N / UP);
	assert_true(b.compr_data_size > 0);
	assert_int_equal(b.compr_data_size + b.bd_bytes, a.compr_data_size);
	CHECK(s);
	/* its neighbours read from memory now */
	assert_int_equal(zm_store_get(s, 6, buf), 0);
	assert_int_equal(stats(s).bd_reads, 1);
	verify(s, N);
	b = stats(s);
	assert_int_equal(b.bd_count, 0);
	assert_int_equal(b.bd_bytes, 0);
	assert_int_equal(b.compr_data_size, a.compr_data_size);
	/* and can go again */
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	verify(s, N);
	zm_store_destroy(s);
}

/* ---- reclaim at the limit ---------------------------------------------- */

static void test_reclaim(void **state)
{
	enum { N = 512 };
	struct zm_store *s = mk(N, 128 << 10, NULL, true);
	struct zm_store_stats st;

	/* about 2 KiB a page in units: 1 MiB, eight times the limit */
	for (uint64_t i = 0; i < N; i += 16)
		put_range(s, i, 16, 1);
	st = stats(s);
	assert_true(st.units > 0);
	assert_true(st.bd_count >= N / 2);
	assert_true(st.compr_data_size <= 128 << 10);
	assert_int_equal(st.limit_fails, 0);
	verify(s, N);
	/* rewrites at the limit: the units on file lose their pages */
	for (uint64_t i = 0; i < N; i += 16)
		put_range(s, i, 16, 2);
	verify(s, N);
	zm_store_destroy(s);
}

/* ---- pages of units on file discarded and rewritten -------------------- */

static void test_file_discard_rewrite(void **state)
{
	enum { N = 32 };
	struct zm_store *s = mk(N, 0, NULL, true);
	struct zm_store_stats st;

	put_range(s, 0, N, 1);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	st = stats(s);
	assert_int_equal(st.bd_count, N);
	/* one page of unit 0 discarded, one of unit 1 rewritten */
	assert_int_equal(zm_store_discard(s, 1, 1), 0);
	memset(ref(1), 0, PS);
	put_one(s, 6, 2);
	st = stats(s);
	assert_int_equal(st.bd_count, N - 2);
	assert_int_equal(st.pages_stored, N - 1);
	verify(s, N);
	/* the rest of unit 0 goes: its file space with its last page */
	assert_int_equal(zm_store_discard(s, 0, UP), 0);
	memset(ref(0), 0, (size_t)UP * PS);
	/* unit 2 rewritten page by page */
	for (uint64_t i = 2 * UP; i < 3 * UP; i++)
		put_one(s, i, 3);
	st = stats(s);
	assert_int_equal(st.bd_count, N - 2 * UP - 1);
	assert_int_equal(st.units, N / UP - 2);
	verify(s, N);
	/* all gone: nothing left on file */
	assert_int_equal(zm_store_discard(s, 0, N), 0);
	memset(g_ref, 0, (size_t)N * PS);
	st = stats(s);
	assert_int_equal(st.bd_count, 0);
	assert_int_equal(st.bd_bytes, 0);
	assert_int_equal(st.units, 0);
	verify(s, N);
	zm_store_destroy(s);
}

/* ---- recompression -------------------------------------------------------- */

static void test_recompress_units(void **state)
{
	enum { N = 64 };
	struct zm_store *s = mk(N, 0, "zstd", true);
	struct zm_store_stats a, b;
	uint8_t buf[PS];

	put_range(s, 0, N, 1);
	a = stats(s);
	assert_int_equal(a.units, N / UP);
	assert_int_equal(zm_store_mark_idle(s, 0), N);
	/* one page read: its unit stays as it is under an idle pick */
	assert_int_equal(zm_store_get(s, 9, buf), 0);
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL), N - UP);
	b = stats(s);
	assert_int_equal(b.recompressed_pages, N - UP);
	assert_true(b.unit_bytes < a.unit_bytes);
	assert_int_equal(b.compr_data_size, b.unit_bytes);
	assert_int_equal(b.units, N / UP);
	verify(s, N);
	/* again: nothing left to re-encode but the unit read */
	assert_int_equal(zm_store_recompress(s, 0, ALL), UP);
	assert_int_equal(zm_store_recompress(s, 0, ALL), 0);
	verify(s, N);
	/* and they go to the file re-encoded */
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	verify(s, N);
	zm_store_destroy(s);
}

static void test_recompress_neighbours(void **state)
{
	enum { N = 64 };
	struct zm_store *s = mk(N, 0, "zstd", true);
	struct zm_store_stats a, b;
	uint8_t buf[PS];

	for (uint64_t i = 0; i < N; i++)
		put_one(s, i, 1);
	a = stats(s);
	assert_int_equal(a.units, 0);
	assert_int_equal(zm_store_mark_idle(s, 0), N);
	/* page 10 read: its group's other three go together */
	assert_int_equal(zm_store_get(s, 10, buf), 0);
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL), N - 1);
	b = stats(s);
	assert_int_equal(b.units, N / UP);
	assert_int_equal(b.unit_pages, N - 1);
	assert_int_equal(kind(s, 10), ZM_STORE_SLOT_POOL);
	assert_int_equal(kind(s, 11), ZM_STORE_SLOT_UNIT);
	assert_true(b.compr_data_size < a.compr_data_size * 2 / 3);
	CHECK(s);
	/* the units' pages are still idle (a recompression is no access) */
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_IDLE, ALL), N - 1);
	assert_int_equal(stats(s).bd_count, N - 1);
	verify(s, N);
	/* a page rewritten in a unit on file, then the rest of its unit */
	put_one(s, 0, 2);
	verify(s, N);
	zm_store_destroy(s);
}

/* ---- a unit while its pages join it --------------------------------------- */

/* A unit's pages join it one by one, each under its own slot lock.  In
 * between, a writeback that took the unit would count as on file pages
 * that have not joined (and may never: rewritten meanwhile), and the
 * store's counts would drift from its slots.  The hook, after the first
 * page joined, tries to write the unit back and rewrites the next page. */
static int g_join_calls, g_join_wb;

static void join_hook(struct zm_store *s, uint64_t index)
{
	if (g_join_calls++)
		return;
	g_join_wb = zm_store_writeback_page(s, index);
	put_one(s, index + 1, 2);
}

static void test_forming_unit(void **state)
{
	enum { N = 8 };
	struct zm_store *s = mk(N, 0, "zstd", true);

	for (uint64_t i = 0; i < N; i++)
		put_one(s, i, 1);
	assert_int_equal(zm_store_mark_idle(s, 0), N);
	g_join_calls = 0;
	__atomic_store_n(&zmi_store_unit_join_hook, join_hook, __ATOMIC_RELAXED);
	(void)zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL);
	__atomic_store_n(&zmi_store_unit_join_hook, NULL, __ATOMIC_RELAXED);
	assert_true(g_join_calls > 0);
	/* not taken while forming: none of its pages is on file */
	assert_int_not_equal(g_join_wb, 0);
	assert_int_equal(stats(s).bd_count, 0);
	verify(s, N);
	/* formed, it goes to the file as any */
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	verify(s, N);
	zm_store_destroy(s);
}

/* ---- a forked child ------------------------------------------------------- */

static int child_reads(struct zm_store *s)
{
	uint8_t buf[PS];

	/* detached from the parent's file: its units on file are -EIO */
	if (zm_store_get(s, 0, buf) != -EIO || zm_store_get(s, 3, buf) != -EIO)
		return 1;
	/* those in memory read as ever */
	if (zm_store_get(s, 8, buf) || memcmp(buf, ref(8), PS))
		return 2;
	/* no writeback; freeing its pages leaves the file be */
	if (zm_store_writeback_page(s, 8) != -EOPNOTSUPP)
		return 3;
	if (zm_store_discard(s, 0, UP) || zm_store_check(s))
		return 4;
	zm_store_destroy(s);
	return 0;
}

static void test_fork_child(void **state)
{
	enum { N = 16 };
	struct zm_store *s;
	int status;
	pid_t pid;

	if (getenv("ZM_TEST_EMULATED"))
		skip();
	s = mk(N, 0, NULL, true);
	put_range(s, 0, N, 1);
	assert_int_equal(zm_store_writeback_page(s, 0), 0);
	assert_int_equal(stats(s).bd_count, UP);
	fflush(stdout);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_reads(s));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the parent's unit on file is whole */
	assert_int_equal(stats(s).bd_count, UP);
	verify(s, N);
	zm_store_destroy(s);
}

/* ---- threads ----------------------------------------------------------- */

/* Writers, each owning its own groups, put ranges and pages, discard and
 * read back against their reference, while a tiering thread marks,
 * writes back and recompresses, and the limit makes puts reclaim. */
#define TH_W 2
#define TH_N 256

static struct zm_store *g_ts;
static int g_stop;
static uint64_t g_seed;
static long g_steps = 3000;

struct th_arg {
	unsigned id;
	int err;       /* which operation failed: 1 range, 2 put, 3 discard, 4 get */
	int rc;        /* and what it returned */
	long step;
	uint64_t index;
};

static void *th_writer(void *arg)
{
	struct th_arg *a = arg;
	struct rng r;
	uint8_t buf[PS];

	rng_seed(&r, g_seed + a->id);
	for (long step = 0; step < g_steps && !a->err; step++) {
		/* the writer's groups: those whose number is id mod TH_W */
		uint64_t g = rng_below(&r, TH_N / UP / TH_W) * TH_W + a->id;
		uint64_t i = g * UP + rng_below(&r, UP), v = (uint64_t)step + 1;
		unsigned op = (unsigned)rng_below(&r, 10);

		int rc;

		if (op < 2) {
			for (uint64_t k = g * UP; k < g * UP + UP; k++)
				fill(ref(k), k, v);
			rc = zm_store_put_range(g_ts, g * UP, UP, ref(g * UP));
			a->err = rc ? 1 : 0;
		} else if (op < 4) {
			fill(ref(i), i, v);
			rc = zm_store_put(g_ts, i, ref(i));
			a->err = rc ? 2 : 0;
		} else if (op < 5) {
			memset(ref(i), 0, PS);
			rc = zm_store_discard(g_ts, i, 1);
			a->err = rc ? 3 : 0;
		} else {
			rc = zm_store_get(g_ts, i, buf);
			a->err = rc || memcmp(buf, ref(i), PS) ? 4 : 0;
		}
		a->rc = rc;
		a->step = step;
		a->index = i;
	}
	return NULL;
}

static void *th_tier(void *arg)
{
	unsigned n = 0;

	(void)arg;
	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		switch (n++ % 4) {
		case 0:
			zm_store_mark_idle(g_ts, 0);
			break;
		case 1:
			zm_store_writeback(g_ts, ZM_STORE_PICK_IDLE, 32);
			break;
		case 2:
			zm_store_recompress(g_ts, ZM_STORE_PICK_IDLE, 32);
			break;
		default:
			zm_store_writeback_page(g_ts, n % TH_N);
			break;
		}
	}
	return NULL;
}

static void test_threads(void **state)
{
	pthread_t w[TH_W], t;
	struct th_arg a[TH_W];
	struct zm_store_stats st;
	struct zm_store_config c = { .unit_pages = UP, .limit_bytes = 256 << 10,
				     .recompress_codec = "zstd", .backing_readback = true };

	/* mk's reference and file, with readback */
	g_ts = mk(TH_N, 0, NULL, true);
	zm_store_destroy(g_ts);
	c.backing_path = g_path;
	g_ts = test_store_mk(&c, TH_N);
	for (uint64_t i = 0; i < TH_N; i += UP)
		put_range(g_ts, i, UP, 0);
	g_stop = 0;
	assert_int_equal(pthread_create(&t, NULL, th_tier, NULL), 0);
	for (unsigned k = 0; k < TH_W; k++) {
		a[k] = (struct th_arg){ .id = k };
		assert_int_equal(pthread_create(&w[k], NULL, th_writer, &a[k]), 0);
	}
	for (unsigned k = 0; k < TH_W; k++)
		pthread_join(w[k], NULL);
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	st = stats(g_ts);
	for (unsigned k = 0; k < TH_W; k++)
		if (a[k].err)
			fail_msg("writer %u: operation %d at step %ld (page %llu) returned %d; "
				 "%llu bytes of %llu, %llu on file, %llu limit fails, %llu writeback "
				 "failures",
				 k, a[k].err, a[k].step, (unsigned long long)a[k].index, a[k].rc,
				 (unsigned long long)st.compr_data_size, (unsigned long long)c.limit_bytes,
				 (unsigned long long)st.bd_count, (unsigned long long)st.limit_fails,
				 (unsigned long long)st.writeback_failures);
	printf("threads: %llu units, %llu pages on file, %llu recompressed, %llu bd reads\n",
	       (unsigned long long)st.units, (unsigned long long)st.bd_count,
	       (unsigned long long)st.recompressed_pages, (unsigned long long)st.bd_reads);
	verify(g_ts, TH_N);
	zm_store_destroy(g_ts);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_idle_writeback, teardown),
		cmocka_unit_test_teardown(test_readback, teardown),
		cmocka_unit_test_teardown(test_reclaim, teardown),
		cmocka_unit_test_teardown(test_file_discard_rewrite, teardown),
		cmocka_unit_test_teardown(test_recompress_units, teardown),
		cmocka_unit_test_teardown(test_recompress_neighbours, teardown),
		cmocka_unit_test_teardown(test_forming_unit, teardown),
		cmocka_unit_test_teardown(test_fork_child, teardown),
		cmocka_unit_test_teardown(test_threads, teardown),
	};

	int failed;

	test_args(argc, argv, &g_seed, &g_steps);
	/* the file opened O_DIRECT where the file system takes it, then
	 * through the page cache, flushed and dropped (the seam) */
	failed = cmocka_run_group_tests_name("store_units_tier", tests, NULL, NULL);
	zmi_store_backing_direct_fail = 1;
	failed += cmocka_run_group_tests_name("store_units_tier buffered", tests, NULL, NULL);
	zmi_store_backing_direct_fail = 0;
	return failed;
}
