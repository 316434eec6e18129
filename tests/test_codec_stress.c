/* Threads sharing codecs: 4 threads compress and decompress at once with
 * the same zm_codec objects (every codec of the build), each verifying its
 * pages byte for byte.  Between two phases the codecs are destroyed and
 * re-created while the threads wait, so that workspaces are detached under
 * live threads and found stale afterwards; at the end the threads exit and
 * free their workspaces.  Seeded: --seed N replays, --steps N sets the
 * rounds per thread and phase. */
#include <errno.h>
#include <pthread.h>

#include "testutil.h"
#include <zmem/codec.h>

#define NTHREADS 4
#define MAX_CODECS 8
#define MAX_PAGE 16384

static uint64_t seed;
static long steps = 5000;

struct shared {
	struct zm_codec *codecs[MAX_CODECS];
	size_t ncodecs;
	pthread_barrier_t bar;
};

struct targ {
	struct shared *sh;
	int id;
	long errors;
};

static void fill(struct rng *r, unsigned char *p, size_t n)
{
	uint64_t cookie = rng_next(r);
	unsigned kind = (unsigned)rng_below(r, 3);

	for (size_t i = 0; i < n; i++) {
		if (kind == 0)
			p[i] = (unsigned char)(i % 61 == 0 ? cookie >> (i % 8) : 'a' + i % 7);
		else if (kind == 1)
			p[i] = (unsigned char)rng_next(r);
		else
			p[i] = (unsigned char)"the page of zmem "[(i + (cookie & 15)) % 17];
	}
}

static void run_phase(struct targ *a, struct rng *r, unsigned char *src,
		      unsigned char *dst, unsigned char *out)
{
	for (long s = 0; s < steps; s++) {
		struct zm_codec *c = a->sh->codecs[rng_below(r, a->sh->ncodecs)];
		size_t len = (size_t)1024 << rng_below(r, 5);
		int n;

		fill(r, src, len);
		n = zm_codec_compress(c, src, len, dst, len);
		if (n == -ENOSPC) {
			/* incompressible at this capacity: must fit the bound */
			n = zm_codec_compress(c, src, len, dst, zm_codec_bound(c, len));
		}
		if (n <= 0 || zm_codec_decompress(c, dst, (size_t)n, out, len) ||
		    memcmp(src, out, len)) {
			a->errors++;
			continue;
		}
	}
}

static void *worker(void *arg)
{
	struct targ *a = arg;
	unsigned char *src = malloc(MAX_PAGE), *out = malloc(MAX_PAGE);
	unsigned char *dst = malloc(2 * MAX_PAGE);
	struct rng r;

	rng_seed(&r, seed + (uint64_t)a->id * 7919);
	pthread_barrier_wait(&a->sh->bar);
	run_phase(a, &r, src, dst, out);
	pthread_barrier_wait(&a->sh->bar); /* main re-creates the codecs */
	pthread_barrier_wait(&a->sh->bar);
	run_phase(a, &r, src, dst, out);
	free(src);
	free(dst);
	free(out);
	return NULL;
}

static void make_codecs(struct shared *sh)
{
	const char *const *l = zm_codec_list();

	sh->ncodecs = 0;
	for (size_t i = 0; l[i] && sh->ncodecs < MAX_CODECS - 1; i++)
		assert_int_equal(zm_codec_create(l[i], 0, &sh->codecs[sh->ncodecs++]), 0);
	assert_int_equal(zm_codec_create("zstd:1", 0, &sh->codecs[sh->ncodecs++]), 0);
}

static void destroy_codecs(struct shared *sh)
{
	for (size_t i = 0; i < sh->ncodecs; i++)
		zm_codec_destroy(sh->codecs[i]);
}

static void test_shared_codecs(void **st)
{
	struct shared sh;
	struct targ a[NTHREADS];
	pthread_t t[NTHREADS];
	long errors = 0;

	make_codecs(&sh);
	pthread_barrier_init(&sh.bar, NULL, NTHREADS + 1);
	for (int i = 0; i < NTHREADS; i++) {
		a[i] = (struct targ){ &sh, i, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, worker, &a[i]), 0);
	}
	pthread_barrier_wait(&sh.bar);
	pthread_barrier_wait(&sh.bar); /* phase 1 done */
	destroy_codecs(&sh);
	make_codecs(&sh);
	pthread_barrier_wait(&sh.bar);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		errors += a[i].errors;
	}
	pthread_barrier_destroy(&sh.bar);
	destroy_codecs(&sh);
	assert_int_equal(errors, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shared_codecs),
	};

	test_args(argc, argv, &seed, &steps);
	return cmocka_run_group_tests_name("codec_stress", tests, NULL, NULL);
}
