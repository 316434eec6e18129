/*
 * zmem allocbench: the reviewers' microbenchmark (background §1).  The same
 * sequence of allocations through every pool backend (zm_pool_backends(),
 * or those named with --allocator):
 *
 *   all-free   allocate N objects of one size, then free them all
 *   one-one    allocate one object and free it, 10 N times
 *   random     from one seed, a random mix of allocations and frees around
 *              a live set of N/4 .. N objects, then free what is left: at
 *              each size of the sweep, and once more with realistic
 *              compressed-page sizes ("mixed", size 0 in the JSON)
 *
 * swept over sizes, with 1..T threads each running its own copy of the
 * sequence on the shared pool.  N is --count (default 200000) or as many
 * objects as fit in --bytes per thread (default 48 MiB), whichever is
 * smaller; --count 1000000 gives the "million allocations" zcache's
 * reviewers asked for (background §1).
 * Reports ns per operation (an allocation or a free) per thread, the
 * median of --reps runs after one warm-up run, the throughput and its
 * scaling against one thread, and allocations that failed.  The threads
 * start together (spinning until all are there), and a timed run repeats
 * the sequence until it lasts --min-ms (the warm-up run tells how many
 * passes that takes), so that a run is long beside the scheduler's
 * latencies.  --apart gives each thread a pool of its own, over one
 * pages instance or over one each: the same work without sharing, the
 * machine's own ceiling for the scaling.  Pages are kept
 * resident between runs -- zm_pages with an unlimited reserve, glibc with
 * trimming and mmap of large blocks off -- so what is timed is the
 * allocators, not the kernel's page faults.
 *
 * --plot FILE.svg draws, with plot.c: ns per op against size, one line
 * per backend, a panel per pattern (one thread), and the random mix's
 * throughput against threads.
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
#include "base/cpu.h"
#include "bench/benchmarks.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "tool/plot.h"

#define MAX_RUNS 15
#define DEF_RUNS 3
#define MAXT 16
#define MAX_SIZES 32
#define MAX_BACKENDS 16
#define POOL_PAGE 4096                /* the pools' page (their default):
					 the largest object they take */
#define DEF_BYTES ((size_t)48 << 20)  /* per thread: well past the caches */
#define DEF_COUNT 200000
#define DEF_MIN_MS 40                 /* a timed run lasts this long at least:
					 a pass of a sequence took 1-3 ms, too
					 short beside the scheduler's waking of
					 a second thread (2-thread runs then
					 scaled 0.7-1.5x while each thread's
					 own ns per op matched one thread's) */
#define MAX_PASSES 10000
#define ONE_ONE_FACTOR 10             /* one-one does 10 N pairs: it keeps
					 a single object live, so runs are
					 short otherwise */

enum pattern { ALL_FREE, ONE_ONE, RANDOM, NPATTERN };
static const char *const apart_names[] = { "none", "pools", "all" };
static const char *const pattern_names[] = { "all-free", "one-one", "random" };

struct job {
	struct zm_pool *pool;
	enum pattern pat;
	size_t size, n;
	uint64_t seed;
	int *arrived, nt;          /* the spinning start (run()) */
	unsigned passes;           /* the sequence this many times in a run */
	zm_handle_t *h;
	uint64_t ops, ns, fails, t0, t1;
};

struct row {
	const char *backend;
	enum pattern pat;
	size_t size;              /* 0: the realistic mix */
	int threads;
	double ns, mops, scaling;
	uint64_t fails;
	unsigned passes;          /* the sequence's passes in a timed run */
};

struct opts {
	const char *only[MAX_BACKENDS];
	size_t nonly;
	size_t sizes[MAX_SIZES], nsizes;
	size_t count, bytes;
	int json, quick, maxt, reps;
	unsigned min_ms;
	enum { APART_NONE, APART_POOLS, APART_ALL } apart;
	const char *plot;
};

/* One pass of j's sequence; returns the operations done. */
static uint64_t one_pass(struct job *j, uint64_t *s)
{
	uint64_t ops = 0;
	size_t live = 0;

	switch (j->pat) {
	case ALL_FREE:
		for (size_t i = 0; i < j->n; i++)
			if (!(j->h[i] = zm_pool_alloc(j->pool, j->size)))
				j->fails++;
		for (size_t i = 0; i < j->n; i++)
			if (j->h[i])
				zm_pool_free(j->pool, j->h[i]);
		ops = 2 * j->n;
		break;
	case ONE_ONE:
		for (size_t i = 0; i < ONE_ONE_FACTOR * j->n; i++) {
			zm_handle_t h = zm_pool_alloc(j->pool, j->size);

			if (h)
				zm_pool_free(j->pool, h);
			else
				j->fails++;
		}
		ops = 2 * ONE_ONE_FACTOR * j->n;
		break;
	default:
		for (size_t i = 0; i < 2 * j->n; i++) {
			if (live < j->n / 4 || (live < j->n && zmi_rand(s) % 2)) {
				size_t sz = j->size ? j->size : bench_comp_size(s);

				if ((j->h[live] = zm_pool_alloc(j->pool, sz)))
					live++;
				else
					j->fails++;
			} else {
				size_t k = zmi_rand(s) % live;

				zm_pool_free(j->pool, j->h[k]);
				j->h[k] = j->h[--live];
			}
		}
		ops = 2 * j->n + live;
		while (live)
			zm_pool_free(j->pool, j->h[--live]);
		break;
	}
	return ops;
}

static void *run(void *arg)
{
	struct job *j = arg;
	uint64_t s = j->seed, t0, ops = 0;

	/* Start together: every thread spins until all have arrived, so that
	 * none is still being woken when the others start (waking a sleeping
	 * vCPU took longer than a short run lasted). */
	__atomic_add_fetch(j->arrived, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(j->arrived, __ATOMIC_ACQUIRE) < j->nt)
		zmi_cpu_relax();
	t0 = j->t0 = cli_now_ns();
	for (unsigned p = 0; p < j->passes; p++)
		ops += one_pass(j, &s);
	j->t1 = cli_now_ns();
	j->ns = j->t1 - t0;
	j->ops = ops;
	return NULL;
}

/* The pools and pages instances of a cell: one of each, shared by the
 * threads, or (--apart) a pool per thread, over one pages instance or
 * over one each. */
struct setup {
	struct zm_pages *pg[MAXT];
	struct zm_pool *pool[MAXT];
	int npg, npool;
};

static void setup_free(struct setup *su)
{
	for (int i = 0; i < su->npool; i++)
		zm_pool_destroy(su->pool[i]);
	for (int i = 0; i < su->npg; i++)
		zm_pages_destroy(su->pg[i]);
	su->npool = su->npg = 0;
}

static int setup_make(const struct opts *o, const struct row *r, struct setup *su)
{
	struct zm_pages_config pc = { .reserve_pages = SIZE_MAX };
	int nt = r->threads, rc = 0;

	su->npg = su->npool = 0;
	for (int i = 0; i < (o->apart == APART_ALL ? nt : 1) && !rc; i++)
		if ((rc = zm_pages_create(&pc, &su->pg[i])) == 0)
			su->npg++;
	for (int i = 0; i < (o->apart != APART_NONE ? nt : 1) && !rc; i++) {
		struct zm_pool_config c = { .allocator = r->backend,
					    .pages = su->pg[i < su->npg ? i : 0] };

		if ((rc = zm_pool_create(&c, &su->pool[i])) == 0)
			su->npool++;
	}
	if (rc) {
		cli_fail("allocbench", "%s: %s", r->backend, strerror(-rc));
		setup_free(su);
		return -1;
	}
	return 0;
}

/* Time one cell: ns per op per thread, median of the runs, into r (with
 * the total Mops/s and the failed allocations); 0, or -1 after a
 * message. */
static int measure(const struct opts *o, struct row *r)
{
	struct setup su;
	double per[MAX_RUNS], tput[MAX_RUNS];
	size_t n = o->bytes / (r->size ? r->size : 2048);
	struct job j[MAXT];
	pthread_t t[MAXT];
	int nt = r->threads;
	unsigned passes = 1;

	if (n > o->count)
		n = o->count;
	if (n < 4)
		n = 4;
	if (setup_make(o, r, &su))
		return -1;
	for (int i = 0; i < nt; i++) {
		j[i].h = malloc(n * sizeof(zm_handle_t));
		if (!j[i].h) {
			cli_fail("allocbench", "out of memory for the handles");
			while (i-- > 0)
				free(j[i].h);
			setup_free(&su);
			return -1;
		}
	}
	r->fails = 0;
	for (int run_i = 0; run_i <= o->reps; run_i++) {  /* run 0 warms up */
		int arrived = 0;
		uint64_t t0 = UINT64_MAX, t1 = 0, wall, ops = 0;
		double sum = 0;

		for (int i = 0; i < nt; i++) {
			zm_handle_t *h = j[i].h;

			j[i] = (struct job){ .pool = su.pool[i < su.npool ? i : 0],
					     .pat = r->pat, .size = r->size,
					     .n = n, .seed = 12345 + (uint64_t)i * 77,
					     .arrived = &arrived, .nt = nt,
					     .passes = passes, .h = h };
			pthread_create(&t[i], NULL, run, &j[i]);
		}
		/* wall time from the first thread's start to the last one's end */
		for (int i = 0; i < nt; i++) {
			pthread_join(t[i], NULL);
			sum += (double)j[i].ns / (double)j[i].ops;
			ops += j[i].ops;
			r->fails += j[i].fails;
			t0 = j[i].t0 < t0 ? j[i].t0 : t0;
			t1 = j[i].t1 > t1 ? j[i].t1 : t1;
		}
		wall = t1 - t0;
		if (run_i == 0) {
			/* the timed runs repeat the sequence to last min_ms */
			uint64_t want = (uint64_t)o->min_ms * 1000000;
			uint64_t one = wall / passes + 1;

			passes = want > one ? (unsigned)((want + one - 1) / one) : 1;
			if (passes > MAX_PASSES)
				passes = MAX_PASSES;
		}
		if (run_i > 0) {
			per[run_i - 1] = sum / nt;
			tput[run_i - 1] = (double)ops * 1e3 / (double)wall;
		}
	}
	for (int i = 0; i < nt; i++)
		free(j[i].h);
	setup_free(&su);
	r->passes = passes;
	r->mops = cli_median(tput, (size_t)o->reps);
	r->ns = cli_median(per, (size_t)o->reps);
	return 0;
}

static void print_row(const struct opts *o, struct json *j, const struct row *r)
{
	if (o->json) {
		json_object(j, NULL);
		json_str(j, "allocator", r->backend);
		json_str(j, "pattern", pattern_names[r->pat]);
		json_uint(j, "size_bytes", r->size);
		json_int(j, "threads", r->threads);
		json_fixed(j, "ns_per_op", r->ns, 2);
		json_fixed(j, "mops", r->mops, 3);
		json_fixed(j, "scaling", r->scaling, 3);
		json_uint(j, "failed_allocs", r->fails);
		json_uint(j, "passes", r->passes);
		json_object_end(j);
	} else {
		char sz[24] = "mixed";

		if (r->size)
			snprintf(sz, sizeof(sz), "%zu", r->size);
		printf("%-10s %-9s %6s %7d %10.1f %10.2f %7.2fx %8llu\n", r->backend,
		       pattern_names[r->pat], sz, r->threads, r->ns, r->mops, r->scaling,
		       (unsigned long long)r->fails);
	}
	fflush(stdout);
}

/* ---- the plot ------------------------------------------------------- */

static const struct row *find(const struct row *rows, size_t n, const char *b,
			      enum pattern pat, size_t size, int threads)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].backend, b) && rows[i].pat == pat && rows[i].size == size &&
		    rows[i].threads == threads)
			return &rows[i];
	return NULL;
}

static int plot(const struct opts *o, const struct row *rows, size_t nrows,
		const char *const *names, size_t nb)
{
	enum { PANEL = 250, GAP = 70 };
	static char xl[MAX_SIZES + 2][24];
	const char *xlab[MAX_SIZES + 2];
	double *y = calloc(nb * (MAX_SIZES + 2), sizeof(double));
	struct plot_series s[MAX_BACKENDS];
	char title[160];
	FILE *f;
	int h = 70 + (NPATTERN + 1) * (PANEL + GAP) + 30; /* + the last x title */

	if (!y)
		return -ENOMEM;
	snprintf(title, sizeof(title), "zmem allocbench: the same sequences through every "
		 "backend (median of %d run%s)", o->reps, o->reps > 1 ? "s" : "");
	f = plot_begin(o->plot, h, title);
	if (!f) {
		free(y);
		return -errno;
	}
	plot_legend(f, 50, names, nb);
	for (int pat = 0; pat < NPATTERN; pat++) {
		/* random: a gap, then the realistic mix, not joined to the sizes */
		size_t nx = o->nsizes + 2 * (pat == RANDOM);

		for (size_t k = 0; k < nx; k++) {
			size_t size = k < o->nsizes ? o->sizes[k] : 0;

			if (size)
				snprintf(xl[k], sizeof(xl[k]), "%zu", size);
			else
				snprintf(xl[k], sizeof(xl[k]), "%s", k == nx - 1 ? "mixed" : "");
			xlab[k] = xl[k];
			for (size_t b = 0; b < nb; b++) {
				const struct row *r = k == o->nsizes ? NULL :
					find(rows, nrows, names[b], (enum pattern)pat, size, 1);

				y[b * (MAX_SIZES + 2) + k] = r ? r->ns : -1;
			}
		}
		for (size_t b = 0; b < nb; b++)
			s[b] = (struct plot_series){ names[b], y + b * (MAX_SIZES + 2) };
		snprintf(title, sizeof(title), "%s: ns per operation against object size, "
			 "1 thread (lower is better)", pattern_names[pat]);
		plot_panel_axes(f, 70 + GAP / 2.0 + pat * (PANEL + GAP), PANEL,
				&(struct plot_axes){ .title = title,
						     .xtitle = "object size (bytes)",
						     .ytitle = "ns per operation", .logy = 1 },
				xlab, nx, s, nb);
	}
	for (int k = 0; k < o->maxt; k++) {
		snprintf(xl[k], sizeof(xl[k]), "%d", k + 1);
		xlab[k] = xl[k];
		for (size_t b = 0; b < nb; b++) {
			const struct row *r = find(rows, nrows, names[b], RANDOM, 0, k + 1);

			y[b * (MAX_SIZES + 2) + k] = r ? r->mops : -1;
		}
	}
	for (size_t b = 0; b < nb; b++)
		s[b] = (struct plot_series){ names[b], y + b * (MAX_SIZES + 2) };
	plot_panel_axes(f, 70 + GAP / 2.0 + NPATTERN * (PANEL + GAP), PANEL,
			&(struct plot_axes){ .title = "random, mixed sizes: total Mops/s against "
						      "threads (higher is better)",
					     .xtitle = "threads", .ytitle = "million operations/s" },
			xlab, (size_t)o->maxt, s, nb);
	free(y);
	return plot_end(f);
}

/* ---- options -------------------------------------------------------- */

/* --sizes: sizes of 1 byte to a page (the pools' page: what a pool
 * object may take at most), at most MAX_SIZES of them; 0, or CLI_USAGE
 * after the message */
static int parse_sizes(const char *arg, struct opts *o)
{
	char buf[256], *save = NULL;

	if (strlen(arg) >= sizeof(buf))
		return cli_usage("allocbench", "--sizes '%.40s...' is too long", arg);
	snprintf(buf, sizeof(buf), "%s", arg);
	o->nsizes = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (cli_size(t, &v) || v < 1 || v > POOL_PAGE)
			return cli_usage("allocbench", "invalid size '%s' in --sizes (1..%d)", t,
					 POOL_PAGE);
		if (o->nsizes == MAX_SIZES)
			return cli_usage("allocbench", "--sizes lists more than %d sizes", MAX_SIZES);
		o->sizes[o->nsizes++] = (size_t)v;
	}
	if (!o->nsizes)
		return cli_usage("allocbench", "--sizes '%s' lists no size", arg);
	return 0;
}

/* 0; -1 after --help; CLI_USAGE after the message */
static int parse(int argc, char **argv, struct opts *o)
{
	static const size_t def[] = { 32, 128, 512, 1024, 1632, 2048, 2100, 3072, 4000 };
	static const char *const aparts[] = { "pools", "all", NULL };
	const char *sizes = NULL, *apart = NULL;
	uint64_t count = DEF_COUNT;
	int min_ms = DEF_MIN_MS, latency = 0, rc;
	char cdef[16], rdef[16], mdef[16];
	const struct opt table[] = {
		O_LIST("allocator", 'a', o->only, "NAME", "only this backend (repeatable)", "all",
		       &o->nonly, MAX_BACKENDS),
		O_STR("sizes", 's', &sizes, "LIST",
		      "object sizes, comma-separated, each 1..4096\n(default 32,128,512,1024,1632,"
		      "2048,2100,\n3072,4000)", NULL),
		O_U64("count", 'n', &count, "N",
		      "objects per sequence (1000000: the 2011\nreview's million); "
		      "one-one does 10 N pairs",
		      cdef, 1, 0),
		O_SIZE("bytes", 'b', &o->bytes, "SIZE", "at most this many bytes of objects per thread",
		       "48M", 4096, 0),
		O_INT("threads", 't', &o->maxt, "N", "1..N threads on one pool",
		      "the CPUs, at least 2", 1, MAXT),
		O_INT("reps", 'r', &o->reps, "N", "timed runs after a warm-up; the median is shown",
		      rdef, 1, MAX_RUNS),
		O_DUR("min-ms", 0, &min_ms, "DURATION",
		      "a timed run repeats the sequence to last this\nlong at least (0: one pass; "
		      "bare: ms)", mdef, 1, 0, 600000),
		O_STR("apart", 0, &apart, "pools|all",
		      "each thread its own pool, over one pages\ninstance (pools) or over one each "
		      "(all):\nwhat sharing costs", NULL, .choices = aparts),
		O_FLAG("quick", 0, &o->quick, "only size 1024 and the mix"),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead of the table"),
		O_STR("plot", 'p', &o->plot, "FILE.svg",
		      "ns per op against size, a line per backend,\na panel per pattern; throughput "
		      "against\nthreads", NULL),
		O_FLAG("latency", 0, &latency,
		       "another benchmark: single-operation latency\nwhile the pool compacts, on vs "
		       "off\n(zmem allocbench --latency --help)"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"allocbench", "[OPTIONS]",
		"The same allocation sequences through every pool backend: ns per operation\n"
		"(alloc or free) per thread, 1..N threads starting together on one pool.",
		table,
		"The patterns: all-free (N objects of one size, then free them all), one-one\n"
		"(allocate one and free it, 10 N times), random (a random mix around a live\n"
		"set of N/4 .. N objects, at each size and with realistic compressed-page\n"
		"sizes: \"mixed\").  N is --count or as many objects as fit in --bytes,\n"
		"whichever is smaller.\n",
	};

	memset(o, 0, sizeof(*o));
	o->maxt = cli_ncpus() < 2 ? 2 : cli_ncpus() > MAXT ? MAXT : cli_ncpus();
	o->bytes = DEF_BYTES;
	o->reps = DEF_RUNS;
	snprintf(cdef, sizeof(cdef), "%d", DEF_COUNT);
	snprintf(rdef, sizeof(rdef), "%d", DEF_RUNS);
	snprintf(mdef, sizeof(mdef), "%d", DEF_MIN_MS);
	memcpy(o->sizes, def, sizeof(def));
	o->nsizes = sizeof(def) / sizeof(def[0]);
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	if (sizes && (rc = parse_sizes(sizes, o)))
		return rc;
	o->count = count > SIZE_MAX ? SIZE_MAX : (size_t)count;
	o->min_ms = (unsigned)min_ms;
	o->apart = !apart ? APART_NONE : !strcmp(apart, "pools") ? APART_POOLS : APART_ALL;
	if (o->quick) {
		o->sizes[0] = 1024;
		o->nsizes = 1;
	}
	return 0;
}

int cmd_allocbench(int argc, char **argv)
{
	const char *const *all = zm_pool_backends();
	const char *names[MAX_BACKENDS];
	struct row *rows;
	size_t nb = 0, nrows = 0, cap, cell = 0, ncells;
	struct opts o;
	struct json j;
	int status = 0, rc;

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--latency"))
			return allocbench_latency(argc, argv);
	rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	for (size_t i = 0; i < o.nonly; i++) {
		size_t k;

		for (k = 0; all[k] && strcmp(all[k], o.only[i]); k++)
			;
		if (!all[k])
			return cli_check_allocator("allocbench", "--allocator", o.only[i]);
	}
	for (size_t k = 0; all[k] && nb < MAX_BACKENDS; k++) {
		int want = !o.nonly;

		for (size_t i = 0; i < o.nonly; i++)
			want |= !strcmp(all[k], o.only[i]);
		if (want)
			names[nb++] = all[k];
	}
	if ((rc = cli_check_plot("allocbench", o.plot, o.json)))
		return rc;
	ncells = nb * (NPATTERN * o.nsizes + 1) * (size_t)o.maxt;
	cap = nb * NPATTERN * (o.nsizes + 1) * (size_t)o.maxt;
	rows = calloc(cap, sizeof(*rows));
	if (!rows)
		return cli_fail("allocbench", "out of memory");
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
	mallopt(M_MMAP_THRESHOLD, 1 << 30);
	if (o.json) {
		json_begin(&j, stdout, "allocbench");
		json_int(&j, "reps", o.reps);
		json_uint(&j, "count", o.count);
		json_uint(&j, "bytes_per_thread", o.bytes);
		json_int(&j, "max_threads", o.maxt);
		json_uint(&j, "min_ms", o.min_ms);
		json_str(&j, "apart", apart_names[o.apart]);
		json_array(&j, "results");
	} else {
		printf("zmem allocbench: ns per operation (alloc or free) per thread, median "
		       "of %d runs;\nMops/s is the total throughput, scaling against 1 thread;\n"
		       "failed = allocations refused%s\n\n%-10s %-9s %6s %7s %10s %10s %8s %8s\n",
		       o.reps, o.apart == APART_POOLS ? ";\neach thread its own pool, over one "
		       "pages instance" : o.apart == APART_ALL ? ";\neach thread its own pool "
		       "and pages instance" : "", "allocator", "pattern", "size", "threads", "ns/op", "Mops/s",
		       "scaling", "failed");
	}
	for (size_t b = 0; b < nb; b++)
		for (int pat = 0; pat < NPATTERN; pat++) {
			size_t nsz = o.nsizes + (pat == RANDOM);

			for (size_t si = 0; si < nsz; si++) {
				double base = 0;

				for (int nt = 1; nt <= o.maxt; nt++) {
					struct row *r = &rows[nrows];
					char sz[24] = "mixed";

					*r = (struct row){ .backend = names[b], .pat = (enum pattern)pat,
							   .size = si < o.nsizes ? o.sizes[si] : 0,
							   .threads = nt };
					if (r->size)
						snprintf(sz, sizeof(sz), "%zu", r->size);
					cli_progress("%zu/%zu: %s, %s, size %s, %d thread%s", ++cell,
						     ncells, r->backend, pattern_names[pat], sz, nt,
						     nt > 1 ? "s" : "");
					if (measure(&o, r)) {
						status = CLI_FAIL;
						continue;
					}
					cli_progress_done();
					if (nt == 1)
						base = r->mops;
					r->scaling = base > 0 ? r->mops / base : 0;
					print_row(&o, &j, r);
					nrows++;
				}
			}
		}
	cli_progress_done();
	if (o.json)
		json_array_end(&j);
	if (o.plot) {
		rc = plot(&o, rows, nrows, names, nb);
		if (rc) {
			cli_fail("allocbench", "writing %s: %s", o.plot, strerror(-rc));
			status = CLI_FAIL;
		} else if (o.json) {
			json_str(&j, "plot", o.plot);
			cli_notice("plot: %s", o.plot);
		} else {
			printf("\nplot: %s\n", o.plot);
		}
	}
	if (o.json)
		json_end(&j);
	free(rows);
	return status;
}
