/*
 * zmem tierbench: cold data tiering against a memory limit.  The same
 * data set, four times larger than the limit, and the same access trace
 * go through a fresh store per mode, side by side in one run:
 *
 *   none        the limit, no tiering: writes beyond it fail (-ENOSPC)
 *   recompress  the limit, a secondary codec (zstd:3) for idle pages,
 *               automatic idle recompression (idle_after_ms) on
 *   writeback   the limit and a backing file: puts beyond the limit
 *               write idle (or any) pages back to the file
 *   both        recompression and writeback together
 *   lz4-only    no limit, no tiering, the primary codec: the reference
 *               for speed
 *   zstd-only   no limit, no tiering, the secondary codec as the only
 *               one: the reference for memory
 *   wb-cached   writeback with the backing file's pages left in the page
 *               cache (as a file system that cannot drop them would):
 *               writeback's reference for memory; not run unless --modes
 *               names it
 *   wb-nbd      writeback to the NBD export --backing-uri names instead
 *               of a file (a zmem serve or nbdkit elsewhere, or on
 *               loopback); run when that is given
 *   wb-clean    writeback with the packed file's automatic cleaner on
 *               (file_clean_rate, --clean-rate): against writeback, what
 *               the cleaner keeps the file to after the trace's churn of
 *               rewrites and pages written back again
 *   wb-drop     writeback with the file written through the page cache,
 *               flushed and dropped (O_DIRECT refused at open, as on a
 *               file system without it), where writeback opens it
 *               O_DIRECT; not run unless --modes names it
 *   wb-sync     writeback with writeback_sync: a put at the limit writes
 *               pages back itself, no writer thread: writeback's
 *               reference for the put latency at the limit
 *
 * The trace: every index of the store is one page of the data set; a
 * seeded shuffle picks the hot set (--hot 80/20: 80% of the accesses go
 * to 20% of the pages, the rest spread over the others).  An access reads
 * the page, or (--rewrite, 30% by default) puts a random page of the data
 * set there, so that content changes.  The trace is drawn once, before
 * any mode runs, and every mode replays it: the same seed gives the same
 * trace in every mode and every run.
 *
 * Each mode, in this order:
 *
 *   1. fill: put every page into the empty store (failed puts count),
 *      each put timed: below the limit (the bytes stored, in memory and
 *      on file, under BELOW_NUM/BELOW_DEN of it) and at the limit (once
 *      they have passed it, so that every byte more is one written
 *      back), looked at every PHASE_EVERY puts; a unit's put_range is one
 *      put;
 *      recompress modes fill in FILL_CHUNKS chunks, marking every page
 *      idle before a chunk and re-encoding the idle ones after it (the
 *      chunks before), as if the data arrived more slowly than it cools;
 *   2. zm_store_mark_idle(store, 0): every page idle (zram's `echo all >
 *      idle`);
 *   3. warm-up: the first WARMUP_PCT% of the trace; the pages it touches
 *      lose their idle mark, so what stays idle is the cold data;
 *   4. the tiering step, timed per page (per page tried for
 *      recompression, per page written for writeback): recompress
 *      re-encodes the idle pages (zm_store_recompress, PICK_IDLE);
 *      writeback writes every idle page back (PICK_IDLE); both re-encodes
 *      the idle pages and then writes back those still stored raw
 *      (PICK_IDLE | PICK_HUGE), zram's recompress-then-writeback order.
 *      Pages beyond the limit went to the file during the fill already
 *      (automatic);
 *   5. the measured trace: the rest of the trace, each access timed; the
 *      speeds and the get latency come from this part only;
 *   6. wb-clean: the automatic cleaner's work left after the trace, for
 *      up to SETTLE_MAX_MS (the file's state as the trace ended is kept
 *      too); then statistics, a census of the slots (zm_store_slot_info), resident
 *      memory, the backing file's bytes in the page cache (cachestat(2),
 *      or mincore over a mapping of it where the kernel lacks that), then
 *      every page read back and compared with its last
 *      successful write (a failed put leaves the old content, as the
 *      store promises).  Reads in the trace are compared too.
 *
 * Automatic recompression (idle_after_ms) runs on the process's worker
 * beside steps 3-5; its pages count in recompressed_pages with the
 * explicit ones.
 *
 * Then, in the same run, a bare pwrite() loop of the mean bytes of a
 * written-back page to a scratch file in --dir (the same offsets a page's
 * index gives, as many pages as step 4 wrote): the floor a writeback is
 * measured against; and a synchronous O_DIRECT pwrite() of a whole page,
 * page by page, at the same offsets: what a writeback of a page a call
 * costs, which a batched writeback is to beat by 4x.
 *
 * Output: a table (or --json), the figures the tiering targets are about,
 * and --plot FILE.svg (memory and throughput by mode, plot.c).  The exit
 * status is 1 if any page read back wrong, never because of speed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/store.h>
#include "bench/bench.h"
#include "bench/benchmarks.h"
#include "tool/json.h"
#include "tool/check.h"
#include "tool/opt.h"
#include "tool/plot.h"

#define DEF_LIMIT ((size_t)64 << 20) /* data 256 MiB asked for: all six modes
					in well under a minute on 2 cores */
/* Recompress modes fill in this many chunks, re-encoding the pages of
 * the chunks before each (marked idle when it began): data that arrives
 * over more time than idle_after, cooling as it comes, as the automatic
 * worker would see it; without it a fill at memory speed would reach
 * the limit before any page is idle. */
#define FILL_CHUNKS 8
#define DATA_PER_LIMIT 4   /* the data set is this many times the limit */
#define DEF_OPS_PER_PAGE 4 /* trace length: accesses per page of data */
#define DEF_HOT_ACCESS 80  /* --hot 80/20 */
#define DEF_HOT_PAGES 20
#define DEF_REWRITE 30     /* percent of accesses that put */
/* ms: a fifth of the default trace's length, and more than twice the
 * time between two accesses of a hot page, so that in the trace hot pages
 * stay hot and cold ones cool, are re-encoded and settle before it ends
 * (docs/results/2026-12-01-tierbench.md) */
#define DEF_IDLE_AFTER 200
#define DEF_SEED 20261201  /* any constant: the same trace in every run */
#define WARMUP_PCT 25      /* part of the trace before the tiering step */
#define NO_SRC UINT32_MAX  /* an access that reads; a slot never written */
#define MB 1e6
#define MIB 1048576.0
/* The fill's puts "below the limit": the bytes stored under 7/8 of it,
 * clear of the writer's high watermark (limit - limit/16), so that no
 * writeback runs beside them. */
#define BELOW_NUM 7
#define BELOW_DEN 8
#define PHASE_EVERY 256  /* puts between two looks at the bytes stored */

enum mode {
	M_NONE, M_RECOMPRESS, M_WRITEBACK, M_BOTH, M_LZ4, M_ZSTD, M_WB_CACHED, M_WB_DROP, M_WB_NBD,
	M_WB_CLEAN, M_WB_SYNC, NMODES
};

static const char *const mode_names[NMODES] = {
	"none", "recompress", "writeback", "both", "lz4-only", "zstd-only", "wb-cached", "wb-drop",
	"wb-nbd", "wb-clean", "wb-sync",
};

/* The store's seams (store_internal.h): the file's pages stay cached; the
 * file is not opened O_DIRECT. */
extern int zmi_store_backing_cache_fail;
extern int zmi_store_backing_direct_fail;

static bool has_limit(enum mode m)
{
	return m <= M_BOTH || m == M_WB_CACHED || m == M_WB_DROP || m == M_WB_NBD ||
	       m == M_WB_CLEAN || m == M_WB_SYNC;
}

static bool has_recompress(enum mode m)
{
	return m == M_RECOMPRESS || m == M_BOTH;
}

static bool has_backing(enum mode m)
{
	return m == M_WRITEBACK || m == M_BOTH || m == M_WB_CACHED || m == M_WB_DROP ||
	       m == M_WB_NBD || m == M_WB_CLEAN || m == M_WB_SYNC;
}

/* One access: a get of idx, or a put of data page src at idx. */
struct access {
	uint32_t idx, src;
};

struct opts {
	const char *data, *codec, *recompress, *dir, *plot;
	const char *uri;   /* wb-nbd's export */
	size_t size, limit, page_size, clean_rate;
	uint64_t ops, seed;
	unsigned hot_access, hot_pages, rewrite, idle_after, rate, unit_pages;
	bool modes[NMODES];
	int json, readback, wide;
};

/* One mode's results. */
struct row {
	bool ran;
	uint64_t ops, hot_ops;        /* the measured trace */
	double MBps, hot_MBps, fill_MBps;
	double get_p99_us;
	/* the fill's puts, us: below the limit and at it (step 1) */
	double put_lo_p50, put_lo_p99, put_hi_p50, put_hi_p99;
	double put_lo_p999, put_hi_p999; /* p99.9: where a put's own reclaim shows */
	uint64_t put_lo_n, put_hi_n;
	double limit_MBps;            /* the fill's puts at the limit, MB/s */
	uint64_t waits, wait_ns;      /* writeback_waits, writeback_wait_ns */
	uint64_t pool_full, own;      /* reclaim_pool_full, reclaim_sync */
	uint64_t failed_fill, failed_trace, errors, mismatches;
	uint64_t pool_bytes, pool_max, compr_bytes, rss_bytes;
	uint64_t in_memory, in_pool, on_file; /* the slot census */
	uint64_t bd_count, bd_bytes, bd_writes, bd_reads, writeback_failures;
	uint64_t file_bytes;          /* the backing file's blocks, in bytes */
	uint64_t file_alloc, file_live; /* file_alloc_bytes, file_live_bytes */
	uint64_t clean_runs, clean_bytes; /* the cleaner's (file_clean_*) */
	double end_alloc_x;           /* file_alloc / file_live as the trace ended */
	double settle_s;              /* the cleaner's work after it, seconds */
	uint64_t cache_bytes;         /* its bytes in the page cache */
	uint64_t cache_mode;          /* backing_cache_mode */
	uint64_t recompressed, secondary, tried;
	uint64_t step_tried, step_recompressed, step_written; /* the tiering step */
	double recompress_ns, writeback_ns; /* per page tried, per page written */
};

/* ---- the trace ------------------------------------------------------ */

/* Draw o->ops accesses over n pages (see the top of the file); *hot gets
 * the hot set as a bitmap of n bytes.  NULL on lack of memory. */
static struct access *make_trace(const struct opts *o, uint32_t n, uint8_t **hot)
{
	struct access *t = malloc(o->ops * sizeof(*t));
	uint32_t *perm = malloc((size_t)n * sizeof(*perm));
	uint32_t nhot = (uint32_t)((uint64_t)n * o->hot_pages / 100);
	uint64_t s = o->seed ? o->seed : 1;

	*hot = calloc(n, 1);
	if (!t || !perm || !*hot) {
		free(t), free(perm), free(*hot);
		return NULL;
	}
	if (!nhot)
		nhot = 1;
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(zmi_rand(&s) % (i + 1)), x = perm[i];

		perm[i] = perm[j], perm[j] = x;
	}
	for (uint32_t i = 0; i < nhot; i++)
		(*hot)[perm[i]] = 1;
	for (uint64_t k = 0; k < o->ops; k++) {
		bool h = nhot == n || zmi_rand(&s) % 100 < o->hot_access;
		uint32_t idx = h ? perm[zmi_rand(&s) % nhot] :
				   perm[nhot + zmi_rand(&s) % (n - nhot)];

		t[k].idx = idx;
		t[k].src = zmi_rand(&s) % 100 < o->rewrite ? (uint32_t)(zmi_rand(&s) % n) : NO_SRC;
	}
	free(perm);
	return t;
}

/* ---- one mode ------------------------------------------------------- */

/* The fill's put latencies (step 1), ns, in two phases. */
struct put_lat {
	uint32_t *lo, *hi;    /* as many as the fill's puts each */
	uint64_t nlo, nhi;
	uint64_t hi_ns, hi_pages; /* the time and pages of the puts at the limit */
	int phase;            /* 0 below, 1 between, 2 at the limit */
};

struct run {
	const struct opts *o;
	const struct bench_data *d;
	struct zm_store *store;
	uint32_t *ref;         /* index -> data page last written, NO_SRC */
	uint8_t *buf, *zero;
	size_t ps;
	struct row *row;
	int fd;                /* the backing file; -1 = none */
	struct put_lat *pl;    /* the fill's; NULL outside it */
};

/* Does buf hold what the slot at idx was last given? */
static bool page_ok(const struct run *r, uint64_t idx, const uint8_t *buf)
{
	const uint8_t *want = r->ref[idx] == NO_SRC ? r->zero : r->d->buf + (size_t)r->ref[idx] * r->ps;

	return !memcmp(buf, want, r->ps);
}

static void note_error(struct run *r, const char *what, uint64_t idx, int rc)
{
	if (!r->row->errors++)
		fprintf(stderr, "zmem tierbench: %s of page %llu: %s\n", what,
			(unsigned long long)idx, strerror(-rc));
}

/* A put; the reference follows it only if it took. */
static void do_put(struct run *r, uint64_t idx, uint32_t src, uint64_t *failed)
{
	int rc = zm_store_put(r->store, idx, r->d->buf + (size_t)src * r->ps);

	if (!rc)
		r->ref[idx] = src;
	else if (rc == -ENOSPC)
		(*failed)++;
	else
		note_error(r, "put", idx, rc);
}

/* The fill: count pages from idx, their own data, as one put_range.  When
 * it fails for the limit, a page at a time, and a page that does not fit
 * is discarded: every page's content stays known. */
static void put_run(struct run *r, uint32_t idx, uint32_t count, uint64_t *failed)
{
	uint64_t t0 = cli_now_ns();
	int rc = zm_store_put_range(r->store, idx, count, r->d->buf + (size_t)idx * r->ps);
	uint64_t ns = cli_now_ns() - t0;
	struct put_lat *pl = r->pl;

	if (pl && pl->phase != 1) {
		uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;

		if (!pl->phase) {
			pl->lo[pl->nlo++] = v;
		} else {
			pl->hi[pl->nhi++] = v;
			pl->hi_ns += ns;
			pl->hi_pages += count;
		}
	}

	for (uint32_t i = 0; i < count && !rc; i++)
		r->ref[idx + i] = idx + i;
	if (rc && rc != -ENOSPC)
		note_error(r, "put_range", idx, rc);
	for (uint32_t i = 0; i < count && rc == -ENOSPC; i++) {
		uint64_t before = *failed;

		do_put(r, idx + i, idx + i, failed);
		if (*failed != before && zm_store_discard(r->store, idx + i, 1) == 0)
			r->ref[idx + i] = NO_SRC;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The permille-th per mille of n latencies (sorted here), us; 0 for
 * none. */
static double pct_us(uint32_t *lat, uint64_t n, unsigned permille)
{
	if (!n)
		return 0;
	qsort(lat, n, sizeof(*lat), cmp_u32);
	return lat[(n - 1) * permille / 1000] / 1e3;
}

/* Which phase the fill's next puts are in: the bytes stored (in memory
 * and on file) under BELOW_NUM/BELOW_DEN of the limit, or past it. */
static void put_phase(struct run *r, struct put_lat *pl)
{
	struct zm_store_stats st;
	uint64_t stored;

	zm_store_stats(r->store, &st);
	stored = st.compr_data_size + st.bd_bytes;
	if (stored > r->o->limit)
		pl->phase = 2;
	else if (stored >= r->o->limit / BELOW_DEN * BELOW_NUM)
		pl->phase = 1;
}

/* Replay accesses [from, to).  Timed if lat is not NULL: each access
 * (not the comparison of what a get returned), the hot pages' accesses
 * apart, and each get's latency into lat (ns, as many as gets). */
static void replay(struct run *r, const struct access *t, uint64_t from, uint64_t to,
		   const uint8_t *hot, uint32_t *lat, uint64_t *nlat)
{
	uint64_t all_ns = 0, hot_ns = 0;
	struct row *w = r->row;

	for (uint64_t k = from; k < to; k++) {
		uint64_t a = lat ? cli_now_ns() : 0, ns;
		int rc = 0;

		if (t[k].src != NO_SRC)
			do_put(r, t[k].idx, t[k].src, &w->failed_trace);
		else
			rc = zm_store_get(r->store, t[k].idx, r->buf);
		ns = lat ? cli_now_ns() - a : 0;
		if (t[k].src == NO_SRC) {
			if (rc)
				note_error(r, "get", t[k].idx, rc);
			else if (!page_ok(r, t[k].idx, r->buf))
				w->mismatches++;
			if (lat)
				lat[(*nlat)++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
		}
		all_ns += ns;
		if (lat && hot[t[k].idx])
			hot_ns += ns, w->hot_ops++;
	}
	if (!lat)
		return;
	w->ops = to - from;
	w->MBps = all_ns ? (double)w->ops * (double)r->ps / ((double)all_ns / 1e9) / MB : 0;
	w->hot_MBps = hot_ns ? (double)w->hot_ops * (double)r->ps / ((double)hot_ns / 1e9) / MB : 0;
}

/* Step 4: re-encode or write back the idle pages, timed per page. */
static void tier_step(struct run *r, enum mode m)
{
	struct row *w = r->row;
	uint64_t t0;
	long n;

	if (has_recompress(m)) {
		struct zm_store_stats a, b;

		zm_store_stats(r->store, &a);
		t0 = cli_now_ns();
		n = zm_store_recompress(r->store, ZM_STORE_PICK_IDLE, UINT64_MAX);
		w->recompress_ns = (double)(cli_now_ns() - t0);
		zm_store_stats(r->store, &b);
		if (n < 0)
			note_error(r, "recompress", 0, (int)n);
		/* per page tried: a page the secondary codec could not make
		 * smaller, or whose smaller copy found no room, cost its
		 * compression all the same */
		w->step_tried = b.recompress_tried - a.recompress_tried;
		w->step_recompressed = n > 0 ? (uint64_t)n : 0;
		w->recompress_ns = w->step_tried ? w->recompress_ns / (double)w->step_tried : 0;
	}
	if (has_backing(m)) {
		unsigned which = m == M_BOTH ? ZM_STORE_PICK_IDLE | ZM_STORE_PICK_HUGE :
					       ZM_STORE_PICK_IDLE;

		t0 = cli_now_ns();
		n = zm_store_writeback(r->store, which, UINT64_MAX);
		/* -EDQUOT, -ENOSPC: the file or the writeback limit is full,
		 * which the counters show; anything else is an error */
		if (n < 0 && n != -EDQUOT && n != -ENOSPC)
			note_error(r, "writeback", 0, (int)n);
		w->step_written = n > 0 ? (uint64_t)n : 0;
		w->writeback_ns = n > 0 ? (double)(cli_now_ns() - t0) / (double)n : 0;
	}
}

#ifndef __NR_cachestat
#define __NR_cachestat 451   /* the same number on every architecture */
#endif

/* Bytes of the file fd in the page cache: cachestat(2), else mincore
 * over a read-only mapping of it (which faults nothing in). */
static uint64_t file_cached(int fd)
{
	struct { uint64_t off, len; } range = { 0, 0 };  /* 0: to its end */
	struct { uint64_t cache, dirty, writeback, evicted, recently_evicted; } cs;
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *vec;
	struct stat sb;
	uint64_t n = 0;
	size_t pages;
	void *map;

	if (!syscall(__NR_cachestat, fd, &range, &cs, 0))
		return cs.cache * (uint64_t)pg;
	if (fstat(fd, &sb) || !sb.st_size)
		return 0;
	pages = ((size_t)sb.st_size + (size_t)pg - 1) / (size_t)pg;
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return 0;
	vec = malloc(pages);
	if (vec && !mincore(map, (size_t)sb.st_size, vec))
		for (size_t i = 0; i < pages; i++)
			n += vec[i] & 1;
	free(vec);
	munmap(map, (size_t)sb.st_size);
	return n * (uint64_t)pg;
}

/* The memory the store takes on the machine: what it added to the
 * process's resident memory (the pool's pages are among it) and its
 * file's bytes in the page cache. */
static uint64_t machine_bytes(const struct row *w)
{
	return w->rss_bytes + w->cache_bytes;
}

/* wb-clean, after the trace: wait for the automatic cleaner to finish
 * what the churn left it (its moved bytes still for SETTLE_QUIET_MS), at
 * most SETTLE_MAX_MS.  The file's state as the trace ended is kept. */
#define SETTLE_QUIET_MS 500
#define SETTLE_MAX_MS 5000

static void settle(struct run *r, enum mode m)
{
	struct row *w = r->row;
	struct zm_store_stats st;
	uint64_t t0 = cli_now_ns(), last, quiet = 0;

	zm_store_stats(r->store, &st);
	w->end_alloc_x = st.file_live_bytes ? (double)st.file_alloc_bytes /
						      (double)st.file_live_bytes : 0;
	if (m != M_WB_CLEAN)
		return;
	last = st.file_clean_bytes;
	while (quiet < SETTLE_QUIET_MS && cli_now_ns() - t0 < SETTLE_MAX_MS * 1000000ull) {
		usleep(50000);
		zm_store_stats(r->store, &st);
		quiet = st.file_clean_bytes == last ? quiet + 50 : 0;
		last = st.file_clean_bytes;
	}
	w->settle_s = (double)(cli_now_ns() - t0) / 1e9 - SETTLE_QUIET_MS / 1e3;
	if (w->settle_s < 0)
		w->settle_s = 0;
}

/* Step 6: the counters, the census, and every page read back. */
static void finish(struct run *r, size_t rss0)
{
	struct row *w = r->row;
	struct zm_store_stats st;
	uint64_t n = zm_store_nr_pages(r->store);
	size_t rss;

	zm_store_stats(r->store, &st);
	rss = zmi_os_rss_bytes();
	w->rss_bytes = rss > rss0 ? rss - rss0 : 0;
	w->pool_bytes = st.mem_used_total;
	w->pool_max = st.mem_used_max;
	w->compr_bytes = st.compr_data_size;
	w->bd_count = st.bd_count;
	w->bd_bytes = st.bd_bytes;
	w->bd_writes = st.bd_writes;
	w->bd_reads = st.bd_reads;
	w->writeback_failures = st.writeback_failures;
	w->file_alloc = st.file_alloc_bytes;
	w->file_live = st.file_live_bytes;
	w->clean_runs = st.file_clean_runs;
	w->clean_bytes = st.file_clean_bytes;
	w->waits = st.writeback_waits;
	w->wait_ns = st.writeback_wait_ns;
	w->pool_full = st.reclaim_pool_full;
	w->own = st.reclaim_sync;
	if (r->fd >= 0) {
		struct stat sb;

		if (!fstat(r->fd, &sb))
			w->file_bytes = (uint64_t)sb.st_blocks * 512;
		w->cache_bytes = file_cached(r->fd);
	}
	w->cache_mode = st.backing_cache_mode;
	w->recompressed = st.recompressed_pages;
	w->secondary = st.secondary_pages;
	w->tried = st.recompress_tried;
	for (uint64_t i = 0; i < n; i++) {
		unsigned kind;
		zm_handle_t h;
		size_t len;

		if (zm_store_slot_info(r->store, i, &kind, &h, &len))
			continue;
		w->in_memory += kind == ZM_STORE_SLOT_SAME || kind == ZM_STORE_SLOT_POOL ||
				kind == ZM_STORE_SLOT_HUGE;
		w->in_pool += kind == ZM_STORE_SLOT_POOL || kind == ZM_STORE_SLOT_HUGE;
		w->on_file += kind == ZM_STORE_SLOT_FILE;
	}
	for (uint64_t i = 0; i < n; i++) {
		int rc = zm_store_get(r->store, i, r->buf);

		if (rc) {
			note_error(r, "get", i, rc);
			w->mismatches++;
		} else if (!page_ok(r, i, r->buf)) {
			if (!w->mismatches)
				fprintf(stderr, "zmem tierbench: page %llu reads back wrong\n",
					(unsigned long long)i);
			w->mismatches++;
		}
	}
}

/* A backing file in dir, already unlinked: it goes when the store is done
 * with it, however the run ends.  The descriptor, or -1 after a message. */
static int scratch_file(const char *dir)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/zmem-tierbench-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "zmem tierbench: creating a file in %s: %s\n", dir, strerror(errno));
		return -1;
	}
	unlink(path);
	if (fd == 0) {  /* backing_fd 0 means none */
		int fd2 = dup(fd);

		close(fd);
		fd = fd2;
	}
	return fd;
}

static int run_mode(const struct opts *o, const struct bench_data *d, const struct access *t,
		    const uint8_t *hot, enum mode m, uint32_t *lat, struct row *w)
{
	uint32_t n = (uint32_t)(d->len / o->page_size);
	struct zm_store_config cfg = {
		.nr_pages = n, .page_size = o->page_size,
		.codec = m == M_ZSTD ? o->recompress : o->codec,
		.limit_bytes = has_limit(m) ? o->limit : 0,
		.recompress_codec = has_recompress(m) ? o->recompress : NULL,
		.idle_after_ms = has_recompress(m) ? o->idle_after : 0,
		.recompress_rate = o->rate,
		.backing_readback = o->readback,
		.unit_pages = o->unit_pages,
		.file_clean_rate = m == M_WB_CLEAN ? o->clean_rate : 0,
		.writeback_sync = m == M_WB_SYNC,
	};
	struct run r = { .o = o, .d = d, .ps = o->page_size, .row = w, .fd = -1 };
	struct put_lat pl = { .lo = lat, .hi = lat + n };
	uint64_t warm = o->ops * WARMUP_PCT / 100, nlat = 0, t0;
	uint32_t p99;
	size_t rss0;
	int fd = -1, rc;

	memset(w, 0, sizeof(*w));
	r.ref = malloc((size_t)n * sizeof(*r.ref));
	r.buf = malloc(r.ps);
	r.zero = calloc(1, r.ps);
	if (!r.ref || !r.buf || !r.zero) {
		fprintf(stderr, "zmem tierbench: out of memory\n");
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++)
		r.ref[i] = NO_SRC;
	if (m == M_WB_NBD) {
		cfg.backing_uri = o->uri;
	} else if (has_backing(m)) {
		fd = scratch_file(o->dir);
		if (fd < 0)
			goto fail;
		cfg.backing_fd = fd;
		r.fd = fd;
	}
	rss0 = zmi_os_rss_bytes();
	zmi_store_backing_cache_fail = m == M_WB_CACHED;
	zmi_store_backing_direct_fail = m == M_WB_DROP;
	rc = zm_store_create(&cfg, &r.store);
	zmi_store_backing_cache_fail = 0;
	zmi_store_backing_direct_fail = 0;
	if (rc) {
		fprintf(stderr, "zmem tierbench: %s: creating the store: %s\n", mode_names[m],
			strerror(-rc));
		goto fail;
	}
	cli_progress("%s: fill", mode_names[m]);
	r.pl = &pl;
	t0 = cli_now_ns();
	for (uint32_t i = 0, run, chunk = n / FILL_CHUNKS + 1; i < n; i += run) {
		/* a unit's pages at a time (units form there); recompress
		 * modes: the pages of the chunks before cool while a chunk
		 * arrives (FILL_CHUNKS) */
		run = o->unit_pages - i % o->unit_pages;
		run = run < n - i ? run : n - i;
		if (has_recompress(m) && (!i || i / chunk != (i - 1) / chunk)) {
			if (i)
				zm_store_recompress(r.store, ZM_STORE_PICK_IDLE, UINT64_MAX);
			zm_store_mark_idle(r.store, 0);
		}
		if (has_limit(m) && pl.phase < 2 && i / PHASE_EVERY != (i + run) / PHASE_EVERY)
			put_phase(&r, &pl);
		put_run(&r, i, run, &w->failed_fill);
	}
	r.pl = NULL;
	w->fill_MBps = (double)d->len / ((double)(cli_now_ns() - t0) / 1e9) / MB;
	w->put_lo_n = pl.nlo, w->put_hi_n = pl.nhi;
	w->put_lo_p50 = pct_us(pl.lo, pl.nlo, 500);
	w->put_lo_p99 = pct_us(pl.lo, pl.nlo, 990);
	w->put_lo_p999 = pct_us(pl.lo, pl.nlo, 999);
	w->put_hi_p50 = pct_us(pl.hi, pl.nhi, 500);
	w->put_hi_p99 = pct_us(pl.hi, pl.nhi, 990);
	w->put_hi_p999 = pct_us(pl.hi, pl.nhi, 999);
	w->limit_MBps = pl.hi_ns ? (double)pl.hi_pages * (double)r.ps / ((double)pl.hi_ns / 1e9) / MB
				 : 0;
	zm_store_mark_idle(r.store, 0);
	cli_progress("%s: warm-up", mode_names[m]);
	replay(&r, t, 0, warm, hot, NULL, NULL);
	cli_progress("%s: tiering", mode_names[m]);
	tier_step(&r, m);
	cli_progress("%s: trace", mode_names[m]);
	replay(&r, t, warm, o->ops, hot, lat, &nlat);
	if (nlat) {
		qsort(lat, nlat, sizeof(*lat), cmp_u32);
		p99 = lat[(nlat - 1) * 99 / 100];
		w->get_p99_us = p99 / 1e3;
	}
	if (has_backing(m)) {
		cli_progress("%s: settle", mode_names[m]);
		settle(&r, m);
	}
	cli_progress("%s: verify", mode_names[m]);
	finish(&r, rss0);
	cli_progress_done();
	zm_store_destroy(r.store);
	if (fd >= 0)
		close(fd);
	free(r.ref), free(r.buf), free(r.zero);
	w->ran = true;
	return 0;
fail:
	cli_progress_done();
	if (fd >= 0)
		close(fd);
	free(r.ref), free(r.buf), free(r.zero);
	return -1;
}

/* ---- the floor of a writeback: a bare pwrite loop ------------------- */

/* ns per pwrite() of len bytes, for count pages at the offsets of every
 * stride-th index, into a fresh file in dir the size of the store's; -1
 * if it could not be made.  direct: synchronous O_DIRECT writes of a
 * whole page each (len is then ps): the floor of a writeback that writes
 * a page a call (zram's before its batching); -1 where the file system
 * refuses O_DIRECT. */
static double pwrite_ns(const char *dir, size_t len, size_t ps, uint64_t count, uint64_t n,
			bool direct)
{
	uint64_t stride = count && n / count ? n / count : 1, t0, ns = 0;
	int fd = scratch_file(dir), fl;
	uint8_t *b = NULL;
	bool ok;

	if (fd < 0)
		return -1;
	if (direct) {
		fl = fcntl(fd, F_GETFL);
		ok = fl >= 0 && !fcntl(fd, F_SETFL, fl | O_DIRECT) &&
		     !posix_memalign((void **)&b, 4096, ps);
	} else {
		ok = (b = malloc(len ? len : 1)) != NULL;
	}
	ok = ok && !ftruncate(fd, (off_t)(n * ps));
	for (size_t i = 0; ok && i < len; i++)  /* not same-filled, like a page */
		b[i] = (uint8_t)(i * 131 + 7);
	t0 = cli_now_ns();
	for (uint64_t i = 0; ok && i < count; i++)
		ok = pwrite(fd, b, len, (off_t)((i * stride % n) * ps)) == (ssize_t)len;
	if (ok)
		ns = cli_now_ns() - t0;
	close(fd);
	free(b);
	return ok && count ? (double)ns / (double)count : -1;
}

/* ---- output --------------------------------------------------------- */

static double ratio(double a, double b)
{
	return b > 0 ? a / b : -1;
}

struct summary {
	/* both: the limit held, nothing failed, nothing wrong */
	bool both;
	uint64_t both_failed, both_max, both_mismatches;
	/* recompress against the references */
	double mem_vs_zstd, page_vs_zstd, mem_vs_lz4, hot_vs_lz4;
	/* writeback against pwrite */
	double wb_ns, pw_ns, wb_bytes, od_ns;
	uint64_t wb_pages;
	const char *wb_mode;
};

static double per_page(const struct row *w)
{
	return w->in_pool ? (double)w->pool_bytes / (double)w->in_pool : -1;
}

static void summarize(const struct opts *o, const struct row *rows, uint64_t n,
		      struct summary *s)
{
	const struct row *b = &rows[M_BOTH], *rc = &rows[M_RECOMPRESS];
	const struct row *l4 = &rows[M_LZ4], *zs = &rows[M_ZSTD], *wb = NULL;

	memset(s, 0, sizeof(*s));
	s->mem_vs_zstd = s->page_vs_zstd = s->mem_vs_lz4 = s->hot_vs_lz4 = -1;
	s->wb_ns = s->pw_ns = s->od_ns = -1;
	s->both = b->ran;
	s->both_failed = b->failed_fill + b->failed_trace;
	s->both_max = b->pool_max > b->pool_bytes ? b->pool_max : b->pool_bytes;
	s->both_mismatches = b->mismatches;
	if (rc->ran && zs->ran) {
		s->mem_vs_zstd = ratio((double)rc->pool_bytes, (double)zs->pool_bytes);
		s->page_vs_zstd = ratio(per_page(rc), per_page(zs));
	}
	if (rc->ran && l4->ran) {
		s->mem_vs_lz4 = ratio((double)rc->pool_bytes, (double)l4->pool_bytes);
		s->hot_vs_lz4 = ratio(rc->hot_MBps, l4->hot_MBps);
	}
	if (rows[M_WRITEBACK].ran && rows[M_WRITEBACK].step_written)
		wb = &rows[M_WRITEBACK], s->wb_mode = "writeback";
	else if (b->ran && b->step_written)
		wb = b, s->wb_mode = "both";
	if (!wb)
		return;
	s->wb_ns = wb->writeback_ns;
	s->wb_pages = wb->step_written;
	/* the mean bytes of a page on the file; the primary codec's mean
	 * object if the store does not tell */
	if (wb->bd_count && wb->bd_bytes)
		s->wb_bytes = (double)wb->bd_bytes / (double)wb->bd_count;
	else if (l4->ran && l4->in_pool)
		s->wb_bytes = (double)l4->compr_bytes / (double)l4->in_pool;
	else
		s->wb_bytes = (double)o->page_size / 2;
	s->pw_ns = pwrite_ns(o->dir, (size_t)(s->wb_bytes + 0.5), o->page_size, s->wb_pages, n,
			     false);
	s->od_ns = pwrite_ns(o->dir, o->page_size, o->page_size, s->wb_pages, n, true);
}

static void print_table(const struct opts *o, const struct bench_data *d,
			const struct row *rows, uint64_t n, const struct summary *s)
{
	char h[2][32];

	printf("zmem tierbench: %s, %llu pages of %zu bytes (%s)\nin units of up to %u, "
	       "limit %s; codec %s, secondary %s; %llu accesses,\n%u%% to %u%% of the pages, "
	       "%u%% rewrites, seed %llu (measured: the last %d%%)\n\n", d->name,
	       (unsigned long long)n, o->page_size, zmi_human_bytes(d->len, h[0], 32),
	       o->unit_pages,
	       zmi_human_bytes(o->limit, h[1], 32),
	       o->codec, o->recompress, (unsigned long long)o->ops, o->hot_access, o->hot_pages,
	       o->rewrite, (unsigned long long)o->seed, 100 - WARMUP_PCT);
	/* 80 columns; --wide: 126 */
	if (o->wide)
		printf("%-10s %8s %6s %8s %6s %8s %7s %9s %11s %7s %7s %6s %10s %10s\n", "mode",
		       "ops", "MB/s", "hot MB/s", "failed", "pool MiB", "rss MiB", "cache MiB",
		       "machine MiB", "in mem", "on file", "recomp", "get p99 us", "file alloc");
	else
		printf("%-10s %6s %8s %6s %8s %11s %7s %6s %10s\n", "mode", "MB/s", "hot MB/s",
		       "failed", "pool MiB", "machine MiB", "on file", "recomp", "get p99 us");
	for (int m = 0; m < NMODES; m++) {
		const struct row *w = &rows[m];

		if (!w->ran)
			continue;
		if (o->wide)
			printf("%-10s %8llu %6.0f %8.0f %6llu %8.1f %7.1f %9.1f %11.1f %7llu %7llu "
			       "%6llu %10.1f %9.2fx\n",
			       mode_names[m], (unsigned long long)w->ops, w->MBps, w->hot_MBps,
			       (unsigned long long)(w->failed_fill + w->failed_trace),
			       w->pool_bytes / MIB, w->rss_bytes / MIB, w->cache_bytes / MIB,
			       machine_bytes(w) / MIB, (unsigned long long)w->in_memory,
			       (unsigned long long)w->on_file, (unsigned long long)w->recompressed,
			       w->get_p99_us,
			       w->file_live ? (double)w->file_alloc / (double)w->file_live : 0);
		else
			printf("%-10s %6.0f %8.0f %6llu %8.1f %11.1f %7llu %6llu %10.1f\n",
			       mode_names[m], w->MBps, w->hot_MBps,
			       (unsigned long long)(w->failed_fill + w->failed_trace),
			       w->pool_bytes / MIB, machine_bytes(w) / MIB,
			       (unsigned long long)w->on_file, (unsigned long long)w->recompressed,
			       w->get_p99_us);
	}
	printf("\nfailed = puts refused (fill + trace); hot MB/s = the hot pages' accesses "
	       "alone;\n");
	if (o->wide)
		printf("in mem / on file = the slots' census at the end (same-filled pages are "
		       "in\nmemory); rss = resident memory the store added (the pool's pages among "
		       "it);\ncache = the backing file's bytes in the page cache after the trace;\n"
		       "machine = rss + cache; recomp = pages re-encoded with the secondary codec;\n"
		       "file alloc = the packed file's blocks in use over the live bytes on it\n"
		       "(file_alloc_bytes / file_live_bytes).\n");
	else
		printf("machine = resident memory the store added (the pool's pages among it) and\n"
		       "the backing file's bytes in the page cache after the trace; on file = the\n"
		       "pages on the file at the end; recomp = pages re-encoded with the secondary\n"
		       "codec.  --wide: these apart, the pages in memory, the file's allocation.\n");
	for (int m = 0, first = 1; m < NMODES; m++) {
		const struct row *w = &rows[m];

		if (!w->step_tried && !w->step_written)
			continue;
		if (first)
			printf("\nTiering step (per page):\n");
		first = 0;
		printf("  %-10s", mode_names[m]);
		if (w->step_tried)
			printf(" %llu of %llu tried recompressed, %.0f ns a try%s",
			       (unsigned long long)w->step_recompressed,
			       (unsigned long long)w->step_tried, w->recompress_ns,
			       w->step_written ? ";" : "");
		if (w->step_written)
			printf(" %llu written back, %.0f ns each",
			       (unsigned long long)w->step_written, w->writeback_ns);
		putchar('\n');
	}
	for (int m = 0, first = 1; m < NMODES; m++) {
		const struct row *w = &rows[m];

		if (!w->ran || !has_backing((enum mode)m) || !w->put_hi_n)
			continue;
		if (first)
			printf("\nThe fill's puts (us; below = the bytes stored under %d/%d of the "
			       "limit,\nat = past it):\n", BELOW_NUM, BELOW_DEN);
		first = 0;
		printf("  %-10s below p50 %5.1f p99 %6.1f p99.9 %7.1f (%llu puts);\n  %-10s at    "
		       "p50 %5.1f p99 %6.1f p99.9 %7.1f (%llu puts), %.0f MB/s;\n  %-10s %llu puts "
		       "waited for room, %.1f us each;\n  %-10s %llu found the pool's pages full, "
		       "%llu reclaimed themselves\n",
		       mode_names[m], w->put_lo_p50, w->put_lo_p99, w->put_lo_p999,
		       (unsigned long long)w->put_lo_n, "", w->put_hi_p50, w->put_hi_p99,
		       w->put_hi_p999, (unsigned long long)w->put_hi_n, w->limit_MBps,
		       "", (unsigned long long)w->waits,
		       w->waits ? (double)w->wait_ns / 1e3 / (double)w->waits : 0.0, "",
		       (unsigned long long)w->pool_full, (unsigned long long)w->own);
	}
	if (!o->wide) {  /* the rest passes 80 columns */
		printf("\nThe backing file's blocks and the targets: --wide.\n");
		return;
	}
	for (int m = 0, first = 1; m < NMODES; m++) {
		const struct row *w = &rows[m];

		if (!w->bd_count && !w->bd_writes && !w->bd_reads)
			continue;
		if (first)
			printf("\nOn file (the blocks the backing file takes, against the pages' "
			       "bytes there):\n");
		first = 0;
		printf("  %-10s blocks in use %.1f MiB for %.1f MiB live (%.2fx; st_blocks %.1f MiB; "
		       "%.2fx as the trace ended);\n  %-10s cleaner: %llu runs moved %.1f MiB, "
		       "%.2f s after the trace\n", mode_names[m], w->file_alloc / MIB,
		       w->file_live / MIB,
		       w->file_live ? (double)w->file_alloc / (double)w->file_live : 0,
		       w->file_bytes / MIB, w->end_alloc_x, "", (unsigned long long)w->clean_runs,
		       w->clean_bytes / MIB, w->settle_s);
		printf("  %-10s %.1f MiB for %.1f MiB (%.2fx; whole pages %.1f MiB); %llu writes, "
		       "%llu reads;\n  %-10s page cache %s: %.1f MiB cached, %.1f%% of the bytes "
		       "there\n", "", (double)w->file_bytes / MIB,
		       (double)w->bd_bytes / MIB,
		       w->bd_bytes ? (double)w->file_bytes / (double)w->bd_bytes : 0,
		       (double)w->bd_count * (double)o->page_size / MIB,
		       (unsigned long long)w->bd_writes, (unsigned long long)w->bd_reads, "",
		       w->cache_mode == ZM_STORE_CACHE_DROP ? "dropped" :
		       w->cache_mode == ZM_STORE_CACHE_DIRECT ? "direct" : "kept",
		       (double)w->cache_bytes / MIB,
		       w->bd_bytes ? 100.0 * (double)w->cache_bytes / (double)w->bd_bytes : 0);
	}
	printf("\nTargets (figures only):\n");

	if (s->both)
		printf("  both: %llu failed writes (target 0); pool at most %.1f MiB of a %.1f MiB "
		       "limit; %llu pages read back wrong\n", (unsigned long long)s->both_failed,
		       s->both_max / MIB, o->limit / MIB, (unsigned long long)s->both_mismatches);
	if (s->mem_vs_zstd >= 0 || s->hot_vs_lz4 >= 0)
		printf("  recompress: pool %.3fx zstd-only's (%.3fx per page in the pool; target "
		       "<= 1.10), %.3fx lz4-only's;\n              hot-page throughput %.3fx "
		       "lz4-only's (target >= 0.90)\n", s->mem_vs_zstd, s->page_vs_zstd,
		       s->mem_vs_lz4, s->hot_vs_lz4);
	for (int m = 0; m < NMODES; m++) {
		const struct row *w = &rows[m], *l4 = &rows[M_LZ4];

		if (!w->ran || !has_backing((enum mode)m) || !w->bd_bytes)
			continue;
		printf("  %s: page cache %.1f MiB, %.1f%% of the %.1f MiB on file (target <= 5%%)",
		       mode_names[m], w->cache_bytes / MIB,
		       100.0 * (double)w->cache_bytes / (double)w->bd_bytes, w->bd_bytes / MIB);
		if (l4->ran)
			printf(";\n    machine memory %.1f MiB, lz4-only's %.1f MiB: %.1f MiB less, "
			       "%.0f%% of the bytes on file (target >= 90%%)",
			       machine_bytes(w) / MIB, machine_bytes(l4) / MIB,
			       ((double)machine_bytes(l4) - (double)machine_bytes(w)) / MIB,
			       100.0 * ((double)machine_bytes(l4) - (double)machine_bytes(w)) /
				       (double)w->bd_bytes);
		putchar('\n');
	}
	for (int m = 0; m < NMODES; m++) {
		const struct row *w = &rows[m];

		if (!w->ran || !has_backing((enum mode)m) || !w->file_live)
			continue;
		printf("  %s: file blocks %.2fx the live bytes after the trace (target <= 1.2 "
		       "with the cleaner%s); %.2fx as it ended\n", mode_names[m],
		       (double)w->file_alloc / (double)w->file_live,
		       m == M_WB_CLEAN ? "" : "; off here", w->end_alloc_x);
	}
	if (s->wb_ns >= 0)
		printf("  writeback (%s): %.0f ns per page over %llu pages; a bare pwrite of %.0f "
		       "bytes %.0f ns: %.2fx\n", s->wb_mode, s->wb_ns, (unsigned long long)s->wb_pages,
		       s->wb_bytes, s->pw_ns, ratio(s->wb_ns, s->pw_ns));
	if (rows[M_WB_NBD].writeback_ns > 0 && rows[M_WRITEBACK].writeback_ns > 0)
		printf("  wb-nbd: writeback %.0f ns per page to the export, the file's %.0f ns: "
		       "%.2fx its throughput (target >= 0.5)\n", rows[M_WB_NBD].writeback_ns,
		       rows[M_WRITEBACK].writeback_ns,
		       rows[M_WRITEBACK].writeback_ns / rows[M_WB_NBD].writeback_ns);
	if (s->wb_ns > 0 && s->od_ns >= 0)
		printf("  writeback against a page-by-page O_DIRECT pwrite (%.0f ns): %.2fx as fast "
		       "(target >= 4x)\n", s->od_ns, s->od_ns / s->wb_ns);
	for (int m = 0; m < NMODES; m++) {
		const struct row *w = &rows[m], *sy = &rows[M_WB_SYNC];

		if (!w->ran || !has_backing((enum mode)m) || !w->put_hi_n || !w->put_lo_p99)
			continue;
		printf("  %s: put p99 at the limit %.2fx below it (target <= 2)", mode_names[m],
		       w->put_hi_p99 / w->put_lo_p99);
		if (m != M_WB_SYNC && sy->ran && sy->limit_MBps > 0)
			printf("; puts at the limit %.2fx wb-sync's MB/s (target >= 1)",
			       w->limit_MBps / sy->limit_MBps);
		putchar('\n');
	}
}

static void jnum(struct json *j, const char *key, double v)
{
	if (v >= 0)
		json_fixed(j, key, v, 4);
	else
		json_null(j, key);
}

static void print_json(const struct opts *o, const struct bench_data *d,
		       const struct row *rows, uint64_t n, const struct summary *s)
{
	struct json j;

	json_begin(&j, stdout, "tierbench");
	json_str(&j, "data", d->name);
	json_uint(&j, "pages", n);
	json_uint(&j, "page_size_bytes", o->page_size);
	json_uint(&j, "unit_pages", o->unit_pages);
	json_uint(&j, "limit_bytes", o->limit);
	json_str(&j, "codec", o->codec);
	json_str(&j, "recompress_codec", o->recompress);
	json_uint(&j, "ops", o->ops);
	json_uint(&j, "hot_access_pct", o->hot_access);
	json_uint(&j, "hot_pages_pct", o->hot_pages);
	json_uint(&j, "rewrite_pct", o->rewrite);
	json_uint(&j, "seed", o->seed);
	json_uint(&j, "idle_after_ms", o->idle_after);
	json_uint(&j, "file_clean_rate_Bps", (uint64_t)o->clean_rate);
	json_str(&j, "plot", o->plot);
	json_array(&j, "results");
	for (int m = 0; m < NMODES; m++) {
		const struct row *w = &rows[m];

		if (!w->ran)
			continue;
		json_object(&j, NULL);
		json_str(&j, "mode", mode_names[m]);
		json_uint(&j, "ops", w->ops);
		json_fixed(&j, "MBps", w->MBps, 1);
		json_fixed(&j, "hot_MBps", w->hot_MBps, 1);
		json_fixed(&j, "fill_MBps", w->fill_MBps, 1);
		json_uint(&j, "failed_writes", w->failed_fill + w->failed_trace);
		json_uint(&j, "failed_fill", w->failed_fill);
		json_uint(&j, "pool_bytes", w->pool_bytes);
		json_uint(&j, "pool_max_bytes", w->pool_max);
		json_uint(&j, "compr_bytes", w->compr_bytes);
		json_uint(&j, "rss_bytes", w->rss_bytes);
		json_uint(&j, "pages_in_memory", w->in_memory);
		json_uint(&j, "pages_in_pool", w->in_pool);
		json_uint(&j, "pages_on_file", w->on_file);
		json_uint(&j, "bd_count", w->bd_count);
		json_uint(&j, "bd_bytes", w->bd_bytes);
		json_uint(&j, "bd_writes", w->bd_writes);
		json_uint(&j, "bd_reads", w->bd_reads);
		json_uint(&j, "writeback_failures", w->writeback_failures);
		json_uint(&j, "recompressed_pages", w->recompressed);
		json_uint(&j, "recompress_tried", w->tried);
		json_uint(&j, "secondary_pages", w->secondary);
		json_uint(&j, "step_tried", w->step_tried);
		json_uint(&j, "step_recompressed", w->step_recompressed);
		json_uint(&j, "step_written", w->step_written);
		json_fixed(&j, "get_p99_us", w->get_p99_us, 2);
		json_uint(&j, "put_below_n", w->put_lo_n);
		json_fixed(&j, "put_below_p50_us", w->put_lo_p50, 2);
		json_fixed(&j, "put_below_p99_us", w->put_lo_p99, 2);
		json_fixed(&j, "put_below_p999_us", w->put_lo_p999, 2);
		json_uint(&j, "put_limit_n", w->put_hi_n);
		json_fixed(&j, "put_limit_p50_us", w->put_hi_p50, 2);
		json_fixed(&j, "put_limit_p99_us", w->put_hi_p99, 2);
		json_fixed(&j, "put_limit_p999_us", w->put_hi_p999, 2);
		json_fixed(&j, "put_limit_MBps", w->limit_MBps, 1);
		json_uint(&j, "writeback_waits", w->waits);
		json_uint(&j, "writeback_wait_ns", w->wait_ns);
		json_uint(&j, "reclaim_pool_full", w->pool_full);
		json_uint(&j, "reclaim_sync", w->own);
		json_uint(&j, "errors", w->errors);
		json_uint(&j, "mismatches", w->mismatches);
		json_bool(&j, "verified", !(w->mismatches || w->errors));
		json_uint(&j, "file_bytes", w->file_bytes);
		json_uint(&j, "file_alloc_bytes", w->file_alloc);
		json_uint(&j, "file_live_bytes", w->file_live);
		json_uint(&j, "file_clean_runs", w->clean_runs);
		json_uint(&j, "file_clean_bytes", w->clean_bytes);
		jnum(&j, "file_alloc_x_trace_end", w->file_live ? w->end_alloc_x : -1);
		jnum(&j, "clean_settle_s", m == M_WB_CLEAN ? w->settle_s : -1);
		json_uint(&j, "file_cache_bytes", w->cache_bytes);
		json_uint(&j, "backing_cache_mode", w->cache_mode);
		json_uint(&j, "machine_bytes", machine_bytes(w));
		jnum(&j, "recompress_ns_per_try", w->step_tried ? w->recompress_ns : -1);
		jnum(&j, "writeback_ns_per_page", w->step_written ? w->writeback_ns : -1);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_object(&j, "targets");
	if (s->both) {
		json_uint(&j, "both_failed_writes", s->both_failed);
		json_uint(&j, "both_pool_max_bytes", s->both_max);
		json_uint(&j, "both_mismatches", s->both_mismatches);
	}
	json_uint(&j, "limit_bytes", o->limit);
	jnum(&j, "recompress_pool_vs_zstd", s->mem_vs_zstd);
	jnum(&j, "recompress_per_page_vs_zstd", s->page_vs_zstd);
	jnum(&j, "recompress_pool_vs_lz4", s->mem_vs_lz4);
	jnum(&j, "recompress_hot_MBps_vs_lz4", s->hot_vs_lz4);
	jnum(&j, "writeback_ns_per_page", s->wb_ns);
	jnum(&j, "pwrite_ns_per_page", s->pw_ns);
	jnum(&j, "pwrite_bytes", s->wb_ns >= 0 ? s->wb_bytes : -1);
	jnum(&j, "writeback_vs_pwrite", s->wb_ns >= 0 ? ratio(s->wb_ns, s->pw_ns) : -1);
	jnum(&j, "direct_pwrite_ns_per_page", s->od_ns);
	jnum(&j, "writeback_speedup_vs_direct", s->wb_ns > 0 && s->od_ns >= 0 ? s->od_ns / s->wb_ns : -1);
	json_object_end(&j);
	json_end(&j);
}

/* Memory and throughput by mode: two bar panels over the modes that ran,
 * a group of bars per mode (modes are categories: no line joins them).
 * The memory panel draws the limit the tiered modes keep to, and under
 * each mode its failed writes (puts refused at the limit, in the fill
 * and the trace), red when there are any.  Memory is in KiB when all of
 * it is under 1 MiB. */
static int write_plot(const char *path, const struct opts *o, const struct bench_data *d,
		      const struct row *rows)
{
	static const char *const mem_names[] = { "pool", "pool max", "RSS" };
	static const char *const speed_names[] = { "trace", "hot set", "fill" };
	double y[6][NMODES], unit, top = (double)o->limit;
	const char *x[NMODES], *note[NMODES];
	char notes[NMODES][40], title[256], a[32], b[32], reflab[96], ytitle[32];
	bool alert[NMODES];
	struct plot_series s[3];
	size_t nx = 0;
	FILE *f;

	for (int m = 0; m < NMODES; m++) {
		const struct row *w = &rows[m];
		uint64_t failed = w->failed_fill + w->failed_trace;

		if (!w->ran)
			continue;
		x[nx] = mode_names[m];
		y[0][nx] = (double)w->pool_bytes;
		y[1][nx] = (double)w->pool_max;
		y[2][nx] = (double)w->rss_bytes;
		y[3][nx] = w->MBps;
		y[4][nx] = w->hot_MBps;
		y[5][nx] = w->fill_MBps;
		for (int i = 0; i < 3; i++)
			top = y[i][nx] > top ? y[i][nx] : top;
		snprintf(notes[nx], sizeof(notes[nx]), "%llu failed", (unsigned long long)failed);
		note[nx] = notes[nx];
		alert[nx] = failed > 0;
		nx++;
	}
	unit = top < MIB ? 1024 : MIB;
	for (size_t k = 0; k < nx; k++)
		for (int i = 0; i < 3; i++)
			y[i][k] /= unit;
	snprintf(title, sizeof(title), "zmem tierbench: %s, %s, limit %s, %s / %s", d->name,
		 zmi_human_bytes(d->len, a, sizeof(a)), zmi_human_bytes(o->limit, b, sizeof(b)),
		 o->codec, o->recompress);
	snprintf(reflab, sizeof(reflab), "memory limit %s (all modes but lz4-only, zstd-only)", b);
	snprintf(ytitle, sizeof(ytitle), "memory (%s)", unit == MIB ? "MiB" : "KiB");
	f = plot_begin(path, 70 + 2 * (300 + 90) + 10, title);
	if (!f)
		return -errno;
	plot_legend_bars(f, 80, 52, mem_names, 3, reflab);
	for (int i = 0; i < 3; i++)
		s[i] = (struct plot_series){ mem_names[i], y[i] };
	plot_bars(f, 90, 300, &(struct plot_axes){ .title = "memory by mode",
						   .xtitle = "mode (failed writes: puts refused)",
						   .ytitle = ytitle, .xnotes = note,
						   .xalert = alert, .ref = (double)o->limit / unit,
						   .ref_label = reflab }, x, nx, s, 3);
	plot_legend_bars(f, 80, 90 + 300 + 72, speed_names, 3, NULL);
	for (int i = 0; i < 3; i++)
		s[i] = (struct plot_series){ speed_names[i], y[3 + i] };
	plot_bars(f, 90 + 300 + 110, 300,
		  &(struct plot_axes){ .title = "throughput by mode: the measured trace, its hot "
						"set, the fill",
				       .xtitle = "mode", .ytitle = "throughput (MB/s)" },
		  x, nx, s, 3);
	return plot_end(f);
}

/* ---- options -------------------------------------------------------- */

static int parse_modes(const char *s, bool *on)
{
	char buf[256], *save, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	memset(on, 0, sizeof(bool) * NMODES);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int m;

		for (m = 0; m < NMODES && strcmp(tok, mode_names[m]); m++)
			;
		if (m == NMODES)
			return cli_usage("tierbench", "unknown mode '%s' in --modes (none, recompress, "
					 "writeback, both, lz4-only, zstd-only, wb-cached, wb-drop, "
					 "wb-nbd, wb-clean, wb-sync)", tok);
		on[m] = true;
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	const char *tmp = getenv("TMPDIR"), *modes = NULL, *hot = NULL;
	int idle = DEF_IDLE_AFTER;
	uint64_t rate = 0, rewrite = DEF_REWRITE, units = 1;
	char idle_def[16], seed_def[24], rate_def[48], clean_def[48];
	int rc;
	const struct opt table[] = {
		O_STR("data", 'd', &o->data, "SPEC", "the data set, as zmem bench takes it",
		      "memory"),
		O_SIZE("size", 's', &o->size, "SIZE", "bytes of data asked for",
		       "4 x --mem-limit, or 256M", 8192, (double)((uint64_t)1 << 40)),
		O_SIZE("mem-limit", 'l', &o->limit, "SIZE", "the tiered modes' memory limit",
		       "a quarter of the data", 4096, (double)((uint64_t)1 << 40)),
		O_STR("modes", 'm', &modes, "LIST",
		      "of none,recompress,writeback,both,lz4-only,\nzstd-only,wb-cached,wb-drop,wb-nbd,\n"
		      "wb-clean,wb-sync",
		      "all but wb-cached and wb-drop (wb-nbd\nwith --backing-uri)"),
		O_STR("backing-uri", 'U', &o->uri, "URI",
		      "wb-nbd's NBD export (nbd+unix:///?socket=\nPATH, nbd://HOST/NAME): at "
		      "least the data's\nsize and two pages", "none"),
		O_STR("codec", 'c', &o->codec, "NAME", "the primary codec", "lz4"),
		O_STR("recompress", 'R', &o->recompress, "NAME",
		      "the secondary codec, and zstd-only's", "zstd:3"),
		O_DUR("idle-after", 'i', &idle, "DURATION",
		      "automatic recompression of pages idle this\nlong (0: only the explicit "
		      "step; bare: ms)", idle_def, 1, 0, 3600000),
		O_U64("recompress-rate", 'r', &rate, "N", "its bound, pages a second",
		      rate_def, 1, 1000000),
		O_STR("hot", 'H', &hot, "A/P", "A% of the accesses go to P% of the pages",
		      "80/20"),
		O_U64("rewrite", 'w', &rewrite, "PCT", "accesses that put a page instead of reading",
		      "30", 0, 100),
		O_U64("ops", 'o', &o->ops, "N", "accesses", "4 per page of data", 1, 0),
		O_U64("seed", 'S', &o->seed, "S", "the trace's seed (printed)", seed_def, 0, 0),
		O_SIZE("clean-rate", 'C', &o->clean_rate, "SIZE",
		       "wb-clean's automatic file cleaner, bytes a\nsecond", clean_def, 1,
		       (double)((uint64_t)1 << 40)),
		O_FLAG("readback", 'b', &o->readback,
		       "a get of a written-back page brings it back\nto memory"),
		O_STR("dir", 'D', &o->dir, "DIR",
		      "where the backing files go (removed after)", "$TMPDIR or /var/tmp"),
		O_SIZE("page-size", 'p', &o->page_size, "SIZE", "a power of two", "4096", 4096,
		       65536),
		O_U64("unit-pages", 'u', &units, "N",
		      "the store's multi-page units: 1, 2, 4, 8 or\n16 (the fill puts a unit at "
		      "a time)", "1", 1, ZM_STORE_UNIT_MAX),
		O_STR("plot", 'P', &o->plot, "FILE.svg", "memory and throughput by mode", "none"),
		O_FLAG("wide", 0, &o->wide,
		       "every column of the table (126), the backing\nfile's detail and the "
		       "targets"),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead of the tables"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"tierbench", "[OPTIONS]",
		"Cold data tiering against a memory limit: the same data, four times the\n"
		"limit, and the same trace with a hot set through a store per mode, verified.",
		table, NULL,
	};

	memset(o, 0, sizeof(*o));
	o->data = "memory";
	o->codec = "lz4";
	o->recompress = "zstd:3";
	o->dir = tmp && *tmp ? tmp : "/var/tmp";
	o->page_size = 4096;
	o->hot_access = DEF_HOT_ACCESS;
	o->hot_pages = DEF_HOT_PAGES;
	o->seed = DEF_SEED;
	snprintf(idle_def, sizeof(idle_def), "%d", DEF_IDLE_AFTER);
	snprintf(rate_def, sizeof(rate_def), "the store's, %u", ZM_STORE_RECOMPRESS_RATE);
	snprintf(seed_def, sizeof(seed_def), "%d", DEF_SEED);
	snprintf(clean_def, sizeof(clean_def), "%lluM (the store's suggestion)",
		 (unsigned long long)(ZM_STORE_CLEAN_RATE >> 20));
	o->clean_rate = ZM_STORE_CLEAN_RATE;
	for (int m = 0; m < NMODES; m++)
		o->modes[m] = m != M_WB_CACHED && m != M_WB_DROP;
	rc = opt_parse(&cmd, argc, argv, NULL);
	o->modes[M_WB_NBD] = o->uri && !modes;
	if (rc)
		return rc;
	o->idle_after = (unsigned)idle;
	o->rate = (unsigned)rate;
	o->rewrite = (unsigned)rewrite;
	o->unit_pages = (unsigned)units;
	if (modes && parse_modes(modes, o->modes))
		return CLI_USAGE;
	if (o->modes[M_WB_NBD] && !o->uri)
		return cli_usage("tierbench", "mode wb-nbd needs --backing-uri URI");
	if (hot) {
		char end;

		if (sscanf(hot, "%u/%u%c", &o->hot_access, &o->hot_pages, &end) != 2 ||
		    hot[0] < '0' || hot[0] > '9' || o->hot_access > 100 || !o->hot_pages ||
		    o->hot_pages > 100)
			return cli_usage("tierbench", "invalid --hot '%s' (A/P: percentages, "
					 "P more than 0)", hot);
	}
	if (o->page_size & (o->page_size - 1))
		return cli_usage("tierbench", "--page-size must be a power of two, not %zu",
				 o->page_size);
	if (o->unit_pages & (o->unit_pages - 1))
		return cli_usage("tierbench", "--unit-pages must be 1, 2, 4, 8 or 16, not %u",
				 o->unit_pages);
	if (o->unit_pages * o->page_size > ZM_STORE_UNIT_MAX_BYTES)
		return cli_usage("tierbench", "--unit-pages %u of %zu-byte pages: a unit is at "
				 "most %zu KiB", o->unit_pages, o->page_size,
				 ZM_STORE_UNIT_MAX_BYTES >> 10);
	if (!o->size)
		o->size = (o->limit ? o->limit : DEF_LIMIT) * DATA_PER_LIMIT;
	if (o->size / o->page_size < 2 || o->size / o->page_size >= UINT32_MAX)
		return cli_usage("tierbench", "--size must be 2 pages .. 2^32 pages, not %zu",
				 o->size);
	return 0;
}

static int check_codec(const char *name)
{
	struct zm_codec *c;
	int rc = zm_codec_create(name, 0, &c);

	if (rc) {
		fprintf(stderr, "zmem tierbench: codec '%s': %s\n", name,
			rc == -EOPNOTSUPP ? "not in this build" : "unknown name or level");
		return -1;
	}
	zm_codec_destroy(c);
	return 0;
}

/* wb-nbd's export, tried before any work: it answers and holds --size
 * (the store checks its size); 0, or CLI_FAIL after the message (the
 * library's log says what the connection met) */
static int probe_uri(const struct opts *o)
{
	struct zm_store_config cfg = {
		.nr_pages = (uint32_t)(o->size / o->page_size), .page_size = o->page_size,
		.codec = o->codec, .backing_uri = o->uri, .unit_pages = o->unit_pages,
	};
	struct zm_store *s;
	int rc = zm_store_create(&cfg, &s);

	if (rc)
		return cli_fail("tierbench", "--backing-uri %s: %s", o->uri, strerror(-rc));
	zm_store_destroy(s);
	return 0;
}

int cmd_tierbench(int argc, char **argv)
{
	static struct row rows[NMODES];
	struct summary s;
	struct bench_data d = { 0 };
	struct access *trace = NULL;
	uint8_t *hot = NULL;
	uint32_t *lat = NULL;
	uint64_t n, nlat, bad = 0;
	bool bad_plot = false;
	struct opts o;
	char human[32];
	int status = 1;

	status = parse(argc, argv, &o);
	if (status)
		return status < 0 ? CLI_OK : status;
	if (check_codec(o.codec) || check_codec(o.recompress) || bench_data_check(o.data))
		return CLI_USAGE;
	/* what cannot end well fails now, not after the data is made (check.h) */
	if (cli_check_data("tierbench", o.data) || cli_check_dir("tierbench", "--dir", o.dir) ||
	    cli_check_memory("tierbench", "--size", o.size, 1) ||
	    (o.modes[M_WB_NBD] && probe_uri(&o)))
		return CLI_FAIL;
	if ((status = cli_check_plot("tierbench", o.plot, o.json)))
		return status;
	status = 1;
	cli_progress("preparing %s of %s", zmi_human_bytes(o.size, human, sizeof(human)), o.data);
	if (bench_data_make(o.data, o.size, o.page_size, o.codec, &d))
		goto out;
	cli_progress_done();
	n = d.len / o.page_size;
	/* a data set may come out smaller than asked (a capture holds what
	 * the process has): the limit follows the data, not the request */
	if (!o.limit)
		o.limit = n / DATA_PER_LIMIT * o.page_size;
	if (n < 2) {
		fprintf(stderr, "zmem tierbench: %s: fewer than 2 pages\n", d.name);
		goto out;
	}
	if (!o.ops)
		o.ops = n * DEF_OPS_PER_PAGE;
	cli_note("%s: %llu pages, %s; seed %llu", d.name, (unsigned long long)n, d.note,
		 (unsigned long long)o.seed);
	trace = make_trace(&o, (uint32_t)n, &hot);
	/* the trace's gets, or the fill's puts in two phases (2 n) */
	nlat = o.ops > 2 * n ? o.ops : 2 * n;
	lat = malloc(nlat * sizeof(*lat));
	if (!trace || !lat) {
		fprintf(stderr, "zmem tierbench: out of memory for the trace\n");
		goto out;
	}
	memset(lat, 0, nlat * sizeof(*lat));  /* resident before any store's RSS */
	for (int m = 0; m < NMODES; m++) {
		if (!o.modes[m])
			continue;
		if (run_mode(&o, &d, trace, hot, (enum mode)m, lat, &rows[m]))
			goto out;
		bad += rows[m].mismatches + rows[m].errors;
	}
	summarize(&o, rows, n, &s);
	if (o.json)
		print_json(&o, &d, rows, n, &s);
	else
		print_table(&o, &d, rows, n, &s);
	if (o.plot) {
		int rc = write_plot(o.plot, &o, &d, rows);

		if (rc) {  /* the run asked for a plot it did not get: a failure */
			fprintf(stderr, "zmem tierbench: writing %s: %s\n", o.plot, strerror(-rc));
			bad_plot = true;
		} else if (!o.json)
			printf("\nplot: %s\n", o.plot);
	}
	if (bad)
		fprintf(stderr, "zmem tierbench: %llu pages read back wrong or failed\n",
			(unsigned long long)bad);
	status = bad || bad_plot ? 1 : 0;
out:
	cli_progress_done();
	bench_data_free(&d);
	free(trace), free(hot), free(lat);
	return status;
}
