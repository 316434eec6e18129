/*
 * Which shard a thread allocates in (zsmalloc/alloc.c, collided()): a
 * thread that finds its class's lock taken moves to another shard only
 * when the holder is another thread allocating there; a compactor's step
 * or a thread freeing an object of the class is waited for, and the
 * thread stays where it is.  A thread that moves while it places an
 * object in mixed zspages does not place it in a shard that takes no new
 * mixed objects (settled, after a mass free was packed).
 *
 * Each test lets a thread T allocate once (which makes its classes and
 * names its shard), then holds the lock of T's class for the size and of
 * its shard's mixed class, the way the test's case says, while T
 * allocates again.  T's shard afterwards is the assertion; nothing is
 * timed: a T that the machine delays past the hold only makes the hold
 * miss (the test then checks less, never fails for it).
 */
#define ZMEM_ADVANCED  /* the pool's internals below need the advanced tier */
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "testutil.h"
#include "pool/pool_internal.h"
#include "pool/zsmalloc/zsmalloc.h"
#include <zmem/pool.h>

#define SIZE 1000 /* any size below the huge one */

enum holder { BY_COMPACTOR, BY_FREEING_THREAD, BY_ALLOCATING_THREAD };

struct t_state {
	struct zm_pool *pool;
	unsigned number;           /* T's zmi_pool_thread_number() */
	unsigned shard0, shard1;   /* T's shard before and after the hold */
	int ready, go, trying, done; /* atomic */
	zm_handle_t h0, h1;
};

static void spin_until(int *flag)
{
	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void *t_main(void *arg)
{
	struct t_state *s = arg;
	struct zs_pool *zp = zs_of(s->pool);

	s->h0 = zm_pool_alloc(s->pool, SIZE);
	s->number = zmi_pool_thread_number();
	s->shard0 = zmi_pool_self.shard & (zp->nshards - 1);
	__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
	spin_until(&s->go);
	__atomic_store_n(&s->trying, 1, __ATOMIC_RELEASE);
	s->h1 = zm_pool_alloc(s->pool, SIZE);
	s->shard1 = zmi_pool_self.shard & (zp->nshards - 1);
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Run T against a hold of its class and mixed class by `who`; returns
 * whether T was seen to finish while the locks were held.  settle: the
 * other shards are settled first (zs_mixed_settle: they take no new
 * mixed objects), and T's second object is checked not to be in one of
 * their mixed zspages. */
static int run_in(enum holder who, int settle, struct t_state *s)
{
	struct zs_pool *zp;
	struct zs_class *held[2];
	int done_in_hold = 0, tries;
	pthread_t t;

	memset(s, 0, sizeof(*s));
	assert_int_equal(zm_pool_create(NULL, &s->pool), 0);
	zp = zs_of(s->pool);
	assert_int_equal(pthread_create(&t, NULL, t_main, s), 0);
	spin_until(&s->ready);
	assert_true(s->h0 != 0);
	held[0] = zs_class_get(zp, s->shard0, zs_class_for(zp, SIZE));
	held[1] = zs_class_get(zp, s->shard0, zp->nclasses);  /* the mixed class */
	assert_non_null(held[0]);
	assert_non_null(held[1]);
	if (settle)
		for (unsigned sh = 0; sh < zp->nshards; sh++)
			if (sh != s->shard0)
				zs_mixed_settle(zp, sh);
	for (int i = 0; i < 2; i++) {
		if (who == BY_COMPACTOR)
			zs_compact_lock(held[i]);
		else
			zmi_lock(&held[i]->lock);
		/* T allocated there last (or in neither: 0), unless another
		 * thread did since; a compactor's hold is waited for either way */
		if (who != BY_FREEING_THREAD)
			__atomic_store_n(&held[i]->alloc_by, s->number + 1000, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&s->go, 1, __ATOMIC_RELEASE);
	spin_until(&s->trying);
	/* T moving does not wait for us: give it the time to finish (up to
	 * 10 s, on a machine that is slow to run it; T that waits for the
	 * hold is given 0.2 s to show it does, 1 s where it must also have
	 * tried the lock to move) */
	tries = settle ? 100 : who == BY_ALLOCATING_THREAD ? 1000 : 200;
	for (int i = 0; i < tries && !__atomic_load_n(&s->done, __ATOMIC_ACQUIRE); i++)
		sleep_ms(who == BY_ALLOCATING_THREAD ? 10 : 1);
	done_in_hold = __atomic_load_n(&s->done, __ATOMIC_ACQUIRE);
	for (int i = 0; i < 2; i++) {
		if (who == BY_COMPACTOR)
			zs_compact_unlock(held[i]);
		else
			zmi_unlock(&held[i]->lock);
	}
	pthread_join(t, NULL);
	assert_true(s->h1 != 0);
	if (settle) {
		unsigned obj;
		zm_handle_t raw = s->h1 & (ZMI_HANDLE_LIMIT - 1);  /* the backend's */
		struct zspage *zs = zs_lookup(zp, raw, &obj, ZM_HAZARD_RW);
		struct zs_class *c;

		assert_non_null(zs);
		c = zs_class_of(zp, zs->cls);
		zmi_pool_hazard_clear(ZM_HAZARD_RW);
		assert_false(c->mixed && ((unsigned)c->idx >> zp->cshift) != s->shard0);
	}
	assert_int_equal(zm_pool_free(s->pool, s->h0), 0);
	assert_int_equal(zm_pool_free(s->pool, s->h1), 0);
	zm_pool_destroy(s->pool);
	return done_in_hold;
}

static int two_shards(void)
{
	struct zm_pool *p;
	unsigned n;

	assert_int_equal(zm_pool_create(NULL, &p), 0);
	n = zs_of(p)->nshards;
	zm_pool_destroy(p);
	return n >= 2;
}

/* T run against a hold by `who` (run_in; settle as there) on a machine
 * with two shards or more: T moved to another shard, or stayed, as
 * `moves` says; and unless settle (where T's object is what is checked),
 * T finished while the locks were held exactly when it moved. */
static void expect(enum holder who, int settle, bool moves)
{
	struct t_state s;
	int done;

	if (!two_shards())
		skip();  /* one CPU: one shard, nowhere to move */
	done = run_in(who, settle, &s);
	if (!settle)
		assert_int_equal(done, moves);
	if (moves)
		assert_int_not_equal(s.shard1, s.shard0);
	else
		assert_int_equal(s.shard1, s.shard0);
}

/* A compactor's step, in a class another thread allocated in last: T
 * waits for it, in its own shard. */
static void test_compactor_is_waited_for(void **st)
{
	(void)st;
	expect(BY_COMPACTOR, 0, false);
}

/* A thread freeing an object of T's class (the class was last allocated
 * in by T): T waits too. */
static void test_freeing_thread_is_waited_for(void **st)
{
	(void)st;
	expect(BY_FREEING_THREAD, 0, false);
}

/* Another thread allocating in T's class: T parts from it, to another
 * shard, without waiting. */
static void test_allocating_thread_parts(void **st)
{
	(void)st;
	expect(BY_ALLOCATING_THREAD, 0, true);
}

/* Another thread allocating in T's shard's mixed class, and the other
 * shards settled after a mass free was packed: T moves for its next
 * objects, but this one does not go into a settled shard's mixed
 * zspages (a new object there leaves a hole the packing had closed). */
static void test_settled_shard_takes_no_mixed(void **st)
{
	(void)st;
	expect(BY_ALLOCATING_THREAD, 1, true);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compactor_is_waited_for),
		cmocka_unit_test(test_freeing_thread_is_waited_for),
		cmocka_unit_test(test_allocating_thread_parts),
		cmocka_unit_test(test_settled_shard_takes_no_mixed),
	};

	(void)argc, (void)argv;
	return cmocka_run_group_tests_name("shards", tests, NULL, NULL);
}
