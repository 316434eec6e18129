/*
 * zmem pagebench: the page allocator against the seed's table (background §2).
 *
 * 1. For total sizes 128 KiB .. --max-size, the time to allocate the whole
 *    size in batches of 1..128 pages; batch 1 is the single-page loop
 *    (zm_pages_alloc, through the per-thread cache), the others call
 *    zm_pages_alloc_bulk.  Each cell is the median of several runs; small
 *    sizes repeat the allocation inside a run so the clock can see it.
 *    Frees are not timed.
 * 2. The single-page fast path: an alloc+free pair, in ns.
 * 3. Threads 1..N each allocating and freeing through their caches: ops/s
 *    and the scaling against one thread.
 * 4. The peers a programmer would otherwise use: malloc(4096),
 *    posix_memalign(4096), and mmap of one page, per page and per pair.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <zmem/pages.h>
#include "cli/cli.h"

static const size_t batches[] = { 1, 2, 4, 8, 16, 32, 64, 128 };
#define NBATCH (sizeof(batches) / sizeof(batches[0]))
#define OUTER 5              /* runs per cell; the median is reported */
#define INNER_BYTES (64u << 20) /* small sizes repeat up to this much per run */
#define MAX_SIZES 24

struct opts {
	size_t max_size, page_size;
	int threads, json;
};

/* ---- 1. the seed's table -------------------------------------------- */

static double alloc_ns(struct zm_pages *p, size_t n, size_t batch, zm_pfn_t *pfns)
{
	uint64_t t0 = cli_now_ns(), t1;
	size_t got = 0;

	if (batch == 1) {
		for (; got < n; got++)
			if (zm_pages_alloc(p, &pfns[got]))
				break;
	} else {
		while (got < n) {
			size_t want = n - got < batch ? n - got : batch;
			size_t k = zm_pages_alloc_bulk(p, want, pfns + got);

			got += k;
			if (k < want)
				break;
		}
	}
	t1 = cli_now_ns();
	if (got < n)
		fprintf(stderr, "pagebench: allocation failed at %zu of %zu pages\n", got, n);
	zm_pages_free_bulk(p, got, pfns);
	return (double)(t1 - t0);
}

/* Median over OUTER runs of the time to allocate n pages, in ns. */
static double cell(struct zm_pages *p, size_t n, size_t batch, size_t bytes,
		   zm_pfn_t *pfns)
{
	double runs[OUTER];
	size_t inner = bytes >= INNER_BYTES ? 1 : INNER_BYTES / bytes;

	if (inner > 256)
		inner = 256;
	for (int r = 0; r < OUTER; r++) {
		double t = 0;

		for (size_t i = 0; i < inner; i++)
			t += alloc_ns(p, n, batch, pfns);
		runs[r] = t / (double)inner;
	}
	return cli_median(runs, OUTER);
}

/* ---- 2./4. pairs and peers ------------------------------------------ */

enum peer { PEER_MALLOC, PEER_MEMALIGN, PEER_MMAP, NPEER };
static const char *const peer_names[] = { "malloc", "posix_memalign", "mmap" };

static void *peer_alloc(enum peer k, size_t ps)
{
	void *m = NULL;

	switch (k) {
	case PEER_MALLOC:
		return malloc(ps);
	case PEER_MEMALIGN:
		return posix_memalign(&m, ps, ps) ? NULL : m;
	default:
		m = mmap(NULL, ps, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return m == MAP_FAILED ? NULL : m;
	}
}

static void peer_free(enum peer k, void *m, size_t ps)
{
	if (k == PEER_MMAP)
		munmap(m, ps);
	else
		free(m);
}

/* ns per page to allocate n pages one at a time with a peer */
static double peer_fill_ns(enum peer k, size_t n, size_t ps, void **v)
{
	double runs[OUTER];

	for (int r = 0; r < OUTER; r++) {
		uint64_t t0 = cli_now_ns(), t1;

		for (size_t i = 0; i < n; i++)
			v[i] = peer_alloc(k, ps);
		t1 = cli_now_ns();
		for (size_t i = 0; i < n; i++)
			if (v[i])
				peer_free(k, v[i], ps);
		runs[r] = (double)(t1 - t0) / (double)n;
	}
	return cli_median(runs, OUTER);
}

static double peer_pair_ns(enum peer k, size_t ps)
{
	size_t iters = k == PEER_MMAP ? 200000 : 5000000;
	double runs[OUTER];

	for (int r = 0; r < OUTER; r++) {
		uint64_t t0 = cli_now_ns();

		for (size_t i = 0; i < iters; i++) {
			void *m = peer_alloc(k, ps);

			__asm__ volatile("" : : "r"(m) : "memory");
			if (m)
				peer_free(k, m, ps);
		}
		runs[r] = (double)(cli_now_ns() - t0) / (double)iters;
	}
	return cli_median(runs, OUTER);
}

static double zmi_pair_ns(struct zm_pages *p)
{
	const size_t iters = 10000000;
	double runs[OUTER];

	for (int r = 0; r < OUTER; r++) {
		uint64_t t0 = cli_now_ns();

		for (size_t i = 0; i < iters; i++) {
			zm_pfn_t pfn;

			if (zm_pages_alloc(p, &pfn) == 0)
				zm_pages_free(p, pfn);
		}
		runs[r] = (double)(cli_now_ns() - t0) / (double)iters;
	}
	return cli_median(runs, OUTER);
}

/* ---- 3. threads ----------------------------------------------------- */

#define THREAD_OPS 4000000 /* alloc+free pairs per thread */
#define THREAD_HOLD 16     /* pages each thread holds at once */

struct targ {
	struct zm_pages *p;
	pthread_barrier_t *bar;
};

static void *thread_main(void *arg)
{
	struct targ *a = arg;
	zm_pfn_t held[THREAD_HOLD];

	pthread_barrier_wait(a->bar);
	for (size_t i = 0; i < THREAD_OPS / THREAD_HOLD; i++) {
		for (int j = 0; j < THREAD_HOLD; j++)
			if (zm_pages_alloc(a->p, &held[j]))
				held[j] = UINT32_MAX;
		for (int j = 0; j < THREAD_HOLD; j++)
			if (held[j] != UINT32_MAX)
				zm_pages_free(a->p, held[j]);
	}
	zm_pages_flush_thread(a->p);
	return NULL;
}

static double threads_ops(struct zm_pages *p, int n)
{
	pthread_t tid[64];
	struct targ a[64];
	pthread_barrier_t bar;
	double runs[3];

	for (int r = 0; r < 3; r++) {
		uint64_t t0;

		pthread_barrier_init(&bar, NULL, (unsigned)n + 1);
		for (int i = 0; i < n; i++) {
			a[i] = (struct targ){ p, &bar };
			pthread_create(&tid[i], NULL, thread_main, &a[i]);
		}
		pthread_barrier_wait(&bar);
		t0 = cli_now_ns();
		for (int i = 0; i < n; i++)
			pthread_join(tid[i], NULL);
		runs[r] = (double)THREAD_OPS * n * 1e9 / (double)(cli_now_ns() - t0);
		pthread_barrier_destroy(&bar);
	}
	return cli_median(runs, 3);
}

/* ---- driver --------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zmem pagebench [--json] [--max-size SIZE] [--page-size N] [--threads N]\n"
		"  --max-size SIZE   largest total size of the table (default 1G)\n"
		"  --page-size N     page size, 4096..65536 (default 4096)\n"
		"  --threads N       largest thread count (default: CPUs, at least 2)\n"
		"  --json            one JSON document on stdout instead of tables\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "json", no_argument, 0, 'j' },
		{ "max-size", required_argument, 0, 'm' },
		{ "page-size", required_argument, 0, 'p' },
		{ "threads", required_argument, 0, 't' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;

	o->max_size = (size_t)1 << 30;
	o->page_size = 4096;
	o->threads = cli_ncpus() < 2 ? 2 : cli_ncpus();
	o->json = 0;
	while ((c = getopt_long(argc, argv, "jm:p:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o->json = 1; break;
		case 'm': o->max_size = cli_parse_size(optarg); break;
		case 'p': o->page_size = cli_parse_size(optarg); break;
		case 't': o->threads = atoi(optarg); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (o->max_size < (128u << 10) || o->threads < 1 || o->threads > 64) {
		fprintf(stderr, "pagebench: bad --max-size or --threads\n");
		return -1;
	}
	return 0;
}

int cmd_pagebench(int argc, char **argv)
{
	struct zm_pages_config cfg = { 0 };
	struct zm_pages *p;
	struct opts o;
	size_t sizes[MAX_SIZES], nsizes = 0;
	static double t[MAX_SIZES][NBATCH], peer_t[MAX_SIZES][NPEER];
	double pair, peer_pair[NPEER], ops[65];
	zm_pfn_t *pfns;
	void **v;
	int rc;

	if (parse(argc, argv, &o))
		return 2;
	for (size_t s = 128u << 10; s <= o.max_size && nsizes < MAX_SIZES; s <<= 1)
		sizes[nsizes++] = s;
	cfg.page_size = o.page_size;
	cfg.arena_bytes = sizes[nsizes - 1] * 2 > ((size_t)4 << 30) ?
			  sizes[nsizes - 1] * 2 : (size_t)4 << 30;
	rc = zm_pages_create(&cfg, &p);
	if (rc) {
		fprintf(stderr, "pagebench: zm_pages_create: %s\n", strerror(-rc));
		return 1;
	}
	pfns = malloc(sizes[nsizes - 1] / o.page_size * sizeof(*pfns));
	v = malloc(sizes[nsizes - 1] / o.page_size * sizeof(*v));
	if (!pfns || !v) {
		fprintf(stderr, "pagebench: out of memory\n");
		return 1;
	}

	for (size_t i = 0; i < nsizes; i++) {
		size_t n = sizes[i] / o.page_size;

		for (size_t b = 0; b < NBATCH; b++)
			t[i][b] = cell(p, n, batches[b], sizes[i], pfns);
		for (int k = 0; k < NPEER; k++)
			peer_t[i][k] = peer_fill_ns((enum peer)k, n, o.page_size, v) * (double)n;
		if (!o.json)
			fprintf(stderr, "\rpagebench: %zu/%zu sizes", i + 1, nsizes);
	}
	if (!o.json)
		fprintf(stderr, "\n");
	pair = zmi_pair_ns(p);
	for (int k = 0; k < NPEER; k++)
		peer_pair[k] = peer_pair_ns((enum peer)k, o.page_size);
	for (int n = 1; n <= o.threads; n++)
		ops[n] = threads_ops(p, n);

	if (o.json) {
		size_t L = nsizes - 1;

		printf("{\"page_size\": %zu, \"size_bytes\": %zu, \"ns_per_page\": {",
		       o.page_size, sizes[L]);
		for (size_t b = 0; b < NBATCH; b++)
			printf("%s\"%zu\": %.2f", b ? ", " : "", batches[b],
			       t[L][b] / (double)(sizes[L] / o.page_size));
		printf("},\n \"fastpath_ns\": %.2f,\n \"threads\": [", pair);
		for (int n = 1; n <= o.threads; n++)
			printf("%s{\"threads\": %d, \"ops_per_s\": %.0f, \"scaling\": %.3f}",
			       n > 1 ? ", " : "", n, ops[n], ops[n] / ops[1]);
		printf("],\n \"table\": [");
		for (size_t i = 0; i < nsizes; i++) {
			printf("%s\n  {\"bytes\": %zu, \"ms\": {", i ? "," : "", sizes[i]);
			for (size_t b = 0; b < NBATCH; b++)
				printf("%s\"%zu\": %.4f", b ? ", " : "", batches[b], t[i][b] / 1e6);
			printf("}, \"peers_ms\": {");
			for (int k = 0; k < NPEER; k++)
				printf("%s\"%s\": %.4f", k ? ", " : "", peer_names[k],
				       peer_t[i][k] / 1e6);
			printf("}}");
		}
		printf("],\n \"peers\": [");
		for (int k = 0; k < NPEER; k++)
			printf("%s{\"name\": \"%s\", \"ns_per_page\": %.2f, \"pair_ns\": %.2f}",
			       k ? ", " : "", peer_names[k],
			       peer_t[L][k] / (double)(sizes[L] / o.page_size), peer_pair[k]);
		printf("]}\n");
	} else {
		printf("zmem pagebench: page size %zu, median of %d runs\n\n", o.page_size, OUTER);
		printf("Time to allocate the whole size (ms), by batch size; in brackets\n"
		       "the improvement over the single-page loop (batch 1), as in the seed.\n\n");
		printf("%8s", "size");
		for (size_t b = 0; b < NBATCH; b++)
			printf(" %15zu", batches[b]);
		printf("\n");
		for (size_t i = 0; i < nsizes; i++) {
			char sz[32];

			if (sizes[i] >= (1u << 30))
				snprintf(sz, sizeof(sz), "%zuG", sizes[i] >> 30);
			else if (sizes[i] >= (1u << 20))
				snprintf(sz, sizeof(sz), "%zuM", sizes[i] >> 20);
			else
				snprintf(sz, sizeof(sz), "%zuK", sizes[i] >> 10);
			printf("%8s %15.4f", sz, t[i][0] / 1e6);
			for (size_t b = 1; b < NBATCH; b++)
				printf(" %8.4f(%+3.0f%%)", t[i][b] / 1e6,
				       100.0 * (t[i][0] - t[i][b]) / t[i][0]);
			printf("\n");
		}
		printf("\nns per page at %zu MiB: single %.1f, bulk16 %.1f, bulk32 %.1f "
		       "(bulk16/single = %.2f)\n", sizes[nsizes - 1] >> 20,
		       t[nsizes - 1][0] / (double)(sizes[nsizes - 1] / o.page_size),
		       t[nsizes - 1][4] / (double)(sizes[nsizes - 1] / o.page_size),
		       t[nsizes - 1][5] / (double)(sizes[nsizes - 1] / o.page_size),
		       t[nsizes - 1][4] / t[nsizes - 1][0]);
		printf("\nPeers, one page at a time (ns per page to fill the size / "
		       "ns per alloc+free pair):\n");
		printf("%8s %16s %16s %16s %16s\n", "size", "zm_pages", peer_names[0],
		       peer_names[1], peer_names[2]);
		for (size_t i = 0; i < nsizes; i++) {
			double n = (double)(sizes[i] / o.page_size);

			printf("%7zuK %16.1f %16.1f %16.1f %16.1f\n", sizes[i] >> 10,
			       t[i][0] / n, peer_t[i][0] / n, peer_t[i][1] / n,
			       peer_t[i][2] / n);
		}
		printf("%8s %16.1f %16.1f %16.1f %16.1f\n", "pair", pair, peer_pair[0],
		       peer_pair[1], peer_pair[2]);
		printf("\nThreads allocating and freeing at once (%d pages held each):\n",
		       THREAD_HOLD);
		printf("%8s %14s %8s\n", "threads", "ops/s", "scaling");
		for (int n = 1; n <= o.threads; n++)
			printf("%8d %14.0f %7.2fx\n", n, ops[n], ops[n] / ops[1]);
	}
	free(pfns);
	free(v);
	zm_pages_destroy(p);
	return 0;
}
