/*
 * zmem bench: the main job.  The same pages through every allocator, side
 * by side, the way zcache's reviewers asked for (background §1).
 *
 * For each data set (bench_data.c) and each run (--reps, default 3):
 *
 *   1. the bare codec loop: compress every page into one buffer, packed end
 *      to end (as a perfect allocator would place them), then decompress
 *      every page back (an incompressible page is copied) -- the physical
 *      limit the store is measured against;
 *   2. for each allocator: a fresh store; put every page ("fill": the pool
 *      takes its memory from the system, page faults included); statistics;
 *      put every page again ("put": objects replaced, memory recycled, the
 *      steady state of a swap device); get every page; compare every byte
 *      with the original (not timed); then put into each page's slot the
 *      page after it, and (timed: "reput") the page two after it, and read
 *      those back and compare them (not timed).  Objects then change size,
 *      and a pool that writes a fitting object over the old one takes only
 *      some in place; the first, untimed round is the one where the pool
 *      grows to hold both layouts' holes, which the put pass never does
 *      when every object fits its old place.
 *
 * Codec and stores alternate within each run, so that a machine that
 * slows down or speeds up affects all of them alike; the speeds reported
 * are medians over the runs.  Pages are split into --threads contiguous
 * ranges, one thread each; with more than one thread, single-thread passes
 * run too, in the same runs, for the scaling figure.
 *
 * Output: a table (or one JSON document with --json), zram's mm_stat line
 * of every store (--wide), the store's cost over the bare codec, and an SVG
 * plot (bench_svg.c; by default beside the table only, --plot FILE with
 * --json).  Progress goes to stderr.  With --kernel, the kernel's
 * zram gets the same pages when that is safe (bench_kernel.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <zmem/codec.h>
#include <zmem/pool.h>
#include <zmem/store.h>
#include "bench/bench.h"
#include "bench/benchmarks.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"

#define DEF_SIZE ((size_t)64 << 20) /* per data set: the whole run stays
				       well under a minute on 2 cores */
#define DEF_REPS 3
#define MAX_THREADS 64
#define MAX_ALLOC 16
#define MB 1e6

static const char *const default_data[] = { "zero", "text:0.75", "memory" };

struct opts {
	const char *data[BENCH_MAX_DATA];
	size_t ndata;
	const char *alloc[MAX_ALLOC];
	size_t nalloc;
	const char *codec;
	const char *plot;
	size_t size, page_size, huge_size;
	int threads, reps, json, kernel, no_same, verbose, wide;
	int compare_2011, size_set, codec_set;
	double churn;            /* --churn FRACTION (0: no churn phase) */
	const char *unit_list;   /* --unit-pages LIST: the units mode */
	int threads_set;
	struct bench_units units;
};

/* the churn phase's results (churn.c), by allocator */
static struct churn_summary churn[8];
static int nchurn;

/* The churn row for a store row's allocator: the pool's own for zsmalloc
 * (automatic compaction on, the default) and the other pool backends, the
 * C library's for malloc (both named malloc). */
static const struct churn_summary *churn_for(const char *allocator)
{
	for (int i = 0; i < nchurn; i++)
		if (!strcmp(churn[i].name, allocator))
			return &churn[i];
	return NULL;
}

/* ---- passes over the pages, split over threads ---------------------- */

enum op { OP_PUT, OP_PUT_NEXT, OP_GET, OP_COMPRESS, OP_DECOMPRESS };

struct pass {
	enum op op;
	struct zm_store *store;
	struct zm_codec *codec;
	const uint8_t *in;
	uint8_t *out, *zbuf;   /* zbuf: compressed pages packed end to end,
				  each thread in its own part */
	uint32_t *zoff;        /* where page i's compressed data starts */
	int *zlen;             /* compressed length per page; 0 = raw */
	size_t ps;
	size_t npages, shift;  /* OP_PUT_NEXT: slot i gets page i + shift mod npages */
	int err;               /* first error, atomic */
};

/*
 * The workers live for the whole run, like the threads of a swap device or
 * a server: a pass started on fresh threads would measure cold per-thread
 * state (page caches, the pool's per-thread class shard) instead of the
 * store.  A pass with fewer threads than workers leaves the others idle.
 */
struct worker {
	struct crew *crew;
	int id;
	size_t first, n;       /* this pass's pages */
	uint64_t t0, t1;       /* the worker's own clock: with as many workers
				  as CPUs the main thread may not run until
				  they are done */
};

struct crew {
	int n;
	pthread_t tid[MAX_THREADS];
	struct worker w[MAX_THREADS];
	pthread_barrier_t start, done;
	struct pass *p;        /* set before start, read after it */
	bool quit;
};

static void note_err(struct pass *p, int rc)
{
	int zero = 0;

	__atomic_compare_exchange_n(&p->err, &zero, rc, false, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
}

static void work(struct worker *w, struct pass *p)
{
	size_t ps = p->ps;
	size_t off = w->first * ps; /* the worker's part of zbuf */

	w->t0 = cli_now_ns();
	for (size_t i = w->first; i < w->first + w->n; i++) {
		int rc = 0;

		switch (p->op) {
		case OP_PUT:
			rc = zm_store_put(p->store, i, p->in + i * ps);
			break;
		case OP_PUT_NEXT:
			rc = zm_store_put(p->store, i, p->in + (i + p->shift) % p->npages * ps);
			break;
		case OP_GET:
			rc = zm_store_get(p->store, i, p->out + i * ps);
			break;
		case OP_COMPRESS:
			/* packed like a perfect allocator would, 8-byte aligned;
			 * the part of a worker is as large as its pages */
			rc = zm_codec_compress(p->codec, p->in + i * ps, ps, p->zbuf + off,
					       (w->first + w->n) * ps - off < ps ?
					       (w->first + w->n) * ps - off : ps);
			p->zoff[i] = (uint32_t)(off / 8);
			p->zlen[i] = rc > 0 ? rc : 0;
			off += rc > 0 ? ((size_t)rc + 7) & ~(size_t)7 : 0;
			rc = rc == -ENOSPC ? 0 : rc < 0 ? rc : 0;
			break;
		case OP_DECOMPRESS:
			if (p->zlen[i])
				rc = zm_codec_decompress(p->codec, p->zbuf + (size_t)p->zoff[i] * 8,
							 (size_t)p->zlen[i], p->out + i * ps, ps);
			else
				memcpy(p->out + i * ps, p->in + i * ps, ps);
			break;
		}
		if (rc)
			note_err(p, rc);
	}
	w->t1 = cli_now_ns();
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct crew *c = w->crew;

	for (;;) {
		pthread_barrier_wait(&c->start);
		if (c->quit)
			return NULL;
		if (w->n)
			work(w, c->p);
		pthread_barrier_wait(&c->done);
	}
}

static void crew_start(struct crew *c, int n)
{
	c->n = n;
	c->quit = false;
	pthread_barrier_init(&c->start, NULL, (unsigned)n + 1);
	pthread_barrier_init(&c->done, NULL, (unsigned)n + 1);
	for (int t = 0; t < n; t++) {
		c->w[t] = (struct worker){ .crew = c, .id = t };
		if (pthread_create(&c->tid[t], NULL, worker_main, &c->w[t])) {
			fprintf(stderr, "zmem bench: cannot start threads\n");
			exit(1);
		}
	}
}

static void crew_stop(struct crew *c)
{
	c->quit = true;
	pthread_barrier_wait(&c->start);
	for (int t = 0; t < c->n; t++)
		pthread_join(c->tid[t], NULL);
	pthread_barrier_destroy(&c->start);
	pthread_barrier_destroy(&c->done);
}

static struct crew crew;

/* Run p over pages [0, npages) with the first nthreads workers; MB/s, or
 * -1 after an error (p->err). */
static double run_pass(struct pass *p, size_t npages, int nthreads)
{
	uint64_t t0 = UINT64_MAX, t1 = 0;

	p->err = 0;
	for (int t = 0; t < crew.n; t++) {
		struct worker *w = &crew.w[t];

		w->first = t < nthreads ? npages * (size_t)t / (size_t)nthreads : 0;
		w->n = t < nthreads ? npages * (size_t)(t + 1) / (size_t)nthreads - w->first : 0;
	}
	crew.p = p;
	pthread_barrier_wait(&crew.start);
	pthread_barrier_wait(&crew.done);
	for (int t = 0; t < nthreads; t++) {
		if (crew.w[t].t0 < t0)
			t0 = crew.w[t].t0;
		if (crew.w[t].t1 > t1)
			t1 = crew.w[t].t1;
	}
	if (p->err)
		return -1;
	return (double)(npages * p->ps) / ((double)(t1 - t0) / 1e9) / MB;
}

/* ---- one data set --------------------------------------------------- */

struct speeds {
	double fill[2][32], put[2][32], get[2][32]; /* [single/multi][rep] */
	double reput[2][32];       /* each slot given its neighbour's page */
	double fresh[2][32];       /* the codec into fresh memory */
};

/* Median over runs of a[r] / b[r]: a ratio of two passes of the same run,
 * which other load on the machine disturbs much less than either alone. */
static double med_ratio(const double *a, const double *b, int n)
{
	double v[32];

	for (int r = 0; r < n; r++)
		v[r] = a[r] / b[r];
	return cli_median(v, (size_t)n);
}

static double med(double *v, int n)
{
	double c[32];

	memcpy(c, v, sizeof(double) * (size_t)n);
	return cli_median(c, (size_t)n);
}

/* A store pass: create; fill (put every page into the empty store); put
 * every page again (overwriting: the steady state, pool memory recycled);
 * get every page; verify.  Statistics (after the fill) into row if row is
 * not NULL. */
static int store_pass(const struct opts *o, const char *alloc, const struct bench_data *d,
		      uint8_t *out, int nthreads, double *fill, double *put, double *get,
		      double *reput, struct bench_row *row, char **verbose)
{
	struct zm_store_config cfg = {
		.nr_pages = d->len / o->page_size, .page_size = o->page_size,
		.codec = o->codec, .allocator = alloc, .no_same_filled = o->no_same,
		.huge_size = o->huge_size,
	};
	struct pass p = { .in = d->buf, .out = out, .ps = o->page_size, .npages = cfg.nr_pages };
	struct zm_store_stats st;
	size_t sh;
	int rc = zm_store_create(&cfg, &p.store);

	if (rc) {
		fprintf(stderr, "zmem bench: creating a store (%s, %s): %s\n", alloc, o->codec,
			strerror(-rc));
		return -1;
	}
	p.op = OP_PUT;
	*fill = run_pass(&p, cfg.nr_pages, nthreads);
	if (*fill >= 0) {
		zm_store_stats(p.store, &st);
		if (row && verbose) {
			size_t len;
			FILE *f = open_memstream(verbose, &len);

			if (f) {
				fprintf(f, "\n== %s / %s\n", d->name, alloc);
				zm_store_print_stats(&st, f);
				zm_pool_print_classes(zm_store_pool(p.store), f);
				fclose(f);
			}
		}
		*put = run_pass(&p, cfg.nr_pages, nthreads);
	}
	if (*fill < 0 || *put < 0) {
		fprintf(stderr, "zmem bench: %s/%s: put failed: %s\n", d->name, alloc,
			strerror(-p.err));
		zm_store_destroy(p.store);
		return -1;
	}
	memset(out, 0x5a, d->len);
	p.op = OP_GET;
	*get = run_pass(&p, cfg.nr_pages, nthreads);
	if (*get < 0 || memcmp(out, d->buf, d->len)) {
		fprintf(stderr, "zmem bench: %s/%s: pages read back differ%s%s\n", d->name, alloc,
			*get < 0 ? ": " : "", *get < 0 ? strerror(-p.err) : "");
		zm_store_destroy(p.store);
		return -1;
	}
	p.op = OP_PUT_NEXT;
	p.shift = 1;
	*reput = run_pass(&p, cfg.nr_pages, nthreads);
	p.shift = 2 % cfg.nr_pages;
	if (*reput >= 0)
		*reput = run_pass(&p, cfg.nr_pages, nthreads);
	memset(out, 0x5a, d->len);
	p.op = OP_GET;
	sh = p.shift * o->page_size;
	if (*reput < 0 || run_pass(&p, cfg.nr_pages, nthreads) < 0 ||
	    memcmp(out, d->buf + sh, d->len - sh) || memcmp(out + d->len - sh, d->buf, sh)) {
		fprintf(stderr, "zmem bench: %s/%s: pages put over others read back differ%s%s\n",
			d->name, alloc, p.err ? ": " : "", p.err ? strerror(-p.err) : "");
		zm_store_destroy(p.store);
		return -1;
	}
	if (row) {
		snprintf(row->allocator, sizeof(row->allocator), "%s", alloc);
		snprintf(row->codec, sizeof(row->codec), "%s", zm_codec_name(zm_store_codec(p.store)));
		snprintf(row->data, sizeof(row->data), "%s", d->name);
		row->verified = true;
		row->pages = cfg.nr_pages;
		row->same_pages = st.same_pages;
		row->huge_pages = st.huge_pages;
		row->orig_bytes = st.orig_data_size;
		row->compr_bytes = st.compr_data_size;
		row->pool_bytes = st.mem_used_total;
		row->pool_pages = (st.mem_used_total + o->page_size - 1) / o->page_size;
		row->meta_bytes = st.pool_meta_bytes + st.store_meta_bytes;
		row->mm_stat[0] = st.orig_data_size;
		row->mm_stat[1] = st.compr_data_size;
		row->mm_stat[2] = st.mem_used_total;
		row->mm_stat[3] = st.mem_limit;
		row->mm_stat[4] = st.mem_used_max;
		row->mm_stat[5] = st.same_pages;
		row->mm_stat[6] = st.pages_compacted;
		row->mm_stat[7] = st.huge_pages;
		row->mm_stat[8] = st.huge_pages_since;
		memcpy(row->hist, st.hist, sizeof(row->hist));
	}
	zm_store_destroy(p.store);
	return 0;
}

static int codec_pass(const struct opts *o, struct zm_codec *codec, const struct bench_data *d,
		      uint8_t *out, uint8_t *zbuf, uint32_t *zoff, int *zlen, int nthreads,
		      double *put, double *fresh, double *get)
{
	struct pass p = { .codec = codec, .in = d->buf, .out = out, .zbuf = zbuf,
			  .zoff = zoff, .zlen = zlen, .ps = o->page_size };
	size_t n = d->len / o->page_size;
	void *fz;

	p.op = OP_COMPRESS;
	*put = run_pass(&p, n, nthreads);
	/* again into memory the process never touched, as a fill's pool is:
	 * the same work and its page faults (the kernel's to allocate and
	 * zero each page the output reaches), with no allocator at all */
	fz = mmap(NULL, d->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fz == MAP_FAILED) {
		fprintf(stderr, "zmem bench: %s: mapping %zu bytes: %s\n", d->name, d->len,
			strerror(errno));
		return -1;
	}
	p.zbuf = fz;
	*fresh = *put < 0 ? -1 : run_pass(&p, n, nthreads);
	munmap(fz, d->len);
	p.zbuf = zbuf;
	p.op = OP_DECOMPRESS;
	*get = *put < 0 ? -1 : run_pass(&p, n, nthreads);
	if (*put < 0 || *fresh < 0 || *get < 0 || memcmp(out, d->buf, d->len)) {
		fprintf(stderr, "zmem bench: %s: the bare codec loop failed (%s)\n", d->name,
			p.err ? strerror(-p.err) : "pages differ");
		return -1;
	}
	return 0;
}

static int bench_one(const struct opts *o, const struct bench_data *d,
		     struct bench_row *rows, char **verbose)
{
	size_t npages = d->len / o->page_size;
	uint8_t *out = malloc(d->len), *zbuf = malloc(d->len);
	int *zlen = calloc(npages, sizeof(int));
	uint32_t *zoff = calloc(npages, sizeof(uint32_t));
	struct speeds cs = { 0 }, *ss = calloc(o->nalloc, sizeof(*ss));
	struct zm_codec *codec = NULL;
	int multi = o->threads > 1, rc = -1;

	if (!out || !zbuf || !zlen || !zoff || !ss) {
		fprintf(stderr, "zmem bench: out of memory for %s\n", d->name);
		goto out;
	}
	if (zm_codec_create(o->codec, 0, &codec))
		goto out;
	/* touch the buffers now: first-touch page faults are no codec's cost */
	memset(out, 0, d->len);
	memset(zbuf, 0, d->len);
	for (int r = 0; r < o->reps; r++) {
		for (int m = 0; m <= multi; m++) {
			int nt = m ? o->threads : 1;

			cli_progress("%s: run %d/%d: codec, %d thread(s)", d->name, r + 1,
				       o->reps, nt);
			if (codec_pass(o, codec, d, out, zbuf, zoff, zlen, nt, &cs.put[m][r],
				       &cs.fresh[m][r], &cs.get[m][r]))
				goto out;
			for (size_t a = 0; a < o->nalloc; a++) {
				int last = r == o->reps - 1 && m == multi;

				cli_progress("%s: run %d/%d: %s, %d thread(s)", d->name, r + 1,
					       o->reps, o->alloc[a], nt);
				if (store_pass(o, o->alloc[a], d, out, nt, &ss[a].fill[m][r],
					       &ss[a].put[m][r], &ss[a].get[m][r],
					       &ss[a].reput[m][r], last ? &rows[a] : NULL,
					       last && verbose ? &verbose[a] : NULL))
					goto out;
			}
		}
	}
	for (size_t a = 0; a < o->nalloc; a++) {
		struct bench_row *row = &rows[a];

		row->fill_MBps = med(ss[a].fill[multi], o->reps);
		row->put_MBps = med(ss[a].put[multi], o->reps);
		row->get_MBps = med(ss[a].get[multi], o->reps);
		row->codec_put_MBps = med(cs.put[multi], o->reps);
		row->codec_get_MBps = med(cs.get[multi], o->reps);
		row->codec_fresh_MBps = med(cs.fresh[multi], o->reps);
		row->fill1_MBps = med(ss[a].fill[0], o->reps);
		row->put1_MBps = med(ss[a].put[0], o->reps);
		row->get1_MBps = med(ss[a].get[0], o->reps);
		row->codec_put1_MBps = med(cs.put[0], o->reps);
		row->codec_get1_MBps = med(cs.get[0], o->reps);
		row->reput_MBps = med(ss[a].reput[multi], o->reps);
		row->put_cost = med_ratio(cs.put[multi], ss[a].put[multi], o->reps) - 1;
		row->reput_cost = med_ratio(cs.put[multi], ss[a].reput[multi], o->reps) - 1;
		row->get_cost = med_ratio(cs.get[multi], ss[a].get[multi], o->reps) - 1;
		row->fill_cost = med_ratio(cs.put[multi], ss[a].fill[multi], o->reps) - 1;
		row->fresh_cost = med_ratio(cs.put[multi], cs.fresh[multi], o->reps) - 1;
		row->fill_vs_fresh = med_ratio(cs.fresh[multi], ss[a].fill[multi], o->reps) - 1;
		row->put_scale = med_ratio(ss[a].put[multi], ss[a].put[0], o->reps);
		row->get_scale = med_ratio(ss[a].get[multi], ss[a].get[0], o->reps);
		row->fill_scale = med_ratio(ss[a].fill[multi], ss[a].fill[0], o->reps);
		row->codec_put_scale = med_ratio(cs.put[multi], cs.put[0], o->reps);
		row->codec_get_scale = med_ratio(cs.get[multi], cs.get[0], o->reps);
	}
	rc = 0;
out:
	cli_progress_done();
	zm_codec_destroy(codec);
	free(out), free(zbuf), free(zlen), free(zoff), free(ss);
	return rc;
}

/* ---- output --------------------------------------------------------- */

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

static void print_ratio(FILE *f, int width, int prec, uint64_t a, uint64_t b)
{
	if (b)
		fprintf(f, " %*.*f", width, prec, ratio(a, b));
	else
		fprintf(f, " %*s", width, "-");
}

/* a row's allocator in the tables: the kernel's zram is "zram" there,
 * so that its name does not widen them past 80 columns ("zram(kernel)"
 * in JSON, as the row is named) */
static const char *table_name(const struct bench_row *r)
{
	return r->kernel ? "zram" : r->allocator;
}

/* the widest of the names in rows (data or allocator), at least min */
static int name_width(const struct bench_row *rows, size_t n, int data, int min)
{
	int w = min;

	for (size_t i = 0; i < n; i++) {
		int l = (int)strlen(data ? rows[i].data : table_name(&rows[i]));

		if (l > w)
			w = l;
	}
	return w;
}

static void print_table(const struct opts *o, const struct bench_row *rows, size_t n,
			const char *kernel_why)
{
	int dw = name_width(rows, n, 1, 4), aw = name_width(rows, n, 0, 9);
	char human[32];

	printf("zmem bench: codec %s, %zu-byte pages, %s per data set,\n%d thread%s, "
	       "median of %d run%s; same-filled pages %s\n\n", o->codec, o->page_size,
	       zmi_human_bytes(o->size, human, sizeof(human)), o->threads, o->threads > 1 ? "s" : "",
	       o->reps, o->reps > 1 ? "s" : "", o->no_same ? "stored like any other (--no-same)" : "kept in their slots");
	/* 80 columns for names of 9 characters; --wide: about 150 */
	printf("%-*s %-*s %7s", dw, "data", aw, "allocator", "pages");
	if (o->wide)
		printf(" %7s %6s %10s %8s", "same", "huge", "pool pages", "meta KiB");
	printf(" %9s %8s", "effective", "overhead");
	if (o->wide)
		printf(" %8s", "pool ovh");
	printf(" %9s %9s %9s", "fill MB/s", "put MB/s", "get MB/s");
	if (o->wide)
		printf(" %14s %14s", "codec put MB/s", "codec get MB/s");
	printf(" %3s\n", "ok");
	for (size_t i = 0; i < n; i++) {
		const struct bench_row *r = &rows[i];

		printf("%-*s %-*s %7llu", dw, r->data, aw, table_name(r),
		       (unsigned long long)r->pages);
		if (o->wide) {
			printf(" %7llu %6llu %10llu", (unsigned long long)r->same_pages,
			       (unsigned long long)r->huge_pages,
			       (unsigned long long)r->pool_pages);
			if (r->kernel)
				printf(" %8s", "?");
			else
				printf(" %8.0f", (double)r->meta_bytes / 1024);
		}
		printf(" %8.2f%%", 100 * ratio(r->pool_bytes + r->meta_bytes, r->orig_bytes));
		print_ratio(stdout, 8, 4, r->pool_bytes + r->meta_bytes, r->compr_bytes);
		if (o->wide)
			print_ratio(stdout, 8, 4, r->pool_bytes, r->compr_bytes);
		printf(" %9.0f %9.0f %9.0f", r->fill_MBps, r->put_MBps, r->get_MBps);
		if (o->wide) {
			if (r->kernel)
				printf(" %14s %14s", "-", "-");
			else
				printf(" %14.0f %14.0f", r->codec_put_MBps, r->codec_get_MBps);
		}
		printf(" %3s\n", r->verified ? "yes" : "NO");
	}
	printf("\neffective = (pool + meta) / original; overhead = (pool + meta) / compressed;\n"
	       "fill = puts into the empty store (its memory first touched); put = the same\n"
	       "puts again over the stored pages (memory recycled); MB = 10^6 bytes.\n");
	if (o->wide)
		printf("pool ovh = pool / compressed (zram: mem_used_total / compr_data_size);\n"
		       "codec put/get = the bare codec loop over the same pages in the same runs.\n");
	else
		printf("--wide adds same-filled and huge pages, pool pages, metadata, pool\n"
		       "overhead, the bare codec's speeds and zram's mm_stat of every store.\n");
	if (kernel_why && *kernel_why)
		printf("kernel zram: skipped: %s\n", kernel_why);
	for (size_t i = 0; i < n; i++)
		if (rows[i].kernel) {
			printf("zram = the kernel's zram (/dev/zram0), the same pages written to it.\n");
			break;
		}

	for (size_t i = 0; i < n && o->wide; i++) {
		struct zm_store_stats st = { 0 };

		if (i == 0)
			printf("\nmm_stat, as /sys/block/zram0/mm_stat (orig_data_size "
			       "compr_data_size mem_used_total\nmem_limit mem_used_max same_pages "
			       "pages_compacted huge_pages huge_pages_since):\n");
		st.orig_data_size = rows[i].mm_stat[0];
		st.compr_data_size = rows[i].mm_stat[1];
		st.mem_used_total = rows[i].mm_stat[2];
		st.mem_limit = rows[i].mm_stat[3];
		st.mem_used_max = rows[i].mm_stat[4];
		st.same_pages = rows[i].mm_stat[5];
		st.pages_compacted = rows[i].mm_stat[6];
		st.huge_pages = rows[i].mm_stat[7];
		st.huge_pages_since = rows[i].mm_stat[8];
		printf("  %-*s %-*s", dw, rows[i].data, aw, table_name(&rows[i]));
		zm_store_print_mm_stat(&st, stdout);
	}

	printf("\nThe store against the bare codec on the same pages (time per page, "
	       "+ = slower;\nmedian over the runs of each run's ratio):\n");
	printf("  %-*s %-*s %7s %7s %7s %7s %7s %7s\n", dw, "data", aw, "allocator", "put",
	       "reput", "get", "fill", "fresh", "store");
	for (size_t i = 0; i < n; i++) {
		const struct bench_row *r = &rows[i];

		if (r->kernel)
			continue;
		printf("  %-*s %-*s %+6.1f%% %+6.1f%% %+6.1f%% %+6.1f%% %+6.1f%% %+6.1f%%%s\n",
		       dw, r->data, aw, r->allocator, 100 * r->put_cost, 100 * r->reput_cost,
		       100 * r->get_cost, 100 * r->fill_cost, 100 * r->fresh_cost,
		       100 * r->fill_vs_fresh, r->same_pages ? " *" : "");
	}
	printf("  reput = each slot given the page two after it (objects of other sizes),\n"
	       "  after a round with the next page's;\n"
	       "  fresh = the bare codec writing into pages never touched (the page faults\n"
	       "  any first fill pays); store = the fill against that, in the same runs\n");
	for (size_t i = 0; i < n; i++)
		if (rows[i].same_pages && !rows[i].kernel) {
			printf("  * same-filled pages skip the codec\n");
			break;
		}
	if (o->threads > 1) {
		printf("\nThreads: %d against 1, on the same pages in the same runs "
		       "(MB/s, 1 thread -> %d;\nscaling: median over the runs of each run's "
		       "ratio):\n", o->threads, o->threads);
		printf("  %-*s %-*s %6s %6s %5s %6s %6s %5s %5s%s\n", dw, "data", aw, "allocator",
		       "put 1", "put N", "x", "get 1", "get N", "x", "fill",
		       o->wide ? "  codec put, get" : "");
		for (size_t i = 0; i < n; i++) {
			const struct bench_row *r = &rows[i];

			if (r->kernel)
				continue;
			printf("  %-*s %-*s %6.0f %6.0f %4.2fx %6.0f %6.0f %4.2fx %4.2fx", dw, r->data,
			       aw, r->allocator, r->put1_MBps, r->put_MBps, r->put_scale,
			       r->get1_MBps, r->get_MBps, r->get_scale, r->fill_scale);
			if (o->wide)
				printf("  %.2fx, %.2fx", r->codec_put_scale,
				       r->codec_get_scale);
			putchar('\n');
		}
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].data, "text:0.75")) {
			printf("\nxcfmalloc's 2011 table, text compressing to 75%%: "
			       "effective compression\n ");
			for (size_t j = 0; j < n; j++)
				if (!strcmp(rows[j].data, "text:0.75"))
					printf(" %s %.2f%%", rows[j].allocator,
					       100 * ratio(rows[j].pool_bytes + rows[j].meta_bytes,
							   rows[j].orig_bytes));
			printf("\n(reported in 2011 with lzo: xcfmalloc 78.11%%, xvmalloc 99.95%%)\n");
			break;
		}
}

static void json_ratio(struct json *j, const char *key, uint64_t a, uint64_t b)
{
	if (b)
		json_fixed(j, key, ratio(a, b), 6);
	else
		json_null(j, key);
}

static void print_json(const struct opts *o, const struct bench_row *rows, size_t n,
		       const char *kernel_why)
{
	struct json j;

	json_begin(&j, stdout, "bench");
	json_str(&j, "codec", o->codec);
	json_uint(&j, "page_size_bytes", o->page_size);
	json_uint(&j, "size_bytes", o->size);
	json_int(&j, "threads", o->threads);
	json_int(&j, "reps", o->reps);
	json_bool(&j, "same_filled", !o->no_same);
	json_array(&j, "results");
	for (size_t i = 0; i < n; i++) {
		const struct bench_row *r = &rows[i];
		const struct churn_summary *ch = churn_for(r->allocator);

		json_object(&j, NULL);
		json_str(&j, "allocator", r->allocator);
		json_str(&j, "codec", r->codec);
		json_str(&j, "data", r->data);
		json_bool(&j, "kernel", r->kernel);
		json_bool(&j, "verified", r->verified);
		json_uint(&j, "pages", r->pages);
		json_uint(&j, "same_pages", r->same_pages);
		json_uint(&j, "huge_pages", r->huge_pages);
		json_uint(&j, "orig_bytes", r->orig_bytes);
		json_uint(&j, "compr_bytes", r->compr_bytes);
		json_uint(&j, "pool_bytes", r->pool_bytes);
		json_uint(&j, "pool_pages", r->pool_pages);
		json_uint(&j, "meta_bytes", r->meta_bytes);
		json_ratio(&j, "overhead", r->pool_bytes + r->meta_bytes, r->compr_bytes);
		json_ratio(&j, "effective", r->pool_bytes + r->meta_bytes, r->orig_bytes);
		json_ratio(&j, "pool_overhead", r->pool_bytes, r->compr_bytes);
		json_fixed(&j, "fill_MBps", r->fill_MBps, 1);
		json_fixed(&j, "put_MBps", r->put_MBps, 1);
		json_fixed(&j, "get_MBps", r->get_MBps, 1);
		if (r->kernel) {
			json_null(&j, "codec_put_MBps");
			json_null(&j, "codec_get_MBps");
		} else {
			json_fixed(&j, "codec_put_MBps", r->codec_put_MBps, 1);
			json_fixed(&j, "codec_get_MBps", r->codec_get_MBps, 1);
			json_fixed(&j, "store_put_cost", r->put_cost, 4);
			json_fixed(&j, "reput_MBps", r->reput_MBps, 1);
			json_fixed(&j, "store_reput_cost", r->reput_cost, 4);
			json_fixed(&j, "store_get_cost", r->get_cost, 4);
			json_fixed(&j, "store_fill_cost", r->fill_cost, 4);
			json_fixed(&j, "codec_fresh_MBps", r->codec_fresh_MBps, 1);
			json_fixed(&j, "codec_fresh_cost", r->fresh_cost, 4);
			json_fixed(&j, "store_fill_cost_vs_fresh", r->fill_vs_fresh, 4);
		}
		if (o->threads > 1 && !r->kernel) {
			json_fixed(&j, "fill_MBps_1thread", r->fill1_MBps, 1);
			json_fixed(&j, "put_MBps_1thread", r->put1_MBps, 1);
			json_fixed(&j, "get_MBps_1thread", r->get1_MBps, 1);
			json_fixed(&j, "codec_put_MBps_1thread", r->codec_put1_MBps, 1);
			json_fixed(&j, "codec_get_MBps_1thread", r->codec_get1_MBps, 1);
			json_fixed(&j, "put_scaling", r->put_scale, 3);
			json_fixed(&j, "get_scaling", r->get_scale, 3);
			json_fixed(&j, "fill_scaling", r->fill_scale, 3);
		}
		if (ch && !r->kernel) {
			json_object(&j, "churn");
			json_fixed(&j, "fraction", ch->fraction, 3);
			json_fixed(&j, "overhead_after_free", ch->after_free, 4);
			json_fixed(&j, "overhead_100ms", ch->at_100ms, 4);
			json_fixed(&j, "overhead_1s", ch->at_1s, 4);
			json_object_end(&j);
		}
		json_array(&j, "mm_stat");
		for (int k = 0; k < 9; k++)
			json_uint(&j, NULL, r->mm_stat[k]);
		json_array_end(&j);
		json_array(&j, "hist");
		for (int k = 0; k < ZM_STORE_HIST_BUCKETS; k++)
			json_uint(&j, NULL, r->hist[k]);
		json_array_end(&j);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array(&j, "churn");
	for (int i = 0; i < nchurn; i++) {
		json_object(&j, NULL);
		json_str(&j, "allocator", churn[i].name);
		json_fixed(&j, "fraction", churn[i].fraction, 3);
		json_fixed(&j, "overhead_after_free", churn[i].after_free, 4);
		json_fixed(&j, "overhead_100ms", churn[i].at_100ms, 4);
		json_fixed(&j, "overhead_1s", churn[i].at_1s, 4);
		json_fixed(&j, "rss_overhead_1s", churn[i].rss_1s, 4);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_str(&j, "kernel_skipped", kernel_why && *kernel_why ? kernel_why : NULL);
	json_str(&j, "plot", o->plot);
	json_end(&j);
}

/* ---- options -------------------------------------------------------- */

static const char summary[] =
	"Store the same pages through every allocator, read them back and verify them;\n"
	"print density and speed side by side (and write a plot, see --plot).";

static const char more[] =
	"Data sets (--data): zero | text[:RATIO] | random[:RATIO] | file:PATH |\n"
	"capture:PID | memory (a process bench spawns and captures).\n"
	"Output: the table on stdout (--wide: every column), progress on stderr;\n"
	"the plot goes to zmem-bench.svg unless --no-plot, or --json is given\n"
	"without --plot.  Exit status 1 if any page read back differs.\n"
	"\n--compare-2011: instead, xcfmalloc's 2011 table (background §1): zero\n"
	"pages and text compressing to 75% (lzo, or lz4 in builds without it),\n"
	"--size of each (default 512M) put one page at a time into a store per\n"
	"allocator, same-filled elision off; pool pages / pages stored beside the\n"
	"figures reported with xcfmalloc.  That test ran in a 256 MB cgroup; that\n"
	"is not emulated (nothing is evicted), only the store is.  Honours\n"
	"--allocator, --codec, --size and --json.\n"
	"\n--unit-pages LIST (e.g. 1,4,16; each 1, 2, 4, 8 or 16, a unit at most\n"
	"256K): instead, for each data set and allocator (zsmalloc unless given),\n"
	"a store per unit size: puts through zm_store_put_range in aligned 64K\n"
	"chunks, then a random single-page read trace; memory, put speed, read\n"
	"p50/p99 and throughput, and their ratios to unit 1.  One thread, no plot.\n";

/* --unit-pages LIST into o->units: sizes 1..ZM_STORE_UNIT_MAX, powers of
 * two, a unit at most ZM_STORE_UNIT_MAX_BYTES; not with the options of the
 * other modes.  0 or a usage error. */
static int parse_units(struct opts *o, int plot_set)
{
	const char *p = o->unit_list;
	struct bench_units *u = &o->units;

	u->wide = o->wide;
	if (o->kernel || o->churn > 0 || o->compare_2011 || plot_set || o->threads_set)
		return cli_usage("bench", "--unit-pages runs alone: not with --kernel, --churn, "
				 "--compare-2011, --plot or --threads");
	while (*p) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || (*end && *end != ',') || !v || v > ZM_STORE_UNIT_MAX ||
		    (v & (v - 1)))
			return cli_usage("bench", "--unit-pages '%s': a list of 1, 2, 4, 8 or 16",
					 o->unit_list);
		if (v * o->page_size > ZM_STORE_UNIT_MAX_BYTES)
			return cli_usage("bench", "--unit-pages %lu of %zu-byte pages: a unit is at "
					 "most %zu KiB", v, o->page_size,
					 ZM_STORE_UNIT_MAX_BYTES >> 10);
		if (u->nunits == BENCH_MAX_UNITS)
			return cli_usage("bench", "--unit-pages lists at most %d sizes",
					 BENCH_MAX_UNITS);
		u->units[u->nunits++] = (unsigned)v;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return cli_usage("bench", "--unit-pages '%s': a list of 1, 2, 4, 8 or 16",
					 o->unit_list);
	}
	if (!u->nunits)
		return cli_usage("bench", "--unit-pages '%s' lists no size", o->unit_list);
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	int no_plot = 0, plot_set = 0, rc;
	const struct opt table[] = {
		O_LIST("data", 'd', o->data, "SPEC", "a data set (repeatable; see below)",
		       "zero, text:0.75, memory", &o->ndata, BENCH_MAX_DATA),
		O_LIST("allocator", 'a', o->alloc, "NAME", "a pool backend (repeatable)",
		       "all of them", &o->nalloc, MAX_ALLOC),
		O_STR("codec", 'c', &o->codec, "NAME", "lz4, zstd[:LEVEL], lzo, none", "lz4",
		      .seen = &o->codec_set),
		O_INT("threads", 't', &o->threads, "N",
		      "puts and gets split over N threads;\nN > 1 also runs 1 thread, for the scaling",
		      "1", 1, MAX_THREADS, .seen = &o->threads_set),
		O_SIZE("size", 's', &o->size, "SIZE", "bytes per data set", "64M", 4096,
		       (double)((uint64_t)1 << 40), .seen = &o->size_set),
		O_SIZE("page-size", 'p', &o->page_size, "SIZE", "a power of two", "4096", 4096,
		       65536),
		O_INT("reps", 'r', &o->reps, "N", "runs; speeds are their medians", "3", 1, 32),
		O_FLAG("no-same", 'S', &o->no_same,
		       "store same-filled pages through the codec and\npool too"),
		O_SIZE("huge-size", 'H', &o->huge_size, "SIZE",
		       "pages compressing to SIZE or more are stored\nraw; at most the page size",
		       "31/32 of a page", 0, 0),
		O_STR("plot", 'P', &o->plot, "FILE.svg", "write the plot there", "zmem-bench.svg",
		      .seen = &plot_set),
		O_FLAG("no-plot", 'N', &no_plot, "write no plot"),
		O_FLAG("kernel", 'k', &o->kernel,
		       "add the kernel's zram (/dev/zram0, only if\nunused; root)"),
		O_DOUBLE("churn", 'C', &o->churn, "FRACTION",
			 "then free that part of a fill of each\nallocator and show the overhead "
			 "right after,\nafter 100 ms and after 1 s (as zmem churn)", NULL, 0, 1,
			 .open = OPEN),
		O_STR("unit-pages", 'u', &o->unit_list, "LIST",
		      "instead: the store's multi-page units,\nthese sizes side by side "
		      "(1,4,16; below)", NULL),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead"),
		O_FLAG("wide", 'w', &o->wide, "every column of the table (about 150)"),
		O_FLAG("verbose", 'v', &o->verbose, "also each store's statistics and class table"),
		O_FLAG("compare-2011", 'T', &o->compare_2011,
		       "instead: xcfmalloc's 2011 table of "
		       "effective\ncompression, every allocator (below)"),
		/* its old spelling, for scripts that use it */
		O_FLAG("seed-table", 0, &o->compare_2011, "--compare-2011", .hidden = 1),
		O_END,
	};
	const struct opt_cmd cmd = { "bench", "[OPTIONS]", summary, table, more };

	memset(o, 0, sizeof(*o));
	o->codec = "lz4";
	o->size = DEF_SIZE;
	o->page_size = 4096;
	o->threads = 1;
	o->reps = DEF_REPS;
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	if (o->page_size & (o->page_size - 1))
		return cli_usage("bench", "--page-size must be a power of two, not %zu",
				 o->page_size);
	if (o->huge_size > o->page_size)
		return cli_usage("bench", "--huge-size must be at most the page size (%zu), not %zu",
				 o->page_size, o->huge_size);
	if (o->size < o->page_size)
		return cli_usage("bench", "--size must be at least one page (%zu), not %zu",
				 o->page_size, o->size);
	if (no_plot && plot_set)
		return cli_usage("bench", "--plot and --no-plot together");
	if (o->unit_list && (rc = parse_units(o, plot_set)))
		return rc;
	/* the plot is a file nobody asked for under --json */
	if (!no_plot && !o->unit_list && (plot_set || !o->json))
		o->plot = plot_set ? o->plot : "zmem-bench.svg";
	else
		o->plot = NULL;
	if (!o->ndata) {
		for (size_t i = 0; i < sizeof(default_data) / sizeof(default_data[0]); i++)
			o->data[o->ndata++] = default_data[i];
	}
	if (!o->nalloc && o->unit_list)
		o->alloc[o->nalloc++] = "zsmalloc";
	if (!o->nalloc) {
		const char *const *b = zm_pool_backends();

		for (size_t i = 0; b[i] && o->nalloc < MAX_ALLOC; i++)
			o->alloc[o->nalloc++] = b[i];
	}
	return 0;
}

static int check_names(const struct opts *o)
{
	struct zm_codec *c;
	int rc = zm_codec_create(o->codec, 0, &c);

	if (rc) {
		const char *const *l = zm_codec_list();

		fprintf(stderr, "zmem bench: codec '%s': %s (available:", o->codec,
			rc == -EOPNOTSUPP ? "not in this build" : "unknown name or level");
		for (size_t i = 0; l[i]; i++)
			fprintf(stderr, " %s", l[i]);
		fprintf(stderr, ")\n");
		return -1;
	}
	zm_codec_destroy(c);
	for (size_t a = 0; a < o->nalloc; a++) {
		const char *const *b = zm_pool_backends();
		size_t i;

		for (i = 0; b[i] && strcmp(b[i], o->alloc[a]); i++)
			;
		if (!b[i]) {
			cli_check_allocator("bench", "--allocator", o->alloc[a]);
			return -1;
		}
	}
	return 0;
}

/* zmem bench --unit-pages: each data set through bench_units_one; the
 * exit status. */
static int bench_units_main(struct opts *o)
{
	static struct bench_unit_row rows[BENCH_MAX_ROWS];
	struct bench_units *u = &o->units;
	size_t nrows = 0, per = o->nalloc * u->nunits;
	int status = 1;

	u->codec = o->codec;
	u->size = o->size;
	u->page_size = o->page_size;
	u->huge_size = o->huge_size;
	u->reps = o->reps;
	u->no_same = o->no_same;
	u->alloc = o->alloc;
	u->nalloc = o->nalloc;
	if (o->ndata * per > BENCH_MAX_ROWS) {
		fprintf(stderr, "zmem bench: too many data sets x allocators x unit sizes\n");
		return CLI_USAGE;
	}
	for (size_t i = 0; i < o->ndata; i++) {
		struct bench_data d;
		uint64_t t0 = cli_now_ns();
		char hb[32];

		cli_progress("%s: preparing %s", o->data[i],
			     zmi_human_bytes(o->size, hb, sizeof(hb)));
		if (bench_data_make(o->data[i], o->size, o->page_size, o->codec, &d)) {
			cli_progress_done();
			bench_data_free(&d);
			if (!strcmp(o->data[i], "memory")) {
				fprintf(stderr, "zmem bench: skipping the data set 'memory'\n");
				continue;
			}
			return 1;
		}
		cli_progress_done();
		cli_note("%s: %zu pages, %s", d.name, d.len / o->page_size, d.note);
		if (bench_units_one(u, &d, rows + nrows)) {
			bench_data_free(&d);
			return 1;
		}
		nrows += per;
		cli_note("%s: done in %.1f s", d.name, (double)(cli_now_ns() - t0) / 1e9);
		bench_data_free(&d);
	}
	bench_units_print(u, rows, nrows, o->json);
	status = 0;
	for (size_t i = 0; i < nrows; i++)
		if (!rows[i].verified)
			status = 1;
	return status;
}

int cmd_bench(int argc, char **argv)
{
	static struct bench_row rows[BENCH_MAX_ROWS];
	char *verbose[BENCH_MAX_ROWS] = { 0 };
	char kernel_why[256] = "";
	size_t nrows = 0;
	struct opts o;
	int status = 1;

	if (argc == 3 && !strcmp(argv[1], "--memory-child")) {
		uint64_t bytes = 0;

		return bench_memory_child(cli_size(argv[2], &bytes) || bytes > SIZE_MAX ?
					  0 : (size_t)bytes);
	}
	switch (parse(argc, argv, &o)) {
	case 0: break;
	case -1: return 0;  /* --help */
	default: return CLI_USAGE;
	}
	if (check_names(&o))
		return CLI_USAGE;
	for (size_t i = 0; i < o.ndata; i++)
		if (bench_data_check(o.data[i]))
			return CLI_USAGE;
	/* what cannot end well fails now, not after the run (check.h) */
	for (size_t i = 0; i < o.ndata; i++)
		if (cli_check_data("bench", o.data[i]))
			return CLI_FAIL;
	if (cli_check_memory("bench", "--size", o.size, 1))
		return CLI_FAIL;
	if ((status = cli_check_plot("bench", o.plot, o.json)))
		return status;
	status = 1;
	if (o.unit_list)
		return bench_units_main(&o);
	if (o.compare_2011)
		return bench_2011_table(o.size_set ? o.size : BENCH_2011_SIZE,
					o.codec_set ? o.codec : NULL, o.alloc, o.nalloc, o.json,
					o.wide);
	if (o.ndata * (o.nalloc + (size_t)o.kernel) > BENCH_MAX_ROWS) {
		fprintf(stderr, "zmem bench: too many data sets x allocators\n");
		return 2;
	}
	if (o.kernel && geteuid() != 0)
		snprintf(kernel_why, sizeof(kernel_why), "not root");
	crew_start(&crew, o.threads);
	for (size_t i = 0; i < o.ndata; i++) {
		struct bench_data d;
		uint64_t t0 = cli_now_ns();
		char hb[32];

		cli_progress("%s: preparing %s", o.data[i], zmi_human_bytes(o.size, hb, sizeof(hb)));
		if (bench_data_make(o.data[i], o.size, o.page_size, o.codec, &d)) {
			cli_progress_done();
			bench_data_free(&d);
			if (!strcmp(o.data[i], "memory")) {
				/* the built-in realistic set depends on the
				 * system (fork, /proc): go on without it */
				fprintf(stderr, "zmem bench: skipping the data set 'memory'\n");
				continue;
			}
			goto out;
		}
		cli_progress_done();
		cli_note("%s: %zu pages, %s", d.name, d.len / o.page_size, d.note);
		if (bench_one(&o, &d, rows + nrows, o.verbose ? verbose + nrows : NULL)) {
			bench_data_free(&d);
			goto out;
		}
		nrows += o.nalloc;
		if (o.kernel && !*kernel_why) {
			cli_progress("%s: the kernel's zram", d.name);
			if (bench_kernel(&d, o.page_size, o.codec, &rows[nrows], kernel_why,
					 sizeof(kernel_why)) == 0)
				nrows++;
			cli_progress_done();
		}
		cli_note("%s: done in %.1f s", d.name, (double)(cli_now_ns() - t0) / 1e9);
		bench_data_free(&d);
	}
	if (o.churn > 0) {
		cli_progress("churn: a random %.0f%% freed, per allocator", o.churn * 100);
		nchurn = churn_summary(o.churn, 60u << 20, NULL, churn, 8);
		cli_progress_done();
		if (nchurn < 0) {
			fprintf(stderr, "zmem bench: churn phase: no corpus\n");
			nchurn = 0;
		}
	}
	if (o.json)
		print_json(&o, rows, nrows, kernel_why);
	else
		print_table(&o, rows, nrows, kernel_why);
	if (!o.json && nchurn) {
		printf("\nChurn: a random %.0f%% of 60 MiB of lz4-compressed pages freed, then "
		       "nothing\n(overhead = (pool + metadata) / live bytes for zmem's pools,\n"
		       "resident memory / live bytes for the mallocs)\n%-13s %10s %10s %10s\n",
		       o.churn * 100,
		       "allocator", "freed", "100 ms", "1 s");
		for (int i = 0; i < nchurn; i++)
			printf("%-13s %10.3f %10.3f %10.3f\n", churn[i].name, churn[i].after_free,
			       churn[i].at_100ms, churn[i].at_1s);
	}
	for (size_t i = 0; i < nrows; i++)
		if (verbose[i])
			fputs(verbose[i], o.json ? stderr : stdout);
	status = 0;
	if (o.plot) {
		int rc = bench_svg(o.plot, rows, nrows, o.codec, o.page_size);

		if (rc) {  /* the run asked for a plot it did not get: a failure */
			fprintf(stderr, "zmem bench: writing %s: %s\n", o.plot, strerror(-rc));
			status = 1;
		} else if (!o.json)
			printf("\nplot: %s\n", o.plot);
		else
			cli_notice("plot written to %s", o.plot);
	}
	for (size_t i = 0; i < nrows; i++)
		if (!rows[i].verified)
			status = 1;
out:
	crew_stop(&crew);
	for (size_t i = 0; i < BENCH_MAX_ROWS; i++)
		free(verbose[i]);
	return status;
}
