/*
 * Statistics: striped counters, zm_store_stats(), zram's mm_stat line, a
 * readable table, and the whole-structure checker.
 *
 * Every put and every free changes a few counters; a single shared cache
 * line for them would bounce between CPUs on every page.  So each thread
 * is given a stripe (round robin, at its first call into any store) and
 * adds there with relaxed atomics; zm_store_stats() sums the stripes.
 *
 * The pool's own figures (memory held, metadata, compaction) come from
 * zm_pool_stats(), which walks the pool's classes; mem_used_max is a
 * high-water mark of those samples (see store.h for when they are taken).
 *
 * Locks: none of its own; the checker takes the tiering locks (in their
 * order: recomp_lock, wb_lock, mark_lock) so that the worker's passes
 * wait, then each slot lock in turn.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "base/units.h"
#include "store/store_internal.h"

static __thread unsigned tls_stripe; /* 1 + the thread's stripe; 0: none yet */
static unsigned next_stripe;         /* atomic */

struct zmi_store_stripe *zmi_store_thread_stripe(struct zm_store *s)
{
	unsigned i = tls_stripe;

	if (zmi_unlikely(!i)) {
		i = __atomic_fetch_add(&next_stripe, 1, __ATOMIC_RELAXED) %
		    ZM_STORE_STRIPES + 1;
		tls_stripe = i;
	}
	return &s->stripe[i - 1];
}

void zmi_store_account(struct zm_store *s, struct zmi_store_stripe *st, uint32_t info, uint32_t len,
		       int sign)
{
	unsigned kind = slot_kind(info);

	if (kind == ZM_STORE_SLOT_EMPTY)
		return;
	zmi_store_count(st, C_PAGES, sign);
	if (kind == ZM_STORE_SLOT_UNIT) {
		zmi_store_count(st, C_UNIT_PAGES, sign); /* the unit's bytes: unit.c */
		return;
	}
	if (kind == ZM_STORE_SLOT_SAME) {
		zmi_store_count(st, C_SAME, sign);
		return;
	}
	if (kind == ZM_STORE_SLOT_FILE) {
		zmi_store_count(st, C_FILE, sign);
		zmi_store_count(st, C_FILE_BYTES, (int64_t)sign * len);
		return;
	}
	zmi_store_count(st, C_OBJECTS, sign);
	zmi_store_count(st, C_COMPR, (int64_t)sign * len);
	__atomic_fetch_add(&st->hist[zmi_store_hist_bucket(s, len)], (uint64_t)(int64_t)sign,
			   __ATOMIC_RELAXED);
	if (kind == ZM_STORE_SLOT_HUGE) {
		zmi_store_count(st, C_HUGE, sign);
		if (sign > 0)
			zmi_store_count(st, C_HUGE_SINCE, 1);
		if (info & SLOT_FLAG)
			zmi_store_count(st, C_INCOMPRESSIBLE, sign);
	} else if (info & SLOT_SEC) {
		zmi_store_count(st, C_SECONDARY, sign);
	}
}

uint64_t zmi_store_counter_sum(const struct zm_store *s, enum zmi_store_counter c)
{
	uint64_t v = 0;

	for (int i = 0; i < ZM_STORE_STRIPES; i++)
		v += __atomic_load_n(&s->stripe[i].c[c], __ATOMIC_RELAXED);
	return v;
}

static void raise_max(uint64_t *max, uint64_t v)
{
	uint64_t cur = __atomic_load_n(max, __ATOMIC_RELAXED);

	while (v > cur && !__atomic_compare_exchange_n(max, &cur, v, true,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void zmi_store_sample_used(struct zm_store *s)
{
	struct zm_pool_stats ps;

	zm_pool_stats(s->pool, &ps);
	raise_max(&s->used_max, ps.pool_bytes);
}

static void fill_stats(struct zm_store *s, struct zm_store_stats *st);

int zm_store_stats_sized(struct zm_store *s, struct zm_store_stats *out, size_t size)
{
	struct zm_store_stats st;

	if (!s)
		return -EINVAL;
	fill_stats(s, &st);
	return zmi_struct_out(out, size, ZMI_STORE_STATS_MIN, &st, sizeof(st));
}

static void fill_stats(struct zm_store *s, struct zm_store_stats *st)
{
	struct zm_pool_stats ps;

	memset(st, 0, sizeof(*st));
	zm_pool_stats(s->pool, &ps);
	raise_max(&s->used_max, ps.pool_bytes);
	raise_max(&s->used_max, ps.pages_max * ps.page_size);

	st->pages_stored = zmi_store_counter_sum(s, C_PAGES);
	st->orig_data_size = st->pages_stored * s->page_size;
	st->compr_data_size = zmi_store_counter_sum(s, C_COMPR);
	st->mem_used_total = ps.pool_bytes;
	st->mem_limit = __atomic_load_n(&s->limit_bytes, __ATOMIC_RELAXED);
	st->mem_used_max = __atomic_load_n(&s->used_max, __ATOMIC_RELAXED);
	st->same_pages = zmi_store_counter_sum(s, C_SAME);
	st->pages_compacted = ps.pages_compacted;
	st->huge_pages = zmi_store_counter_sum(s, C_HUGE);
	st->huge_pages_since = zmi_store_counter_sum(s, C_HUGE_SINCE);
	st->failed_reads = zmi_store_counter_sum(s, C_FAILED_READS);
	st->failed_writes = zmi_store_counter_sum(s, C_FAILED_WRITES);
	st->reject_zsize = zmi_store_counter_sum(s, C_REJECT_ZSIZE);
	st->reject_mean = zmi_store_counter_sum(s, C_REJECT_MEAN);
	st->limit_fails = zmi_store_counter_sum(s, C_LIMIT_FAILS);
	st->puts = zmi_store_counter_sum(s, C_PUTS);
	st->gets = zmi_store_counter_sum(s, C_GETS);
	st->discards = zmi_store_counter_sum(s, C_DISCARDS);
	st->pool_meta_bytes = ps.meta_bytes;
	st->store_meta_bytes = zmi_lazy_bytes(&s->slot_arr) + zmi_lazy_bytes(&s->same_arr) +
			       sizeof(*s);
	st->store_meta_bytes += zmi_lazy_bytes(&s->age_arr) + zmi_store_counter_sum(s, C_UNIT_META);
	st->pool_objects = ps.objects;
	st->recompressed_pages = zmi_store_counter_sum(s, C_RECOMP);
	st->recompress_saved = zmi_store_counter_sum(s, C_RECOMP_SAVED);
	st->recompress_tried = zmi_store_counter_sum(s, C_RECOMP_TRIED);
	st->secondary_pages = zmi_store_counter_sum(s, C_SECONDARY);
	st->incompressible_pages = zmi_store_counter_sum(s, C_INCOMPRESSIBLE);
	st->bd_count = zmi_store_counter_sum(s, C_FILE);
	st->bd_bytes = zmi_store_counter_sum(s, C_FILE_BYTES);
	st->bd_reads = zmi_store_counter_sum(s, C_BD_READS);
	st->bd_writes = zmi_store_counter_sum(s, C_BD_WRITES);
	st->writeback_failures = zmi_store_counter_sum(s, C_WB_FAILS);
	st->pool_errors = zmi_store_counter_sum(s, C_POOL_ERRORS);
	st->writeback_left = !zmi_store_has_file(s) ? 0 :
			     __atomic_load_n(&s->wb_left, __ATOMIC_RELAXED);
	st->idle_pages = __atomic_load_n(&s->idle_count, __ATOMIC_RELAXED);
	st->units = zmi_store_counter_sum(s, C_UNITS);
	st->unit_pages = zmi_store_counter_sum(s, C_UNIT_PAGES);
	st->unit_bytes = zmi_store_counter_sum(s, C_UNIT_BYTES);
	st->unit_saved = zmi_store_counter_sum(s, C_UNIT_SAVED);
	st->units_formed = zmi_store_counter_sum(s, C_UNITS_FORMED);
	st->units_declined = zmi_store_counter_sum(s, C_UNITS_DECLINED);
	st->unit_splits = zmi_store_counter_sum(s, C_UNIT_SPLITS);
	st->backing_cache_mode = zmi_store_has_file(s) ? (uint64_t)s->bcache : ZM_STORE_CACHE_NONE;
	if (zmi_store_has_file(s))
		zmi_store_backing_usage(s, &st->file_alloc_bytes, &st->file_live_bytes);
	st->bd_lost = s->nbd ? zmi_store_nbd_lost(s) : 0;
	st->file_clean_runs = zmi_store_counter_sum(s, C_CLEAN_RUNS);
	st->file_clean_bytes = zmi_store_counter_sum(s, C_CLEAN_BYTES);
	st->writeback_waits = zmi_store_counter_sum(s, C_WB_WAITS);
	st->writeback_wait_ns = zmi_store_counter_sum(s, C_WB_WAIT_NS);
	st->writer_wakeups = zmi_store_counter_sum(s, C_WB_WAKEUPS);
	st->reclaim_pool_full = zmi_store_counter_sum(s, C_RECLAIM_POOL);
	st->reclaim_sync = zmi_store_counter_sum(s, C_RECLAIM_SYNC);
	st->nr_pages = s->nr_pages;
	st->page_size = s->page_size;
	for (int i = 0; i < ZM_STORE_STRIPES; i++)
		for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++)
			st->hist[b] += __atomic_load_n(&s->stripe[i].hist[b], __ATOMIC_RELAXED);
}

/* The caller's stats, as this library's struct: fields it lacks read 0.
 * false for a NULL or too small struct, or no stream. */
static bool stats_in(struct zm_store_stats *st, const struct zm_store_stats *in, size_t size,
		     FILE *f)
{
	if (!in || !f || size < ZMI_STORE_STATS_MIN)
		return false;
	memset(st, 0, sizeof(*st));
	memcpy(st, in, size < sizeof(*st) ? size : sizeof(*st));
	return true;
}

void zm_store_print_mm_stat_sized(const struct zm_store_stats *in, size_t size, FILE *f)
{
	struct zm_store_stats copy, *st = &copy;

	if (!stats_in(st, in, size, f))
		return;
	/* zram's format: mm_stat_show() in drivers/block/zram, widths of 8 */
	fprintf(f, "%8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64
		" %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
		st->orig_data_size, st->compr_data_size, st->mem_used_total,
		st->mem_limit, st->mem_used_max, st->same_pages,
		st->pages_compacted, st->huge_pages, st->huge_pages_since);
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

void zm_store_print_stats_sized(const struct zm_store_stats *in, size_t size, FILE *f)
{
	struct zm_store_stats copy, *st = &copy;
	uint64_t hmax = 0;
	size_t step;
	char h[3][32];
#define H(i, v) zmi_human_bytes((v), h[i], sizeof(h[i]))

	if (!stats_in(st, in, size, f))
		return;
	step = st->page_size / ZM_STORE_HIST_BUCKETS;

	/* sizes as people read them (zmi_human_bytes); the mm_stat line and
	 * zm_store_stats() keep bytes */
	fprintf(f, "%-24s %14" PRIu64 "  of %" PRIu64 " slots\n", "pages_stored",
		st->pages_stored, st->nr_pages);
	fprintf(f, "%-24s %14s\n", "orig_data_size", H(0, st->orig_data_size));
	fprintf(f, "%-24s %14s  (%.2f%% of orig)\n", "compr_data_size",
		H(0, st->compr_data_size), 100 * ratio(st->compr_data_size, st->orig_data_size));
	fprintf(f, "%-24s %14s  (%.4f x compr)\n", "mem_used_total",
		H(0, st->mem_used_total), ratio(st->mem_used_total, st->compr_data_size));
	fprintf(f, "%-24s %14s\n", "mem_limit", st->mem_limit ? H(0, st->mem_limit) : "none");
	fprintf(f, "%-24s %14s\n", "mem_used_max", H(0, st->mem_used_max));
	fprintf(f, "%-24s %14" PRIu64 "  pages\n", "same_pages", st->same_pages);
	fprintf(f, "%-24s %14" PRIu64 "  pages\n", "pages_compacted", st->pages_compacted);
	fprintf(f, "%-24s %14" PRIu64 "  pages (%" PRIu64 " ever)\n", "huge_pages",
		st->huge_pages, st->huge_pages_since);
	fprintf(f, "%-24s %14s  (pool %s + store %s)\n", "metadata",
		H(0, st->pool_meta_bytes + st->store_meta_bytes), H(1, st->pool_meta_bytes),
		H(2, st->store_meta_bytes));
	fprintf(f, "%-24s %14" PRIu64 " / %" PRIu64 " / %" PRIu64 "\n",
		"puts/gets/discards", st->puts, st->gets, st->discards);
	fprintf(f, "%-24s %14" PRIu64 " / %" PRIu64 "\n", "failed rd/wr",
		st->failed_reads, st->failed_writes);
	fprintf(f, "%-24s %14" PRIu64 " / %" PRIu64 " / %" PRIu64 "\n",
		"rejects size/mean/limit", st->reject_zsize, st->reject_mean,
		st->limit_fails);
	if (st->recompress_tried || st->secondary_pages)
		fprintf(f, "%-24s %14" PRIu64 "  pages (%" PRIu64 " tried, %s saved; %" PRIu64
			" in the pool now, %" PRIu64 " incompressible)\n", "recompressed",
			st->recompressed_pages, st->recompress_tried, H(0, st->recompress_saved),
			st->secondary_pages, st->incompressible_pages);
	if (st->bd_count || st->bd_writes || st->writeback_failures)
		fprintf(f, "%-24s %14" PRIu64 "  pages (%" PRIu64 " read, %" PRIu64 " written; %s"
			" there, %" PRIu64 " failures)\n", "on the backing file",
			st->bd_count, st->bd_reads, st->bd_writes, H(0, st->bd_bytes),
			st->writeback_failures);
	if (st->bd_lost)
		fprintf(f, "%-24s %14" PRIu64 "  pages (the NBD export restarted without "
			"them: they read as errors)\n", "lost on the backing store", st->bd_lost);
	if (st->writeback_waits || st->writer_wakeups)
		fprintf(f, "%-24s %14" PRIu64 "  puts (%.1f us each; %" PRIu64 " writer rounds)\n",
			"waited for room", st->writeback_waits,
			st->writeback_waits ? (double)st->writeback_wait_ns / 1e3 /
						      (double)st->writeback_waits : 0.0,
			st->writer_wakeups);
	if (st->reclaim_pool_full || st->reclaim_sync)
		fprintf(f, "%-24s %14" PRIu64 "  puts found the pool's pages full (%" PRIu64
			" reclaims by the put itself)\n", "pool full", st->reclaim_pool_full,
			st->reclaim_sync);
	if (st->bd_count || st->bd_writes || st->writeback_failures)
		fprintf(f, "%-24s %14s\n", "backing page cache",
			st->backing_cache_mode == ZM_STORE_CACHE_DROP	  ? "dropped"
			: st->backing_cache_mode == ZM_STORE_CACHE_DIRECT ? "direct"
									  : "kept");
	if (st->file_alloc_bytes || st->file_clean_runs)
		fprintf(f, "%-24s %14s  for %s live (cleaner: %" PRIu64 " runs moved %s)\n",
			"backing file blocks", H(0, st->file_alloc_bytes), H(1, st->file_live_bytes),
			st->file_clean_runs, H(2, st->file_clean_bytes));
	if (st->units || st->units_formed || st->units_declined)
		fprintf(f, "%-24s %14" PRIu64 "  holding %" PRIu64 " pages in %s, %s saved (%"
			PRIu64 " formed, %" PRIu64 " declined, %" PRIu64 " split)\n", "units",
			st->units, st->unit_pages, H(0, st->unit_bytes), H(1, st->unit_saved),
			st->units_formed, st->units_declined, st->unit_splits);
	if (st->pool_errors)
		fprintf(f, "%-24s %14" PRIu64 "  (calls failed with -EIO)\n", "pool errors",
			st->pool_errors);
	for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++)
		if (st->hist[b] > hmax)
			hmax = st->hist[b];
	if (!hmax)
		return;
	fprintf(f, "compressed sizes (pages in the pool):\n");
	for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++) {
		int bar = (int)((st->hist[b] * 50 + hmax - 1) / hmax);

		if (!st->hist[b])
			continue;
		fprintf(f, "  %5zu..%-5zu %10" PRIu64 " %.*s\n", b * step + 1, (b + 1) * step,
			st->hist[b], bar, "##################################################");
	}
#undef H
}


int zm_store_check(struct zm_store *s)
{
	uint64_t pages = 0, same = 0, huge = 0, objs = 0, compr = 0, sec = 0, incomp = 0;
	uint64_t files = 0, file_bytes = 0, units = 0, unit_pages = 0, unit_bytes = 0;
	uint64_t hist[ZM_STORE_HIST_BUCKETS] = { 0 };
	int bad = 0;

	if (!s)
		return -EINVAL;
	/* the worker's tiering passes (tier.c) wait: they change slots and
	 * counters as a caller's thread would */
	pthread_mutex_lock(&s->recomp_lock);
	pthread_mutex_lock(&s->wb_lock);
	pthread_mutex_lock(&s->mark_lock);
	for (uint64_t i = zmi_store_slot_next_touched(s, 0, s->nr_pages); i < s->nr_pages;
	     i = zmi_store_slot_next_touched(s, i + 1, s->nr_pages)) {
		uint32_t info = zmi_store_slot_lock(s, i);
		unsigned kind = slot_kind(info);
		uint32_t len = zmi_store_slot_len(s, i, info);
		uint64_t rec = kind == ZM_STORE_SLOT_FILE ? s->same_val[i] : 0;
		uint64_t rec_unit = kind == ZM_STORE_SLOT_UNIT ? s->same_val[i] : 0;
		uint64_t h = zm_pool_key_handle(s->pool, i);

		zmi_store_slot_unlock(s, i, info, info);
		if (kind == ZM_STORE_SLOT_EMPTY) {
			if (h || info)
				ZM_CHECK_FAIL("store: slot %" PRIu64 " empty with handle %#" PRIx64
				     " info %#x", i, h, info);
			continue;
		}
		pages++;
		if (kind == ZM_STORE_SLOT_UNIT) {
			struct zmi_store_unit *u = (struct zmi_store_unit *)(uintptr_t)rec_unit;
			uint64_t k = i - u->base;

			unit_pages++;
			/* its pages are marked idle as single pages are */
			if (h || i < u->base || k >= u->span ||
			    !(u->live >> k & 1) || !u->nchunks || u->len < u->nchunks ||
			    u->nchunks > u->nalloc || (u->sec && !s->codec2) ||
			    (u->file && !zmi_store_backing_any(s)) || u->moving) {
				ZM_CHECK_FAIL("store: slot %" PRIu64 " of unit %p (base %" PRIu64
					      " span %u live %#x) is not one of its pages", i,
					      (void *)u, u->base, u->span, u->live);
				continue;
			}
			files += u->file;   /* its pages on file count in bd_count */
			if (k != (uint64_t)__builtin_ctz(u->live))
				continue;   /* the unit is counted at its first live page */
			units++;
			unit_bytes += u->len;
			if (u->file) {
				file_bytes += u->len;
			} else {
				objs += u->nchunks;
				compr += u->len;
			}
			if (u->refs != __builtin_popcount(u->live))
				ZM_CHECK_FAIL("store: unit %p has %u references for live pages %#x",
					      (void *)u, u->refs, u->live);
			for (unsigned c = 0; c < u->nchunks && !u->file; c++)
				if (!u->chunk[c] || zm_pool_obj_size(s->pool, u->chunk[c]) <
				    u->len / u->nchunks)
					ZM_CHECK_FAIL("store: unit %p chunk %u handle %#" PRIx64
						      " is bad or short", (void *)u, c, u->chunk[c]);
			continue;
		}
		if (kind == ZM_STORE_SLOT_SAME || kind == ZM_STORE_SLOT_FILE) {
			if (h || (info & SLOT_IDLE))
				ZM_CHECK_FAIL("store: slot %" PRIu64 " of kind %u has handle %#"
					      PRIx64 " info %#x", i, kind, h, info);
		}
		if (kind == ZM_STORE_SLOT_SAME) {
			same++;
			continue;
		}
		if (kind == ZM_STORE_SLOT_FILE) {
			files++;
			file_bytes += len;
			if (!len || len > s->page_size || ((rec & FILE_RAW) && len != s->page_size) ||
			    ((rec & FILE_SEC) && !s->codec2) || !zmi_store_backing_any(s))
				ZM_CHECK_FAIL("store: slot %" PRIu64 " on file has record %#" PRIx64,
					      i, rec);
			continue;
		}
		objs++;
		compr += len;
		if (!len || len > s->page_size ||
		    (kind == ZM_STORE_SLOT_POOL && len >= s->huge_size) ||
		    ((info & SLOT_SEC) && kind == ZM_STORE_SLOT_POOL && !s->codec2)) {
			ZM_CHECK_FAIL("store: slot %" PRIu64 " kind %u info %#x has length %u", i,
				      kind, info, len);
			continue;
		}
		hist[zmi_store_hist_bucket(s, len)]++;
		if (kind == ZM_STORE_SLOT_HUGE) {
			huge++;
			incomp += !!(info & SLOT_FLAG);
		} else {
			sec += !!(info & SLOT_SEC);
		}
		if (!h || zm_pool_obj_size(s->pool, h) < len)
			ZM_CHECK_FAIL("store: slot %" PRIu64 " handle %#" PRIx64 " is bad or shorter "
			     "than %u", i, h, len);
	}
	if (sec != zmi_store_counter_sum(s, C_SECONDARY) ||
	    incomp != zmi_store_counter_sum(s, C_INCOMPRESSIBLE) ||
	    files != zmi_store_counter_sum(s, C_FILE) ||
	    file_bytes != zmi_store_counter_sum(s, C_FILE_BYTES))
		ZM_CHECK_FAIL("store: slots hold %" PRIu64 " secondary, %" PRIu64 " incompressible, %"
			      PRIu64 " on file (%" PRIu64 " bytes); counters say %" PRIu64 ", %"
			      PRIu64 ", %" PRIu64 " (%" PRIu64 ")", sec, incomp, files, file_bytes,
			      zmi_store_counter_sum(s, C_SECONDARY),
			      zmi_store_counter_sum(s, C_INCOMPRESSIBLE),
			      zmi_store_counter_sum(s, C_FILE),
			      zmi_store_counter_sum(s, C_FILE_BYTES));
	if (pages != zmi_store_counter_sum(s, C_PAGES) ||
	    same != zmi_store_counter_sum(s, C_SAME) ||
	    huge != zmi_store_counter_sum(s, C_HUGE) ||
	    objs != zmi_store_counter_sum(s, C_OBJECTS) ||
	    compr != zmi_store_counter_sum(s, C_COMPR))
		ZM_CHECK_FAIL("store: slots hold %" PRIu64 " pages (%" PRIu64 " same, %" PRIu64
		     " huge, %" PRIu64 " objects, %" PRIu64 " bytes); counters say %" PRIu64
		     " (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ")",
		     pages, same, huge, objs, compr, zmi_store_counter_sum(s, C_PAGES),
		     zmi_store_counter_sum(s, C_SAME), zmi_store_counter_sum(s, C_HUGE),
		     zmi_store_counter_sum(s, C_OBJECTS), zmi_store_counter_sum(s, C_COMPR));
	if (units != zmi_store_counter_sum(s, C_UNITS) ||
	    unit_pages != zmi_store_counter_sum(s, C_UNIT_PAGES) ||
	    unit_bytes != zmi_store_counter_sum(s, C_UNIT_BYTES))
		ZM_CHECK_FAIL("store: slots hold %" PRIu64 " units of %" PRIu64 " pages in %" PRIu64
			      " bytes; counters say %" PRIu64 ", %" PRIu64 ", %" PRIu64, units,
			      unit_pages, unit_bytes, zmi_store_counter_sum(s, C_UNITS),
			      zmi_store_counter_sum(s, C_UNIT_PAGES),
			      zmi_store_counter_sum(s, C_UNIT_BYTES));
	for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++) {
		uint64_t v = 0;

		for (int i = 0; i < ZM_STORE_STRIPES; i++)
			v += __atomic_load_n(&s->stripe[i].hist[b], __ATOMIC_RELAXED);
		if (v != hist[b])
			ZM_CHECK_FAIL("store: histogram bucket %d counts %" PRIu64 ", slots hold %"
			     PRIu64, b, v, hist[b]);
	}
	if (zm_pool_check(s->pool))
		bad = 1;
	pthread_mutex_unlock(&s->mark_lock);
	pthread_mutex_unlock(&s->wb_lock);
	pthread_mutex_unlock(&s->recomp_lock);
	return bad ? -EUCLEAN : 0;
}
