/*
 * Mixed zspages (zsmalloc/zsmalloc.h): objects of many sizes packed back
 * to back in one zspage, each behind a 6-byte header, read back whole;
 * the checker catching a corrupted header; compaction moving the objects
 * of sparse mixed zspages into their classes, or packing those a mass
 * free left into new mixed zspages; owner keys and units of
 * objects that share a mixed zspage; and the switch.
 *
 *   test_mixed [--seed N]
 */
#define ZMEM_ADVANCED  /* owner keys, units */
#include <errno.h>
#include <string.h>

#include "pooltest.h"
#include "pool/pool_internal.h"
#include "pool/zsmalloc/zsmalloc.h"   /* the header layout */

#define PS 4096
static uint64_t g_seed;

static struct zm_pool *mk(int mixed, enum zm_compact_policy pol, uint64_t *words,
			  uint64_t nwords)
{
	struct zm_pool_config c = { .compact = pol, .arena_bytes = 1u << 30,
				    .mixed_zspages = mixed, .words = words, .nwords = nwords };
	struct zm_pool *p;

	assert_int_equal(zm_pool_create(&c, &p), 0);
	return p;
}

/* The mixed zspages' row (after the huge class), or a zero row. */
static struct zm_pool_class_stats mixed_row(struct zm_pool *p)
{
	struct zm_pool_class_stats cs;
	unsigned n = zm_pool_nr_classes(p);

	memset(&cs, 0, sizeof(cs));
	if (n && zm_pool_class_stats(p, n - 1, &cs) == 0 && cs.size == ZS_GRANULE)
		return cs;
	memset(&cs, 0, sizeof(cs));
	return cs;
}

static uint64_t mixed_zspages(struct zm_pool *p)
{
	struct zm_pool_class_stats cs = mixed_row(p);
	uint64_t n = 0;

	for (int g = 0; g < 11; g++)
		n += cs.fullness[g];
	return n;
}

static void alloc_obj(struct zm_pool *p, struct pt_obj *o, size_t size, uint64_t cookie)
{
	uint8_t buf[PS];

	o->size = size;
	o->cookie = cookie;
	o->h = zm_pool_alloc(p, size);
	assert_true(o->h != 0);
	pt_fill(buf, size, cookie);
	assert_int_equal(zm_pool_write(p, o->h, buf, size), 0);
}

static void verify(struct zm_pool *p, const struct pt_obj *o, size_t n, struct rng *r)
{
	uint8_t buf[PS];

	for (size_t i = 0; i < n; i++)
		if (o[i].h && pt_check_obj(p, &o[i], buf, r))
			fail_msg("object %zu (%zu bytes) not whole", i, o[i].size);
}

/*
 * Objects of 65 to 3064 bytes, in steps that hit every remainder of 8,
 * fill one mixed zspage back to back: each reads back whole (read and
 * every map mode, straddling pages or not), reports its own length,
 * refuses a write past it, and the checker is clean.  No class zspage is
 * made (pool pages are the mixed zspage's only).
 *
 * Catches: a header read from the wrong page (objects whose data start a
 * page), lengths rounded to a class, granule arithmetic off by one (a
 * neighbour's header overwritten: the checker and the reads see it).
 */
static void test_many_sizes(void **st)
{
	enum { N = 120 };
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	static struct pt_obj o[N];
	struct zm_pool_stats s;
	uint8_t buf[PS];
	struct rng r;
	size_t end = 0;

	(void)st;
	rng_seed(&r, g_seed);
	for (size_t i = 0; i < N; i++) {
		/* from 65 bytes: smaller ones may go to their class */
		size_t size = 65 + (i * 25 + i % 8) % 3000;
		size_t take = (6 + size + 3) / 4 * 4;  /* header and data, in 4s */

		alloc_obj(p, &o[i], size, i + 1);
		if (end % PS + 6 > PS)  /* no header straddles a page */
			end += 4;
		end += take;
	}
	assert_int_equal(mixed_zspages(p), 1);
	zm_pool_stats(p, &s);
	assert_int_equal(s.zspages, 1);
	assert_int_equal(s.objects, N);
	/* granules and headers (and any granule skipped at a page's end),
	 * nothing rounded to a class */
	assert_int_equal(s.slot_bytes, end);
	assert_int_equal(s.pool_pages, (end + PS - 1) / PS);
	for (int round = 0; round < 4; round++)
		verify(p, o, N, &r);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(zm_pool_obj_size(p, o[i].h), o[i].size);
		assert_int_equal(zm_pool_write(p, o[i].h, buf, o[i].size + 1), -EINVAL);
	}
	verify(p, o, N, &r);
	assert_int_equal(zm_pool_check(p), 0);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(zm_pool_free(p, o[i].h), 0);
	zm_pool_stats(p, &s);
	assert_int_equal(s.pool_pages, 0);
	assert_int_equal(s.zspages, 0);
	zm_pool_destroy(p);
}

/*
 * Two objects that end 4 bytes short of a page (2,048 + 2,044 bytes with
 * their headers): a third one's header would straddle the page, so it
 * starts the next page, its data 6 bytes in; all three read back whole
 * through every map mode, the checker walks past the skipped granule,
 * and a compaction of the three (all but one freed first) moves the
 * third from there.
 *
 * Catches: a header written across two pages, a walk (checker,
 * compactor, units) that does not skip the granule the allocator
 * skipped.
 */
static void test_header_skips_page_end(void **st)
{
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	struct pt_obj o[4];
	struct zm_pool_stats s;
	struct rng r;
	char *m;

	(void)st;
	rng_seed(&r, g_seed);
	alloc_obj(p, &o[0], 2040, 1);
	alloc_obj(p, &o[1], 2038, 2);
	alloc_obj(p, &o[2], 1000, 3);
	alloc_obj(p, &o[3], 500, 4);
	assert_int_equal(mixed_zspages(p), 1);
	m = zm_pool_map(p, o[2].h, ZM_MAP_RO);
	assert_non_null(m);
	assert_int_equal(((uintptr_t)m & (PS - 1)), ZS_MHDR_BYTES);
	zm_pool_unmap(p, o[2].h);
	zm_pool_stats(p, &s);
	assert_int_equal(s.pool_pages, 2);
	assert_int_equal(zm_pool_check(p), 0);
	verify(p, o, 4, &r);
	assert_int_equal(zm_pool_free(p, o[0].h), 0);
	assert_int_equal(zm_pool_free(p, o[1].h), 0);
	assert_int_equal(zm_pool_free(p, o[3].h), 0);
	assert_int_equal(zm_pool_check(p), 0);
	/* one object of four left: packed into a new mixed zspage (its
	 * class has none), which takes one page of the two */
	zm_pool_compact(p);
	assert_int_equal(mixed_zspages(p), 1);
	zm_pool_stats(p, &s);
	assert_int_equal(s.pool_pages, 1);
	assert_int_equal(zm_pool_check(p), 0);
	verify(p, &o[2], 1, &r);
	assert_int_equal(zm_pool_free(p, o[2].h), 0);
	zm_pool_destroy(p);
}

/* The header of a mapped object: the ZS_MHDR_BYTES before it. */
static struct zs_mhdr *header_of(struct zm_pool *p, zm_handle_t h)
{
	char *m = zm_pool_map(p, h, ZM_MAP_RO);

	assert_non_null(m);
	zm_pool_unmap(p, h);
	return (struct zs_mhdr *)(m - ZS_MHDR_BYTES);
}

/*
 * The checker reads every header: a length out of range, one that runs
 * past the zspage's bump, a back reference naming another object's slot
 * (which then does not point back: one object short), each fails it;
 * put back, it passes.  A write into a freed object is a write after
 * free (debug builds poison freed objects).
 *
 * Catches: a checker that trusts the counters or skips headers.
 */
static void test_check_headers(void **st)
{
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	struct pt_obj o[8];
	struct zs_mhdr *hd, save;

	(void)st;
	for (int i = 0; i < 8; i++)
		alloc_obj(p, &o[i], 100 + 37 * (size_t)i, (uint64_t)i + 1);
	assert_int_equal(zm_pool_check(p), 0);
	hd = header_of(p, o[3].h);
	save = *hd;
	assert_int_equal(hd->len, o[3].size);
	hd->len = 0;
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	hd->len = PS;
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	*hd = save;
	hd->len = save.len + ZS_GRANULE;   /* a granule more: the next header shifts */
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	*hd = save;
	hd->ref = header_of(p, o[4].h)->ref;
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	*hd = save;
	assert_int_equal(zm_pool_check(p), 0);
#if ZM_DEBUG >= 2
	{
		char *m = zm_pool_map(p, o[5].h, ZM_MAP_RO);

		zm_pool_unmap(p, o[5].h);
		assert_int_equal(zm_pool_free(p, o[5].h), 0);
		o[5].h = 0;
		assert_int_equal(zm_pool_check(p), 0);
		m[10] ^= 1;
		assert_int_equal(zm_pool_check(p), -EUCLEAN);
		m[10] ^= 1;
		assert_int_equal(zm_pool_check(p), 0);
	}
#endif
	for (int i = 0; i < 8; i++)
		if (o[i].h)
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
	zm_pool_destroy(p);
}

/* n objects of realistic sizes below 3,000 bytes (those above folded
 * down), cookies 1 .. n. */
static void fill_sizes(struct zm_pool *p, struct pt_obj *o, size_t n, struct rng *r)
{
	for (size_t i = 0; i < n; i++) {
		size_t size = pt_size(r, PS);

		alloc_obj(p, &o[i], size > 3000 ? size % 3000 + 1 : size, i + 1);
	}
}

/* Free each of the n objects but one in k, at random; the live bytes. */
static uint64_t free_but_one_in(struct zm_pool *p, struct pt_obj *o, size_t n, unsigned k,
				struct rng *r)
{
	uint64_t live = 0;

	for (size_t i = 0; i < n; i++)
		if (rng_below(r, k)) {
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
			o[i].h = 0;
		} else {
			live += o[i].size;
		}
	return live;
}

/*
 * Holes reused: 6,000 objects of realistic sizes fill mixed zspages (no
 * compactor: nothing moves), 3 in 4 are freed at random, then 2,000 new
 * objects, each half as long as one of those freed, are allocated: they
 * take the holes the frees left, and the pool takes no page for them.
 * Every object reads back whole and the checker (which walks each
 * zspage's hole lists) is clean; freeing the new ones and allocating
 * again reuses their holes in turn.
 *
 * Catches: frees whose granules are never used again (the new objects
 * take new pages at the tails: with the hole index disabled the pool
 * grew by dozens of pages), a hole taken whole by a smaller object with
 * no header for its rest (the walks lose step: reads and the checker
 * fail), a rest too short for a header.
 */
static void test_holes_reused(void **st)
{
	enum { N = 6000, M = 2000 };
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	static struct pt_obj o[N], x[M];
	struct zm_pool_stats s0, s1;
	struct rng r;
	size_t m = 0;

	(void)st;
	rng_seed(&r, g_seed);
	fill_sizes(p, o, N, &r);
	for (size_t i = 0; i < N; i++)
		if (rng_below(&r, 4)) {
			if (m < M) {
				x[m].size = o[i].size / 2 + 1;
				m++;
			}
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
			o[i].h = 0;
		}
	assert_int_equal(m, M);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_stats(p, &s0);
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < M; i++)
			alloc_obj(p, &x[i], x[i].size, 100000 + round * M + i);
		zm_pool_stats(p, &s1);
		print_message("holes: %zu objects in a pool of %llu pages: %llu pages after\n",
			      (size_t)M, (unsigned long long)s0.pool_pages,
			      (unsigned long long)s1.pool_pages);
		assert_true(s1.pool_pages == s0.pool_pages);
		assert_int_equal(zm_pool_check(p), 0);
		verify(p, o, N, &r);
		verify(p, x, M, &r);
		if (round == 0)
			for (size_t i = 0; i < M; i++)
				assert_int_equal(zm_pool_free(p, x[i].h), 0);
	}
	zm_pool_destroy(p);
}

/*
 * A zspage whose holes took smaller objects is kept while its live
 * objects' granules are 3/4 of it or more: 600 objects of 1,000 bytes
 * fill mixed zspages; two in five of the first zspage's are freed and as
 * many objects of 600 bytes take their holes, each leaving a rest with a
 * header of its own.  Its objects are then 84% of its granules but 5/7
 * of its headers (71%): zm_pool_compact moves nothing.
 *
 * Mutation: the compactor's test by objects live against headers placed
 * (as before holes were reused): it evacuated the zspage, all 260 of
 * its objects moved.
 */
static void test_holes_not_sparse(void **st)
{
	enum { N = 600 };
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	static struct pt_obj o[N], x[N];
	struct zm_pool_stats s0, s1;
	size_t na, nx = 0, pages;
	struct rng r;

	(void)st;
	rng_seed(&r, g_seed + 5);
	for (size_t i = 0; i < N; i++)
		alloc_obj(p, &o[i], 1000, i + 1);
	na = (size_t)zm_pool_unit(p, o[0].h, NULL, 0, &pages);
	assert_true(na > 100 && na < N);
	for (size_t i = 0; i < na; i++)
		if (i % 5 == 1 || i % 5 == 3) {
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
			o[i].h = 0;
			nx++;
		}
	for (size_t i = 0; i < nx; i++)
		alloc_obj(p, &x[i], 600, N + i + 1);
	assert_int_equal(zm_pool_unit(p, o[0].h, NULL, 0, &pages), (long)na);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_stats(p, &s0);
	zm_pool_compact(p);
	zm_pool_stats(p, &s1);
	print_message("holes: %zu of %zu objects' holes refilled smaller: %llu moved\n", nx, na,
		      (unsigned long long)(s1.objects_moved - s0.objects_moved));
	assert_int_equal(s1.objects_moved - s0.objects_moved, 0);
	verify(p, o, N, &r);
	verify(p, x, nx, &r);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
}

/*
 * 6,000 objects of realistic sizes fill mixed zspages; half are freed at
 * random, which leaves every mixed zspage below 3/4 of its objects live
 * and the sparse ones above a third together (frees that thin them, not
 * a mass free: test_compact_repacks).
 * zm_pool_compact moves the rest into their classes and frees the mixed
 * zspages: their pages go, the objects read back whole, the pool's
 * memory falls to what class zspages need, and the checker is clean.
 * Then a fresh object of a class that has zspages goes there, not to a
 * new mixed zspage.
 *
 * Catches: a compactor that skips mixed zspages (their pages stay), a
 * move that copies the slot's size instead of the object's, back
 * references not rewritten (reads see old bytes, the checker fails), a
 * count of pages freed that leaves out the pages the objects took.
 */
static void test_compact_into_classes(void **st)
{
	enum { N = 6000 };
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	static struct pt_obj o[N];
	struct zm_pool_stats s0, s1, s2;
	struct zm_pool_class_stats cs;
	struct rng r;
	uint64_t live;
	long freed;

	(void)st;
	rng_seed(&r, g_seed + 1);
	fill_sizes(p, o, N, &r);
	zm_pool_stats(p, &s0);
	assert_true(mixed_zspages(p) > 10);
	live = free_but_one_in(p, o, N, 2, &r);
	zm_pool_stats(p, &s1);
	freed = zm_pool_compact(p);
	zm_pool_stats(p, &s2);
	cs = mixed_row(p);
	printf("mixed: %llu pages full, %llu after half freed, %ld freed by compaction: "
	       "%llu pages (%llu mixed), %llu objects moved, overhead %.3f\n",
	       (unsigned long long)s0.pool_pages, (unsigned long long)s1.pool_pages, freed,
	       (unsigned long long)s2.pool_pages, (unsigned long long)cs.pages_used,
	       (unsigned long long)s2.objects_moved,
	       (double)(s2.pool_bytes + s2.meta_bytes) / (double)live);
	assert_true(freed > 0);
	/* net of the class pages the objects took */
	assert_int_equal(freed, (long)(s1.pool_pages - s2.pool_pages));
	assert_true(s2.objects_moved >= N / 2 - 200);
	assert_int_equal(cs.pages_used, 0);
	assert_true((double)(s2.pool_bytes + s2.meta_bytes) < 1.15 * (double)live);
	assert_int_equal(zm_pool_check(p), 0);
	verify(p, o, N, &r);
	/* a class with zspages now (an object's slot size says which): its
	 * next object goes there */
	for (size_t i = 0; i < N; i++)
		if (o[i].h) {
			struct pt_obj x;

			alloc_obj(p, &x, zm_pool_obj_size(p, o[i].h), 777);
			assert_int_equal(mixed_zspages(p), 0);
			assert_int_equal(zm_pool_free(p, x.h), 0);
			break;
		}
	for (size_t i = 0; i < N; i++)
		if (o[i].h)
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
	zm_pool_stats(p, &s2);
	assert_int_equal(s2.objects, 0);
	assert_int_equal(s2.pool_pages, 0);
	zm_pool_destroy(p);
}

/* Pages of the pool's class zspages (every row but the mixed one). */
static uint64_t class_pages(struct zm_pool *p)
{
	struct zm_pool_stats s;

	zm_pool_stats(p, &s);
	return s.pool_pages - mixed_row(p).pages_used;
}

/*
 * The same fill with three quarters freed at random, which leaves the
 * mixed zspages below a third of their objects live: zm_pool_compact
 * packs the rest into new mixed zspages, back to back, rather than into
 * their classes: no class zspage is made (those of objects of 64 bytes or
 * less, which keep to classes, were there from the fill), and the pool's
 * memory is within 8% of the live bytes (about 6% here; in the classes it
 * would be about 12% above: the slot sizes and each class's partly used
 * last zspage).
 * From then on new objects go to their classes (churn would leave holes
 * in the packed zspages); once the pool holds nothing, a new object goes
 * to a mixed zspage again, also when its last page was a huge object's.
 *
 * Catches: a compactor that moves a mass free's objects into their
 * classes (class pages, the overhead), new objects put into the packed
 * zspages (a mixed zspage for the new object), a shard that stays in
 * classes after it emptied (by any last free, a huge one's too), a move
 * that loses bytes (reads, the checker), pages freed counted gross.
 */
static void test_compact_repacks(void **st)
{
	enum { N = 6000 };
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	static struct pt_obj o[N];
	struct zm_pool_stats s1, s2;
	struct pt_obj x;
	struct rng r;
	uint64_t live, mz, cp0, cp;
	long freed;

	(void)st;
	rng_seed(&r, g_seed + 2);
	fill_sizes(p, o, N, &r);
	cp0 = class_pages(p);   /* objects of 64 bytes or less keep to classes */
	live = free_but_one_in(p, o, N, 4, &r);
	zm_pool_stats(p, &s1);
	freed = zm_pool_compact(p);
	zm_pool_stats(p, &s2);
	mz = mixed_zspages(p);
	printf("repack: %llu pages after three quarters freed, %ld freed by compaction: "
	       "%llu pages (%llu in classes), %llu mixed zspages, %llu objects moved, "
	       "overhead %.3f\n",
	       (unsigned long long)s1.pool_pages, freed, (unsigned long long)s2.pool_pages,
	       (unsigned long long)class_pages(p), (unsigned long long)mz,
	       (unsigned long long)s2.objects_moved,
	       (double)(s2.pool_bytes + s2.meta_bytes) / (double)live);
	assert_true(freed > 0);
	/* net of the mixed pages the objects were packed into */
	assert_int_equal(freed, (long)(s1.pool_pages - s2.pool_pages));
	assert_true(mz > 0);
	cp = class_pages(p);
	assert_true(cp <= cp0);
	assert_true((double)(s2.pool_bytes + s2.meta_bytes) < 1.08 * (double)live);
	assert_int_equal(zm_pool_check(p), 0);
	verify(p, o, N, &r);
	/* a new object goes to its class while the packed zspages stay */
	alloc_obj(p, &x, 1000, 777);
	assert_int_equal(mixed_zspages(p), mz);
	assert_true(class_pages(p) > cp);
	verify(p, &x, 1, &r);
	assert_int_equal(zm_pool_free(p, x.h), 0);
	/* a huge object (a page of its own) outlives the rest */
	alloc_obj(p, &x, PS, 779);
	for (size_t i = 0; i < N; i++)
		if (o[i].h)
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
	zm_pool_stats(p, &s2);
	assert_int_equal(s2.objects, 1);
	assert_int_equal(s2.pool_pages, 1);
	verify(p, &x, 1, &r);
	assert_int_equal(zm_pool_free(p, x.h), 0);
	zm_pool_stats(p, &s2);
	assert_int_equal(s2.objects, 0);
	assert_int_equal(s2.pool_pages, 0);
	/* the pool empty: a new object goes to a mixed zspage again */
	alloc_obj(p, &x, 1000, 778);
	assert_int_equal(mixed_zspages(p), 1);
	assert_int_equal(zm_pool_free(p, x.h), 0);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
}

/*
 * A mapped object's mixed zspage is left alone by the compactor (its
 * hazard), and evacuated by the next compaction once unmapped.
 *
 * Catches: evacuating a zspage a hazard names (the map's bytes would be
 * poisoned and the object elsewhere).
 */
static void test_mapped_stays(void **st)
{
	enum { N = 600 };
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, NULL, 0);
	static struct pt_obj o[N];
	struct rng r;
	uint8_t *m;
	size_t keep = 0;

	(void)st;
	rng_seed(&r, g_seed + 2);
	for (size_t i = 0; i < N; i++)
		alloc_obj(p, &o[i], 500 + rng_below(&r, 1500), i + 1);
	for (size_t i = 0; i < N; i++)
		if (i % 3) {
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
			o[i].h = 0;
		}
	m = zm_pool_map(p, o[keep].h, ZM_MAP_RO);
	assert_non_null(m);
	zm_pool_compact(p);
	assert_true(mixed_zspages(p) >= 1);          /* the mapped one stayed */
	assert_int_equal(pt_check(m, o[keep].size, o[keep].cookie), 0);
	zm_pool_unmap(p, o[keep].h);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_compact(p);
	assert_int_equal(mixed_zspages(p), 0);
	verify(p, o, N, &r);
	assert_int_equal(zm_pool_check(p), 0);
	for (size_t i = 0; i < N; i++)
		if (o[i].h)
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
	zm_pool_destroy(p);
}

/*
 * Owner keys on mixed objects: binding rewrites the header's back
 * reference (the key's word names the object), the unit of any object of
 * a mixed zspage is every live object in it (a key's handle for the bound
 * ones), and compaction moves bound objects through their words.
 *
 * Catches: bind writing a record's back reference (there is none),
 * zs_unit walking a mixed zspage as a class one, a move rewriting the
 * slot instead of the owner word.
 */
static void test_keys_and_units(void **st)
{
	enum { N = 200 };
	static uint64_t words[N];
	struct zm_pool *p = mk(1, ZM_COMPACT_OFF, words, N);
	static struct pt_obj o[N];
	zm_handle_t out[N];
	size_t pages;
	long n;
	struct rng r;

	(void)st;
	memset(words, 0, sizeof(words));
	rng_seed(&r, g_seed + 3);
	for (size_t i = 0; i < N; i++)
		alloc_obj(p, &o[i], 100 + rng_below(&r, 400), i + 1);
	assert_int_equal(mixed_zspages(p), 1);
	for (size_t i = 0; i < N; i += 2) {
		assert_int_equal(zm_pool_bind(p, o[i].h, i), 0);
		o[i].h = zm_pool_key_handle(p, i);
		assert_true(o[i].h != 0);
	}
	assert_int_equal(zm_pool_check(p), 0);
	verify(p, o, N, &r);
	for (size_t i = 0; i < N; i += 8) {
		assert_int_equal(zm_pool_free(p, o[i + 1].h), 0);
		o[i + 1].h = 0;
	}
	n = zm_pool_unit(p, o[2].h, out, N, &pages);
	assert_int_equal(n, N - N / 8);
	assert_true(pages >= 1);
	for (size_t i = 0, k; i < N; i++) {
		if (!o[i].h)
			continue;
		for (k = 0; k < (size_t)n && out[k] != o[i].h; k++)
			;
		if (k == (size_t)n)
			fail_msg("object %zu (handle %#llx) not in its unit", i,
				 (unsigned long long)o[i].h);
	}
	/* 7/8 live: kept (live granules at 3/4 or more); a quarter more
	 * freed: evacuated */
	zm_pool_compact(p);
	assert_int_equal(mixed_zspages(p), 1);
	for (size_t i = 0; i < N; i += 4) {
		assert_int_equal(zm_pool_free(p, o[i + 3].h), 0);
		o[i + 3].h = 0;
	}
	zm_pool_compact(p);
	assert_int_equal(mixed_zspages(p), 0);
	assert_int_equal(zm_pool_check(p), 0);
	verify(p, o, N, &r);
	for (size_t i = 0; i < N; i++)
		if (o[i].h)
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
	zm_pool_destroy(p);
}

/* Where key k's object is (its first byte), and that it holds size bytes
 * of cookie's pattern. */
static const void *key_at(struct zm_pool *p, uint64_t k, size_t size, uint64_t cookie)
{
	zm_handle_t h = zm_pool_key_handle(p, k);
	const void *m;

	assert_true(h != 0);
	assert_true(zm_pool_obj_size(p, h) >= size);   /* a class's size */
	m = zm_pool_map(p, h, ZM_MAP_RO);
	assert_non_null(m);
	if (pt_check(m, size, cookie))
		fail_msg("key %llu: not its %zu bytes", (unsigned long long)k, size);
	zm_pool_unmap(p, h);
	return m;
}

static void put_key(struct zm_pool *p, uint64_t k, size_t size, uint64_t cookie)
{
	uint8_t buf[PS];

	pt_fill(buf, size, cookie);
	assert_int_equal(zm_pool_put_key(p, k, buf, size), 0);
}

/*
 * A put over a key whose object the new one fits is written in place:
 * in a mixed zspage with the same granules, or fewer with a rest of two
 * granules or more, which becomes a hole the next objects take (the
 * pool grows by less than a tenth of their bytes); in a
 * class's zspage with a size of the same class.  A put that does not
 * fit goes elsewhere and leaves its old granules as a hole.
 *
 * Mutations: no rewrite in place (every put allocates: the objects
 * move, the pool takes pages for the shrunk objects' copies); the rest
 * of a shrunk object left without a header of its own (the checker
 * loses step in the zspage's walk); the shrunk object's live granules
 * not taken off (the checker's count of live granules differs).
 */
static void test_rewrite_in_place(void **st)
{
	enum { N = 300 };
	static uint64_t words[N];
	static size_t size[N];
	static const void *at[N];
	struct zm_pool_stats s0, s1;
	struct zm_pool *p;
	struct rng r;

	(void)st;
	rng_seed(&r, g_seed + 5);
	for (int mixed = 1; mixed >= 0; mixed--) {
		memset(words, 0, sizeof(words));
		p = mk(mixed, ZM_COMPACT_OFF, words, N);
		for (size_t k = 0; k < N; k++) {
			size[k] = 200 + rng_below(&r, 800);
			put_key(p, k, size[k], k + 1);
			at[k] = key_at(p, k, size[k], k + 1);
		}
		assert_int_equal(mixed_zspages(p) > 0, mixed);
		zm_pool_stats(p, &s0);
		/* the same granules (mixed), the same class (not): in place */
		for (size_t k = 0; k < N; k++) {
			put_key(p, k, size[k], 1000 + k);
			assert_ptr_equal(key_at(p, k, size[k], 1000 + k), at[k]);
		}
		zm_pool_stats(p, &s1);
		assert_int_equal(s1.pool_pages, s0.pool_pages);
		assert_int_equal(s1.objects, N);
		assert_int_equal(zm_pool_check(p), 0);
		if (mixed) {
			/* half as large: in place, the rests holes that as
			 * many objects of their size take with no new page */
			static zm_handle_t h[N];
			uint8_t buf[PS];

			for (size_t k = 0; k < N; k++) {
				size[k] /= 2;
				put_key(p, k, size[k], 2000 + k);
				assert_ptr_equal(key_at(p, k, size[k], 2000 + k), at[k]);
			}
			assert_int_equal(zm_pool_check(p), 0);
			size_t bytes = 0;

			for (size_t k = 0; k < N; k++) {
				bytes += size[k] / 2;
				h[k] = zm_pool_alloc(p, size[k] / 2);
				assert_true(h[k] != 0);
				pt_fill(buf, size[k] / 2, 3000 + k);
				assert_int_equal(zm_pool_write(p, h[k], buf, size[k] / 2), 0);
			}
			zm_pool_stats(p, &s1);
			print_message("in place: %llu pages, %llu after the shrunk puts' rests "
				      "took %d objects of %zu bytes\n",
				      (unsigned long long)s0.pool_pages,
				      (unsigned long long)s1.pool_pages, N, bytes);
			/* the holes' search is bounded (hole_find): a few
			 * objects may go to a tail, not a tenth of them */
			assert_true((s1.pool_pages - s0.pool_pages) * PS < bytes / 10);
			assert_int_equal(zm_pool_check(p), 0);
			for (size_t k = 0; k < N; k++)
				assert_int_equal(zm_pool_free(p, h[k]), 0);
		}
		/* larger than its room: elsewhere, its old place a hole */
		for (size_t k = 0; k < N; k += 3) {
			size[k] = size[k] * 2 + 300;
			put_key(p, k, size[k], 4000 + k);
			assert_ptr_not_equal(key_at(p, k, size[k], 4000 + k), at[k]);
		}
		assert_int_equal(zm_pool_check(p), 0);
		for (size_t k = 0; k < N; k++) {
			uint64_t c = k % 3 ? (mixed ? 2000 : 1000) + k : 4000 + k;

			key_at(p, k, size[k], c);
			assert_int_equal(zm_pool_free_key(p, k), 0);
		}
		zm_pool_stats(p, &s1);
		assert_int_equal(s1.objects, 0);
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_destroy(p);
	}
}

/*
 * The switch: -1 never makes a mixed zspage (and has no mixed row); the
 * default makes them while the pool compacts by itself, not without a
 * compactor nor under a limit on its pages; objects of small classes
 * that fit their slot better than a header and granules go there.
 */
static void test_switch(void **st)
{
	struct zm_pool_config lim = { .compact = ZM_COMPACT_RATIO, .limit_bytes = 64u << 20 };
	struct zm_pool *p;
	zm_handle_t h;

	(void)st;
	p = mk(-1, ZM_COMPACT_RATIO, NULL, 0);
	assert_int_equal(zm_pool_nr_classes(p), 128);
	h = zm_pool_alloc(p, 1000);
	assert_int_equal(mixed_zspages(p), 0);
	assert_int_equal(zm_pool_free(p, h), 0);
	zm_pool_destroy(p);

	p = mk(0, ZM_COMPACT_OFF, NULL, 0);
	h = zm_pool_alloc(p, 1000);
	assert_int_equal(mixed_zspages(p), 0);
	assert_int_equal(zm_pool_free(p, h), 0);
	zm_pool_destroy(p);

	assert_int_equal(zm_pool_create(&lim, &p), 0);
	h = zm_pool_alloc(p, 1000);
	assert_int_equal(mixed_zspages(p), 0);
	assert_int_equal(zm_pool_free(p, h), 0);
	zm_pool_destroy(p);

	p = mk(0, ZM_COMPACT_RATIO, NULL, 0);
	h = zm_pool_alloc(p, 1000);
	assert_int_equal(mixed_zspages(p), 1);
	assert_int_equal(zm_pool_obj_size(p, h), 1000);
	assert_int_equal(zm_pool_free(p, h), 0);
	/* 32 bytes: the 32-byte slot (+4 of back reference) beats 6 + 32
	 * in 4-byte granules (40) */
	h = zm_pool_alloc(p, 32);
	assert_int_equal(mixed_zspages(p), 0);
	assert_int_equal(zm_pool_obj_size(p, h), 32);
	assert_int_equal(zm_pool_free(p, h), 0);
	/* 26 bytes (a zero page): 6 + 26 = 32 is less */
	h = zm_pool_alloc(p, 26);
	assert_int_equal(mixed_zspages(p), 1);
	assert_int_equal(zm_pool_free(p, h), 0);
	zm_pool_destroy(p);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_sizes),
		cmocka_unit_test(test_header_skips_page_end),
		cmocka_unit_test(test_check_headers),
		cmocka_unit_test(test_holes_reused),
		cmocka_unit_test(test_holes_not_sparse),
		cmocka_unit_test(test_compact_into_classes),
		cmocka_unit_test(test_compact_repacks),
		cmocka_unit_test(test_mapped_stays),
		cmocka_unit_test(test_keys_and_units),
		cmocka_unit_test(test_switch),
		cmocka_unit_test(test_rewrite_in_place),
	};

	test_args(argc, argv, &g_seed, NULL);
	return cmocka_run_group_tests_name("mixed", tests, NULL, NULL);
}
