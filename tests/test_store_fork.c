/*
 * Tests of fork with a tiered store: a child never changes the parent's
 * backing file, also while the writer is busy.
 *
 *   test_store_fork
 */

#include "tiertest.h"

/* ---- fork: a child never changes the parent's file ---------------------- */

/* A store of FK_N pages of text, raw and sym32 content under a 1 MiB
 * limit: most of them go to the backing file. */
enum { FK_N = 2048 };
static struct zm_store *g_fk_store;
static uint8_t *g_fk_pages;

static uint8_t *fk_page(uint64_t i)
{
	return g_fk_pages + i * PS;
}

/* The child does all it may with its copy of the store: writebacks,
 * puts over pages on file, discards, and destroys it. */
static int fk_child_wreck(const char *arg)
{
	struct zm_store *s = g_fk_store;
	uint8_t *other = make_pages(1, PS, PK_RANDOM, 99999);

	(void)arg;
	(void)zm_store_writeback(s, 0, ALL);
	for (uint64_t i = 0; i < FK_N / 2; i++)
		(void)zm_store_put(s, i, other);
	(void)zm_store_discard(s, FK_N / 2, FK_N / 4);
	(void)zm_store_writeback(s, 0, ALL);
	(void)zm_store_writeback_page(s, FK_N - 1);
	zm_store_destroy(s);
	free(other);
	return 0;
}

/* What the child's store promises: pages on file read as -EIO, pages in
 * memory read back, no writeback, discards and puts work in memory. */
static int fk_child_rules(const char *arg)
{
	struct zm_store *s = g_fk_store;
	uint8_t out[PS];
	long n;
	int on_file = 0, in_mem = 0;

	(void)arg;
	g_child_bad = 0;
	for (uint64_t i = 0; i < FK_N; i++) {
		unsigned kind = kind_of_ck(s, i);
		int rc = zm_store_get(s, i, out);

		if (kind == ZM_STORE_SLOT_FILE) {
			on_file++;
			CK_SOFT(rc == -EIO, rc);
		} else {
			in_mem++;
			CK_SOFT(rc == 0 && !memcmp(out, fk_page(i), PS), rc);
		}
	}
	CK(on_file > 0 && in_mem > 0);
	n = zm_store_writeback(s, 0, ALL);
	CK_SOFT(n == -EOPNOTSUPP, n);
	n = zm_store_writeback_page(s, 0);
	CK_SOFT(n == -EOPNOTSUPP || n == -ENOENT, n);
	CK(zm_store_discard(s, 0, FK_N) == 0);
	for (uint64_t i = 0; i < 8; i++) {
		CK(zm_store_put(s, i, fk_page(i)) == 0);
		CK(zm_store_get(s, i, out) == 0 && !memcmp(out, fk_page(i), PS));
	}
	CK(zm_store_check(s) == 0);
	zm_store_destroy(s);
	return g_child_bad;
}

static void fk_verify(struct zm_store *s)
{
	for (uint64_t i = 0; i < FK_N; i++)
		expect_page(s, i, fk_page(i));
	CHECK(s);
}

/* Under qemu-user (make check-arm64 sets ZM_TEST_EMULATED) a fork of a
 * process with threads (the store's compactor) aborts inside the
 * emulator, not in zmem: the test skips there; every native build runs
 * it. */
static void test_fork_child(void **state)
{
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = 1 << 20 };
	struct zm_store_stats st;
	struct zm_store *s;
	uint64_t raw_on_file = 0;

	if (getenv("ZM_TEST_EMULATED"))
		skip();
	int fd;

	tmp_file(path, sizeof(path), NULL);
	g_fk_pages = malloc((size_t)FK_N * PS);
	assert_non_null(g_fk_pages);
	for (uint64_t i = 0; i < FK_N; i++)
		fill_page(fk_page(i), PS, i % 3 == 0 ? PK_TEXT : i % 3 == 1 ? PK_RANDOM : PK_SYM32,
			  2100 + i);
	s = test_store_mk(&c, FK_N);
	g_fk_store = s;
	for (uint64_t i = 0; i < FK_N; i++)
		assert_int_equal(zm_store_put(s, i, fk_page(i)), 0);
	st = stats(s);
	assert_true(st.bd_count > FK_N / 2);
	for (uint64_t i = 1; i < FK_N; i += 3)
		raw_on_file += kind_of_ck(s, i) == ZM_STORE_SLOT_FILE;
	assert_true(raw_on_file > 0);

	assert_int_equal(in_child(fk_child_wreck, NULL), 0);
	fk_verify(s);
	assert_int_equal(in_child(fk_child_rules, NULL), 0);
	fk_verify(s);
	/* the parent still holds the file: another store is refused it */
	fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
	close(fd);
	/* and goes on using it */
	assert_true(zm_store_writeback(s, 0, ALL) >= 0);
	for (uint64_t i = 0; i < FK_N; i += 2)
		assert_int_equal(zm_store_discard(s, i, 1), 0);
	for (uint64_t i = 0; i < FK_N; i += 2)
		assert_int_equal(zm_store_put(s, i, fk_page(i)), 0);
	fk_verify(s);
	zm_store_destroy(s);
	unlink(path);
	free(g_fk_pages);
}

/* ---- fork with the writer busy ----------------------------------------- */

static int slow_write_fn(int op, uint64_t index)
{
	(void)index;
	if (op == 'w')
		usleep(200);   /* a writer's round lasts: forks land in it */
	return 0;
}

/* The child of a parent whose writer was writing back: it finds the
 * store as the parent left it between two chunks (the fork hook), pages
 * in memory read back, pages on file read -EIO, puts at the limit fail
 * with -ENOSPC at once (no writer to wait for), and destroy returns.
 * SIGALRM ends a child that hangs (its status then fails the test). */
static int fk_child_busy(const char *arg)
{
	struct zm_store *s = g_fk_store;
	uint8_t out[PS];
	int on_file = 0, in_mem = 0;

	(void)arg;
	alarm(30);
	g_child_bad = 0;
	for (uint64_t i = 0; i < FK_N; i++) {
		int rc = zm_store_get(s, i, out);

		if (rc == -EIO) {
			on_file++;
			CK_SOFT(kind_of_ck(s, i) == ZM_STORE_SLOT_FILE, i);
		} else {
			in_mem++;
			CK_SOFT(rc == 0 && !memcmp(out, fk_page(i), PS), rc);
		}
	}
	CK(on_file > 0 && in_mem > 0);
	for (uint64_t i = 0; i < 64; i++) {
		int rc = zm_store_put(s, i, fk_page(i + 1));

		CK_SOFT(rc == 0 || rc == -ENOSPC, rc);
		if (!rc) {
			CK(zm_store_get(s, i, out) == 0);
			CK_SOFT(!memcmp(out, fk_page(i + 1), PS), i);
		}
	}
	CK(zm_store_check(s) == 0);
	zm_store_destroy(s);
	return g_child_bad;
}

/* Forks while the store's writer is mid-round (the limit lowered under
 * the objects, writes slowed down): every child passes, and the parent's
 * writer goes on (its pages all read back, it writes back again). */
static void test_fork_writer_busy(void **state)
{
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = 1 << 20 };
	struct zm_store *s;
	uint64_t seed = 4242;

	(void)state;
	if (getenv("ZM_TEST_EMULATED"))
		skip();
	tmp_file(path, sizeof(path), NULL);
	g_fk_pages = malloc((size_t)FK_N * PS);
	assert_non_null(g_fk_pages);
	for (uint64_t i = 0; i < FK_N; i++)
		fill_page(fk_page(i), PS, i % 3 == 0 ? PK_TEXT : i % 3 == 1 ? PK_RANDOM : PK_SYM32,
			  2100 + i);
	s = test_store_mk(&c, FK_N);
	g_fk_store = s;
	for (uint64_t i = 0; i < FK_N; i++)
		assert_int_equal(zm_store_put(s, i, fk_page(i)), 0);
	zmi_store_backing_fault = slow_write_fn;
	for (int k = 0; k < 6; k++) {
		uint64_t w0 = stats(s).bd_writes;

		/* bring pages back to memory, then make the writer write */
		for (uint64_t i = (uint64_t)k * 64; i < (uint64_t)k * 64 + 256; i++)
			assert_int_equal(zm_store_put(s, i, fk_page(i)), 0);
		zmi_store_writer_quiesce(s);
		zm_store_set_limit(s, (size_t)(stats(s).compr_data_size / 2));
		zmi_store_writer_kick(s);
		usleep((useconds_t)(500 + zmi_rand(&seed) % 3000));
		assert_int_equal(in_child(fk_child_busy, NULL), 0);
		zmi_store_writer_quiesce(s);
		assert_true(stats(s).bd_writes > w0);   /* it wrote, before or after */
		zm_store_set_limit(s, 1 << 20);
	}
	zmi_store_backing_fault = NULL;
	fk_verify(s);
	zm_store_destroy(s);
	unlink(path);
	free(g_fk_pages);
}

int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_fork_child, teardown),
		cmocka_unit_test_teardown(test_fork_writer_busy, teardown),
	};

	return test_run_selected("store_fork", tests);
}
