/*
 * Tests of the store's writeback to a backing file: by hand (the pages it
 * picks, the writeback limit, churn, reading back), automatic under the
 * memory limit, and puts waiting for the writer.
 *
 *   test_store_writeback
 */

#include "tiertest.h"

/* ---- writeback ---------------------------------------------------------- */

static void writeback_at(size_t ps, bool punch)
{
	enum { NT = 20, NS = 4, NR = 6, NZ = 4, N = NT + NS + NR + NZ };
	struct zm_store_config c = { .page_size = ps, .recompress_codec = "zstd" };
	uint8_t *text = make_pages(NT, ps, PK_TEXT, 700);
	uint8_t *sym = make_pages(NS, ps, PK_SYM32, 800);
	uint8_t *rnd = make_pages(NR, ps, PK_RANDOM, 900);
	uint8_t *fresh = make_pages(8, ps, PK_TEXT, 1000);
	uint8_t zero[65536] = { 0 }, *src[N];
	struct zm_store_stats st, st0;
	long long blocks, blocks2;
	char path[256];
	struct zm_store *s;
	uint64_t next, bytes = 0;
	zm_handle_t h;
	unsigned kind;
	size_t len, len0;

	tmp_file(path, sizeof(path), NULL);
	c.backing_path = path;
	s = test_store_mk(&c, N + 4);
	for (int i = 0; i < N; i++) {
		src[i] = i < NT ? text + i * ps : i < NT + NS ? sym + (i - NT) * ps :
			 i < NT + NS + NR ? rnd + (i - NT - NS) * ps : zero;
		assert_int_equal(zm_store_put(s, (uint64_t)i, src[i]), 0);
	}
	/* half the text and the sym32 pages go to the file encoded by zstd */
	assert_int_equal(zm_store_recompress(s, 0, NT / 2), NT / 2);
	assert_int_equal(zm_store_recompress(s, ZM_STORE_PICK_HUGE, ALL), NS);
	st0 = stats(s);
	assert_int_equal(file_blocks(path), 0);

	/* one page by hand */
	len0 = len_of(s, 1);
	assert_int_equal(zm_store_writeback_page(s, 1), 0);
	assert_int_equal(zm_store_slot_info(s, 1, &kind, &h, &len), 0);
	assert_int_equal(kind, ZM_STORE_SLOT_FILE);
	assert_int_equal(h, 0);
	assert_int_equal(len, len0);
	st = stats(s);
	assert_int_equal(st.bd_count, 1);
	assert_int_equal(st.bd_writes, 1);
	assert_int_equal(st.bd_bytes, len0);
	assert_int_equal(st.compr_data_size, st0.compr_data_size - len0);
	assert_int_equal(st.pool_objects, st0.pool_objects - 1);
	assert_int_equal(st.pages_stored, N);
	assert_int_equal(st.secondary_pages, st0.secondary_pages - 1);
	assert_true(file_blocks(path) > 0);
	/* what is not in the pool cannot be written back */
	assert_int_equal(zm_store_writeback_page(s, 1), -ENOENT);        /* on file */
	assert_int_equal(zm_store_writeback_page(s, N - 1), -ENOENT);    /* same */
	assert_int_equal(zm_store_writeback_page(s, N), -ENOENT);        /* empty */
	assert_int_equal(zm_store_writeback_page(s, N + 4), -EINVAL);
	expect_page(s, 1, src[1]);
	CHECK(s);

	/* all the rest, huge ones too; the pool is empty after */
	assert_int_equal(zm_store_writeback(s, 0, 2), 2);
	assert_int_equal(zm_store_writeback(s, 0, ALL), NT + NS + NR - 3);
	assert_int_equal(zm_store_writeback(s, 0, ALL), 0);
	st = stats(s);
	assert_int_equal(st.bd_count, NT + NS + NR);
	assert_int_equal(st.bd_writes, NT + NS + NR);
	assert_int_equal(st.bd_reads, 1);       /* page 1, read above */
	assert_int_equal(st.compr_data_size, 0);
	assert_int_equal(st.pool_objects, 0);
	assert_int_equal(st.pages_stored, N);
	assert_int_equal(st.orig_data_size, (uint64_t)N * ps);
	assert_int_equal(st.same_pages, NZ);
	assert_int_equal(st.secondary_pages, 0);
	for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++)
		assert_int_equal(st.hist[b], 0);
	for (int i = 0; i < NT + NS + NR; i++) {
		assert_int_equal(zm_store_slot_info(s, (uint64_t)i, &kind, &h, &len), 0);
		assert_int_equal(kind, ZM_STORE_SLOT_FILE);
		assert_int_equal(h, 0);
		bytes += len;
	}
	assert_int_equal(st.bd_bytes, bytes);
	assert_int_equal(bytes, st0.compr_data_size);
	/* pages on file are stored pages, but not the pool's to mark */
	assert_int_equal(zm_store_next_used(s, 0, N + 4, &next), 0);
	assert_int_equal(next, 0);
	assert_int_equal(zm_store_mark_idle(s, 0), 0);
	CHECK(s);

	/* gets read them from the file (and leave them there) */
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, src[i]);
	st = stats(s);
	assert_int_equal(st.bd_reads, 1 + NT + NS + NR);
	assert_int_equal(st.bd_count, NT + NS + NR);
	assert_int_equal(kind_of(s, 0), ZM_STORE_SLOT_FILE);
	CHECK(s);

	/* a discard frees the file's space */
	blocks = file_blocks(path);
	assert_int_equal(zm_store_discard(s, 0, NT / 2), 0);
	st = stats(s);
	assert_int_equal(st.bd_count, NT / 2 + NS + NR);
	assert_int_equal(st.pages_stored, N - NT / 2);
	for (int i = 0; i < NT / 2; i++)
		expect_zero(s, (uint64_t)i);
	blocks2 = file_blocks(path);
	if (punch)
		assert_true(blocks2 < blocks);
	CHECK(s);

	/* so does an overwrite, which lands in the pool */
	for (int i = 0; i < 8; i++) {
		assert_int_equal(zm_store_put(s, NT / 2 + (uint64_t)i, fresh + i * ps), 0);
		assert_int_equal(kind_of(s, NT / 2 + (uint64_t)i), ZM_STORE_SLOT_POOL);
	}
	st = stats(s);
	assert_int_equal(st.bd_count, NT / 2 - 8 + NS + NR);
	if (punch)
		assert_true(file_blocks(path) < blocks2);
	for (int i = 0; i < 8; i++)
		expect_page(s, NT / 2 + (uint64_t)i, fresh + i * ps);
	for (int i = NT / 2 + 8; i < N; i++)
		expect_page(s, (uint64_t)i, src[i]);
	CHECK(s);

	/* everything gone: the file holds nothing */
	assert_int_equal(zm_store_discard(s, 0, N + 4), 0);
	st = stats(s);
	assert_int_equal(st.bd_count, 0);
	assert_int_equal(st.bd_bytes, 0);
	assert_int_equal(st.pages_stored, 0);
	if (punch)
		assert_true(file_blocks(path) <= packed_slack(ps));
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text), free(sym), free(rnd), free(fresh);
}

static void test_writeback(void **state)
{
	bool punch = punch_works(tmp_dir());

	writeback_at(4096, punch);
	writeback_at(16384, punch);
}

/* The picks choose what goes to the file. */
static void test_writeback_pick(void **state)
{
	enum { NT = 12, NR = 6, N = NT + NR };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .recompress_codec = "zstd" };
	uint8_t *text = make_pages(NT, PS, PK_TEXT, 1100);
	uint8_t *rnd = make_pages(NR, PS, PK_RANDOM, 1200);
	struct zm_store *s;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, NT);
	for (int i = 0; i < NR; i++)
		assert_int_equal(zm_store_put(s, NT + (uint64_t)i, rnd + i * PS), 0);
	/* nothing is idle before a mark, nothing incompressible before a
	 * recompression */
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_IDLE, ALL), 0);
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_INCOMPRESSIBLE, ALL), 0);
	assert_int_equal(zm_store_mark_idle(s, 0), N);
	expect_page(s, 0, text);
	expect_page(s, NT, rnd);
	/* idle and huge: the random pages but the one read */
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_IDLE | ZM_STORE_PICK_HUGE, ALL),
			 NR - 1);
	for (int i = NT + 1; i < N; i++)
		assert_int_equal(kind_of(s, (uint64_t)i), ZM_STORE_SLOT_FILE);
	assert_int_equal(kind_of(s, NT), ZM_STORE_SLOT_HUGE);
	for (int i = 0; i < NT; i++)
		assert_int_equal(kind_of(s, (uint64_t)i), ZM_STORE_SLOT_POOL);
	/* idle: the text pages but the one read, two at a time */
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_IDLE, 2), 2);
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_IDLE, ALL), NT - 3);
	assert_int_equal(kind_of(s, 0), ZM_STORE_SLOT_POOL);
	assert_int_equal(kind_of(s, NT), ZM_STORE_SLOT_HUGE);
	/* incompressible: only after the secondary codec failed on it */
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_INCOMPRESSIBLE, ALL), 0);
	assert_int_equal(zm_store_recompress(s, 0, ALL), 1);   /* page 0 */
	assert_int_equal(zm_store_writeback(s, ZM_STORE_PICK_INCOMPRESSIBLE, ALL), 1);
	assert_int_equal(kind_of(s, NT), ZM_STORE_SLOT_FILE);
	assert_int_equal(kind_of(s, 0), ZM_STORE_SLOT_POOL);
	assert_int_equal(stats(s).bd_count, N - 1);
	CHECK(s);
	expect_pages(s, text, NT);
	for (int i = 0; i < NR; i++)
		expect_page(s, NT + (uint64_t)i, rnd + i * PS);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text), free(rnd);
}

/* zram's writeback_limit: pages ever written, then -EDQUOT. */
static void test_writeback_limit(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .writeback_limit = 5 };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1300);
	struct zm_store_stats st;
	struct zm_store *s;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	assert_int_equal(stats(s).writeback_left, 5);
	assert_int_equal(zm_store_writeback_page(s, 0), 0);
	assert_int_equal(stats(s).writeback_left, 4);
	assert_int_equal(zm_store_writeback(s, 0, 1), 1);
	assert_int_equal(zm_store_writeback(s, 0, ALL), 3);
	st = stats(s);
	assert_int_equal(st.writeback_left, 0);
	assert_int_equal(st.bd_writes, 5);
	assert_int_equal(st.bd_count, 5);
	assert_int_equal(zm_store_writeback(s, 0, ALL), -EDQUOT);
	assert_int_equal(zm_store_writeback_page(s, 10), -EDQUOT);
	assert_int_equal(kind_of(s, 10), ZM_STORE_SLOT_POOL);
	/* pages that leave the file give nothing back: the limit is of writes */
	assert_int_equal(zm_store_discard(s, 0, 3), 0);
	assert_int_equal(zm_store_writeback(s, 0, ALL), -EDQUOT);
	st = stats(s);
	assert_int_equal(st.writeback_left, 0);
	assert_int_equal(st.bd_count, 2);
	for (int i = 3; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/*
 * Writing back, overwriting and writing back again, many times over, with
 * few pages live: the packed file reuses its freed blocks, so the blocks
 * ever used stay about those in use (a fresh block for each writeback
 * once walked past the blocks the store had room to count, and its counts
 * ran into the memory beside them), and with the fd passed in, the lock
 * the store took goes with it (a second store on the file, after destroy,
 * may have it).
 */
static void test_writeback_churn(void **state)
{
	enum { N = 8, ROUNDS = 3000 };
	char path[256];
	struct zm_store_config c = { 0 };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1400);
	struct zm_store *s;
	int fd, fd2;

	tmp_file(path, sizeof(path), NULL);
	fd = open(path, O_RDWR);
	assert_true(fd > 0);
	c.backing_fd = fd;
	s = test_store_mk(&c, N);
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t i = (uint64_t)r % 2;

		assert_int_equal(zm_store_put(s, i, text + (r % N) * PS), 0);
		assert_int_equal(zm_store_writeback_page(s, i), 0);
		expect_page(s, i, text + (r % N) * PS);
	}
	/* two pages live, each in at most two blocks, and the block being
	 * filled: 5 blocks of 8 sectors */
	if (punch_works(tmp_dir()))
		assert_true(file_blocks(path) <= 5 * 8);
	CHECK(s);
	zm_store_destroy(s);
	fd2 = open(path, O_RDWR);
	assert_true(fd2 > 0);
	c.backing_fd = fd2;
	s = test_store_mk(&c, N);
	zm_store_destroy(s);
	close(fd2);
	close(fd);
	unlink(path);
	free(text);
}

/* backing_readback: a get brings the page back and drops the file's copy. */
static void test_readback(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .backing_readback = true };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1400);
	struct zm_store_stats st;
	struct zm_store *s;
	bool punch = punch_works(tmp_dir());

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	put_pages(s, text, N);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	for (int i = 0; i < N; i++) {
		expect_page(s, (uint64_t)i, text + i * PS);
		assert_int_equal(kind_of(s, (uint64_t)i), ZM_STORE_SLOT_POOL);
		st = stats(s);
		assert_int_equal(st.bd_count, N - 1 - (uint64_t)i);
		assert_int_equal(st.bd_reads, (uint64_t)i + 1);
	}
	st = stats(s);
	assert_int_equal(st.pool_objects, N);
	assert_int_equal(st.bd_bytes, 0);
	if (punch)
		assert_true(file_blocks(path) <= packed_slack(PS));
	/* read again: from memory now */
	expect_pages(s, text, N);
	assert_int_equal(stats(s).bd_reads, N);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/* ---- automatic writeback under the memory limit ------------------------- */

static void auto_writeback(size_t lim)
{
	size_t N = 4 * lim, A = lim * 5 / 8, B = lim * 3 / 16,
	       C = lim * 7 / 16;
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = lim * PS };
	uint8_t *rnd = make_pages(N, PS, PK_RANDOM, 1500);
	uint8_t *text = make_pages(N, PS, PK_TEXT, 1600);
	struct zm_store_stats st;
	struct zm_store *s;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, 2 * N);
	/* 4x the limit of incompressible pages, then as many text ones: all
	 * fit, the pool within the limit throughout */
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(zm_store_put(s, i, rnd + i * PS), 0);
		assert_int_equal(zm_store_put(s, N + i, text + i * PS), 0);
		st = stats(s);
		assert_true(st.compr_data_size <= lim * PS);
		assert_true(st.mem_used_total <= lim * PS);
	}
	/* the writer's round over: its counts and the slots agree */
	zmi_store_writer_quiesce(s);
	st = stats(s);
	assert_int_equal(st.pages_stored, 2 * N);
	assert_int_equal(st.limit_fails, 0);
	assert_int_equal(st.failed_writes, 0);
	assert_true(st.bd_count >= N);
	assert_int_equal(st.bd_count, count_kind(s, ZM_STORE_SLOT_FILE));
	CHECK(s);
	for (size_t i = 0; i < N; i++) {
		expect_page(s, i, rnd + i * PS);
		expect_page(s, N + i, text + i * PS);
	}
	/* overwritten in the other order, all of it */
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(zm_store_put(s, i, text + i * PS), 0);
		assert_int_equal(zm_store_put(s, N + i, rnd + i * PS), 0);
	}
	assert_true(stats(s).mem_used_total <= lim * PS);
	for (size_t i = 0; i < N; i++) {
		expect_page(s, i, text + i * PS);
		expect_page(s, N + i, rnd + i * PS);
	}
	CHECK(s);
	zm_store_destroy(s);

	/* idle pages go first: A is marked, B and C are newer; the room
	 * for B and C comes from A alone */
	s = test_store_mk(&c, N);
	for (size_t i = 0; i < A; i++)
		assert_int_equal(zm_store_put(s, i, rnd + i * PS), 0);
	assert_int_equal(zm_store_mark_idle(s, 0), A);
	for (size_t i = A; i < A + B + C; i++)
		assert_int_equal(zm_store_put(s, i, rnd + i * PS), 0);
	assert_true(stats(s).bd_count > 0);
	for (size_t i = A; i < A + B; i++)
		assert_int_equal(kind_of(s, i), ZM_STORE_SLOT_HUGE);
	/* none idle: any page makes room */
	for (size_t i = 0; i < A + B + C; i++)
		expect_page(s, i, rnd + i * PS);
	for (size_t i = A + B + C; i < N; i++)
		assert_int_equal(zm_store_put(s, i, rnd + i * PS), 0);
	for (size_t i = 0; i < N; i++)
		expect_page(s, i, rnd + i * PS);
	assert_true(stats(s).mem_used_total <= lim * PS);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(rnd), free(text);
}

static void test_auto_writeback(void **state)
{
	auto_writeback(64);
}

/* The same at a limit of 32 pages (128 KiB), about what one thread's page
 * cache holds: those pages count against the limit too, and a put must
 * still find room by writing back. */
static void test_auto_writeback_small_limit(void **state)
{
	auto_writeback(32);
}

/* The writeback limit spent, puts beyond the memory limit fail, keeping
 * the old content. */
static void test_auto_writeback_limit(void **state)
{
	enum { LIMIT_PAGES = 32, N = 4 * LIMIT_PAGES, WBL = 8 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = LIMIT_PAGES * PS,
				     .writeback_limit = WBL };
	uint8_t *rnd = make_pages(N + 1, PS, PK_RANDOM, 1700);
	struct zm_store_stats st;
	struct zm_store *s;
	size_t n = 0;
	int rc;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	while ((rc = zm_store_put(s, n, rnd + n * PS)) == 0)
		assert_true(++n < N);
	assert_int_equal(rc, -ENOSPC);
	st = stats(s);
	assert_int_equal(st.writeback_left, 0);
	assert_int_equal(st.bd_writes, WBL);
	assert_int_equal(st.bd_count, WBL);
	assert_true(st.limit_fails >= 1);
	assert_true(n >= LIMIT_PAGES / 2 + WBL);
	expect_zero(s, n);
	/* an overwrite needs room for both for a moment: refused, old kept */
	rc = zm_store_put(s, n - 1, rnd + N * PS);
	assert_int_equal(rc, -ENOSPC);
	expect_page(s, n - 1, rnd + (n - 1) * PS);
	for (size_t i = 0; i < n; i++)
		expect_page(s, i, rnd + i * PS);
	assert_int_equal(zm_store_writeback(s, 0, ALL), -EDQUOT);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(rnd);
}


/* ---- the writer ---------------------------------------------------------- */

static int g_stall;   /* atomic: writes wait while set */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int stall_fn(int op, uint64_t index)
{
	(void)index;
	while (op == 'w' && __atomic_load_n(&g_stall, __ATOMIC_ACQUIRE))
		usleep(1000);
	return 0;
}

struct put_arg {
	struct zm_store *s;
	uint64_t idx;
	const uint8_t *page;
	int rc;
	int done;   /* atomic */
};

static void *put_thread(void *arg)
{
	struct put_arg *a = arg;

	a->rc = zm_store_put(a->s, a->idx, a->page);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A put at the limit with the writer stalled waits for it (counted in
 * writeback_waits) and goes through once it writes again; with the
 * writes failing, puts at the limit get -ENOSPC promptly, never hang;
 * destroy with the writer mid-round returns. */
static void test_writer_wait(void **state)
{
	enum { LIMIT_PAGES = 64, N = 4 * LIMIT_PAGES };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = LIMIT_PAGES * PS };
	uint8_t *rnd = make_pages(N, PS, PK_RANDOM, 2050);
	struct put_arg a;
	pthread_t th;
	struct zm_store *s;
	uint64_t t0;
	size_t n = 0;

	(void)state;
	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	__atomic_store_n(&g_stall, 1, __ATOMIC_RELEASE);
	zmi_store_backing_fault = stall_fn;
	/* below the limit, puts never wait */
	while (stats(s).compr_data_size + PS <= LIMIT_PAGES * PS)
		assert_int_equal(zm_store_put(s, n, rnd + n * PS), 0), n++;
	assert_int_equal(stats(s).writeback_waits, 0);
	a = (struct put_arg){ .s = s, .idx = n, .page = rnd + n * PS };
	assert_int_equal(pthread_create(&th, NULL, put_thread, &a), 0);
	usleep(100 * 1000);
	assert_int_equal(__atomic_load_n(&a.done, __ATOMIC_ACQUIRE), 0);  /* waiting */
	__atomic_store_n(&g_stall, 0, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	assert_int_equal(a.rc, 0);
	assert_int_equal(stats(s).writeback_waits, 1);
	assert_true(stats(s).writeback_wait_ns >= 50 * 1000 * 1000);
	assert_true(stats(s).writer_wakeups >= 1);
	n++;
	for (size_t i = 0; i < n; i++)
		expect_page(s, i, rnd + i * PS);
	CHECK(s);

	/* the writes failing: -ENOSPC at the limit, promptly */
	fault_set('w', FAULT_ANY, -ENOSPC);
	zmi_store_writer_quiesce(s);
	while (zm_store_put(s, n, rnd + n * PS) == 0)
		assert_true(++n < N - 1);
	t0 = now_ns();
	for (int k = 0; k < 8; k++)
		assert_int_equal(zm_store_put(s, n, rnd + n * PS), -ENOSPC);
	assert_true(now_ns() - t0 < 5ull * 1000 * 1000 * 1000);
	fault_clear();
	assert_int_equal(zm_store_put(s, n, rnd + n * PS), 0);
	n++;
	for (size_t i = 0; i < n; i++)
		expect_page(s, i, rnd + i * PS);
	CHECK(s);

	/* destroy with the writer stalled mid-round: it ends the round at
	 * the batch it is in */
	__atomic_store_n(&g_stall, 1, __ATOMIC_RELEASE);
	zmi_store_backing_fault = stall_fn;
	zm_store_set_limit(s, (stats(s).compr_data_size / 2) | 1);
	zmi_store_writer_kick(s);
	usleep(20 * 1000);
	__atomic_store_n(&g_stall, 0, __ATOMIC_RELEASE);
	zm_store_destroy(s);
	fault_clear();
	unlink(path);
	free(rnd);
}

/* The pool's pages full while the objects are far below the limit
 * (text pages freed three in four, the pool not compacting by itself,
 * then incompressible ones, a page each): the put that the pool refuses
 * asks the writer for room and waits (writeback_waits), never reclaims
 * itself (reclaim_sync), and every page reads back. */
static void test_writer_pool_full(void **state)
{
	enum { LIMIT_PAGES = 64, N = 8 * LIMIT_PAGES };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .limit_bytes = LIMIT_PAGES * PS };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 2100);
	uint8_t *rnd = make_pages(N, PS, PK_RANDOM, 2150);
	bool kept[N] = { false };
	struct zm_store_stats st;
	struct zm_store *s;
	size_t n = 0, r = 0;

	(void)state;
	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, 2 * N);
	assert_int_equal(zm_pool_set_compaction(zm_store_pool(s), ZM_COMPACT_OFF), 0);
	/* three quarters of the limit in text, below the writer's mark */
	while (stats(s).compr_data_size + PS <= LIMIT_PAGES * PS * 3 / 4)
		assert_int_equal(zm_store_put(s, n, text + n * PS), 0), n++;
	for (size_t i = 0; i < n; i++) {
		kept[i] = i % 4 == 0;
		if (!kept[i])
			assert_int_equal(zm_store_discard(s, i, 1), 0);
	}
	/* whole pages until the pool refuses one, and as many again */
	while (!stats(s).reclaim_pool_full) {
		assert_true(r < N);
		assert_int_equal(zm_store_put(s, N + r, rnd + r * PS), 0), r++;
	}
	for (size_t k = r; k < 2 * r; k++)
		assert_int_equal(zm_store_put(s, N + k, rnd + k * PS), 0);
	r *= 2;
	st = stats(s);
	assert_int_equal(st.reclaim_sync, 0);
	assert_true(st.writeback_waits >= st.reclaim_pool_full);
	for (size_t i = 0; i < n; i++) {
		if (kept[i])
			expect_page(s, i, text + i * PS);
		else
			expect_zero(s, i);
	}
	for (size_t i = 0; i < r; i++)
		expect_page(s, N + i, rnd + i * PS);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text), free(rnd);
}

/* A punch that fails leaks file space, never data. */

int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_writeback, teardown),
		cmocka_unit_test_teardown(test_writeback_pick, teardown),
		cmocka_unit_test_teardown(test_writeback_limit, teardown),
		cmocka_unit_test_teardown(test_writeback_churn, teardown),
		cmocka_unit_test_teardown(test_readback, teardown),
		cmocka_unit_test_teardown(test_auto_writeback, teardown),
		cmocka_unit_test_teardown(test_auto_writeback_small_limit, teardown),
		cmocka_unit_test_teardown(test_auto_writeback_limit, teardown),
		cmocka_unit_test_teardown(test_writer_wait, teardown),
		cmocka_unit_test_teardown(test_writer_pool_full, teardown),
	};

	return test_run_selected("store_writeback", tests);
}
