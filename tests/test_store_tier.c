/*
 * Tests of the store's cold-data tiering, the parts the others build on:
 * creation and bad input, idle tracking, and the pool's errors met while
 * pages move between tiers.  The rest of tiering has files of its own:
 * test_store_recompress.c, test_store_writeback.c,
 * test_store_writeback_faults.c, test_store_backing.c, test_store_fork.c,
 * test_store_tier_model.c (fixture: tiertest.h).
 *
 *   test_store_tier
 */

#include "tiertest.h"

/* ---- create and bad input ----------------------------------------------- */

static void test_create(void **state)
{
	struct zm_store_config c = { .nr_pages = 16 };
	struct zm_store *s = (void *)1;
	struct zm_store_stats st;
	uint8_t *text = make_pages(4, PS, PK_TEXT, 1);
	static uint8_t junk[1 << 20];
	char path[256];
	int fd;

	/* a secondary codec that does not exist */
	c.recompress_codec = "nonesuch";
	assert_int_equal(zm_store_create(&c, &s), -EINVAL);
	assert_null(s);
	c.recompress_codec = NULL;

	/* a backing file that cannot be opened: its errno */
	c.backing_path = "/nonexistent-dir/zmem-backing";
	assert_int_equal(zm_store_create(&c, &s), -ENOENT);
	assert_null(s);

	/* no cold-data configuration: the calls are refused, not crashed */
	c.backing_path = NULL;
	s = test_store_mk(&c, 16);
	put_pages(s, text, 4);
	assert_int_equal(zm_store_recompress(s, 0, ALL), -EOPNOTSUPP);
	assert_int_equal(zm_store_writeback(s, 0, ALL), -EOPNOTSUPP);
	assert_int_equal(zm_store_writeback_page(s, 0), -EOPNOTSUPP);
	assert_int_equal(zm_store_mark_idle(s, 0), 4);
	st = stats(s);
	assert_int_equal(st.writeback_left, 0);
	assert_int_equal(st.bd_count + st.bd_reads + st.bd_writes + st.bd_bytes, 0);
	assert_int_equal(st.secondary_pages + st.recompressed_pages, 0);
	assert_int_equal(zm_store_mark_idle(NULL, 0), -EINVAL);
	assert_int_equal(zm_store_recompress(NULL, 0, 1), -EINVAL);
	assert_int_equal(zm_store_writeback(NULL, 0, 1), -EINVAL);
	assert_int_equal(zm_store_writeback_page(NULL, 0), -EINVAL);
	expect_pages(s, text, 4);
	CHECK(s);
	zm_store_destroy(s);

	/* backing_path: an old file's content is dropped */
	tmp_file(path, sizeof(path), NULL);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	memset(junk, 0x77, sizeof(junk));
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	fsync(fd);
	close(fd);
	assert_true(file_blocks(path) > 0);
	c.backing_path = path;
	s = test_store_mk(&c, 16);
	assert_int_equal(file_blocks(path), 0);
	{	/* one store a file: a second would empty the first's, and
		 * its failed create must not either */
		struct zm_store *s2 = (void *)1;

		assert_int_equal(zm_store_put(s, 5, text), 0);
		assert_int_equal(zm_store_writeback_page(s, 5), 0);
		assert_int_equal(zm_store_create(&c, &s2), -EBUSY);
		assert_null(s2);
		expect_page(s, 5, text);
		assert_int_equal(zm_store_discard(s, 5, 1), 0);
	}
	st = stats(s);
	assert_int_equal(st.writeback_left, UINT64_MAX);
	assert_int_equal(zm_store_writeback_page(s, 16), -EINVAL);
	assert_int_equal(zm_store_writeback_page(s, 0), -ENOENT);   /* empty */
	assert_int_equal(zm_store_writeback(s, 0, ALL), 0);         /* nothing to do */
	expect_zero(s, 0);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);

	/* backing_fd: used, and still open after destroy */
	tmp_file(path, sizeof(path), NULL);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	c.backing_path = NULL;
	c.backing_fd = fd;
	s = test_store_mk(&c, 16);
	put_pages(s, text, 4);
	assert_int_equal(zm_store_writeback(s, 0, ALL), 4);
	assert_int_equal(kind_of(s, 2), ZM_STORE_SLOT_FILE);
	assert_true(file_blocks(path) > 0);
	expect_pages(s, text, 4);
	CHECK(s);
	zm_store_destroy(s);
	assert_true(fcntl(fd, F_GETFD) >= 0);
	close(fd);

	/* a read-only descriptor: refused at create, or its writebacks fail
	 * and the pages stay in memory */
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	c.backing_fd = fd;
	if (zm_store_create(&c, &s) == 0) {
		long rc;

		put_pages(s, text, 4);
		rc = zm_store_writeback(s, 0, ALL);
		assert_true(rc < 0);
		expect_pages(s, text, 4);
		CHECK(s);
		zm_store_destroy(s);
	} else {
		assert_null(s);
	}
	close(fd);
	unlink(path);
	free(text);
}

/* ---- idle tracking ------------------------------------------------------ */

static void test_idle(void **state)
{
	enum { NT = 24, NR = 6, NZ = 5, N = NT + NR + NZ };
	struct zm_store_config c = { .recompress_codec = "zstd" };
	struct zm_store *s = test_store_mk(&c, N + 4);
	uint8_t *text = make_pages(NT + 8, PS, PK_TEXT, 100);
	uint8_t *rnd = make_pages(NR, PS, PK_RANDOM, 200);
	uint8_t zero[PS] = { 0 }, out[PS];
	const uint8_t *cur[N];
	struct zm_store_stats st;
	uint64_t tried;

	for (int i = 0; i < N; i++) {
		cur[i] = i < NT ? text + i * PS : i < NT + NR ? rnd + (i - NT) * PS : zero;
		assert_int_equal(zm_store_put(s, (uint64_t)i, cur[i]), 0);
	}

	/* every page in the pool, not the same-filled ones */
	assert_int_equal(zm_store_mark_idle(s, 0), NT + NR);
	st = stats(s);
	assert_int_equal(st.idle_pages, NT + NR);
	CHECK(s);

	/* a get and a put clear the mark: the idle pick skips those two */
	expect_page(s, 3, cur[3]);
	cur[5] = text + NT * PS;
	assert_int_equal(zm_store_put(s, 5, cur[5]), 0);
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL), NT - 2);
	st = stats(s);
	assert_int_equal(st.secondary_pages, NT - 2);
	assert_int_equal(st.incompressible_pages, NR);   /* idle, tried, failed */
	/* the accessed two are still lz4's: recompressing them now shrinks them */
	assert_int_equal(zm_store_recompress(s, 0, ALL), 2);
	CHECK(s);

	/* fresh lz4 pages marked, then every page read: none is idle */
	for (int i = 0; i < 4; i++) {
		cur[i] = text + (NT + 1 + i) * PS;
		assert_int_equal(zm_store_put(s, (uint64_t)i, cur[i]), 0);
	}
	assert_int_equal(zm_store_mark_idle(s, 0), NT + NR);
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_get(s, (uint64_t)i, out), 0);
	tried = stats(s).recompress_tried;
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL), 0);
	assert_int_equal(stats(s).recompress_tried, tried);  /* none was even tried */
	assert_int_equal(zm_store_recompress(s, 0, ALL), 4);
	CHECK(s);

	/* ages: a page idle since a mark 150 ms ago is idle at 100 ms; one
	 * read since is not, and the idle pick leaves it */
	cur[7] = text + (NT + 5) * PS;
	cur[8] = text + (NT + 6) * PS;
	assert_int_equal(zm_store_put(s, 7, cur[7]), 0);
	assert_int_equal(zm_store_put(s, 8, cur[8]), 0);
	assert_int_equal(zm_store_mark_idle(s, 0), NT + NR);
	usleep(150 * 1000);
	expect_page(s, 7, cur[7]);
	assert_int_equal(zm_store_mark_idle(s, 100), NT + NR - 1);
	st = stats(s);
	assert_int_equal(st.idle_pages, NT + NR - 1);
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL), 1);  /* page 8 */
	assert_int_equal(zm_store_recompress(s, 0, ALL), 1);                   /* page 7 */
	st = stats(s);
	assert_int_equal(st.secondary_pages, NT);
	assert_int_equal(st.incompressible_pages, NR);
	CHECK(s);

	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, cur[i]);
	zm_store_destroy(s);

	/* a store with nothing in its pool has nothing to mark */
	s = test_store_mk(&c, 8);
	assert_int_equal(zm_store_put(s, 1, zero), 0);
	assert_int_equal(zm_store_mark_idle(s, 0), 0);
	assert_int_equal(zm_store_mark_idle(s, 1000), 0);
	assert_int_equal(stats(s).idle_pages, 0);
	CHECK(s);
	zm_store_destroy(s);
	free(text), free(rnd);
}


/* ---- pool errors -------------------------------------------------------- */

static int g_pf_op;             /* 'b' bind, 'f' free_key */
static uint64_t g_pf_index;

static int pool_fault_fn(int op, uint64_t index)
{
	return op == g_pf_op && index == g_pf_index ? -EINVAL : 0;
}

static void pool_fault_set(int op, uint64_t index)
{
	g_pf_op = op;
	g_pf_index = index;
	zmi_store_pool_fault = pool_fault_fn;
}

static int pf_teardown(void **state)
{
	zmi_store_pool_fault = NULL;
	return teardown(state);
}

static unsigned kind_at(struct zm_store *s, uint64_t idx)
{
	unsigned kind = 99;

	assert_int_equal(zm_store_slot_info(s, idx, &kind, NULL, NULL), 0);
	return kind;
}

/* A pool that refuses to bind or free a page's object (seam above; in
 * the field, a pool corrupted or an object freed behind the store's
 * back): each call that swaps a page's object fails with -EIO, counts it
 * in pool_errors and leaves a slot that names only what its key holds,
 * which the checker verifies, in release builds as in debug ones. */
static void test_pool_errors(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .recompress_codec = "zstd",
				     .backing_readback = true };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 2300);
	uint8_t *other = make_pages(1, PS, PK_TEXT, 2400);
	struct zm_store *s;
	uint64_t errs = 0;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, i, text + i * PS), 0);

	/* put: the old object cannot be freed: the page stays as it was */
	pool_fault_set('f', 1);
	assert_int_equal(zm_store_put(s, 1, other), -EIO);
	zmi_store_pool_fault = NULL;
	assert_int_equal(stats(s).pool_errors, ++errs);
	expect_page(s, 1, text + 1 * PS);
	CHECK(s);

	/* put: the new object cannot be bound: the page is gone (empty) */
	pool_fault_set('b', 2);
	assert_int_equal(zm_store_put(s, 2, other), -EIO);
	zmi_store_pool_fault = NULL;
	assert_int_equal(stats(s).pool_errors, ++errs);
	assert_int_equal(kind_at(s, 2), ZM_STORE_SLOT_EMPTY);
	expect_zero(s, 2);
	CHECK(s);
	assert_int_equal(zm_store_put(s, 2, other), 0);
	expect_page(s, 2, other);

	/* discard: the page that cannot be freed stays, the others go */
	pool_fault_set('f', 4);
	assert_int_equal(zm_store_discard(s, 3, 3), -EIO);
	zmi_store_pool_fault = NULL;
	assert_int_equal(stats(s).pool_errors, ++errs);
	expect_zero(s, 3);
	expect_page(s, 4, text + 4 * PS);
	expect_zero(s, 5);
	CHECK(s);

	/* writeback: the object cannot be freed: the page stays in memory */
	pool_fault_set('f', 6);
	assert_int_equal(zm_store_writeback_page(s, 6), -EIO);
	zmi_store_pool_fault = NULL;
	assert_int_equal(stats(s).pool_errors, ++errs);
	assert_int_equal(kind_at(s, 6), ZM_STORE_SLOT_POOL);
	assert_int_equal(stats(s).bd_count, 0);
	expect_page(s, 6, text + 6 * PS);
	CHECK(s);

	/* recompress: the old object cannot be freed: the page stays */
	pool_fault_set('f', 7);
	assert_true(zm_store_recompress(s, 0, ALL) > 0);
	zmi_store_pool_fault = NULL;
	assert_int_equal(stats(s).pool_errors, ++errs);
	expect_page(s, 7, text + 7 * PS);
	CHECK(s);
	/* the new object cannot be bound: the page is gone (empty); the
	 * only page left to re-encode, so the run says -EIO */
	pool_fault_set('b', 7);
	assert_int_equal(zm_store_recompress(s, 0, ALL), -EIO);
	zmi_store_pool_fault = NULL;
	assert_int_equal(stats(s).pool_errors, ++errs);
	assert_int_equal(kind_at(s, 7), ZM_STORE_SLOT_EMPTY);
	CHECK(s);

	/* readback: the object read back cannot be bound: the get has the
	 * page all the same, which stays on file */
	assert_int_equal(zm_store_writeback_page(s, 8), 0);
	pool_fault_set('b', 8);
	expect_page(s, 8, text + 8 * PS);
	zmi_store_pool_fault = NULL;
	assert_int_equal(stats(s).pool_errors, ++errs);
	assert_int_equal(kind_at(s, 8), ZM_STORE_SLOT_FILE);
	CHECK(s);
	expect_page(s, 8, text + 8 * PS);   /* read back now */
	assert_int_equal(kind_at(s, 8), ZM_STORE_SLOT_POOL);
	CHECK(s);

	zm_store_destroy(s);
	unlink(path);
	free(text);
	free(other);
}


int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_create, teardown),
		cmocka_unit_test_teardown(test_idle, teardown),
		cmocka_unit_test_teardown(test_pool_errors, pf_teardown),
	};

	return test_run_selected("store_tier", tests);
}
