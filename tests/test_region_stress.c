/*
 * Multi-threaded stress of a region under a small limit, with its own
 * reclaimer working and a thread calling zm_region_reclaim in a loop.
 *
 * Cookies: writer threads own pages (page p belongs to writer p % NW) and
 * fill them with words derived from a cookie (writer, page, generation),
 * or discard them, under a per-page sequence count kept outside the
 * region; reader threads read any page and, when no write overlapped
 * their copy (the count unchanged and even), the copy must be exactly
 * the latest cookie's page, or zeros after a discard: no write lost, no
 * stale page.  Each writer also checks its own page, the latest it
 * wrote, before writing it again.
 *
 * Same page: several threads write counters into their own words of the
 * same few pages while they are evicted over and over; each thread reads
 * its word back (it must be the value it wrote) and the others' (never
 * going back), and at the end every word is its thread's last count.
 *
 *   test_region_stress [--seed N] [--steps N]   (steps: per writer)
 */
#include <pthread.h>

#include "regiontest.h"

#define NW 2
#define NR 2
#define NPAGES 256u
#define LIMIT 64u

static uint64_t g_seed;
static long g_steps = 20000;
static size_t g_ps;
static struct zm_region *g_r;
static uint64_t *g_base;        /* the region, as words */
static size_t g_words;          /* words a page */
static uint64_t g_seq[NPAGES];  /* atomic: odd while the page is written */
static uint64_t g_cookie[NPAGES]; /* atomic: the page's cookie, 0: zeros */
static int g_stop;              /* atomic */
static int g_failed;            /* atomic */

static uint64_t cookie_of(unsigned tid, size_t page, uint64_t gen)
{
	return ((uint64_t)(tid + 1) << 56) | ((uint64_t)page << 32) | (gen & 0xFFFFFFFF);
}

static uint64_t word_of(uint64_t c, size_t i)
{
	return i ? mix64(c + i) : c;
}

static void report(const char *who, size_t page, uint64_t want, const uint64_t *w)
{
	if (__atomic_fetch_add(&g_failed, 1, __ATOMIC_RELAXED) < 8) {
		size_t i = 0;

		while (i < g_words && w[i] == (want ? word_of(want, i) : 0))
			i++;
		printf("%s: page %zu: cookie %#llx wanted, word %zu is %#llx (word 0: %#llx)\n",
		       who, page, (unsigned long long)want, i,
		       i < g_words ? (unsigned long long)w[i] : 0ull, (unsigned long long)w[0]);
		fflush(stdout);
	}
}

/* 1 if w is the page of cookie c (zeros for 0). */
static int page_is(const uint64_t *w, uint64_t c)
{
	for (size_t i = 0; i < g_words; i++)
		if (w[i] != (c ? word_of(c, i) : 0))
			return 0;
	return 1;
}

static void copy_page(uint64_t *dst, size_t page)
{
	const uint64_t *src = g_base + page * g_words;

	for (size_t i = 0; i < g_words; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
}

struct wargs {
	unsigned id;
	long writes, discards, checks;
};

static void *writer(void *arg)
{
	struct wargs *a = arg;
	uint64_t *tmp = malloc(g_ps);
	uint64_t gen = 0;
	struct rng r;

	rng_seed(&r, g_seed * 101 + a->id);
	for (long s = 0; s < g_steps; s++) {
		size_t p = a->id + NW * rng_below(&r, NPAGES / NW);
		uint64_t *w = g_base + p * g_words;
		unsigned op = (unsigned)rng_below(&r, 100);
		uint64_t cur = __atomic_load_n(&g_cookie[p], __ATOMIC_RELAXED);

		if (op < 40) {
			/* its own page, the latest it wrote, whatever was evicted */
			copy_page(tmp, p);
			if (!page_is(tmp, cur))
				report("writer", p, cur, tmp);
			a->checks++;
		}
		/* the count odd before any word changes: the words' stores
		 * are releases, ordered after it (no fences: TSan has none) */
		__atomic_fetch_add(&g_seq[p], 1, __ATOMIC_SEQ_CST);
		if (op < 92) {
			uint64_t c = cookie_of(a->id, p, ++gen);

			for (size_t i = g_words; i-- > 0; )
				__atomic_store_n(&w[i], word_of(c, i), __ATOMIC_RELEASE);
			__atomic_store_n(&g_cookie[p], c, __ATOMIC_RELAXED);
			a->writes++;
		} else {
			if (zm_region_discard(g_r, p * g_ps, g_ps))
				__atomic_fetch_add(&g_failed, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&g_cookie[p], 0, __ATOMIC_RELAXED);
			a->discards++;
		}
		__atomic_fetch_add(&g_seq[p], 1, __ATOMIC_RELEASE);
	}
	free(tmp);
	return NULL;
}

struct rargs {
	unsigned id;
	long checked, skipped;
};

static void *reader(void *arg)
{
	struct rargs *a = arg;
	uint64_t *tmp = malloc(g_ps);
	struct rng r;

	rng_seed(&r, g_seed * 211 + a->id);
	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		size_t p = rng_below(&r, NPAGES);
		uint64_t s1 = __atomic_load_n(&g_seq[p], __ATOMIC_ACQUIRE), s2, c;

		c = __atomic_load_n(&g_cookie[p], __ATOMIC_RELAXED);
		copy_page(tmp, p);      /* acquire loads: s2 is read after them */
		s2 = __atomic_load_n(&g_seq[p], __ATOMIC_RELAXED);
		if ((s1 & 1) || s1 != s2) {
			a->skipped++;
			continue;
		}
		if (!page_is(tmp, c))
			report("reader", p, c, tmp);
		a->checked++;
	}
	free(tmp);
	return NULL;
}

static long g_reclaimed;

/* Calls zm_region_reclaim in a loop: up to *arg pages a call, at
 * random, or (0) every resident page. */
static void *reclaimer(void *arg)
{
	size_t most = *(size_t *)arg;
	struct rng r;

	rng_seed(&r, g_seed * 307);
	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		long k = zm_region_reclaim(g_r, most ? (1 + rng_below(&r, most)) * g_ps :
					       SIZE_MAX / 2);

		if (k < 0 && k != -ENOSPC)
			__atomic_fetch_add(&g_failed, 1, __ATOMIC_RELAXED);
		else if (k > 0)
			g_reclaimed += k / (long)g_ps;
		if (rng_below(&r, 4) == 0)
			usleep(50);
	}
	return NULL;
}

static void cookies(unsigned flags)
{
	struct zm_region_config c = { .size = NPAGES * g_ps, .resident_limit = LIMIT * g_ps,
				      .flags = flags };
	pthread_t wt[NW], rt[NR], ct;
	struct wargs wa[NW];
	struct rargs ra[NR];
	struct zm_region_stats st;
	size_t most = 16;
	long writes = 0, checked = 0, skipped = 0, wchecks = 0;
	int rc;

	if (rt_emulated())
		skip();
	rc = zm_region_create(&c, &g_r);
	if (rc == -ENOSYS || rc == -EPERM) {
		printf("no userfaultfd%s here (%s): skipped\n",
		       flags & ZM_REGION_WAIT ? " for ZM_REGION_WAIT" : "", strerror(-rc));
		skip();
	}
	assert_int_equal(rc, 0);
	g_base = zm_region_base(g_r);
	g_words = g_ps / 8;
	memset(g_seq, 0, sizeof(g_seq));
	memset(g_cookie, 0, sizeof(g_cookie));
	g_stop = 0;
	g_failed = 0;
	g_reclaimed = 0;
	pthread_create(&ct, NULL, reclaimer, &most);
	for (unsigned i = 0; i < NR; i++) {
		ra[i] = (struct rargs){ .id = i };
		pthread_create(&rt[i], NULL, reader, &ra[i]);
	}
	for (unsigned i = 0; i < NW; i++) {
		wa[i] = (struct wargs){ .id = i };
		pthread_create(&wt[i], NULL, writer, &wa[i]);
	}
	for (unsigned i = 0; i < NW; i++) {
		pthread_join(wt[i], NULL);
		writes += wa[i].writes, wchecks += wa[i].checks;
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < NR; i++) {
		pthread_join(rt[i], NULL);
		checked += ra[i].checked, skipped += ra[i].skipped;
	}
	pthread_join(ct, NULL);
	/* the end: every page its latest cookie */
	for (size_t p = 0; p < NPAGES; p++) {
		uint64_t *w = g_base + p * g_words;

		if (!page_is(w, g_cookie[p]))
			report("end", p, g_cookie[p], w);
	}
	st = rt_stats(g_r);
	printf("%s: %ld writes, %ld checked by their writer, %ld by readers (%ld skipped, "
	       "written meanwhile), %ld pages reclaimed by the loop; faults %llu first, "
	       "%llu refault, %llu wp, %llu waits; %llu evictions (%llu clean), resident_max "
	       "%llu pages (limit %u + slack %llu)\n", flags & ZM_REGION_WAIT ? "wait" : "default",
	       writes, wchecks, checked, skipped, g_reclaimed,
	       (unsigned long long)st.faults_first, (unsigned long long)st.faults_refault,
	       (unsigned long long)st.faults_wp, (unsigned long long)st.fault_waits,
	       (unsigned long long)st.evictions, (unsigned long long)st.evictions_clean,
	       (unsigned long long)(st.resident_max / g_ps), LIMIT,
	       (unsigned long long)(st.slack / g_ps));
	assert_int_equal(g_failed, 0);
	assert_true(checked > 0);
	assert_true(st.faults_refault > 0);
	assert_true(st.resident_max <= LIMIT * g_ps + st.slack);
	assert_int_equal(st.evict_failures, 0);
	/* the check reads the store whole: no eviction may run beside it
	 * (the reads above took the region past its mark; an eviction round
	 * in flight ends inside the reclaim lock that reclaim(0) takes) */
	assert_int_equal(zm_region_set_limit(g_r, 0), 0);
	assert_int_equal(zm_region_reclaim(g_r, 0), 0);
	assert_int_equal(zm_store_check(zm_region_store(g_r)), 0);
	zm_region_destroy(g_r);
	g_r = NULL;
}

static void test_cookies(void **state) { cookies(0); }
static void test_cookies_wait(void **state) { cookies(ZM_REGION_WAIT); }
/* as zmem run makes its region: read-ahead and fault-around in the race */
static void test_cookies_run(void **state)
{
	cookies(ZM_REGION_WAIT | ZM_REGION_AROUND | ZM_REGION_INHERIT);
}

/* ---- the same page, many threads -------------------------------------- */

#define NS 4            /* threads on the same pages */
#define HOT 4           /* the pages they share */
#define SLOT_WORDS 8    /* a thread's word every 64 bytes */
#define SAME_FACTOR 500 /* rounds a thread, in steps ... */
#define SAME_SECONDS 2  /* ... or this long, whichever ends first */

static uint64_t g_count[NS][HOT]; /* each thread's last value, its own */

struct sargs {
	unsigned id;
	long lost, back, rounds;
};

static void *same_page(void *arg)
{
	struct sargs *a = arg;
	uint64_t seen[NS][HOT];

	uint64_t end = zmi_os_now_ns() + SAME_SECONDS * 1000000000ull;

	memset(seen, 0, sizeof(seen));
	for (long s = 0; s < g_steps * SAME_FACTOR; s++) {
		if (s % 1024 == 0 && zmi_os_now_ns() > end)
			break;
		a->rounds++;
		for (size_t p = 0; p < HOT; p++) {
			uint64_t *w = g_base + p * g_words;
			uint64_t v = g_count[a->id][p], got;

			/* every other round only reads, so that pages come back
			 * clean and the next write takes a write-protect fault */
			if ((s + a->id) % 2 == 0)
				__atomic_store_n(&w[a->id * SLOT_WORDS], v = ++g_count[a->id][p],
						 __ATOMIC_RELAXED);
			got = __atomic_load_n(&w[a->id * SLOT_WORDS], __ATOMIC_RELAXED);
			if (got != v && a->lost++ < 3)
				printf("thread %u page %zu: wrote %llu, read back %llu\n", a->id, p,
				       (unsigned long long)v, (unsigned long long)got);
			for (unsigned o = 0; o < NS; o++) {
				uint64_t x = __atomic_load_n(&w[o * SLOT_WORDS], __ATOMIC_RELAXED);

				if (x < seen[o][p] && a->back++ < 3)
					printf("thread %u page %zu: thread %u's word went back from "
					       "%llu to %llu\n", a->id, p, o,
					       (unsigned long long)seen[o][p], (unsigned long long)x);
				if (x > seen[o][p])
					seen[o][p] = x;
			}
		}
	}
	return NULL;
}

/* Touches the other pages, so that the limit's reclaimer runs too. */
static void *noise(void *arg)
{
	struct rng r;

	rng_seed(&r, g_seed * 401);
	while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
		size_t p = HOT + rng_below(&r, NPAGES - HOT);

		__atomic_fetch_add(&g_base[p * g_words + rng_below(&r, g_words)], 1,
				   __ATOMIC_RELAXED);
	}
	return NULL;
}

static void test_same_page(void **state)
{
	struct zm_region_config c = { .size = NPAGES * g_ps, .resident_limit = LIMIT * g_ps };
	pthread_t t[NS], ct, nt;
	struct sargs sa[NS];
	struct zm_region_stats st;
	size_t most = 0;
	long lost = 0, back = 0, rounds = 0;

	g_r = rt_mk(&c);
	g_base = zm_region_base(g_r);
	g_words = g_ps / 8;
	memset(g_count, 0, sizeof(g_count));
	g_stop = 0;
	g_failed = 0;
	g_reclaimed = 0;
	pthread_create(&ct, NULL, reclaimer, &most);
	pthread_create(&nt, NULL, noise, NULL);
	for (unsigned i = 0; i < NS; i++) {
		sa[i] = (struct sargs){ .id = i };
		pthread_create(&t[i], NULL, same_page, &sa[i]);
	}
	for (unsigned i = 0; i < NS; i++) {
		pthread_join(t[i], NULL);
		lost += sa[i].lost, back += sa[i].back, rounds += sa[i].rounds;
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
	pthread_join(ct, NULL);
	pthread_join(nt, NULL);
	zm_region_reclaim(g_r, NPAGES * g_ps);
	for (unsigned i = 0; i < NS; i++)
		for (size_t p = 0; p < HOT; p++)
			if (g_base[p * g_words + i * SLOT_WORDS] != g_count[i][p] && lost++ < 3)
				printf("end: thread %u page %zu: %llu, wrote %llu last\n", i, p,
				       (unsigned long long)g_base[p * g_words + i * SLOT_WORDS],
				       (unsigned long long)g_count[i][p]);
	st = rt_stats(g_r);
	printf("same page: %d threads, %ld rounds in all on %d pages, %ld pages reclaimed by "
	       "the loop; faults %llu refault, %llu wp, %llu waits; %llu evictions\n", NS, rounds,
	       HOT, g_reclaimed, (unsigned long long)st.faults_refault,
	       (unsigned long long)st.faults_wp, (unsigned long long)st.fault_waits,
	       (unsigned long long)st.evictions);
	assert_int_equal(lost, 0);
	assert_int_equal(back, 0);
	assert_int_equal(g_failed, 0);
	assert_true(st.faults_refault > 0);
	assert_int_equal(zm_store_check(zm_region_store(g_r)), 0);
	zm_region_destroy(g_r);
	g_r = NULL;
}

int main(int argc, char **argv)
{
	struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cookies),
		cmocka_unit_test(test_cookies_wait),
		cmocka_unit_test(test_cookies_run),
		cmocka_unit_test(test_same_page),
	};

	g_ps = (size_t)sysconf(_SC_PAGESIZE);
	test_args(argc, argv, &g_seed, &g_steps);
	return test_run_selected("region_stress", tests);
}
