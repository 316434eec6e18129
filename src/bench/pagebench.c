/*
 * zmem pagebench: the page allocator against the 2013 bulk-allocation
 * proposal's table (background §2).
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <zmem/pages.h>
#include "bench/benchmarks.h"
#include "tool/json.h"
#include "tool/opt.h"

static const size_t batches[] = { 1, 2, 4, 8, 16, 32, 64, 128 };
#define NBATCH (sizeof(batches) / sizeof(batches[0]))
#define OUTER 5              /* runs per cell; the median is reported */
#define INNER_BYTES (64u << 20) /* small sizes repeat up to this much per run */
#define MAX_SIZES 24

struct opts {
	size_t max_size, page_size;
	int threads, json, quick;
};

/* --quick: every timed loop QUICK_DIV times shorter, for a run that only
 * shows the command works (its figures are rough); 1 otherwise. */
#define QUICK_DIV 100
static size_t loop_div = 1;

/* ---- 1. the 2013 bulk-allocation table ------------------------------ */

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
	size_t inner = bytes >= INNER_BYTES / loop_div ? 1 : INNER_BYTES / loop_div / bytes;

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
	size_t iters = (k == PEER_MMAP ? 200000 : 5000000) / loop_div;
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

static double pair_ns(struct zm_pages *p)
{
	const size_t iters = 10000000 / loop_div;
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
	for (size_t i = 0; i < THREAD_OPS / loop_div / THREAD_HOLD; i++) {
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
		runs[r] = (double)(THREAD_OPS / loop_div / THREAD_HOLD * THREAD_HOLD) * n * 1e9 /
			  (double)(cli_now_ns() - t0);
		pthread_barrier_destroy(&bar);
	}
	return cli_median(runs, 3);
}

/* ---- driver --------------------------------------------------------- */

static int parse(int argc, char **argv, struct opts *o)
{
	const struct opt table[] = {
		O_SIZE("max-size", 'm', &o->max_size, "SIZE",
		       "largest total size of the table (sizes\ndouble from 128K)", "1G",
		       128 << 10, (double)((uint64_t)64 << 30)),
		O_SIZE("page-size", 'p', &o->page_size, "SIZE", "the page size, a power of two",
		       "4096", 4096, 65536),
		O_INT("threads", 't', &o->threads, "N", "largest thread count",
		      "the CPUs, at least 2", 1, 64),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead of tables"),
		O_FLAG("quick", 0, &o->quick, "every timed loop 100 times shorter: a check\n"
		       "that it runs, with rough figures"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"pagebench", "[OPTIONS]",
		"Time the page allocator (background §2): whole sizes allocated in batches\n"
		"of 1..128 pages, the single-page fast path, threads at once, and the\n"
		"peers (malloc, posix_memalign, mmap).",
		table, NULL,
	};
	int rc;

	o->max_size = (size_t)1 << 30;
	o->page_size = 4096;
	o->threads = cli_ncpus() < 2 ? 2 : cli_ncpus();
	o->json = 0;
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	if (o->page_size & (o->page_size - 1))
		return cli_usage("pagebench", "--page-size must be a power of two, not %zu",
				 o->page_size);
	return 0;
}

/* a time in ns as the tables show it, in us */
static void print_us(double ns, int width)
{
	double us = ns / 1e3;

	printf(" %*.*f", width, us < 100 ? 2 : us < 10000 ? 1 : 0, us);
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

	rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	loop_div = o.quick ? QUICK_DIV : 1;
	for (size_t s = 128u << 10; s <= o.max_size && nsizes < MAX_SIZES; s <<= 1)
		sizes[nsizes++] = s;
	cfg.page_size = o.page_size;
	cfg.arena_bytes = sizes[nsizes - 1] * 2 > ((size_t)4 << 30) ?
			  sizes[nsizes - 1] * 2 : (size_t)4 << 30;
	rc = zm_pages_create(&cfg, &p);
	if (rc)
		return cli_fail("pagebench", "zm_pages_create: %s", strerror(-rc));
	pfns = malloc(sizes[nsizes - 1] / o.page_size * sizeof(*pfns));
	v = malloc(sizes[nsizes - 1] / o.page_size * sizeof(*v));
	if (!pfns || !v)
		return cli_fail("pagebench", "out of memory");

	for (size_t i = 0; i < nsizes; i++) {
		size_t n = sizes[i] / o.page_size;

		for (size_t b = 0; b < NBATCH; b++)
			t[i][b] = cell(p, n, batches[b], sizes[i], pfns);
		for (int k = 0; k < NPEER; k++)
			peer_t[i][k] = peer_fill_ns((enum peer)k, n, o.page_size, v) * (double)n;
		cli_progress("%zu/%zu sizes", i + 1, nsizes);
	}
	cli_progress("the fast path and the peers");
	pair = pair_ns(p);
	for (int k = 0; k < NPEER; k++)
		peer_pair[k] = peer_pair_ns((enum peer)k, o.page_size);
	for (int n = 1; n <= o.threads; n++) {
		cli_progress("%d/%d threads", n, o.threads);
		ops[n] = threads_ops(p, n);
	}
	cli_progress_done();

	if (o.json) {
		size_t L = nsizes - 1;
		struct json j;
		char key[16];

		json_begin(&j, stdout, "pagebench");
		json_uint(&j, "page_size_bytes", o.page_size);
		json_bool(&j, "quick", o.quick);
		json_uint(&j, "size_bytes", sizes[L]);
		json_object(&j, "ns_per_page");
		for (size_t b = 0; b < NBATCH; b++) {
			snprintf(key, sizeof(key), "%zu", batches[b]);
			json_fixed(&j, key, t[L][b] / (double)(sizes[L] / o.page_size), 2);
		}
		json_object_end(&j);
		json_fixed(&j, "fastpath_ns", pair, 2);
		json_array(&j, "threads");
		for (int n = 1; n <= o.threads; n++) {
			json_object(&j, NULL);
			json_int(&j, "threads", n);
			json_fixed(&j, "ops_per_s", ops[n], 0);
			json_fixed(&j, "scaling", ops[n] / ops[1], 3);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_array(&j, "results");
		for (size_t i = 0; i < nsizes; i++) {
			json_object(&j, NULL);
			json_uint(&j, "size_bytes", sizes[i]);
			json_object(&j, "batch_ms");
			for (size_t b = 0; b < NBATCH; b++) {
				snprintf(key, sizeof(key), "%zu", batches[b]);
				json_num(&j, key, t[i][b] / 1e6);
			}
			json_object_end(&j);
			json_object(&j, "peers_ms");
			for (int k = 0; k < NPEER; k++)
				json_num(&j, peer_names[k], peer_t[i][k] / 1e6);
			json_object_end(&j);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_array(&j, "peers");
		for (int k = 0; k < NPEER; k++) {
			json_object(&j, NULL);
			json_str(&j, "name", peer_names[k]);
			json_fixed(&j, "ns_per_page", peer_t[L][k] / (double)(sizes[L] / o.page_size),
				   2);
			json_fixed(&j, "pair_ns", peer_pair[k], 2);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_end(&j);
	} else {
		char sz[32], human[32];

		printf("zmem pagebench: page size %zu, median of %d runs%s\n\n", o.page_size, OUTER,
		       o.quick ? "\n(--quick: loops 100 times shorter, rough figures)" : "");
		printf("Time to allocate the whole size (us), by batch size (pages; 1: the\n"
		       "single-page loop, the others zm_pages_alloc_bulk):\n\n");
		/* 78 columns */
		printf("%6s", "size");
		for (size_t b = 0; b < NBATCH; b++)
			printf(" %8zu", batches[b]);
		printf("\n");
		for (size_t i = 0; i < nsizes; i++) {
			printf("%6s", cli_size_text(sizes[i], sz, sizeof(sz)));
			for (size_t b = 0; b < NBATCH; b++)
				print_us(t[i][b], 8);
			printf("\n");
		}
		printf("\nThe improvement over the single-page loop (%%), as in the 2013 "
		       "proposal:\n\n");
		printf("%6s", "size");
		for (size_t b = 1; b < NBATCH; b++)
			printf(" %6zu", batches[b]);
		printf("\n");
		for (size_t i = 0; i < nsizes; i++) {
			printf("%6s", cli_size_text(sizes[i], sz, sizeof(sz)));
			for (size_t b = 1; b < NBATCH; b++)
				printf(" %+5.0f%%", 100.0 * (t[i][0] - t[i][b]) / t[i][0]);
			printf("\n");
		}
		printf("\nns per page at %s: single %.1f, bulk16 %.1f, bulk32 %.1f\n"
		       "(bulk16/single = %.2f)\n",
		       zmi_human_bytes(sizes[nsizes - 1], human, sizeof(human)),
		       t[nsizes - 1][0] / (double)(sizes[nsizes - 1] / o.page_size),
		       t[nsizes - 1][4] / (double)(sizes[nsizes - 1] / o.page_size),
		       t[nsizes - 1][5] / (double)(sizes[nsizes - 1] / o.page_size),
		       t[nsizes - 1][4] / t[nsizes - 1][0]);
		printf("\nPeers, one page at a time (ns per page to fill the size;\n"
		       "pair: ns per alloc+free pair):\n");
		printf("%8s %16s %16s %16s %16s\n", "size", "zm_pages", peer_names[0],
		       peer_names[1], peer_names[2]);
		for (size_t i = 0; i < nsizes; i++) {
			double n = (double)(sizes[i] / o.page_size);

			printf("%8s %16.1f %16.1f %16.1f %16.1f\n",
			       cli_size_text(sizes[i], sz, sizeof(sz)),
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
