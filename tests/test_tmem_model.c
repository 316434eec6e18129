/*
 * Seeded randomized test of tmem against a reference model, on every
 * backend: a few pools of both kinds (some with exclusive gets) made and
 * destroyed as it goes, under a budget far smaller than the data put.
 * The model keeps each key's value (a cookie and a length, tmemtest.h)
 * and whether tmem must still hold it (persistent pools) or may have
 * dropped it (ephemeral ones).  Random steps: puts of random lengths and
 * compressibility, gets (some with too small a buffer), flushes of pages,
 * objects and pools, pool create/destroy, calls on destroyed pools.
 *
 *   persistent gets equal the model exactly;
 *   ephemeral gets miss or equal the model (a miss: the model forgets);
 *   after a failed put the key misses;
 *   the flushes' counts agree with the model;
 *   the statistics agree with the model and with each other, the budget
 *   and the persistent share hold, and zm_tmem_check() is clean.
 *
 *   test_tmem_model [--seed N] [--steps N]
 */
#include <errno.h>

#include "tmemtest.h"
#include <zmem/pool.h>
#include <zmem/tmem.h>

#define NSLOT 4                 /* pools alive at once, at most */
#define NOID 6
#define NIDX 520                /* over three shards' ranges of index */
#define BUDGET (256u << 10)
#define PCT 60

static uint64_t g_seed;
static long g_steps = 50000;

static const uint64_t g_oids[NOID] = { 0, 1, 2, 12345, 1ull << 40, UINT64_MAX };

static uint32_t idx_of(unsigned i)
{
	return i < 512 ? i : UINT32_MAX - (i - 512) * 1000;
}

enum { NONE, SURE, MAYBE };

struct ent {
	uint64_t cookie;
	uint32_t len;
	uint8_t state;
};

struct mpool {
	int id;                 /* 0: the slot is free */
	enum zm_tmem_kind kind;
	int excl;
	size_t ps;
	struct ent e[NOID][NIDX];
	/* the calls the model made, for the pool's counters */
	uint64_t puts, stored, gets, flush_pages, flush_objects, flushed;
};

struct run {
	struct zm_tmem *t;
	const char *backend;
	size_t ps;
	struct mpool p[NSLOT];
	int dead[16];           /* ids of destroyed pools, the last 16 */
	unsigned ndead, deadpos;
	uint8_t *buf;
	struct rng r;
	long step;
	uint64_t n_put, n_stored, n_get, n_hit, n_e2big, n_nospc, n_probe, n_evicted;
};

#define FAIL(R, ...)                                                                        \
	fail_msg("%s step %ld (seed %llu): " __VA_ARGS__, (R)->backend, (R)->step,          \
		 (unsigned long long)g_seed)

static void pool_make(struct run *R, struct mpool *m)
{
	struct zm_tmem_pool_config c = { 0 };

	memset(m, 0, sizeof(*m));
	m->kind = rng_below(&R->r, 2) ? ZM_TMEM_PERSISTENT : ZM_TMEM_EPHEMERAL;
	m->excl = m->kind == ZM_TMEM_EPHEMERAL && rng_below(&R->r, 3) == 0;
	m->ps = R->ps > 4096 && rng_below(&R->r, 2) ? R->ps / 2 : R->ps;
	c.kind = m->kind;
	c.exclusive_gets = m->excl;
	c.page_size = m->ps == R->ps && rng_below(&R->r, 2) ? 0 : m->ps;
	m->id = zm_tmem_pool_create(R->t, &c);
	if (m->id <= 0)
		FAIL(R, "pool_create(kind %d, excl %d, page %zu): %d", m->kind, m->excl, m->ps,
		     m->id);
	for (unsigned i = 0; i < R->ndead; i++)
		if (R->dead[i] == m->id)
			FAIL(R, "pool_create gave the id of a destroyed pool, %d", m->id);
}

static void forget_all(struct mpool *m)
{
	for (int o = 0; o < NOID; o++)
		for (int i = 0; i < NIDX; i++)
			m->e[o][i].state = NONE;
}

static void pool_kill(struct run *R, struct mpool *m)
{
	struct zm_tmem_stats st;
	int rc;

	tt_stats(R->t, m->id, &st);
	R->n_evicted += st.evicted_objects;
	rc = zm_tmem_pool_destroy(R->t, m->id);

	if (rc)
		FAIL(R, "pool_destroy(%d): %d", m->id, rc);
	R->dead[R->deadpos++ % 16] = m->id;
	if (R->ndead < 16)
		R->ndead++;
	m->id = 0;
}

/* Get (oid, idx) and hold it against the model; cap_short asks with one
 * byte less room than the value needs. */
static void do_get(struct run *R, struct mpool *m, int o, unsigned i, int cap_short)
{
	struct ent *x = &m->e[o][i];
	size_t cap = m->ps;
	int rc;

	if (cap_short && x->state != NONE && x->len > 1)
		cap = x->len - 1;
	else
		cap_short = 0;
	rc = zm_tmem_get(R->t, m->id, g_oids[o], idx_of(i), R->buf, cap);
	m->gets++;
	R->n_get++;
	if (rc == -ENOENT) {
		if (x->state == SURE)
			FAIL(R, "persistent pool %d: get(%llu, %u) missed a page of %u bytes",
			     m->id, (unsigned long long)g_oids[o], idx_of(i), x->len);
		x->state = NONE;
		return;
	}
	if (x->state == NONE)
		FAIL(R, "pool %d: get(%llu, %u): %d, want a miss", m->id,
		     (unsigned long long)g_oids[o], idx_of(i), rc);
	R->n_hit++;
	if (cap_short) {
		if (rc != -ENOSPC)
			FAIL(R, "pool %d: get(%llu, %u) with cap %zu for %u bytes: %d, want -ENOSPC",
			     m->id, (unsigned long long)g_oids[o], idx_of(i), cap, x->len, rc);
		return;
	}
	if (rc != (int)x->len)
		FAIL(R, "pool %d: get(%llu, %u): %d, want %u", m->id,
		     (unsigned long long)g_oids[o], idx_of(i), rc, x->len);
	if (tt_diff(R->buf, x->len, x->cookie))
		FAIL(R, "pool %d: get(%llu, %u): wrong byte %zu of %u", m->id,
		     (unsigned long long)g_oids[o], idx_of(i), tt_diff(R->buf, x->len, x->cookie) - 1,
		     x->len);
	if (m->excl)
		x->state = NONE;
}

static void do_put(struct run *R, struct mpool *m, int o, unsigned i)
{
	struct ent *x = &m->e[o][i];
	unsigned k = (unsigned)rng_below(&R->r, 100);
	unsigned noise = k < 25 ? 0 : k < 45 ? 1 : k < 65 ? 2 : k < 80 ? 4 : k < 95 ? 6 : 8;
	uint64_t cookie = tt_cookie(rng_next(&R->r), noise);
	size_t len;
	int rc;

	k = (unsigned)rng_below(&R->r, 4);
	len = k == 0 ? m->ps : k == 1 ? 1 + rng_below(&R->r, 64) : 1 + rng_below(&R->r, m->ps);
	tt_fill(R->buf, len, cookie);
	rc = zm_tmem_put(R->t, m->id, g_oids[o], idx_of(i), R->buf, len);
	m->puts++;
	R->n_put++;
	if (rc == 0) {
		x->cookie = cookie;
		x->len = (uint32_t)len;
		x->state = m->kind == ZM_TMEM_PERSISTENT ? SURE : MAYBE;
		m->stored++;
		R->n_stored++;
		/* random bytes cannot compress under 7/8 of the page */
		if (noise == 8 && len == m->ps)
			FAIL(R, "pool %d: an incompressible page of %zu bytes was stored", m->id,
			     len);
		return;
	}
	if (rc == -E2BIG)
		R->n_e2big++;
	else if (rc == -ENOSPC)
		R->n_nospc++;
	else
		FAIL(R, "pool %d: put(%llu, %u, %zu bytes, noise %u): %d", m->id,
		     (unsigned long long)g_oids[o], idx_of(i), len, noise, rc);
	x->state = NONE;
	/* a failed put leaves nothing under its key */
	rc = zm_tmem_get(R->t, m->id, g_oids[o], idx_of(i), R->buf, m->ps);
	m->gets++;
	R->n_get++;
	if (rc != -ENOENT)
		FAIL(R, "pool %d: get(%llu, %u) after a failed put: %d, want -ENOENT", m->id,
		     (unsigned long long)g_oids[o], idx_of(i), rc);
}

static void do_flush_page(struct run *R, struct mpool *m, int o, unsigned i)
{
	struct ent *x = &m->e[o][i];
	int rc = zm_tmem_flush_page(R->t, m->id, g_oids[o], idx_of(i));

	if (rc == 0) {
		m->flush_pages++;
		m->flushed++;
	}
	if ((x->state == SURE && rc != 0) || (x->state == NONE && rc != -ENOENT) ||
	    (x->state == MAYBE && rc != 0 && rc != -ENOENT))
		FAIL(R, "pool %d: flush_page(%llu, %u): %d, model %d", m->id,
		     (unsigned long long)g_oids[o], idx_of(i), rc, x->state);
	x->state = NONE;
}

/* How many pages of oid slot o (or every object: o < 0) the model says
 * must be there (SURE) and may be there (MAYBE). */
static void count(const struct mpool *m, int o, long *sure, long *maybe, uint64_t *bytes)
{
	*sure = *maybe = 0;
	*bytes = 0;
	for (int a = o < 0 ? 0 : o; a < (o < 0 ? NOID : o + 1); a++)
		for (int i = 0; i < NIDX; i++) {
			const struct ent *x = &m->e[a][i];

			if (x->state == SURE) {
				++*sure;
				*bytes += x->len;
			} else if (x->state == MAYBE) {
				++*maybe;
			}
		}
}

static void do_flush_object(struct run *R, struct mpool *m, int o)
{
	long sure, maybe, n;
	uint64_t bytes;

	count(m, o, &sure, &maybe, &bytes);
	n = zm_tmem_flush_object(R->t, m->id, g_oids[o]);
	if (n < sure || n > sure + maybe)
		FAIL(R, "pool %d: flush_object(%llu): %ld, model %ld sure + %ld maybe", m->id,
		     (unsigned long long)g_oids[o], n, sure, maybe);
	if (n > 0)
		m->flush_objects++;
	m->flushed += (uint64_t)n;
	for (int i = 0; i < NIDX; i++)
		m->e[o][i].state = NONE;
}

static void do_flush_pool(struct run *R, struct mpool *m)
{
	long sure, maybe, n;
	uint64_t bytes;

	count(m, -1, &sure, &maybe, &bytes);
	n = zm_tmem_flush_pool(R->t, m->id);
	if (n < sure || n > sure + maybe)
		FAIL(R, "pool %d: flush_pool: %ld, model %ld sure + %ld maybe", m->id, n, sure,
		     maybe);
	m->flushed += (uint64_t)n;
	forget_all(m);
}

/* Read every page the model says may be there, so that the model knows
 * exactly (non-exclusive ephemeral pools; a persistent pool knows
 * anyway). */
static void probe(struct run *R, struct mpool *m)
{
	struct zm_tmem_stats st;
	uint64_t n = 0, bytes = 0;

	if (m->excl)
		return;
	R->n_probe++;
	for (int o = 0; o < NOID; o++)
		for (unsigned i = 0; i < NIDX; i++) {
			if (m->e[o][i].state == NONE)
				continue;
			do_get(R, m, o, i, 0);
			if (m->e[o][i].state != NONE) {
				n++;
				bytes += m->e[o][i].len;
			}
		}
	tt_stats(R->t, m->id, &st);
	if (st.ephemeral_pages + st.persistent_pages != n || st.orig_bytes != bytes)
		FAIL(R, "pool %d: %llu + %llu pages of %llu bytes, the model has %llu of %llu",
		     m->id, (unsigned long long)st.ephemeral_pages,
		     (unsigned long long)st.persistent_pages, (unsigned long long)st.orig_bytes,
		     (unsigned long long)n, (unsigned long long)bytes);
}

static void check_stats(struct run *R)
{
	struct zm_tmem_stats st, all;
	uint64_t pers_compr = 0, pers_pages = 0, eph_pages = 0, puts = 0, gets = 0;

	for (int s = 0; s < NSLOT; s++) {
		struct mpool *m = &R->p[s];
		long sure, maybe;
		uint64_t bytes;

		if (!m->id)
			continue;
		tt_stats(R->t, m->id, &st);
		count(m, -1, &sure, &maybe, &bytes);
		if (st.puts != m->puts || st.puts_stored != m->stored || st.gets != m->gets ||
		    st.flush_pages != m->flush_pages || st.flush_objects != m->flush_objects ||
		    st.flushed_pages != m->flushed)
			FAIL(R, "pool %d counters: puts %llu/%llu stored %llu/%llu gets %llu/%llu "
			     "flush_pages %llu/%llu flush_objects %llu/%llu flushed %llu/%llu "
			     "(stats/model)", m->id, (unsigned long long)st.puts,
			     (unsigned long long)m->puts, (unsigned long long)st.puts_stored,
			     (unsigned long long)m->stored, (unsigned long long)st.gets,
			     (unsigned long long)m->gets, (unsigned long long)st.flush_pages,
			     (unsigned long long)m->flush_pages,
			     (unsigned long long)st.flush_objects,
			     (unsigned long long)m->flush_objects,
			     (unsigned long long)st.flushed_pages, (unsigned long long)m->flushed);
		if (m->kind == ZM_TMEM_PERSISTENT) {
			if (st.persistent_pages != (uint64_t)sure || st.ephemeral_pages ||
			    st.orig_bytes != bytes)
				FAIL(R, "persistent pool %d: %llu pages of %llu bytes (and %llu "
				     "ephemeral), the model has %ld of %llu", m->id,
				     (unsigned long long)st.persistent_pages,
				     (unsigned long long)st.orig_bytes,
				     (unsigned long long)st.ephemeral_pages, sure,
				     (unsigned long long)bytes);
			if (st.dropped || st.evicted_objects)
				FAIL(R, "persistent pool %d: %llu dropped, %llu evicted", m->id,
				     (unsigned long long)st.dropped,
				     (unsigned long long)st.evicted_objects);
			pers_compr += st.compr_bytes;
			pers_pages += st.persistent_pages;
		} else {
			if (st.persistent_pages || st.ephemeral_pages > (uint64_t)maybe)
				FAIL(R, "ephemeral pool %d: %llu pages (and %llu persistent), the "
				     "model knows of at most %ld", m->id,
				     (unsigned long long)st.ephemeral_pages,
				     (unsigned long long)st.persistent_pages, maybe);
			if (st.dropped != st.puts - st.puts_stored)
				FAIL(R, "ephemeral pool %d: %llu dropped of %llu puts, %llu stored",
				     m->id, (unsigned long long)st.dropped,
				     (unsigned long long)st.puts,
				     (unsigned long long)st.puts_stored);
			eph_pages += st.ephemeral_pages;
		}
		puts += st.puts;
		gets += st.gets;
	}
	tt_stats(R->t, 0, &all);
	if (all.persistent_pages != pers_pages || all.ephemeral_pages != eph_pages)
		FAIL(R, "instance: %llu + %llu pages, its pools %llu + %llu",
		     (unsigned long long)all.ephemeral_pages, (unsigned long long)all.persistent_pages,
		     (unsigned long long)eph_pages, (unsigned long long)pers_pages);
	if (pers_compr > (uint64_t)BUDGET * PCT / 100)
		FAIL(R, "persistent pages take %llu compressed bytes, above %u%% of %u",
		     (unsigned long long)pers_compr, PCT, BUDGET);
	if (all.budget_bytes != BUDGET || all.pool_bytes > BUDGET)
		FAIL(R, "pool_bytes %llu, budget %llu", (unsigned long long)all.pool_bytes,
		     (unsigned long long)all.budget_bytes);
	(void)puts;
	(void)gets;
	if (zm_tmem_check(R->t))
		FAIL(R, "zm_tmem_check");
}

/* Calls on a destroyed pool's id are refused. */
static void poke_dead(struct run *R)
{
	int id;

	if (!R->ndead)
		return;
	id = R->dead[rng_below(&R->r, R->ndead)];
	R->buf[0] = 1;
	if (zm_tmem_put(R->t, id, 1, 1, R->buf, 1) != -EINVAL ||
	    zm_tmem_get(R->t, id, 1, 1, R->buf, R->ps) != -EINVAL ||
	    zm_tmem_flush_page(R->t, id, 1, 1) != -EINVAL ||
	    zm_tmem_flush_object(R->t, id, 1) != -EINVAL ||
	    zm_tmem_flush_pool(R->t, id) != -EINVAL || zm_tmem_pool_destroy(R->t, id) != -EINVAL)
		FAIL(R, "a call on destroyed pool %d was not refused", id);
}

static void run(const char *backend, size_t ps, uint64_t seed)
{
	static struct run R;
	struct zm_tmem_config c = { .budget_bytes = BUDGET, .allocator = backend,
				    .persistent_pct = PCT, .page_size = ps };
	struct zm_tmem_stats all;

	memset(&R, 0, sizeof(R));
	R.backend = backend;
	R.ps = ps;
	R.buf = malloc(ps);
	assert_non_null(R.buf);
	rng_seed(&R.r, seed);
	assert_int_equal(zm_tmem_create(&c, &R.t), 0);
	for (int s = 0; s < NSLOT - 1; s++)
		pool_make(&R, &R.p[s]);
	for (R.step = 0; R.step < g_steps; R.step++) {
		unsigned op = (unsigned)rng_below(&R.r, 1000);
		struct mpool *m = &R.p[rng_below(&R.r, NSLOT)];
		/* keys crowd into a few objects and low indices */
		int o = (int)rng_below(&R.r, rng_below(&R.r, 2) ? 2 : NOID);
		unsigned i = (unsigned)rng_below(&R.r, rng_below(&R.r, 4) ? 300 : NIDX);

		if (!m->id) {
			if (op < 20)
				pool_make(&R, m);
			else if (op < 30)
				poke_dead(&R);
			continue;
		}
		if (op < 560)
			do_put(&R, m, o, i);
		else if (op < 900)
			do_get(&R, m, o, i, op < 590);
		else if (op < 965)
			do_flush_page(&R, m, o, i);
		else if (op < 970)
			do_flush_object(&R, m, o);
		else if (op < 977)
			do_flush_pool(&R, m);
		else if (op < 979)
			pool_kill(&R, m);
		else if (op < 982)
			probe(&R, m);
		else if (op < 985)
			poke_dead(&R);
		else
			do_get(&R, m, o, i, 0);
		if (R.step % 500 == 499)
			check_stats(&R);
	}
	check_stats(&R);
	for (int s = 0; s < NSLOT; s++)
		if (R.p[s].id)
			probe(&R, &R.p[s]);
	tt_stats(R.t, 0, &all);
	printf("%s/%zu: %llu puts, %llu stored, %llu E2BIG, %llu ENOSPC; %llu gets, %llu hits; "
	       "%llu evicted in %llu steps freeing %llu pages; %llu pages now\n", backend, ps,
	       (unsigned long long)R.n_put, (unsigned long long)R.n_stored,
	       (unsigned long long)R.n_e2big, (unsigned long long)R.n_nospc,
	       (unsigned long long)R.n_get, (unsigned long long)R.n_hit,
	       (unsigned long long)(R.n_evicted + all.evicted_objects),
	       (unsigned long long)all.evictions,
	       (unsigned long long)all.evicted_pages,
	       (unsigned long long)(all.ephemeral_pages + all.persistent_pages));
	for (int s = 0; s < NSLOT; s++)
		if (R.p[s].id)
			pool_kill(&R, &R.p[s]);
	tt_stats(R.t, 0, &all);
	assert_int_equal(all.ephemeral_pages + all.persistent_pages, 0);
	assert_int_equal(zm_tmem_check(R.t), 0);
	zm_tmem_destroy(R.t);
	free(R.buf);
}

static void test_zsmalloc(void **state)
{
	run("zsmalloc", 4096, g_seed);
	run("zsmalloc", 8192, g_seed + 1);
}

static void test_zbud(void **state)
{
	run("zbud", 4096, g_seed);
}

static void test_xvmalloc(void **state)
{
	run("xvmalloc", 4096, g_seed);
}

static void test_xcfmalloc(void **state)
{
	run("xcfmalloc", 4096, g_seed);
}

static void test_malloc_be(void **state)
{
	run("malloc", 4096, g_seed);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zsmalloc),
		cmocka_unit_test(test_zbud),
		cmocka_unit_test(test_xvmalloc),
		cmocka_unit_test(test_xcfmalloc),
		cmocka_unit_test(test_malloc_be),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("tmem_model", tests, NULL, NULL);
}
