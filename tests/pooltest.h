/* Helpers for the pool tests: a realistic size distribution, objects
 * that carry their pattern's cookie, a compacting thread, and pool
 * configurations to run every suite over. */
#ifndef ZM_POOLTEST_H
#define ZM_POOLTEST_H

#include <pthread.h>

#include "testutil.h"
#include <zmem/pool.h>

/* Compressed sizes of 4 KiB pages of process memory are far from uniform:
 * many small (mostly-zero and pointer-rich pages), a broad middle, and a
 * tail of poorly compressing pages near the page size.  Scaled to the page
 * size. */
static inline size_t pt_size(struct rng *r, size_t page)
{
	unsigned k = (unsigned)rng_below(r, 100);
	size_t s;

	if (k < 25)
		s = 16 + rng_below(r, page / 10);
	else if (k < 80)
		s = page / 10 + rng_below(r, page / 2);
	else if (k < 95)
		s = page * 6 / 10 + rng_below(r, page * 3 / 10);
	else
		s = page - rng_below(r, page / 20);
	return s < 1 ? 1 : s > page ? page : s;
}

/* Fill buf with a pattern derived from a cookie. */
static inline void pt_fill(void *buf, size_t len, uint64_t cookie)
{
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)((cookie >> ((i & 7) * 8)) + i * 31);
}

static inline int pt_check(const void *buf, size_t len, uint64_t cookie)
{
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != (uint8_t)((cookie >> ((i & 7) * 8)) + i * 31))
			return -1;
	return 0;
}

/* A test's record of one object: its handle, size and pattern cookie. */
struct pt_obj {
	zm_handle_t h;
	size_t size;
	uint64_t cookie;
};

/* Check an object's pattern through zm_pool_read or a map in a random
 * mode (rewriting the same pattern when the mode writes); 0 if whole. */
static inline int pt_check_obj(struct zm_pool *p, const struct pt_obj *o, uint8_t *buf,
			       struct rng *r)
{
	unsigned how = (unsigned)rng_below(r, 4);
	uint8_t *m;
	int bad = 0;

	if (how == 0) {
		if (zm_pool_read(p, o->h, buf, o->size))
			return -1;
		return pt_check(buf, o->size, o->cookie);
	}
	m = zm_pool_map(p, o->h, (enum zm_map_mode)how);
	if (!m)
		return -1;
	if (how & ZM_MAP_RO)
		bad = pt_check(m, o->size, o->cookie);
	if (how & ZM_MAP_WO)
		pt_fill(m, o->size, o->cookie);
	zm_pool_unmap(p, o->h);
	return bad;
}

/* Put o in p: allocate o->size bytes and write o's pattern there (through
 * buf, of o->size bytes at least).  0; -1 if the allocation failed (o->h
 * is 0 then); else zm_pool_write()'s error. */
static inline int pt_put(struct zm_pool *p, struct pt_obj *o, uint8_t *buf)
{
	o->h = zm_pool_alloc(p, o->size);
	if (!o->h)
		return -1;
	pt_fill(buf, o->size, o->cookie);
	return zm_pool_write(p, o->h, buf, o->size);
}

/* Check o whole (pt_check_obj()), then free it; 0, or -1 if either
 * failed (a broken object is not freed). */
static inline int pt_drop(struct zm_pool *p, const struct pt_obj *o, uint8_t *buf,
			  struct rng *r)
{
	return pt_check_obj(p, o, buf, r) || zm_pool_free(p, o->h) ? -1 : 0;
}

/*
 * One stress thread's loop over a shared pool: `steps` times, an operation
 * drawn from 0..99: below put_end and holding fewer than `hold` objects,
 * allocate one (pt_size(), at most max_size bytes) with a cookie of the
 * thread and a serial and write it; below check_end, with objects held,
 * check one (pt_check_obj(), and its zm_pool_obj_size() too if
 * check_size); below drop_end, check and free one; otherwise `other`
 * (when set: a test's own operations, e.g. handing objects to other
 * threads).  `first`, when set, sees each operation before all that and
 * takes it by returning nonzero (a mass free, say).  Every object left is
 * checked and freed at the end.  Returns the count of errors (a put that
 * failed, a pattern broken, a free refused), for pt_run_compacting().
 */
struct pt_churn;
typedef int (*pt_churn_op)(struct pt_churn *c, unsigned op);

struct pt_churn {
	struct zm_pool *pool;
	long id, steps;          /* the thread's number; steps to run */
	uint64_t seed;           /* of the thread's own random stream */
	size_t hold, max_size;
	unsigned put_end, check_end, drop_end;
	bool check_size;
	pt_churn_op first, other;
	void *arg;               /* the test's, for first and other */
	/* the loop's state, for first and other */
	struct rng r;
	struct pt_obj *held;
	size_t n;
	uint8_t *buf;            /* max_size bytes */
	long errors;
};

static inline long pt_churn_run(struct pt_churn *c)
{
	uint64_t serial = 0;

	c->held = malloc(c->hold * sizeof(*c->held));
	c->buf = malloc(c->max_size);
	assert_true(c->held && c->buf);
	c->n = 0;
	c->errors = 0;
	rng_seed(&c->r, c->seed);
	for (long s = 0; s < c->steps; s++) {
		unsigned op = (unsigned)rng_below(&c->r, 100);

		if (c->first && c->first(c, op)) {
			continue;
		} else if (op < c->put_end && c->n < c->hold) {
			struct pt_obj o = { 0, pt_size(&c->r, c->max_size),
					    ((uint64_t)c->id << 48) | ++serial };

			if (pt_put(c->pool, &o, c->buf))
				c->errors++;
			if (o.h)
				c->held[c->n++] = o;
		} else if (op < c->check_end && c->n) {
			struct pt_obj *o = &c->held[rng_below(&c->r, c->n)];

			if (pt_check_obj(c->pool, o, c->buf, &c->r) ||
			    (c->check_size && zm_pool_obj_size(c->pool, o->h) < o->size))
				c->errors++;
		} else if (op < c->drop_end && c->n) {
			size_t i = rng_below(&c->r, c->n);

			if (pt_drop(c->pool, &c->held[i], c->buf, &c->r))
				c->errors++;
			c->held[i] = c->held[--c->n];
		} else if (c->other) {
			c->other(c, op);
		}
	}
	while (c->n) {
		c->n--;
		if (pt_drop(c->pool, &c->held[c->n], c->buf, &c->r))
			c->errors++;
	}
	free(c->held);
	free(c->buf);
	return c->errors;
}

/* A thread that calls zm_pool_compact() on pool in a loop until stop is
 * set (atomically), counting the calls that failed. */
struct pt_compactor {
	struct zm_pool *pool;
	int stop;
	long errors;
};

static inline void *pt_compact_loop(void *arg)
{
	struct pt_compactor *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
		long r = zm_pool_compact(c->pool);

		if (r < 0 && !c->errors++)
			fprintf(stderr, "zm_pool_compact: %ld\n", r);
	}
	return NULL;
}

#define PT_MAX_THREADS 16

/* Run nt (at most PT_MAX_THREADS) threads of fn, given 0 .. nt-1 as
 * their argument and each returning its count of errors, while another
 * compacts pool in a loop; fails the test if a thread counted errors or
 * a compaction failed. */
static inline void pt_run_compacting(struct zm_pool *pool, long nt, void *(*fn)(void *))
{
	struct pt_compactor cx = { .pool = pool };
	pthread_t t[PT_MAX_THREADS], ct;
	void *ret;

	assert_true(nt <= PT_MAX_THREADS);
	pthread_create(&ct, NULL, pt_compact_loop, &cx);
	for (long i = 0; i < nt; i++)
		pthread_create(&t[i], NULL, fn, (void *)i);
	for (long i = 0; i < nt; i++) {
		pthread_join(t[i], &ret);
		assert_int_equal((long)ret, 0);
	}
	__atomic_store_n(&cx.stop, 1, __ATOMIC_RELAXED);
	pthread_join(ct, NULL);
	assert_int_equal(cx.errors, 0);
}

/* A model test's map step: map object h (whose model contents are data,
 * size bytes) in a random mode; read-only maps must show the model,
 * write-only maps are filled from it; a writable map then flips one
 * random byte in both, which later reads must see. */
static inline void pt_model_map(struct zm_pool *p, zm_handle_t h, uint8_t *data, size_t size,
				struct rng *r)
{
	enum zm_map_mode mode = (enum zm_map_mode)(1 + rng_below(r, 3));
	uint8_t *m = zm_pool_map(p, h, mode);

	assert_non_null(m);
	if (mode & ZM_MAP_RO)
		assert_memory_equal(m, data, size);
	if (mode == ZM_MAP_WO)
		memcpy(m, data, size);
	if (mode & ZM_MAP_WO) {
		size_t k = rng_below(r, size);

		data[k] ^= 0xa5;
		m[k] ^= 0xa5;
	}
	zm_pool_unmap(p, h);
}

/* The configurations every pool suite runs over. */
static const struct zm_pool_config pt_configs[] = {
	{ .allocator = "zsmalloc" },
	{ .allocator = "zsmalloc", .span = ZM_SPAN_COPY },
	{ .allocator = "zsmalloc", .page_size = 16384, .class_spacing = 64, .max_zspage_pages = 2 },
	{ .allocator = "malloc" },
	{ .allocator = "xvmalloc" },
	{ .allocator = "xvmalloc", .page_size = 16384 },
	{ .allocator = "xcfmalloc" },
	{ .allocator = "xcfmalloc", .page_size = 16384 },
	{ .allocator = "zbud" },
};
#define PT_NCONFIGS (sizeof(pt_configs) / sizeof(pt_configs[0]))

/* A configuration's name for messages. */
static inline const char *pt_name(const struct zm_pool_config *c)
{
	static char names[PT_NCONFIGS][64];
	char *buf = names[c - pt_configs < (long)PT_NCONFIGS && c >= pt_configs ?
			  c - pt_configs : 0];

	snprintf(buf, 64, "%s/%s/%zu", c->allocator,
		 c->span == ZM_SPAN_COPY ? "copy" : "default",
		 c->page_size ? c->page_size : 4096);
	return buf;
}

/* Run fn as the cmocka group named group, once per configuration (fn's
 * state), each test named by pt_name(). */
static inline int pt_run_configs(const char *group, CMUnitTestFunction fn)
{
	struct CMUnitTest tests[PT_NCONFIGS];

	for (size_t i = 0; i < PT_NCONFIGS; i++) {
		tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate(fn, (void *)&pt_configs[i]);
		tests[i].name = pt_name(&pt_configs[i]);
	}
	return _cmocka_run_group_tests(group, tests, PT_NCONFIGS, NULL, NULL);
}

#endif
