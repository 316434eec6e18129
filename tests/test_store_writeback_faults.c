/*
 * Tests of the backing file's I/O faults, injected through its test seam:
 * reads, writes (all of them, one of a batch, at the limit, under
 * automatic writeback) and punches that fail lose no page.
 *
 *   test_store_writeback_faults
 */

#include "tiertest.h"

/* ---- faults ------------------------------------------------------------- */

static void test_fault_read(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1800);
	uint8_t out[PS];

	tmp_file(path, sizeof(path), NULL);
	for (int rb = 0; rb < 2; rb++) {
		struct zm_store *s;
		struct zm_store_stats st;

		c.backing_readback = rb;
		s = test_store_mk(&c, N);
		put_pages(s, text, N);
		assert_int_equal(zm_store_writeback(s, 0, ALL), N);
		fault_set('r', 5, -EIO);
		assert_int_equal(zm_store_get(s, 5, out), -EIO);
		assert_int_equal(zm_store_get(s, 5, out), -EIO);
		assert_true(g_fault_calls[0] >= 2);
		for (int i = 0; i < N; i++)
			if (i != 5)
				expect_page(s, (uint64_t)i, text + i * PS);
		st = stats(s);
		assert_true(st.failed_reads >= 2);
		/* the page is still there, on file */
		assert_int_equal(kind_of(s, 5), ZM_STORE_SLOT_FILE);
		CHECK(s);
		fault_clear();
		expect_page(s, 5, text + 5 * PS);
		CHECK(s);
		zm_store_destroy(s);
	}
	unlink(path);
	free(text);
}

/* Writes that fail keep the pages in memory, counted; the first failure
 * is a writeback's answer when nothing was written. */
static void test_fault_write(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1900);
	struct zm_store_stats st;
	struct zm_store *s;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	fault_set('w', 7, -EIO);
	assert_int_equal(zm_store_writeback_page(s, 7), -EIO);
	assert_int_equal(g_fault_calls[1], 1);
	st = stats(s);
	assert_int_equal(st.writeback_failures, 1);
	assert_int_equal(st.bd_count, 0);
	assert_int_equal(kind_of(s, 7), ZM_STORE_SLOT_POOL);
	expect_page(s, 7, text + 7 * PS);
	CHECK(s);
	fault_set('w', FAULT_ANY, -EIO);
	assert_int_equal(zm_store_writeback(s, 0, ALL), -EIO);
	fault_set('w', FAULT_ANY, -ENOSPC);
	assert_int_equal(zm_store_writeback(s, 0, ALL), -ENOSPC);
	assert_int_equal(zm_store_writeback_page(s, 3), -ENOSPC);
	st = stats(s);
	assert_int_equal(st.bd_count, 0);
	assert_int_equal(st.bd_writes, 0);
	assert_int_equal(count_kind(s, ZM_STORE_SLOT_POOL), N);
	assert_true(st.writeback_failures >= 4);
	fault_clear();
	expect_pages(s, text, N);
	CHECK(s);
	/* the file works again: everything goes */
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	expect_pages(s, text, N);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/* One page's write fails (a bad block at its offset): that page stays in
 * memory, the writeback goes on with the others (zram's writeback does:
 * an I/O error is not fatal to the rest). */
static void test_fault_write_one(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1950);
	struct zm_store_stats st;
	struct zm_store *s;
	long got;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	fault_set('w', 7, -EIO);
	got = zm_store_writeback(s, 0, ALL);
	st = stats(s);
	printf("a bad page at 7 of %d: writeback wrote %ld, %llu failures\n", N, got,
	       (unsigned long long)st.writeback_failures);
	assert_int_equal(kind_of(s, 7), ZM_STORE_SLOT_POOL);
	assert_int_equal(st.writeback_failures, 1);
	expect_pages(s, text, N);
	CHECK(s);
	assert_int_equal(got, N - 1);
	assert_int_equal(st.bd_count, N - 1);
	fault_clear();
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/* A writeback copies a batch of pages out of the pool and writes each run
 * of them lying end to end in the packed file with one system call: N
 * pages cost far fewer than N writes, and every page reads back.  With a
 * bad page among them, the runs split there and only it stays. */
static void test_writeback_batched(void **state)
{
	enum { N = 512 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1960);
	struct zm_store_stats st;
	struct zm_store *s;
	uint64_t calls;
	long got;

	(void)state;
	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	calls = __atomic_load_n(&zmi_store_backing_pwrites, __ATOMIC_RELAXED);
	got = zm_store_writeback(s, 0, ALL);
	calls = __atomic_load_n(&zmi_store_backing_pwrites, __ATOMIC_RELAXED) - calls;
	printf("writeback of %d pages: %ld written with %llu write calls\n", N, got,
	       (unsigned long long)calls);
	assert_int_equal(got, N);
	assert_true(calls * 8 <= N);
	expect_pages(s, text, N);
	CHECK(s);
	/* all back in memory, one bad page among them */
	put_pages(s, text, N);
	fault_set('w', 100, -EIO);
	got = zm_store_writeback(s, 0, ALL);
	st = stats(s);
	assert_int_equal(got, N - 1);
	assert_int_equal(st.writeback_failures, 1);
	assert_int_equal(kind_of(s, 100), ZM_STORE_SLOT_POOL);
	fault_clear();
	expect_pages(s, text, N);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/* The same at the memory limit: one bad page must not stop the puts that
 * need room from writing the others back. */
static void test_fault_write_one_at_limit(void **state)
{
	enum { LIMIT_PAGES = 64, N = 512 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = LIMIT_PAGES * PS };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1970);
	struct zm_store *s;
	int refused = 0, rc;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	fault_set('w', 5, -EIO);
	for (int i = 0; i < N; i++) {
		rc = zm_store_put(s, (uint64_t)i, text + i * PS);
		if (rc) {
			assert_int_equal(rc, -ENOSPC);
			refused++;
			memset(text + i * PS, 0, PS);   /* the slot stays empty */
		}
	}
	printf("a bad page at 5, a limit of %d pages: %d of %d puts refused, %llu on file\n",
	       LIMIT_PAGES, refused, N, (unsigned long long)stats(s).bd_count);
	assert_int_equal(kind_of(s, 5), ZM_STORE_SLOT_POOL);
	expect_pages(s, text, N);
	CHECK(s);
	assert_int_equal(refused, 0);
	fault_clear();
	zm_store_destroy(s);
	free(text);
}

/* Writes failing while the limit needs room: puts are refused, nothing is
 * lost; once the file works again, puts go through. */
static void test_fault_auto_writeback(void **state)
{
	enum { LIMIT_PAGES = 32, N = 4 * LIMIT_PAGES };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = LIMIT_PAGES * PS };
	uint8_t *rnd = make_pages(N + 1, PS, PK_RANDOM, 2000);
	struct zm_store_stats st;
	struct zm_store *s;
	size_t n = 0;
	int rc;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	fault_set('w', FAULT_ANY, -EIO);
	while ((rc = zm_store_put(s, n, rnd + n * PS)) == 0)
		assert_true(++n < N);
	printf("puts with failing writes: %zu fit, then %d\n", n, rc);
	assert_true(rc == -ENOSPC || rc == -EIO);
	assert_true(n >= LIMIT_PAGES / 2);
	assert_true(g_fault_calls[1] > 0);
	st = stats(s);
	assert_int_equal(st.bd_count, 0);
	assert_true(st.writeback_failures > 0);
	expect_zero(s, n);
	rc = zm_store_put(s, 0, rnd + N * PS);
	assert_true(rc == -ENOSPC || rc == -EIO);
	expect_page(s, 0, rnd);
	for (size_t i = 0; i < n; i++)
		expect_page(s, i, rnd + i * PS);
	CHECK(s);
	fault_clear();
	for (size_t i = n; i < N; i++)
		assert_int_equal(zm_store_put(s, i, rnd + i * PS), 0);
	for (size_t i = 0; i < N; i++)
		expect_page(s, i, rnd + i * PS);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(rnd);
}


static void test_fault_punch(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(2 * N, PS, PK_TEXT, 2100);
	struct zm_store *s;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	fault_set('p', FAULT_ANY, -EIO);
	assert_int_equal(zm_store_discard(s, 0, 4), 0);
	for (int i = 4; i < 8; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + (N + i) * PS), 0);
	assert_true(g_fault_calls[2] > 0);
	assert_int_equal(stats(s).bd_count, N - 8);
	for (int i = 0; i < 4; i++)
		expect_zero(s, (uint64_t)i);
	for (int i = 4; i < 8; i++)
		expect_page(s, (uint64_t)i, text + (N + i) * PS);
	CHECK(s);
	/* the same offsets written again, with the punch working or not */
	for (int i = 0; i < 8; i++) {
		if (i == 2)
			fault_clear();
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
		assert_int_equal(zm_store_writeback_page(s, (uint64_t)i), 0);
	}
	expect_pages(s, text, N);
	assert_int_equal(stats(s).bd_count, N);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}


int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_fault_read, teardown),
		cmocka_unit_test_teardown(test_fault_write, teardown),
		cmocka_unit_test_teardown(test_fault_write_one, teardown),
		cmocka_unit_test_teardown(test_writeback_batched, teardown),
		cmocka_unit_test_teardown(test_fault_write_one_at_limit, teardown),
		cmocka_unit_test_teardown(test_fault_auto_writeback, teardown),
		cmocka_unit_test_teardown(test_fault_punch, teardown),
	};

	return test_run_selected("store_writeback_faults", tests);
}
