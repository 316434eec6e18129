/*
 * fork(): a child keeps using, compacting and destroying the pools and
 * stores it inherited.  Pools of every backend and a store are filled,
 * most of each freed, automatic compaction left to run; then fork.  The
 * child checks every object, allocates and frees more, compacts, lets the
 * background worker compact a mass free by itself (it has no worker
 * thread at first), and destroys everything; an alarm turns a hang into
 * a failure.  The parent checks the child's exit status and its own pools.
 * Also: fork while another thread allocates and frees in a pool of its
 * own; fork while the worker is compacting; and the worker's stop of an
 * item that is kicked again while it stops.
 *
 *   test_fork_stress [--seed N]
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmem/store.h>

#include "base/worker.h"
#include "pooltest.h"

#define NOBJ 3000
#define CHILD_SECONDS 60      /* the child is killed (a hang) after this */

static uint64_t g_seed = 1;

struct filled {
	struct zm_pool *pool;
	struct pt_obj obj[NOBJ];
	size_t n;
};

/* NOBJ objects. */
static int fill_all(struct filled *f, struct rng *r)
{
	static uint8_t buf[65536];
	int bad = 0;

	f->n = 0;
	for (size_t i = 0; i < NOBJ; i++) {
		struct pt_obj o = { 0, pt_size(r, 4096), rng_next(r) };
		int rc = pt_put(f->pool, &o, buf);

		if (!o.h)
			return 1;
		bad |= rc != 0;
		f->obj[f->n++] = o;
	}
	return bad;
}

/* A random 3 in 4 of f's objects freed. */
static int free_most(struct filled *f, struct rng *r)
{
	int bad = 0;

	for (size_t i = 0; i < f->n;) {
		if (rng_below(r, 4)) {
			bad |= zm_pool_free(f->pool, f->obj[i].h) != 0;
			f->obj[i] = f->obj[--f->n];
		} else {
			i++;
		}
	}
	return bad;
}

/* NOBJ objects, then a random 3 in 4 of them freed. */
static int fill(struct filled *f, struct rng *r)
{
	int bad = fill_all(f, r);

	return bad ? bad : free_most(f, r);
}

/* Every object whole. */
static int check_all(struct filled *f, struct rng *r)
{
	static uint8_t buf[65536];
	int bad = 0;

	for (size_t i = 0; i < f->n; i++)
		bad |= pt_check_obj(f->pool, &f->obj[i], buf, r);
	return bad;
}

static int free_all(struct filled *f)
{
	int bad = 0;

	while (f->n)
		bad |= zm_pool_free(f->pool, f->obj[--f->n].h) != 0;
	return bad;
}

static bool is_zsmalloc(struct zm_pool *p)
{
	struct zm_pool_stats st;

	zm_pool_stats(p, &st);
	return !strcmp(st.allocator, "zsmalloc");
}

static uint64_t compactions(struct zm_pool *p)
{
	struct zm_pool_stats st;

	zm_pool_stats(p, &st);
	return st.compactions;
}

/* Wait up to ms for p's compactions to pass n. */
static bool compacted_after(struct zm_pool *p, uint64_t n, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		if (compactions(p) > n)
			return true;
		usleep(10000);
	}
	return compactions(p) > n;
}

static int store_fill(struct zm_store *s, uint64_t n, struct rng *r)
{
	static uint8_t page[4096], back[4096];
	int bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		/* a quarter zero, the rest half compressible */
		memset(page, 0, sizeof(page));
		if (i % 4)
			for (size_t k = 0; k < sizeof(page) / 2; k++)
				page[k] = (uint8_t)rng_next(r);
		bad |= zm_store_put(s, i, page) != 0;
		bad |= zm_store_get(s, i, back) != 0;
		bad |= memcmp(page, back, sizeof(page)) != 0;
	}
	return bad;
}

/* What the child does with everything it inherited; its exit status. */
static int child_work(struct filled *f, size_t nf, struct zm_store *s)
{
	struct rng r;
	int bad = 0;

	alarm(CHILD_SECONDS);
	rng_seed(&r, g_seed * 7 + 3);
	for (size_t i = 0; i < nf; i++) {
		struct filled more = { .pool = f[i].pool };
		long rc;

		bad |= check_all(&f[i], &r) << 1;
		bad |= fill(&more, &r) << 2;
		bad |= check_all(&more, &r) << 2;
		rc = zm_pool_compact(f[i].pool);
		bad |= (rc < 0 && rc != -EOPNOTSUPP) << 3;
		bad |= (zm_pool_check(f[i].pool) != 0) << 3;
		bad |= check_all(&f[i], &r) << 4;
		bad |= check_all(&more, &r) << 4;
		/* zsmalloc: a mass free is compacted by itself, by a worker
		 * thread the child starts on its own (at 4 KiB pages: the
		 * same frees at 16 KiB pages in 2-page zspages do not reach
		 * the RATIO trigger, with or without a fork).  Objects all
		 * allocated here, then most freed: freeing only objects that
		 * have zspages of their own empties those, which gives the
		 * pages back with nothing to compact (after the parent's
		 * compaction packed its survivors into mixed zspages, the
		 * child's new objects have class zspages of their own) */
		if (is_zsmalloc(f[i].pool) && !pt_configs[i].page_size) {
			struct filled mass = { .pool = f[i].pool };
			uint64_t before;

			bad |= fill_all(&mass, &r) << 5;
			before = compactions(f[i].pool);
			bad |= free_most(&mass, &r) << 5;
			if (!compacted_after(f[i].pool, before, 5000)) {
				print_message("child: %s not compacted by itself\n",
					      pt_name(&pt_configs[i]));
				bad |= 1 << 5;
			}
			bad |= check_all(&mass, &r) << 5;
			bad |= free_all(&mass) << 6;
		}
		bad |= free_all(&more) << 6;
		bad |= free_all(&f[i]) << 6;
		zm_pool_destroy(f[i].pool);
	}
	bad |= store_fill(s, 2000, &r) << 7;
	bad |= (zm_store_discard(s, 0, 1000) != 0) << 7;
	bad |= (zm_store_compact(s) < 0) << 7;
	zm_store_destroy(s);
	return bad;
}

static int wait_child(pid_t pid)
{
	int status = 0;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status)) {
		print_message("child killed by signal %d%s\n", WTERMSIG(status),
			      WTERMSIG(status) == SIGALRM ? " (hung)" : "");
		return -1;
	}
	if (WEXITSTATUS(status))
		print_message("child exit status %#x\n", WEXITSTATUS(status));
	return WEXITSTATUS(status);
}

static void test_fork_every_backend(void **state)
{
	static struct filled f[PT_NCONFIGS];
	struct zm_store_config sc = { .nr_pages = 4096 };
	struct zm_store *s;
	struct rng r;
	pid_t pid;

	rng_seed(&r, g_seed);
	for (size_t i = 0; i < PT_NCONFIGS; i++) {
		assert_int_equal(zm_pool_create(&pt_configs[i], &f[i].pool), 0);
		assert_int_equal(fill(&f[i], &r), 0);
	}
	assert_int_equal(zm_store_create(&sc, &s), 0);
	assert_int_equal(store_fill(s, 2000, &r), 0);
	/* the mass frees above are compacted in the background */
	assert_true(compacted_after(f[0].pool, 0, 5000));

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_work(f, PT_NCONFIGS, s));
	assert_int_equal(wait_child(pid), 0);

	/* the parent's are its own, untouched by the child */
	for (size_t i = 0; i < PT_NCONFIGS; i++) {
		assert_int_equal(check_all(&f[i], &r), 0);
		assert_int_equal(zm_pool_check(f[i].pool), 0);
		assert_int_equal(free_all(&f[i]), 0);
		zm_pool_destroy(f[i].pool);
	}
	zm_store_destroy(s);
}

/* ---- fork while another thread works ------------------------------- */

static int g_stop;

static void *churner(void *arg)
{
	struct zm_pool *p = arg;
	zm_handle_t h[256] = { 0 };
	uint8_t buf[4096];
	struct rng r;

	rng_seed(&r, g_seed + 11);
	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		unsigned i = (unsigned)rng_below(&r, 256);

		if (h[i]) {
			zm_pool_free(p, h[i]);
			h[i] = 0;
		} else {
			size_t n = pt_size(&r, 4096);

			h[i] = zm_pool_alloc(p, n);
			if (h[i]) {
				pt_fill(buf, n, i);
				zm_pool_write(p, h[i], buf, n);
			}
		}
	}
	for (unsigned i = 0; i < 256; i++)
		if (h[i])
			zm_pool_free(p, h[i]);
	return NULL;
}

static void test_fork_while_busy(void **state)
{
	struct zm_pool_config eager = { .compact = ZM_COMPACT_WATERMARK, .compact_watermark = 1 };
	struct zm_pool *busy, *mine;
	struct filled *f = calloc(1, sizeof(*f));
	pthread_t t;
	struct rng r;

	assert_non_null(f);
	rng_seed(&r, g_seed + 5);
	assert_int_equal(zm_pool_create(&eager, &busy), 0);
	assert_int_equal(zm_pool_create(NULL, &mine), 0);
	f->pool = mine;
	assert_int_equal(fill(f, &r), 0);
	assert_int_equal(pthread_create(&t, NULL, churner, busy), 0);
	for (int round = 0; round < 20; round++) {
		pid_t pid;

		usleep(5000);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			/* the pool no other thread was inside, and new ones;
			 * not `busy`, whose locks another thread may have
			 * held at the fork (pool.h) */
			struct zm_pool *fresh;
			int bad = 0;

			alarm(CHILD_SECONDS);
			bad |= check_all(f, &r);
			bad |= zm_pool_compact(mine) < 0;
			bad |= zm_pool_check(mine) != 0;
			bad |= zm_pool_create(NULL, &fresh) != 0;
			if (!bad) {
				struct filled g = { .pool = fresh };

				bad |= fill(&g, &r) | check_all(&g, &r) | free_all(&g);
				zm_pool_destroy(fresh);
			}
			bad |= free_all(f);
			zm_pool_destroy(mine);
			_exit(bad);
		}
		assert_int_equal(wait_child(pid), 0);
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	assert_int_equal(zm_pool_check(busy), 0);
	zm_pool_destroy(busy);
	assert_int_equal(check_all(f, &r), 0);
	assert_int_equal(free_all(f), 0);
	zm_pool_destroy(mine);
	free(f);
}

/* fork while the worker compacts: the prepare handler waits for the
 * running callback, so the child finds the pool's locks free. */
static void test_fork_while_compacting(void **state)
{
	struct zm_pool_config eager = { .compact = ZM_COMPACT_WATERMARK, .compact_watermark = 1 };
	struct filled *f = calloc(1, sizeof(*f));
	struct rng r;

	assert_non_null(f);
	rng_seed(&r, g_seed + 9);
	for (int round = 0; round < 10; round++) {
		pid_t pid;

		assert_int_equal(zm_pool_create(&eager, &f->pool), 0);
		assert_int_equal(fill(f, &r), 0);  /* kicks the worker */
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			int bad;

			alarm(CHILD_SECONDS);
			bad = check_all(f, &r) | (zm_pool_compact(f->pool) < 0) |
			      (zm_pool_check(f->pool) != 0) | free_all(f);
			zm_pool_destroy(f->pool);
			_exit(bad);
		}
		assert_int_equal(wait_child(pid), 0);
		assert_int_equal(check_all(f, &r), 0);
		assert_int_equal(free_all(f), 0);
		zm_pool_destroy(f->pool);
	}
	free(f);
}

/*
 * The worker's stop (base/worker.h): zmi_worker_del() of an item whose
 * callback is running returns once that call is over, even when the item
 * is kicked again before the call returns (a free crossing the watermark
 * while its pool is switched off or destroyed).  The item's first call
 * waits for the stop and kicks the item; so does every later call, up to
 * STOP_KICKS of them.  A worker that called a stopping item again would
 * make the stop wait for all of those calls (and, with a kick in every
 * call, for ever).  Waits are bounded: a broken stop fails, not hangs.
 */
#define STOP_KICKS 100

struct stopper {
	struct zmi_work work;
	int calls;           /* atomic */
};

static void stopper_run(void *arg)
{
	struct stopper *s = arg;
	int n = __atomic_add_fetch(&s->calls, 1, __ATOMIC_ACQ_REL);

	for (int ms = 0; n == 1 && !zmi_worker_stopping(&s->work) && ms < 10000; ms++)
		usleep(1000);
	if (n < STOP_KICKS)
		zmi_worker_kick(&s->work);
}

static void test_stop_while_kicked(void **state)
{
	struct stopper s = { .work = { .fn = stopper_run, .arg = &s } };

	assert_int_equal(zmi_worker_add(&s.work), 0);
	zmi_worker_kick(&s.work);
	for (int ms = 0; !__atomic_load_n(&s.calls, __ATOMIC_ACQUIRE) && ms < 10000; ms++)
		usleep(1000);
	assert_int_equal(__atomic_load_n(&s.calls, __ATOMIC_ACQUIRE), 1);
	zmi_worker_del(&s.work);
	/* the call that was running, and none after the stop */
	assert_int_equal(__atomic_load_n(&s.calls, __ATOMIC_ACQUIRE), 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_every_backend),
		cmocka_unit_test(test_fork_while_busy),
		cmocka_unit_test(test_fork_while_compacting),
		cmocka_unit_test(test_stop_while_kicked),
	};

	test_args(argc, argv, &g_seed, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
