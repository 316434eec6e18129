/* Unit tests of the pages layer: every public call, bad input, the limit,
 * and memory really going back to the OS. */
#define ZMEM_ADVANCED  /* tests reach the advanced tier too */
#include <errno.h>
#include <pthread.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "testutil.h"
#include <zmem/pages.h>
#include "base/os.h"        /* zmi_os_decommit_many */
#include "pages/pages_internal.h" /* only to corrupt state for the checker test */

static struct zm_pages *mk(size_t page_size, size_t arena, size_t limit)
{
	struct zm_pages_config c = { .page_size = page_size, .arena_bytes = arena,
				     .limit_pages = limit };
	struct zm_pages *p = NULL;

	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_non_null(p);
	return p;
}

static void test_create_bad(void **st)
{
	struct zm_pages *p = (void *)1;
	struct zm_pages_config c = { 0 };
	const size_t bad_ps[] = { 1000, 2048, 4097, 131072, 12288 };

	for (size_t i = 0; i < sizeof(bad_ps) / sizeof(bad_ps[0]); i++) {
		c.page_size = bad_ps[i];
		assert_int_equal(zm_pages_create(&c, &p), -EINVAL);
		assert_null(p);
	}
	c.page_size = 4096;
	c.arena_bytes = 100; /* less than a page */
	assert_int_equal(zm_pages_create(&c, &p), -EINVAL);
	c.arena_bytes = 1 << 20;
	c.cache_pages = 100000;
	assert_int_equal(zm_pages_create(&c, &p), -EINVAL);
	assert_int_equal(zm_pages_create(NULL, NULL), -EINVAL);
	zm_pages_destroy(NULL);
}

static void test_page_sizes(void **st)
{
	for (size_t ps = 4096; ps <= 65536; ps <<= 1) {
		struct zm_pages *p = mk(ps, 64 * ps, 0);
		zm_pfn_t a, b;
		char *m;

		assert_int_equal(zm_pages_page_size(p), ps);
		assert_int_equal(zm_pages_alloc(p, &a), 0);
		assert_int_equal(zm_pages_alloc(p, &b), 0);
		assert_int_not_equal(a, b);
		m = zm_pages_addr(p, a);
		assert_int_equal((uintptr_t)m % ps, 0);
		memset(m, 0xab, ps);
		assert_int_equal(zm_pages_pfn(p, m), a);
		assert_int_equal(zm_pages_pfn(p, m + ps - 1), a);
		assert_int_equal(zm_pages_pfn(p, (char *)zm_pages_addr(p, b) + 1), b);
		assert_int_equal(zm_pages_pfn(p, &ps), UINT32_MAX);
		assert_non_null(zm_pages_meta(p, a));
		assert_null(zm_pages_meta(p, 64));
		assert_int_equal(zm_pages_check(p), 0);
		assert_int_equal(zm_pages_free(p, a), 0);
		assert_int_equal(zm_pages_free(p, b), 0);
		assert_int_equal(zm_pages_check(p), 0);
		zm_pages_destroy(p);
	}
}

static void test_meta(void **st)
{
	struct zm_pages *p = mk(4096, 1 << 20, 0);
	zm_pfn_t a, b;

	assert_int_equal(zm_pages_alloc(p, &a), 0);
	assert_int_equal(zm_pages_alloc(p, &b), 0);
	zm_pages_meta(p, a)->owner = p;
	zm_pages_meta(p, a)->priv[1] = 42;
	zm_pages_meta(p, b)->owner = NULL;
	assert_ptr_equal(zm_pages_meta(p, a)->owner, p);
	assert_int_equal(zm_pages_meta(p, a)->priv[1], 42);
	assert_ptr_equal(zm_pages_meta(p, a) + 1, zm_pages_meta(p, a + 1));
	zm_pages_free(p, a);
	zm_pages_free(p, b);
	zm_pages_destroy(p);
}

static void test_orders(void **st)
{
	struct zm_pages *p = mk(4096, 16 << 20, 0);
	zm_pfn_t runs[ZM_PAGES_MAX_ORDER + 1], x;

	for (unsigned k = 0; k <= ZM_PAGES_MAX_ORDER; k++) {
		assert_int_equal(zm_pages_alloc_order(p, k, &runs[k]), 0);
		assert_int_equal(runs[k] % (1u << k), 0);
		memset(zm_pages_addr(p, runs[k]), (int)k, 4096u << k);
		assert_int_equal(zm_pages_check(p), 0);
	}
	assert_int_equal(zm_pages_alloc_order(p, ZM_PAGES_MAX_ORDER + 1, &x), -EINVAL);
	/* wrong order, a tail, a single-page free of a run: refused */
	assert_int_equal(zm_pages_free_order(p, runs[3], 2), -EINVAL);
	assert_int_equal(zm_pages_free_order(p, runs[3] + 1, 0), -EINVAL);
	assert_int_equal(zm_pages_free(p, runs[3]), -EINVAL);
	assert_int_equal(zm_pages_free(p, runs[3] + 1), -EINVAL);
	assert_int_equal(zm_pages_free_order(p, runs[3], 99), -EINVAL);
	for (unsigned k = 0; k <= ZM_PAGES_MAX_ORDER; k++) {
		unsigned char *m = zm_pages_addr(p, runs[k]);

		assert_int_equal(m[0], k);
		assert_int_equal(m[(4096u << k) - 1], k);
		assert_int_equal(zm_pages_free_order(p, runs[k], k), 0);
		assert_int_equal(zm_pages_check(p), 0);
	}
	assert_int_equal(zm_pages_free_order(p, runs[5], 5), -EINVAL); /* double */
	zm_pages_destroy(p);
}

static void test_bad_frees(void **st)
{
	struct zm_pages *p = mk(4096, 1 << 20, 0);
	struct zm_pages_stats s;
	zm_pfn_t a, v[4];

	assert_int_equal(zm_pages_alloc(p, &a), 0);
	assert_int_equal(zm_pages_free(p, a), 0);
	assert_int_equal(zm_pages_free(p, a), -EINVAL);       /* double, cached */
	assert_int_equal(zm_pages_free(p, 256), -EINVAL);     /* out of range */
	assert_int_equal(zm_pages_free(p, UINT32_MAX), -EINVAL);
	assert_int_equal(zm_pages_free(p, 200), -EINVAL);     /* never allocated */
	assert_int_equal(zm_pages_alloc_bulk(p, 3, v), 3);
	v[3] = v[1];                                          /* duplicate */
	assert_int_equal(zm_pages_free_bulk(p, 4, v), -EINVAL);
	assert_int_equal(zm_pages_free(p, v[0]), -EINVAL);    /* freed by bulk */
	zm_pages_stats(p, &s);
	assert_int_equal(s.bad_frees, 6);
	assert_int_equal(s.in_use, 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

static void test_exhaust(void **st)
{
	struct zm_pages *p = mk(4096, 64 * 4096, 0);
	zm_pfn_t v[80], x;
	size_t n = 0;

	while (n < 80 && zm_pages_alloc(p, &v[n]) == 0)
		n++;
	assert_int_equal(n, 64);
	assert_int_equal(zm_pages_alloc(p, &x), -ENOMEM);
	assert_int_equal(zm_pages_alloc_bulk(p, 5, &x), 0);
	assert_int_equal(zm_pages_alloc_order(p, 0, &x), -ENOMEM);
	assert_int_equal(zm_pages_free_bulk(p, n, v), 0);
	assert_int_equal(zm_pages_alloc_bulk(p, 80, v), 64);
	assert_int_equal(zm_pages_free_bulk(p, 64, v), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

static void test_limit(void **st)
{
	struct zm_pages *p = mk(4096, 4 << 20, 100);
	struct zm_pages_stats s;
	zm_pfn_t v[200], x;
	size_t n, m = 0;

	n = zm_pages_alloc_bulk(p, 200, v);
	assert_int_equal(n, 100);
	for (size_t i = 0; i < n; i++)
		*(uint64_t *)zm_pages_addr(p, v[i]) = 0xC00C1E00u + i;
	assert_int_equal(zm_pages_alloc(p, &x), -ENOMEM);
	assert_int_equal(zm_pages_alloc_order(p, 1, &x), -ENOMEM);
	zm_pages_stats(p, &s);
	assert_true(s.limit_failures >= 3);
	assert_int_equal(s.in_use, 100);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(*(uint64_t *)zm_pages_addr(p, v[i]), 0xC00C1E00u + i);
	/* free 10, singles may come back up to the limit */
	assert_int_equal(zm_pages_free_bulk(p, 10, v), 0);
	while (m < 20 && zm_pages_alloc(p, &v[m]) == 0)
		m++;
	assert_int_equal(m, 10);
	zm_pages_stats(p, &s);
	assert_true(s.in_use + s.cached <= 100);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_free_bulk(p, n, v);
	zm_pages_destroy(p);
}

static void test_memory_returns(void **st)
{
	const size_t bytes = 64 << 20, n = bytes / 4096;
	struct zm_pages *p = mk(4096, 256 << 20, 0);
	struct zm_pages_stats s;
	zm_pfn_t *v = malloc(n * sizeof(*v));
	size_t before, full, after;

	assert_non_null(v);
	memset(v, 0, n * sizeof(*v));
	before = test_rss_bytes();
	assert_int_equal(zm_pages_alloc_bulk(p, n, v), n);
	for (size_t i = 0; i < n; i++)
		memset(zm_pages_addr(p, v[i]), 1, 4096);
	full = test_rss_bytes();
	zm_pages_stats(p, &s);
	assert_int_equal(s.resident, n);
	assert_int_equal(zm_pages_free_bulk(p, n, v), 0);
	after = test_rss_bytes();
	zm_pages_stats(p, &s);
	printf("rss before %zu MiB, full %zu MiB, after free %zu MiB; reserve %zu pages\n",
	       before >> 20, full >> 20, after >> 20, s.reserve);
	assert_true(full >= before + bytes * 3 / 4);
	assert_true(after + bytes * 3 / 4 <= full);
	assert_true(s.reserve <= ZM_DEFAULT_RESERVE_BYTES / 4096 + ZM_TRIM_BATCH);
	assert_true(s.trimmed_pages >= n - ZM_DEFAULT_RESERVE_BYTES / 4096 - ZM_TRIM_BATCH);
	assert_int_equal(s.resident_max, n);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
	free(v);
}

/* Trimming gives back only what exceeds the reserve, even when the free
 * pages have merged into one large block. */
static void test_trim_keeps_reserve(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 64 << 20, .reserve_pages = 256 };
	struct zm_pages *p;
	struct zm_pages_stats s;
	zm_pfn_t v[1024];

	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc_bulk(p, 1024, v), 1024);
	assert_int_equal(zm_pages_free_bulk(p, 1024, v), 0);
	zm_pages_stats(p, &s);
	assert_true(s.reserve >= 200 && s.reserve <= 256 + 64);
	assert_int_equal(s.trimmed_pages, 1024 - s.reserve);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

/* MADV_POPULATE_WRITE: 1 if it makes a page resident, 0 if the kernel
 * refuses it (before 5.14: then nothing is promised), -1 if it is taken
 * and ignored, as qemu-user does (make check-arm64): prefaulting, which
 * the tests below watch, then cannot be seen at all. */
static int populate_works(void)
{
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char vec = 0;
	int rc;

	assert_true(m != MAP_FAILED);
	rc = madvise(m, 4096, 23 /* MADV_POPULATE_WRITE */) != 0 ? 0 :
	     mincore(m, 4096, &vec) == 0 && (vec & 1) ? 1 : -1;
	munmap(m, 4096);
	if (rc < 0)
		printf("MADV_POPULATE_WRITE taken and ignored here (an emulator?): "
		       "prefaulting not checked\n");
	return rc;
}

/* prefault: pages are resident when bulk hands them out, untouched */
static void test_prefault(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 256 << 20, .prefault = 1 };
	const size_t n = 8192;  /* 32 MiB */
	struct zm_pages *p;
	zm_pfn_t *v = malloc(n * sizeof(*v));
	size_t before, after;

	assert_non_null(v);
	assert_int_equal(zm_pages_create(&c, &p), 0);
	before = test_rss_bytes();
	assert_int_equal(zm_pages_alloc_bulk(p, n, v), n);
	after = test_rss_bytes();
	printf("prefault: rss %zu -> %zu MiB\n", before >> 20, after >> 20);
	if (populate_works() > 0)
		assert_true(after >= before + (24u << 20));
	assert_int_equal(zm_pages_free_bulk(p, n, v), 0);
	zm_pages_destroy(p);
	free(v);
}

/* prefault through the thread's cache: a single page refills the cache
 * with pages never touched; small bulk requests served from it must make
 * each of them resident too (the fast path checks them all at once) */
static void test_prefault_cached(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 64 << 20, .prefault = 1 };
	int supported = populate_works() > 0;
	struct zm_pages *p;
	zm_pfn_t first, v[3][8];
	size_t n = 0;

	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc(p, &first), 0);
	for (int k = 0; k < 3; k++) {
		size_t want = k == 0 ? 2 : k == 1 ? 3 : 8;

		assert_int_equal(zm_pages_alloc_bulk(p, want, v[k]), want);
		for (size_t i = 0; i < want; i++) {
			unsigned char vec;

			assert_int_equal(mincore(zm_pages_addr(p, v[k][i]), 4096, &vec), 0);
			if (supported)
				assert_true(vec & 1);
			n++;
		}
	}
	assert_int_equal(n, 13);
	for (int k = 0; k < 3; k++)
		assert_int_equal(zm_pages_free_bulk(p, k == 0 ? 2 : k == 1 ? 3 : 8, v[k]), 0);
	assert_int_equal(zm_pages_free(p, first), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

static void test_no_return_when_asked(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 64 << 20, .reserve_pages = SIZE_MAX };
	struct zm_pages *p;
	struct zm_pages_stats s;
	zm_pfn_t v[4096];

	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc_bulk(p, 4096, v), 4096);
	assert_int_equal(zm_pages_free_bulk(p, 4096, v), 0);
	assert_int_equal(zm_pages_trim(p), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.reserve, 4096);
	assert_int_equal(s.trimmed_pages, 0);
	zm_pages_destroy(p);
}

static void *thread_caches_pages(void *arg)
{
	struct zm_pages *p = arg;
	zm_pfn_t v[10];

	for (int i = 0; i < 10; i++)
		assert_int_equal(zm_pages_alloc(p, &v[i]), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(zm_pages_free(p, v[i]), 0);
	return NULL;
}

/* Small bulk requests come from the thread's cache (no refill while it
 * holds enough, one when it does not); without a cache, from the zones;
 * every page distinct and allocated either way. */
static void test_small_bulk(void **st)
{
	struct zm_pages_config nc = { .arena_bytes = 4 << 20, .cache_pages = 1 };
	struct zm_pages *p = mk(4096, 4 << 20, 0), *q = NULL;
	struct zm_pages_stats a, b;
	zm_pfn_t one, v[64];
	size_t n = 0;

	assert_int_equal(zm_pages_alloc(p, &one), 0);      /* fills the cache */
	zm_pages_stats(p, &a);
	assert_true(a.cached >= 5);
	assert_int_equal(zm_pages_alloc_bulk(p, 5, v), 5);
	n = 5;
	zm_pages_stats(p, &b);
	assert_int_equal(b.cached, a.cached - 5);
	assert_int_equal(b.refills, a.refills);
	assert_int_equal(b.bulk_calls, a.bulk_calls + 1);
	assert_int_equal(b.bulk_pages, a.bulk_pages + 5);
	/* drain the cache with requests of 15, past a refill */
	while (n + 15 <= 64 && b.refills == a.refills) {
		assert_int_equal(zm_pages_alloc_bulk(p, 15, v + n), 15);
		n += 15;
		zm_pages_stats(p, &b);
	}
	assert_true(b.refills > a.refills);
	assert_int_equal(b.in_use, n + 1);
	for (size_t i = 0; i < n; i++) {
		assert_true(v[i] != one);
		for (size_t j = 0; j < i; j++)
			assert_true(v[i] != v[j]);
	}
	assert_int_equal(zm_pages_check(p), 0);
	assert_int_equal(zm_pages_free_bulk(p, n, v), 0);
	assert_int_equal(zm_pages_free(p, one), 0);
	assert_int_equal(zm_pages_alloc_bulk(p, 0, NULL), 0);
	assert_int_equal(zm_pages_alloc_bulk(p, 3, NULL), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);

	/* caching off: the zones serve it */
	assert_int_equal(zm_pages_create(&nc, &q), 0);
	assert_int_equal(zm_pages_alloc_bulk(q, 4, v), 4);
	zm_pages_stats(q, &b);
	assert_int_equal(b.in_use, 4);
	assert_int_equal(b.cached, 0);
	assert_int_equal(b.bulk_calls, 1);
	assert_int_equal(zm_pages_free_bulk(q, 4, v), 0);
	assert_int_equal(zm_pages_check(q), 0);
	zm_pages_destroy(q);
}

static void test_stats_and_thread_exit(void **st)
{
	struct zm_pages *p = mk(4096, 4 << 20, 0);
	struct zm_pages_stats s;
	pthread_t t;
	zm_pfn_t a, b[8];

	assert_int_equal(zm_pages_alloc(p, &a), 0);
	assert_int_equal(zm_pages_alloc_bulk(p, 8, b), 8);
	zm_pages_stats(p, &s);
	assert_int_equal(s.total_pages, 1024);
	assert_int_equal(s.in_use, 9);
	assert_true(s.cached > 0);
	assert_int_equal(s.in_use + s.cached + s.free, 1024);
	assert_int_equal(s.bulk_calls, 1);
	assert_int_equal(s.bulk_pages, 8);
	assert_true(s.refills >= 1);
	zm_pages_flush_thread(p);
	zm_pages_stats(p, &s);
	assert_int_equal(s.cached, 0);

	assert_int_equal(pthread_create(&t, NULL, thread_caches_pages, p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.cached, 0);  /* the exiting thread gave its cache back */
	assert_int_equal(s.in_use, 9);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_free(p, a);
	zm_pages_free_bulk(p, 8, b);
	zm_pages_destroy(p);
}

/* A thread that freed pages into its cache and went quiet: a trim takes
 * its stack back (it is in no call), and the thread carries on with an
 * empty one.  Catches the trims leaving idle threads' caches resident,
 * and a stealer that leaves the stack's count or states wrong (the
 * checker, the thread's next calls). */
struct idler {
	struct zm_pages *p;
	pthread_mutex_t m;
	pthread_cond_t c;
	int stage;
	int failures;
};

static void idler_step(struct idler *a, int to, int wait)
{
	pthread_mutex_lock(&a->m);
	a->stage = to;
	pthread_cond_broadcast(&a->c);
	while (wait && a->stage != wait)
		pthread_cond_wait(&a->c, &a->m);
	pthread_mutex_unlock(&a->m);
}

static void *idle_after_frees(void *arg)
{
	struct idler *a = arg;
	zm_pfn_t v[40];

	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 40; i++) {
			if (zm_pages_alloc(a->p, &v[i]) != 0)
				a->failures++;
			else
				memset(zm_pages_addr(a->p, v[i]), 0x5a, 4096);
		}
		for (int i = 0; i < 40; i++)
			if (zm_pages_free(a->p, v[i]) != 0)
				a->failures++;
		if (round == 0)
			idler_step(a, 1, 2);  /* quiet until the trim is done */
	}
	return NULL;
}

/*
 * With prefault on, zm_pages_alloc_at refuses a page that is not resident
 * while the zone has resident free pages (32 or more): the caller saves a
 * copy by having the page in place and would pay a fault for it.  Without
 * prefault, or with no resident free page, it takes the page.
 *
 * Catches: a clean page taken in place while resident ones wait (each a
 * fault in a churning pool's allocation); a refusal with nothing resident
 * (the caller's fallback would fault the same).
 */
static void test_alloc_at_resident_first(void **st)
{
	enum { N = 128, FAR = 4096 };
	static zm_pfn_t v[N];

	(void)st;
	for (int prefault = 0; prefault < 2; prefault++) {
		struct zm_pages_config c = { .arena_bytes = 64u << 20, .zones = 1,
					     .reserve_pages = 1024, .prefault = prefault };
		struct zm_pages *pg;

		assert_int_equal(zm_pages_create(&c, &pg), 0);
		/* nothing resident free: the far page is taken */
		assert_int_equal(zm_pages_alloc_at(pg, FAR), 0);
		assert_int_equal(zm_pages_free(pg, FAR), 0);
		assert_int_equal(zm_pages_alloc_bulk(pg, N, v), N);
		for (int i = 0; i < N; i++)
			memset(zm_pages_addr(pg, v[i]), 0x5a, zm_pages_page_size(pg));
		assert_int_equal(zm_pages_free_bulk(pg, N, v), 0);
		/* N resident free pages: a page never touched is taken in
		 * place only without prefault */
		assert_int_equal(zm_pages_alloc_at(pg, 2 * FAR), prefault ? -EBUSY : 0);
		if (!prefault)
			assert_int_equal(zm_pages_free(pg, 2 * FAR), 0);
		/* a resident one in place is taken either way */
		assert_int_equal(zm_pages_alloc_at(pg, v[0]), 0);
		assert_int_equal(zm_pages_free(pg, v[0]), 0);
		assert_int_equal(zm_pages_check(pg), 0);
		zm_pages_destroy(pg);
	}
}

/*
 * A page that was never made resident, inside a free block that holds
 * resident pages (the block is on a dirty list): zm_pages_alloc_at with
 * prefault refuses it too while the zone has resident free pages.
 *
 * Catches: the refusal decided by the block's hint rather than by the
 * page (a clean page taken, and made resident in the call, while 128
 * resident ones were free).
 */
static void test_alloc_at_clean_in_dirty_block(void **st)
{
	enum { N = 128 };
	static zm_pfn_t v[N];

	(void)st;
	for (int prefault = 0; prefault < 2; prefault++) {
		struct zm_pages_config c = { .arena_bytes = 64u << 20, .zones = 1,
					     .reserve_pages = 1024, .prefault = prefault };
		struct zm_pages_stats s0, s1;
		struct zm_pages *pg;
		zm_pfn_t blk, clean = ZM_PFN_NIL;

		assert_int_equal(zm_pages_create(&c, &pg), 0);
		assert_int_equal(zm_pages_alloc_bulk(pg, N, v), N);
		for (int i = 0; i < N; i++)
			memset(zm_pages_addr(pg, v[i]), 0x5a, zm_pages_page_size(pg));
		assert_int_equal(zm_pages_free_bulk(pg, N, v), 0);
		assert_int_equal(zm_pages_check(pg), 0);
		/* a page of v[0]'s largest block that none of v is: free and
		 * never made resident, its block holding v's resident pages */
		blk = v[0] & ~(((zm_pfn_t)1 << ZM_PAGES_MAX_ORDER) - 1);
		for (zm_pfn_t q = blk + ((zm_pfn_t)1 << ZM_PAGES_MAX_ORDER);
		     q-- > blk && clean == ZM_PFN_NIL;) {
			bool in_v = false;

			for (int i = 0; i < N; i++)
				in_v |= v[i] == q;
			if (!in_v)
				clean = q;
		}
		assert_true(clean != ZM_PFN_NIL);
		zm_pages_stats(pg, &s0);
		assert_int_equal(zm_pages_alloc_at(pg, clean), prefault ? -EBUSY : 0);
		zm_pages_stats(pg, &s1);
		assert_int_equal(s1.prefaulted_pages, s0.prefaulted_pages);
		if (!prefault)
			assert_int_equal(zm_pages_free(pg, clean), 0);
		/* a resident page of the same block is taken in place */
		assert_int_equal(zm_pages_alloc_at(pg, v[N - 1]), 0);
		assert_int_equal(zm_pages_free(pg, v[N - 1]), 0);
		assert_int_equal(zm_pages_check(pg), 0);
		zm_pages_destroy(pg);
	}
}

/*
 * zmi_os_decommit_many: the trims' batch of ranges goes back in one call
 * where the kernel can (process_madvise on oneself), else range by range;
 * either way exactly those ranges read zero and are not resident, and
 * the pages between them keep their bytes.  More ranges than one call
 * takes (16), and ranges of one page and of several.
 *
 * Catches: a range left resident, a neighbour zeroed, a batch cut short
 * and not finished.
 */
static void test_decommit_many(void **st)
{
	enum { PAGES = 64, NR = 21 };
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *m = mmap(NULL, PAGES * ps, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct iovec iov[NR];
	bool gone[PAGES] = { false };
	unsigned char vec[PAGES];

	(void)st;
	assert_true(m != MAP_FAILED);
	for (size_t i = 0; i < PAGES; i++)
		memset(m + i * ps, (int)(i + 1), ps);
	/* ranges of 1 or 2 pages, every third page, the last of 3 */
	for (int r = 0; r < NR; r++) {
		size_t first = (size_t)r * 3, len = r == NR - 1 ? 3 : 1 + (size_t)(r & 1);

		iov[r] = (struct iovec){ m + first * ps, len * ps };
		for (size_t k = 0; k < len; k++)
			gone[first + k] = true;
	}
	assert_int_equal(zmi_os_decommit_many(iov, 0), 0);
	assert_int_equal(zmi_os_decommit_many(iov, NR), 0);
	assert_int_equal(mincore(m, PAGES * ps, vec), 0);
	for (size_t i = 0; i < PAGES; i++) {
		if (gone[i])
			assert_false(vec[i] & 1);
		assert_int_equal(m[i * ps + ps / 2], gone[i] ? 0 : (unsigned char)(i + 1));
	}
	munmap(m, PAGES * ps);
}

/* Is page pfn of p resident (mincore)? */
static bool page_resident(struct zm_pages *p, zm_pfn_t pfn)
{
	unsigned char vec = 0;

	assert_int_equal(mincore(zm_pages_addr(p, pfn), zm_pages_page_size(p), &vec), 0);
	return vec & 1;
}

static void *thread_prefault_of_new(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)zm_pages_thread_prefault(1);
}

/*
 * zm_pages_thread_prefault: turned off, the pages this thread takes are
 * not made resident in the call (the layer's count of pages it made
 * resident stays; mincore says no until the page is written), and it
 * answers what it was; another thread's is on; back on (the cache given
 * back and trimmed: the pages taken while it was off count as resident),
 * pages are made resident as they are taken again.
 *
 * Catches: a switch that does nothing (the page resident, the count up),
 * one shared by every thread, one that stays off.
 */
static void test_thread_prefault(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 64u << 20, .zones = 1, .prefault = 1 };
	static zm_pfn_t b[256];
	struct zm_pages_stats s0, s1;
	struct zm_pages *pg;
	zm_pfn_t a;
	pthread_t t;
	void *ret;

	(void)st;
	if (populate_works() < 0)
		skip();
	assert_int_equal(zm_pages_create(&c, &pg), 0);
	assert_int_equal(zm_pages_thread_prefault(0), 1);
	assert_int_equal(zm_pages_thread_prefault(0), 0);
	assert_int_equal(pthread_create(&t, NULL, thread_prefault_of_new, NULL), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_int_equal((intptr_t)ret, 1);
	zm_pages_stats(pg, &s0);
	assert_int_equal(zm_pages_alloc(pg, &a), 0);
	zm_pages_stats(pg, &s1);
	assert_int_equal(s1.prefaulted_pages, s0.prefaulted_pages);
	assert_false(page_resident(pg, a));
	memset(zm_pages_addr(pg, a), 1, zm_pages_page_size(pg));
	assert_true(page_resident(pg, a));
	assert_int_equal(zm_pages_free(pg, a), 0);
	assert_int_equal(zm_pages_thread_prefault(1), 0);
	zm_pages_flush_thread(pg);
	zm_pages_trim(pg);
	/* past the few the trim's reserve keeps */
	for (int i = 0; i < 256; i++)
		assert_int_equal(zm_pages_alloc(pg, &b[i]), 0);
	zm_pages_stats(pg, &s1);
	assert_true(s1.prefaulted_pages > s0.prefaulted_pages);
	assert_true(page_resident(pg, b[255]));
	for (int i = 0; i < 256; i++)
		assert_int_equal(zm_pages_free(pg, b[i]), 0);
	assert_int_equal(zm_pages_check(pg), 0);
	zm_pages_destroy(pg);
}

/*
 * zm_pages_alloc_at_run: a page taken in place that is not resident comes
 * with the free pages after it, up to the n - 1 the caller will want, set
 * aside for the calling thread and made resident in the same call; only
 * with prefault, and in a zone that has held ZM_PREFAULT_BATCH_BYTES.
 *
 * Catches: pages set aside past n or past a page in use, set-aside pages
 * left to fault one by one (not resident before they are taken), a
 * set-aside page another caller can take in place, pages lost to the
 * accounting, and a small instance holding pages resident ahead.
 */
static void test_alloc_at_run(void **st)
{
	enum { N = 512, FAR = 4096, FAR2 = 8192, FAR3 = 12288 };
	static zm_pfn_t v[N];
	struct zm_pages_stats s;

	(void)st;
	if (populate_works() < 0)
		skip();
	for (int prefault = 0; prefault < 2; prefault++) {
		struct zm_pages_config c = { .arena_bytes = 64u << 20, .zones = 1,
					     .prefault = prefault };
		struct zm_pages *pg;
		bool ahead = prefault;

		assert_int_equal(zm_pages_create(&c, &pg), 0);
		assert_int_equal(zm_pages_alloc_at_run(pg, FAR, 0), -EINVAL);
		assert_int_equal(zm_pages_alloc_at_run(pg, FAR, ZM_PAGES_RUN_MAX + 1), -EINVAL);
		assert_int_equal(zm_pages_alloc_at_run(NULL, FAR, 2), -EINVAL);
		/* a zone that never held 1 MiB: nothing set aside */
		assert_int_equal(zm_pages_alloc_at_run(pg, FAR3 + 64, 8), 0);
		assert_int_equal(zm_pages_take_cached(pg, FAR3 + 65), -ENOENT);
		assert_int_equal(zm_pages_free(pg, FAR3 + 64), 0);
		/* 2 MiB taken and given back, trimmed: few resident free pages,
		 * none of those below (never touched) */
		assert_int_equal(zm_pages_alloc_bulk(pg, N, v), N);
		assert_int_equal(zm_pages_free_bulk(pg, N, v), 0);
		zm_pages_flush_thread(pg);
		zm_pages_trim(pg);

		assert_int_equal(zm_pages_alloc_at_run(pg, FAR, 8), 0);
		assert_true(page_resident(pg, FAR) || !prefault);
		for (zm_pfn_t i = 1; i < 8; i++) {
			if (ahead)
				assert_true(page_resident(pg, FAR + i));
			assert_int_equal(zm_pages_alloc_at(pg, FAR + i), ahead ? -EBUSY : 0);
			if (ahead)
				assert_int_equal(zm_pages_take_cached(pg, FAR + i), 0);
		}
		/* n pages in all, not more */
		assert_int_equal(zm_pages_take_cached(pg, FAR + 8), -ENOENT);
		assert_false(page_resident(pg, FAR + 8));

		/* a page in use ends what is set aside */
		assert_int_equal(zm_pages_alloc_at(pg, FAR2 + 3), 0);
		assert_int_equal(zm_pages_alloc_at_run(pg, FAR2, 8), 0);
		assert_int_equal(zm_pages_take_cached(pg, FAR2 + 4), -ENOENT);
		for (zm_pfn_t i = 1; i < 3; i++)
			assert_int_equal(zm_pages_take_cached(pg, FAR2 + i), ahead ? 0 : -ENOENT);
		/* n = 1 is zm_pages_alloc_at: nothing set aside */
		assert_int_equal(zm_pages_alloc_at_run(pg, FAR3, 1), 0);
		assert_int_equal(zm_pages_take_cached(pg, FAR3 + 1), -ENOENT);

		zm_pages_stats(pg, &s);
		assert_int_equal(s.in_use, 8 + (ahead ? 4 : 2) + 1);
		assert_int_equal(s.in_use + s.cached + s.free, s.total_pages);
		assert_int_equal(zm_pages_check(pg), 0);
		for (zm_pfn_t i = 0; i < 8; i++)
			if (ahead || i == 0)
				assert_int_equal(zm_pages_free(pg, FAR + i), 0);
		if (!ahead)
			for (zm_pfn_t i = 1; i < 8; i++)
				assert_int_equal(zm_pages_free(pg, FAR + i), 0);
		for (zm_pfn_t i = 0; i < 4; i++)
			if (ahead || i == 0 || i == 3)
				assert_int_equal(zm_pages_free(pg, FAR2 + i), 0);
		assert_int_equal(zm_pages_free(pg, FAR3), 0);
		zm_pages_flush_thread(pg);
		zm_pages_stats(pg, &s);
		assert_int_equal(s.in_use + s.cached, 0);
		assert_int_equal(zm_pages_check(pg), 0);
		zm_pages_destroy(pg);
	}
}

static void test_trim_takes_idle_cache(void **st)
{
	struct idler a = { .p = mk(4096, 4 << 20, 0), .m = PTHREAD_MUTEX_INITIALIZER,
			   .c = PTHREAD_COND_INITIALIZER };
	bool barrier = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) > 0;
	struct zm_pages_stats s0, s1;
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, idle_after_frees, &a), 0);
	pthread_mutex_lock(&a.m);
	while (a.stage != 1)
		pthread_cond_wait(&a.c, &a.m);
	pthread_mutex_unlock(&a.m);
	zm_pages_stats(a.p, &s0);
	assert_true(s0.cached >= 40);
	zm_pages_trim(a.p);
	zm_pages_stats(a.p, &s1);
	printf("idle thread's cache: %zu pages cached, %zu resident -> %zu cached, %zu resident%s\n",
	       s0.cached, s0.resident, s1.cached, s1.resident, barrier ? "" : " (no membarrier)");
	if (barrier) {
		assert_int_equal(s1.cached, 0);
		assert_int_equal(s1.stolen_pages, s0.cached);
		assert_true(s1.resident + 32 <= s0.resident);
	} else {
		assert_int_equal(s1.cached, s0.cached);
		assert_int_equal(s1.stolen_pages, 0);
	}
	assert_int_equal(s1.in_use, 0);
	assert_int_equal(zm_pages_check(a.p), 0);
	idler_step(&a, 2, 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(a.failures, 0);
	zm_pages_stats(a.p, &s1);
	assert_int_equal(s1.in_use, 0);
	assert_int_equal(zm_pages_check(a.p), 0);
	zm_pages_destroy(a.p);
}

static void test_drain(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 4 << 20, .cache_pages = 8 };
	struct zm_pages *p;
	struct zm_pages_stats s;
	zm_pfn_t v[100];

	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc_bulk(p, 100, v), 100);
	for (int i = 0; i < 100; i++)
		assert_int_equal(zm_pages_free(p, v[i]), 0);
	zm_pages_stats(p, &s);
	assert_true(s.cached <= 8);
	assert_true(s.drains >= 10);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

/* take_cached: a page this thread freed lately comes back from its cache,
 * the others keep their order; one freed long ago, or never, does not. */
static void test_take_cached(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 4 << 20, .cache_pages = 32 };
	struct zm_pages *p;
	struct zm_pages_stats s;
	zm_pfn_t v[20], got;

	assert_int_equal(zm_pages_create(&c, &p), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(zm_pages_alloc(p, &v[i]), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(zm_pages_free(p, v[i]), 0);
	/* v[19] was freed last; once v[15] is taken, v[11] is eighth from the
	 * top and v[10] beyond reach */
	assert_int_equal(zm_pages_take_cached(p, v[15]), 0);
	assert_int_equal(zm_pages_take_cached(p, v[15]), -ENOENT);   /* taken */
	assert_int_equal(zm_pages_take_cached(p, v[10]), -ENOENT);   /* too deep */
	assert_int_equal(zm_pages_take_cached(p, 1000000), -ENOENT);
	zm_pages_stats(p, &s);
	assert_int_equal(s.in_use, 1);
	assert_int_equal(zm_pages_check(p), 0);
	/* the rest come back newest first, v[15] skipped */
	for (int i = 19; i >= 16; i--) {
		assert_int_equal(zm_pages_alloc(p, &got), 0);
		assert_int_equal(got, v[i]);
	}
	assert_int_equal(zm_pages_alloc(p, &got), 0);
	assert_int_equal(got, v[14]);
	assert_int_equal(zm_pages_free(p, v[15]), 0);
	assert_int_equal(zm_pages_free(p, got), 0);
	for (int i = 16; i < 20; i++)
		assert_int_equal(zm_pages_free(p, v[i]), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

/* alloc_run: the first page handed out, the rest of the run set aside for
 * take_cached and for nobody else; runs carved one after the other from
 * the thread's block; set-aside pages bounded and given back on flush and
 * at thread exit. */
static void *thread_sets_aside(void *arg)
{
	struct zm_pages *p = arg;
	zm_pfn_t a;

	assert_int_equal(zm_pages_alloc_run(p, 6, &a), 0);
	return (void *)(uintptr_t)a;
}

static void test_alloc_run(void **st)
{
	struct zm_pages *p = mk(4096, 16 << 20, 0);
	struct zm_pages_stats s;
	zm_pfn_t a, b, x, v[40];
	pthread_t t;
	void *ret;

	assert_int_equal(zm_pages_alloc_run(p, 0, &a), -EINVAL);
	assert_int_equal(zm_pages_alloc_run(p, ZM_PAGES_RUN_MAX + 1, &a), -EINVAL);
	assert_int_equal(zm_pages_alloc_run(p, 5, &a), 0);
	/* a single page taken meanwhile is not one of the run's */
	assert_int_equal(zm_pages_alloc(p, &x), 0);
	assert_true(x < a || x > a + 4);
	assert_int_equal(zm_pages_alloc_at(p, a + 1), -EBUSY);  /* set aside */
	for (zm_pfn_t i = 1; i < 5; i++)
		assert_int_equal(zm_pages_take_cached(p, a + i), 0);
	assert_int_equal(zm_pages_take_cached(p, a + 2), -ENOENT);   /* taken */
	/* not set aside, but the next page of the thread's block */
	assert_int_equal(zm_pages_take_cached(p, a + 5), 0);
	assert_int_equal(zm_pages_take_cached(p, a + 7), -ENOENT);
	/* the next run starts where the block was taken up to */
	assert_int_equal(zm_pages_alloc_run(p, 3, &b), 0);
	assert_int_equal(b, a + 6);
	zm_pages_stats(p, &s);
	assert_int_equal(s.in_use, 8);
	assert_int_equal(s.in_use + s.cached + s.free, s.total_pages);
	assert_int_equal(zm_pages_check(p), 0);

	/* many long runs: what is set aside stays bounded, every page is
	 * accounted for, and the oldest set-aside pages are not lost */
	for (int i = 0; i < 40; i++)
		assert_int_equal(zm_pages_alloc_run(p, 32, &v[i]), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.in_use, 48);
	/* the stack (64 pages by default), the set-aside pages, the block */
	assert_true(s.cached <= 64 + ZM_PAGES_AHEAD_MAX + ZM_PAGES_RUN_MAX);
	assert_int_equal(s.in_use + s.cached + s.free, s.total_pages);
	assert_int_equal(zm_pages_check(p), 0);
	assert_int_equal(zm_pages_take_cached(p, v[39] + 31), 0);
	assert_int_equal(zm_pages_free(p, v[39] + 31), 0);
	for (int i = 0; i < 40; i++)
		assert_int_equal(zm_pages_free(p, v[i]), 0);
	for (zm_pfn_t i = 0; i < 6; i++)
		assert_int_equal(zm_pages_free(p, a + i), 0);
	assert_int_equal(zm_pages_free(p, b), 0);
	assert_int_equal(zm_pages_free(p, x), 0);
	zm_pages_flush_thread(p);
	zm_pages_stats(p, &s);
	assert_int_equal(s.cached, 0);
	assert_int_equal(s.in_use, 0);
	assert_int_equal(zm_pages_check(p), 0);

	/* a thread that exits gives back what it set aside */
	assert_int_equal(pthread_create(&t, NULL, thread_sets_aside, p), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.cached, 0);
	assert_int_equal(s.in_use, 1);
	assert_int_equal(zm_pages_alloc_at(p, (zm_pfn_t)(uintptr_t)ret + 1), 0);
	assert_int_equal(zm_pages_free(p, (zm_pfn_t)(uintptr_t)ret + 1), 0);
	assert_int_equal(zm_pages_free(p, (zm_pfn_t)(uintptr_t)ret), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

/* alloc_run and the limit: near it, nothing is set aside (one page, the
 * rest left free for alloc_at); at it, what the thread set aside is taken
 * back, so that every page under the limit can be allocated.  Without a
 * cache, one page and the rest left free. */
static void test_alloc_run_limit_and_no_cache(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 4 << 20, .cache_pages = 1 };
	size_t lim = 8 * ZM_PAGES_RUN_MAX + 20, n = 0;
	struct zm_pages *p = mk(4096, 4 << 20, 10);
	zm_pfn_t a, x, *v = malloc(lim * sizeof(*v));

	assert_non_null(v);
	assert_int_equal(zm_pages_alloc_run(p, 8, &a), 0);
	assert_int_equal(zm_pages_take_cached(p, a + 1), -ENOENT);
	assert_int_equal(zm_pages_alloc_at(p, a + 1), 0);
	assert_int_equal(zm_pages_free(p, a + 1), 0);
	assert_int_equal(zm_pages_free(p, a), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);

	p = mk(4096, 4 << 20, lim);
	assert_int_equal(zm_pages_alloc_run(p, ZM_PAGES_RUN_MAX, &a), 0);
	assert_int_equal(zm_pages_take_cached(p, a + 1), 0);   /* set aside */
	assert_int_equal(zm_pages_free(p, a + 1), 0);
	while (zm_pages_alloc(p, &x) == 0)
		v[n++] = x;
	assert_int_equal(n, lim - 1);     /* all but the run's first page */
	assert_int_equal(zm_pages_alloc_run(p, 1, &x), -ENOMEM);
	assert_int_equal(zm_pages_check(p), 0);
	while (n)
		assert_int_equal(zm_pages_free(p, v[--n]), 0);
	assert_int_equal(zm_pages_free(p, a), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
	free(v);

	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc_run(p, 4, &a), 0);
	assert_int_equal(zm_pages_take_cached(p, a + 1), -ENOENT);
	assert_int_equal(zm_pages_alloc_at(p, a + 1), 0);
	/* a short run does not start on the pages a long one grows into */
	assert_int_equal(zm_pages_alloc_run(p, 2, &x), 0);
	assert_true(x < a || x >= a + ZM_PAGES_RUN_MAX);
	assert_int_equal(zm_pages_free(p, x), 0);
	assert_int_equal(zm_pages_free(p, a + 1), 0);
	assert_int_equal(zm_pages_free(p, a), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);

	/* a run longer than a small cache can set aside grows into the
	 * thread's run block all the same */
	c.cache_pages = 4;
	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc_run(p, 8, &a), 0);
	for (zm_pfn_t i = 1; i < 8; i++)
		assert_int_equal(zm_pages_take_cached(p, a + i), 0);
	assert_int_equal(zm_pages_check(p), 0);
	for (zm_pfn_t i = 0; i < 8; i++)
		assert_int_equal(zm_pages_free(p, a + i), 0);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

static void test_no_cache(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 4 << 20, .cache_pages = 1 };
	struct zm_pages *p;
	struct zm_pages_stats s;
	zm_pfn_t a;

	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc(p, &a), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.cached, 0);
	assert_int_equal(s.in_use, 1);
	assert_int_equal(zm_pages_free(p, a), 0);
	assert_int_equal(zm_pages_free(p, a), -EINVAL);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

static void test_checker_catches(void **st)
{
	struct zm_pages *p = mk(4096, 1 << 20, 0);
	zm_pfn_t a;

	assert_int_equal(zm_pages_alloc_order(p, 2, &a), 0);
	assert_int_equal(zm_pages_check(p), 0);
	p->pg[a + 1].state = PG_FREE_TAIL; /* a tail that lost its run */
	assert_int_equal(zm_pages_check(p), -EUCLEAN);
	p->pg[a + 1].state = PG_ALLOC_TAIL;
	p->zone[0].nr_free++;               /* a counter off by one */
	assert_int_equal(zm_pages_check(p), -EUCLEAN);
	p->zone[0].nr_free--;
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_free_order(p, a, 2);
	zm_pages_destroy(p);
}

/* Zones: how many, a thread's pages from its home zone, spilling into the
 * next when that is used up, the limit over all of them, blocks that
 * never cross a zone's end. */
static zm_pfn_t g_zone_pfn[2];
static struct zm_pages *g_zp;

static void *zone_thread(void *arg)
{
	zm_pfn_t *out = arg;

	assert_int_equal(zm_pages_alloc(g_zp, out), 0);
	assert_int_equal(zm_pages_free(g_zp, *out), 0);
	zm_pages_flush_thread(g_zp);
	return NULL;
}

static void test_zones(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 2048 * 4096, .limit_pages = 1500,
				     .zones = 2 };
	static zm_pfn_t pf[3001];
	struct zm_pages_stats s;
	struct zm_pages *p;
	pthread_t t[2];
	zm_pfn_t a, b, x;
	size_t n;

	/* defaults: one zone where the arena is small; a power of two, at
	 * most 8, where it is large */
	p = mk(4096, 64 << 20, 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.zones, 1);
	zm_pages_destroy(p);
	p = mk(4096, (size_t)4 << 30, 0);
	zm_pages_stats(p, &s);
	assert_true(s.zones >= 1 && s.zones <= 8 && !(s.zones & (s.zones - 1)));
	zm_pages_destroy(p);
	/* asked for: zones of 1024 pages at least, the last shorter */
	c.zones = 8;
	c.arena_bytes = 3000 * 4096;
	c.limit_pages = 0;
	assert_int_equal(zm_pages_create(&c, &p), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.zones, 3);   /* 1024, 1024, 952: not 8 of 375 */
	/* one page at a time, the thread gets every page of all three */
	for (n = 0; n < 3001 && zm_pages_alloc(p, &pf[n]) == 0; n++)
		;
	assert_int_equal(n, 3000);
	assert_int_equal(zm_pages_check(p), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(zm_pages_free(p, pf[i]), 0);
	zm_pages_flush_thread(p);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
	c.limit_pages = 1500;

	c.zones = 2;
	c.arena_bytes = 2048 * 4096;
	assert_int_equal(zm_pages_create(&c, &p), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.zones, 2);
	/* two threads, two homes: their pages lie in different zones */
	g_zp = p;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, zone_thread, &g_zone_pfn[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_true((g_zone_pfn[0] < 1024) != (g_zone_pfn[1] < 1024));
	/* the limit holds over both zones: bulk spills into the second
	 * zone and stops at 1500 */
	n = zm_pages_alloc_bulk(p, 2048, pf);
	assert_int_equal(n, 1500);
	assert_int_equal(zm_pages_alloc(p, &x), -ENOMEM);
	assert_int_equal(zm_pages_check(p), 0);
	assert_int_equal(zm_pages_free_bulk(p, n, pf), 0);
	zm_pages_flush_thread(p);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);

	/* a block of the largest order in each zone, and no third */
	c.limit_pages = 0;
	assert_int_equal(zm_pages_create(&c, &p), 0);
	assert_int_equal(zm_pages_alloc_order(p, 10, &a), 0);
	assert_int_equal(zm_pages_alloc_order(p, 10, &b), 0);
	assert_true((a == 0 && b == 1024) || (a == 1024 && b == 0));
	assert_int_equal(zm_pages_alloc_order(p, 0, &x), -ENOMEM);
	assert_int_equal(zm_pages_check(p), 0);
	assert_int_equal(zm_pages_free_order(p, a, 10), 0);
	assert_int_equal(zm_pages_free_order(p, b, 10), 0);
	zm_pages_flush_thread(p);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_stats(p, &s);
	assert_int_equal(s.in_use + s.cached, 0);
	assert_int_equal(s.free, 2048);
	zm_pages_destroy(p);
}

/* Under a limit, a taker in one zone must not make a taker in another see
 * the limit reached when it is not: a reservation made before looking
 * whether the zone has the pages (then given back) did, for a moment.
 * 16 pages of room under the limit, free single pages in zone 0 only; one
 * thread keeps asking for a 16-page block, which no zone has, while this
 * one takes and frees a single page 200,000 times: never refused.  (A
 * race: with the reservation first, a test program like this one was
 * refused 314,000 times in 2 million on one run and once on another;
 * this one cannot be sure to catch it, only to catch it often.) */
static volatile int g_limit_stop, g_limit_ready;

static void *block_asker(void *arg)
{
	zm_pfn_t x;

	/* a page through this thread's cache, and back: the cache, made
	 * now, has the other zone for its home */
	assert_int_equal(zm_pages_alloc(g_zp, &x), 0);
	assert_int_equal(zm_pages_free(g_zp, x), 0);
	zm_pages_flush_thread(g_zp);
	__atomic_store_n(&g_limit_ready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&g_limit_stop, __ATOMIC_RELAXED))
		if (zm_pages_alloc_order(g_zp, 4, &x) == 0)
			zm_pages_free_order(g_zp, x, 4);
	return arg;
}

static void test_zones_limit(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 2048 * 4096, .zones = 2,
				     .limit_pages = 2040 };
	struct zm_pages *p;
	pthread_t t;
	long refused = 0;
	zm_pfn_t x;

	assert_int_equal(zm_pages_create(&c, &p), 0);
	/* this thread's cache first: its home is zone 0 */
	assert_int_equal(zm_pages_alloc(p, &x), 0);
	assert_int_equal(zm_pages_free(p, x), 0);
	zm_pages_flush_thread(p);
	/* everything but 24 single pages of zone 0, none of them neighbours:
	 * 2024 out, room for 16 */
	for (zm_pfn_t pfn = 0; pfn < 2048; pfn++)
		if (pfn >= 48 || pfn % 2)
			assert_int_equal(zm_pages_alloc_at(p, pfn), 0);
	g_zp = p;
	g_limit_stop = g_limit_ready = 0;
	pthread_create(&t, NULL, block_asker, NULL);
	while (!__atomic_load_n(&g_limit_ready, __ATOMIC_ACQUIRE))
		;
	for (long i = 0; i < 200000; i++) {
		if (zm_pages_alloc_order(p, 0, &x) == 0)
			assert_int_equal(zm_pages_free_order(p, x, 0), 0);
		else
			refused++;
	}
	__atomic_store_n(&g_limit_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	assert_int_equal(refused, 0);
	assert_int_equal(zm_pages_check(p), 0);
	for (zm_pfn_t pfn = 0; pfn < 2048; pfn++)
		if (pfn >= 48 || pfn % 2)
			assert_int_equal(zm_pages_free(p, pfn), 0);
	zm_pages_flush_thread(p);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

/* Resident memory of any zone before memory never touched in the home
 * zone.  After a compactor (a thread of its own) frees pages, they lie
 * free and resident in their own zones; a thread whose home zone has
 * none took clean pages there and made them resident inside its call
 * while the other zone held thousands resident (allocbench --latency:
 * the zone it faulted in held 3-4 resident free pages, the other about
 * 25,000).  Zone 0, this thread's home, holds no resident free page
 * (its first half taken), zone 1 hundreds that another thread freed.  A zspage growing in place into
 * a clean page of zone 0 is refused (-EBUSY: its caller takes a resident
 * page elsewhere); a page from an empty cache and runs of 8 come from
 * zone 1's resident pages, and no page is made resident in the calls.
 *
 * Catches: each of the three ways looking at the home zone alone
 * (alloc_at_run's test on the page's zone, alloc_locked's and
 * alloc_run's clean memory taken in the home zone before a resident page
 * is looked for in the others): pfns in zone 0 and pages prefaulted.
 */
static void *free_512_in_zone_1(void *arg)
{
	struct zm_pages *p = arg;
	static zm_pfn_t v[512];

	/* no assert here: cmocka's are the main thread's */
	for (int i = 0; i < 512; i++)
		if (zm_pages_alloc(p, &v[i]))
			return p;
	for (int i = 0; i < 512; i++)
		zm_pages_free(p, v[i]);
	zm_pages_flush_thread(p);
	return NULL;
}

static void test_resident_in_other_zone_first(void **st)
{
	struct zm_pages_config c = { .arena_bytes = 4096 * 4096, .zones = 2, .prefault = 1,
				     .reserve_pages = SIZE_MAX };
	struct zm_pages_stats s0, s1;
	static zm_pfn_t run[40];
	static bool low[1024];
	struct zm_pages *p;
	pthread_t t;
	zm_pfn_t x;
	void *ret;

	(void)st;
	assert_int_equal(zm_pages_create(&c, &p), 0);
	if (zm_pages_page_size(p) != 4096) {
		zm_pages_destroy(p);
		skip();
	}
	/* this thread's cache first: its home is zone 0 */
	assert_int_equal(zm_pages_alloc(p, &x), 0);
	assert_true(x < 2048);
	assert_int_equal(zm_pages_free(p, x), 0);
	zm_pages_flush_thread(p);
	assert_int_equal(pthread_create(&t, NULL, free_512_in_zone_1, p), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	/* zone 0's resident free pages out (from this thread's cache, and
	 * the other's first refill, which took them): zm_pages_alloc_at
	 * takes those alone while zone 1 holds resident ones */
	for (zm_pfn_t i = 0; i < 1024; i++)
		low[i] = zm_pages_alloc_at(p, i) == 0;
	assert_int_equal(p->zone[0].nr_dirty_free, 0);
	assert_true(p->zone[1].nr_dirty_free >= 400);
	zm_pages_stats(p, &s0);
	/* growing in place into clean memory: refused */
	assert_int_equal(zm_pages_alloc_at_run(p, 1500, 4), -EBUSY);
	/* an empty cache's refill */
	assert_int_equal(zm_pages_alloc(p, &x), 0);
	assert_true(x >= 2048);
	/* runs */
	for (int i = 0; i < 40; i++) {
		assert_int_equal(zm_pages_alloc_run(p, 8, &run[i]), 0);
		assert_true(run[i] >= 2048);
		for (unsigned k = 1; k < 8; k++)
			assert_int_equal(zm_pages_take_cached(p, run[i] + k), 0);
	}
	zm_pages_stats(p, &s1);
	assert_int_equal(s1.prefaulted_pages, s0.prefaulted_pages);
	assert_int_equal(zm_pages_check(p), 0);
	assert_int_equal(zm_pages_free(p, x), 0);
	for (int i = 0; i < 40; i++)
		for (unsigned k = 0; k < 8; k++)
			assert_int_equal(zm_pages_free(p, run[i] + k), 0);
	for (zm_pfn_t i = 0; i < 1024; i++)
		if (low[i])
			assert_int_equal(zm_pages_free(p, i), 0);
	zm_pages_flush_thread(p);
	assert_int_equal(zm_pages_check(p), 0);
	zm_pages_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_bad),
		cmocka_unit_test(test_page_sizes),
		cmocka_unit_test(test_meta),
		cmocka_unit_test(test_orders),
		cmocka_unit_test(test_bad_frees),
		cmocka_unit_test(test_exhaust),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_memory_returns),
		cmocka_unit_test(test_trim_keeps_reserve),
		cmocka_unit_test(test_prefault),
		cmocka_unit_test(test_prefault_cached),
		cmocka_unit_test(test_no_return_when_asked),
		cmocka_unit_test(test_small_bulk),
		cmocka_unit_test(test_stats_and_thread_exit),
		cmocka_unit_test(test_alloc_at_resident_first),
		cmocka_unit_test(test_alloc_at_clean_in_dirty_block),
		cmocka_unit_test(test_alloc_at_run),
		cmocka_unit_test(test_thread_prefault),
		cmocka_unit_test(test_decommit_many),
		cmocka_unit_test(test_trim_takes_idle_cache),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_take_cached),
		cmocka_unit_test(test_alloc_run),
		cmocka_unit_test(test_alloc_run_limit_and_no_cache),
		cmocka_unit_test(test_no_cache),
		cmocka_unit_test(test_checker_catches),
		cmocka_unit_test(test_zones),
		cmocka_unit_test(test_zones_limit),
		cmocka_unit_test(test_resident_in_other_zone_first),
	};

	return cmocka_run_group_tests_name("pages", tests, NULL, NULL);
}
