/*
 * Multi-threaded stress of tmem, on every backend: 4 threads put, get and
 * flush in three shared pools (ephemeral, ephemeral with exclusive gets,
 * persistent) under a small budget, so that puts evict each other's pages
 * all the time.
 *
 * Shared keys: every thread on the same few dozen keys of two objects.
 * Each value carries a cookie (tmemtest.h) naming its pool, key, writer
 * thread and the writer's sequence number, and the rest of the value is
 * derived from it: a get must return a whole value put under its own key,
 * by a writer that had begun that put, and (per reader, key and writer)
 * never one older than a value seen before.
 *
 * Owned keys: one object id for all threads, each thread in its own range
 * of indices (ranges that share shards), with a model of its own: there a
 * persistent get equals the model exactly, an ephemeral one misses or
 * equals it, and a failed put leaves a miss.  A fifth thread reads the
 * statistics meanwhile, and a sixth makes pools of its own, fills and
 * checks them and destroys them, again and again.  At the end the checker must be clean, and the
 * persistent pool holds exactly what the models say.
 *
 *   test_tmem_stress [--seed N] [--steps N]
 */
#include <errno.h>
#include <pthread.h>

#include "tmemtest.h"
#include <zmem/tmem.h>

#define NT 4
#define PS 4096
#define NSHOID 2            /* shared objects */
#define NSHIDX 48           /* their indices */
#define OWN_OID 777
#define OWN_SPAN 300        /* each thread's range of indices: 300 apart */
#define BUDGET (512u << 10)
#define NPOOL 3             /* 0 ephemeral, 1 exclusive, 2 persistent */

static uint64_t g_seed;
static long g_steps = 8000;
static struct zm_tmem *g_t;
static int g_pool[NPOOL];
static uint32_t g_published[NT];    /* atomic: highest sequence each writer began */
static int g_stop;                  /* atomic */

static uint64_t shared_oid(unsigned o)
{
	return 100 + o;
}

/*
 * Cookie: bits 0..3 noise, 4..7 writer + 1, 8..9 pool, 10..11 shared
 * object (3: owned), 12..31 index, 32..63 sequence.
 */
static uint64_t mkcookie(unsigned noise, unsigned tid, unsigned pool, unsigned oslot, uint32_t idx,
			 uint32_t seq)
{
	return (uint64_t)noise | (uint64_t)(tid + 1) << 4 | (uint64_t)pool << 8 |
	       (uint64_t)oslot << 10 | (uint64_t)(idx & 0xFFFFF) << 12 | (uint64_t)seq << 32;
}

struct own {                 /* a thread's model of one owned key */
	uint64_t cookie;     /* 0: nothing */
	uint32_t len;
	int sure;            /* persistent: must be there */
};

struct targ {
	int id;
	int failures;
	uint32_t seq;
	long puts, stored, gets, hits, flushes, nospc, e2big;
	struct own own[NPOOL][OWN_SPAN];
	uint32_t last_seen[NPOOL][NSHOID][NSHIDX][NT];
	uint8_t buf[PS];
};

#define BAD(T, ...)                                                              \
	do {                                                                     \
		if ((T)->failures++ < 8) {                                       \
			printf("thread %d: ", (T)->id);                          \
			printf(__VA_ARGS__);                                     \
			printf("\n");                                            \
		}                                                                \
	} while (0)

static uint32_t own_idx(int tid, unsigned i)
{
	return (uint32_t)tid * OWN_SPAN + i;
}

static uint64_t word0(const uint8_t *b)
{
	uint64_t w;

	memcpy(&w, b, 8);
	return w;
}

/* Check a value got from a shared key; 0 if it is one that was put there. */
static int check_shared(struct targ *T, unsigned pool, unsigned o, uint32_t idx, int rc)
{
	uint64_t c = 0, len = 0;
	unsigned tid;
	uint32_t seq;

	if (rc < 16)
		return -1;
	memcpy(&c, T->buf, 8);
	memcpy(&len, T->buf + 8, 8);
	tid = (unsigned)((c >> 4) & 15) - 1;
	seq = (uint32_t)(c >> 32);
	if (len != (uint64_t)rc || tid >= NT || ((c >> 8) & 3) != pool || ((c >> 10) & 3) != o ||
	    ((c >> 12) & 0xFFFFF) != idx)
		return -2;
	if (seq > __atomic_load_n(&g_published[tid], __ATOMIC_ACQUIRE))
		return -3;           /* a put its writer never began */
	if (seq < T->last_seen[pool][o][idx][tid])
		return -4;           /* older than a value seen before */
	T->last_seen[pool][o][idx][tid] = seq;
	return tt_diff(T->buf, (size_t)rc, c) ? -5 : 0;
}

static void op_shared(struct targ *T, struct rng *r, unsigned op)
{
	unsigned pool = (unsigned)rng_below(r, NPOOL), o = (unsigned)rng_below(r, NSHOID);
	uint32_t idx = (uint32_t)rng_below(r, NSHIDX);
	int id = g_pool[pool], rc;

	if (op < 45) {
		unsigned k = (unsigned)rng_below(r, 20);
		unsigned noise = k < 8 ? 0 : k < 13 ? 1 : k < 16 ? 3 : k < 19 ? 5 : 8;
		size_t len = rng_below(r, 2) ? PS : 16 + rng_below(r, PS - 15);
		uint64_t c;

		T->seq++;
		__atomic_store_n(&g_published[T->id], T->seq, __ATOMIC_RELEASE);
		c = mkcookie(noise, (unsigned)T->id, pool, o, idx, T->seq);
		tt_fill(T->buf, len, c);
		rc = zm_tmem_put(g_t, id, shared_oid(o), idx, T->buf, len);
		T->puts++;
		if (rc == 0)
			T->stored++;
		else if (rc == -ENOSPC)
			T->nospc++;
		else if (rc == -E2BIG)
			T->e2big++;
		else
			BAD(T, "put(pool %d, %llu, %u, %zu): %d", id,
			    (unsigned long long)shared_oid(o), idx, len, rc);
	} else if (op < 85) {
		int bad;

		rc = zm_tmem_get(g_t, id, shared_oid(o), idx, T->buf, PS);
		T->gets++;
		if (rc == -ENOENT)
			return;
		T->hits++;
		bad = check_shared(T, pool, o, idx, rc);
		if (bad)
			BAD(T, "get(pool %d, %llu, %u): %d, check %d, cookie %#llx", id,
			    (unsigned long long)shared_oid(o), idx, rc, bad,
			    (unsigned long long)word0(T->buf));
	} else if (op < 95) {
		rc = zm_tmem_flush_page(g_t, id, shared_oid(o), idx);
		T->flushes++;
		if (rc && rc != -ENOENT)
			BAD(T, "flush_page(pool %d): %d", id, rc);
	} else if (op < 99) {
		long n = zm_tmem_flush_object(g_t, id, shared_oid(o));

		T->flushes++;
		if (n < 0 || n > NSHIDX)
			BAD(T, "flush_object(pool %d, %llu): %ld", id,
			    (unsigned long long)shared_oid(o), n);
	} else if (pool < 2 && rng_below(r, 5) == 0) {
		/* an ephemeral pool only: the owned keys there may go anyway */
		long n = zm_tmem_flush_pool(g_t, id);

		T->flushes++;
		if (n < 0)
			BAD(T, "flush_pool(%d): %ld", id, n);
	}
}

static void op_owned(struct targ *T, struct rng *r, unsigned op)
{
	unsigned pool = (unsigned)rng_below(r, NPOOL), i = (unsigned)rng_below(r, OWN_SPAN);
	uint32_t idx = own_idx(T->id, i);
	struct own *x = &T->own[pool][i];
	int id = g_pool[pool], rc;

	if (op < 50) {
		unsigned k = (unsigned)rng_below(r, 20);
		unsigned noise = k < 8 ? 0 : k < 13 ? 1 : k < 16 ? 3 : k < 19 ? 5 : 8;
		size_t len = rng_below(r, 2) ? PS : 1 + rng_below(r, PS);
		uint64_t c;

		T->seq++;
		__atomic_store_n(&g_published[T->id], T->seq, __ATOMIC_RELEASE);
		c = mkcookie(noise, (unsigned)T->id, pool, 3, idx, T->seq);
		tt_fill(T->buf, len, c);
		rc = zm_tmem_put(g_t, id, OWN_OID, idx, T->buf, len);
		T->puts++;
		if (rc == 0) {
			T->stored++;
			*x = (struct own){ c, (uint32_t)len, pool == 2 };
			return;
		}
		if (rc == -ENOSPC)
			T->nospc++;
		else if (rc == -E2BIG)
			T->e2big++;
		else
			BAD(T, "put(pool %d, owned %u, %zu): %d", id, idx, len, rc);
		x->cookie = 0;
		rc = zm_tmem_get(g_t, id, OWN_OID, idx, T->buf, PS);
		T->gets++;
		if (rc != -ENOENT)
			BAD(T, "get(pool %d, owned %u) after a failed put: %d", id, idx, rc);
	} else if (op < 90) {
		rc = zm_tmem_get(g_t, id, OWN_OID, idx, T->buf, PS);
		T->gets++;
		if (rc == -ENOENT) {
			if (x->cookie && x->sure)
				BAD(T, "persistent get(owned %u) missed %u bytes", idx, x->len);
			x->cookie = 0;
			return;
		}
		T->hits++;
		if (!x->cookie)
			BAD(T, "get(pool %d, owned %u): %d, want a miss", id, idx, rc);
		else if (rc != (int)x->len || tt_diff(T->buf, x->len, x->cookie))
			BAD(T, "get(pool %d, owned %u): %d, want %u bytes of cookie %#llx, got "
			    "cookie %#llx", id, idx, rc, x->len, (unsigned long long)x->cookie,
			    (unsigned long long)word0(T->buf));
		if (pool == 1)
			x->cookie = 0;
	} else if (op < 99) {
		rc = zm_tmem_flush_page(g_t, id, OWN_OID, idx);
		T->flushes++;
		if (x->cookie && x->sure && rc)
			BAD(T, "persistent flush_page(owned %u): %d", idx, rc);
		else if (!x->cookie && rc != -ENOENT)
			BAD(T, "flush_page(pool %d, owned %u) of nothing: %d", id, idx, rc);
		else if (rc && rc != -ENOENT)
			BAD(T, "flush_page(pool %d, owned %u): %d", id, idx, rc);
		x->cookie = 0;
	} else if (pool < 2 && rng_below(r, 5) == 0) {
		/* every thread's owned keys in an ephemeral pool */
		long n = zm_tmem_flush_object(g_t, id, OWN_OID);

		T->flushes++;
		if (n < 0 || n > NT * OWN_SPAN)
			BAD(T, "flush_object(pool %d, owned): %ld", id, n);
		for (unsigned j = 0; j < OWN_SPAN; j++)
			T->own[pool][j].cookie = 0;
	}
}

static void *worker(void *arg)
{
	struct targ *T = arg;
	struct rng r;

	rng_seed(&r, g_seed + (uint64_t)T->id * 7919);
	for (long s = 0; s < g_steps; s++) {
		unsigned op = (unsigned)rng_below(&r, 100);

		if (rng_below(&r, 2))
			op_shared(T, &r, op);
		else
			op_owned(T, &r, op);
	}
	return NULL;
}

/* Pools of its own, made, filled, checked and destroyed over and over
 * while the workers' puts evict: an evictor meets objects of a pool being
 * destroyed. */
struct churn {
	long rounds, failures;
};

static void *churner(void *arg)
{
	struct churn *C = arg;
	static uint8_t buf[PS];
	static uint64_t cookie[64];
	struct rng r;

	rng_seed(&r, g_seed ^ 0xc0ffee);
	while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
		struct zm_tmem_pool_config c = { .kind = rng_below(&r, 2) ? ZM_TMEM_PERSISTENT :
							  ZM_TMEM_EPHEMERAL };
		int id, rc;

		c.exclusive_gets = c.kind == ZM_TMEM_EPHEMERAL && rng_below(&r, 2);
		id = zm_tmem_pool_create(g_t, &c);
		if (id <= 0) {
			C->failures++;
			break;
		}
		for (uint32_t i = 0; i < 64; i++) {
			cookie[i] = tt_cookie(rng_next(&r), (unsigned)rng_below(&r, 4));
			tt_fill(buf, PS, cookie[i]);
			rc = zm_tmem_put(g_t, id, 5, i, buf, PS);
			if (rc)
				cookie[i] = 0;
			if (rc && rc != -ENOSPC && rc != -E2BIG)
				C->failures++;
		}
		for (uint32_t i = 0; i < 64; i++) {
			rc = zm_tmem_get(g_t, id, 5, i, buf, PS);
			if (rc == -ENOENT && (!cookie[i] || c.kind == ZM_TMEM_EPHEMERAL))
				continue;
			if (!cookie[i] || rc != PS || tt_diff(buf, PS, cookie[i])) {
				if (C->failures++ < 5)
					printf("churner: pool %d (kind %d) page %u: %d\n", id, c.kind, i,
					       rc);
			}
		}
		if (zm_tmem_pool_destroy(g_t, id))
			C->failures++;
		C->rounds++;
	}
	return NULL;
}

static void *stats_reader(void *arg)
{
	struct zm_tmem_stats st;
	long *n = arg;

	while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
		for (int p = 0; p <= NPOOL; p++)
			if (zm_tmem_stats(g_t, p ? g_pool[p - 1] : 0, &st) == 0)
				++*n;
		usleep(200);
	}
	return NULL;
}

static void run(const char *backend)
{
	struct zm_tmem_config c = { .budget_bytes = BUDGET, .allocator = backend };
	static struct targ T[NT];
	struct zm_tmem_stats st;
	pthread_t th[NT], sr, ch;
	struct churn churn = { 0, 0 };
	long nstats = 0, failures = 0, puts = 0, stored = 0, gets = 0, hits = 0;
	uint64_t sure = 0, ppages;

	memset(T, 0, sizeof(T));
	memset(g_published, 0, sizeof(g_published));
	__atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
	assert_int_equal(zm_tmem_create(&c, &g_t), 0);
	{
		struct zm_tmem_pool_config pc[NPOOL] = {
			{ .kind = ZM_TMEM_EPHEMERAL },
			{ .kind = ZM_TMEM_EPHEMERAL, .exclusive_gets = 1 },
			{ .kind = ZM_TMEM_PERSISTENT },
		};

		for (int p = 0; p < NPOOL; p++) {
			g_pool[p] = zm_tmem_pool_create(g_t, &pc[p]);
			assert_true(g_pool[p] > 0);
		}
	}
	assert_int_equal(pthread_create(&sr, NULL, stats_reader, &nstats), 0);
	assert_int_equal(pthread_create(&ch, NULL, churner, &churn), 0);
	for (int i = 0; i < NT; i++) {
		T[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, worker, &T[i]), 0);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		failures += T[i].failures;
		puts += T[i].puts;
		stored += T[i].stored;
		gets += T[i].gets;
		hits += T[i].hits;
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
	pthread_join(sr, NULL);
	pthread_join(ch, NULL);
	failures += churn.failures;
	assert_int_equal(zm_tmem_check(g_t), 0);

	/* alone now: the persistent pool holds what the models say, and the
	 * shared keys hold values put there */
	ppages = 0;
	for (int i = 0; i < NT; i++) {
		for (unsigned j = 0; j < OWN_SPAN; j++) {
			struct own *x = &T[i].own[2][j];
			int rc = zm_tmem_get(g_t, g_pool[2], OWN_OID, own_idx(i, j), T[i].buf, PS);

			if (!x->cookie) {
				if (rc != -ENOENT) {
					printf("thread %d: owned %u: %d, want a miss\n", i,
					       own_idx(i, j), rc);
					failures++;
				}
				continue;
			}
			sure++;
			if (rc != (int)x->len || tt_diff(T[i].buf, x->len, x->cookie)) {
				printf("thread %d: owned %u: %d, want %u bytes\n", i, own_idx(i, j), rc,
				       x->len);
				failures++;
			}
		}
	}
	for (unsigned o = 0; o < NSHOID; o++)
		for (uint32_t idx = 0; idx < NSHIDX; idx++) {
			int rc = zm_tmem_get(g_t, g_pool[2], shared_oid(o), idx, T[0].buf, PS);

			if (rc == -ENOENT)
				continue;
			ppages++;
			if (check_shared(&T[0], 2, o, idx, rc)) {
				printf("persistent shared key %llu/%u: %d, a wrong value\n",
				       (unsigned long long)shared_oid(o), idx, rc);
				failures++;
			}
		}
	tt_stats(g_t, g_pool[2], &st);
	if (st.persistent_pages != sure + ppages) {
		printf("persistent pool: %llu pages, the models %llu owned + %llu shared\n",
		       (unsigned long long)st.persistent_pages, (unsigned long long)sure,
		       (unsigned long long)ppages);
		failures++;
	}
	for (int p = 0; p < NPOOL; p++)
		tt_stats(g_t, g_pool[p], &st);
	tt_stats(g_t, 0, &st);
	printf("%s: %ld puts, %ld stored, %ld gets, %ld hits; %llu evicted in %llu steps freeing "
	       "%llu pages; %ld stats read and %ld pools made and destroyed meanwhile\n", backend,
	       puts, stored, gets, hits, (unsigned long long)st.evicted_objects,
	       (unsigned long long)st.evictions, (unsigned long long)st.evicted_pages, nstats,
	       churn.rounds);
	assert_int_equal(failures, 0);
	assert_true(st.evicted_objects > 0);
	assert_true(st.puts >= (uint64_t)puts);
	for (int p = 0; p < NPOOL; p++)
		assert_true(zm_tmem_flush_pool(g_t, g_pool[p]) >= 0);
	tt_stats(g_t, 0, &st);
	assert_int_equal(st.ephemeral_pages + st.persistent_pages, 0);
	assert_int_equal(zm_tmem_check(g_t), 0);
	zm_tmem_destroy(g_t);
	g_t = NULL;
}

static void test_zsmalloc(void **state)
{
	run("zsmalloc");
}

static void test_zbud(void **state)
{
	run("zbud");
}

static void test_xvmalloc(void **state)
{
	run("xvmalloc");
}

static void test_xcfmalloc(void **state)
{
	run("xcfmalloc");
}

static void test_malloc_be(void **state)
{
	run("malloc");
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
	return cmocka_run_group_tests_name("tmem_stress", tests, NULL, NULL);
}
