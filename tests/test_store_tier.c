/*
 * Tests of the store's cold-data tiering: idle tracking, recompression
 * with a secondary codec, writeback to a backing file (by hand and
 * automatic, under the memory limit), the writeback limit, I/O faults
 * injected through the backing file's test seam, a file that cannot grow,
 * and automatic recompression on the background worker.  Whatever tiering
 * does, every page must read back as its last successful put (or zeros),
 * and zm_store_check() must pass after every phase.
 *
 * The model test at the end drives random puts, gets, discards, marks,
 * recompressions, writebacks and limit changes against a reference copy
 * of every page, with and without a backing file and a limit, for 4 KiB
 * and 16 KiB pages.
 *
 *   test_store_tier [--seed N] [--steps N]     (or ZM_TEST_SEED=N)
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store/store_internal.h"  /* first: the advanced tier of the headers */
#include "storetest.h"
#include "testutil.h"
#include "workload/workload.h"

#define PS 4096
#define ALL UINT64_MAX
#define SKIP_EXIT 77   /* a forked child's "cannot run here" */

static uint64_t g_seed;
static long g_steps = 3000;

/* ---- pages -------------------------------------------------------------- */

enum page_kind {
	PK_TEXT,     /* compresses to about half with lz4, better with zstd */
	PK_RANDOM,   /* incompressible: huge, and zstd cannot shrink it */
	PK_SYM32,    /* bytes of 32 values: huge for lz4 (no matches, no
			entropy coding), about 64% with zstd */
	PK_SAME,     /* same-filled: kept in the slot */
	PK_ZERO,
	PK_HALF,     /* half text, half zeros */
	PK_NR
};

static void fill_page(uint8_t *p, size_t ps, enum page_kind kind, uint64_t seed)
{
	switch (kind) {
	case PK_TEXT:
	case PK_HALF:
		assert_int_equal(workload_fill(WORKLOAD_TEXT, 0.5, NULL, seed, p, ps, ps,
					       NULL), 0);
		if (kind == PK_HALF)
			memset(p + ps / 2, 0, ps / 2);
		break;
	case PK_RANDOM:
		for (size_t i = 0; i < ps / 8; i++) {
			uint64_t w = mix64(seed * 0x10001 + i);

			memcpy(p + i * 8, &w, 8);
		}
		break;
	case PK_SYM32:
		for (size_t i = 0; i < ps; i++)
			p[i] = (uint8_t)(mix64(seed * 0x10001 + i) % 32);
		break;
	case PK_SAME:
		for (size_t i = 0; i < ps / 8; i++) {
			uint64_t w = mix64(seed) | 1;

			memcpy(p + i * 8, &w, 8);
		}
		break;
	default:
		memset(p, 0, ps);
	}
}

/* n pages of one kind, seeds seed, seed + 1, ... */
static uint8_t *make_pages(size_t n, size_t ps, enum page_kind kind, uint64_t seed)
{
	uint8_t *b = malloc(n * ps);

	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		fill_page(b + i * ps, ps, kind, seed + i);
	return b;
}

/* ---- store helpers ------------------------------------------------------ */

static void expect_page(struct zm_store *s, uint64_t idx, const void *want)
{
	size_t ps = zm_store_page_size(s);
	uint8_t *out = malloc(ps);

	assert_non_null(out);
	assert_int_equal(zm_store_get(s, idx, out), 0);
	assert_memory_equal(out, want, ps);
	free(out);
}

static void expect_zero(struct zm_store *s, uint64_t idx)
{
	size_t ps = zm_store_page_size(s);
	uint8_t *zero = calloc(1, ps);

	expect_page(s, idx, zero);
	free(zero);
}

static size_t len_of(struct zm_store *s, uint64_t idx)
{
	size_t len = 0;

	assert_int_equal(zm_store_slot_info(s, idx, NULL, NULL, &len), 0);
	return len;
}

static uint64_t count_kind(struct zm_store *s, unsigned kind)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < zm_store_nr_pages(s); i++)
		n += kind_of(s, i) == kind;
	return n;
}

#define CHECK(s) assert_int_equal(zm_store_check(s), 0)

/* ---- backing files ------------------------------------------------------ */

static const char *tmp_dir(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/tmp";
}

/* The files a test made, removed after it whether it passed or not. */
#define MAX_TMP 8
static char g_tmp[MAX_TMP][256];
static int g_ntmp;

/* A fresh file name in dir (the file exists, empty). */
static void tmp_file(char *path, size_t size, const char *dir)
{
	int fd;

	snprintf(path, size, "%s/zmem-tier-XXXXXX", dir ? dir : tmp_dir());
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	if (g_ntmp < MAX_TMP)
		snprintf(g_tmp[g_ntmp++], sizeof(g_tmp[0]), "%s", path);
}

static void tmp_clean(void)
{
	while (g_ntmp > 0)
		unlink(g_tmp[--g_ntmp]);
}

static long long file_blocks(const char *path)
{
	struct stat sb;

	assert_int_equal(stat(path, &sb), 0);
	return (long long)sb.st_blocks;
}

/* Does the file system of dir free space on a punched hole?  The
 * st_blocks checks need it; say so when they cannot run. */
static bool punch_works(const char *dir)
{
	char path[256];
	static uint8_t buf[65536];
	struct stat a, b;
	bool ok;
	int fd;

	tmp_file(path, sizeof(path), dir);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	fsync(fd);
	fstat(fd, &a);
	ok = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, sizeof(buf)) == 0;
	fstat(fd, &b);
	ok = ok && b.st_blocks < a.st_blocks;
	close(fd);
	unlink(path);
	if (!ok)
		printf("note: %s does not free punched holes; st_blocks checks not run\n", dir);
	return ok;
}

/* What an emptied file may still hold, in st_blocks (512-byte units):
 * nothing, but for 4 KiB pages, which are packed into the file system's
 * blocks, the block being filled. */
static long long packed_slack(size_t ps)
{
	return ps == 4096 ? 4096 / 512 : 0;
}

/* ---- the backing file's fault seam -------------------------------------- */

#define FAULT_ANY UINT64_MAX

static int g_fault_op;          /* 'r', 'w', 'p', or 0 for any */
static uint64_t g_fault_index;  /* FAULT_ANY for any */
static int g_fault_err;         /* what a matching I/O returns */
static long g_fault_calls[3];   /* I/Os seen: read, write, punch (atomic) */

static int fault_fn(int op, uint64_t index)
{
	int k = op == 'r' ? 0 : op == 'w' ? 1 : op == 'p' ? 2 : -1;

	assert_true(k >= 0);   /* only the three documented operations */
	__atomic_fetch_add(&g_fault_calls[k], 1, __ATOMIC_RELAXED);
	if ((!g_fault_op || op == g_fault_op) &&
	    (g_fault_index == FAULT_ANY || index == g_fault_index))
		return g_fault_err;
	return 0;
}

static void fault_set(int op, uint64_t index, int err)
{
	g_fault_op = op;
	g_fault_index = index;
	g_fault_err = err;
	memset(g_fault_calls, 0, sizeof(g_fault_calls));
	zmi_backing_fault = fault_fn;
}

static void fault_clear(void)
{
	zmi_backing_fault = NULL;
	zmi_backing_cache_fail = 0;
	zmi_backing_direct_fail = 0;
	g_fault_err = 0;
}

/* After every test: a failed one must not leave its faults or files
 * behind. */
static int teardown(void **state)
{
	fault_clear();
	tmp_clean();
	return 0;
}

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
	for (int i = 0; i < 4; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < 4; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	for (int i = 0; i < 4; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	assert_int_equal(zm_store_writeback(s, 0, ALL), 4);
	assert_int_equal(kind_of(s, 2), ZM_STORE_SLOT_FILE);
	assert_true(file_blocks(path) > 0);
	for (int i = 0; i < 4; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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

		for (int i = 0; i < 4; i++)
			assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
		rc = zm_store_writeback(s, 0, ALL);
		assert_true(rc < 0);
		for (int i = 0; i < 4; i++)
			expect_page(s, (uint64_t)i, text + i * PS);
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

	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	st0 = stats(s);
	assert_int_equal(zm_store_recompress(s, 0, ALL), 0);
	st = stats(s);
	assert_int_equal(st.recompress_tried, N);
	assert_int_equal(st.recompressed_pages + st.secondary_pages + st.recompress_saved, 0);
	assert_int_equal(st.compr_data_size, st0.compr_data_size);
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	/* pack the pool: compacted, every page idle */
	zm_store_compact(s);
	zm_store_mark_idle(s, 0);
	writes = stats(s).bd_writes;
	in_pool = stats(s).pool_objects;
	got = zm_store_recompress(s, ZM_STORE_PICK_IDLE, ALL);
	printf("recompress(PICK_IDLE) of a full pool of %llu pages: %ld re-encoded, %llu "
	       "written back\n", (unsigned long long)in_pool, got,
	       (unsigned long long)(stats(s).bd_writes - writes));
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
	CHECK(s);
	assert_true(got > 0 && (uint64_t)got >= in_pool / 2);
	assert_true(stats(s).mem_used_total <= LIMIT_PAGES * PS);
	zm_store_destroy(s);
	free(text);
}

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
	for (int i = 0; i < NT; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < NT; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
		for (int i = 0; i < N; i++)
			assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
	CHECK(s);
	/* the file works again: everything goes */
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	fault_set('w', 7, -EIO);
	got = zm_store_writeback(s, 0, ALL);
	st = stats(s);
	printf("a bad page at 7 of %d: writeback wrote %ld, %llu failures\n", N, got,
	       (unsigned long long)st.writeback_failures);
	assert_int_equal(kind_of(s, 7), ZM_STORE_SLOT_POOL);
	assert_int_equal(st.writeback_failures, 1);
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	calls = __atomic_load_n(&zmi_backing_pwrites, __ATOMIC_RELAXED);
	got = zm_store_writeback(s, 0, ALL);
	calls = __atomic_load_n(&zmi_backing_pwrites, __ATOMIC_RELAXED) - calls;
	printf("writeback of %d pages: %ld written with %llu write calls\n", N, got,
	       (unsigned long long)calls);
	assert_int_equal(got, N);
	assert_true(calls * 8 <= N);
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
	CHECK(s);
	/* all back in memory, one bad page among them */
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	fault_set('w', 100, -EIO);
	got = zm_store_writeback(s, 0, ALL);
	st = stats(s);
	assert_int_equal(got, N - 1);
	assert_int_equal(st.writeback_failures, 1);
	assert_int_equal(kind_of(s, 100), ZM_STORE_SLOT_POOL);
	fault_clear();
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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
	zmi_backing_fault = stall_fn;
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
	zmi_writer_quiesce(s);
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
	zmi_backing_fault = stall_fn;
	zm_store_set_limit(s, (stats(s).compr_data_size / 2) | 1);
	zmi_writer_kick(s);
	usleep(20 * 1000);
	__atomic_store_n(&g_stall, 0, __ATOMIC_RELEASE);
	zm_store_destroy(s);
	fault_clear();
	unlink(path);
	free(rnd);
}

/* A punch that fails leaks file space, never data. */
static void test_fault_punch(void **state)
{
	enum { N = 16 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(2 * N, PS, PK_TEXT, 2100);
	struct zm_store *s;

	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
	assert_int_equal(stats(s).bd_count, N);
	CHECK(s);
	zm_store_destroy(s);
	unlink(path);
	free(text);
}

/* ---- a file that cannot grow -------------------------------------------- */

/* Checks in a forked child, which has no cmocka to report to: print what
 * failed and return its line as the child's exit status. */
#define CK(cond)                                                              \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, \
				#cond);                                       \
			return __LINE__ % 250 + 1;                            \
		}                                                             \
	} while (0)

/* A check that reports and goes on: the child's status is the line of the
 * first that failed (for what the header promises beyond "no loss"). */
static int g_child_bad;
#define CK_SOFT(cond, rc)                                                     \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "child: %s:%d: %s (got %ld)\n", __FILE__, \
				__LINE__, #cond, (long)(rc));                 \
			if (!g_child_bad)                                     \
				g_child_bad = __LINE__ % 250 + 1;             \
		}                                                             \
	} while (0)

/* Run fn(arg) in a child; its exit status, or -1 if it did not exit. */
static int in_child(int (*fn)(const char *), const char *arg)
{
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int rc = fn(arg);

		fflush(stdout);
		fflush(stderr);
		_exit(rc);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* The child's files and its directory go; then its verdict: pass, skip
 * (it printed why) or fail. */
static void child_verdict(const char *dir, int status)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/by-hand", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/by-limit", dir);
	unlink(path);
	rmdir(dir);
	if (status == SKIP_EXIT)
		skip();
	assert_int_equal(status, 0);
}

static unsigned kind_of_ck(struct zm_store *s, uint64_t idx)
{
	unsigned kind = 99;

	return zm_store_slot_info(s, idx, &kind, NULL, NULL) ? 99 : kind;
}

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
	uint64_t bound, head_reads = zmi_backing_head_reads;
	struct zm_store_stats st;
	struct zm_store *s;
	uint64_t cached;
	bool works;

	tmp_file(path, sizeof(path), st_direct_probe(&works));
	zmi_backing_direct_fail = !direct;
	s = test_store_mk(&c, N);
	zmi_backing_direct_fail = 0;
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
	zmi_writer_quiesce(s);   /* its last chunk dropped too */
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
	assert_int_equal(zmi_backing_head_reads, head_reads);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	printf("mode %llu: %llu bytes written back, %llu in the page cache\n",
	       (unsigned long long)stats(s).backing_cache_mode,
	       (unsigned long long)stats(s).bd_bytes, (unsigned long long)cached_bytes(path));
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
	CHECK(s);
	zm_store_destroy(s);
	free(text);
}

static void test_cache_fallback(void **state)
{
	check_cache_fallback(&zmi_backing_cache_fail, ZM_STORE_CACHE_NONE);
}

static void test_direct_fallback(void **state)
{
	check_cache_fallback(&zmi_backing_direct_fail, ZM_STORE_CACHE_DROP);
}

static void test_file_full_tmpfs(void **state)
{
	char dir[256];

	snprintf(dir, sizeof(dir), "%s/zmem-tier-XXXXXX", tmp_dir());
	assert_non_null(mkdtemp(dir));
	child_verdict(dir, in_child(child_tmpfs, dir));
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
	uint64_t t0, done = 0;

	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	if (mark)
		assert_int_equal(zm_store_mark_idle(s, 0), N);
	t0 = now_ms();
	/* read the hot ones without a pause until the cold ones are done,
	 * and for a few idle periods after */
	for (;;) {
		uint64_t t = now_ms();

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
	assert_int_equal(st.secondary_pages, NCOLD);
	assert_int_equal(st.recompressed_pages, NCOLD);
	for (int i = 0; i < N; i++)
		expect_page(s, (uint64_t)i, text + i * PS);
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

	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
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
	for (int i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + i * PS), 0);
	usleep(3000);
	zm_store_destroy(s);
	free(text);
}

/* ---- the model ---------------------------------------------------------- */

struct model_cfg {
	const char *name;
	size_t ps;
	bool backing;
	size_t limit_pages;   /* 0: none */
	uint64_t wb_limit;
	bool cache_kept;      /* the file through the page cache (the seam) */
	bool buffered;        /* O_DIRECT refused (the seam): flush and drop */
};

static const struct model_cfg model_cfgs[] = {
	{ "4k", 4096, false, 0, 0, false, false },
	{ "4k limit", 4096, false, 64, 0, false, false },
	{ "4k file", 4096, true, 0, 0, false, false },
	{ "4k file limit", 4096, true, 64, 0, false, false },
	{ "4k file limit wbl", 4096, true, 64, 60, false, false },
	{ "4k file limit kept", 4096, true, 64, 0, true, false },
	{ "4k file buffered", 4096, true, 0, 0, false, true },
	{ "4k file limit buffered", 4096, true, 64, 0, false, true },
	{ "16k", 16384, false, 0, 0, false, false },
	{ "16k limit", 16384, false, 40, 0, false, false },
	{ "16k file", 16384, true, 0, 0, false, false },
	{ "16k file limit", 16384, true, 40, 0, false, false },
	{ "16k file limit wbl", 16384, true, 40, 60, false, false },
	{ "16k file limit kept", 16384, true, 40, 0, true, false },
	{ "16k file limit buffered", 16384, true, 40, 0, false, true },
};

#define MODEL_PAGES 160

struct model {
	struct zm_store *s;
	long soft;                 /* header promises broken (reported at the end) */
	size_t ps;
	uint8_t *data;             /* the last content of every page */
	bool written[MODEL_PAGES]; /* put since the last discard */
	bool maybe_idle[MODEL_PAGES]; /* marked, not accessed since */
	unsigned kinds[MODEL_PAGES];
	size_t lens[MODEL_PAGES];
};

/* A promise of the header broken: the run goes on, to find what else
 * breaks, and fails at its end; the first few of each kind are shown. */
#define MODEL_SOFT(m, cond, ...)                                              \
	do {                                                                  \
		static int shown_;                                            \
                                                                              \
		if (!(cond)) {                                                \
			(m)->soft++;                                          \
			if (shown_++ < 3) {                                   \
				printf("step %ld: %s: ", step, #cond);        \
				printf(__VA_ARGS__);                          \
				printf("\n");                                \
			}                                                     \
		}                                                             \
	} while (0)

static void model_snapshot(struct model *m)
{
	for (uint64_t i = 0; i < MODEL_PAGES; i++)
		assert_int_equal(zm_store_slot_info(m->s, i, &m->kinds[i], NULL, &m->lens[i]), 0);
}

/* Whole-store consistency: the checker, and the tiering counters against
 * a walk of the slots. */
static void model_check(struct model *m, const struct model_cfg *mc)
{
	struct zm_store_stats st = stats(m->s);
	uint64_t file = 0, pool = 0, huge = 0, used = 0, bytes = 0;

	CHECK(m->s);
	model_snapshot(m);
	for (uint64_t i = 0; i < MODEL_PAGES; i++) {
		file += m->kinds[i] == ZM_STORE_SLOT_FILE;
		pool += m->kinds[i] == ZM_STORE_SLOT_POOL;
		huge += m->kinds[i] == ZM_STORE_SLOT_HUGE;
		used += m->kinds[i] != ZM_STORE_SLOT_EMPTY;
		bytes += m->kinds[i] == ZM_STORE_SLOT_FILE ? m->lens[i] : 0;
		assert_true(m->kinds[i] != ZM_STORE_SLOT_EMPTY || !m->written[i]);
		assert_true(m->kinds[i] == ZM_STORE_SLOT_EMPTY || m->written[i]);
	}
	assert_int_equal(st.bd_count, file);
	assert_int_equal(st.bd_bytes, bytes);
	assert_int_equal(st.pool_objects, pool + huge);
	assert_int_equal(st.pages_stored, used);
	assert_true(st.secondary_pages <= pool + huge);
	assert_true(st.incompressible_pages <= huge);
	if (!mc->backing) {
		assert_int_equal(file, 0);
		assert_int_equal(st.writeback_left, 0);
	} else if (mc->wb_limit) {
		assert_int_equal(st.writeback_left, mc->wb_limit - st.bd_writes);
	} else {
		assert_int_equal(st.writeback_left, UINT64_MAX);
	}
	assert_true(st.bd_writes >= st.bd_count);
}

static void model_verify(struct model *m, uint64_t i)
{
	uint8_t *out = malloc(m->ps);

	assert_int_equal(zm_store_get(m->s, i, out), 0);
	if (memcmp(out, m->data + i * m->ps, m->ps))
		fail_msg("page %llu: not its last content (slot kind %u, %s)",
			 (unsigned long long)i, kind_of(m->s, i),
			 m->written[i] ? "written" : "never written or discarded");
	free(out);
	m->maybe_idle[i] = false;
}

/* A pick's pages: each slot a call moved (changed kind or length) must
 * have matched what it asked for. */
static void model_picked(struct model *m, long step, const char *what, unsigned which,
			 const unsigned *kinds, const size_t *lens)
{
	for (uint64_t i = 0; i < MODEL_PAGES; i++) {
		bool idle_ok, huge_ok;

		if (kinds[i] == m->kinds[i] && lens[i] == m->lens[i])
			continue;
		assert_true(kinds[i] == ZM_STORE_SLOT_POOL || kinds[i] == ZM_STORE_SLOT_HUGE);
		idle_ok = !(which & ZM_STORE_PICK_IDLE) || m->maybe_idle[i];
		huge_ok = !(which & (ZM_STORE_PICK_HUGE | ZM_STORE_PICK_INCOMPRESSIBLE)) ||
			  kinds[i] == ZM_STORE_SLOT_HUGE;
		MODEL_SOFT(m, idle_ok && huge_ok,
			   "%s(%#x) moved slot %llu (kind %u, %zu bytes -> kind %u, %zu bytes), "
			   "which it does not pick", what, which, (unsigned long long)i, kinds[i],
			   lens[i], m->kinds[i], m->lens[i]);
	}
}

static void model_run(const struct model_cfg *mc)
{
	enum { SRC = 24 };
	size_t ps = mc->ps, limit = mc->limit_pages * ps;
	struct zm_store_config c = { .page_size = ps, .recompress_codec = "zstd",
				     .limit_bytes = limit, .writeback_limit = mc->wb_limit };
	static const unsigned picks[] = {
		0, ZM_STORE_PICK_IDLE, ZM_STORE_PICK_HUGE, ZM_STORE_PICK_INCOMPRESSIBLE,
		ZM_STORE_PICK_IDLE | ZM_STORE_PICK_HUGE,
	};
	uint8_t *src[PK_NR], *page = malloc(ps);
	unsigned kinds[MODEL_PAGES];
	size_t lens[MODEL_PAGES];
	struct model m = { .ps = ps };
	long nospc = 0, moved = 0, recompressed = 0;
	char path[256] = "";
	struct rng r;

	rng_seed(&r, g_seed ^ mix64(ps + 31 * mc->limit_pages + mc->backing + mc->wb_limit));
	for (int k = 0; k < PK_NR; k++)
		src[k] = make_pages(SRC, ps, (enum page_kind)k, 5000 + 100 * (uint64_t)k);
	if (mc->backing) {
		tmp_file(path, sizeof(path), st_direct_dir());
		c.backing_path = path;
	}
	zmi_backing_cache_fail = mc->cache_kept;
	zmi_backing_direct_fail = mc->buffered;
	m.s = test_store_mk(&c, MODEL_PAGES);
	zmi_backing_cache_fail = 0;
	zmi_backing_direct_fail = 0;
	if (mc->cache_kept)
		assert_int_equal(stats(m.s).backing_cache_mode, ZM_STORE_CACHE_NONE);
	if (mc->backing && !mc->cache_kept) {
		bool works;

		st_direct_probe(&works);
		printf("backing_cache_mode %llu\n",
		       (unsigned long long)stats(m.s).backing_cache_mode);
		if (mc->buffered)
			assert_int_not_equal(stats(m.s).backing_cache_mode, ZM_STORE_CACHE_DIRECT);
		else if (works)
			assert_int_equal(stats(m.s).backing_cache_mode, ZM_STORE_CACHE_DIRECT);
	}
	m.data = calloc(MODEL_PAGES, ps);
	assert_non_null(m.data);
	for (long step = 0; step < g_steps; step++) {
		unsigned op = (unsigned)rng_below(&r, 100);
		uint64_t i = rng_below(&r, MODEL_PAGES);
		struct zm_store_stats st;
		long got;
		int rc;

		if (op < 34) {                          /* put */
			enum page_kind k = (enum page_kind)rng_below(&r, PK_NR);

			memcpy(page, src[k] + rng_below(&r, SRC) * ps, ps);
			if (k != PK_SAME && k != PK_ZERO && rng_below(&r, 2))
				memcpy(page + 8 * rng_below(&r, 4), &step, sizeof(step));
			st = stats(m.s);
			rc = zm_store_put(m.s, i, page);
			if (rc == 0) {
				memcpy(m.data + i * ps, page, ps);
				m.written[i] = true;
			} else {
				/* refused only by a limit with no file to spill
				 * to, or with its writes spent */
				assert_int_equal(rc, -ENOSPC);
				assert_true(limit);
				if (mc->backing) {
					struct zm_store_stats a = stats(m.s);

					MODEL_SOFT(&m, mc->wb_limit && a.writeback_left == 0,
						   "put %llu (kind %d) refused: limit %llu, compr %llu, "
						   "pool %llu, %llu objects, %llu on file",
						   (unsigned long long)i, (int)k,
						   (unsigned long long)a.mem_limit,
						   (unsigned long long)a.compr_data_size,
						   (unsigned long long)a.mem_used_total,
						   (unsigned long long)a.pool_objects,
						   (unsigned long long)a.bd_count);
				}
				nospc++;
			}
			/* a failed put leaves the slot as it was, mark and all */
			if (rc == 0)
				m.maybe_idle[i] = false;
			(void)st;
		} else if (op < 60) {                   /* get */
			model_verify(&m, i);
		} else if (op < 66) {                   /* discard */
			uint64_t n = 1 + rng_below(&r, 8);

			n = i + n > MODEL_PAGES ? MODEL_PAGES - i : n;
			assert_int_equal(zm_store_discard(m.s, i, n), 0);
			memset(m.data + i * ps, 0, n * ps);
			memset(m.written + i, 0, n);
			memset(m.maybe_idle + i, 0, n);
		} else if (op < 71) {                   /* mark */
			unsigned age = rng_below(&r, 4) ? 0 : 1;
			long want = 0;

			model_snapshot(&m);
			for (uint64_t k = 0; k < MODEL_PAGES; k++) {
				bool in_pool = m.kinds[k] == ZM_STORE_SLOT_POOL ||
					       m.kinds[k] == ZM_STORE_SLOT_HUGE;

				want += in_pool;
				if (in_pool)
					m.maybe_idle[k] = true;
			}
			got = zm_store_mark_idle(m.s, age);
			assert_true(got >= 0 && got <= want);
			if (!age)
				assert_int_equal(got, want);
			assert_int_equal(stats(m.s).idle_pages, got);
		} else if (op < 79) {                   /* recompress */
			unsigned which = picks[rng_below(&r, 5)];
			uint64_t max = rng_below(&r, 3) ? 1 + rng_below(&r, 32) : ALL;

			model_snapshot(&m);
			memcpy(kinds, m.kinds, sizeof(kinds));
			memcpy(lens, m.lens, sizeof(lens));
			got = zm_store_recompress(m.s, which, max);
			assert_true(got >= 0 && (uint64_t)got <= max);
			if (which == ZM_STORE_PICK_INCOMPRESSIBLE)
				assert_int_equal(got, 0);   /* never tried again */
			model_snapshot(&m);
			model_picked(&m, step, "recompress", which, kinds, lens);
			recompressed += got;
		} else if (op < 87) {                   /* writeback */
			unsigned which = picks[rng_below(&r, 5)];
			uint64_t max = rng_below(&r, 3) ? 1 + rng_below(&r, 16) : ALL;
			uint64_t left = stats(m.s).writeback_left;

			model_snapshot(&m);
			memcpy(kinds, m.kinds, sizeof(kinds));
			memcpy(lens, m.lens, sizeof(lens));
			got = zm_store_writeback(m.s, which, max);
			if (!mc->backing) {
				assert_int_equal(got, -EOPNOTSUPP);
				continue;
			}
			if (left == 0) {
				MODEL_SOFT(&m, got == -EDQUOT,
					   "writeback(%#x) with writeback_limit spent: %ld", which, got);
				continue;
			}
			assert_true(got >= 0 && (uint64_t)got <= max && (uint64_t)got <= left);
			model_snapshot(&m);
			model_picked(&m, step, "writeback", which, kinds, lens);
			for (uint64_t k = 0; k < MODEL_PAGES; k++)
				if (kinds[k] != m.kinds[k])
					assert_int_equal(m.kinds[k], ZM_STORE_SLOT_FILE);
			moved += got;
		} else if (op < 94) {                   /* writeback one page */
			unsigned kind = kind_of(m.s, i);
			uint64_t left = stats(m.s).writeback_left;
			bool in_pool = kind == ZM_STORE_SLOT_POOL || kind == ZM_STORE_SLOT_HUGE;

			rc = zm_store_writeback_page(m.s, i);
			if (!mc->backing)
				assert_int_equal(rc, -EOPNOTSUPP);
			else if (in_pool && left)
				assert_int_equal(rc, 0);
			else if (in_pool)
				assert_int_equal(rc, -EDQUOT);
			else if (!left)
				MODEL_SOFT(&m, rc == -EDQUOT,
					   "writeback_page of a kind %u slot with writeback_limit "
					   "spent: %d", kind, rc);
			else
				assert_int_equal(rc, -ENOENT);
			if (rc == 0) {
				assert_int_equal(kind_of(m.s, i), ZM_STORE_SLOT_FILE);
				moved++;
			}
		} else if (op < 97) {                   /* limit */
			if (limit) {
				size_t l = limit / 2 + rng_below(&r, limit / 2 + 1);

				assert_int_equal(zm_store_set_limit(m.s, l), 0);
				assert_int_equal(stats(m.s).mem_limit, l);
			}
		} else {
			assert_true(zm_store_compact(m.s) >= 0);
		}
		if (step % 64 == 0)
			model_check(&m, mc);
		if (step % 1000 == 999)
			for (uint64_t k = 0; k < MODEL_PAGES; k++)
				model_verify(&m, k);
	}
	model_check(&m, mc);
	for (uint64_t k = 0; k < MODEL_PAGES; k++)
		model_verify(&m, k);
	assert_int_equal(m.soft, 0);
	{
		struct zm_store_stats st = stats(m.s);

		printf("%-18s %ld steps: %ld refused, %ld recompressed, %ld written back "
		       "(%llu by hand or by the limit), %llu read back, %llu on file\n",
		       mc->name, g_steps, nospc, recompressed, moved,
		       (unsigned long long)st.bd_writes, (unsigned long long)st.bd_reads,
		       (unsigned long long)st.bd_count);
		if (mc->backing)
			assert_true(st.bd_writes >= (uint64_t)moved);
	}
	zm_store_destroy(m.s);
	if (*path)
		unlink(path);
	for (int k = 0; k < PK_NR; k++)
		free(src[k]);
	free(m.data);
	free(page);
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
	zmi_backing_fault = slow_write_fn;
	for (int k = 0; k < 6; k++) {
		uint64_t w0 = stats(s).bd_writes;

		/* bring pages back to memory, then make the writer write */
		for (uint64_t i = (uint64_t)k * 64; i < (uint64_t)k * 64 + 256; i++)
			assert_int_equal(zm_store_put(s, i, fk_page(i)), 0);
		zmi_writer_quiesce(s);
		zm_store_set_limit(s, (size_t)(stats(s).compr_data_size / 2));
		zmi_writer_kick(s);
		usleep((useconds_t)(500 + zmi_rand(&seed) % 3000));
		assert_int_equal(in_child(fk_child_busy, NULL), 0);
		zmi_writer_quiesce(s);
		assert_true(stats(s).bd_writes > w0);   /* it wrote, before or after */
		zm_store_set_limit(s, 1 << 20);
	}
	zmi_backing_fault = NULL;
	fk_verify(s);
	zm_store_destroy(s);
	unlink(path);
	free(g_fk_pages);
}

static void test_model(void **state)
{
	model_run(*state);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest unit[] = {
		cmocka_unit_test_teardown(test_create, teardown),
		cmocka_unit_test_teardown(test_idle, teardown),
		cmocka_unit_test_teardown(test_recompress, teardown),
		cmocka_unit_test_teardown(test_recompress_not_smaller, teardown),
		cmocka_unit_test_teardown(test_recompress_at_limit, teardown),
		cmocka_unit_test_teardown(test_recompress_full_pool, teardown),
		cmocka_unit_test_teardown(test_writeback, teardown),
		cmocka_unit_test_teardown(test_writeback_pick, teardown),
		cmocka_unit_test_teardown(test_writeback_limit, teardown),
		cmocka_unit_test_teardown(test_writeback_churn, teardown),
		cmocka_unit_test_teardown(test_readback, teardown),
		cmocka_unit_test_teardown(test_auto_writeback, teardown),
		cmocka_unit_test_teardown(test_auto_writeback_small_limit, teardown),
		cmocka_unit_test_teardown(test_auto_writeback_limit, teardown),
		cmocka_unit_test_teardown(test_fault_read, teardown),
		cmocka_unit_test_teardown(test_fault_write, teardown),
		cmocka_unit_test_teardown(test_fault_write_one, teardown),
		cmocka_unit_test_teardown(test_writeback_batched, teardown),
		cmocka_unit_test_teardown(test_fault_write_one_at_limit, teardown),
		cmocka_unit_test_teardown(test_fault_auto_writeback, teardown),
		cmocka_unit_test_teardown(test_fault_punch, teardown),
		cmocka_unit_test_teardown(test_writer_wait, teardown),
		cmocka_unit_test_teardown(test_file_full_rlimit, teardown),
		cmocka_unit_test_teardown(test_file_full_tmpfs, teardown),
		cmocka_unit_test_teardown(test_cache_direct_4k, teardown),
		cmocka_unit_test_teardown(test_cache_direct_16k, teardown),
		cmocka_unit_test_teardown(test_cache_dropped_4k, teardown),
		cmocka_unit_test_teardown(test_cache_dropped_16k, teardown),
		cmocka_unit_test_teardown(test_cache_fallback, teardown),
		cmocka_unit_test_teardown(test_direct_fallback, teardown),
		cmocka_unit_test_teardown(test_auto_recompress, teardown),
		cmocka_unit_test_teardown(test_auto_recompress_rate, teardown),
		cmocka_unit_test_teardown(test_fork_child, teardown),
		cmocka_unit_test_teardown(test_fork_writer_busy, teardown),
		cmocka_unit_test_teardown(test_pool_errors, pf_teardown),
	};
	enum { NU = sizeof(unit) / sizeof(unit[0]),
	       NM = sizeof(model_cfgs) / sizeof(model_cfgs[0]) };
	struct CMUnitTest tests[NU + NM];
	char names[NM][48];
	const char *env = getenv("ZM_TEST_SEED");

	test_args(argc, argv, &g_seed, &g_steps);
	if (env) {
		g_seed = strtoull(env, NULL, 0);
		printf("seed %llu from ZM_TEST_SEED\n", (unsigned long long)g_seed);
	}
	memcpy(tests, unit, sizeof(unit));
	for (size_t i = 0; i < NM; i++) {
		snprintf(names[i], sizeof(names[i]), "test_model %s", model_cfgs[i].name);
		tests[NU + i] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
			test_model, NULL, teardown, (void *)&model_cfgs[i]);
		tests[NU + i].name = names[i];
	}
	return _cmocka_run_group_tests("store_tier", tests, NU + NM, NULL, NULL);
}
