/* The fixture of the store's tiering tests (test_store_tier*.c,
 * test_store_recompress.c, test_store_writeback*.c, test_store_backing.c,
 * test_store_fork.c): pages of known kinds, checks of what a store holds,
 * backing files removed after each test, the backing file's fault seam,
 * and checks in a forked child.  Whatever tiering does, every page must
 * read back as its last successful put (or zeros), and zm_store_check()
 * must pass after every phase. */
#ifndef ZM_TIERTEST_H
#define ZM_TIERTEST_H

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

static inline void fill_page(uint8_t *p, size_t ps, enum page_kind kind, uint64_t seed)
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
static inline uint8_t *make_pages(size_t n, size_t ps, enum page_kind kind, uint64_t seed)
{
	uint8_t *b = malloc(n * ps);

	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		fill_page(b + i * ps, ps, kind, seed + i);
	return b;
}

/* ---- store helpers ------------------------------------------------------ */

static inline void expect_page(struct zm_store *s, uint64_t idx, const void *want)
{
	size_t ps = zm_store_page_size(s);
	uint8_t *out = malloc(ps);

	assert_non_null(out);
	assert_int_equal(zm_store_get(s, idx, out), 0);
	assert_memory_equal(out, want, ps);
	free(out);
}

/* Put pages 0..n-1 of text (PS bytes each), each must succeed. */
static inline void put_pages(struct zm_store *s, const uint8_t *text, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(zm_store_put(s, (uint64_t)i, text + (size_t)i * PS), 0);
}

/* Pages 0..n-1 read back as text's. */
static inline void expect_pages(struct zm_store *s, const uint8_t *text, int n)
{
	for (int i = 0; i < n; i++)
		expect_page(s, (uint64_t)i, text + (size_t)i * PS);
}

static inline void expect_zero(struct zm_store *s, uint64_t idx)
{
	size_t ps = zm_store_page_size(s);
	uint8_t *zero = calloc(1, ps);

	expect_page(s, idx, zero);
	free(zero);
}

static inline size_t len_of(struct zm_store *s, uint64_t idx)
{
	size_t len = 0;

	assert_int_equal(zm_store_slot_info(s, idx, NULL, NULL, &len), 0);
	return len;
}

static inline uint64_t count_kind(struct zm_store *s, unsigned kind)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < zm_store_nr_pages(s); i++)
		n += kind_of(s, i) == kind;
	return n;
}

#define CHECK(s) assert_int_equal(zm_store_check(s), 0)

/* ---- backing files ------------------------------------------------------ */

static inline const char *tmp_dir(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/tmp";
}

/* The files a test made, removed after it whether it passed or not. */
#define MAX_TMP 8
static char g_tmp[MAX_TMP][256];
static int g_ntmp;

/* A fresh file name in dir (the file exists, empty). */
static inline void tmp_file(char *path, size_t size, const char *dir)
{
	int fd;

	snprintf(path, size, "%s/zmem-tier-XXXXXX", dir ? dir : tmp_dir());
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	if (g_ntmp < MAX_TMP)
		snprintf(g_tmp[g_ntmp++], sizeof(g_tmp[0]), "%s", path);
}

static inline void tmp_clean(void)
{
	while (g_ntmp > 0)
		unlink(g_tmp[--g_ntmp]);
}

static inline long long file_blocks(const char *path)
{
	struct stat sb;

	assert_int_equal(stat(path, &sb), 0);
	return (long long)sb.st_blocks;
}

/* Does the file system of dir free space on a punched hole?  The
 * st_blocks checks need it; say so when they cannot run. */
static inline bool punch_works(const char *dir)
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
static inline long long packed_slack(size_t ps)
{
	return ps == 4096 ? 4096 / 512 : 0;
}

/* ---- the backing file's fault seam -------------------------------------- */

#define FAULT_ANY UINT64_MAX

static int g_fault_op;          /* 'r', 'w', 'p', or 0 for any */
static uint64_t g_fault_index;  /* FAULT_ANY for any */
static int g_fault_err;         /* what a matching I/O returns */
static long g_fault_calls[3];   /* I/Os seen: read, write, punch (atomic) */

static inline int fault_fn(int op, uint64_t index)
{
	int k = op == 'r' ? 0 : op == 'w' ? 1 : op == 'p' ? 2 : -1;

	assert_true(k >= 0);   /* only the three documented operations */
	__atomic_fetch_add(&g_fault_calls[k], 1, __ATOMIC_RELAXED);
	if ((!g_fault_op || op == g_fault_op) &&
	    (g_fault_index == FAULT_ANY || index == g_fault_index))
		return g_fault_err;
	return 0;
}

static inline void fault_set(int op, uint64_t index, int err)
{
	g_fault_op = op;
	g_fault_index = index;
	g_fault_err = err;
	memset(g_fault_calls, 0, sizeof(g_fault_calls));
	zmi_store_backing_fault = fault_fn;
}

static inline void fault_clear(void)
{
	zmi_store_backing_fault = NULL;
	zmi_store_backing_cache_fail = 0;
	zmi_store_backing_direct_fail = 0;
	g_fault_err = 0;
}

/* After every test: a failed one must not leave its faults or files
 * behind. */
static inline int teardown(void **state)
{
	fault_clear();
	tmp_clean();
	return 0;
}

/* ---- checks in a forked child ------------------------------------------ */

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
static int g_child_bad __attribute__((unused));
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
static inline int in_child(int (*fn)(const char *), const char *arg)
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
static inline void child_verdict(const char *dir, int status)
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

static inline unsigned kind_of_ck(struct zm_store *s, uint64_t idx)
{
	unsigned kind = 99;

	return zm_store_slot_info(s, idx, &kind, NULL, NULL) ? 99 : kind;
}

#endif
