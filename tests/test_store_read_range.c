/*
 * Tests of zm_store_get_range on pages written back: the pages on file
 * read together (a read for many, counted in zmi_store_backing_preads), each
 * way of opening the file, with readback; a fault fails only the pages
 * it names; ranges read while another thread rewrites, discards and
 * writes pages back read each page whole, as some put stored it.
 *
 *   test_store_read_range [--seed N] [--steps N]
 */

#include "tiertest.h"

static uint64_t g_seed;
static long g_steps;

static uint64_t preads(void)
{
	return __atomic_load_n(&zmi_store_backing_preads, __ATOMIC_RELAXED);
}

/* 64 adjacent pages on file, written back in index order (packed end to
 * end): a range read of them makes a handful of reads where gets one by
 * one make one each; every page equal; with readback, they are back in
 * memory after.  Each cache mode (O_DIRECT, flushed and dropped, none). */
static void test_range_batched(void **state)
{
	enum { N = 256, R = 64 };
	char path[256];
	bool direct;
	const char *dir = st_direct_probe(&direct);
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 3900);
	uint8_t *out = malloc((size_t)N * PS);

	(void)state;
	assert_non_null(out);
	for (int mode = 0; mode < 3; mode++) {
		for (int rb = 0; rb < 2; rb++) {
			struct zm_store *s;
			uint64_t one, range;

			tmp_file(path, sizeof(path), dir);
			zmi_store_backing_direct_fail = mode == 1;
			zmi_store_backing_cache_fail = mode == 2;
			c.backing_readback = rb;
			s = test_store_mk(&c, N);
			for (uint64_t i = 0; i < N; i++)
				assert_int_equal(zm_store_put(s, i, text + i * PS), 0);
			assert_int_equal(zm_store_writeback(s, 0, ALL), N);
			one = preads();
			for (uint64_t i = 0; i < R; i++)
				assert_int_equal(zm_store_get(s, i, out + i * PS), 0);
			one = preads() - one;
			range = preads();
			assert_int_equal(zm_store_get_range(s, R, R, out + R * PS), 0);
			range = preads() - range;
			printf("mode %d readback %d: %d pages one by one %llu reads, as a range "
			       "%llu\n", mode, rb, R, (unsigned long long)one,
			       (unsigned long long)range);
			assert_true(one >= R);
			assert_true(range >= 1 && range <= 4);
			assert_memory_equal(out, text, (size_t)2 * R * PS);
			for (uint64_t i = R; i < 2 * R; i++)
				assert_int_equal(kind_of(s, i), rb ? ZM_STORE_SLOT_POOL
								   : ZM_STORE_SLOT_FILE);
			/* the whole store: on file, back in memory, both */
			assert_int_equal(zm_store_get_range(s, 0, N, out), 0);
			assert_memory_equal(out, text, (size_t)N * PS);
			assert_int_equal(stats(s).bd_reads, rb ? N : N + 2 * R);
			CHECK(s);
			zm_store_destroy(s);
			fault_clear();
		}
	}
	assert_int_equal(zm_store_get_range(NULL, 0, 1, out), -EINVAL);
	free(out);
	free(text);
}

/* A read fault on one page fails the range with -EIO, that page only:
 * every other page reads back equal, the page stays on file and reads
 * once the fault is gone; a range without it reads. */
static void test_range_fault(void **state)
{
	enum { N = 128, BAD = 37 };
	char path[256];
	struct zm_store_config c = { .backing_path = path };
	uint8_t *text = make_pages(N, PS, PK_TEXT, 4000);
	uint8_t *out = malloc((size_t)N * PS);
	struct zm_store *s;

	(void)state;
	assert_non_null(out);
	tmp_file(path, sizeof(path), NULL);
	s = test_store_mk(&c, N);
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(zm_store_put(s, i, text + i * PS), 0);
	assert_int_equal(zm_store_writeback(s, 0, ALL), N);
	fault_set('r', BAD, -EIO);
	memset(out, 0xAA, (size_t)N * PS);
	assert_int_equal(zm_store_get_range(s, 0, N, out), -EIO);
	for (uint64_t i = 0; i < N; i++)
		if (i != BAD)
			assert_memory_equal(out + i * PS, text + i * PS, PS);
	assert_true(stats(s).failed_reads >= 1);
	assert_int_equal(kind_of(s, BAD), ZM_STORE_SLOT_FILE);
	assert_int_equal(zm_store_get_range(s, BAD + 1, N - BAD - 1, out), 0);
	assert_memory_equal(out, text + (BAD + 1) * PS, (size_t)(N - BAD - 1) * PS);
	/* an I/O error of the whole read: each page read again alone */
	fault_set('r', FAULT_ANY, -EIO);
	assert_int_equal(zm_store_get_range(s, 0, 16, out), -EIO);
	CHECK(s);
	fault_clear();
	assert_int_equal(zm_store_get_range(s, 0, N, out), 0);
	assert_memory_equal(out, text, (size_t)N * PS);
	CHECK(s);
	zm_store_destroy(s);
	free(out);
	free(text);
}

/* ---- concurrent ---------------------------------------------------------- */

enum { CN = 1024 };

/* Page idx at version v (v 0: zeros, discarded or never written): text,
 * its first words the index and version, so that a page read can say
 * which put stored it. */
static void vpage(uint8_t *p, uint64_t idx, uint64_t v)
{
	uint64_t h[2] = { idx, v };

	if (!v) {
		memset(p, 0, PS);
		return;
	}
	fill_page(p, PS, (v % 5) ? PK_TEXT : PK_RANDOM, idx * 7919 + v);
	memcpy(p, h, sizeof(h));
}

struct churn {
	struct zm_store *s;
	uint64_t seed;
	uint64_t ver[CN];    /* the last version put (atomic) */
	int stop;            /* atomic */
	long puts, discards, wbs;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	struct rng r;
	uint8_t p[PS];

	rng_seed(&r, c->seed);
	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
		uint64_t i = rng_below(&r, CN), v;
		unsigned what = (unsigned)rng_below(&r, 16);

		if (what == 0) {
			assert_int_equal(zm_store_discard(c->s, i, 1), 0);
			__atomic_store_n(&c->ver[i], 0, __ATOMIC_RELAXED);
			c->discards++;
		} else if (what == 1) {
			(void)zm_store_writeback(c->s, 0, 64);
			c->wbs++;
		} else {
			v = __atomic_load_n(&c->ver[i], __ATOMIC_RELAXED);
			v = (v | 0xFFFF) + 1 + rng_below(&r, 1000) + 1; /* new, never 0 */
			vpage(p, i, v);
			assert_int_equal(zm_store_put(c->s, i, p), 0);
			__atomic_store_n(&c->ver[i], v, __ATOMIC_RELAXED);
			c->puts++;
		}
	}
	return NULL;
}

/* Ranges read while another thread rewrites, discards and writes pages
 * back: each page whole, as some put of its own index stored it (or
 * zeros); after, every page equal to its last put. */
static void test_range_concurrent(void **state)
{
	char path[256];
	bool direct;
	const char *dir = st_direct_probe(&direct);
	struct zm_store_config c = { .backing_path = path };
	struct churn *ch = calloc(1, sizeof(*ch));
	uint8_t *out = malloc((size_t)CN * PS), *want = malloc(PS);
	/* under an emulator (make check-arm64) a quarter: the same paths,
	 * in a stage whose longest test this was */
	long steps = g_steps ? g_steps : getenv("ZM_TEST_EMULATED") ? 100 : 400;
	pthread_t t;
	struct rng r;

	(void)state;
	assert_non_null(ch);
	assert_non_null(out);
	assert_non_null(want);
	printf("seed %llu\n", (unsigned long long)g_seed);
	rng_seed(&r, g_seed);
	tmp_file(path, sizeof(path), dir);
	for (int rb = 0; rb < 2; rb++) {
		memset(ch->ver, 0, sizeof(ch->ver));
		ch->stop = 0;
		c.backing_readback = rb;
		ch->s = test_store_mk(&c, CN);
		ch->seed = g_seed + (uint64_t)rb;
		for (uint64_t i = 0; i < CN; i++) {
			ch->ver[i] = 1 + i % 7;
			vpage(out, i, ch->ver[i]);
			assert_int_equal(zm_store_put(ch->s, i, out), 0);
		}
		assert_int_equal(zm_store_writeback(ch->s, 0, ALL), CN);
		assert_int_equal(pthread_create(&t, NULL, churn_main, ch), 0);
		for (long k = 0; k < steps; k++) {
			uint64_t n = 1 + rng_below(&r, 256), i0 = rng_below(&r, CN - n + 1);

			assert_int_equal(zm_store_get_range(ch->s, i0, n, out), 0);
			for (uint64_t j = 0; j < n; j++) {
				const uint8_t *p = out + j * PS;
				uint64_t h[2];

				memcpy(h, p, sizeof(h));
				if (!h[0] && !h[1]) {
					vpage(want, i0 + j, 0);
				} else {
					assert_int_equal(h[0], i0 + j);
					vpage(want, i0 + j, h[1]);
				}
				assert_memory_equal(p, want, PS);
			}
		}
		__atomic_store_n(&ch->stop, 1, __ATOMIC_RELAXED);
		assert_int_equal(pthread_join(t, NULL), 0);
		printf("readback %d: %ld ranges read beside %ld puts, %ld discards, %ld "
		       "writebacks\n", rb, steps, ch->puts, ch->discards, ch->wbs);
		assert_int_equal(zm_store_get_range(ch->s, 0, CN, out), 0);
		for (uint64_t i = 0; i < CN; i++) {
			vpage(want, i, ch->ver[i]);
			assert_memory_equal(out + i * PS, want, PS);
		}
		CHECK(ch->s);
		zm_store_destroy(ch->s);
	}
	free(want);
	free(out);
	free(ch);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_range_batched, teardown),
		cmocka_unit_test_teardown(test_range_fault, teardown),
		cmocka_unit_test_teardown(test_range_concurrent, teardown),
	};

	test_args(argc, argv, &g_seed, &g_steps);
	return cmocka_run_group_tests_name("store_read_range", tests, NULL, NULL);
}
