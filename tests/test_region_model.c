/*
 * Seeded model test of a region: several threads read, write, discard
 * and reclaim over a region of NPAGES pages whose resident limit is a
 * fraction of it, and every byte read is compared with a shadow copy.
 *
 * Each thread owns a block of consecutive pages: only it writes there
 * (memcpy-sized chunks across pages, random or compressible or zero or
 * one repeated word; read(2) into the region through zm_region_read),
 * so its part of the shadow is exact.  Rounds of steps are separated by
 * barriers; between two rounds every page is frozen and each thread
 * reads anywhere, others' blocks included, and thread 0 moves the limit.
 * Any thread may reclaim any time.  A sampler thread meanwhile checks
 * that the region's resident pages (mincore) stay at or below the limit
 * plus the slack the region states.  Run with and without units (the
 * store's unit_pages).
 *
 *   test_region_model [--seed N] [--steps N]   (steps: per thread)
 */
#include <fcntl.h>
#include <pthread.h>

#include "regiontest.h"

#define NT 3
#define NPAGES 512u
#define ROUND 400       /* steps between two frozen phases */
#define FROZEN_READS 40
#define MAXLEN_PAGES 3

static uint64_t g_seed;
static long g_steps = 15000;
static size_t g_ps;
static struct zm_region *g_r;
static char *g_base;
static char *g_shadow;
static pthread_barrier_t g_bar;
static size_t g_slack_pages;
static size_t g_bound_pages;    /* atomic: the limit the sampler holds to */
static size_t g_limit_max;      /* the highest limit of the run, pages */
static int g_stop;              /* atomic */
static int g_failed;            /* atomic */

#define PS g_ps

static const size_t g_limits[] = { 64, 96, 160, 64 };

struct worker {
	int id;
	size_t lo, hi;          /* its block: pages [lo, hi) */
	struct rng rng;
	int pipe[2];
	char *buf;
	long writes, reads, discards, reclaims, sys_in, sys_out;
};

static void failf(struct worker *w, long step, const char *what, size_t off, size_t len)
{
	if (__atomic_fetch_add(&g_failed, 1, __ATOMIC_RELAXED) < 5) {
		size_t i = 0;

		while (i < len && g_base[off + i] == g_shadow[off + i])
			i++;
		printf("thread %d step %ld: %s at [%zu, +%zu): byte %zu (page %zu) is %#x, "
		       "model %#x\n", w->id, step, what, off, len, off + i, (off + i) / PS,
		       i < len ? (unsigned char)g_base[off + i] : 0,
		       i < len ? (unsigned char)g_shadow[off + i] : 0);
		fflush(stdout);
	}
}

/* A random range of at most MAXLEN_PAGES pages inside pages [lo, hi). */
static void pick(struct worker *w, size_t lo, size_t hi, size_t *off, size_t *len)
{
	size_t a = lo * PS + rng_below(&w->rng, (hi - lo) * PS);
	size_t n = 1 + rng_below(&w->rng, MAXLEN_PAGES * PS);

	if (a + n > hi * PS)
		n = hi * PS - a;
	*off = a, *len = n;
}

/* Bytes to write: random, compressible, zeros, or one repeated word. */
static void make_data(struct worker *w, char *p, size_t len)
{
	unsigned kind = (unsigned)rng_below(&w->rng, 8);
	uint64_t x = rng_next(&w->rng);

	for (size_t i = 0; i < len; i++) {
		switch (kind) {
		case 0:
			p[i] = 0;
			break;
		case 1:
			p[i] = (char)(x >> (8 * (i % 8)));
			break;
		case 2: case 3:
			p[i] = (char)mix64(x + i);
			break;
		default:
			p[i] = "the cold pages of a region "[(x + i) % 27] ^ (char)(i % 512 == 0);
		}
	}
}

static void check(struct worker *w, long step, const char *what, size_t off, size_t len)
{
	if (memcmp(g_base + off, g_shadow + off, len))
		failf(w, step, what, off, len);
}

static void step_own(struct worker *w, long s)
{
	unsigned op = (unsigned)rng_below(&w->rng, 100);
	size_t off, len;

	pick(w, w->lo, w->hi, &off, &len);
	if (op < 35) {
		make_data(w, w->buf, len);
		memcpy(g_base + off, w->buf, len);
		memcpy(g_shadow + off, w->buf, len);
		w->writes++;
	} else if (op < 65) {
		check(w, s, "read", off, len);
		w->reads++;
	} else if (op < 70) {
		size_t p = w->lo + rng_below(&w->rng, w->hi - w->lo);
		size_t n = 1 + rng_below(&w->rng, 8);

		if (p + n > w->hi)
			n = w->hi - p;
		if (zm_region_discard(g_r, p * PS, n * PS))
			failf(w, s, "discard failed", p * PS, 0);
		memset(g_shadow + p * PS, 0, n * PS);
		w->discards++;
	} else if (op < 76) {
		long k = zm_region_reclaim(g_r, (1 + rng_below(&w->rng, 32)) * PS);

		if (k < 0)
			failf(w, s, "reclaim failed", 0, 0);
		w->reclaims++;
	} else if (op < 88) {
		/* the kernel reads region memory: write(2) from it */
		if (zm_region_write(w->pipe[1], g_base + off, len) != (ssize_t)len ||
		    read(w->pipe[0], w->buf, len) != (ssize_t)len)
			failf(w, s, "zm_region_write failed", off, len);
		else if (memcmp(w->buf, g_shadow + off, len))
			failf(w, s, "zm_region_write wrote other bytes", off, len);
		w->sys_out++;
	} else {
		/* the kernel writes region memory: read(2) into it */
		size_t got = 0;

		make_data(w, w->buf, len);
		if (write(w->pipe[1], w->buf, len) != (ssize_t)len)
			failf(w, s, "pipe write failed", off, len);
		while (got < len) {
			ssize_t k = zm_region_read(w->pipe[0], g_base + off + got, len - got);

			if (k <= 0) {
				failf(w, s, "zm_region_read failed", off, len);
				break;
			}
			got += (size_t)k;
		}
		memcpy(g_shadow + off, w->buf, len);
		w->sys_in++;
	}
}

/* Wait up to 3 s for resident pages to come down to pages + slack. */
static void wait_down(size_t pages)
{
	for (int i = 0; i < 300; i++) {
		if (rt_mincore_pages(g_base, NPAGES * PS) <= pages + g_slack_pages)
			return;
		rt_sleep_ms(10);
	}
}

/* Thread 0, pages frozen: the next limit.  Raised: the sampler's bound
 * first; lowered: the bound once the region is down to it. */
static void move_limit(long round)
{
	size_t lim = g_limits[round % (sizeof(g_limits) / sizeof(g_limits[0]))];
	size_t cur = __atomic_load_n(&g_bound_pages, __ATOMIC_RELAXED);

	if (lim > cur)
		__atomic_store_n(&g_bound_pages, lim, __ATOMIC_RELAXED);
	if (zm_region_set_limit(g_r, lim * PS)) {
		printf("set_limit(%zu pages) failed\n", lim);
		__atomic_fetch_add(&g_failed, 1, __ATOMIC_RELAXED);
	}
	if (lim < cur) {
		wait_down(lim);
		__atomic_store_n(&g_bound_pages, lim, __ATOMIC_RELAXED);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	long rounds = (g_steps + ROUND - 1) / ROUND;

	for (long round = 0, s = 0; round < rounds; round++) {
		for (long i = 0; i < ROUND && s < g_steps; i++, s++)
			step_own(w, s);
		pthread_barrier_wait(&g_bar);
		/* frozen: every page's content is the shadow's */
		for (int i = 0; i < FROZEN_READS; i++) {
			size_t off, len;

			pick(w, 0, NPAGES, &off, &len);
			check(w, s, "frozen read", off, len);
		}
		if (w->id == 0)
			move_limit(round + 1);
		pthread_barrier_wait(&g_bar);
	}
	return NULL;
}

struct sampler {
	long samples, over;
	size_t worst, worst_bound;
};

static void *sampler_main(void *arg)
{
	struct sampler *sm = arg;

	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		size_t bound = __atomic_load_n(&g_bound_pages, __ATOMIC_ACQUIRE);
		size_t k = rt_mincore_pages(g_base, NPAGES * PS);
		size_t after = __atomic_load_n(&g_bound_pages, __ATOMIC_ACQUIRE);

		/* a limit raised while mincore ran (the bound goes up before
		 * the limit does) holds for the pages it counted */
		if (after > bound)
			bound = after;

		sm->samples++;
		if (k > sm->worst)
			sm->worst = k, sm->worst_bound = bound;
		if (k > bound + g_slack_pages && sm->over++ < 5)
			printf("sample %ld: %zu pages resident, limit %zu + slack %zu\n",
			       sm->samples, k, bound, g_slack_pages);
		rt_sleep_ms(1);
	}
	return NULL;
}

static void run(unsigned policy, const char *codec, unsigned up)
{
	struct zm_store_config sc = { .codec = codec, .unit_pages = up };
	struct zm_store_stats ss;
	struct zm_region_config c = { .size = NPAGES * g_ps, .resident_limit = 64 * g_ps,
				      .policy = policy, .store = &sc,
				      .store_size = sizeof(sc) };
	struct worker w[NT];
	struct sampler sm = { 0 };
	struct zm_region_stats st;
	pthread_t tid[NT], stid;
	long tot[6] = { 0 };

	g_r = rt_mk(&c);
	g_base = zm_region_base(g_r);
	g_shadow = calloc(NPAGES, g_ps);
	assert_non_null(g_shadow);
	st = rt_stats(g_r);
	g_slack_pages = st.slack / g_ps;
	g_bound_pages = 64;
	g_limit_max = 0;
	for (size_t i = 0; i < sizeof(g_limits) / sizeof(g_limits[0]); i++)
		if (g_limits[i] > g_limit_max)
			g_limit_max = g_limits[i];
	g_stop = 0;
	g_failed = 0;
	pthread_barrier_init(&g_bar, NULL, NT);
	pthread_create(&stid, NULL, sampler_main, &sm);
	for (int i = 0; i < NT; i++) {
		w[i] = (struct worker){ .id = i, .lo = NPAGES * (size_t)i / NT,
					.hi = NPAGES * (size_t)(i + 1) / NT };
		rng_seed(&w[i].rng, g_seed * 31 + (uint64_t)i);
		assert_int_equal(pipe(w[i].pipe), 0);
		w[i].buf = malloc(MAXLEN_PAGES * g_ps + 1);
		pthread_create(&tid[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(tid[i], NULL);
		tot[0] += w[i].writes, tot[1] += w[i].reads, tot[2] += w[i].discards;
		tot[3] += w[i].reclaims, tot[4] += w[i].sys_in, tot[5] += w[i].sys_out;
		close(w[i].pipe[0]), close(w[i].pipe[1]);
		free(w[i].buf);
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	pthread_join(stid, NULL);
	pthread_barrier_destroy(&g_bar);

	/* the whole region, one last time */
	for (size_t p = 0; p < NPAGES; p++)
		if (memcmp(g_base + p * PS, g_shadow + p * PS, PS)) {
			struct worker z = { .id = -1 };

			failf(&z, g_steps, "final read", p * PS, PS);
		}
	st = rt_stats(g_r);
	printf("policy %u, %s: %ld writes, %ld reads, %ld discards, %ld reclaims, %ld read(2) "
	       "in, %ld write(2) out; faults %llu first, %llu refault (%llu young), %llu wp, "
	       "%llu waits; %llu evictions (%llu clean); %ld samples, at most %zu pages "
	       "resident (limit %zu + slack %zu), resident_max %llu pages\n", policy,
	       codec ? codec : "lz4", tot[0], tot[1], tot[2], tot[3], tot[4], tot[5],
	       (unsigned long long)st.faults_first, (unsigned long long)st.faults_refault,
	       (unsigned long long)st.refaults_young, (unsigned long long)st.faults_wp,
	       (unsigned long long)st.fault_waits, (unsigned long long)st.evictions,
	       (unsigned long long)st.evictions_clean, sm.samples, sm.worst, sm.worst_bound,
	       g_slack_pages, (unsigned long long)(st.resident_max / g_ps));
	assert_int_equal(g_failed, 0);
	assert_int_equal(sm.over, 0);
	assert_true(st.resident_max <= (g_limit_max + g_slack_pages) * g_ps);
	assert_int_equal(rt_hist_sum(&st), st.faults_first + st.faults_refault + st.faults_wp);
	assert_int_equal(st.evict_failures, 0);
	assert_true(st.faults_refault > 0 && st.evictions > 0);
	assert_int_equal(zm_store_check(zm_region_store(g_r)), 0);
	/* the store holds every stored and clean page (one missing would be
	 * data lost); a few more are seen at times, with or without units:
	 * dirty pages whose copy was not dropped (stale bytes held, never
	 * read), printed until that is found */
	assert_int_equal(zm_store_stats(zm_region_store(g_r), &ss), 0);
	assert_true(ss.orig_data_size / g_ps >= st.pages_stored + st.pages_clean);
	if (ss.orig_data_size / g_ps != st.pages_stored + st.pages_clean)
		printf("the store holds %llu pages, the region's stored and clean ones %llu\n",
		       (unsigned long long)(ss.orig_data_size / g_ps),
		       (unsigned long long)(st.pages_stored + st.pages_clean));
	if (up > 1) {
		printf("%u-page units: %llu formed, %llu declined, %llu split; %llu now, "
		       "holding %llu pages\n", up, (unsigned long long)ss.units_formed,
		       (unsigned long long)ss.units_declined, (unsigned long long)ss.unit_splits,
		       (unsigned long long)ss.units, (unsigned long long)ss.unit_pages);
		assert_true(ss.units_formed > 0);
	}
	zm_region_destroy(g_r);
	g_r = NULL;
	free(g_shadow);
}

static void test_model_auto(void **state) { run(ZM_REGION_POLICY_AUTO, NULL, 1); }
static void test_model_fifo_zstd(void **state) { run(ZM_REGION_POLICY_FIFO, "zstd", 1); }
/* units (the store's unit_pages): runs of pages evicted together kept
 * as one compressed object, pages written, read and discarded inside
 * them */
static void test_model_units4(void **state) { run(ZM_REGION_POLICY_AUTO, NULL, 4); }
static void test_model_units16_zstd(void **state) { run(ZM_REGION_POLICY_FIFO, "zstd", 16); }

int main(int argc, char **argv)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_auto),
		cmocka_unit_test(test_model_fifo_zstd),
		cmocka_unit_test(test_model_units4),
		cmocka_unit_test(test_model_units16_zstd),
	};

	g_ps = (size_t)sysconf(_SC_PAGESIZE);
	test_args(argc, argv, &g_seed, &g_steps);
	return test_run_selected("region_model", tests);
}
