/*
 * Helpers shared by the tests: cmocka, a seeded PRNG whose seed is printed
 * and can be given back (--seed N), and resident memory.
 */
#ifndef ZM_TESTUTIL_H
#define ZM_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <zmem/store.h>

/* xorshift64*: small, fast, good enough to drive tests */
struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n ? rng_next(r) % n : 0;
}

static inline void rng_seed(struct rng *r, uint64_t seed)
{
	r->s = seed * 0x9E3779B97F4A7C15ull + 1;
	if (!r->s)
		r->s = 1;
}

/* A store of n pages with base's other settings; fails the test if it
 * cannot be made. */
static inline struct zm_store *test_store_mk(const struct zm_store_config *base, uint64_t n)
{
	struct zm_store_config c = *base;
	struct zm_store *s = NULL;

	c.nr_pages = n;
	assert_int_equal(zm_store_create(&c, &s), 0);
	assert_non_null(s);
	return s;
}

/* A 64-bit mixer (splitmix64's finaliser): a page's or cookie's bytes
 * from its index and version, the same for the same inputs. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Parse --seed N and --steps N from argv; print the seed so a failure can
 * be replayed. */
static inline void test_args(int argc, char **argv, uint64_t *seed, long *steps)
{
	*seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--seed"))
			*seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--steps") && steps)
			*steps = strtol(argv[++i], NULL, 0);
	}
	printf("seed %llu (replay with --seed %llu)\n", (unsigned long long)*seed,
	       (unsigned long long)*seed);
	fflush(stdout);
}

static inline size_t test_rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * (size_t)sysconf(_SC_PAGESIZE);
}

#endif
