/*
 * zmem allocbench: the reviewers' microbenchmark (SEEDS.md §1).  The same
 * sequence of allocations through every pool backend:
 *
 *   all-free   allocate N objects of one size, then free them all
 *   one-one    allocate one object and free it, N times
 *   random     a random mix of allocations (realistic sizes) and frees
 *              around a live set, from one seed
 *
 * swept over sizes, with 1..N threads each running its own copy of the
 * sequence on the shared pool.  Reports ns per operation (an allocation or
 * a free) per thread, the median of 3 runs, and the throughput scaling.
 * Pages are kept resident between runs -- zm_pages with an unlimited
 * reserve, glibc with trimming and mmap of large blocks off -- so what is
 * timed is the allocators, not the kernel's page faults.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/pages.h>
#include <zmem/pool.h>
#include "cli/cli.h"

#define RUNS 3
#define MAXT 16
#define BYTES_PER_THREAD (48u << 20)
#define ONE_ONE_OPS 2000000

enum pattern { ALL_FREE, ONE_ONE, RANDOM, NPATTERN };
static const char *const pattern_names[] = { "all-free", "one-one", "random" };

struct job {
	struct zm_pool *pool;
	enum pattern pat;
	size_t size, n;
	uint64_t seed;
	pthread_barrier_t *bar;
	zm_handle_t *h;
	uint64_t ops, ns, fails, t0, t1;
};

/* realistic compressed sizes of 4 KiB pages (see tests/pooltest.h) */
static size_t rsize(uint64_t *s)
{
	unsigned k = (unsigned)(cli_rand(s) % 100);

	if (k < 25)
		return 16 + cli_rand(s) % 410;
	if (k < 80)
		return 410 + cli_rand(s) % 2048;
	if (k < 95)
		return 2458 + cli_rand(s) % 1228;
	return 4096 - cli_rand(s) % 204;
}

static void *run(void *arg)
{
	struct job *j = arg;
	uint64_t s = j->seed, t0, ops = 0;
	size_t live = 0;

	pthread_barrier_wait(j->bar);
	t0 = j->t0 = cli_now_ns();
	switch (j->pat) {
	case ALL_FREE:
		for (size_t i = 0; i < j->n; i++)
			if (!(j->h[i] = zm_malloc(j->pool, j->size)))
				j->fails++;
		for (size_t i = 0; i < j->n; i++)
			if (j->h[i])
				zm_free(j->pool, j->h[i]);
		ops = 2 * j->n;
		break;
	case ONE_ONE:
		for (size_t i = 0; i < j->n; i++) {
			zm_handle_t h = zm_malloc(j->pool, j->size);

			if (h)
				zm_free(j->pool, h);
			else
				j->fails++;
		}
		ops = 2 * j->n;
		break;
	default:
		for (size_t i = 0; i < 2 * j->n; i++) {
			if (live < j->n / 4 || (live < j->n && cli_rand(&s) % 2)) {
				if ((j->h[live] = zm_malloc(j->pool, rsize(&s))))
					live++;
				else
					j->fails++;
			} else {
				size_t k = cli_rand(&s) % live;

				zm_free(j->pool, j->h[k]);
				j->h[k] = j->h[--live];
			}
		}
		while (live)
			zm_free(j->pool, j->h[--live]);
		ops = 2 * j->n;
		break;
	}
	j->t1 = cli_now_ns();
	j->ns = j->t1 - t0;
	j->ops = ops;
	return NULL;
}

/* ns per op per thread, median of RUNS; *mops gets the total Mops/s */
static double measure(const char *backend, enum pattern pat, size_t size, int nt,
		      double *mops)
{
	struct zm_pages_config pc = { .reserve_pages = SIZE_MAX };
	struct zm_pool_config c = { .allocator = backend };
	struct zm_pages *pg = NULL;
	struct zm_pool *pool;
	double per[RUNS], tput[RUNS];
	size_t n = BYTES_PER_THREAD / (size ? size : 2048);
	struct job j[MAXT];
	pthread_t t[MAXT];

	if (n > 200000)
		n = 200000;
	if (zm_pages_create(&pc, &pg))
		return -1;
	c.pages = pg;
	if (zm_pool_create(&c, &pool)) {
		zm_pages_destroy(pg);
		return -1;
	}
	for (int i = 0; i < nt; i++) {
		j[i].h = malloc(n * sizeof(zm_handle_t));
		if (!j[i].h)
			return -1;
	}
	for (int r = 0; r <= RUNS; r++) {  /* run 0 warms up */
		pthread_barrier_t bar;
		uint64_t t0 = UINT64_MAX, t1 = 0, wall, ops = 0;
		double sum = 0;

		pthread_barrier_init(&bar, NULL, (unsigned)nt + 1);
		for (int i = 0; i < nt; i++) {
			zm_handle_t *h = j[i].h;

			j[i] = (struct job){ pool, pat, size, pat == ONE_ONE ? ONE_ONE_OPS : n,
					     12345 + (uint64_t)i * 77, &bar, h, 0, 0, 0, 0, 0 };
			pthread_create(&t[i], NULL, run, &j[i]);
		}
		pthread_barrier_wait(&bar);
		/* wall time from the first thread's start to the last one's end */
		for (int i = 0; i < nt; i++) {
			pthread_join(t[i], NULL);
			sum += (double)j[i].ns / (double)j[i].ops;
			ops += j[i].ops;
			t0 = j[i].t0 < t0 ? j[i].t0 : t0;
			t1 = j[i].t1 > t1 ? j[i].t1 : t1;
		}
		wall = t1 - t0;
		pthread_barrier_destroy(&bar);
		if (r > 0) {
			per[r - 1] = sum / nt;
			tput[r - 1] = (double)ops * 1e3 / (double)wall;
		}
	}
	for (int i = 0; i < nt; i++)
		free(j[i].h);
	zm_pool_destroy(pool);
	zm_pages_destroy(pg);
	*mops = cli_median(tput, RUNS);
	return cli_median(per, RUNS);
}

int cmd_allocbench(int argc, char **argv)
{
	static const size_t sizes[] = { 32, 128, 512, 1024, 1632, 2048, 3072, 4000 };
	const char *only = NULL;
	int json = 0, maxt = cli_ncpus() < 2 ? 2 : cli_ncpus(), first = 1, quick = 0;
	const char *const *backends = zm_pool_backends();

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			maxt = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--allocator") && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr, "usage: zmem allocbench [--json] [--threads N] "
					"[--allocator NAME] [--quick]\n");
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (maxt < 1 || maxt > MAXT)
		maxt = 2;
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
	mallopt(M_MMAP_THRESHOLD, 1 << 30);
	if (json)
		printf("[");
	else
		printf("zmem allocbench: ns per operation (alloc or free) per thread, "
		       "median of %d runs;\nMops/s is the total throughput, scaling "
		       "against 1 thread\n\n%-10s %-9s %6s %7s %10s %10s %8s\n", RUNS,
		       "allocator", "pattern", "size", "threads", "ns/op", "Mops/s",
		       "scaling");
	for (const char *const *b = backends; *b; b++) {
		if (only && strcmp(only, *b))
			continue;
		for (int pat = 0; pat < NPATTERN; pat++) {
			size_t nsz = pat == RANDOM ? 1 : sizeof(sizes) / sizeof(sizes[0]);

			for (size_t si = 0; si < nsz; si++) {
				size_t size = pat == RANDOM ? 0 : sizes[si];
				double base = 0;

				if (quick && pat != RANDOM && size != 1024)
					continue;
				for (int nt = 1; nt <= maxt; nt++) {
					double mops, ns = measure(*b, (enum pattern)pat, size, nt, &mops);

					if (nt == 1)
						base = mops;
					if (json)
						printf("%s\n {\"allocator\": \"%s\", \"pattern\": \"%s\", "
						       "\"size\": %zu, \"threads\": %d, \"ns_per_op\": %.2f, "
						       "\"mops\": %.3f, \"scaling\": %.3f}",
						       first ? "" : ",", *b, pattern_names[pat], size,
						       nt, ns, mops, mops / base);
					else {
						char sz[24] = "mixed";

						if (size)
							snprintf(sz, sizeof(sz), "%zu", size);
						printf("%-10s %-9s %6s %7d %10.1f %10.2f %7.2fx\n",
						       *b, pattern_names[pat], sz, nt, ns, mops,
						       mops / base);
					}
					first = 0;
					fflush(stdout);
				}
			}
		}
	}
	if (json)
		printf("\n]\n");
	return 0;
}
