/*
 * Unit tests of the zbud backend (src/pool/zbud.c): two objects per page,
 * first/last placement, best fit through the unbuddied lists, pages going
 * back when both buddies are free, page-sized objects, bad handles, the
 * checker; and a seeded randomized test against a model of zbud's own
 * placement rule.  Where an object lies is read from zm_pool_map() and
 * zm_pages_pfn() on pages the test owns, never from the handle's bits.
 *
 *   test_zbud [--seed N] [--steps N]
 */
#include <errno.h>

#include "pooltest.h"
#include <zmem/pages.h>

#define P 4096

static uint64_t g_seed;
static long g_steps = 20000;

struct env {
	struct zm_pages *pg;
	struct zm_pool *p;
	size_t nchunks, chunk;
};

static void env_init(struct env *e, size_t limit_pages)
{
	struct zm_pages_config pc = { .arena_bytes = 64 << 20, .limit_pages = limit_pages };
	struct zm_pool_config c = { .allocator = "zbud" };

	assert_int_equal(zm_pages_create(&pc, &e->pg), 0);
	c.pages = e->pg;
	assert_int_equal(zm_pool_create(&c, &e->p), 0);
	/* one row of the class table per list: as many as chunks a page */
	e->nchunks = zm_pool_nr_classes(e->p);
	assert_true(e->nchunks >= 64 && !(e->nchunks & (e->nchunks - 1)));
	e->chunk = P / e->nchunks;
}

static void env_fini(struct env *e)
{
	struct zm_pages_stats ps;

	assert_int_equal(zm_pool_check(e->p), 0);
	zm_pool_destroy(e->p);
	zm_pages_flush_thread(e->pg);
	zm_pages_stats(e->pg, &ps);
	assert_int_equal(ps.in_use, 0);
	assert_int_equal(zm_pages_check(e->pg), 0);
	zm_pages_destroy(e->pg);
}

/* Where an object lies: its page and whether it is the first buddy. */
static void where(struct env *e, zm_handle_t h, zm_pfn_t *pfn, int *first)
{
	char *m = zm_pool_map(e->p, h, ZM_MAP_RO);
	char *page;

	assert_non_null(m);
	zm_pool_unmap(e->p, h);
	*pfn = zm_pages_pfn(e->pg, m);
	assert_true(*pfn != UINT32_MAX);
	page = zm_pages_addr(e->pg, *pfn);
	*first = m == page;
	if (!*first)  /* a last buddy ends at the end of its page */
		assert_ptr_equal(m + zm_pool_obj_size(e->p, h), page + P);
}

/* The slot an object of size bytes takes: whole chunks. */
static size_t slot(struct env *e, size_t size)
{
	return (size + e->chunk - 1) / e->chunk * e->chunk;
}

static uint64_t pages_of(struct env *e)
{
	struct zm_pool_stats s;

	zm_pool_stats(e->p, &s);
	return s.pool_pages;
}

static zm_handle_t put(struct env *e, size_t size, uint64_t cookie)
{
	uint8_t buf[P];
	zm_handle_t h = zm_pool_alloc(e->p, size);

	assert_true(h != 0);
	pt_fill(buf, size, cookie);
	assert_int_equal(zm_pool_write(e->p, h, buf, size), 0);
	assert_int_equal(zm_pool_check(e->p), 0);
	return h;
}

static void expect(struct env *e, zm_handle_t h, size_t size, uint64_t cookie)
{
	uint8_t buf[P];

	assert_int_equal(zm_pool_read(e->p, h, buf, size), 0);
	assert_int_equal(pt_check(buf, size, cookie), 0);
}

static void test_two_per_page(void **st)
{
	struct env e;
	zm_handle_t a, b, c;
	zm_pfn_t pa, pb, pc;
	int fa, fb, fc;
	struct zm_pool_stats s;

	env_init(&e, 0);
	a = put(&e, 1500, 1);
	b = put(&e, 1500, 2);
	assert_int_equal(pages_of(&e), 1);
	where(&e, a, &pa, &fa);
	where(&e, b, &pb, &fb);
	assert_int_equal(pa, pb);
	assert_true(fa && !fb);          /* first from the start, last from the end */
	assert_int_equal(zm_pool_obj_size(e.p, a), slot(&e, 1500));
	c = put(&e, 1500, 3);            /* a third never joins them */
	where(&e, c, &pc, &fc);
	assert_true(pc != pa && fc);
	assert_int_equal(pages_of(&e), 2);
	zm_pool_stats(e.p, &s);
	assert_int_equal(s.objects, 3);
	assert_int_equal(s.slot_bytes, 3 * slot(&e, 1500));
	assert_int_equal(s.pool_bytes, 2 * P);
	assert_true(s.meta_bytes > 0 && s.meta_bytes < P);
	assert_int_equal(s.pages_max, 2);
	expect(&e, a, 1500, 1), expect(&e, b, 1500, 2), expect(&e, c, 1500, 3);
	/* writing one buddy whole leaves the other alone */
	{
		uint8_t *m = zm_pool_map(e.p, a, ZM_MAP_WO);

		memset(m, 0xee, zm_pool_obj_size(e.p, a));
		zm_pool_unmap(e.p, a);
	}
	expect(&e, b, 1500, 2);
	zm_pool_free(e.p, a), zm_pool_free(e.p, b), zm_pool_free(e.p, c);
	env_fini(&e);
}

/* Half-used pages with 17, 24 and 30 64ths of a page free (each object
 * too big for the pages before it): each new object goes to the one that
 * fits it most tightly.  Sizes in 64ths (64 bytes), a whole number of
 * chunks. */
static void test_best_fit(void **st)
{
	struct env e;
	zm_handle_t a, b, c, x, y, z, w;
	zm_pfn_t pa, pb, pc, px, py, pz, pw;
	int f;

	env_init(&e, 0);
	a = put(&e, 47 * 64, 1);         /* 17 free */
	b = put(&e, 40 * 64 - 5, 2);     /* 24 free */
	c = put(&e, 34 * 64, 3);         /* 30 free */
	where(&e, a, &pa, &f);
	where(&e, b, &pb, &f);
	where(&e, c, &pc, &f);
	assert_int_equal(pages_of(&e), 3);
	z = put(&e, 28 * 64, 6);         /* 28: only c's page */
	where(&e, z, &pz, &f);
	assert_int_equal(pz, pc);
	assert_false(f);
	y = put(&e, 20 * 64, 5);         /* 20: b's page (24), not c's (30) */
	where(&e, y, &py, &f);
	assert_int_equal(py, pb);
	x = put(&e, 16 * 64 + 1, 4);     /* just over 16: a's page, the tightest */
	where(&e, x, &px, &f);
	assert_int_equal(px, pa);
	assert_int_equal(pages_of(&e), 3);
	w = put(&e, 1, 7);               /* every page is full: a new one */
	where(&e, w, &pw, &f);
	assert_true(pw != pa && pw != pb && pw != pc && f);
	assert_int_equal(pages_of(&e), 4);
	/* freed buddies put pages back on the lists by their free chunks:
	 * a's page 47 free, c's 30, w's 63 */
	assert_int_equal(zm_pool_free(e.p, a), 0);
	assert_int_equal(zm_pool_free(e.p, z), 0);
	z = put(&e, 40 * 64, 8);
	where(&e, z, &pz, &f);
	assert_int_equal(pz, pa);        /* 47 is the tightest fit for 40 */
	assert_true(f);                  /* a's half was the first */
	assert_int_equal(zm_pool_free(e.p, x), 0);
	x = put(&e, 2, 9);               /* a's page 24 free, c's 30, w's 63 */
	where(&e, x, &px, &f);
	assert_int_equal(px, pa);
	assert_false(f);
	assert_int_equal(pages_of(&e), 4);
	expect(&e, b, 40 * 64 - 5, 2), expect(&e, c, 34 * 64, 3), expect(&e, y, 20 * 64, 5);
	expect(&e, w, 1, 7), expect(&e, z, 40 * 64, 8), expect(&e, x, 2, 9);
	zm_pool_free(e.p, b), zm_pool_free(e.p, c), zm_pool_free(e.p, y), zm_pool_free(e.p, w);
	zm_pool_free(e.p, z), zm_pool_free(e.p, x);
	assert_int_equal(pages_of(&e), 0);
	env_fini(&e);
}

static void test_page_return(void **st)
{
	struct env e;
	struct zm_pages_stats ps;
	zm_handle_t h[100];

	env_init(&e, 0);
	for (int i = 0; i < 100; i++)
		h[i] = put(&e, 2000, (uint64_t)i);
	assert_int_equal(pages_of(&e), 50);
	for (int i = 0; i < 100; i += 2)   /* one buddy of each page */
		assert_int_equal(zm_pool_free(e.p, h[i]), 0);
	assert_int_equal(pages_of(&e), 50);
	for (int i = 1; i < 100; i += 2)
		expect(&e, h[i], 2000, (uint64_t)i);
	for (int i = 1; i < 100; i += 2) {
		assert_int_equal(zm_pool_free(e.p, h[i]), 0);
		assert_int_equal(pages_of(&e), 50 - (i + 1) / 2);
	}
	zm_pages_flush_thread(e.pg);
	zm_pages_stats(e.pg, &ps);
	assert_int_equal(ps.in_use, 0);    /* really back in the pages layer */
	env_fini(&e);
}

static void test_page_sized(void **st)
{
	struct env e;
	struct zm_pool_stats s;
	zm_handle_t big, small, a, b;
	zm_pfn_t pbig, psmall, pa, pb;
	int f;

	env_init(&e, 0);
	big = put(&e, P, 1);
	assert_int_equal(zm_pool_obj_size(e.p, big), P);
	zm_pool_stats(e.p, &s);
	assert_int_equal(s.huge_objects, 1);
	small = put(&e, 1, 2);             /* no room beside a page-sized object */
	where(&e, big, &pbig, &f);
	assert_true(f);
	where(&e, small, &psmall, &f);
	assert_true(psmall != pbig);
	assert_int_equal(pages_of(&e), 2);
	a = put(&e, P - e.chunk, 3);       /* all chunks but small's one */
	where(&e, a, &pa, &f);
	assert_int_equal(pa, psmall);      /* fills small's page exactly */
	assert_false(f);
	b = put(&e, P - e.chunk, 4);       /* nowhere to go */
	where(&e, b, &pb, &f);
	assert_true(pb != pa && pb != pbig);
	assert_int_equal(pages_of(&e), 3);
	expect(&e, big, P, 1), expect(&e, small, 1, 2), expect(&e, a, P - e.chunk, 3);
	expect(&e, b, P - e.chunk, 4);
	assert_int_equal(zm_pool_free(e.p, big), 0);
	zm_pool_stats(e.p, &s);
	assert_int_equal(s.huge_objects, 0);
	assert_int_equal(s.pool_pages, 2);
	zm_pool_free(e.p, small), zm_pool_free(e.p, a), zm_pool_free(e.p, b);
	env_fini(&e);
}

static void test_bad_handles(void **st)
{
	struct env e;
	struct zm_pool_config c = { .allocator = "zbud" };
	struct zm_pool *other;
	zm_handle_t h, keep, h2, alien;
	char buf[256];

	env_init(&e, 0);
	h = put(&e, 100, 1);
	keep = put(&e, 100, 2);
	assert_int_equal(zm_pool_free(e.p, 0), -EINVAL);
	assert_int_equal(zm_pool_free(e.p, 2), -EINVAL);
	assert_int_equal(zm_pool_free(e.p, 0xdeadbeef00001ull), -EINVAL);
	assert_int_equal(zm_pool_free(e.p, ~0ull), -EINVAL);
	assert_int_equal(zm_pool_free(e.p, h ^ 2), -EINVAL);          /* wrong generation */
	assert_int_equal(zm_pool_free(e.p, h ^ (1ull << 40)), -EINVAL); /* a page not ours */
	assert_int_equal(zm_pool_read(e.p, h, buf, slot(&e, 100) + 1), -EINVAL); /* past the slot */
	assert_int_equal(zm_pool_free(e.p, h), 0);
	assert_int_equal(zm_pool_free(e.p, h), -EINVAL);              /* double */
	assert_int_equal(zm_pool_read(e.p, h, buf, 1), -EINVAL);
	assert_int_equal(zm_pool_write(e.p, h, buf, 1), -EINVAL);
	assert_int_equal(zm_pool_obj_size(e.p, h), 0);
	errno = 0;
	assert_null(zm_pool_map(e.p, h, ZM_MAP_RW));
	assert_int_equal(errno, EINVAL);
	h2 = zm_pool_alloc(e.p, 100);                                /* the same buddy again */
	assert_true(h2 && h2 != h);
	assert_int_equal(zm_pool_free(e.p, h), -EINVAL);              /* stale */
	assert_int_equal(zm_pool_free(e.p, h2), 0);
	for (int i = 0; i < 70000; i++) {                        /* generations do not wrap soon */
		zm_handle_t t = zm_pool_alloc(e.p, 100);

		assert_true(t && t != h);
		assert_int_equal(zm_pool_free(e.p, t), 0);
	}
	assert_int_equal(zm_pool_free(e.p, h), -EINVAL);
	/* a page that went back to the pages layer and came back */
	assert_int_equal(zm_pool_free(e.p, keep), 0);
	assert_int_equal(pages_of(&e), 0);
	keep = put(&e, 100, 3);
	assert_int_equal(zm_pool_free(e.p, h), -EINVAL);
	/* another pool's handle, on the same pages */
	c.pages = e.pg;
	assert_int_equal(zm_pool_create(&c, &other), 0);
	alien = zm_pool_alloc(other, 100);
	assert_true(alien);
	assert_int_equal(zm_pool_free(e.p, alien), -EINVAL);
	assert_int_equal(zm_pool_free(other, keep), -EINVAL);
	assert_int_equal(zm_pool_free(other, alien), 0);
	zm_pool_destroy(other);
	assert_int_equal(zm_pool_free(e.p, keep), 0);
	env_fini(&e);
}

/* The checker sees a page that is not the pool's on its lists, and the
 * pool works again once it is put right. */
static void test_check_finds(void **st)
{
	struct env e;
	zm_handle_t h;
	zm_pfn_t pfn;
	int f;
	struct zm_page_meta *m, save;

	env_init(&e, 0);
	h = put(&e, 100, 1);
	where(&e, h, &pfn, &f);
	m = zm_pages_meta(e.pg, pfn);
	save = *m;
	m->owner = NULL;
	assert_int_equal(zm_pool_check(e.p), -EUCLEAN);
	assert_int_equal(zm_pool_free(e.p, h), -EINVAL);
	*m = save;
	m->priv[0] ^= 1;                 /* the first buddy's chunks */
	assert_int_equal(zm_pool_check(e.p), -EUCLEAN);
	*m = save;
	assert_int_equal(zm_pool_check(e.p), 0);
	assert_int_equal(zm_pool_free(e.p, h), 0);
	env_fini(&e);
}

static void test_no_compaction_and_table(void **st)
{
	struct env e;
	struct zm_pool_class_stats cs;
	struct zm_pool_stats s;
	uint64_t pages = 0, used = 0;
	zm_handle_t h[40];
	struct rng r;

	env_init(&e, 0);
	assert_int_equal(zm_pool_compact(e.p), -EOPNOTSUPP);
	assert_int_equal(zm_pool_shrink(e.p, 1 << 20), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(e.p, ZM_COMPACT_OFF), 0);
	assert_int_equal(zm_pool_set_compaction(e.p, ZM_COMPACT_DEFAULT), 0);
	assert_int_equal(zm_pool_set_compaction(e.p, ZM_COMPACT_WATERMARK), -EOPNOTSUPP);
	assert_int_equal(zm_pool_set_compaction(e.p, ZM_COMPACT_RATIO), -EOPNOTSUPP);
	rng_seed(&r, 3);
	for (int i = 0; i < 40; i++)
		h[i] = put(&e, pt_size(&r, P), (uint64_t)i);
	zm_pool_stats(e.p, &s);
	for (unsigned k = 0; k < e.nchunks; k++) {
		assert_int_equal(zm_pool_class_stats(e.p, k, &cs), 0);
		assert_int_equal(cs.size, k * e.chunk);
		assert_int_equal(cs.obj_allocated, 2 * cs.pages_used);
		assert_true(cs.obj_used <= cs.obj_allocated);
		if (k)  /* an unbuddied list: one object a page */
			assert_int_equal(cs.obj_used, cs.pages_used);
		pages += cs.pages_used;
		used += cs.obj_used;
	}
	assert_int_equal(zm_pool_class_stats(e.p, (unsigned)e.nchunks, &cs), -EINVAL);
	assert_int_equal(pages, s.pool_pages);
	assert_int_equal(used, s.objects);
	for (int i = 0; i < 40; i++)
		assert_int_equal(zm_pool_free(e.p, h[i]), 0);
	env_fini(&e);
}

static void test_limit(void **st)
{
	struct env e;
	struct zm_pool_stats s;
	zm_handle_t h[9];

	env_init(&e, 4);
	for (int i = 0; i < 8; i++)
		h[i] = put(&e, 2048, (uint64_t)i);
	errno = 0;
	assert_int_equal(zm_pool_alloc(e.p, 2049), 0);
	assert_int_equal(errno, ENOMEM);
	zm_pool_stats(e.p, &s);
	assert_int_equal(s.malloc_fail, 1);
	assert_int_equal(zm_pool_check(e.p), 0);
	assert_int_equal(zm_pool_free(e.p, h[3]), 0);
	h[8] = put(&e, 2048, 8);         /* into the freed half */
	assert_int_equal(pages_of(&e), 4);
	for (int i = 0; i < 9; i++)
		if (i != 3)
			assert_int_equal(zm_pool_free(e.p, h[i]), 0);
	env_fini(&e);
}

/* ---- randomized, against a model -------------------------------------- */

#define MAXO 2000
#define MAXPFN ((64 << 20) / P)

struct mobj {
	zm_handle_t h;
	size_t size;
	zm_pfn_t pfn;
	int first;
	uint8_t *data;
};

static size_t model_size(struct env *e, struct rng *r)
{
	switch (rng_below(r, 8)) {
	case 0:
		return P;                                  /* a page alone */
	case 1:
		return (1 + rng_below(r, e->nchunks)) * e->chunk; /* exact chunks */
	default:
		return pt_size(r, P);
	}
}

static void test_model(void **st)
{
	static struct mobj o[MAXO];
	static unsigned used[MAXPFN][2];                   /* chunks per buddy */
	struct env e;
	struct rng r;
	size_t n = 0, npages = 0, maxpfn = 0;
	zm_handle_t freed[32];
	size_t nfreed = 0;
	uint8_t buf[P];

	memset(used, 0, sizeof(used));
	rng_seed(&r, g_seed);
	env_init(&e, 0);
	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (op < 45 && n < MAXO) {
			size_t sz = model_size(&e, &r);
			unsigned c = (unsigned)((sz + e.chunk - 1) / e.chunk), best = 0;
			struct mobj *x = &o[n];

			/* the tightest half-used page with room, if any */
			for (size_t i = 0; i <= maxpfn; i++) {
				unsigned a = used[i][0], b = used[i][1];
				unsigned fr = (unsigned)e.nchunks - a - b;

				if ((!a) != (!b) && fr >= c && (!best || fr < best))
					best = fr;
			}
			x->size = sz;
			x->data = malloc(sz);
			for (size_t k = 0; k < sz; k++)
				x->data[k] = (uint8_t)rng_next(&r);
			x->h = zm_pool_alloc(e.p, sz);
			assert_true(x->h);
			assert_int_equal(zm_pool_obj_size(e.p, x->h), c * e.chunk);
			assert_int_equal(zm_pool_write(e.p, x->h, x->data, sz), 0);
			where(&e, x->h, &x->pfn, &x->first);
			assert_true(x->pfn < MAXPFN);
			if (x->pfn > maxpfn)
				maxpfn = x->pfn;
			if (best) {          /* joined a page with exactly that room */
				unsigned a = used[x->pfn][0], b = used[x->pfn][1];

				assert_true((!a) != (!b));
				assert_int_equal(e.nchunks - a - b, best);
				assert_int_equal(x->first, !a);
			} else {             /* a new page, first buddy */
				assert_true(!used[x->pfn][0] && !used[x->pfn][1]);
				assert_true(x->first);
				npages++;
			}
			used[x->pfn][!x->first] = c;
			n++;
		} else if (op < 75 && n) {
			size_t i = rng_below(&r, n);

			assert_int_equal(zm_pool_free(e.p, o[i].h), 0);
			used[o[i].pfn][!o[i].first] = 0;
			if (!used[o[i].pfn][0] && !used[o[i].pfn][1])
				npages--;
			freed[nfreed < 32 ? nfreed++ : rng_below(&r, 32)] = o[i].h;
			free(o[i].data);
			o[i] = o[--n];
		} else if (op < 85 && n) {
			size_t i = rng_below(&r, n);

			assert_int_equal(zm_pool_read(e.p, o[i].h, buf, o[i].size), 0);
			assert_memory_equal(buf, o[i].data, o[i].size);
		} else if (op < 95 && n) {
			size_t i = rng_below(&r, n), k = rng_below(&r, o[i].size);
			uint8_t *m = zm_pool_map(e.p, o[i].h, ZM_MAP_RW);

			assert_non_null(m);
			assert_memory_equal(m, o[i].data, o[i].size);
			o[i].data[k] ^= 0x5a;
			m[k] ^= 0x5a;
			zm_pool_unmap(e.p, o[i].h);
		} else if (nfreed) {
			zm_handle_t h = freed[rng_below(&r, nfreed)];
			int live = 0;

			for (size_t i = 0; i < n; i++)
				live |= o[i].h == h;
			if (!live)   /* never reissued (generations); cheap to be sure */
				assert_int_equal(zm_pool_free(e.p, h), -EINVAL);
		}
		assert_int_equal(pages_of(&e), npages);
		assert_int_equal(zm_pool_check(e.p), 0);
	}
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(zm_pool_read(e.p, o[i].h, buf, o[i].size), 0);
		assert_memory_equal(buf, o[i].data, o[i].size);
		assert_int_equal(zm_pool_free(e.p, o[i].h), 0);
		free(o[i].data);
	}
	assert_int_equal(pages_of(&e), 0);
	env_fini(&e);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_per_page),
		cmocka_unit_test(test_best_fit),
		cmocka_unit_test(test_page_return),
		cmocka_unit_test(test_page_sized),
		cmocka_unit_test(test_bad_handles),
		cmocka_unit_test(test_check_finds),
		cmocka_unit_test(test_no_compaction_and_table),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_model),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("zbud", tests, NULL, NULL);
}
