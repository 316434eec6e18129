/*
 * Tests of the backing file itself: a file that cannot grow (a file size
 * limit, a small tmpfs), and the page cache its writes leave behind
 * (direct I/O or pages dropped, and the fallbacks when either fails).
 *
 *   test_store_backing
 */

#include "tiertest.h"

/* ---- a file that cannot grow -------------------------------------------- */


/* Pages whose offsets are beyond a full file stay in memory; the ones
 * that fit go; a put fails only when memory is full too; nothing is lost. */
static int check_full_file(const char *dir, uint64_t file_pages, bool rlimit)
{
	enum { N = 512, LIMIT_PAGES = 32 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *rnd = make_pages(N, PS, PK_RANDOM, 2200);
	uint8_t out[PS];
	struct zm_store_stats st;
	struct zm_store *s;
	struct rlimit rl;
	size_t n;
	long got;
	int rc;

	/* written back by hand */
	snprintf(path, sizeof(path), "%s/by-hand", dir);
	c.nr_pages = N;
	CK(zm_store_create(&c, &s) == 0);
	if (rlimit) {
		rl = (struct rlimit){ file_pages * PS, file_pages * PS };
		CK(getrlimit(RLIMIT_FSIZE, &rl) == 0);
		rl.rlim_cur = file_pages * PS;
		CK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	}
	for (uint64_t i = 0; i < N; i++)
		CK(zm_store_put(s, i, rnd + i * PS) == 0);
	got = zm_store_writeback(s, 0, ALL);
	st = stats(s);
	printf("child: a file of %llu pages took %ld, bd_count %llu, failures %llu\n",
	       (unsigned long long)file_pages, got, (unsigned long long)st.bd_count,
	       (unsigned long long)st.writeback_failures);
	CK(got > 0 && (uint64_t)got <= file_pages);
	if (rlimit)
		CK((uint64_t)got == file_pages);   /* offsets below the limit */
	CK(st.bd_count == (uint64_t)got);
	CK(st.writeback_failures >= 1);
	CK(st.pages_stored == N);
	for (uint64_t i = 0; i < N; i++) {
		CK(zm_store_get(s, i, out) == 0);
		CK(!memcmp(out, rnd + i * PS, PS));
	}
	for (uint64_t i = 0; i < N; i++) {
		unsigned kind;

		CK(zm_store_slot_info(s, i, &kind, NULL, NULL) == 0);
		if (kind != ZM_STORE_SLOT_FILE) {
			CK(kind == ZM_STORE_SLOT_HUGE);
			rc = zm_store_writeback_page(s, i);
			CK(rc < 0 && kind_of_ck(s, i) == ZM_STORE_SLOT_HUGE);
			CK_SOFT(rc == -ENOSPC, rc);   /* the header's word for a full file */
			break;
		}
	}
	CK(zm_store_check(s) == 0);
	/* a discard makes room on a full file system again (the punched
	 * hole frees its blocks) */
	if (!rlimit) {
		CK(zm_store_discard(s, 0, 16) == 0);
		got = zm_store_writeback(s, 0, 8);
		printf("child: after discarding 16 pages, %ld more written\n", got);
		CK(got > 0);
		for (uint64_t i = 16; i < N; i++) {
			CK(zm_store_get(s, i, out) == 0);
			CK(!memcmp(out, rnd + i * PS, PS));
		}
		CK(zm_store_check(s) == 0);
	}
	zm_store_destroy(s);
	unlink(path);

	/* written back by the limit */
	snprintf(path, sizeof(path), "%s/by-limit", dir);
	c.limit_bytes = LIMIT_PAGES * PS;
	if (rlimit) {   /* the store sizes its (sparse) file at create */
		rl.rlim_cur = rl.rlim_max;
		CK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	}
	CK(zm_store_create(&c, &s) == 0);
	if (rlimit) {
		rl.rlim_cur = file_pages * PS;
		CK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	}
	for (n = 0; n < N; n++)
		if ((rc = zm_store_put(s, n, rnd + n * PS)))
			break;
	st = stats(s);
	printf("child: with a limit of %d pages, %zu puts fit (then %d), bd_count %llu\n",
	       LIMIT_PAGES, n, rc, (unsigned long long)st.bd_count);
	CK(n < N);
	CK_SOFT(rc == -ENOSPC, rc);
	CK(st.bd_count > 0 && st.bd_count <= file_pages);
	CK(n >= st.bd_count + LIMIT_PAGES / 2);     /* memory full too */
	CK(st.compr_data_size >= LIMIT_PAGES / 2 * PS);
	for (size_t i = 0; i < N; i++) {
		CK(zm_store_get(s, i, out) == 0);
		if (i < n)
			CK(!memcmp(out, rnd + i * PS, PS));
		else
			CK(!memcmp(out, (uint8_t[PS]){ 0 }, PS));
	}
	/* an overwrite that finds no room keeps the old page */
	rc = zm_store_put(s, n - 1, rnd);
	CK(rc == -ENOSPC || rc == 0);
	CK(zm_store_get(s, n - 1, out) == 0);
	CK(!memcmp(out, rc ? rnd + (n - 1) * PS : rnd, PS));
	CK(zm_store_check(s) == 0);
	zm_store_destroy(s);
	unlink(path);
	free(rnd);
	return g_child_bad;
}

static int child_rlimit(const char *dir)
{
	signal(SIGXFSZ, SIG_IGN);
	return check_full_file(dir, 256, true);
}

static void test_file_full_rlimit(void **state)
{
	char dir[256];

	snprintf(dir, sizeof(dir), "%s/zmem-tier-XXXXXX", tmp_dir());
	assert_non_null(mkdtemp(dir));
	child_verdict(dir, in_child(child_rlimit, dir));
}

static int child_tmpfs(const char *dir)
{
	if (geteuid() != 0) {
		printf("tmpfs: not root, cannot mount a small tmpfs: skipped\n");
		return SKIP_EXIT;
	}
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=256k")) {
		printf("tmpfs: cannot mount (%s): skipped\n", strerror(errno));
		return SKIP_EXIT;
	}
	return check_full_file(dir, 64, false);
}

/* ---- the page cache ----------------------------------------------------- */

/* Bytes of the file at path in the page cache (mincore over a mapping). */
static uint64_t cached_bytes(const char *path)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t n = 0;
	unsigned char *vec;
	struct stat sb;
	size_t pages;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	if (!sb.st_size) {
		close(fd);
		return 0;
	}
	pages = ((size_t)sb.st_size + (size_t)pg - 1) / (size_t)pg;
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	vec = malloc(pages);
	assert_non_null(vec);
	assert_int_equal(mincore(map, (size_t)sb.st_size, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(map, (size_t)sb.st_size);
	close(fd);
	return n * (uint64_t)pg;
}

/* What the page cache may keep of a writeback of `written` bytes: 5% of
 * them and a block (the packed layout's block being filled). */
static uint64_t cache_bound(uint64_t written)
{
	return written / 20 + 4096;
}

/* Pages written back leave the page cache: by zm_store_writeback, by the
 * reclaim of puts at the limit, and those read back (the blocks a get
 * pulled in are dropped again), each way with packed 4 KiB pages and with
 * 16 KiB pages at their index, with the file opened O_DIRECT (nothing
 * ever cached; every write of a packed run starting inside a block takes
 * that block's head from the copy of the last block written, none reads
 * it back) and, under the seam that makes O_DIRECT fail, flushed and
 * dropped.  Through the page cache, every block written stayed there. */
static void check_cache_left(size_t ps, bool direct)
{
	enum { N = 2048 };
	char path[256];
	struct zm_store_config c = { .backing_path = path, .page_size = ps };
	uint8_t *text = make_pages(N, ps, PK_TEXT, 910);
	int want = direct ? ZM_STORE_CACHE_DIRECT : ZM_STORE_CACHE_DROP;
	uint64_t bound, head_reads = zmi_store_backing_head_reads;
	struct zm_store_stats st;
	struct zm_store *s;
	uint64_t cached;
	bool works;

	tmp_file(path, sizeof(path), st_direct_probe(&works));
	zmi_store_backing_direct_fail = !direct;
	s = test_store_mk(&c, N);
	zmi_store_backing_direct_fail = 0;
	st = stats(s);
	/* where the file system takes O_DIRECT, the store opens it so */
	if (works)
		assert_int_equal(st.backing_cache_mode, want);
	if (st.backing_cache_mode != (uint64_t)want) {
		printf("note: %s keeps the file's pages (tmpfs?) or refuses O_DIRECT: mode %llu, "
		       "not checked\n", st_direct_dir(), (unsigned long long)st.backing_cache_mode);
		zm_store_destroy(s);
		free(text);
		return;
	}
	/* zm_store_writeback */
	for (int i = 0; i < N / 2; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * ps), 0);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N / 2);
	st = stats(s);
	cached = cached_bytes(path);
	bound = direct ? 0 : cache_bound(st.bd_bytes);
	printf("ps %zu %s: %llu bytes written back, %llu in the page cache\n", ps,
	       direct ? "direct" : "drop", (unsigned long long)st.bd_bytes,
	       (unsigned long long)cached);
	assert_true(cached <= bound);
	/* reclaim at the limit: a quarter of the pages in the pool */
	assert_int_equal(zm_store_set_limit(s, st.compr_data_size + N / 8 * ps / 3), 0);
	for (int i = N / 2; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * ps), 0);
	zmi_store_writer_quiesce(s); /* its last chunk dropped too */
	st = stats(s);
	cached = cached_bytes(path);
	bound = direct ? 0 : cache_bound(st.bd_bytes);
	printf("ps %zu: after reclaim %llu bytes on file, %llu in the page cache\n", ps,
	       (unsigned long long)st.bd_bytes, (unsigned long long)cached);
	assert_true(st.bd_count > N / 2);
	assert_true(cached <= bound);
	/* reads */
	assert_int_equal(zm_store_set_limit(s, 0), 0);
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * ps);
	cached = cached_bytes(path);
	printf("ps %zu: after reading every page, %llu in the page cache\n", ps,
	       (unsigned long long)cached);
	assert_true(cached <= bound);
	assert_int_equal(zmi_store_backing_head_reads, head_reads);
	CHECK(s);
	zm_store_destroy(s);
	free(text);
}

static void test_cache_direct_4k(void **state)
{
	check_cache_left(4096, true);
}

static void test_cache_direct_16k(void **state)
{
	check_cache_left(16384, true);
}

static void test_cache_dropped_4k(void **state)
{
	check_cache_left(4096, false);
}

static void test_cache_dropped_16k(void **state)
{
	check_cache_left(16384, false);
}

/* The seams make O_DIRECT fail at open (the store falls back to flushing
 * and dropping), or every way of leaving the page cache (the store uses
 * the file through it); the store says which, and every page reads back
 * equal (the tier model runs each way too: "buffered", "kept"). */
static void check_cache_fallback(int *seam, int want)
{
	enum { N = 512 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 920);
	struct zm_store *s;

	tmp_file(path, sizeof(path), st_direct_dir());
	*seam = 1;
	s = test_store_mk(&c, N);
	*seam = 0;
	if (want == ZM_STORE_CACHE_DROP && stats(s).backing_cache_mode == ZM_STORE_CACHE_NONE)
		printf("note: %s keeps the file's pages (tmpfs?)\n", st_direct_dir());
	else
		assert_int_equal(stats(s).backing_cache_mode, want);
	put_pages(s, text, N);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	printf("mode %llu: %llu bytes written back, %llu in the page cache\n",
	       (unsigned long long)stats(s).backing_cache_mode,
	       (unsigned long long)stats(s).bd_bytes, (unsigned long long)cached_bytes(path));
	expect_pages(s, text, N);
	CHECK(s);
	zm_store_destroy(s);
	free(text);
}

static void test_cache_fallback(void **state)
{
	check_cache_fallback(&zmi_store_backing_cache_fail, ZM_STORE_CACHE_NONE);
}

static void test_direct_fallback(void **state)
{
	check_cache_fallback(&zmi_store_backing_direct_fail, ZM_STORE_CACHE_DROP);
}

static void test_file_full_tmpfs(void **state)
{
	char dir[256];

	snprintf(dir, sizeof(dir), "%s/zmem-tier-XXXXXX", tmp_dir());
	assert_non_null(mkdtemp(dir));
	child_verdict(dir, in_child(child_tmpfs, dir));
}


int main(void)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_file_full_rlimit, teardown),
		cmocka_unit_test_teardown(test_file_full_tmpfs, teardown),
		cmocka_unit_test_teardown(test_cache_direct_4k, teardown),
		cmocka_unit_test_teardown(test_cache_direct_16k, teardown),
		cmocka_unit_test_teardown(test_cache_dropped_4k, teardown),
		cmocka_unit_test_teardown(test_cache_dropped_16k, teardown),
		cmocka_unit_test_teardown(test_cache_fallback, teardown),
		cmocka_unit_test_teardown(test_direct_fallback, teardown),
	};

	return test_run_selected("store_backing", tests);
}
