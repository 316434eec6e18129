/*
 * zmem mapbench: zsmapbench (2012, background §3).  Map + unmap of one
 * zsmalloc object in a loop, for an object that straddles two pages (1632
 * bytes, a two-page class) and one inside a page, per method (copy through
 * the per-thread buffer; contig: in place when the pages are adjacent) and
 * per mode (ro, wo, rw), with 1..N threads each on its own object.
 * Reports ns and TSC cycles per map+unmap pair, the median of 5 runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/pages.h>
#include <zmem/pool.h>
#include "bench/benchmarks.h"
#include "tool/json.h"
#include "tool/opt.h"

#define OBJ_SIZE 1632
#define ITERS 2000000
#define RUNS 5
#define MAXT 16

static inline uint64_t cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return 0;
#endif
}

struct job {
	struct zm_pool *pool;
	zm_handle_t h;
	enum zm_map_mode mode;
	pthread_barrier_t *bar;
	double ns, cyc;
};

static void *loop(void *arg)
{
	struct job *j = arg;
	uint64_t t0, c0;

	pthread_barrier_wait(j->bar);
	t0 = cli_now_ns();
	c0 = cycles();
	for (int i = 0; i < ITERS; i++) {
		volatile char *m = zm_pool_map(j->pool, j->h, j->mode);

		if (j->mode & ZM_MAP_WO)
			m[0] = (char)i;
		else
			(void)m[0];
		zm_pool_unmap(j->pool, j->h);
	}
	j->cyc = (double)(cycles() - c0) / ITERS;
	j->ns = (double)(cli_now_ns() - t0) / ITERS;
	return NULL;
}

/* Objects for nthreads threads: spanning or not, as asked.  An object
 * spans when its bytes cross a page boundary of its zspage; we find one by
 * its address (in-place maps) or by the copy buffer (outside the arena). */
static int find_objects(struct zm_pool *pool, struct zm_pages *pg, int span,
			int n, zm_handle_t *out)
{
	size_t P = zm_pages_page_size(pg);
	zm_handle_t other[64];
	int got = 0, nother = 0;

	for (int tries = 0; tries < 64 && got < n; tries++) {
		zm_handle_t h = zm_pool_alloc(pool, OBJ_SIZE);
		char *m;
		int spans;

		if (!h)
			return -ENOMEM;
		m = zm_pool_map(pool, h, ZM_MAP_RO);
		if (zm_pages_pfn(pg, m) == UINT32_MAX)
			spans = 1;  /* copied: it straddles */
		else
			spans = ((uintptr_t)m & (P - 1)) + OBJ_SIZE > P;
		zm_pool_unmap(pool, h);
		if (spans == span)
			out[got++] = h;
		else
			other[nother++] = h;
	}
	while (nother)
		zm_pool_free(pool, other[--nother]);
	return got == n ? 0 : -ENOENT;
}

int cmd_mapbench(int argc, char **argv)
{
	static const struct { const char *name; enum zm_span_method m; } methods[] = {
		{ "copy", ZM_SPAN_COPY }, { "contig", ZM_SPAN_CONTIG } };
	static const char *const modes[] = { "", "ro", "wo", "rw" };
	int json = 0, maxt = cli_ncpus() < MAXT ? cli_ncpus() : MAXT, rc, step = 0;
	const struct opt table[] = {
		O_INT("threads", 't', &maxt, "N", "run 1, 2, ... N threads at once",
		      "the CPUs, at most 16", 1, MAXT),
		O_FLAG("json", 'j', &json, "one JSON document on stdout instead of the table"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"mapbench", "[OPTIONS]",
		"Time zm_pool_map() + zm_pool_unmap() of zsmalloc objects: copy against in\n"
		"place (contig), per mode (ro, wo, rw), for objects in a page and spanning\n"
		"two, with 1..N threads mapping objects of the same pool.",
		table, NULL,
	};
	struct json doc;

	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (json) {
		json_begin(&doc, stdout, "mapbench");
		json_int(&doc, "object_size_bytes", OBJ_SIZE);
		json_int(&doc, "runs", RUNS);
		json_int(&doc, "pairs_per_run", ITERS);
		json_array(&doc, "results");
	} else
		printf("zmem mapbench: map+unmap of a %d-byte object, ns (TSC cycles) per pair,\n"
		       "median of %d runs of %d pairs, per thread\n\n"
		       "%-7s %-4s %-9s %8s %14s %14s\n", OBJ_SIZE, RUNS, ITERS,
		       "method", "mode", "object", "threads", "ns", "cycles");
	for (size_t mi = 0; mi < 2; mi++) {
		for (int span = 1; span >= 0; span--) {
			for (int mode = ZM_MAP_RO; mode <= ZM_MAP_RW; mode++) {
				for (int nt = 1; nt <= maxt; nt++) {
					struct zm_pages *pg;
					struct zm_pool *pool;
					struct zm_pool_config c = { .span = methods[mi].m };
					zm_handle_t h[MAXT];
					double ns[RUNS], cyc[RUNS];

					cli_progress("%d/%d: %s, %s, %s, %d thread(s)", ++step,
						     2 * 2 * 3 * maxt, methods[mi].name, modes[mode],
						     span ? "spanning" : "in-page", nt);
					if (zm_pages_create(NULL, &pg))
						return cli_fail("mapbench", "creating the pages: out of memory");
					c.pages = pg;
					if (zm_pool_create(&c, &pool))
						return cli_fail("mapbench", "creating the pool: out of memory");
					if (find_objects(pool, pg, span, nt, h)) {
						/* contig never straddles in place if
						 * pages are not adjacent: skip */
						zm_pool_destroy(pool);
						zm_pages_destroy(pg);
						continue;
					}
					for (int r = 0; r < RUNS; r++) {
						struct job j[MAXT];
						pthread_t t[MAXT];
						pthread_barrier_t bar;

						pthread_barrier_init(&bar, NULL, (unsigned)nt);
						for (int i = 0; i < nt; i++) {
							j[i] = (struct job){ pool, h[i],
								(enum zm_map_mode)mode, &bar, 0, 0 };
							pthread_create(&t[i], NULL, loop, &j[i]);
						}
						ns[r] = cyc[r] = 0;
						for (int i = 0; i < nt; i++) {
							pthread_join(t[i], NULL);
							ns[r] += j[i].ns / nt;
							cyc[r] += j[i].cyc / nt;
						}
						pthread_barrier_destroy(&bar);
					}
					cli_progress_done();
					if (json) {
						json_object(&doc, NULL);
						json_str(&doc, "method", methods[mi].name);
						json_str(&doc, "mode", modes[mode]);
						json_bool(&doc, "spanning", span);
						json_int(&doc, "threads", nt);
						json_fixed(&doc, "ns_per_pair", cli_median(ns, RUNS), 2);
						json_fixed(&doc, "cycles", cli_median(cyc, RUNS), 1);
						json_object_end(&doc);
					} else {
						printf("%-7s %-4s %-9s %8d %14.2f %14.1f\n",
						       methods[mi].name, modes[mode],
						       span ? "spanning" : "in-page", nt,
						       cli_median(ns, RUNS), cli_median(cyc, RUNS));
						fflush(stdout);
					}
					for (int i = 0; i < nt; i++)
						zm_pool_free(pool, h[i]);
					zm_pool_destroy(pool);
					zm_pages_destroy(pg);
				}
			}
		}
	}
	if (json) {
		json_array_end(&doc);
		json_end(&doc);
	}
	return 0;
}
