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
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pooltest.h"
#include <zmem/pages.h>
#include "pool/pool_internal.h" /* the pool's pages instance */
#include "pool/zsmalloc/zsmalloc.h"      /* its record pages and tables */
#include "pages/pages_internal.h" /* the pages layer's records */

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

/* The pools' mixed_zspages (zm_pool_config): 0, the default. */
static int g_mixed;

/* A zsmalloc pool of its own (the default compactor) with n objects of
 * realistic sizes, written; then a random `percent` of them freed. */
static void fill_and_free(struct filled *f, size_t n, unsigned percent)
{
	struct zm_pool_config c = { .arena_bytes = 1u << 30, .mixed_zspages = g_mixed };
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

static bool arena_follows_pool(struct filled *f)
{
	struct zm_pool_stats st;

	zm_pool_stats(f->p, &st);
	return st.compactions && arena_resident(f->p->pages) <= st.pool_pages;
}

/*
 * After a mass free the background compactor packs the pool, and the
 * pages it freed go back to the OS at once: the arena's resident pages
 * are the pool's pages, with nothing left in the compactor thread's
 * cache, in this (now idle) thread's cache or in the zones' reserves.
 * 12,000 objects (about 17 MiB), 75% freed.
 *
 * Catches: the compactor not flushing its own cache after an episode (64
 * pages more), not taking back this thread's (up to 64), not trimming
 * the pages layer after it (the zones' reserves: up to 2 x (256 + 64)
 * pages before the reserve scaled).
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
		fail_msg("arena %zu pages resident for %llu pool pages", res,
			 (unsigned long long)s.pool_pages);
	filled_done(&f);
}

/* Record pages: resident, and what their records need (a page's worth
 * of slots for each bucket's records, rounded up: a bucket a shard and
 * size). */
static void record_pages(struct zs_pool *zp, size_t *resident, size_t *need, size_t *npages)
{
	struct zs_records *r = &zp->rec;
	size_t slots_hdr = r->page - r->hdr;

	*resident = r->base ? resident_pages(r->base, r->bytes) : 0;
	*need = *npages = 0;
	for (unsigned sh = 0; sh < ZS_MAX_SHARDS; sh++)
		for (unsigned i = 0; r->b[sh] && i < ZS_REC_BUCKETS; i++) {
			struct zs_rbucket *b = r->b[sh][i];
			size_t per;

			if (!b)
				continue;
			zmi_lock(&b->lock);
			per = slots_hdr / ((i + 1) * 64u);
			*need += (b->used + per - 1) / per;
			*npages += b->npages;
			zmi_unlock(&b->lock);
		}
}

static bool records_packed(struct filled *f)
{
	size_t res, need, np;

	record_pages(zs_of(f->p), &res, &need, &np);
	return res <= need + 1;
}

/*
 * zspage records live in pages of the pool's own (zsmalloc/record.c): after a
 * mass free and the compaction that follows, the records left move out
 * of the sparsest pages and those pages go back, so the resident record
 * pages are what the live records fill (+1 for a bucket's last page
 * being counted twice at most), not the high-water mark.  From malloc
 * they stayed where they were: 400 MiB of zmem churn kept 2,904 KiB of
 * heap for 578 KiB of records.
 *
 * Catches: the records not compacted (pages stay as sparse as the frees
 * left them), empty record pages not decommitted.
 */
static void test_records_shrink(void **st)
{
	struct filled f;
	size_t full_res, res, need, np;
	bool ok;

	/* class zspages: a record each (a fill into mixed zspages has a
	 * record for 300-odd objects, and its records grow when the
	 * compactor moves the objects left into their classes) */
	g_mixed = -1;
	fill_and_free(&f, 12000, 0);
	record_pages(zs_of(f.p), &full_res, &need, &np);
	filled_done(&f);
	fill_and_free(&f, 12000, 75);
	g_mixed = 0;
	ok = wait_for(&f, records_packed);
	record_pages(zs_of(f.p), &res, &need, &np);
	printf("record pages: %zu resident full, %zu after the frees (%zu held, %zu needed)\n",
	       full_res, res, np, need);
	if (!ok)
		fail_msg("%zu record pages resident for %zu needed", res, need);
	assert_true(res < full_res);
	filled_done(&f);
}

/* A thread holding a map of one object through a compaction. */
struct holder {
	struct zm_pool *p;
	zm_handle_t h;
	uint8_t mark;
	size_t sz;               /* the bytes marked (a move may give the
				    object a larger slot) */
	pthread_barrier_t *bar;  /* mapped; compacted; checked */
	int bad;
};

static void *hold(void *arg)
{
	struct holder *x = arg;
	size_t sz = x->sz = zm_pool_obj_size(x->p, x->h);
	uint8_t *m = zm_pool_map(x->p, x->h, ZM_MAP_RW);

	if (m)
		memset(m, x->mark, sz);
	else
		x->bad = 1;
	pthread_barrier_wait(x->bar);
	pthread_barrier_wait(x->bar);   /* the pool compacted meanwhile */
	for (size_t b = 0; m && b < sz; b++)
		x->bad |= m[b] != x->mark;
	if (m)
		zm_pool_unmap(x->p, x->h);
	return NULL;
}

/*
 * A mapped object's record is never moved: the mover leaves a record a
 * hazard names (the reader may be using it), and moves it once unmapped.
 * 8 threads each hold one object of a sparse pool mapped (a pool allows 2
 * maps a thread) through an explicit compaction: their bytes and the pool
 * stay whole; unmapped, the next compaction packs the records.
 *
 * Catches: moving hazarded records (the mapped pointer's record reused:
 * the checker or ASan sees it), a reader's lookup not checking the
 * zspage table (a stale record used after the move).
 */
static void test_records_mapped_stay(void **st)
{
	enum { N = 12000, M = 8 };
	struct filled f;
	struct holder x[M];
	pthread_t t[M];
	pthread_barrier_t bar;
	size_t nh = 0, res, need, np;

	fill_and_free(&f, N, 75);
	zm_pool_set_compaction(f.p, ZM_COMPACT_OFF);
	pthread_barrier_init(&bar, NULL, M + 1);
	for (size_t i = 0; nh < M; i += N / M)
		for (size_t j = i; j < N; j++)
			if (f.h[j]) {
				x[nh] = (struct holder){ f.p, f.h[j], (uint8_t)(nh + 1), 0, &bar, 0 };
				assert_int_equal(pthread_create(&t[nh], NULL, hold, &x[nh]), 0);
				nh++;
				break;
			}
	pthread_barrier_wait(&bar);
	assert_true(zm_pool_compact(f.p) >= 0);
	pthread_barrier_wait(&bar);
	for (size_t k = 0; k < nh; k++) {
		pthread_join(t[k], NULL);
		assert_int_equal(x[k].bad, 0);
	}
	pthread_barrier_destroy(&bar);
	assert_int_equal(zm_pool_check(f.p), 0);
	assert_true(zm_pool_compact(f.p) >= 0);
	record_pages(zs_of(f.p), &res, &need, &np);
	printf("mapped through compaction: %zu objects; record pages %zu resident, %zu needed\n",
	       nh, res, need);
	assert_true(res <= need + 1);
	for (size_t k = 0; k < nh; k++) {
		uint8_t buf[PS];
		size_t sz = x[k].sz;

		assert_true(zm_pool_obj_size(f.p, x[k].h) >= sz);
		assert_int_equal(zm_pool_read(f.p, x[k].h, buf, sz), 0);
		for (size_t b = 0; b < sz; b++)
			assert_int_equal(buf[b], x[k].mark);
	}
	filled_done(&f);
}

/*
 * The pages layer gives back its own records with the memory: a free
 * largest-order block (4 MiB) that trimming made clean leaves the lists
 * and its page records (8 bytes a page) and the owners' records (24) go
 * back to the OS (pages_internal.h: bare blocks).  64 MiB taken, written
 * and freed, then trimmed: the records' pages, 128 KiB of them at the
 * high-water mark, go back but for the zone's partly used block; taken
 * again, the pages and their records come back.
 *
 * Catches: bare blocks not made (the records stay: 32 pages), a bare
 * block's head record written or read after it went back (mincore sees
 * the page: the read maps the zero page: 16 pages).
 */
static void test_pages_records_back(void **st)
{
	enum { N = 16384 };
	struct zm_pages_config c = { .arena_bytes = 1u << 30, .zones = 1 };
	static zm_pfn_t v[N];
	struct zm_pages *pg;
	size_t full, after, again;

	assert_int_equal(zm_pages_create(&c, &pg), 0);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(zm_pages_alloc(pg, &v[i]), 0);
		memset(zm_pages_addr(pg, v[i]), 0x5a, PS);
	}
	full = resident_pages(pg->pg, pg->pg_bytes);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(zm_pages_free(pg, v[i]), 0);
	zm_pages_flush_thread(pg);
	zm_pages_trim(pg);
	zm_pages_trim_idle(pg);
	after = resident_pages(pg->pg, pg->pg_bytes);
	assert_int_equal(arena_resident(pg), 0);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(zm_pages_alloc(pg, &v[i]), 0);
		memset(zm_pages_addr(pg, v[i]), 0x5a, PS);
	}
	again = resident_pages(pg->pg, pg->pg_bytes);
	printf("page records: %zu pages resident with %d pages out, %zu all freed, %zu out again\n",
	       full, N, after, again);
	assert_true(full >= N * 8 / PS);
	assert_true(after <= 1);
	assert_true(again >= N * 8 / PS && again <= full + 2);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(zm_pages_free(pg, v[i]), 0);
	assert_int_equal(zm_pages_check(pg), 0);
	zm_pages_destroy(pg);
}

/* Resident pages of a pool's metadata mappings. */
struct meta_res {
	size_t slots, ztab, pg, recs;
};

static void meta_resident(struct zm_pool *p, struct meta_res *m)
{
	struct zs_pool *zp = zs_of(p);
	size_t res, need, np;

	m->slots = resident_pages(zp->slot, (size_t)ZS_MAX_HANDLES * sizeof(uint64_t));
	m->ztab = resident_pages(zp->ztab, (size_t)ZS_MAX_ZSPAGES * sizeof(uintptr_t));
	m->pg = resident_pages(p->pages->pg, p->pages->pg_bytes);
	record_pages(zp, &res, &need, &np);
	m->recs = res;
}

/*
 * Freeing everything gives back the metadata too, in whole pages: the
 * handle table's and the zspage table's pages whose entries are all
 * free, the pages layer's records of free blocks given back to the OS,
 * the record pages; what stays is a page or two of each (the entries of
 * the spans the shards still hold, the records of the blocks' heads).
 * 12,000 objects (about 17 MiB: 12,000 handle slots, 94 KiB), all freed,
 * then zm_pool_compact and zm_pages_trim.
 *
 * Catches: table pages of free entries kept (the high-water mark: 24 of
 * the handle table), page records of trimmed blocks kept (10 pages).
 */
static void test_free_all_metadata(void **st)
{
	struct filled f;
	struct meta_res full, after;
	size_t arena;

	fill_and_free(&f, 12000, 0);
	meta_resident(f.p, &full);
	for (size_t i = 0; i < f.n; i++) {
		assert_int_equal(zm_pool_free(f.p, f.h[i]), 0);
		f.h[i] = 0;
	}
	zm_pool_compact(f.p);
	zm_pages_flush_thread(f.p->pages);
	zm_pages_trim(f.p->pages);
	zm_pages_trim_idle(f.p->pages);
	meta_resident(f.p, &after);
	arena = arena_resident(f.p->pages);
	printf("resident pages, full -> all freed: handle table %zu -> %zu, zspage table %zu "
	       "-> %zu, page records %zu -> %zu, record pages %zu -> %zu; arena %zu\n",
	       full.slots, after.slots, full.ztab, after.ztab, full.pg, after.pg, full.recs,
	       after.recs, arena);
	assert_int_equal(arena, 0);
	assert_true(after.slots <= 2);
	assert_true(after.ztab <= 2);
	assert_true(after.pg <= 2);
	assert_int_equal(after.recs, 0);
	filled_done(&f);
}

/*
 * A handle stays stale when its slot's page of the handle table went
 * back to the OS and came back: the page's slots start again at the
 * generation after the last they had (zsmalloc/handle.c, tfree_take), not at
 * zero, which a first-generation handle would match.  12,000 objects
 * made, all freed and the tables trimmed, as many made again: every old
 * handle is refused (zm_pool_free -EINVAL), the new ones are whole.
 *
 * Catches: a page coming back with its slots at generation 0 (every
 * first-generation handle of it is taken for a live one).
 */
static void test_table_pages_keep_generations(void **st)
{
	enum { N = 12000 };
	struct filled f;
	zm_handle_t *old = malloc(N * sizeof(*old));
	struct zm_pool_stats s0, s1;
	long refused = 0;

	assert_non_null(old);
	fill_and_free(&f, N, 0);
	memcpy(old, f.h, N * sizeof(*old));
	zm_pool_stats(f.p, &s0);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(zm_pool_free(f.p, f.h[i]), 0);
		f.h[i] = 0;
	}
	zm_pool_compact(f.p);
	zm_pool_stats(f.p, &s1);
	printf("handle table: %llu bytes with %d objects, %llu all freed\n",
	       (unsigned long long)s0.handle_bytes, N, (unsigned long long)s1.handle_bytes);
	assert_true(s1.handle_bytes * 8 < s0.handle_bytes);
	for (size_t i = 0; i < N; i++) {
		f.h[i] = zm_pool_alloc(f.p, 100 + i % 3000);
		assert_true(f.h[i] != 0);
	}
	for (size_t i = 0; i < N; i++)
		refused += zm_pool_free(f.p, old[i]) == -EINVAL;
	printf("%ld of %d stale handles refused after their pages came back\n", refused, N);
	assert_int_equal(refused, N);
	free(old);
	filled_done(&f);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pages_records_back),
		cmocka_unit_test(test_compaction_gives_pages_back),
		cmocka_unit_test(test_records_shrink),
		cmocka_unit_test(test_records_mapped_stay),
		cmocka_unit_test(test_free_all_metadata),
		cmocka_unit_test(test_table_pages_keep_generations),
	};

	test_args(argc, argv, &g_seed, NULL);
	return cmocka_run_group_tests_name("memory_back", tests, NULL, NULL);
}
