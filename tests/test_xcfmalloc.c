/*
 * Tests of the xcfmalloc backend's own rules (background §1, docs/xcfmalloc.md):
 * the block-choice order, split of the last block only, objects spanning
 * two pages, merging on free, the 32-page reserve, descriptor counting,
 * bad handles, running out of pages half-way through an object, and a
 * seeded randomized test against a model.
 *
 *   test_xcfmalloc [--seed N] [--steps N]      (or XCF_SEED=N in the environment)
 *
 * Block layouts are checked through xcf_piece(), the backend's test hook;
 * all offsets and sizes are in 64-byte blocks, and S(n) is the largest
 * object that fits in one block of n blocks (its 8-byte header included).
 */
#include <errno.h>

#include "pooltest.h"
#include "pool/xcfmalloc/xcfmalloc.h"

#define S(n) ((size_t)(n) * XCF_BLOCK - XCF_HDR)

static uint64_t g_seed;
static long g_steps = 20000;

static struct zm_pool *mk(size_t page_size, size_t limit)
{
	struct zm_pool_config c = { .allocator = "xcfmalloc", .page_size = page_size,
				    .limit_bytes = limit, .arena_bytes = 64 << 20 };
	struct zm_pool *p = NULL;

	assert_int_equal(zm_pool_create(&c, &p), 0);
	assert_string_equal(zm_pool_backend(p), "xcfmalloc");
	return p;
}

struct piece {
	uint32_t pfn, desc;
	unsigned off, nblk;
};

/* Where piece k of h lies; asserts it exists. */
static struct piece at(struct zm_pool *p, zm_handle_t h, unsigned k)
{
	struct piece pc;

	assert_int_equal(xcf_piece(p, h, k, &pc.pfn, &pc.off, &pc.nblk, &pc.desc), 0);
	return pc;
}

static int npieces(struct zm_pool *p, zm_handle_t h)
{
	struct piece pc;

	return xcf_piece(p, h, 1, &pc.pfn, &pc.off, &pc.nblk, &pc.desc) ? 1 : 2;
}

static void expect_at(struct zm_pool *p, zm_handle_t h, unsigned k, unsigned off,
		      unsigned nblk)
{
	struct piece pc = at(p, h, k);

	assert_int_equal(pc.off, off);
	assert_int_equal(pc.nblk, nblk);
}

static zm_handle_t alloc(struct zm_pool *p, size_t size)
{
	zm_handle_t h = zm_pool_alloc(p, size);
	uint8_t buf[65536];

	assert_true(h != 0);
	pt_fill(buf, size, h);
	assert_int_equal(zm_pool_write(p, h, buf, size), 0);
	assert_int_equal(zm_pool_check(p), 0);
	return h;
}

static void verify(struct zm_pool *p, zm_handle_t h, size_t size)
{
	uint8_t buf[65536];

	assert_int_equal(zm_pool_read(p, h, buf, size), 0);
	assert_int_equal(pt_check(buf, size, h), 0);
}

static void release(struct zm_pool *p, zm_handle_t h)
{
	assert_int_equal(zm_pool_free(p, h), 0);
	assert_int_equal(zm_pool_check(p), 0);
}

/* Free blocks of n blocks, from the per-size table. */
static uint64_t free_blocks(struct zm_pool *p, unsigned n)
{
	struct zm_pool_class_stats cs;

	assert_int_equal(zm_pool_class_stats(p, n - 1, &cs), 0);
	assert_int_equal(cs.size, n * XCF_BLOCK);
	return cs.obj_allocated - cs.obj_used;
}

static struct zm_pool_stats stats(struct zm_pool *p)
{
	struct zm_pool_stats st;

	zm_pool_stats(p, &st);
	return st;
}

/* Exact size first; else the smallest larger block, split; a first piece
 * with no exact block takes the largest smaller one whole. */
static void test_choice_order(void **st)
{
	struct zm_pool *p = mk(0, 0);
	zm_handle_t a, b, c, d, e, f, g;

	assert_int_equal(zm_pool_nr_classes(p), 64);
	a = alloc(p, S(8));                   /* new page, split: 8 | 56 */
	b = alloc(p, S(1));                   /* smallest larger: the 56 */
	c = alloc(p, S(4));
	d = alloc(p, S(1));
	expect_at(p, a, 0, 0, 8);
	expect_at(p, b, 0, 8, 1);
	expect_at(p, c, 0, 9, 4);
	expect_at(p, d, 0, 13, 1);
	assert_int_equal(free_blocks(p, 50), 1);
	release(p, a);                        /* free: 8@0, 4@9, 50@14 */
	release(p, c);
	assert_int_equal(free_blocks(p, 8), 1);
	assert_int_equal(free_blocks(p, 4), 1);
	e = alloc(p, S(4));                   /* exact, though 8 and 50 fit */
	expect_at(p, e, 0, 9, 4);
	assert_int_equal(npieces(p, e), 1);
	f = alloc(p, S(2));                   /* smallest larger: 8, not 50 */
	expect_at(p, f, 0, 0, 2);
	assert_int_equal(free_blocks(p, 6), 1);
	assert_int_equal(free_blocks(p, 50), 1);
	g = alloc(p, S(7));                   /* largest smaller: the 6, whole */
	assert_int_equal(npieces(p, g), 2);
	expect_at(p, g, 0, 2, 6);
	/* the rest, 64 bytes + header = 2 blocks: split off the 50 */
	expect_at(p, g, 1, 14, 2);
	assert_int_equal(free_blocks(p, 48), 1);
	assert_int_equal(free_blocks(p, 6), 0);
	verify(p, b, S(1)), verify(p, d, S(1)), verify(p, e, S(4));
	verify(p, f, S(2)), verify(p, g, S(7));
	assert_int_equal(zm_pool_obj_size(p, g), S(6) + S(2));
	release(p, b), release(p, d), release(p, e), release(p, f), release(p, g);
	assert_int_equal(stats(p).pool_pages, 0);
	zm_pool_destroy(p);
}

/* The first piece takes the largest of the smaller blocks; the last piece
 * never takes a smaller block, and only it is split. */
static void test_last_piece_and_split(void **st)
{
	struct zm_pool *p = mk(0, 0);
	zm_handle_t a, b, c, d, e, g;

	a = alloc(p, S(1));
	b = alloc(p, S(1));
	c = alloc(p, S(1));
	d = alloc(p, S(10));
	e = alloc(p, S(1));
	expect_at(p, e, 0, 13, 1);
	release(p, b);                        /* holes: 1@1, 10@3; 50@14 free */
	release(p, d);
	g = alloc(p, S(12));
	assert_int_equal(npieces(p, g), 2);
	expect_at(p, g, 0, 3, 10);            /* the largest smaller, not split */
	/* the rest: S(12) - S(10) = 128 bytes + header = 3 blocks; the 1-block
	 * hole is smaller, so the 50 is split */
	expect_at(p, g, 1, 14, 3);
	assert_int_equal(free_blocks(p, 1), 1);
	assert_int_equal(free_blocks(p, 47), 1);
	verify(p, g, S(12));
	release(p, g);                        /* 10 merges back, 3 with the 47 */
	assert_int_equal(free_blocks(p, 10), 1);
	assert_int_equal(free_blocks(p, 50), 1);
	verify(p, a, S(1)), verify(p, c, S(1)), verify(p, e, S(1));
	release(p, a), release(p, c), release(p, e);
	assert_int_equal(stats(p).pool_pages, 0);
	zm_pool_destroy(p);
}

/* The tail of one page and the head of another hold one object; read,
 * write and every map mode see one contiguous object. */
static void test_span_pages(void **st)
{
	struct zm_pool *p = mk(0, 0);
	zm_handle_t a, b, full;
	struct piece p0, p1;
	uint8_t buf[4096], *m;

	a = alloc(p, S(60));                  /* leaves 4 blocks at the end */
	b = alloc(p, S(10));
	p0 = at(p, b, 0);
	p1 = at(p, b, 1);
	assert_int_equal(p0.off, 60);
	assert_int_equal(p0.nblk, 4);
	assert_true(p0.pfn != p1.pfn);
	assert_int_equal(p1.off, 0);
	assert_int_equal(p1.nblk, 7);         /* S(10) - S(4) = 384 + 8 */
	assert_int_equal(stats(p).pool_pages, 2);
	verify(p, b, S(10));
	m = zm_pool_map(p, b, ZM_MAP_RO);
	assert_non_null(m);
	assert_int_equal(pt_check(m, S(10), b), 0);
	m[0] ^= 1;                            /* a copy: not written back */
	zm_pool_unmap(p, b);
	verify(p, b, S(10));
	m = zm_pool_map(p, b, ZM_MAP_WO);
	pt_fill(m, S(10), b + 1);
	zm_pool_unmap(p, b);
	assert_int_equal(zm_pool_read(p, b, buf, S(10)), 0);
	assert_int_equal(pt_check(buf, S(10), b + 1), 0);
	m = zm_pool_map(p, b, ZM_MAP_RW);
	assert_int_equal(pt_check(m, S(10), b + 1), 0);
	m[S(10) - 1] ^= 0x5a;
	zm_pool_unmap(p, b);
	assert_int_equal(zm_pool_read(p, b, buf, S(10)), 0);
	buf[S(10) - 1] ^= 0x5a;
	assert_int_equal(pt_check(buf, S(10), b + 1), 0);
	/* a one-block object is mapped in place */
	m = zm_pool_map(p, a, ZM_MAP_RW);
	assert_ptr_equal(m, (uint8_t *)zm_pool_map(p, a, ZM_MAP_RO));
	zm_pool_unmap(p, a);
	zm_pool_unmap(p, a);
	/* a whole page of data never fits one block */
	full = alloc(p, 4096);
	assert_int_equal(npieces(p, full), 2);
	assert_int_equal(zm_pool_obj_size(p, full), 4096);
	verify(p, full, 4096);
	release(p, a);
	release(p, b);
	release(p, full);
	assert_int_equal(stats(p).pool_pages, 0);
	zm_pool_destroy(p);
}

/* Free merges with the free neighbours in the same page. */
static void test_merge(void **st)
{
	struct zm_pool *p = mk(0, 0);
	zm_handle_t a, b, c, d;

	a = alloc(p, S(3));
	b = alloc(p, S(5));
	c = alloc(p, S(2));
	d = alloc(p, S(1));                   /* 3@0 5@3 2@8 1@10, 53@11 free */
	assert_int_equal(stats(p).descriptors, 5);
	release(p, a);                        /* neighbour b is used: no merge */
	release(p, c);                        /* b and d used: no merge */
	assert_int_equal(stats(p).descriptors, 5);
	assert_int_equal(free_blocks(p, 3), 1);
	assert_int_equal(free_blocks(p, 2), 1);
	release(p, b);                        /* a's, b's and c's blocks: one */
	assert_int_equal(stats(p).descriptors, 3);
	assert_int_equal(free_blocks(p, 10), 1);
	assert_int_equal(free_blocks(p, 3), 0);
	assert_int_equal(free_blocks(p, 2), 0);
	assert_int_equal(free_blocks(p, 5), 0);
	verify(p, d, S(1));
	release(p, d);                        /* 10 + 1 + 53: a whole page, and
						 the pool is empty: given back */
	assert_int_equal(stats(p).descriptors, 0);
	assert_int_equal(stats(p).pool_pages, 0);
	/* an object's two pieces each merge in their own page */
	a = alloc(p, S(62));                  /* 62@0, 2@62 free */
	b = alloc(p, S(5));                   /* 2@62 whole + 4 in a new page */
	c = alloc(p, S(60));                  /* the rest of that page */
	assert_int_equal(npieces(p, b), 2);
	release(p, a);
	assert_int_equal(free_blocks(p, 62), 1);
	release(p, b);
	assert_int_equal(free_blocks(p, 64), 1);  /* the first page, whole: kept */
	assert_int_equal(free_blocks(p, 4), 1);   /* beside c */
	assert_int_equal(stats(p).pool_pages, 2);
	release(p, c);
	assert_int_equal(stats(p).pool_pages, 0);
	zm_pool_destroy(p);
}

/* Whole free pages: at most 32 kept while objects live, none when the
 * pool is empty; kept pages are used before new ones. */
static void test_reserve(void **st)
{
	enum { N = 40 };
	struct zm_pool *p = mk(0, 0);
	zm_handle_t h[N], keep;
	struct zm_pool_class_stats cs;
	struct zm_pool_stats s;

	for (int i = 0; i < N; i++) {
		h[i] = alloc(p, S(64));       /* one whole page each */
		assert_int_equal(npieces(p, h[i]), 1);
	}
	keep = h[0];
	assert_int_equal(stats(p).pool_pages, N);
	for (int i = 1; i < N; i++) {
		release(p, h[i]);
		s = stats(p);
		/* pages in use + the reserve */
		assert_int_equal(s.pool_pages, (uint64_t)(N - i) +
				 (i < XCF_RESERVE_PAGES ? i : XCF_RESERVE_PAGES));
	}
	assert_int_equal(zm_pool_class_stats(p, 63, &cs), 0);
	assert_int_equal(cs.freeable, XCF_RESERVE_PAGES);
	assert_int_equal(free_blocks(p, 64), XCF_RESERVE_PAGES);
	assert_int_equal(stats(p).descriptors, 1 + XCF_RESERVE_PAGES);
	/* the reserve serves the next pages, no new ones */
	for (int i = 1; i <= XCF_RESERVE_PAGES; i++)
		h[i] = alloc(p, S(64));
	s = stats(p);
	assert_int_equal(s.pool_pages, 1 + XCF_RESERVE_PAGES);
	assert_int_equal(s.pages_max, N);
	assert_int_equal(free_blocks(p, 64), 0);
	h[0] = alloc(p, 100);                 /* the reserve is empty: a new page */
	assert_int_equal(stats(p).pool_pages, 2 + XCF_RESERVE_PAGES);
	release(p, h[0]);                     /* kept as reserve */
	assert_int_equal(stats(p).pool_pages, 2 + XCF_RESERVE_PAGES);
	assert_int_equal(free_blocks(p, 64), 1);
	for (int i = 1; i <= XCF_RESERVE_PAGES; i++)
		release(p, h[i]);
	assert_int_equal(stats(p).pool_pages, 1 + XCF_RESERVE_PAGES);
	assert_int_equal(free_blocks(p, 64), XCF_RESERVE_PAGES);
	release(p, keep);
	s = stats(p);
	assert_int_equal(s.pool_pages, 0);
	assert_int_equal(s.descriptors, 0);
	zm_pool_destroy(p);
}

/* One descriptor per block, free or used; their memory is metadata. */
static void test_descriptors(void **st)
{
	struct zm_pool *p = mk(0, 0);
	struct zm_pool_stats s = stats(p);
	zm_handle_t x, y;

	assert_int_equal(s.descriptors, 0);
	assert_int_equal(s.pool_pages, 0);
	x = alloc(p, 100);                    /* 2 blocks + a 62-block rest */
	s = stats(p);
	assert_int_equal(s.descriptors, 2);
	assert_int_equal(s.objects, 1);
	assert_int_equal(s.slot_bytes, 2 * XCF_BLOCK);
	y = alloc(p, 4096);                   /* the 62 whole + 3 in a new page */
	s = stats(p);
	assert_int_equal(npieces(p, y), 2);
	expect_at(p, y, 0, 2, 62);
	expect_at(p, y, 1, 0, 3);
	assert_int_equal(s.descriptors, 4);
	assert_int_equal(s.pool_pages, 2);
	assert_int_equal(s.pool_bytes, 2 * 4096);
	assert_int_equal(s.slot_bytes, (2 + 62 + 3) * XCF_BLOCK);
	assert_true(s.meta_bytes >= s.descriptors * sizeof(struct xcf_desc));
	assert_int_equal(sizeof(struct xcf_desc), 20);
	assert_int_equal(sizeof(struct xcf_hdr), 8);
	release(p, x);
	assert_int_equal(stats(p).descriptors, 4);  /* 2 + 62 do not merge: used */
	release(p, y);
	s = stats(p);
	assert_int_equal(s.descriptors, 0);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.slot_bytes, 0);
	zm_pool_destroy(p);
}

/* Handles as the pool hands them out (pool_internal.h): the pool's id
 * from bit ZMI_POOL_ID_SHIFT up, the backend's own handle below it. */
static zm_handle_t id_of(zm_handle_t h) { return h & ~(ZMI_HANDLE_LIMIT - 1); }
static zm_handle_t raw_of(zm_handle_t h) { return h & (ZMI_HANDLE_LIMIT - 1); }

/* The handle p would give descriptor idx, with the generation it has now:
 * only what the descriptor is tells it from a live object's. */
static zm_handle_t desc_handle(struct zm_pool *p, zm_handle_t id, uint32_t idx)
{
	return id | xcf_handle(idx, xcf_desc(xcf_of(p), idx)->gen);
}

static void test_bad_handles(void **st)
{
	struct zm_pool *p = mk(0, 0), *q = mk(0, 0);
	zm_handle_t h = alloc(p, S(60)), sp = alloc(p, S(10)), qh = alloc(q, 100), gone, h2;
	zm_handle_t id = id_of(h);
	struct piece second = at(p, sp, 1);
	char buf[8192];

	/* the two pools' first objects have the same backend handle: only
	 * the pool id tells them apart */
	assert_int_equal(raw_of(qh), raw_of(h));
	assert_true(id_of(qh) != id);
	/* not handles at all */
	assert_int_equal(zm_pool_free(p, 0), -EINVAL);
	assert_int_equal(zm_pool_free(p, raw_of(h)), -EINVAL);          /* no pool id */
	assert_int_equal(zm_pool_free(p, ~0ull), -EINVAL);
	/* another pool's: its own handle, and this pool's with its id */
	assert_int_equal(zm_pool_free(p, qh), -EINVAL);
	assert_int_equal(zm_pool_free(p, id_of(qh) | raw_of(h)), -EINVAL);
	/* this pool's id, a bad backend handle */
	assert_int_equal(zm_pool_free(p, h ^ 1), -EINVAL);              /* bit 0 clear */
	assert_int_equal(zm_pool_free(p, h ^ 2), -EINVAL);              /* generation */
	assert_int_equal(zm_pool_free(p, id | xcf_handle(UINT32_MAX, 0)), -EINVAL); /* index */
	/* descriptors that are not an object's first block */
	assert_int_equal(zm_pool_free(p, desc_handle(p, id, second.desc)), -EINVAL);
	assert_int_equal(zm_pool_read(p, desc_handle(p, id, second.desc), buf, 1), -EINVAL);
	/* a descriptor of a free block (the rest of the second page) */
	assert_int_equal(zm_pool_free(p, desc_handle(p, id, second.desc + 1)), -EINVAL);
	/* too long */
	assert_int_equal(zm_pool_read(p, h, buf, S(60) + 1), -EINVAL);
	assert_int_equal(zm_pool_write(p, sp, buf, S(4) + S(7) + 1), -EINVAL);
	/* freed, twice, and after reuse */
	gone = alloc(p, 100);
	release(p, gone);
	assert_int_equal(zm_pool_free(p, gone), -EINVAL);
	assert_int_equal(zm_pool_read(p, gone, buf, 10), -EINVAL);
	assert_int_equal(zm_pool_write(p, gone, buf, 10), -EINVAL);
	assert_null(zm_pool_map(p, gone, ZM_MAP_RO));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(zm_pool_obj_size(p, gone), 0);
	h2 = alloc(p, 100);                   /* the same descriptor again */
	assert_int_equal(raw_of(h2) >> XCF_H_IDX_SHIFT, raw_of(gone) >> XCF_H_IDX_SHIFT);
	assert_true(h2 != gone);
	assert_int_equal(zm_pool_free(p, gone), -EINVAL);               /* stale */
	assert_int_equal(zm_pool_check(p), 0);
	verify(p, h, S(60));
	verify(p, sp, S(10));
	verify(p, h2, 100);
	verify(q, qh, 100);
	release(p, h), release(p, sp), release(p, h2), release(q, qh);
	zm_pool_destroy(p);
	zm_pool_destroy(q);
}

/* Out of pages between the two pieces: the first is given back. */
static void test_enomem_between_pieces(void **st)
{
	enum { MAXN = 64 };
	struct zm_pool *p = mk(0, 8 * 4096);
	zm_handle_t h[MAXN], x;
	struct zm_pool_stats s;
	uint64_t holes;
	int n = 0;

	for (;;) {                            /* whole pages until the limit */
		x = zm_pool_alloc(p, S(64));
		if (!x)
			break;
		assert_true(n < MAXN);
		h[n++] = x;
	}
	assert_int_equal(errno, ENOMEM);
	assert_true(n >= 2);
	assert_int_equal(zm_pool_check(p), 0);
	release(p, h[--n]);                   /* its page stays as reserve */
	h[n++] = alloc(p, S(60));             /* and takes 60 of it: 4 free */
	holes = free_blocks(p, 4);
	assert_int_equal(holes, 1);
	s = stats(p);
	x = zm_pool_alloc(p, S(10));              /* 4-block hole + a page: none */
	assert_int_equal(x, 0);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(zm_pool_check(p), 0);
	assert_int_equal(free_blocks(p, 4), holes);
	assert_int_equal(stats(p).malloc_fail, s.malloc_fail + 1);
	assert_int_equal(stats(p).descriptors, s.descriptors);
	x = zm_pool_alloc(p, S(4));               /* a hole still serves */
	assert_true(x);
	release(p, x);
	while (n)
		release(p, h[--n]);
	assert_int_equal(stats(p).pool_pages, 0);
	zm_pool_destroy(p);
}

/* The checker sees a damaged header, and a counter that lies. */
static void test_checker(void **st)
{
	struct zm_pool *p = mk(0, 0);
	zm_handle_t h = alloc(p, S(3));
	struct xcf_hdr *hd, save;
	uint8_t *m = zm_pool_map(p, h, ZM_MAP_RO);

	hd = (struct xcf_hdr *)(m - XCF_HDR);   /* in place: the header is before */
	zm_pool_unmap(p, h);
	save = *hd;
	hd->sentinel ^= 1;
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	*hd = save;
	hd->prev = 5;
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	*hd = save;
	assert_int_equal(zm_pool_check(p), 0);
	((struct xcf_pool *)p->priv)->objects++;
	assert_int_equal(zm_pool_check(p), -EUCLEAN);
	((struct xcf_pool *)p->priv)->objects--;
	release(p, h);
	zm_pool_destroy(p);
}

static void test_compaction_refused(void **st)
{
	struct zm_pool *p = mk(0, 0);

	assert_int_equal(zm_pool_compact(p), -EOPNOTSUPP);
	assert_int_equal(zm_pool_shrink(p, 4096), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_OFF), 0);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_DEFAULT), 0);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_RATIO), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(p, ZM_COMPACT_WATERMARK), -EOPNOTSUPP);
	zm_pool_destroy(p);
}

/* ---- seeded randomized test against a model ---- */

#define MAXOBJ 2000

struct mobj {
	zm_handle_t h;
	size_t size;
	uint8_t *data;
};

/* Sizes that exercise the seams: tiny, block edges, page edges. */
static size_t rand_size(struct rng *r, size_t P)
{
	switch (rng_below(r, 6)) {
	case 0:
		return 1 + rng_below(r, 200);
	case 1:
		return S(1 + rng_below(r, P / XCF_BLOCK)) + rng_below(r, 3);
	case 2:
		return P - rng_below(r, 80);
	default:
		return pt_size(r, P);
	}
}

static void model_run(size_t P)
{
	static struct mobj o[MAXOBJ];
	size_t n = 0, nfreed = 0;
	zm_handle_t freed[64];
	struct zm_pool *p = mk(P, 0);
	uint8_t *buf = malloc(P);
	struct zm_pool_class_stats cs;
	struct zm_pool_stats s;
	uint64_t spans = 0, peak = 0;
	struct rng r;

	rng_seed(&r, g_seed);
	for (long step = 0; step < g_steps; step++) {
		unsigned op = (unsigned)rng_below(&r, 100);
		/* bursts of allocation, then of freeing, to make holes */
		unsigned grow = (step / 500) % 2 ? 30 : 50;

		if (op < grow && n < MAXOBJ) {
			size_t sz = rand_size(&r, P);
			zm_handle_t h;

			if (sz < 1 || sz > P)
				sz = P;
			h = zm_pool_alloc(p, sz);
			assert_true(h);
			assert_true(zm_pool_obj_size(p, h) >= sz);
			o[n] = (struct mobj){ h, sz, malloc(sz) };
			for (size_t i = 0; i < sz; i++)
				o[n].data[i] = (uint8_t)rng_next(&r);
			assert_int_equal(zm_pool_write(p, h, o[n].data, sz), 0);
			n++;
		} else if (op < 70 && n) {
			size_t i = rng_below(&r, n);

			assert_int_equal(zm_pool_read(p, o[i].h, buf, o[i].size), 0);
			assert_memory_equal(buf, o[i].data, o[i].size);
			assert_int_equal(zm_pool_free(p, o[i].h), 0);
			freed[nfreed < 64 ? nfreed++ : rng_below(&r, 64)] = o[i].h;
			free(o[i].data);
			o[i] = o[--n];
		} else if (op < 78 && n) {            /* partial write */
			size_t i = rng_below(&r, n), len = 1 + rng_below(&r, o[i].size);

			for (size_t k = 0; k < len; k++)
				o[i].data[k] = (uint8_t)rng_next(&r);
			assert_int_equal(zm_pool_write(p, o[i].h, o[i].data, len), 0);
		} else if (op < 86 && n) {            /* map */
			size_t i = rng_below(&r, n);

			pt_model_map(p, o[i].h, o[i].data, o[i].size, &r);
		} else if (op < 94 && n) {            /* layout: <= 2 pieces, big enough */
			size_t i = rng_below(&r, n);
			struct piece a = at(p, o[i].h, 0);
			size_t cap = (size_t)a.nblk * XCF_BLOCK - XCF_HDR;

			if (npieces(p, o[i].h) == 2) {
				struct piece b = at(p, o[i].h, 1);

				spans++;
				/* a first piece is whole only because it was too small */
				assert_true(cap < o[i].size);
				/* the last piece was split to size */
				assert_int_equal(b.nblk, xcf_blocks_for(o[i].size - cap));
				cap += (size_t)b.nblk * XCF_BLOCK - XCF_HDR;
			} else {
				assert_int_equal(a.nblk, xcf_blocks_for(o[i].size));
			}
			assert_true(cap >= o[i].size);
		} else {                              /* bad handles */
			if (nfreed)
				assert_int_equal(zm_pool_free(p, freed[rng_below(&r, nfreed)]), -EINVAL);
			if (n)
				assert_int_equal(zm_pool_free(p, o[rng_below(&r, n)].h ^ 2), -EINVAL);
		}
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_stats(p, &s);
		assert_int_equal(s.objects, n);
		assert_int_equal(zm_pool_class_stats(p, (unsigned)(P / XCF_BLOCK) - 1, &cs), 0);
		assert_true(cs.freeable <= (n ? XCF_RESERVE_PAGES : 0));
		assert_true(s.descriptors >= n);
		if (!n)
			assert_int_equal(s.pool_pages, 0);
		if (s.pool_pages > peak)
			peak = s.pool_pages;
	}
	printf("page %zu: %ld steps, %llu two-block objects seen, peak %llu pages\n", P,
	       g_steps, (unsigned long long)spans, (unsigned long long)peak);
	assert_true(spans > 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(zm_pool_read(p, o[i].h, buf, o[i].size), 0);
		assert_memory_equal(buf, o[i].data, o[i].size);
		assert_int_equal(zm_pool_free(p, o[i].h), 0);
		free(o[i].data);
	}
	zm_pool_stats(p, &s);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.pool_pages, 0);
	assert_int_equal(s.descriptors, 0);
	assert_int_equal(zm_pool_check(p), 0);
	zm_pool_destroy(p);
	free(buf);
}

static void test_model_4k(void **st) { model_run(4096); }
static void test_model_16k(void **st) { model_run(16384); }

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_choice_order),
		cmocka_unit_test(test_last_piece_and_split),
		cmocka_unit_test(test_span_pages),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_descriptors),
		cmocka_unit_test(test_bad_handles),
		cmocka_unit_test(test_enomem_between_pieces),
		cmocka_unit_test(test_checker),
		cmocka_unit_test(test_compaction_refused),
		cmocka_unit_test(test_model_4k),
		cmocka_unit_test(test_model_16k),
	};
	const char *env = getenv("XCF_SEED");

	test_args(argc, argv, &g_seed, &g_steps);
	if (env) {
		g_seed = strtoull(env, NULL, 0);
		printf("seed %llu from XCF_SEED\n", (unsigned long long)g_seed);
	}
	return cmocka_run_group_tests_name("xcf", tests, NULL, NULL);
}
