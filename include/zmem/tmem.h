/*
 * zm_tmem: zcache's pools of compressed pages ("transcendent memory").
 *
 * A tmem instance holds pools of pages keyed by (pool, object id, index)
 * and keeps them compressed in memory under one budget that all its pools
 * share.  A pool is one of two kinds, as the two kernel hooks zcache sat
 * under needed:
 *
 *   PERSISTENT  (frontswap: pages being swapped out) a put succeeds or is
 *               refused at once; a stored page comes back exactly, every
 *               time, until it is flushed;
 *   EPHEMERAL   (cleancache: clean pages dropped from a page cache) a put
 *               may be dropped, any page may be evicted at any time to
 *               make room (for persistent puts first), a get may miss;
 *               but a get never returns anything but the data last put
 *               under its key.
 *
 * Keys.  An object id is 64 bits, an index 32.  (tmem's object ids were
 * three 64-bit words, to hold a file handle of any filesystem.  64 bits
 * hold an inode number, or a swap device and offset, which is what
 * programs name pages by; a caller with longer names keeps a table of
 * its own from them to ids.  Each stored page's record is 16 bytes
 * smaller for it.)  Put and get take a length of 1 .. the pool's page
 * size: short values are kept with their length and come back with it.
 *
 * A put to a key that holds a page replaces it.  A put that fails for
 * any reason but bad arguments (-EINVAL) removes the page its key held:
 * the caller knows its data changed, and must never be given the old data
 * back (tmem's rule).
 *
 * Policy (zcache's; the defaults are its own): a page compressing to
 * more than max_zsize is refused; so is one compressing to more than
 * max_mean_zsize while the mean compressed size of the pool's pages is
 * above it already; persistent pages may take at most persistent_pct
 * percent of the budget.  Refusals are counted by cause.
 *
 * Eviction frees memory, not just objects.  The instance keeps its
 * ephemeral pages in a separate pool (pool.h) from its persistent ones,
 * both on one set of pages limited to the budget, and in one list of
 * least recently used pages (a get marks a page used; the list gives each
 * marked page a second chance).  When a put finds no room, the coldest
 * ephemeral page is chosen and, where the backend has units (pool.h:
 * zm_pool_unit), its whole unit is evicted with it: zbud's page with both
 * buddies, zsmalloc's zspage with every object on it.  Other backends
 * evict page after page until the put fits.  zm_tmem_stats counts the
 * objects evicted and the pages that freed.  docs/tmem.md has the design
 * and the measurements.
 *
 * Memory.  Each stored page costs its compressed bytes in the pool (an
 * ephemeral one 16 bytes more: its key, so that eviction can find the
 * record of every object of a unit) and a record of 48 bytes outside the
 * budget (meta_bytes counts those).
 *
 * Concurrency: every call may be made from any thread at once, on the
 * same keys or others; a pool's pages are spread over ZM_TMEM_SHARDS
 * locks by (object id, index / 256), so threads working on different
 * parts of one object do not wait for each other.  zm_tmem_destroy()
 * must not race with anything, nor zm_tmem_pool_destroy() with calls on
 * that pool.  Lock order:
 *
 *     pool table -> evict_lock -> shard lock -> object lock -> list lock
 *     -> the pool's
 *
 * (no call holds two shard locks; src/tmem/tmem_internal.h has the
 * rest).
 *
 * Errors follow zmem.h; besides those:
 *     ENOENT   a get or flush found no page under the key
 *     ENOSPC   no room: the budget is full and nothing could be evicted,
 *              or the persistent share is spent
 *     E2BIG    refused by max_zsize or max_mean_zsize
 * An unknown or destroyed pool id, a length of 0 or above the pool's page
 * size, a NULL buffer or instance: -EINVAL.
 */
#ifndef ZMEM_TMEM_H
#define ZMEM_TMEM_H

#include <stddef.h>
#include <stdint.h>

#include <zmem/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pools an instance may hold at once. */
#define ZM_TMEM_MAX_POOLS 64
/* Locks each pool's pages are spread over. */
#define ZM_TMEM_SHARDS 64
/* Buckets of the compressed-size histogram: bucket i counts the stored
 * pages compressed to (i * page_size / 64, (i + 1) * page_size / 64]
 * bytes of their pool's page size. */
#define ZM_TMEM_HIST_BUCKETS 64

enum zm_tmem_kind {
	ZM_TMEM_EPHEMERAL = 1,
	ZM_TMEM_PERSISTENT = 2,
};

struct zm_tmem_config {
	size_t budget_bytes;      /* memory for the pages of every pool (the
				     backend's pages); 0 = 64 MiB */
	const char *allocator;    /* pool backend (pool.h); NULL = "zsmalloc" */
	const char *codec;        /* codec name (codec.h), may carry ":LEVEL";
				     NULL = "lz4" */
	int codec_level;          /* 0 = the codec's default */
	size_t page_size;         /* the backend's page, and the largest page
				     a pool may have; power of two,
				     ZM_PAGE_SIZE_MIN .. ZM_PAGE_SIZE_MAX;
				     0 = 4096 */
	unsigned persistent_pct;  /* the persistent pool's pages may hold at
				     most this percent of the budget (counted
				     every 32 persistent puts, so it may run
				     over by a few pages); 0 = 75, zcache's
				     default; 100 = no cap */
};

struct zm_tmem_pool_config {
	enum zm_tmem_kind kind;   /* required */
	size_t page_size;         /* largest value a put may store; 0 = the
				     instance's page size, which it may not
				     exceed */
	int exclusive_gets;       /* ephemeral: a hit removes the page (the
				     caller holds it now: zcache's exclusive
				     gets); persistent pools refuse it */
	size_t max_zsize;         /* refuse pages compressing to more; 0 =
				     page_size * 7 / 8 (zcache's
				     zv_max_zsize); at most page_size, and
				     in an ephemeral pool at most the
				     instance's page size - 16 (its key) */
	size_t max_mean_zsize;    /* refuse pages compressing to more while
				     the pool's mean is above it; 0 =
				     page_size * 5 / 8 (zv_max_mean_zsize);
				     SIZE_MAX = off */
};

struct zm_tmem_stats {
	uint64_t puts;             /* put calls */
	uint64_t puts_stored;      /* ... that stored their page */
	uint64_t gets;             /* get calls */
	uint64_t hits;             /* ... that found their page */
	uint64_t misses;           /* gets - hits */
	uint64_t flush_pages;      /* pages removed by zm_tmem_flush_page */
	uint64_t flush_objects;    /* zm_tmem_flush_object calls that removed
				      at least one page */
	uint64_t flushed_pages;    /* pages removed by every flush, pools
				      included */
	uint64_t evicted_objects;  /* ephemeral pages evicted for room */
	uint64_t evicted_pages;    /* backend pages those evictions freed */
	uint64_t evictions;        /* eviction steps: a unit, or (backends
				      without units) one page */
	uint64_t refused_zsize;    /* puts refused: compressed > max_zsize */
	uint64_t refused_mean;     /* ... by max_mean_zsize */
	uint64_t refused_share;    /* ... persistent share of the budget full */
	uint64_t refused_full;     /* ... no room, nothing left to evict */
	uint64_t dropped;          /* ephemeral puts not stored, every cause
				      (the refusals above included) */
	uint64_t ephemeral_pages;  /* pages stored now, by kind */
	uint64_t persistent_pages;
	uint64_t orig_bytes;       /* their lengths */
	uint64_t compr_bytes;      /* their compressed lengths */
	uint64_t pool_pages;       /* backend pages the two pools hold */
	uint64_t pool_bytes;       /* pool_pages * page_size (the malloc
				      backend: its bytes) */
	uint64_t meta_bytes;       /* the pools' metadata and the records */
	uint64_t budget_bytes;
	uint64_t hist[ZM_TMEM_HIST_BUCKETS];
	const char *allocator;     /* the backend */
	const char *evicts;        /* what one eviction step frees: "page"
				      (zbud), "zspage" (zsmalloc), "object"
				      (the others) */
};

struct zm_tmem;

/* Create an instance.  0 and *out, or -EINVAL (unknown allocator or
 * codec, bad page size, persistent_pct above 100, a budget beyond the
 * pages layer's arena of 2^32 pages, NULL out), -E2BIG (a
 * config with fields this library does not know set), -EMFILE (pool.h:
 * too many pools live), -ENOMEM.  cfg NULL = the defaults.  Cost: two
 * pools' worth of address space (pool.h), and about 32 KiB resident
 * until used (15 KiB of it heap; docs/results/2026-12-04-empty-tmem.md);
 * no thread of its own. */
ZM_API int zm_tmem_create_sized(const struct zm_tmem_config *cfg, size_t cfg_size,
				struct zm_tmem **out);
#define zm_tmem_create(cfg, out) \
	zm_tmem_create_sized((cfg), sizeof(struct zm_tmem_config), (out))

/* Destroy the instance with every pool and page.  Accepts NULL.
 * Destroying an instance twice, or anything that is not a live one, is
 * undefined behaviour; ZM_DEBUG builds name the call and the pointer in
 * a message and return without touching it. */
ZM_API void zm_tmem_destroy(struct zm_tmem *t);

/* Create a pool; returns its id (> 0), or -EINVAL (bad kind, page size,
 * policy, exclusive_gets on a persistent pool), -E2BIG, -EMFILE (
 * ZM_TMEM_MAX_POOLS pools already), -ENOMEM.  Ids are not reused soon:
 * the id of a destroyed pool is refused. */
ZM_API int zm_tmem_pool_create_sized(struct zm_tmem *t, const struct zm_tmem_pool_config *cfg,
				     size_t cfg_size);
#define zm_tmem_pool_create(t, cfg) \
	zm_tmem_pool_create_sized((t), (cfg), sizeof(struct zm_tmem_pool_config))

/* Flush every page of the pool and destroy it.  0 or -EINVAL. */
ZM_API int zm_tmem_pool_destroy(struct zm_tmem *t, int pool);

/* Store len bytes (1 .. the pool's page size) under (oid, index).
 * 0, or -ENOSPC, -E2BIG (refused: see above; the key holds nothing
 * afterwards), -EINVAL, -ENOMEM. */
ZM_API int zm_tmem_put(struct zm_tmem *t, int pool, uint64_t oid, uint32_t index,
		       const void *data, size_t len);

/* Copy the page under (oid, index) into buf (cap bytes, at least the
 * length stored).  Returns the length, or -ENOENT (a miss), -ENOSPC (cap
 * too small; nothing is removed), -EIO (corrupt data: the page is
 * removed), -EINVAL. */
ZM_API int zm_tmem_get(struct zm_tmem *t, int pool, uint64_t oid, uint32_t index,
		       void *buf, size_t cap);

/* Remove one page, every page of an object, or every page of a pool.
 * flush_page: 0 or -ENOENT; flush_object: the pages removed (0 if none);
 * flush_pool: the pages removed.  -EINVAL for a bad pool. */
ZM_API int zm_tmem_flush_page(struct zm_tmem *t, int pool, uint64_t oid, uint32_t index);
ZM_API long zm_tmem_flush_object(struct zm_tmem *t, int pool, uint64_t oid);
ZM_API long zm_tmem_flush_pool(struct zm_tmem *t, int pool);

/* Statistics of one pool, or (pool 0) of the whole instance.  Counters
 * of calls and pages are the pool's (or all pools', destroyed ones
 * included); evictions, evicted_pages, pool_pages, pool_bytes, meta_bytes
 * and budget_bytes are the instance's either way (an eviction step may
 * free objects of several pools).  0 or -EINVAL. */
ZM_API int zm_tmem_stats_sized(struct zm_tmem *t, int pool, struct zm_tmem_stats *st,
			       size_t st_size);
#define zm_tmem_stats(t, pool, st) \
	zm_tmem_stats_sized((t), (pool), (st), sizeof(struct zm_tmem_stats))

/* Whole-structure check: every record against its pool object (its key
 * header, its length), the counters against the records.  0, or -EUCLEAN
 * after saying what is wrong.  Call while no other thread uses t. */
ZM_API int zm_tmem_check(struct zm_tmem *t);

#ifdef __cplusplus
}
#endif
#endif
