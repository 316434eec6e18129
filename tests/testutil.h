/*
 * Helpers shared by the tests: cmocka, a seeded PRNG whose seed is printed
 * and can be given back (--seed N), fixed under `make check` and random
 * under `make soak` (test_args, below), and resident memory.
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
#include <fnmatch.h>

#include <zmem/store.h>
#include "base/os.h"
#include "base/rand.h"

/* the tests' stream of random numbers: xorshift64* (base/rand.h) */
struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	return zmi_rand(&r->s);
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
	return zmi_mix64(x);
}

/*
 * Seeds.  Every randomized test takes its seed from test_args(): under
 * `make check` a fixed one (ZM_TEST_SEED_DEFAULT), so that every run
 * does the same steps and prints the same figures; under `make soak`
 * (ZM_SOAK=N in the environment, N >= 1) a new one each run, drawn from
 * the clock and the pid, and N times the test's default steps.  The seed
 * (and the steps) are printed either way: --seed N [--steps N] replays a
 * run exactly, in either mode.
 */
#define ZM_TEST_SEED_DEFAULT 1

/* Keep, in place, the tests whose names match one of the shell patterns
 * in $ZM_TESTS (separated by commas or spaces; unset or empty: all of
 * them), and return how many are left: a slow wrapper (valgrind, `make
 * check-memcheck`) runs a few cases of a binary.  Patterns that match
 * nothing here are ignored, so one list may serve several binaries. */
static inline size_t test_select(struct CMUnitTest *t, size_t n)
{
	const char *e = getenv("ZM_TESTS");
	size_t kept = 0;

	if (!e || !*e)
		return n;
	for (size_t i = 0; i < n; i++) {
		char pat[256];

		for (const char *p = e; *p; ) {
			size_t len = strcspn(p, ", ");

			snprintf(pat, sizeof(pat), "%.*s", (int)len, p);
			p += len + (p[len] != 0);
			if (len && !fnmatch(pat, t[i].name, 0)) {
				t[kept++] = t[i];
				break;
			}
		}
	}
	return kept;
}
#define test_run_selected(name, tests) \
	_cmocka_run_group_tests((name), (tests), \
				test_select((tests), sizeof(tests) / sizeof((tests)[0])), NULL, NULL)

/* ZM_SOAK's factor: 0 when not soaking. */
static inline long test_soak(void)
{
	const char *e = getenv("ZM_SOAK");
	long n = e && *e ? strtol(e, NULL, 0) : 0;

	return n > 0 ? n : 0;
}

/* Parse --seed N and --steps N from argv; print the seed so a failure can
 * be replayed. */
static inline void test_args(int argc, char **argv, uint64_t *seed, long *steps)
{
	long soak = test_soak();

	*seed = ZM_TEST_SEED_DEFAULT;
	if (soak) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		*seed = mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
			((uint64_t)getpid() << 32);
		if (steps)
			*steps *= soak;
	}
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--seed"))
			*seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--steps") && steps)
			*steps = strtol(argv[++i], NULL, 0);
	}
	if (steps)
		printf("seed %llu, %ld steps%s (replay with --seed %llu --steps %ld)\n",
		       (unsigned long long)*seed, *steps, soak ? ", soak" : "",
		       (unsigned long long)*seed, *steps);
	else
		printf("seed %llu%s (replay with --seed %llu)\n", (unsigned long long)*seed,
		       soak ? ", soak" : "", (unsigned long long)*seed);
	fflush(stdout);
}

#include "base/os.h"

/*
 * The sanitizer builds (ASan+UBSan, TSan): they run the same tests, with
 * the same seeds and steps, as the debug build (ZM_DEBUG=2), each step
 * several times slower.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ZM_TEST_SANITIZED 1
#endif
#endif
#ifndef ZM_TEST_SANITIZED
#define ZM_TEST_SANITIZED 0
#endif

/*
 * Whether a randomized test runs its whole-structure checker (zm_*_check)
 * after step s of steps: after every step in the debug build and under
 * `make soak`; in a sanitizer build under `make check`, after every
 * ZM_TEST_CHECK_EVERY_SAN-th step and after the last.  The sanitizer
 * builds replay the debug build's steps (same seed, same steps), whose
 * checker has seen every state; what they add, a bad access in a step or
 * in the checker, they catch whenever it happens.
 */
#define ZM_TEST_CHECK_EVERY_SAN 16

static inline int test_check_step(long s, long steps)
{
	if (!ZM_TEST_SANITIZED || test_soak())
		return 1;
	return s % ZM_TEST_CHECK_EVERY_SAN == ZM_TEST_CHECK_EVERY_SAN - 1 || s == steps - 1;
}

/* Resident set size of the test process in bytes: the library's own
 * reading of /proc/self/statm. */
static inline size_t test_rss_bytes(void)
{
	return zmi_os_rss_bytes();
}

#endif
