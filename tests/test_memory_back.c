/*
 * Memory goes back to the system after frees: what stays resident after a
 * mass free is bounded by what the pool still holds, mapping by mapping
 * (mincore: the pages the process really has), not by the high-water mark.
 * docs/results/2026-12-02-memory-back.md has the figures these bounds come
 * from (zmem churn).
 *
 * Each test names the mutation it was checked against, as test_policy.c.
 */
#define ZMEM_ADVANCED  /* zm_pages_* of a pool */
#include <sys/mman.h>
#include <unistd.h>

#include "pooltest.h"
#include <zmem/pages.h>
#include "pool/pool_internal.h" /* the pool's pages instance */

#define PS 4096

static uint64_t g_seed;

/* Pages of [addr, addr + len) the process has resident (mincore). */
static size_t resident_pages(const void *addr, size_t len)
{
	size_t os = (size_t)sysconf(_SC_PAGESIZE), n = (len + os - 1) / os, r = 0;
	unsigned char *vec = malloc(n);

	assert_non_null(vec);
	assert_int_equal(mincore((void *)addr, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	free(vec);
	return r;
}

/* The arena's resident pages. */
static size_t arena_resident(struct zm_pages *pg)
{
	struct zm_pages_stats s;

	zm_pages_stats(pg, &s);
	return resident_pages(zm_pages_addr(pg, 0), s.total_pages * s.page_size);
}

struct filled {
	struct zm_pool *p;
	zm_handle_t *h;
	size_t n, live;  /* objects made; live bytes after the frees */
};

/* A zsmalloc pool of its own (the default compactor) with n objects of
 * realistic sizes, written; then a random `percent` of them freed. */
static void fill_and_free(struct filled *f, size_t n, unsigned percent)
{
	struct zm_pool_config c = { .arena_bytes = 1u << 30 };
	static uint8_t buf[PS];
	struct rng r;

	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(zm_pool_create(&c, &f->p), 0);
	f->h = calloc(n, sizeof(*f->h));
	assert_non_null(f->h);
	f->n = n;
	f->live = 0;
	rng_seed(&r, g_seed);
	for (size_t i = 0; i < n; i++) {
		size_t sz = pt_size(&r, PS);

		f->h[i] = zm_pool_alloc(f->p, sz);
		assert_true(f->h[i] != 0);
		assert_int_equal(zm_pool_write(f->p, f->h[i], buf, sz), 0);
	}
	for (size_t i = 0; i < n; i++) {
		if (rng_below(&r, 100) < percent) {
			assert_int_equal(zm_pool_free(f->p, f->h[i]), 0);
			f->h[i] = 0;
		} else {
			f->live += zm_pool_obj_size(f->p, f->h[i]);
		}
	}
}

static void filled_done(struct filled *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->h[i])
			assert_int_equal(zm_pool_free(f->p, f->h[i]), 0);
	assert_int_equal(zm_pool_check(f->p), 0);
	zm_pool_destroy(f->p);
	free(f->h);
}

/* Wait (up to 10 s, polling) until ok(f) holds; false if it never did. */
static bool wait_for(struct filled *f, bool (*ok)(struct filled *))
{
	for (int t = 0; t < 1000; t++) {
		if (ok(f))
			return true;
		usleep(10 * 1000);
	}
	return ok(f);
}

/* This thread's page cache may keep the pages it freed into it (a
 * stack of 64): the pool cannot take those back from another thread. */
#define USER_CACHE 64

static bool arena_follows_pool(struct filled *f)
{
	struct zm_pool_stats st;

	zm_pool_stats(f->p, &st);
	return st.compactions && arena_resident(f->p->pages) <= st.pool_pages + USER_CACHE;
}

/*
 * After a mass free the background compactor packs the pool, and the
 * pages it freed go back to the OS at once: the arena's resident pages
 * are the pool's pages and at most this thread's cache, with nothing
 * left in the compactor thread's cache or in the zones' reserves.
 * 12,000 objects (about 17 MiB), 75% freed.
 *
 * Catches: the compactor not flushing its own cache after an episode (64
 * pages more), not trimming the pages layer after it (the zones'
 * reserves: up to 2 x (256 + 64) pages before the reserve scaled).
 */
static void test_compaction_gives_pages_back(void **st)
{
	struct filled f;
	struct zm_pool_stats s;
	size_t res;
	bool ok;

	fill_and_free(&f, 12000, 75);
	ok = wait_for(&f, arena_follows_pool);
	zm_pool_stats(f.p, &s);
	res = arena_resident(f.p->pages);
	printf("after the frees: %zu KiB live, pool %llu pages, arena %zu pages resident, "
	       "%llu compactions\n", f.live >> 10, (unsigned long long)s.pool_pages, res,
	       (unsigned long long)s.compactions);
	if (!ok)
		fail_msg("arena %zu pages resident for %llu pool pages (+%d this thread's cache)",
			 res, (unsigned long long)s.pool_pages, USER_CACHE);
	filled_done(&f);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compaction_gives_pages_back),
	};

	test_args(argc, argv, &g_seed, NULL);
	return cmocka_run_group_tests_name("memory_back", tests, NULL, NULL);
}
