/*
 * Helpers for the region tests: making a region (or skipping where there
 * is no userfaultfd), the SIGBUS handler across cmocka's tests, and what
 * a region costs as the kernel sees it (mincore, smaps Rss, threads).
 */
#ifndef ZM_REGIONTEST_H
#define ZM_REGIONTEST_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>

#include "testutil.h"
#include <zmem/region.h>

/*
 * cmocka sets a handler of its own for SIGBUS (and SIGSEGV) around each
 * test and puts the previous one back after it, without chaining to it.
 * The library installs its handler again at every create when it is not
 * the one in place (chaining to the one it replaces), so each test's
 * regions work with no help from here.
 */

/* Whether regions cannot work here: under qemu-user (make check-arm64
 * sets ZM_TEST_EMULATED), whose emulated process has no userfaultfd of
 * its own worth testing. */
static inline int rt_emulated(void)
{
	return getenv("ZM_TEST_EMULATED") != NULL;
}

/* Create a region from c, or skip the test where this machine has no
 * userfaultfd for us (-ENOSYS, -EPERM: the library said why on its log
 * sink).  Fails the test on any other error. */
static inline struct zm_region *rt_mk(const struct zm_region_config *c)
{
	struct zm_region *r = NULL;
	int rc;

	if (rt_emulated()) {
		printf("regions under emulation: skipped\n");
		skip();
	}
	rc = zm_region_create(c, &r);
	if (rc == -ENOSYS || rc == -EPERM) {
		printf("no userfaultfd here (%s): skipped\n", strerror(-rc));
		skip();
	}
	assert_int_equal(rc, 0);
	assert_non_null(r);
	return r;
}

/* A region of pages system pages, with a resident limit of limit pages
 * (0: none) and the given flags. */
static inline struct zm_region *rt_mk_pages(size_t pages, size_t limit, unsigned flags)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	struct zm_region_config c = { .size = pages * ps, .resident_limit = limit * ps,
				      .flags = flags };

	return rt_mk(&c);
}

static inline struct zm_region_stats rt_stats(struct zm_region *r)
{
	struct zm_region_stats st;

	memset(&st, 0xEE, sizeof(st));
	assert_int_equal(zm_region_stats(r, &st), 0);
	return st;
}

/* System pages of [addr, addr + len) that are mapped (mincore): a page
 * mapped as zeros counts, as it does in the region's resident_bytes. */
static inline size_t rt_mincore_pages(const void *addr, size_t len)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = len / ps, k = 0;
	unsigned char *vec = malloc(n ? n : 1);

	assert_non_null(vec);
	assert_int_equal(mincore((void *)addr, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		k += vec[i] & 1;
	free(vec);
	return k;
}

static inline int rt_mincore_page(const void *addr)
{
	unsigned char v = 0;
	uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);

	assert_int_equal(mincore((void *)((uintptr_t)addr & ~(ps - 1)), ps, &v), 0);
	return v & 1;
}

/* Bytes of memory the process's mappings inside [addr, addr + len) hold
 * (the sum of their smaps Rss): the shared zero page is not counted. */
static inline size_t rt_smaps_rss(const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	size_t kb = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b, v;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
			in = a < hi && b > lo;
			continue;
		}
		if (in && sscanf(line, "Rss: %lu kB", &v) == 1)
			kb += v;
	}
	fclose(f);
	return kb << 10;
}

/* Threads of this process now. */
static inline int rt_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static inline uint64_t rt_hist_sum(const struct zm_region_stats *st)
{
	uint64_t n = 0;

	for (int i = 0; i < ZM_REGION_HIST_BUCKETS; i++)
		n += st->fault_hist[i];
	return n;
}

static inline void rt_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Bytes of page i of a test's data: compressible (text-like words) for
 * most seeds, with a random word now and then so no two pages are the
 * same. */
static inline void rt_fill(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = i % 8 ? 0x2065687420666f20ull + (seed & 0xFF) * 0x0101 + (i % 5) :
			       mix64(seed * 1000003 + i);
}

#endif
