/*
 * zmem worstcase: sequences built to hurt each allocator (background §1: "the
 * worst case ... and whether cost grows with the pool"), every sequence
 * run on every backend of zm_pool_backends(), at live sizes doubling from
 * --min-size (4 MiB) to --max-size (512 MiB):
 *
 *   3k-empty      many allocations of about 3 KB into an empty pool: an
 *                 allocator with free lists by size (xcfmalloc) finds
 *                 them empty and splits whole pages, an object in two
 *                 blocks over two pages; timed: the allocations
 *   classes-half  allocations round robin over every size class from 32 to
 *                 4080 bytes, then every other object of each class freed:
 *                 a slab allocator (zsmalloc) is left with every zspage of
 *                 every class half full; timed: allocations and frees;
 *                 the waste is measured right after the frees
 *   over-half     sizes just above half a page (2049 .. 2200): an
 *                 allocator whose objects may not span pages (xvmalloc,
 *                 zbud) holds one per page; timed: the allocations
 *   tiny          objects of 16 .. 64 bytes: an allocator that puts at most
 *                 two objects in a page (zbud) wastes almost all of it;
 *                 timed: the allocations
 *   mixed-churn   a fill with sizes uniform in 64 .. 4032, then as many
 *                 pairs of "free a random object, allocate a new random
 *                 size": splits, merges and searches in the steady state;
 *                 timed: the churn, not the fill
 *
 * For each cell: ns per operation (an allocation or a free), timed on a
 * pass over a pool that warm-up passes filled and emptied until its
 * resident pages stopped growing, so that the kernel's page faults are not
 * what is counted (the faults the timed part still took are reported, per
 * operation), and waste = (pool bytes + metadata) / live bytes at the end
 * of the timed part, then again after zm_pool_compact() where the backend
 * compacts (JSON only).  Growth = the largest size's figure / the
 * smallest's: about 1 when the cost does not depend on the pool's size.
 *
 * A pool may not take more than 8 times the live size, between 64 MiB and
 * --mem-cap (2 GiB): past that (zbud with tiny objects), the fill stops,
 * the cell is marked "capped" and its figures are those of what was
 * stored.  Each cell gets its own pool, destroyed before the next one.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <zmem/pages.h>
#include <zmem/pool.h>
#include "bench/benchmarks.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "tool/plot.h"

#define MAX_SIZES    24
#define MAX_BACKENDS 16
#define CAP_FACTOR   8               /* pool may take 8x the live size ... */
#define CAP_MIN      ((size_t)64 << 20)  /* ... but at least this */
#define DEF_MEM_CAP  ((size_t)2 << 30)
#define DEF_MIN      ((size_t)4 << 20)
#define DEF_MAX      ((size_t)512 << 20)
#define SEED         0x5eed2011u
/* Warm-up passes before the timed one: until a pass grows the pages
 * layer's resident pages by less than 1/WARM_SETTLED, at most WARM_MAX.
 * One pass is not enough for zsmalloc: each zspage starts in a free run
 * of 32 pages (ZM_SPAN_CONTIG) and populates only what its class needs,
 * so from one pass to the next a run often goes to a class that needs
 * more of it than the last one did, and the pool's resident set grows
 * for several passes; every page not touched before costs a first-touch
 * fault in the timed pass, which is not what it times.  Eight passes
 * cover every sequence seen to settle (docs/results/2026-12-02-code-choices.md). */
#define WARM_MAX     8
#define WARM_SETTLED 100
/* classes-half: a size every 16 bytes from 32 to 4080, the spacing of
 * zsmalloc's finest classes */
#define CH_FIRST 32
#define CH_STEP  16
#define CH_N     ((4080 - CH_FIRST) / CH_STEP + 1)

/* The state of one cell: a pool, its live objects and the clock. */
struct ctx {
	struct zm_pool *pool;
	size_t target;           /* live bytes to reach */
	zm_handle_t *h;          /* live objects (0 = freed, classes-half) */
	uint32_t *sz;
	size_t n, cap;
	uint64_t live, rng, ops, fails, t0, t1, f0, f1;  /* f: minor faults */
	bool capped, refused;    /* out of the memory cap; sizes refused */
};

struct seq {
	const char *name, *target;
	size_t min_obj;          /* smallest object: sizes the handle array */
	size_t mean_obj;
	void (*run)(struct ctx *c);
};

struct cell {
	const char *seq, *backend;
	size_t size;
	uint64_t ops, ns, objects, live, fails, pool_bytes, meta_bytes, descriptors;
	uint64_t faults;         /* page faults in the timed part */
	unsigned warmups;        /* warm-up passes before it */
	double ns_op, waste, waste_compacted;  /* waste_compacted < 0: cannot */
	bool capped, refused;
};

/* ---- objects -------------------------------------------------------- */

/* Allocate one object of size bytes; false when the fill must stop (the
 * memory cap reached, or the backend refusing most sizes). */
static bool alloc_one(struct ctx *c, size_t size)
{
	zm_handle_t h;

	if (c->n == c->cap) {
		size_t cap = c->cap * 2 + 1024;
		zm_handle_t *nh = realloc(c->h, cap * sizeof(*nh));
		uint32_t *ns = nh ? realloc(c->sz, cap * sizeof(*ns)) : NULL;

		if (nh)
			c->h = nh;
		if (!ns) {
			c->capped = true;
			return false;
		}
		c->sz = ns;
		c->cap = cap;
	}
	c->ops++;
	h = zm_pool_alloc(c->pool, size);
	if (!h) {
		c->fails++;
		if (errno == ENOMEM || errno == ENOSPC) {
			c->capped = true;
			return false;
		}
		if (c->fails > 1000 && c->fails * 2 > c->ops) {
			c->refused = true;
			return false;
		}
		return true;
	}
	c->h[c->n] = h;
	c->sz[c->n++] = (uint32_t)size;
	c->live += size;
	return true;
}

/* Free object i, leaving a hole (0) in its place. */
static void free_at(struct ctx *c, size_t i)
{
	if (!c->h[i])
		return;
	zm_pool_free(c->pool, c->h[i]);
	c->h[i] = 0;
	c->live -= c->sz[i];
	c->ops++;
}

/* Free object i and move the last one into its place. */
static void free_swap(struct ctx *c, size_t i)
{
	zm_pool_free(c->pool, c->h[i]);
	c->live -= c->sz[i];
	c->ops++;
	c->h[i] = c->h[--c->n];
	c->sz[i] = c->sz[c->n];
}

static size_t uniform(struct ctx *c, size_t lo, size_t hi)
{
	return lo + zmi_rand(&c->rng) % (hi - lo + 1);
}

/* ---- the clock ------------------------------------------------------ */

static uint64_t minor_faults(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_minflt;
}

static void start(struct ctx *c)
{
	c->f0 = minor_faults();
	c->t0 = cli_now_ns();
}

static void stop(struct ctx *c)
{
	c->t1 = cli_now_ns();
	c->f1 = minor_faults();
}

/* ---- the sequences -------------------------------------------------- */

static void fill_uniform(struct ctx *c, size_t lo, size_t hi)
{
	while (c->live < c->target && alloc_one(c, uniform(c, lo, hi)))
		;
}

static void seq_3k(struct ctx *c)
{
	start(c);
	fill_uniform(c, 2900, 3200);
	stop(c);
}

static void seq_classes(struct ctx *c)
{
	size_t k = 0;

	start(c);
	while (c->live < c->target && alloc_one(c, CH_FIRST + CH_STEP * (k++ % CH_N)))
		;
	/* the objects of one class are CH_N apart: every other one of each */
	for (size_t i = 0; i < c->n; i++)
		if ((i / CH_N) % 2)
			free_at(c, i);
	stop(c);
}

static void seq_over_half(struct ctx *c)
{
	start(c);
	fill_uniform(c, 2049, 2200);
	stop(c);
}

static void seq_tiny(struct ctx *c)
{
	start(c);
	fill_uniform(c, 16, 64);
	stop(c);
}

static void seq_churn(struct ctx *c)
{
	size_t pairs;

	fill_uniform(c, 64, 4032);
	pairs = c->n;
	c->ops = 0;
	start(c);
	for (size_t i = 0; i < pairs && c->n && !c->capped && !c->refused; i++) {
		free_swap(c, zmi_rand(&c->rng) % c->n);
		alloc_one(c, uniform(c, 64, 4032));
	}
	stop(c);
}

static const struct seq seqs[] = {
	{ "3k-empty", "xcfmalloc", 2900, 3050, seq_3k },
	{ "classes-half", "zsmalloc", CH_FIRST, 2056, seq_classes },
	{ "over-half", "xvmalloc", 2049, 2124, seq_over_half },
	{ "tiny", "zbud", 16, 40, seq_tiny },
	{ "mixed-churn", "all", 64, 2048, seq_churn },
};
#define NSEQ (sizeof(seqs) / sizeof(seqs[0]))

/* ---- one cell ------------------------------------------------------- */

static double waste_of(struct zm_pool *p, uint64_t live, struct zm_pool_stats *st)
{
	zm_pool_stats(p, st);
	return live ? (double)(st->pool_bytes + st->meta_bytes) / (double)live : -1;
}

/* One pass of s on pool, emptied again at the end; the figures into out
 * (when not NULL).  0, or -1 after a message. */
static int one_pass(const struct seq *s, struct zm_pool *pool, const char *backend,
		    size_t size, struct cell *out)
{
	struct zm_pool_stats st;
	struct ctx c = { .pool = pool, .target = size, .rng = SEED };

	c.cap = size / s->mean_obj + size / s->mean_obj / 8 + 1024;
	if (c.cap > size / s->min_obj + 1024)
		c.cap = size / s->min_obj + 1024;
	c.h = malloc(c.cap * sizeof(*c.h));
	c.sz = malloc(c.cap * sizeof(*c.sz));
	if (!c.h || !c.sz) {
		free(c.h), free(c.sz);
		fprintf(stderr, "zmem worstcase: out of memory for %zu handles\n", c.cap);
		return -1;
	}
	s->run(&c);
	if (out) {
		*out = (struct cell){ .seq = s->name, .backend = backend, .size = size,
				      .ops = c.ops, .ns = c.t1 - c.t0, .live = c.live,
				      .fails = c.fails, .faults = c.f1 - c.f0,
				      .capped = c.capped,
				      .refused = c.refused };
		out->ns_op = c.ops ? (double)out->ns / (double)c.ops : -1;
		out->waste = waste_of(c.pool, c.live, &st);
		out->pool_bytes = st.pool_bytes;
		out->meta_bytes = st.meta_bytes;
		out->descriptors = st.descriptors;
		out->objects = st.objects;
		out->waste_compacted = zm_pool_compact(c.pool) < 0 ? -1 :
				       waste_of(c.pool, c.live, &st);
	}
	for (size_t i = 0; i < c.n; i++)
		if (c.h[i])
			zm_pool_free(c.pool, c.h[i]);
	free(c.h), free(c.sz);
	return 0;
}

/* A cell: a pool; warm-up passes that fill and empty it until its
 * resident pages settle (WARM_MAX), then the timed pass on the same pool
 * and the pages the warm-up left resident (zm_pages with an unlimited
 * reserve; glibc not trimming), so that what is timed is the allocator,
 * not the kernel's page faults, as in allocbench.  Then the memory goes
 * back. */
static int run_cell(const struct seq *s, const char *backend, size_t size, size_t mem_cap,
		    struct cell *out)
{
	size_t lim = size * CAP_FACTOR;
	struct zm_pages_config gc = { .reserve_pages = SIZE_MAX, .prefault = 1 };
	struct zm_pool_config pc = { .allocator = backend };
	struct zm_pages *pg;
	struct zm_pool *pool;
	int rc;

	lim = lim < CAP_MIN ? CAP_MIN : lim > mem_cap ? mem_cap : lim;
	gc.limit_pages = lim / 4096;
	gc.arena_bytes = lim > ((size_t)3 << 30) ? lim + lim / 8 : 0;
	rc = zm_pages_create(&gc, &pg);
	if (rc) {
		fprintf(stderr, "zmem worstcase: pages for %s: %s\n", backend, strerror(-rc));
		return -1;
	}
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
	mallopt(M_MMAP_THRESHOLD, 1 << 30);
	pc.pages = pg;
	rc = zm_pool_create(&pc, &pool);
	if (rc) {
		fprintf(stderr, "zmem worstcase: %s: %s\n", backend, strerror(-rc));
	} else {
		struct zm_pages_stats ps;
		size_t before = 0;
		unsigned w = 0;

		while (!rc && w < WARM_MAX) {
			rc = one_pass(s, pool, backend, size, NULL);
			w++;
			zm_pages_stats(pg, &ps);
			if (ps.resident - before <= before / WARM_SETTLED)
				break;
			before = ps.resident;
		}
		if (!rc)
			rc = one_pass(s, pool, backend, size, out);
		if (!rc)
			out->warmups = w;
		zm_pool_destroy(pool);
	}
	zm_pages_destroy(pg);
	mallopt(M_TRIM_THRESHOLD, 128 << 10);
	malloc_trim(0);
	return rc;
}

/* ---- output --------------------------------------------------------- */

static const struct cell *find(const struct cell *cells, size_t n, const char *seq,
			       const char *backend, size_t size)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(cells[i].seq, seq) && !strcmp(cells[i].backend, backend) &&
		    cells[i].size == size)
			return &cells[i];
	return NULL;
}

static bool ran(const struct cell *cells, size_t n, const char *seq)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(cells[i].seq, seq))
			return true;
	return false;
}

/* largest size's figure / smallest's, over the cells that ran; -1 if
 * fewer than two */
static double growth(const struct cell *cells, size_t n, const char *seq, const char *b,
		     const size_t *sizes, size_t ns, int waste)
{
	const struct cell *lo = NULL, *hi = NULL;

	for (size_t i = 0; i < ns; i++) {
		const struct cell *c = find(cells, n, seq, b, sizes[i]);

		if (c && (waste ? c->waste : c->ns_op) > 0) {
			lo = lo ? lo : c;
			hi = c;
		}
	}
	if (!lo || lo == hi)
		return -1;
	return waste ? hi->waste / lo->waste : hi->ns_op / lo->ns_op;
}

static void size_label(char *buf, size_t len, size_t size)
{
	if (size >= (1u << 30) && size % (1u << 30) == 0)
		snprintf(buf, len, "%zuG", size >> 30);
	else if (size >= (1u << 20))
		snprintf(buf, len, "%zuM", size >> 20);
	else
		snprintf(buf, len, "%zuK", size >> 10);
}

static void print_tables(const struct cell *cells, size_t n, const char *const *names,
			 size_t nb, const size_t *sizes, size_t ns, size_t mem_cap)
{
	char lab[16], h[4][32];

	printf("zmem worstcase: a sequence built to hurt each allocator, run on every backend,\n"
	       "at live sizes doubling from %s to %s; growth = the largest size's\n"
	       "figure / the smallest's (about 1: no growth with the pool).  A fresh pool per\n"
	       "cell, capped at %d x the live size (at least %s, at most %s):\n"
	       "c = capped there, r = most sizes refused.  The sequences and what each hurts:\n"
	       " ", zmi_human_bytes(sizes[0], h[0], 32), zmi_human_bytes(sizes[ns - 1], h[1], 32),
	       CAP_FACTOR, zmi_human_bytes(CAP_MIN, h[2], 32), zmi_human_bytes(mem_cap, h[3], 32));
	for (size_t q = 0, col = 1; q < NSEQ; q++) {
		int len = (int)(strlen(seqs[q].name) + strlen(seqs[q].target)) + 5;

		if (q && col + (size_t)len > 80) {
			printf(",\n ");
			col = 1;
		} else if (q) {
			printf(",");
			col++;
		}
		col += (size_t)printf(" %s (%s)", seqs[q].name, seqs[q].target);
	}
	printf(".\n");
	for (int w = 0; w < 2; w++) {
		printf("\n%s\n%-12s %-9s", w ? "waste = (pool bytes + metadata) / live bytes, "
		       "at the end of the timed part" : "ns per operation (allocation or free)",
		       "sequence", "allocator");
		for (size_t k = 0; k < ns; k++) {
			size_label(lab, sizeof(lab), sizes[k]);
			printf(" %7s", lab);
		}
		printf(" %8s\n", "growth");
		for (size_t q = 0; q < NSEQ; q++)
			for (size_t b = 0; b < nb && ran(cells, n, seqs[q].name); b++) {
				double g = growth(cells, n, seqs[q].name, names[b], sizes, ns, w);

				printf("%-12s %-9s", seqs[q].name, names[b]);
				for (size_t k = 0; k < ns; k++) {
					const struct cell *c = find(cells, n, seqs[q].name, names[b],
								    sizes[k]);
					double v = c ? (w ? c->waste : c->ns_op) : -1;

					if (v < 0)
						printf(" %7s", "-");
					else
						printf(" %6.*f%c", w ? 3 : 1, v, c->capped ? 'c' :
						       c->refused ? 'r' : ' ');
				}
				if (g > 0)
					printf(" %7.2fx\n", g);
				else
					printf(" %8s\n", "-");
			}
	}
}

static void jnum(struct json *j, const char *key, double v, int prec)
{
	if (v < 0)
		json_null(j, key);
	else
		json_fixed(j, key, v, prec);
}

/* The options of a run, as its document gives them back. */
struct run_opts {
	size_t min, max, mem_cap;
	unsigned seq_run;  /* bit q: seqs[q] was run */
	const char *plot;
};

/* The run's options lead, so a run can be repeated from its document:
 * the sizes, the cap, the plot, the backends and the sequences run. */
static void print_json(const struct cell *cells, size_t n, const char *const *names,
		       size_t nb, const size_t *sizes, size_t ns, const struct run_opts *o)
{
	unsigned seq_run = o->seq_run;
	struct json j;

	json_begin(&j, stdout, "worstcase");
	json_uint(&j, "min_size_bytes", o->min);
	json_uint(&j, "max_size_bytes", o->max);
	json_uint(&j, "mem_cap_bytes", o->mem_cap);
	json_str(&j, "plot", o->plot);
	json_array(&j, "sizes_bytes");
	for (size_t k = 0; k < ns; k++)
		json_uint(&j, NULL, sizes[k]);
	json_array_end(&j);
	json_array(&j, "backends");
	for (size_t b = 0; b < nb; b++)
		json_str(&j, NULL, names[b]);
	json_array_end(&j);
	json_array(&j, "sequences");
	for (size_t q = 0; q < NSEQ; q++) {
		if (!(seq_run & 1u << q))
			continue;
		json_object(&j, NULL);
		json_str(&j, "name", seqs[q].name);
		json_str(&j, "hurts", seqs[q].target);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array(&j, "results");
	for (size_t i = 0; i < n; i++) {
		const struct cell *c = &cells[i];

		json_object(&j, NULL);
		json_str(&j, "sequence", c->seq);
		json_str(&j, "allocator", c->backend);
		json_uint(&j, "size_bytes", c->size);
		json_uint(&j, "live_bytes", c->live);
		json_uint(&j, "objects", c->objects);
		json_uint(&j, "ops", c->ops);
		json_uint(&j, "failed_allocs", c->fails);
		json_uint(&j, "pool_bytes", c->pool_bytes);
		json_uint(&j, "meta_bytes", c->meta_bytes);
		if (c->descriptors)
			json_uint(&j, "descriptors", c->descriptors);
		else
			json_null(&j, "descriptors");
		jnum(&j, "ns_per_op", c->ns_op, 2);
		jnum(&j, "waste", c->waste, 4);
		jnum(&j, "waste_compacted", c->waste_compacted, 4);
		jnum(&j, "faults_per_op", c->ops ? (double)c->faults / (double)c->ops : -1, 4);
		json_uint(&j, "warmups", c->warmups);
		json_bool(&j, "capped", c->capped);
		json_bool(&j, "refused", c->refused);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array(&j, "growth");
	for (size_t q = 0; q < NSEQ; q++)
		for (size_t b = 0; b < nb && ran(cells, n, seqs[q].name); b++) {
			json_object(&j, NULL);
			json_str(&j, "sequence", seqs[q].name);
			json_str(&j, "allocator", names[b]);
			jnum(&j, "ns_growth", growth(cells, n, seqs[q].name, names[b], sizes, ns, 0), 3);
			jnum(&j, "waste_growth", growth(cells, n, seqs[q].name, names[b], sizes, ns, 1),
			     3);
			json_object_end(&j);
		}
	json_array_end(&j);
	json_end(&j);
}

/* A grid that reads without scrolling: a row per sequence that ran, ns
 * per operation on the left, waste on the right, each panel half the
 * page wide. */
static int plot(const char *path, const struct cell *cells, size_t n,
		const char *const *names, size_t nb, const size_t *sizes, size_t ns)
{
	enum { TOP = 110, PANEL = 135, PITCH = 180 };
	static char xl[MAX_SIZES][16];
	const char *xlab[MAX_SIZES];
	double y[MAX_BACKENDS][MAX_SIZES];
	bool capped[MAX_BACKENDS][MAX_SIZES], any = false;
	const bool *hollow[MAX_BACKENDS];
	struct plot_series s[MAX_BACKENDS];
	struct plot_axes a = { .logy = 1, .hollow = hollow, .w = PLOT_W / 2.0 };
	char title[160];
	size_t rows = 0;
	FILE *f;

	for (size_t q = 0; q < NSEQ; q++)
		rows += ran(cells, n, seqs[q].name);
	f = plot_begin(path, TOP + (int)rows * PITCH + 10,
		       "zmem worstcase: each sequence on every backend, by live size");
	if (!f)
		return -errno;
	for (size_t i = 0; i < n; i++)
		any |= cells[i].capped;
	/* a capped cell's figures are those of what fitted: drawn hollow */
	plot_legend_capped(f, 50, names, nb, any ? "capped" : NULL);
	plot_text(f, PLOT_W / 2.0, 72, "middle", 12,
		  "left: ns per operation; right: waste = (pool + metadata) / live bytes; "
		  "x: live size");
	for (size_t k = 0; k < ns; k++) {
		size_label(xl[k], sizeof(xl[k]), sizes[k]);
		xlab[k] = xl[k];
	}
	for (size_t q = 0, row = 0; q < NSEQ; q++) {
		if (!ran(cells, n, seqs[q].name))
			continue;
		for (int w = 0; w < 2; w++) {
			for (size_t b = 0; b < nb; b++) {
				for (size_t k = 0; k < ns; k++) {
					const struct cell *c = find(cells, n, seqs[q].name, names[b],
								    sizes[k]);

					y[b][k] = c ? (w ? c->waste : c->ns_op) : -1;
					capped[b][k] = c && c->capped;
				}
				s[b] = (struct plot_series){ names[b], y[b] };
				hollow[b] = capped[b];
			}
			snprintf(title, sizeof(title), "%s (hurts %s): %s", seqs[q].name,
				 seqs[q].target, w ? "waste" : "ns per op");
			a.title = title;
			a.ytitle = w ? "waste (x live)" : "ns per operation";
			a.xtitle = row + 1 == rows ? "live size" : NULL;
			a.x0 = w * PLOT_W / 2.0;
			plot_panel_axes(f, TOP + (double)row * PITCH, PANEL, &a, xlab, ns, s, nb);
		}
		row++;
	}
	return plot_end(f);
}

/* ---- options -------------------------------------------------------- */

int cmd_worstcase(int argc, char **argv)
{
	const char *const *all = zm_pool_backends();
	const char *names[MAX_BACKENDS], *only[MAX_BACKENDS], *oseq[NSEQ], *plot_path = NULL;
	size_t nonly = 0, noseq = 0, nb = 0, ns = 0, n = 0, sizes[MAX_SIZES];
	size_t min = DEF_MIN, max = DEF_MAX, mem_cap = DEF_MEM_CAP;
	struct cell *cells;
	int json = 0, status = 0, rc;
	unsigned seq_run = 0;  /* bit q: seqs[q] was run */
	const struct opt table[] = {
		O_SIZE("min-size", 'm', &min, "SIZE", "smallest live size", "4M", 4096,
		       (double)((uint64_t)1 << 40)),
		O_SIZE("max-size", 'M', &max, "SIZE", "largest live size", "512M", 4096,
		       (double)((uint64_t)1 << 40)),
		O_SIZE("mem-cap", 'c', &mem_cap, "SIZE", "most memory one pool may take", "2G",
		       (double)CAP_MIN, 0),
		O_LIST("allocator", 'a', only, "NAME", "only this backend (repeatable)", "all",
		       &nonly, MAX_BACKENDS),
		O_LIST("sequence", 's', oseq, "NAME", "only this sequence (repeatable)", "all",
		       &noseq, NSEQ),
		O_FLAG("json", 'j', &json, "one JSON document on stdout instead of the tables"),
		O_STR("plot", 'P', &plot_path, "FILE.svg",
		      "ns per op and waste against live size, a\nline per backend, two panels per "
		      "sequence", "none"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"worstcase", "[OPTIONS]",
		"Sequences built to hurt each allocator (3k-empty: xcfmalloc, classes-half:\n"
		"zsmalloc, over-half: xvmalloc, tiny: zbud, mixed-churn: all), each run on every\n"
		"backend at live sizes doubling from --min-size to --max-size: ns per operation,\n"
		"waste = (pool + metadata) / live bytes, and their growth with the pool.",
		table, NULL,
	};

	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (min > max)
		return cli_usage("worstcase", "--min-size (%zu) must be at most --max-size (%zu)",
				 min, max);
	for (size_t s = min; s <= max && ns < MAX_SIZES; s *= 2)
		sizes[ns++] = s;
	for (size_t i = 0; i < nonly; i++) {
		size_t k;

		for (k = 0; all[k] && strcmp(all[k], only[i]); k++)
			;
		if (!all[k])
			return cli_check_allocator("worstcase", "--allocator", only[i]);
	}
	for (size_t i = 0; i < noseq; i++) {
		size_t q;

		for (q = 0; q < NSEQ && strcmp(seqs[q].name, oseq[i]); q++)
			;
		if (q == NSEQ) {
			char list[256] = "";

			for (q = 0; q < NSEQ; q++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
					 q ? ", " : "", seqs[q].name);
			return cli_usage("worstcase", "unknown sequence '%s' (%s)", oseq[i], list);
		}
	}
	for (size_t k = 0; all[k] && nb < MAX_BACKENDS; k++) {
		int want = !nonly;

		for (size_t i = 0; i < nonly; i++)
			want |= !strcmp(all[k], only[i]);
		if (want)
			names[nb++] = all[k];
	}
	if ((rc = cli_check_plot("worstcase", plot_path, json)))
		return rc;
	cells = calloc(NSEQ * nb * ns, sizeof(*cells));
	if (!cells)
		return cli_no_memory("worstcase", "the cells", NSEQ * nb * ns * sizeof(*cells));
	for (size_t q = 0; q < NSEQ; q++) {
		int want = !noseq;

		for (size_t i = 0; i < noseq; i++)
			want |= !strcmp(seqs[q].name, oseq[i]);
		if (!want)
			continue;
		seq_run |= 1u << q;
		for (size_t b = 0; b < nb; b++)
			for (size_t k = 0; k < ns; k++) {
				uint64_t t0 = cli_now_ns();
				char lab[32];

				cli_progress("%s on %s, %s", seqs[q].name, names[b],
					     cli_size_text(sizes[k], lab, sizeof(lab)));
				if (run_cell(&seqs[q], names[b], sizes[k], mem_cap, &cells[n])) {
					status = 1;
					continue;
				}
				cli_note("%s on %s, %s: %.1f ns/op, waste %.3f%s, "
					 "%llu faults after %u warm-up(s) (%.1f s)", seqs[q].name,
					 names[b], cli_size_text(sizes[k], lab, sizeof(lab)),
					 cells[n].ns_op, cells[n].waste,
					cells[n].capped ? ", capped" : "",
					(unsigned long long)cells[n].faults, cells[n].warmups,
					(double)(cli_now_ns() - t0) / 1e9);
				n++;
			}
	}
	cli_progress_done();
	if (json) {
		const struct run_opts ro = { min, max, mem_cap, seq_run, plot_path };

		print_json(cells, n, names, nb, sizes, ns, &ro);
	} else {
		print_tables(cells, n, names, nb, sizes, ns, mem_cap);
	}
	if (plot_path) {
		rc = plot(plot_path, cells, n, names, nb, sizes, ns);
		if (rc) {
			fprintf(stderr, "zmem worstcase: writing %s: %s\n", plot_path, strerror(-rc));
			status = 1;
		} else if (!json) {
			printf("\nplot: %s\n", plot_path);
		}
	}
	free(cells);
	return status;
}
