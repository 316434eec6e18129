/* Unit tests of the pool interface, over every backend configuration. */
#define ZMEM_ADVANCED  /* tests reach the advanced tier too */
#include <errno.h>
#include <stdbool.h>

#include "pooltest.h"
#include <zmem/pages.h>

static struct zm_pool *mk(const struct zm_pool_config *base, size_t limit)
{
	struct zm_pool_config c = *base;
	struct zm_pool *p = NULL;

	c.limit_bytes = limit;
	c.arena_bytes = 256 << 20;
	assert_int_equal(zm_pool_create(&c, &p), 0);
	return p;
}

static size_t psize(const struct zm_pool_config *c)
{
	return c->page_size ? c->page_size : 4096;
}

static void test_create_bad(void **st)
{
	struct zm_pool_config c = { .allocator = "nonesuch" };
	struct zm_pool *p = (void *)1;

	assert_int_equal(zm_pool_create(&c, &p), -EINVAL);
	assert_null(p);
	c.allocator = "zsmalloc";
	c.class_spacing = 12;
	assert_int_equal(zm_pool_create(&c, &p), -EINVAL);
	c.class_spacing = 16;
	c.max_zspage_pages = 99;
	assert_int_equal(zm_pool_create(&c, &p), -EINVAL);
	assert_int_equal(zm_pool_create(NULL, NULL), -EINVAL);
	assert_int_equal(zm_pool_create(NULL, &p), 0);
	assert_string_equal(zm_pool_backend(p), "zsmalloc");
	zm_pool_destroy(p);
	zm_pool_destroy(NULL);
	assert_string_equal(zm_pool_backends()[0], "zsmalloc");
}

static void test_sizes(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool *p = mk(&pt_configs[k], 0);
		size_t P = psize(&pt_configs[k]);
		uint8_t *buf = malloc(P), *out = malloc(P);
		size_t sizes[64], n = 0;
		zm_handle_t h[64];

		for (size_t s = 1; s < 80; s += 7)
			sizes[n++] = s;
		for (size_t s = 1; s <= 8; s++)
			sizes[n++] = P * s / 9;
		sizes[n++] = P - 17, sizes[n++] = P - 16, sizes[n++] = P - 15;
		sizes[n++] = P - 1, sizes[n++] = P;
		for (size_t i = 0; i < n; i++) {
			h[i] = zm_pool_alloc(p, sizes[i]);
			assert_true(h[i] != 0);
			assert_true(zm_pool_obj_size(p, h[i]) >= sizes[i]);
			pt_fill(buf, sizes[i], h[i]);
			assert_int_equal(zm_pool_write(p, h[i], buf, sizes[i]), 0);
		}
		assert_int_equal(zm_pool_check(p), 0);
		for (size_t i = 0; i < n; i++) {
			memset(out, 0, P);
			assert_int_equal(zm_pool_read(p, h[i], out, sizes[i]), 0);
			assert_int_equal(pt_check(out, sizes[i], h[i]), 0);
			assert_int_equal(zm_pool_free(p, h[i]), 0);
		}
		errno = 0;
		assert_int_equal(zm_pool_alloc(p, 0), 0);
		assert_int_equal(errno, EINVAL);
		assert_int_equal(zm_pool_alloc(p, P + 1), 0);
		assert_int_equal(errno, EINVAL);
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_destroy(p);
		free(buf), free(out);
	}
}

/* Objects of 1632 bytes in two-page zspages: some straddle pages. */
static void test_spanning_and_modes(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool *p = mk(&pt_configs[k], 0);
		size_t P = psize(&pt_configs[k]), S = P * 1632 / 4096;
		uint8_t *buf = malloc(P);
		zm_handle_t h[10];
		int copied = 0;

		for (int i = 0; i < 10; i++) {
			h[i] = zm_pool_alloc(p, S);
			assert_true(h[i] != 0);
			pt_fill(buf, S, h[i]);
			assert_int_equal(zm_pool_write(p, h[i], buf, S), 0);
		}
		for (int i = 0; i < 10; i++) {
			uint8_t *m = zm_pool_map(p, h[i], ZM_MAP_RO);
			uint8_t *m2;

			assert_non_null(m);
			assert_int_equal(pt_check(m, S, h[i]), 0);
			if (pt_configs[k].span == ZM_SPAN_COPY) {
				/* is this a copy?  then RO must not write back */
				uint8_t save = m[0];

				m[0] ^= 0xff;
				zm_pool_unmap(p, h[i]);
				assert_int_equal(zm_pool_read(p, h[i], buf, S), 0);
				if (buf[0] == save)
					copied++;
				else
					buf[0] = save, zm_pool_write(p, h[i], buf, S);
			} else {
				zm_pool_unmap(p, h[i]);
			}
			/* RW: a change is kept, the rest stays */
			m = zm_pool_map(p, h[i], ZM_MAP_RW);
			assert_non_null(m);
			m[S - 1] ^= 0x5a;
			/* a second map at once is fine, a third is refused */
			m2 = zm_pool_map(p, h[(i + 1) % 10], ZM_MAP_RO);
			assert_non_null(m2);
			assert_null(zm_pool_map(p, h[(i + 2) % 10], ZM_MAP_RO));
			assert_int_equal(errno, EBUSY);
			zm_pool_unmap(p, h[(i + 1) % 10]);
			zm_pool_unmap(p, h[i]);
			assert_int_equal(zm_pool_read(p, h[i], buf, S), 0);
			buf[S - 1] ^= 0x5a;
			assert_int_equal(pt_check(buf, S, h[i]), 0);
			/* WO: what is written arrives */
			m = zm_pool_map(p, h[i], ZM_MAP_WO);
			assert_non_null(m);
			pt_fill(m, S, h[i] + 1);
			zm_pool_unmap(p, h[i]);
			assert_int_equal(zm_pool_read(p, h[i], buf, S), 0);
			assert_int_equal(pt_check(buf, S, h[i] + 1), 0);
		}
		if (pt_configs[k].span == ZM_SPAN_COPY)
			assert_true(copied >= 2); /* some objects did straddle */
		for (int i = 0; i < 10; i++)
			assert_int_equal(zm_pool_free(p, h[i]), 0);
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_destroy(p);
		free(buf);
	}
}

/* Huge objects (zsmalloc: one page each, no zspage record): counted,
 * reached in every mode, refused when stale, cheap in metadata, and their
 * pages go back even when the pool is destroyed with them live. */
static void test_huge(void **st)
{
	struct zm_pool *p = mk(&pt_configs[0], 0);
	struct zm_pool_stats s, s0;
	enum { N = 100 };
	zm_handle_t h = zm_pool_alloc(p, 4096 - 4), many[N];
	uint8_t buf[4096];

	assert_true(h);
	zm_pool_stats(p, &s);
	assert_int_equal(s.huge_objects, 1);
	assert_int_equal(s.pool_pages, 1);
	assert_int_equal(zm_pool_obj_size(p, h), 4096);
	zm_pool_free(p, h);
	zm_pool_stats(p, &s);
	assert_int_equal(s.pool_pages, 0);
	assert_int_equal(zm_pool_free(p, h), -EINVAL);               /* double */
	assert_int_equal(zm_pool_read(p, h, buf, 10), -EINVAL);
	assert_null(zm_pool_map(p, h, ZM_MAP_RO));

	zm_pool_stats(p, &s0);
	for (int i = 0; i < N; i++) {
		size_t sz = 4065 + (size_t)i % 32;  /* above 4096 - 32 */

		many[i] = zm_pool_alloc(p, sz);
		assert_true(many[i]);
		assert_int_equal(zm_pool_obj_size(p, many[i]), 4096);  /* a page each */
		pt_fill(buf, sz, many[i]);
		if (i % 2) {
			assert_int_equal(zm_pool_write(p, many[i], buf, sz), 0);
		} else {
			void *m = zm_pool_map(p, many[i], ZM_MAP_WO);

			assert_non_null(m);
			memcpy(m, buf, sz);
			zm_pool_unmap(p, many[i]);
		}
	}
	zm_pool_stats(p, &s);
	assert_int_equal(s.huge_objects, N);
	assert_int_equal(s.pool_pages, N);
	/* the handle slot and the pages layer's record of the page: 20 bytes */
	assert_true(s.meta_bytes - s0.meta_bytes <= (uint64_t)N * 24);
	assert_int_equal(zm_pool_check(p), 0);
	for (int i = 0; i < N; i++) {
		const uint8_t *m = zm_pool_map(p, many[i], i % 3 ? ZM_MAP_RO : ZM_MAP_RW);

		assert_non_null(m);
		assert_int_equal(pt_check(m, 4065 + (size_t)i % 32, many[i]), 0);
		zm_pool_unmap(p, many[i]);
		if (i % 2 == 0)
			assert_int_equal(zm_pool_free(p, many[i]), 0);
	}
	assert_int_equal(zm_pool_check(p), 0);
	for (int i = 1; i < N; i += 2) {
		assert_int_equal(zm_pool_read(p, many[i], buf, 4065 + (size_t)i % 32), 0);
		assert_int_equal(pt_check(buf, 4065 + (size_t)i % 32, many[i]), 0);
	}
	zm_pool_destroy(p);  /* with 50 live: their pages go back too */

	struct zm_pages *pg;
	struct zm_pages_stats ps;
	struct zm_pool_config c = pt_configs[0];

	assert_int_equal(zm_pages_create(NULL, &pg), 0);
	c.pages = pg;
	assert_int_equal(zm_pool_create(&c, &p), 0);
	for (int i = 0; i < N; i++)
		assert_true(zm_pool_alloc(p, 4096));
	zm_pool_destroy(p);
	zm_pages_stats(pg, &ps);
	assert_int_equal(ps.in_use, 0);
	assert_int_equal(zm_pages_check(pg), 0);
	zm_pages_destroy(pg);
}

/* zsmalloc makes a class the first time a size comes to it: a pool with
 * a few small objects of one size holds a few hundred bytes of class
 * table, not every class of every shard (128 x CPUs x 192 bytes). */
static void test_classes_made_lazily(void **st)
{
	struct zm_pool *p = mk(&pt_configs[0], 0);
	struct zm_pool_stats s;
	zm_handle_t h[10];

	for (int i = 0; i < 10; i++)
		assert_true(h[i] = zm_pool_alloc(p, 100));
	zm_pool_stats(p, &s);
	printf("10 objects of one size: %llu bytes of metadata\n",
	       (unsigned long long)s.meta_bytes);
	assert_true(s.meta_bytes < 8192);
	assert_int_equal(zm_pool_check(p), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(zm_pool_free(p, h[i]), 0);
	zm_pool_destroy(p);
}

static void test_limit(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool *p;
		size_t P = psize(&pt_configs[k]);
		zm_handle_t h[4096];
		size_t n = 0;
		struct rng r;
		uint8_t *buf = malloc(P);

		if (!strcmp(pt_configs[k].allocator, "malloc")) {
			free(buf);
			continue;  /* malloc has no limit of its own */
		}
		p = mk(&pt_configs[k], 64 * P);
		rng_seed(&r, 1);
		for (;;) {
			size_t s = pt_size(&r, P);

			h[n] = zm_pool_alloc(p, s);
			if (!h[n])
				break;
			pt_fill(buf, s, h[n]);
			assert_int_equal(zm_pool_write(p, h[n], buf, s), 0);
			n++;
			assert_true(n < 4096);
		}
		assert_int_equal(errno, ENOMEM);
		assert_true(n > 16);
		assert_int_equal(zm_pool_check(p), 0);
		rng_seed(&r, 1);
		for (size_t i = 0; i < n; i++) {
			size_t s = pt_size(&r, P);

			assert_int_equal(zm_pool_read(p, h[i], buf, s), 0);
			assert_int_equal(pt_check(buf, s, h[i]), 0);
			assert_int_equal(zm_pool_free(p, h[i]), 0);
		}
		zm_pool_destroy(p);
		free(buf);
	}
}

static void test_bad_handles(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool *p = mk(&pt_configs[k], 0);
		zm_handle_t h = zm_pool_alloc(p, 100), keep = zm_pool_alloc(p, 100);
		char buf[200];

		assert_int_equal(zm_pool_free(p, 0), -EINVAL);
		assert_int_equal(zm_pool_read(p, h, buf, 200 + 4096), -EINVAL);
		assert_int_equal(zm_pool_write(p, h, buf, 5000), -EINVAL);
		zm_handle_t h2;

		assert_int_equal(zm_pool_free(p, h), 0);
		assert_int_equal(zm_pool_free(p, h), -EINVAL);     /* double */
		assert_int_equal(zm_pool_read(p, h, buf, 10), -EINVAL);
		assert_null(zm_pool_map(p, h, ZM_MAP_RO));
		h2 = zm_pool_alloc(p, 100);                       /* reuses the slot */
		assert_true(h2 != h);
		assert_int_equal(zm_pool_free(p, h), -EINVAL);     /* stale */
		assert_int_equal(zm_pool_free(p, 0xdeadbeef00001ull), -EINVAL);
		assert_int_equal(zm_pool_free(p, 2), -EINVAL);
		assert_int_equal(zm_pool_free(p, h2), 0);
		assert_int_equal(zm_pool_check(p), 0);
		assert_int_equal(zm_pool_free(p, keep), 0);
		zm_pool_destroy(p);
	}
}

/* zsmalloc in a ZM_DEBUG >= 2 build poisons a freed object, and the
 * checker names a free object written after it was freed.  The write goes
 * through a pointer kept from a map: a use after free, as a caller could
 * make it.  A kept neighbour holds the page. */
static void test_write_after_free(void **st)
{
#if ZM_DEBUG >= 2
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool *p;
		zm_handle_t h, keep;
		unsigned char *m, was;

		if (strcmp(pt_configs[k].allocator, "zsmalloc") != 0)
			continue;
		p = mk(&pt_configs[k], 0);
		keep = zm_pool_alloc(p, 100);
		h = zm_pool_alloc(p, 100);
		assert_true(keep && h);
		m = zm_pool_map(p, h, ZM_MAP_WO);
		assert_non_null(m);
		memset(m, 1, 100);
		zm_pool_unmap(p, h);
		assert_int_equal(zm_pool_free(p, h), 0);
		assert_int_equal(m[0], 0x6b);   /* poisoned */
		assert_int_equal(m[99], 0x6b);
		assert_int_equal(zm_pool_check(p), 0);
		was = m[57];
		m[57] = 0;                      /* the write after free */
		assert_int_not_equal(zm_pool_check(p), 0);
		m[57] = was;
		assert_int_equal(zm_pool_check(p), 0);
		/* the slot is handed out again, and the checker takes it */
		h = zm_pool_alloc(p, 100);
		assert_true(h != 0);
		assert_int_equal(zm_pool_check(p), 0);
		assert_int_equal(zm_pool_free(p, h), 0);
		assert_int_equal(zm_pool_free(p, keep), 0);
		zm_pool_destroy(p);
	}
#else
	skip();
#endif
	(void)st;
}

/* A handle must stay refused however often its slot is reused (the
 * generation is 21 bits; with 15 bits this came back after 32768). */
static void test_stale_after_reuse(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool *p;
		zm_handle_t stale, keep;

		p = mk(&pt_configs[k], 0);
		stale = zm_pool_alloc(p, 100), keep = zm_pool_alloc(p, 100);
		assert_int_equal(zm_pool_free(p, stale), 0);
		for (int i = 0; i < 70000; i++) {
			zm_handle_t h = zm_pool_alloc(p, 100);

			assert_true(h && h != stale);
			assert_int_equal(zm_pool_free(p, h), 0);
		}
		assert_int_equal(zm_pool_free(p, stale), -EINVAL);
		assert_int_equal(zm_pool_free(p, keep), 0);
		zm_pool_destroy(p);
	}
}

static void test_stats_and_return(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool *p = mk(&pt_configs[k], 0);
		size_t P = psize(&pt_configs[k]);
		struct zm_pool_stats s;
		struct rng r;
		enum { N = 8000 };
		static zm_handle_t h[N];
		uint64_t bytes = 0;
		FILE *f;

		rng_seed(&r, 7);
		for (int i = 0; i < N; i++) {
			size_t sz = pt_size(&r, P);

			h[i] = zm_pool_alloc(p, sz);
			assert_true(h[i]);
			bytes += sz;
		}
		zm_pool_stats(p, &s);
		assert_int_equal(s.objects, N);
		assert_true(s.slot_bytes >= bytes);
		assert_true(s.pool_bytes + s.meta_bytes >= bytes);
		/* the parts of meta_bytes (zmem density -v): within it, and
		 * each there where the backend keeps one */
		assert_true(s.handle_bytes + s.record_bytes + s.pages_meta_bytes <= s.meta_bytes);
		if (!strcmp(s.allocator, "zsmalloc") || !strcmp(s.allocator, "malloc"))
			assert_true(s.handle_bytes >= N * sizeof(uint64_t));
		assert_true(s.record_bytes > 0);
		if (strcmp(s.allocator, "malloc"))
			assert_true(s.pages_meta_bytes >= s.pool_pages * 8);
		printf("%s: %d objects, %llu bytes: pool %llu + meta %llu = %.4f\n",
		       pt_name(&pt_configs[k]), N, (unsigned long long)bytes,
		       (unsigned long long)s.pool_bytes, (unsigned long long)s.meta_bytes,
		       (double)(s.pool_bytes + s.meta_bytes) / (double)bytes);
		f = tmpfile();
		zm_pool_print_classes(p, f);
		if (zm_pool_nr_classes(p))
			assert_true(ftell(f) > 200);
		fclose(f);
		for (int i = 0; i < N; i++)
			assert_int_equal(zm_pool_free(p, h[i]), 0);
		zm_pool_stats(p, &s);
		assert_int_equal(s.objects, 0);
		assert_int_equal(s.pool_pages, 0);
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_destroy(p);
	}
}

static void test_shared_pages(void **st)
{
	struct zm_pages *pg;
	struct zm_pool_config c = { 0 };
	struct zm_pool *a, *b;
	zm_handle_t x, y;

	assert_int_equal(zm_pages_create(NULL, &pg), 0);
	c.pages = pg;
	assert_int_equal(zm_pool_create(&c, &a), 0);
	assert_int_equal(zm_pool_create(&c, &b), 0);
	x = zm_pool_alloc(a, 500);
	y = zm_pool_alloc(b, 500);
	assert_true(x && y);
	assert_int_equal(zm_pool_free(a, x), 0);
	assert_int_equal(zm_pool_free(b, y), 0);
	zm_pool_destroy(a);
	zm_pool_destroy(b);
	assert_int_equal(zm_pages_check(pg), 0);
	zm_pages_destroy(pg);
}

/* Owner words: objects bound to keys of the caller's array are reached
 * through the keys, survive compaction (which rewrites the words), and
 * the pool never changes the owner's bits. */
static void test_owner_words(void **st)
{
	enum { N = 600 };
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool_config c = pt_configs[k];
		uint64_t *w = calloc(N, sizeof(*w));
		size_t P = psize(&c);
		uint8_t *buf = malloc(P);
		struct zm_pool *p;
		struct rng r;
		size_t size[N];
		zm_handle_t h;

		rng_seed(&r, 11 + k);
		for (unsigned i = 0; i < N; i++)
			w[i] = (i * 0x9E3779B9ull << 2) & ZM_POOL_OWNER_MASK;
		c.words = w;
		c.nwords = N;
		c.limit_bytes = 0;
		c.arena_bytes = 256 << 20;
		assert_int_equal(zm_pool_create(&c, &p), 0);
		for (unsigned i = 0; i < N; i++) {
			size[i] = i % 50 == 0 ? P : pt_size(&r, P);
			h = zm_pool_alloc(p, size[i]);
			assert_true(h != 0);
			pt_fill(buf, size[i], i);
			assert_int_equal(zm_pool_write(p, h, buf, size[i]), 0);
			assert_int_equal(zm_pool_bind(p, h, i), 0);
			assert_true(w[i] & 1);
		}
		/* bad input */
		h = zm_pool_alloc(p, 100);
		assert_int_equal(zm_pool_bind(p, h, 3), -EINVAL);     /* in use */
		assert_int_equal(zm_pool_bind(p, h, N), -EINVAL);     /* beyond */
		assert_int_equal(zm_pool_bind(p, 0, 3), -EINVAL);
		assert_int_equal(zm_pool_free_key(p, N), -EINVAL);
		assert_int_equal(zm_pool_key_handle(p, N), 0);
		assert_int_equal(zm_pool_free(p, h), 0);
		/* free every other key, compact, and read all back */
		for (unsigned i = 0; i < N; i += 2) {
			assert_int_equal(zm_pool_free_key(p, i), 0);
			assert_int_equal(zm_pool_key_handle(p, i), 0);
			assert_int_equal(zm_pool_free_key(p, i), -EINVAL);  /* twice */
		}
		assert_int_equal(zm_pool_check(p), 0);
		long moved = zm_pool_compact(p);
		assert_true(moved >= 0 || moved == -EOPNOTSUPP);
		if (!strcmp(zm_pool_backend(p), "zsmalloc")) {
			struct zm_pool_stats ps;

			zm_pool_stats(p, &ps);
			assert_true(ps.objects_moved > 0);
		}
		assert_int_equal(zm_pool_check(p), 0);
		for (unsigned i = 1; i < N; i += 2) {
			h = zm_pool_key_handle(p, i);
			assert_true(h != 0);
			assert_true(zm_pool_obj_size(p, h) >= size[i]);
			assert_int_equal(zm_pool_read(p, h, buf, size[i]), 0);
			assert_int_equal(pt_check(buf, size[i], i), 0);
		}
		/* rebinding a freed key works */
		h = zm_pool_alloc(p, 200);
		pt_fill(buf, 200, 77);
		assert_int_equal(zm_pool_write(p, h, buf, 200), 0);
		assert_int_equal(zm_pool_bind(p, h, 0), 0);
		assert_int_equal(zm_pool_read(p, zm_pool_key_handle(p, 0), buf, 200), 0);
		assert_int_equal(pt_check(buf, 200, 77), 0);
		for (unsigned i = 0; i < N; i++)
			if (i % 2 || i == 0)
				assert_int_equal(zm_pool_free_key(p, i), 0);
		assert_int_equal(zm_pool_check(p), 0);
		for (unsigned i = 0; i < N; i++) {
			assert_int_equal(w[i] & ZM_POOL_WORD_MASK, 0);
			assert_int_equal(w[i], (i * 0x9E3779B9ull << 2) & ZM_POOL_OWNER_MASK);
		}
		zm_pool_destroy(p);
		free(w);
		free(buf);
	}
	/* a pool without owner words refuses keys */
	{
		struct zm_pool *p = mk(&pt_configs[0], 0);
		zm_handle_t h = zm_pool_alloc(p, 100);

		assert_int_equal(zm_pool_bind(p, h, 0), -EINVAL);
		assert_int_equal(zm_pool_key_handle(p, 0), 0);
		assert_int_equal(zm_pool_free(p, h), 0);
		zm_pool_destroy(p);
	}
}

/* zm_pool_obj_size (pool.h) is the object's slot, the bytes it can hold:
 * at least the size asked for, at most a page; write, read and a map
 * reach all of it and no more; and it is the slot the pool's slot_bytes
 * counted for the object (less xcfmalloc's block headers, inside its
 * slots).  zsmalloc without mixed zspages, so that every object takes a
 * class's slot and slot_bytes is exact; an object in a mixed zspage
 * holds the size asked for (the last configuration, where objects go to
 * mixed zspages or their classes). */
static const struct zm_pool_config os_configs[] = {
	{ .allocator = "zsmalloc", .mixed_zspages = -1 },
	{ .allocator = "zsmalloc", .mixed_zspages = -1, .span = ZM_SPAN_COPY },
	{ .allocator = "zsmalloc", .mixed_zspages = -1, .page_size = 16384,
	  .class_spacing = 64, .max_zspage_pages = 2 },
	{ .allocator = "malloc" },
	{ .allocator = "xvmalloc" },
	{ .allocator = "xvmalloc", .page_size = 16384 },
	{ .allocator = "xcfmalloc" },
	{ .allocator = "xcfmalloc", .page_size = 16384 },
	{ .allocator = "zbud" },
	{ .allocator = "zsmalloc", .mixed_zspages = 1, .compact = ZM_COMPACT_OFF },
};

static uint64_t slot_bytes(struct zm_pool *p)
{
	struct zm_pool_stats s;

	assert_int_equal(zm_pool_stats(p, &s), 0);
	return s.slot_bytes;
}

static void test_obj_size(void **st)
{
	for (size_t k = 0; k < sizeof(os_configs) / sizeof(os_configs[0]); k++) {
		const struct zm_pool_config *c = &os_configs[k];
		bool xcf = !strcmp(c->allocator, "xcfmalloc");
		bool mixed = c->mixed_zspages > 0;
		struct zm_pool *p = mk(c, 0);
		size_t P = psize(c);
		uint8_t *buf = malloc(P + 1), *out = malloc(P + 1);
		zm_handle_t keep[16];
		unsigned nkeep = 0, in_mixed = 0;

		for (size_t size = 1; size <= P; size += size < 64 ? 1 : size < 512 ? 7 : 61) {
			uint64_t before = slot_bytes(p), slot;
			zm_handle_t h = zm_pool_alloc(p, size);
			size_t n = zm_pool_obj_size(p, h);
			uint8_t *m;

			assert_true(h != 0);
			slot = slot_bytes(p) - before;
			if (n < size || n > P || (mixed ? n != size && n != slot : xcf ? n + 16 < slot ||
						  n + 8 > slot : n != slot))
				fail_msg("%s: size %zu: obj_size %zu, slot %llu bytes",
					 c->allocator, size, n, (unsigned long long)slot);
			in_mixed += mixed && n != slot;
			/* all of it written and read back, one byte more refused */
			pt_fill(buf, P + 1, h);
			assert_int_equal(zm_pool_write(p, h, buf, n), 0);
			assert_int_equal(zm_pool_write(p, h, buf, n + 1), -EINVAL);
			assert_int_equal(zm_pool_read(p, h, out, n + 1), -EINVAL);
			memset(out, 0, P);
			assert_int_equal(zm_pool_read(p, h, out, n), 0);
			assert_int_equal(pt_check(out, n, h), 0);
			/* and through a map, in place or copied */
			m = zm_pool_map(p, h, ZM_MAP_RW);
			assert_non_null(m);
			assert_int_equal(pt_check(m, n, h), 0);
			pt_fill(m, n, ~h);
			zm_pool_unmap(p, h);
			assert_int_equal(zm_pool_read(p, h, out, n), 0);
			assert_int_equal(pt_check(out, n, ~h), 0);
			/* some stay, so that later objects share pages */
			if (size % 5 == 0 && nkeep < 16)
				keep[nkeep++] = h;
			else
				assert_int_equal(zm_pool_free(p, h), 0);
		}
		for (unsigned i = 0; i < nkeep; i++)
			assert_int_equal(zm_pool_free(p, keep[i]), 0);
		assert_true(!mixed || in_mixed > 0);
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_destroy(p);
		free(buf);
		free(out);
	}
}

struct key_read {
	uint8_t *buf;
	size_t size;
};

static int key_copy(void *arg, const void *obj, size_t len)
{
	struct key_read *k = arg;

	if (len < k->size)
		return -EMSGSIZE;
	memcpy(k->buf, obj, k->size);
	return 0;
}

/* The key's object is size bytes of pattern cookie. */
static void expect_key(struct zm_pool *p, uint64_t key, size_t size, uint64_t cookie)
{
	uint8_t *buf = malloc(size);
	struct key_read k = { buf, size };

	assert_int_equal(zm_pool_get_key(p, key, key_copy, &k), 0);
	assert_int_equal(pt_check(buf, size, cookie), 0);
	free(buf);
}

static uint64_t pool_objects(struct zm_pool *p)
{
	struct zm_pool_stats st;

	assert_int_equal(zm_pool_stats(p, &st), 0);
	return st.objects;
}

/* zm_pool_put_key over a key that holds an object: the old one is freed
 * exactly once (the pool's object count stays, the checker finds no
 * leak, and when the key goes the pool gives back every page). */
static void test_put_key_replaces(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool_config c = pt_configs[k];
		size_t P = psize(&c), sizes[] = { 100, P, 2000, 40, P / 2 + 7 };
		uint64_t w[4] = { 0 };
		uint8_t *buf = malloc(P);
		struct zm_pool_stats ps;
		struct zm_pool *p;

		c.words = w;
		c.nwords = 4;
		c.arena_bytes = 256 << 20;
		assert_int_equal(zm_pool_create(&c, &p), 0);
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			pt_fill(buf, sizes[i], 100 + i);
			assert_int_equal(zm_pool_put_key(p, 2, buf, sizes[i]), 0);
			assert_int_equal(pool_objects(p), 1);
			assert_true(w[2] & 1);
			expect_key(p, 2, sizes[i], 100 + i);
			assert_int_equal(zm_pool_check(p), 0);
		}
		/* bad input changes nothing */
		assert_int_equal(zm_pool_put_key(p, 4, buf, 10), -EINVAL);
		assert_int_equal(zm_pool_put_key(p, 2, NULL, 10), -EINVAL);
		assert_int_equal(zm_pool_put_key(p, 2, buf, 0), -EINVAL);
		assert_int_equal(zm_pool_put_key(p, 2, buf, P + 1), -EINVAL);
		assert_int_equal(zm_pool_get_key(p, 1, key_copy, NULL), -EINVAL);
		assert_int_equal(zm_pool_get_key(p, 4, key_copy, NULL), -EINVAL);
		expect_key(p, 2, P / 2 + 7, 104);
		assert_int_equal(zm_pool_free_key(p, 2), 0);
		assert_int_equal(w[2], 0);
		zm_pool_stats(p, &ps);
		assert_int_equal(ps.objects, 0);
		if (strcmp(c.allocator, "malloc"))
			assert_int_equal(ps.pool_pages, 0);
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_destroy(p);
		free(buf);
	}
}

/* A put_key whose allocation fails (the pages at their limit) answers
 * -ENOMEM and leaves the key's old object as it was. */
static void test_put_key_no_room(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool_config c = pt_configs[k];
		size_t P = psize(&c), n = 0;
		uint64_t w[2] = { 0 };
		zm_handle_t h[4096];
		uint8_t *buf = malloc(P);
		struct zm_pool *p;

		if (!strcmp(c.allocator, "malloc")) {
			free(buf);
			continue;  /* malloc has no limit of its own */
		}
		c.words = w;
		c.nwords = 2;
		c.limit_bytes = 16 * P;
		c.arena_bytes = 256 << 20;
		assert_int_equal(zm_pool_create(&c, &p), 0);
		pt_fill(buf, 300, 5);
		assert_int_equal(zm_pool_put_key(p, 1, buf, 300), 0);
		/* fill every page with whole-page objects */
		while ((h[n] = zm_pool_alloc(p, P)) != 0)
			assert_true(++n < 4096);
		pt_fill(buf, P, 6);
		assert_int_equal(zm_pool_put_key(p, 1, buf, P), -ENOMEM);
		assert_int_equal(zm_pool_put_key(p, 0, buf, P), -ENOMEM);
		assert_int_equal(w[0], 0);
		assert_int_equal(pool_objects(p), n + 1);
		expect_key(p, 1, 300, 5);
		assert_int_equal(zm_pool_check(p), 0);
		/* with room again, the put goes through */
		assert_int_equal(zm_pool_free(p, h[--n]), 0);
		assert_int_equal(zm_pool_put_key(p, 1, buf, P), 0);
		expect_key(p, 1, P, 6);
		assert_int_equal(pool_objects(p), n + 1);
		while (n)
			assert_int_equal(zm_pool_free(p, h[--n]), 0);
		assert_int_equal(zm_pool_free_key(p, 1), 0);
		assert_int_equal(zm_pool_check(p), 0);
		zm_pool_destroy(p);
		free(buf);
	}
}

/* zm_pool_prefetch_key is a hint: on a key holding a small object, a
 * page-sized one, nothing, beyond the owner words, or a pool with no
 * words, it changes nothing (the objects, their count, the checker) and
 * does not fault. */
static void test_prefetch_key(void **st)
{
	for (size_t k = 0; k < PT_NCONFIGS; k++) {
		struct zm_pool_config c = pt_configs[k];
		size_t P = psize(&c), sizes[] = { 40, 700, P / 2 + 7, P };
		uint64_t w[6] = { 0 };
		uint8_t *buf = malloc(P);
		struct zm_pool *p, *bare;

		c.words = w;
		c.nwords = 6;
		c.arena_bytes = 256 << 20;
		assert_int_equal(zm_pool_create(&c, &p), 0);
		for (unsigned i = 0; i < 4; i++) {
			pt_fill(buf, sizes[i], 200 + i);
			assert_int_equal(zm_pool_put_key(p, i, buf, sizes[i]), 0);
		}
		for (uint64_t key = 0; key < 8; key++)
			zm_pool_prefetch_key(p, key);
		zm_pool_prefetch_key(NULL, 0);
		assert_int_equal(pool_objects(p), 4);
		for (unsigned i = 0; i < 4; i++)
			expect_key(p, i, sizes[i], 200 + i);
		assert_int_equal(w[4] | w[5], 0);
		assert_int_equal(zm_pool_check(p), 0);
		/* and a put after it still replaces the object */
		pt_fill(buf, 700, 300);
		zm_pool_prefetch_key(p, 1);
		assert_int_equal(zm_pool_put_key(p, 1, buf, 700), 0);
		expect_key(p, 1, 700, 300);
		assert_int_equal(pool_objects(p), 4);
		zm_pool_destroy(p);

		c.words = NULL;
		c.nwords = 0;
		assert_int_equal(zm_pool_create(&c, &bare), 0);
		zm_pool_prefetch_key(bare, 0);
		assert_int_equal(zm_pool_check(bare), 0);
		zm_pool_destroy(bare);
		free(buf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_bad),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_spanning_and_modes),
		cmocka_unit_test(test_huge),
		cmocka_unit_test(test_classes_made_lazily),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_bad_handles),
		cmocka_unit_test(test_write_after_free),
		cmocka_unit_test(test_stale_after_reuse),
		cmocka_unit_test(test_stats_and_return),
		cmocka_unit_test(test_shared_pages),
		cmocka_unit_test(test_owner_words),
		cmocka_unit_test(test_put_key_replaces),
		cmocka_unit_test(test_put_key_no_room),
		cmocka_unit_test(test_prefetch_key),
		cmocka_unit_test(test_obj_size),
	};

	return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
