/*
 * zmem bench --unit-pages LIST: the store with multi-page units against
 * pages alone, side by side on the same pages (docs/store.md).
 *
 * For each data set, allocator and run (--reps), every unit size in turn
 * (so that a machine that slows down affects them alike):
 *
 *   1. a fresh store with that unit_pages; fill: put every page through
 *      zm_store_put_range in chunks of UNIT_CHUNK bytes (or a unit, if
 *      larger), aligned, as a swap device or a disk's large writes hand
 *      them over -- the units that form are the store's choice;
 *      statistics (memory, units) after it;
 *   2. put: the same chunks again over the stored pages (the steady state);
 *   3. a random read trace: UNIT_READS gets of single pages at random
 *      (seeded, the same trace for every unit size), each timed alone:
 *      p50, p99 and the trace's throughput -- a page inside a unit costs
 *      its unit's decoding;
 *   4. get every page in order, compare every byte (not timed).
 *
 * One thread.  Speeds are per second of the thread's own CPU time (user
 * and system: the page faults of a fill count), so that other load on
 * the machine, which only delays a thread that never waits, does not;
 * the wall-clock speeds are in the JSON too.  A read's latency is wall
 * time (p99 then includes what the machine's other load adds).  Speeds
 * and latencies are medians over the runs; memory is the last run's (the
 * same data gives the same bytes).  The ratios are against unit_pages 1
 * (the first size listed when 1 is not).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmem/codec.h>
#include <zmem/pool.h>
#include <zmem/store.h>
#include "base/rand.h"
#include "base/units.h"
#include "bench/bench.h"
#include "bench/benchmarks.h"
#include "tool/json.h"
#include "tool/opt.h"

/* Bytes handed to one zm_store_put_range: 64 KiB, a 16-page unit of
 * 4 KiB pages, as the kernel's large folios and nbdcopy's requests are at
 * least (a larger unit gets a chunk of its own size). */
#define UNIT_CHUNK ((size_t)64 << 10)
/* Single-page reads in the random trace: enough for a stable p99 (320
 * reads above it), few enough that 16-page zstd units take well under a
 * second. */
#define UNIT_READS 32768u
#define UNIT_SEED 0x756e697473ull  /* the trace's: the same for every size */

struct unit_run {
	double fill, put, get_MBps, p50, p99;
	double fill_wall, put_wall, get_wall;  /* MB/s of wall time */
};

/* The calling thread's CPU time, ns. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* MB/s of bytes in ns. */
static double mbps(double bytes, uint64_t ns)
{
	return bytes / ((double)(ns ? ns : 1) / 1e9) / 1e6;
}

/* The pages in chunks of chunk pages (aligned), through put_range; MB/s
 * of original bytes per CPU second (and *wall per wall-clock second), or
 * -1 (*err). */
static double put_all(struct zm_store *s, const struct bench_data *d, size_t ps, size_t chunk,
		      double *wall, int *err)
{
	size_t n = d->len / ps;
	uint64_t t0 = cli_now_ns(), c0 = cpu_ns();

	for (size_t i = 0; i < n; i += chunk) {
		size_t c = n - i < chunk ? n - i : chunk;
		int rc = zm_store_put_range(s, i, c, d->buf + i * ps);

		if (rc) {
			*err = rc;
			return -1;
		}
	}
	*wall = mbps((double)d->len, cli_now_ns() - t0);
	return mbps((double)d->len, cpu_ns() - c0);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The random read trace: p50 and p99 of one get (ns) and MB/s over it. */
static int read_trace(struct zm_store *s, size_t npages, size_t ps, uint8_t *buf,
		      double *lat, struct unit_run *r)
{
	uint64_t seed = UNIT_SEED, t0 = cli_now_ns(), c0 = cpu_ns();

	for (unsigned k = 0; k < UNIT_READS; k++) {
		uint64_t i = zmi_rand(&seed) % npages, a = cli_now_ns();
		int rc = zm_store_get(s, i, buf);

		lat[k] = (double)(cli_now_ns() - a);
		if (rc)
			return rc;
	}
	r->get_MBps = mbps((double)UNIT_READS * (double)ps, cpu_ns() - c0);
	r->get_wall = mbps((double)UNIT_READS * (double)ps, cli_now_ns() - t0);
	qsort(lat, UNIT_READS, sizeof(*lat), cmp_double);
	r->p50 = lat[UNIT_READS / 2];
	r->p99 = lat[UNIT_READS - UNIT_READS / 100];
	return 0;
}

static void fill_row(struct bench_unit_row *row, const struct bench_units *u, const char *alloc,
		     unsigned unit, const struct bench_data *d, struct zm_store *s)
{
	struct zm_store_stats st;

	zm_store_stats(s, &st);
	memset(row, 0, sizeof(*row));
	snprintf(row->data, sizeof(row->data), "%s", d->name);
	snprintf(row->allocator, sizeof(row->allocator), "%s", alloc);
	snprintf(row->codec, sizeof(row->codec), "%s", zm_codec_name(zm_store_codec(s)));
	row->unit_pages = unit;
	row->pages = d->len / u->page_size;
	row->same_pages = st.same_pages;
	row->huge_pages = st.huge_pages;
	row->orig_bytes = st.orig_data_size;
	row->compr_bytes = st.compr_data_size;
	row->mem_used = st.mem_used_total;
	row->meta_bytes = st.pool_meta_bytes + st.store_meta_bytes;
	row->units = st.units;
	row->unit_pages_held = st.unit_pages;
	row->unit_bytes = st.unit_bytes;
	row->unit_saved = st.unit_saved;
	row->units_formed = st.units_formed;
	row->units_declined = st.units_declined;
}

/* One store of one unit size: fill, statistics, put, trace, verify. */
static int one_store(const struct bench_units *u, const char *alloc, unsigned unit,
		     const struct bench_data *d, uint8_t *out, double *lat, struct unit_run *r,
		     struct bench_unit_row *row)
{
	size_t ps = u->page_size, n = d->len / ps;
	size_t chunk = UNIT_CHUNK / ps > unit ? UNIT_CHUNK / ps : unit;
	struct zm_store_config cfg = {
		.nr_pages = n, .page_size = ps, .codec = u->codec, .allocator = alloc,
		.no_same_filled = u->no_same, .huge_size = u->huge_size, .unit_pages = unit,
	};
	struct zm_store *s;
	int err = 0, rc = zm_store_create(&cfg, &s);

	if (rc) {
		fprintf(stderr, "zmem bench: creating a store (%s, %s, unit of %u pages): %s\n",
			alloc, u->codec, unit, strerror(-rc));
		return -1;
	}
	if (!chunk)
		chunk = 1;
	r->fill = put_all(s, d, ps, chunk, &r->fill_wall, &err);
	if (r->fill >= 0 && row)
		fill_row(row, u, alloc, unit, d, s);
	if (r->fill >= 0)
		r->put = put_all(s, d, ps, chunk, &r->put_wall, &err);
	if (r->fill < 0 || r->put < 0) {
		fprintf(stderr, "zmem bench: %s/%s/unit %u: put failed: %s\n", d->name, alloc, unit,
			strerror(-err));
		goto fail;
	}
	rc = read_trace(s, n, ps, out, lat, r);
	for (size_t i = 0; !rc && i < n; i++)
		rc = zm_store_get(s, i, out + i * ps);
	if (rc || memcmp(out, d->buf, d->len)) {
		fprintf(stderr, "zmem bench: %s/%s/unit %u: pages read back differ%s%s\n", d->name,
			alloc, unit, rc ? ": " : "", rc ? strerror(-rc) : "");
		goto fail;
	}
	if (row)
		row->verified = true;
	zm_store_destroy(s);
	return 0;
fail:
	zm_store_destroy(s);
	return -1;
}

int bench_units_one(const struct bench_units *u, const struct bench_data *d,
		    struct bench_unit_row *rows)
{
	size_t nu = u->nunits, na = u->nalloc;
	uint8_t *out = malloc(d->len);
	double *lat = malloc(sizeof(double) * UNIT_READS);
	struct unit_run (*runs)[32] = calloc(nu * na, sizeof(*runs));
	int rc = -1;

	if (!out || !lat || !runs) {
		fprintf(stderr, "zmem bench: out of memory for %s\n", d->name);
		goto out;
	}
	memset(out, 0, d->len);  /* first-touch faults are no store's cost */
	for (int r = 0; r < u->reps; r++)
		for (size_t a = 0; a < na; a++)
			for (size_t k = 0; k < nu; k++) {
				bool last = r == u->reps - 1;

				cli_progress("%s: run %d/%d: %s, units of %u", d->name, r + 1,
					     u->reps, u->alloc[a], u->units[k]);
				if (one_store(u, u->alloc[a], u->units[k], d, out, lat,
					      &runs[a * nu + k][r], last ? &rows[a * nu + k] : NULL))
					goto out;
			}
	for (size_t i = 0; i < nu * na; i++) {
		double fill[32], put[32], get[32], p50[32], p99[32], fw[32], pw[32], gw[32];

		for (int r = 0; r < u->reps; r++) {
			fill[r] = runs[i][r].fill, put[r] = runs[i][r].put;
			get[r] = runs[i][r].get_MBps;
			p50[r] = runs[i][r].p50, p99[r] = runs[i][r].p99;
			fw[r] = runs[i][r].fill_wall, pw[r] = runs[i][r].put_wall;
			gw[r] = runs[i][r].get_wall;
		}
		rows[i].fill_wall_MBps = cli_median(fw, (size_t)u->reps);
		rows[i].put_wall_MBps = cli_median(pw, (size_t)u->reps);
		rows[i].read_wall_MBps = cli_median(gw, (size_t)u->reps);
		rows[i].fill_MBps = cli_median(fill, (size_t)u->reps);
		rows[i].put_MBps = cli_median(put, (size_t)u->reps);
		rows[i].read_MBps = cli_median(get, (size_t)u->reps);
		rows[i].read_p50_ns = cli_median(p50, (size_t)u->reps);
		rows[i].read_p99_ns = cli_median(p99, (size_t)u->reps);
	}
	rc = 0;
out:
	cli_progress_done();
	free(out), free(lat), free(runs);
	return rc;
}

/* ---- output --------------------------------------------------------- */

/* The row rows[i] is compared with: unit 1 of its data and allocator, or
 * the first size listed. */
static const struct bench_unit_row *base_of(const struct bench_unit_row *rows, size_t n,
					    size_t i)
{
	const struct bench_unit_row *first = NULL;

	for (size_t j = 0; j < n; j++) {
		if (strcmp(rows[j].data, rows[i].data) ||
		    strcmp(rows[j].allocator, rows[i].allocator))
			continue;
		if (rows[j].unit_pages == 1)
			return &rows[j];
		if (!first)
			first = &rows[j];
	}
	return first;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* Memory a store holds: its pool and metadata. */
static uint64_t mem_of(const struct bench_unit_row *r)
{
	return r->mem_used + r->meta_bytes;
}

static void print_units_table(const struct bench_units *u, const struct bench_unit_row *rows,
			      size_t n)
{
	int dw = 4, aw = 9;
	char h[32];

	for (size_t i = 0; i < n; i++) {
		int l = (int)strlen(rows[i].data), m = (int)strlen(rows[i].allocator);

		dw = l > dw ? l : dw;
		aw = m > aw ? m : aw;
	}
	printf("zmem bench --unit-pages: codec %s, %zu-byte pages, %s per data set,\n1 thread, "
	       "median of %d run%s; puts through zm_store_put_range in aligned\nchunks of %zu "
	       "KiB; %u random single-page reads\n\n", u->codec, u->page_size,
	       zmi_human_bytes(u->size, h, sizeof(h)), u->reps, u->reps > 1 ? "s" : "",
	       UNIT_CHUNK >> 10, UNIT_READS);
	/* 80 columns for names of 9 characters; --wide: about 140 */
	printf("%-*s %-*s %4s %9s", dw, "data", aw, "allocator", "unit", "effective");
	if (u->wide)
		printf(" %9s", "mem MiB");
	printf(" %6s", "x1");
	if (u->wide)
		printf(" %9s %6s", "fill MB/s", "x1");
	printf(" %9s %6s", "put MB/s", "x1");
	if (u->wide)
		printf(" %7s", "rd p50");
	printf(" %7s %5s", "rd p99", "x1");
	if (u->wide)
		printf(" %8s %5s %7s %6s", "rd MB/s", "x1", "units", "decl");
	printf(" %3s\n", "ok");
	for (size_t i = 0; i < n; i++) {
		const struct bench_unit_row *r = &rows[i], *b = base_of(rows, n, i);

		printf("%-*s %-*s %4u %8.2f%%", dw, r->data, aw, r->allocator, r->unit_pages,
		       100 * ratio((double)mem_of(r), (double)r->orig_bytes));
		if (u->wide)
			printf(" %9.1f", (double)mem_of(r) / (1 << 20));
		printf(" %6.3f", ratio((double)mem_of(r), (double)mem_of(b)));
		if (u->wide)
			printf(" %9.0f %6.2f", r->fill_MBps, ratio(r->fill_MBps, b->fill_MBps));
		printf(" %9.0f %6.2f", r->put_MBps, ratio(r->put_MBps, b->put_MBps));
		if (u->wide)
			printf(" %6.1fu", r->read_p50_ns / 1e3);
		printf(" %6.1fu %5.2f", r->read_p99_ns / 1e3, ratio(r->read_p99_ns, b->read_p99_ns));
		if (u->wide)
			printf(" %8.0f %5.2f %7llu %6llu", r->read_MBps,
			       ratio(r->read_MBps, b->read_MBps), (unsigned long long)r->units,
			       (unsigned long long)r->units_declined);
		printf(" %3s\n", r->verified ? "yes" : "NO");
	}
	printf("\neffective = (pool + metadata) / original; x1 = against unit 1 (the first\n"
	       "size listed without it); put = puts over the stored pages, MB (10^6 bytes of\n"
	       "pages) per second of the thread's CPU time; rd p99 = the random single-page\n"
	       "reads' 99th percentile (us, wall clock).\n");
	if (u->wide)
		printf("mem = pool + metadata; fill = puts into the empty store; rd p50, rd MB/s:\n"
		       "the reads' median and MB/s over the trace (CPU); units = units held after\n"
		       "the fill, decl = units that did not pay (their pages stored alone).\n");
	else
		printf("--wide adds the memory, the fill, the reads' median and speed, and the\n"
		       "units held and declined.\n");
}

static void print_units_json(const struct bench_units *u, const struct bench_unit_row *rows,
			     size_t n)
{
	struct json j;

	json_begin(&j, stdout, "bench");
	json_str(&j, "codec", u->codec);
	json_uint(&j, "page_size_bytes", u->page_size);
	json_uint(&j, "size_bytes", u->size);
	json_int(&j, "threads", 1);
	json_int(&j, "reps", u->reps);
	json_bool(&j, "same_filled", !u->no_same);
	json_array(&j, "unit_pages");
	for (size_t k = 0; k < u->nunits; k++)
		json_uint(&j, NULL, u->units[k]);
	json_array_end(&j);
	json_uint(&j, "chunk_bytes", UNIT_CHUNK);
	json_uint(&j, "reads", UNIT_READS);
	json_array(&j, "results");
	for (size_t i = 0; i < n; i++) {
		const struct bench_unit_row *r = &rows[i], *b = base_of(rows, n, i);

		json_object(&j, NULL);
		json_str(&j, "data", r->data);
		json_str(&j, "allocator", r->allocator);
		json_str(&j, "codec", r->codec);
		json_uint(&j, "unit_pages", r->unit_pages);
		json_bool(&j, "verified", r->verified);
		json_uint(&j, "pages", r->pages);
		json_uint(&j, "same_pages", r->same_pages);
		json_uint(&j, "huge_pages", r->huge_pages);
		json_uint(&j, "orig_data_size", r->orig_bytes);
		json_uint(&j, "compr_data_size", r->compr_bytes);
		json_uint(&j, "mem_used_total", r->mem_used);
		json_uint(&j, "meta_bytes", r->meta_bytes);
		json_uint(&j, "units", r->units);
		json_uint(&j, "unit_pages_held", r->unit_pages_held);
		json_uint(&j, "unit_bytes", r->unit_bytes);
		json_uint(&j, "unit_saved", r->unit_saved);
		json_uint(&j, "units_formed", r->units_formed);
		json_uint(&j, "units_declined", r->units_declined);
		json_fixed(&j, "fill_MBps", r->fill_MBps, 1);
		json_fixed(&j, "put_MBps", r->put_MBps, 1);
		json_fixed(&j, "read_p50_ns", r->read_p50_ns, 0);
		json_fixed(&j, "read_p99_ns", r->read_p99_ns, 0);
		json_fixed(&j, "read_MBps", r->read_MBps, 1);
		json_fixed(&j, "fill_wall_MBps", r->fill_wall_MBps, 1);
		json_fixed(&j, "put_wall_MBps", r->put_wall_MBps, 1);
		json_fixed(&j, "read_wall_MBps", r->read_wall_MBps, 1);
		json_object(&j, "vs_base");
		json_uint(&j, "unit_pages", b->unit_pages);
		json_fixed(&j, "mem", ratio((double)mem_of(r), (double)mem_of(b)), 4);
		json_fixed(&j, "compr_data_size", ratio((double)r->compr_bytes,
							(double)b->compr_bytes), 4);
		json_fixed(&j, "fill_speed", ratio(r->fill_MBps, b->fill_MBps), 3);
		json_fixed(&j, "put_speed", ratio(r->put_MBps, b->put_MBps), 3);
		json_fixed(&j, "read_p50", ratio(r->read_p50_ns, b->read_p50_ns), 3);
		json_fixed(&j, "read_p99", ratio(r->read_p99_ns, b->read_p99_ns), 3);
		json_fixed(&j, "read_speed", ratio(r->read_MBps, b->read_MBps), 3);
		json_object_end(&j);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_end(&j);
}

void bench_units_print(const struct bench_units *u, const struct bench_unit_row *rows, size_t n,
		       bool json)
{
	if (json)
		print_units_json(u, rows, n);
	else
		print_units_table(u, rows, n);
}
