/*
 * Tests of the store's recompression with a secondary codec: by hand
 * (at 4 and 16 KiB pages, pages it cannot shrink, at the memory limit, a
 * full pool) and automatic, on the background worker.
 *
 *   test_store_recompress
 */

#include "tiertest.h"

/* ---- recompression ------------------------------------------------------ */

static void recompress_at(size_t ps)
{
	enum { NT = 24, NS = 8, NR = 6, NZ = 4, N = NT + NS + NR + NZ };
	struct zm_store_config c = { .page_size = ps, .recompress_codec = "zstd" };
	struct zm_store *s = test_store_mk(&c, N);
	uint8_t *text = make_pages(NT + 1, ps, PK_TEXT, 300);
	uint8_t *sym = make_pages(NS, ps, PK_SYM32, 400);
	uint8_t *rnd = make_pages(NR + 1, ps, PK_RANDOM, 500);
	uint8_t *same = make_pages(NZ, ps, PK_SAME, 600);
	struct zm_store_stats st0, st;
	uint64_t lens[N], tried;
	long got;

	/* slots: text 0.., sym32 NT.., random NT+NS.., same-filled at the end */
	for (int i = 0; i < NT; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * ps), 0);
	for (int i = 0; i < NS; i++)
		assert_int_equal(zm_store_put(s, NT + (uint64_t)i, sym + i * ps), 0);
	for (int i = 0; i < NR; i++)
		assert_int_equal(zm_store_put(s, NT + NS + (uint64_t)i, rnd + i * ps), 0);
	for (int i = 0; i < NZ; i++)
		assert_int_equal(zm_store_put(s, NT + NS + NR + (uint64_t)i, same + i * ps), 0);
	for (int i = 0; i < N; i++)
		lens[i] = len_of(s, (uint64_t)i);
	st0 = stats(s);
	assert_int_equal(st0.huge_pages, NS + NR);   /* lz4 cannot shrink sym32 */
	assert_int_equal(st0.secondary_pages, 0);

	/* max_pages bounds the work */
	assert_int_equal(zm_store_recompress(s, 0, 3), 3);
	st = stats(s);
	assert_int_equal(st.secondary_pages, 3);
	assert_int_equal(st.recompressed_pages, 3);
	CHECK(s);

	/* the rest: every text and sym32 page shrinks, the random ones stay
	 * huge and become incompressible */
	got = zm_store_recompress(s, 0, ALL);
	assert_int_equal(got, NT + NS - 3);
	st = stats(s);
	assert_int_equal(st.secondary_pages, NT + NS);
	assert_int_equal(st.recompressed_pages, NT + NS);
	assert_int_equal(st.incompressible_pages, NR);
	assert_int_equal(st.huge_pages, NR);
	assert_true(st.recompress_tried >= NT + NS + NR);
	assert_int_equal(st.recompress_saved, st0.compr_data_size - st.compr_data_size);
	assert_true(st.compr_data_size < st0.compr_data_size);
	assert_int_equal(st.pages_stored, N);
	assert_int_equal(st.same_pages, NZ);
	for (int i = 0; i < NT + NS; i++) {
		assert_int_equal(kind_of(s, (uint64_t)i), ZM_STORE_SLOT_POOL);
		assert_true(len_of(s, (uint64_t)i) < lens[i]);
	}
	for (int i = NT + NS; i < NT + NS + NR; i++) {
		assert_int_equal(kind_of(s, (uint64_t)i), ZM_STORE_SLOT_HUGE);
		assert_int_equal(len_of(s, (uint64_t)i), ps);
	}
	for (int i = NT + NS + NR; i < N; i++)
		assert_int_equal(kind_of(s, (uint64_t)i), ZM_STORE_SLOT_SAME);
	CHECK(s);

	/* nothing left to shrink; the incompressible ones are not tried again */
	tried = st.recompress_tried;
	assert_int_equal(zm_store_recompress(s, 0, ALL), 0);
	st = stats(s);
	assert_true(st.recompress_tried - tried <= NT + NS);
	tried = st.recompress_tried;
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_INCOMPRESSIBLE, ALL), 0);
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_HUGE, ALL), 0);
	st = stats(s);
	assert_int_equal(st.recompress_tried, tried);
	assert_int_equal(st.recompressed_pages, NT + NS);
	CHECK(s);

	/* every page reads back through the codec it is encoded with */
	for (int i = 0; i < NT; i++)
		expect_page(s, (uint64_t)i, text + i * ps);
	for (int i = 0; i < NS; i++)
		expect_page(s, NT + (uint64_t)i, sym + i * ps);
	for (int i = 0; i < NR; i++)
		expect_page(s, NT + NS + (uint64_t)i, rnd + i * ps);
	for (int i = 0; i < NZ; i++)
		expect_page(s, NT + NS + NR + (uint64_t)i, same + i * ps);

	/* the counts are of now: an overwrite (lz4 again) and a discard take
	 * a page out of secondary_pages; a new random page is not
	 * incompressible until tried */
	assert_int_equal(zm_store_put(s, 0, text + NT * ps), 0);
	assert_int_equal(zm_store_discard(s, NT, 1), 0);
	assert_int_equal(zm_store_put(s, NT + NS, rnd + NR * ps), 0);
	st = stats(s);
	assert_int_equal(st.secondary_pages, NT + NS - 2);
	assert_int_equal(st.incompressible_pages, NR - 1);
	assert_int_equal(st.huge_pages, NR);
	assert_int_equal(st.recompressed_pages, NT + NS);   /* ever */
	CHECK(s);
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_HUGE, ALL), 0);
	st = stats(s);
	assert_int_equal(st.incompressible_pages, NR);
	assert_int_equal(zm_store_recompress(s, 0, ALL), 1);  /* page 0 */
	expect_page(s, 0, text + NT * ps);
	expect_zero(s, NT);
	expect_page(s, NT + NS, rnd + NR * ps);
	CHECK(s);
	zm_store_destroy(s);
	free(text), free(sym), free(rnd), free(same);
}

static void test_recompress(void **state)
{
	recompress_at(4096);
	recompress_at(16384);
}

/* The secondary codec the primary one: nothing comes out smaller, so
 * nothing changes, though every page is tried. */
static void test_recompress_not_smaller(void **state)
{
	enum { N = 16 };
	struct zm_store_config c = { .recompress_codec = "lz4" };
	struct zm_store *s = test_store_mk(&c, N);
	uint8_t *text = make_pages(N, PS, PK_TEXT, 650);
	struct zm_store_stats st0, st;

	put_pages(s, text, N);
	st0 = stats(s);
	assert_int_equal(zm_store_recompress(s, 0, ALL), 0);
	st = stats(s);
	assert_int_equal(st.recompress_tried, N);
	assert_int_equal(st.recompressed_pages + st.secondary_pages + st.recompress_saved, 0);
	assert_int_equal(st.compr_data_size, st0.compr_data_size);
	expect_pages(s, text, N);
	CHECK(s);
	zm_store_destroy(s);
	free(text);
}

/* At the limit with a backing file: a recompression of the idle pages
 * moves those and no others (it may need room for the new objects, but
 * the pages it was not asked about stay where they are). */
static void test_recompress_at_limit(void **state)
{
	enum { LIMIT_PAGES = 64, N = 100 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = LIMIT_PAGES * PS,
				     .recompress_codec = "zstd" };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 680);
	unsigned before[N];
	uint64_t writes, moved = 0;
	struct zm_store *s;
	long got;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	zm_store_mark_idle(s, 0);
	for (int i = 2; i < N; i++)        /* all but pages 0 and 1 read since */
		expect_page(s, (uint64_t)i, text + i * PS);
	for (int i = 0; i < N; i++)
		before[i] = kind_of(s, (uint64_t)i);
	writes = stats(s).bd_writes;
	got = zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL);
	for (int i = 2; i < N; i++)
		moved += before[i] != kind_of(s, (uint64_t)i);
	printf("recompress(PICK_IDLE) at the limit: %ld re-encoded, %llu pages not idle moved, "
	       "%llu written back\n", got, (unsigned long long)moved,
	       (unsigned long long)(stats(s).bd_writes - writes));
	expect_pages(s, text, N);
	CHECK(s);
	assert_true(got >= 0 && got <= 2);
	assert_int_equal(moved, 0);
	zm_store_destroy(s);
	free(text);
}

/* A pool packed to its limit with idle pages, and a backing file: one
 * recompression run re-encodes most of the idle pages in the pool.
 * Re-encoding needs room for the new object beside the old: the run
 * compacts, and writes back a batch of the pages it picks when that
 * frees nothing, as often as the room it made was used, so that the
 * automatic tiering of a full store goes on (a run that made room only
 * once stopped after a hundred pages, and the tiering of `zmem serve`
 * with a small --mem-limit could stall for good). */
static void test_recompress_full_pool(void **state)
{
	enum { LIMIT_PAGES = 4096, N = 16384 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = LIMIT_PAGES * PS,
				     .recompress_codec = "zstd" };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 690);
	struct zm_store *s;
	uint64_t writes, in_pool;
	long got;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	/* pack the pool: compacted, every page idle */
	zm_store_compact(s);
	zm_store_mark_idle(s, 0);
	writes = stats(s).bd_writes;
	in_pool = stats(s).pool_objects;
	got = zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL);
	printf("recompress(PICK_IDLE) of a full pool of %llu pages: %ld re-encoded, %llu "
	       "written back\n", (unsigned long long)in_pool, got,
	       (unsigned long long)(stats(s).bd_writes - writes));
	expect_pages(s, text, N);
	CHECK(s);
	assert_true(got > 0 && (uint64_t)got >= in_pool / 2);
	assert_true(stats(s).mem_used_total <= LIMIT_PAGES * PS);
	zm_store_destroy(s);
	free(text);
}


/* ---- automatic recompression on the worker ------------------------------ */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Cold pages become zstd's with no call; pages read all the while do not. */
static void auto_recompress(bool mark)
{
	enum { NCOLD = 48, NHOT = 4, N = NCOLD + NHOT, IDLE_MS = 100 };
	struct zm_store_config c = { .recompress_codec = "zstd", .idle_after_ms = IDLE_MS };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 2300);
	uint8_t out[PS];
	struct zm_store_stats st;
	struct zm_store *s = test_store_mk(&c, N);
	uint64_t t0, done = 0, last, gap = 0;

	put_pages(s, text, N);
	if (mark)
		assert_int_equal(zm_store_mark_idle(s, 0), N);
	t0 = last = now_ms();
	/* read the hot ones without a pause until the cold ones are done,
	 * and for a few idle periods after */
	for (;;) {
		uint64_t t = now_ms();

		if (t - last > gap)
			gap = t - last;   /* the longest the hot ones went unread */
		last = t;
		for (int i = NCOLD; i < N; i++)
			assert_int_equal(zm_store_get(s, (uint64_t)i, out), 0);
		st = stats(s);
		if (!done && st.secondary_pages >= NCOLD)
			done = t;
		if (done && t > done + 3 * IDLE_MS)
			break;
		if (t > t0 + 10000)
			break;
	}
	printf("%s: the cold pages were recompressed after %lld ms\n",
	       mark ? "marked" : "unmarked", done ? (long long)(done - t0) : -1ll);
	assert_true(done != 0);
	/* not before they were idle long enough (less the time the puts
	 * took and the polling's granularity) */
	assert_true(done - t0 >= IDLE_MS * 3 / 4);
	st = stats(s);
	if (gap < IDLE_MS / 2) {
		assert_int_equal(st.secondary_pages, NCOLD);
		assert_int_equal(st.recompressed_pages, NCOLD);
	} else {
		/* a loaded machine left the reader off its CPU long enough
		 * for the hot pages to go idle too: only the cold ones are
		 * sure */
		printf("the hot pages went %llu ms unread: not checked\n",
		       (unsigned long long)gap);
		assert_true(st.secondary_pages >= NCOLD && st.secondary_pages <= N);
	}
	expect_pages(s, text, N);
	CHECK(s);
	zm_store_destroy(s);
	free(text);
}

static void test_auto_recompress(void **state)
{
	auto_recompress(false);
	auto_recompress(true);
}

/* recompress_rate bounds the worker; a store destroyed with work pending
 * is fine. */
static void test_auto_recompress_rate(void **state)
{
	enum { N = 200, RATE = 50 };
	struct zm_store_config c = { .recompress_codec = "zstd", .idle_after_ms = 20,
				     .recompress_rate = RATE };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 2400);
	struct zm_store *s = test_store_mk(&c, N);
	uint64_t t0, sec = 0;

	put_pages(s, text, N);
	t0 = now_ms();
	while (now_ms() < t0 + 5000 && !(sec = stats(s).secondary_pages))
		usleep(5000);
	assert_true(sec > 0);
	usleep(500 * 1000);
	sec = stats(s).secondary_pages;
	printf("rate %d/s: %llu pages recompressed after %llu ms\n", RATE,
	       (unsigned long long)sec, (unsigned long long)(now_ms() - t0));
	/* 4 seconds' worth cannot have gone in (now_ms() - t0) ms */
	assert_true(sec < (now_ms() - t0) * RATE / 1000 + RATE);
	assert_true(sec < N);
	CHECK(s);
	zm_store_destroy(s);

	/* destroyed at once, the worker about to run */
	c.idle_after_ms = 1;
	c.recompress_rate = 0;
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	usleep(3000);
	zm_store_destroy(s);
	free(text);
}


int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_recompress, teardown),
		cmocka_unit_test_teardown(test_recompress_not_smaller, teardown),
		cmocka_unit_test_teardown(test_recompress_at_limit, teardown),
		cmocka_unit_test_teardown(test_recompress_full_pool, teardown),
		cmocka_unit_test_teardown(test_auto_recompress, teardown),
		cmocka_unit_test_teardown(test_auto_recompress_rate, teardown),
	};

	return test_run_selected("store_recompress", tests);
}
